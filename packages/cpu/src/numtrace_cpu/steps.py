"""The steps a specialized graph lowers to: plain data over value numbers.

`numtrace_cpu.lowering` builds them, `numtrace_cpu.planner` assigns their buffers and
`numtrace_cpu.executable` runs them; this module only says what each kind of step means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["NUMPY_STEPS", "AssignedViewStep", "ConstantStep", "FallbackStep", "FusedStep", "IntoStep",
           "LayoutViewStep", "MatmulStep", "PartViewStep", "ScanStep", "SetitemStep", "SmallMatmulStep",
           "Step", "ViewStep"]


@dataclass
class Step:
    """One unit of work: reads `inputs` and writes `outputs` (value numbers)."""

    inputs: list[int]
    outputs: list[int]
    nodes: list[Any]
    view: ClassVar[bool] = False   # outputs may alias inputs[0] (see planner)
    # inputs[0] is first needed here, before the step that fills it (see PartViewStep): the planner
    # gives it its buffer at this step.
    opens_input: ClassVar[bool] = False


@dataclass
class FusedStep(Step):
    """A fused group: `kernel` runs over operands `inputs + outputs` (the kernel's operand order).
    `scalar_inputs[i]` is the dtype a runtime Python scalar input is converted to, or None.
    `overwritable` holds the (input, output) value pairs where the kernel may write that output over
    that input's memory: same type, no reduction, and no instruction reads the input after the one
    that writes the output (registers point straight into operand memory within a block)."""

    kernel: Any = None
    scalar_inputs: list = field(default_factory=list)
    overwritable: frozenset = frozenset()


@dataclass
class MatmulStep(Step):
    """``np.matmul`` into a planned or output buffer (NumPy dispatches to BLAS), or, when `gemv` is
    set (vector operand position, summed matrix axis; see numtrace_cpu.products), the GEMV kernels
    with the bias add (`inputs[2]` when `bias`) and `activation` that follow in the graph fused in,
    or, when `packed` is set, the packed-weight kernels with `epilogue` fused in."""

    gemv: tuple | None = None
    bias: bool = False
    activation: str | None = None
    # The packed-weight kernels (numtrace_cpu.products.packed_form): "constant" (packed once),
    # "state" or "runtime" (packed per call); then the ops named in `epilogue`, in order, are fused in,
    # the values of "bias" and "residual" in `inputs[2:]` (see epilogue_values).
    packed: str | None = None
    epilogue: tuple = ()
    # B gathered from windows (products.gathered_operand): (their count, the stack's axis, the shape
    # of the reshape B is); the windows are `inputs[1:1 + count]`, in the stack's order.
    gather: tuple = ()

    def epilogue_values(self) -> list[tuple[str, int | None]]:
        """(op name, value number or None) of each epilogue op. The values are read from `inputs`,
        the value numbers the planner renames (`planner.write_updates_in_place`)."""
        values = iter(self.inputs[1 + (self.gather[0] if self.gather else 1):])
        return [(op, next(values) if op in ("bias", "residual") else None) for op in self.epilogue]


@dataclass
class SmallMatmulStep(Step):
    """``a @ b`` whose contracted dim K and columns m are at most `SMALL_K` (``img @ [0.299, 0.587,
    0.114]``): one pass over `a` summing its K products per output in order, which beats BLAS's
    per-call and per-row setup; the sums equal BLAS's within float rounding (BLAS may pair or fuse
    the products differently)."""


@dataclass
class ScanStep(Step):
    """``np.cumsum``/``np.cumprod`` along `axis` by the scan kernel: strictly left to right, so it
    equals NumPy bit for bit. Its input is often the output itself: the pass that computes the
    scanned values (``np.log(p[1:] / p[:-1])``) writes them into the result, scanned there in place."""

    axis: int = 0
    op: int = 0            # 0 cumsum, 1 cumprod
    flatten: bool = False  # axis=None on an n-d input: the scan of its C-order ravel


@dataclass
class FallbackStep(Step):
    """An op without a kernel, or one feeding a guard on data (`for_guard`: the guard needs NumPy's own
    bits, which its kernel gives only within ulps): its NumPy reference, result copied into the planned
    buffer."""

    fn: Any = None
    attrs: dict = field(default_factory=dict)
    for_guard: bool = False


@dataclass
class ViewStep(FallbackStep):
    """A movement op whose result is stored as NumPy returns it: usually a view of its input."""

    view: ClassVar[bool] = True


@dataclass
class PartViewStep(ViewStep):
    """The view of a join's result (`np.stack`, `np.concatenate`, ...) where one of its parts goes:
    placed before the fused pass computing that part, which then writes it straight into the joined
    array (its value number is the view's) instead of into a buffer that the join copies."""

    opens_input: ClassVar[bool] = True


@dataclass
class IntoStep(Step):
    """An op whose NumPy function writes its result into the planned buffer: ``fn(*inputs, out=o)``
    (scans, argmin/argmax, stack/concatenate, mixed-dtype matmul; ``out=`` a tuple for the np.linalg
    decompositions with several results). The same NumPy loop as the reference, without its fresh
    temporary and the copy out of it."""

    fn: Any = None


class LayoutViewStep(ViewStep):
    """The value a copying reshape of its transpose reads, as the inverse view of that reshape's
    result (``r.reshape(...).transpose(...)``), placed before the product or pass computing it, which
    then writes it in the reshape's layout: the transpose and the reshape are dropped
    (numtrace_cpu.relayout)."""

    opens_input: ClassVar[bool] = True


class AssignedViewStep(ViewStep):
    """The view ``a[key]`` of an in-place ``a[key] = value``'s array, placed before the fused pass
    computing `value`, which then writes it straight into `a` (its value number is the view's): the
    assignment has nothing left to copy and is dropped."""


@dataclass
class SetitemStep(Step):
    """Functional ``a[key] = value`` (`np.setitem`): `a` copied into the planned buffer, then NumPy's
    own assignment into it. `index` is the node's key, its ``"input"`` placeholders filled from
    `inputs[1:-1]` per call (masks, integer arrays). With `scatter` (a scatter op: ``ufunc.at``,
    ``np.put``, ``np.put_along_axis``) the write is ``scatter(buffer, *inputs[1:])`` instead."""

    index: tuple = ()
    scatter: Any = None


# Steps that run their nodes' NumPy code, which reports its floating-point errors itself (as the
# caller's np.errstate says: an assignment's cast of nan to an integer, ``np.add.at``'s overflow); the
# kernels of the other steps report through numtrace_ir.fp_errors.
NUMPY_STEPS = (FallbackStep, IntoStep, SetitemStep)


@dataclass
class ConstantStep(Step):
    """A prim.Constant: its value lives in the executable's environment, no work per call."""
