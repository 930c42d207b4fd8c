"""Bytecode assembly: a fusion group's nodes as one interpreter program (registers, instructions,
operands), finished into a `FusedStep`; a group over the interpreter's limits is split in two.
"""

from __future__ import annotations

import numpy as np
from numtrace_ir.types import ScalarType

from numtrace_cpu.classify import (
    POWER_EXPANSIONS,
    POWER_WIDENED,
    UFUNC_SCALINGS,
    constant_exponent,
    constant_stored,
    elementwise_plan,
    folded_reduction,
    opdef_of,
    reduction_plan,
)
from numtrace_cpu.fusion import Group
from numtrace_cpu.isa import DTYPES, OPS, REDUCTIONS, REG_KINDS, ROLES, FusedKernel
from numtrace_cpu.steps import FusedStep

__all__ = ["build_group"]

# Interpreter limits (see runtime.pyx); bigger groups are split.
MAX_OPERANDS = 64
MAX_REGISTERS = 256

_CODE_DTYPE = {code: dt for dt, code in DTYPES.items()}
_SCALAR_DTYPES = {"bool": np.dtype(bool), "int": np.dtype(np.int64), "float": np.dtype(np.float64)}


class _Program:
    """Accumulates one FusedKernel's registers, constants, instructions and operands. Registers are
    virtual (one per value and dtype) until `allocate()` folds dead temps together."""

    def __init__(self, group: Group, consts: dict, needed: set):
        self.group = group
        self.consts = consts
        self.needed = needed                   # values some other step (or the caller) reads
        self.regs: list[list] = []             # [dtype code, kind, arg]
        self.const_values: list = []
        self.instrs: list[list] = []           # [opcode, dtype code, dst, a, b, c]
        self.reductions: list[list] = []       # [code, src register, reduced output position, ddof]
        self.in_values: list = []              # operand order: inputs, outputs, reduced outputs
        self.in_scalars: list = []
        self.out_values: list = []
        self.red_values: list = []
        self.reg_of: dict = {}                 # (value, dtype or None for its own) -> register

    def reg(self, dtype: np.dtype, kind: str, arg: int = 0) -> int:
        self.regs.append([DTYPES[dtype], REG_KINDS[kind], arg])
        return len(self.regs) - 1

    def emit(self, op: str, dtype: np.dtype, dst: int, a: int, b: int = -1, c: int = -1) -> None:
        self.instrs.append([OPS[op][0], DTYPES[dtype], dst, a, b, c])

    def natural(self, v) -> int:
        """The register holding v in its own dtype: computed here, or a new input operand."""
        if (v, None) not in self.reg_of:
            if isinstance(v.type, ScalarType):
                dt = _SCALAR_DTYPES[v.type.kind]
                self.in_scalars.append(dt)
            else:
                dt = v.type.dtype
                self.in_scalars.append(None)
            self.in_values.append(v)
            self.reg_of[(v, None)] = self.reg(dt, "input", len(self.in_values) - 1)
        return self.reg_of[(v, None)]

    def read(self, v, dtype: np.dtype) -> int:
        """A register holding v as `dtype`: a constant, or v's register cast once and cached."""
        key = (v, dtype)
        if key not in self.reg_of:
            if v in self.consts and np.ndim(self.consts[v]) == 0:
                self.reg_of[key] = self.literal(self.consts[v], dtype)
            else:
                src = self.natural(v)
                if _CODE_DTYPE[self.regs[src][0]] == dtype:
                    self.reg_of[key] = src
                else:
                    self.reg_of[key] = self.reg(dtype, "temp")
                    self.emit("cast", dtype, self.reg_of[key], src)
        return self.reg_of[key]

    def define(self, v, dst: int) -> None:
        """v was just computed into dst; values read elsewhere become output operands."""
        self.reg_of[(v, None)] = self.reg_of[(v, v.type.dtype)] = dst
        if v in self.needed:
            self.out_values.append(v)
            self.regs[dst][1:] = [REG_KINDS["output"], -len(self.out_values)]  # index fixed in finish()

    def elementwise(self, node) -> None:
        op, loop_in, compute = elementwise_plan(node)
        out_v = node.outputs[0]
        out_dt = out_v.type.dtype
        dst = self.reg(out_dt, "temp")
        if op == "cast":
            src = self.natural(node.inputs[0])
            self.emit("copy" if self.regs[src][0] == DTYPES[out_dt] else "cast", out_dt, dst, src)
        elif op == "power_const":
            self.power(node, compute, dst)
        elif op == "masked_fill":
            a, mask, value = node.inputs
            stored = constant_stored(value, out_dt)
            self.emit("where", out_dt, dst, self.literal(stored, out_dt), self.read(a, out_dt),
                      self.read(mask, np.dtype(bool)))
        else:
            regs = [self.read(v, dt) for v, dt in zip(node.inputs, loop_in)]
            if op == "where":
                self.emit("where", out_dt, dst, regs[1], regs[2], regs[0])
            elif op == "scale":
                opdef = opdef_of(node)
                assert opdef is not None  # "scale" is chosen from the op's ufunc fact
                num, den = UFUNC_SCALINGS[opdef.ufunc]
                factor = compute.type(num) / compute.type(den)
                self.emit("multiply", compute, dst, regs[0], self.literal(factor, compute))
            else:
                self.emit(op, compute, dst, regs[0], regs[1] if len(regs) > 1 else -1)
        self.define(out_v, dst)

    def power(self, node, compute: np.dtype, dst: int) -> None:
        """``x ** c`` into dst by the steps `POWER_EXPANSIONS` gives for the constant c."""
        exponent = constant_exponent(node)
        assert exponent is not None  # the lowering chose this path because the exponent expands
        wide = np.dtype(np.float64) if compute == np.float32 and exponent in POWER_WIDENED else compute
        x = self.read(node.inputs[0], wide)
        steps = POWER_EXPANSIONS[exponent]
        cur = x
        for i, (op, *operands) in enumerate(steps):
            out = dst if i == len(steps) - 1 and wide == compute else self.reg(wide, "temp")
            regs = [x if a == "x" else cur if a == "t" else self.literal(1, wide) for a in operands]
            self.emit(op, wide, out, *regs)
            cur = out
        if wide != compute:
            self.emit("cast", compute, dst, cur)

    def literal(self, value, dtype: np.dtype) -> int:
        """A constant register holding `value` as `dtype`. The cast's floating-point flags are not
        reported: a compile runs once per input signature, under whatever np.errstate its first call
        has (x * 1e-50 of a float32 x would raise FloatingPointError on that call only)."""
        with np.errstate(all="ignore"):
            self.const_values.append(np.asarray(value).astype(dtype).item())
        return self.reg(dtype, "const", len(self.const_values) - 1)

    def reduction(self, node) -> None:
        red, _, to_bool = reduction_plan(node)
        out_v = node.outputs[0]
        src = self.read(node.inputs[0], np.dtype(bool)) if to_bool else None
        if src is None or out_v.type.dtype != np.dtype(bool):
            src = self.read(node.inputs[0], out_v.type.dtype)
        self.red_values.append(out_v)
        ddof = float(node.attrs.get("ddof", 0) or 0)
        self.reductions.append([REDUCTIONS[red][0], src, len(self.red_values) - 1, ddof])

    def allocate(self) -> list[list]:
        """Registers with dead temps reused (per dtype). A destination may take the register of a
        source that dies at the same instruction: every kernel reads element i before writing it."""
        temp = REG_KINDS["temp"]
        last_use: dict[int, int] = {}
        for i, ins in enumerate(self.instrs):
            for r in ins[3:6]:
                if r >= 0:
                    last_use[r] = i
        for red in self.reductions:
            last_use[red[1]] = len(self.instrs)   # read after the block's last instruction
        mapping: dict[int, int] = {}
        regs: list[list] = []
        for r, reg in enumerate(self.regs):
            if reg[1] != temp:
                mapping[r] = len(regs)
                regs.append(list(reg))
        free: dict[int, list[int]] = {}
        for i, ins in enumerate(self.instrs):
            for r in set(ins[3:6]):
                if r >= 0 and self.regs[r][1] == temp and last_use[r] == i:
                    free.setdefault(self.regs[r][0], []).append(mapping[r])
            d = ins[2]
            if d not in mapping:
                pool = free.get(self.regs[d][0])
                if pool:
                    mapping[d] = pool.pop()
                else:
                    mapping[d] = len(regs)
                    regs.append([self.regs[d][0], temp, 0])
            ins[2:6] = [mapping[d]] + [mapping[r] if r >= 0 else -1 for r in ins[3:6]]
        for red in self.reductions:
            red[1] = mapping[red[1]]
        return regs

    def n_operands(self) -> int:
        return len(self.in_values) + len(self.out_values) + len(self.red_values)

    def finish(self, regs: list[list], index: dict) -> FusedStep:
        n_in, n_out = len(self.in_values), len(self.out_values)
        for reg in regs:
            if reg[1] == REG_KINDS["output"]:
                reg[2] = n_in - reg[2] - 1
        operands = ([(DTYPES[_natural_dtype(v)], ROLES["input"], *self._per_row(v)) for v in self.in_values]
                    + [(DTYPES[v.type.dtype], ROLES["output"]) for v in self.out_values]
                    + [(DTYPES[v.type.dtype], ROLES["reduced"]) for v in self.red_values])
        reductions = [(code, src, n_in + n_out + pos, ddof) for code, src, pos, ddof in self.reductions]
        kernel = FusedKernel(tuple(self.group.shape), tuple(self.group.reduce_axes or ()),
                             [tuple(r) for r in regs] or [(DTYPES[np.dtype(bool)], REG_KINDS["temp"], 0)],
                             self.const_values, [tuple(i) for i in self.instrs], reductions, operands)
        return FusedStep(inputs=[index[v] for v in self.in_values],
                         outputs=[index[v] for v in self.out_values + self.red_values],
                         nodes=self.group.nodes, kernel=kernel, scalar_inputs=self.in_scalars,
                         overwritable=frozenset((index[a], index[b]) for a, b in self.overwritable(regs)))

    def _per_row(self, v) -> tuple:
        """(True,) where input v is broadcast along the pass's innermost dim but not along every dim,
        as ``x[:, None]`` in ``x[:, None] == y``: codegen's tiles of rows then read it once per row
        (codegen.row_scalar_operands); else (). A hint: the kernel checks the strides it is run on."""
        shape, own = tuple(self.group.shape), getattr(v.type, "shape", None)
        if own is None or len(shape) < 2 or shape[-1] == 1 or not any(d != 1 for d in own):
            return ()
        return (True,) if own[-1] == 1 else ()

    def overwritable(self, regs: list[list]) -> list[tuple]:
        """(input value, output value) pairs whose output may be written over the input (see FusedStep)."""
        if self.reductions:
            return []
        last_read: dict[int, int] = {}    # input operand -> last instruction reading it
        first_write: dict[int, int] = {}  # output operand -> first instruction writing it
        n_in = len(self.in_values)
        for i, ins in enumerate(self.instrs):
            for r in ins[3:6]:
                if r >= 0 and regs[r][1] == REG_KINDS["input"]:
                    last_read[regs[r][2]] = i
            if regs[ins[2]][1] == REG_KINDS["output"]:
                first_write.setdefault(regs[ins[2]][2] - n_in, i)
        return [(a, b) for k, a in enumerate(self.in_values) for m, b in enumerate(self.out_values)
                if self.in_scalars[k] is None and a.type == b.type and m in first_write
                and last_read.get(k, -1) <= first_write[m]]


