"""The `cpu` backend object the frontend loads through the ``numtrace.backends`` entry point."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence

from numtrace_ir import passes, specialize
from numtrace_ir.call_spec import CallSpec
from numtrace_ir.fp_errors import Reporter, set_by_graph, shape_warnings
from numtrace_ir.graph import Graph
from numtrace_ir.interpreter import Interpreter
from numtrace_ir.types import TensorType, Type

from numtrace_cpu.classify import LOWERED
from numtrace_cpu.executable import Executable
from numtrace_cpu.isa import ISA
from numtrace_cpu.joins import write_assigned_in_place, write_parts_in_place
from numtrace_cpu.lowering import lower
from numtrace_cpu.planner import plan_buffers, write_updates_in_place
from numtrace_cpu.products import widen_mixed_products
from numtrace_cpu.relayout import write_reshapes_in_place
from numtrace_cpu.steps import NUMPY_STEPS

__all__ = ["Backend", "compile_graph"]

_CACHE_SIZE = 64


def compile_graph(graph: Graph, input_types: Sequence[Type], updates: Mapping[int, int] | None = None,
                  state: Collection[int] = ()) -> Executable:
    """Specialize `graph` to concrete `input_types` (same dtypes and ranks as its inputs, any sizes the
    program takes), decompose what the lowering does not take, lower
    it to steps, plan its buffers.

    `updates` ``{output j: input i}`` says the caller copies output j into input i after each call (the
    new contents of an argument written in place): the executable may then compute it straight into
    input i's memory and return that input array itself as output j. With run-time guards, only where
    the step that computes it runs after the last guard step: a failing guard leaves the caller's arrays
    untouched (the call is then retried, by another trace, on the caller's data as it was).

    `state`: the positions of the inputs that are module state (parameters and buffers): products
    with such a weight run on the packed-weight kernels, which pack it on every call.
    """
    types = tuple(input_types)
    for i, t in enumerate(types):
        if not isinstance(t, Type):
            raise TypeError(f"input type {i} must be a numtrace_ir type, got {t!r}")
        if isinstance(t, TensorType) and not t.is_concrete:
            raise ValueError(f"input type {i} ({t}) must have concrete dims to compile for the CPU")
    g = specialize(graph, types, check_shapes=False)   # also folds shape reads into prim.reshape & co.
    specialized = list(g.nodes)   # in the order the floating-point reports rerun them (see below)
    passes.decompose(g, LOWERED)   # np.clip into maximum/minimum, which the fused kernels take
    rewrites = {"products_widened": widen_mixed_products(g),   # f32 @ f64 as NumPy: f64 @ f64
                "folded_constants": passes.fold_constants(g)}   # a mask or scale fixed by the shapes
    steps, index, consts = lower(g, frozenset(state))
    by_reference = {id(n) for s in steps if isinstance(s, NUMPY_STEPS) for n in s.nodes}
    by_number = {n: v.type for v, n in index.items()}
    const_numbers = {index[v]: value for v, value in consts.items()}
    outputs = [index[v] for v in g.outputs]
    steps = write_parts_in_place(steps, by_number, outputs)
    steps = write_assigned_in_place(steps, by_number, outputs)
    steps = write_reshapes_in_place(steps, by_number, outputs)
    in_place: dict = {}
    if updates:
        # A run-time guard is checked before any write into the caller's arrays (see docstring).
        guarded = [k for k, step in enumerate(steps) if any(n.op == "prim.guard" for n in step.nodes)]
        in_place = write_updates_in_place(steps, len(g.inputs), outputs, dict(updates),
                                          after=guarded[-1] + 1 if guarded else 0)
    plan = plan_buffers(steps, by_number, len(g.inputs), outputs, set(const_numbers), frozenset(in_place))
    report = _reporter(graph, types, specialized, by_reference, bool(in_place))
    return Executable(g, steps, by_number, plan, const_numbers, rewrites, report)


def _reporter(graph: Graph, types: tuple, specialized: list, by_reference: set[int],
              writes_inputs: bool) -> Reporter:
    """NumPy's floating-point reports of the executable (numtrace_ir.fp_errors): the graph as
    specialized, rerun when the kernels raise a flag, with the nodes that run as their NumPy reference
    here (`by_reference`: their ids; they report themselves) quiet; every call when a node the kernels
    compute warns at these shapes. `writes_inputs`: the kernels write into the caller's arrays, so a
    rerun would not see the call's inputs."""
    quiet = [k for k, n in enumerate(specialized) if id(n) in by_reference]
    always = any(id(n) not in by_reference for n in shape_warnings(specialized))
    return Reporter(lambda: Interpreter(specialize(graph, types, check_shapes=False)), always=always,
                    loud=set_by_graph(specialized), quiet=quiet, writes_inputs=writes_inputs)


class Backend:
    """Compiles graphs to `Executable`s, cached per (graph, input signature): a new shape re-plans,
    never re-traces."""

    name = "cpu"
    description = f"block interpreter built for {ISA}"
    """What `numtrace backends` shows: the ISA build chosen for this CPU (numtrace_cpu.isa)."""

    def __init__(self) -> None:
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def is_available(self) -> tuple[bool, str]:
        return True, ""

    def compile(self, graph: Graph, input_types: Sequence[Type], call_spec: CallSpec | None = None
                ) -> Executable:
        """The executable of `graph` at `input_types`; the written inputs of `call_spec` may be computed
        in place (`CallSpec.in_place_updates`, see `compile_graph`). Its `exact_caller` runs the whole
        call of the traced function in C."""
        updates = call_spec.in_place_updates if call_spec is not None else {}
        state = (range(call_spec.num_args, call_spec.num_args + call_spec.num_state) if call_spec is not None
                 else range(0))
        # Keyed by identity; the entry holds the graph so its id cannot be reused while cached.
        key = (id(graph), tuple(input_types), tuple(sorted(updates.items())), (state.start, state.stop))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] is graph:
                self._cache.move_to_end(key)
                return hit[1]
        exe = compile_graph(graph, key[1], updates, state)
        with self._lock:
            self._cache[key] = (graph, exe)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return exe
