"""The ``triton`` entry of ``numtrace.backends``: availability, and compiling a graph to an executable."""

from __future__ import annotations

from collections.abc import Sequence

from numtrace_ir import passes
from numtrace_ir.call_spec import CallSpec
from numtrace_ir.graph import Graph
from numtrace_ir.specialize import specialize

from .coverage import LOWERED
from .device_memory import DeviceAllocator, available_allocator_name, interpreter_enabled, select_allocator
from .emit_body import Tuning
from .executable import TritonExecutable
from .host_graph import HostGraphExecutable
from .planner import Plan, plan_graph
from .rewrites import rewrite
from .staged import StagedExecutable, split_at_masks

__all__ = ["Backend", "compile_graph", "generate"]


def generate(graph: Graph, input_types: Sequence, tuning: Tuning | None = None) -> Plan:
    """Kernels and buffer plan for ``graph`` at ``input_types``, without loading or running anything.

    ``tuning`` defaults to the interpreter's block sizes under ``TRITON_INTERPRET=1`` and the GPU's
    otherwise; the ahead-of-time compile check passes ``Tuning.gpu()`` explicitly.
    """
    return plan_graph(_prepared(graph, input_types), tuning or _tuning())


def _tuning() -> Tuning:
    return Tuning.interpreter() if interpreter_enabled() else Tuning.gpu()


def _prepared(graph: Graph, input_types: Sequence) -> Graph:
    """``graph`` specialized to ``input_types``, rewritten into the ops the planner lowers."""
    g = specialize(graph, input_types, check_shapes=False)
    rewrite(g)  # np.diff, np.roll, np.tile, ... into views, joins and elementwise ops
    passes.decompose(g, LOWERED)  # np.clip, np.divmod into the ops they are made of
    return g


def compile_graph(graph: Graph, input_types: Sequence, allocator: DeviceAllocator
                  ) -> TritonExecutable | StagedExecutable | HostGraphExecutable:
    """One kernel plan; or, with boolean-mask reads, a plan per stage (`staged`); or, where no kernel
    plan can hold the graph, the whole graph on the host."""
    tuning = _tuning()
    try:
        g = _prepared(graph, input_types)
        split = split_at_masks(g)
        if split is None:
            return TritonExecutable(plan_graph(g, tuning), allocator)
        return StagedExecutable(g, split, list(input_types), tuning, allocator,
                                lambda rest, types: compile_graph(rest, types, allocator))
    except NotImplementedError as exc:  # no kernel plan can hold it: the whole graph on the host
        return HostGraphExecutable(specialize(graph, input_types, check_shapes=False), list(input_types),
                                   str(exc))


class Backend:
    """Generated Triton kernels: on a CUDA GPU, or on the CPU in Triton's interpreter mode."""

    name = "triton"

    def is_available(self) -> tuple[bool, str]:
        if interpreter_enabled():
            return True, ""  # host NumPy memory through the interpreter's tensor adapter
        try:
            import triton

            target = triton.runtime.driver.active.get_current_target()
        except Exception as exc:  # no driver, no GPU, broken CUDA install: all mean "not here"
            return False, (
                f"Triton found no usable GPU ({type(exc).__name__}: {exc}); set TRITON_INTERPRET=1 "
                "to run the generated kernels on the CPU in Triton's interpreter"
            )
        if getattr(target, "backend", None) != "cuda":
            return False, f"Triton's active target is {target}; numtrace-triton supports CUDA GPUs only"
        if available_allocator_name() is None:
            return False, (
                "no CUDA memory library is installed: pip install 'numtrace-triton[cupy]' or "
                "'numtrace-triton[cuda-python]'"
            )
        return True, ""

    def compile(self, graph: Graph, input_types: Sequence, call_spec: CallSpec | None = None
                ) -> TritonExecutable | StagedExecutable | HostGraphExecutable:
        """An executable for ``graph`` specialized to ``input_types``. It runs the graph only: a traced
        call's convention (``call_spec``: write-back, returned arguments, aliasing) is
        `numtrace_ir.run_call`'s, on the host arrays the executable returns.

        Never refuses an op: one without a lowering (or a variant of one) runs as a host step between
        kernels, listed by ``explain()``; boolean-mask reads are compacted on the device and the rest of
        the graph planned once their counts are known (`staged`); a graph no kernel plan can hold
        (another shape that depends on array data, a complex input) runs whole on the host
        (`HostGraphExecutable`), and ``explain()`` says why.
        """
        ok, why = self.is_available()
        if not ok:
            raise RuntimeError(f"the triton backend is not available: {why}")
        return compile_graph(graph, input_types, select_allocator())