def _natural_dtype(v) -> np.dtype:
    return _SCALAR_DTYPES[v.type.kind] if isinstance(v.type, ScalarType) else v.type.dtype


def build_group(group: Group, consts: dict, index: dict, needed: set) -> list[FusedStep]:
    """The FusedStep(s) of a group; a group over the interpreter's limits is split in two."""
    p = _Program(group, consts, needed)
    for node in group.nodes:
        if folded_reduction(node) is not None:
            p.reduction(node)
        else:
            p.elementwise(node)
    regs = p.allocate()
    if len(group.nodes) > 1 and (p.n_operands() > MAX_OPERANDS or len(regs) > MAX_REGISTERS):
        return _split(group, consts, index, needed)
    return [p.finish(regs, index)]


def _split(group: Group, consts: dict, index: dict, needed: set) -> list[FusedStep]:
    half = len(group.nodes) // 2
    parts = []
    for nodes in (group.nodes[:half], group.nodes[half:]):
        part = Group(group.shape)
        part.nodes = nodes
        part.values = {n.outputs[0] for n in nodes if folded_reduction(n) is None}
        if any(folded_reduction(n) is not None for n in nodes):
            part.reduce_axes = group.reduce_axes
        parts.append(part)
    read = {v for n in parts[1].nodes for v in n.inputs}
    again = [n for n in parts[0].nodes if n.outputs[0] in group.recomputed and n.outputs[0] in read]
    parts[1].nodes = again + parts[1].nodes   # computed again, as in the whole group
    for part in parts:
        part.recomputed = {n.outputs[0] for n in part.nodes} & group.recomputed
    crossing = {v for v in read if v in parts[0].values} - group.recomputed
    return (build_group(parts[0], consts, index, needed | crossing)
            + build_group(parts[1], consts, index, needed))
