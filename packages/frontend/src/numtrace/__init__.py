"""numtrace: trace NumPy functions and modules into typed graphs and run them on fast backends.

``trace(func, example_inputs)`` runs ``func`` once on traced arrays, records every
array operation into a ``numtrace_ir.Graph``, checks the trace, and returns a
callable that runs the graph on a backend (``reference``, ``cpu``, ``triton``).
"""

from importlib import metadata as _metadata

from numtrace_ir import GuardError

from . import nn
from .api import trace, trace_module
from .backends import available_backends, installed_backends
from .errors import TracerWarning, TracingCheckError
from .module import Module, Parameter
from .traced import TracedFunction
from .traced_module import TracedModule, load
from .tracer import is_tracing

try:
    __version__ = _metadata.version("numtrace")
except _metadata.PackageNotFoundError:  # not installed (a source checkout on sys.path)
    __version__ = "0+unknown"

__all__ = [
    "GuardError",
    "Module",
    "Parameter",
    "TracedFunction",
    "TracedModule",
    "TracerWarning",
    "TracingCheckError",
    "available_backends",
    "installed_backends",
    "is_tracing",
    "load",
    "nn",
    "trace",
    "trace_module",
]
