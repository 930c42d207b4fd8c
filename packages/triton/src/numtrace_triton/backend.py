"""The ``triton`` entry of ``numtrace.backends``: availability, and compiling a graph to an executable."""

from __future__ import annotations

from collections.abc import Sequence

from numtrace_ir import passes
from numtrace_ir.call_spec import CallSpec
from numtrace_ir.graph import Graph
from numtrace_ir.specialize import specialize

from .coverage import LOWERED
from .device_memory import available_allocator_name, interpreter_enabled, select_allocator
from .emit_body import Tuning
from .executable import TritonExecutable
from .host_graph import HostGraphExecutable
from .planner import Plan, plan_graph
from .rewrites import rewrite

__all__ = ["Backend", "generate"]


def generate(graph: Graph, input_types: Sequence, tuning: Tuning | None = None) -> Plan:
    """Kernels and buffer plan for ``graph`` at ``input_types``, without loading or running anything.

    ``tuning`` defaults to the interpreter's block sizes under ``TRITON_INTERPRET=1`` and the GPU's
    otherwise; the ahead-of-time compile check passes ``Tuning.gpu()`` explicitly.
    """
    if tuning is None:
        tuning = Tuning.interpreter() if interpreter_enabled() else Tuning.gpu()
    g = specialize(graph, input_types, check_shapes=False)
    rewrite(g)  # np.diff, np.roll, np.tile, ... into views, joins and elementwise ops
    passes.decompose(g, LOWERED)  # np.clip, np.divmod into the ops they are made of
    return plan_graph(g, tuning)


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
                ) -> TritonExecutable | HostGraphExecutable:
        """An executable for ``graph`` specialized to ``input_types``. It runs the graph only: a traced
        call's convention (``call_spec``: write-back, returned arguments, aliasing) is
        `numtrace_ir.run_call`'s, on the host arrays the executable returns.

        Never refuses an op: one without a lowering (or a variant of one) runs as a host step between
        kernels, listed by ``explain()``; a graph no kernel plan can hold (a shape that depends on array
        data, a complex input) runs whole on the host (`HostGraphExecutable`), and ``explain()`` says why.
        """
        ok, why = self.is_available()
        if not ok:
            raise RuntimeError(f"the triton backend is not available: {why}")
        try:
            plan = generate(graph, input_types)
        except NotImplementedError as exc:  # no kernel plan can hold it: the whole graph on the host
            g = specialize(graph, input_types, check_shapes=False)
            return HostGraphExecutable(g, list(input_types), str(exc))
        return TritonExecutable(plan, select_allocator())
