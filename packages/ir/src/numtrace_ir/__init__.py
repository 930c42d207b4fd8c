"""numtrace's intermediate representation: typed SSA graphs and the op registry."""

# Importing `ops` registers every op: the op modules sit above the registry, so the package loads them.
from numtrace_ir import dot, ops, passes, registry, serialize  # noqa: F401
from numtrace_ir.backend import Backend, Executable
from numtrace_ir.call_spec import CallSpec, results_of, run_call
from numtrace_ir.canonical import canonical_text, canonicalize, graphs_equal
from numtrace_ir.dims import ShapeError
from numtrace_ir.graph import Graph, LintError, Node, Value
from numtrace_ir.guards import GuardError
from numtrace_ir.locations import display_location
from numtrace_ir.parser import ParseError, parse
from numtrace_ir.printer import format_graph
from numtrace_ir.registry import OpDef, UnknownOpError
from numtrace_ir.serialize import FormatError
from numtrace_ir.specialize import specialize
from numtrace_ir.types import (
    DTYPE_NAMES,
    ScalarType,
    TensorType,
    TupleType,
    Type,
    dtype_from_name,
    dtype_name,
)

__all__ = [
    "Backend",
    "CallSpec",
    "Executable",
    "DTYPE_NAMES",
    "FormatError",
    "Graph",
    "GuardError",
    "LintError",
    "Node",
    "OpDef",
    "ParseError",
    "ScalarType",
    "ShapeError",
    "TensorType",
    "TupleType",
    "Type",
    "UnknownOpError",
    "Value",
    "canonical_text",
    "canonicalize",
    "display_location",
    "dot",
    "dtype_from_name",
    "dtype_name",
    "format_graph",
    "graphs_equal",
    "parse",
    "passes",
    "registry",
    "results_of",
    "run_call",
    "serialize",
    "specialize",
]
