"""The interpreter's ISA-independent half, compiled once: its tables, program validation, operand
binding, the per-call loop of an executable and output recycling.

A `FusedKernel` holds a flat three-address program over typed block registers (plain C arrays
built from Python lists, so the lowering never cimports anything), validated here before it can
ever run. `FusedKernel.run()` validates every operand (count, dtype, shape broadcastable to the
iteration shape, outputs writable and exactly shaped) before any pointer is formed, collapses the
dims, and hands the pass to one ISA build of the block loops (blocks.pxi), with the GIL released
(unless the pass is small: see NOGIL_MIN_WORK);
that build only visits indices inside the validated shape. numtrace_cpu.isa chooses the build
(`use_blocks`); one kernel can run from several Python threads at once.
"""

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from numtrace_cpu.interp cimport *

import numpy as np

cnp.import_array()

cdef extern from "nt_platform.h" nogil:
    void* nt_alloc_large(size_t n)
    unsigned int nt_cpu_features()
    const char* const nt_cpu_feature_names[]
    enum: NT_NFEATURES

cdef int TYPENUM[NDT]
TYPENUM[:] = [cnp.NPY_BOOL, cnp.NPY_INT32, cnp.NPY_INT64, cnp.NPY_FLOAT32, cnp.NPY_FLOAT64, cnp.NPY_UINT8,
              cnp.NPY_INT8, cnp.NPY_INT16, cnp.NPY_UINT16, cnp.NPY_UINT32, cnp.NPY_UINT64]

DTYPES = {np.dtype(np.bool_): DT_BOOL, np.dtype(np.int32): DT_I32, np.dtype(np.int64): DT_I64,
          np.dtype(np.float32): DT_F32, np.dtype(np.float64): DT_F64, np.dtype(np.uint8): DT_U8,
          np.dtype(np.int8): DT_I8, np.dtype(np.int16): DT_I16, np.dtype(np.uint16): DT_U16,
          np.dtype(np.uint32): DT_U32, np.dtype(np.uint64): DT_U64}
"""Register dtype code of each NumPy dtype the interpreter reads: it computes in those whose code an
op's entry in OPS lists, and only casts from the others."""

REG_KINDS = {"temp": REG_TEMP, "input": REG_INPUT, "const": REG_CONST, "output": REG_OUTPUT}

ROLES = {"input": ROLE_INPUT, "output": ROLE_OUTPUT, "reduced": ROLE_REDUCED}


def _dtype_codes(unsigned int mask):
    return tuple(d for d in range(NCOMPUTE) if (mask >> d) & 1)


OPS = {nt_op_names[i].decode(): (i, nt_op_category[i], _dtype_codes(nt_op_dtypes[i])) for i in range(NOPS)}
"""Interpreter op name -> (opcode, category, compute dtypes it implements), from nt_opcodes.h."""

REDUCTIONS = {nt_red_names[i].decode(): (i, _dtype_codes(nt_red_dtypes[i])) for i in range(NREDUCTIONS)}
"""Reduction name -> (code, dtypes of the reduced register it accepts; the output has the same dtype)."""


def cpu_features() -> frozenset:
    """The instruction-set features this CPU (and OS) supports, of those an ISA build may need."""
    cdef unsigned int bits = nt_cpu_features()
    return frozenset(nt_cpu_feature_names[i].decode() for i in range(NT_NFEATURES) if (bits >> i) & 1)


cdef run_pass_fn _default_pass = NULL


cdef run_pass_fn _pass_of(object blocks) except NULL:
    return <run_pass_fn>PyCapsule_GetPointer(blocks.RUN_PASS, b"numtrace_cpu.run_pass")


def use_blocks(blocks):
    """Make `blocks` (an ISA build module: blocks_baseline, blocks_avx2, ...) the one that kernels
    built without an explicit `blocks=` run on. numtrace_cpu.isa calls it once, at import."""
    global _default_pass
    _default_pass = _pass_of(blocks)


# Work (elements x instructions) below which a pass stays on the calling thread: waking a sleeping
# OpenMP team (see OMP_WAIT_POLICY in numtrace_cpu/__init__.py) costs tens of microseconds on a
# busy machine, about what a single thread needs for this much work.
cdef Py_ssize_t PARALLEL_MIN_WORK = 1 << 20

# Work below which a pass keeps the GIL: giving it up and taking it back costs about 0.1 us, a
# sizeable part of a small call, and other Python threads wait no longer than such a pass runs.
cdef Py_ssize_t NOGIL_MIN_WORK = 1 << 14

# Operands of a pass whose strides and pointers live on the stack of its call (more: malloc).
cdef enum:
    STACK_OPS = 8


cdef class FusedKernel:
    """One fused group, compiled for one iteration shape.

    Built from plain data (see `numtrace_cpu.lowering`): `shape` is the iteration shape and
    `reduce_axes` the axes reductions fold (outputs of role "reduced" have size 1 there);
    `regs` is a list of (dtype code, kind code, arg) where arg is the operand index of input/output
    registers and the constant index of constant registers; `instrs` are (opcode, dtype code, dst,
    a, b, c) with unused slots -1 (for "cast", c is ignored and taken from a's dtype); `reductions`
    are (reduction code, src register, output operand, ddof); `operands` are (dtype code, role).
    `blocks` is the ISA build of the block loops it runs on (a module such as
    numtrace_cpu.blocks_avx2); by default, the one numtrace_cpu.isa chose for this CPU.
    """
    cdef int nregs, ninstr, nred, nops, ndim
    cdef Instr* instrs
    cdef Reduction* reds
    cdef int* reg_kind
    cdef int* reg_arg
    cdef int* reg_dt
    cdef int* op_dt
    cdef int* op_role
    cdef double* fconsts
    cdef int64_t* iconsts
    cdef Py_ssize_t shape[MAXD]
    cdef bint reduced[MAXD]
    cdef Py_ssize_t size, work
    cdef int nkept_dims
    cdef run_pass_fn run_pass
    cdef readonly tuple iteration_shape
    cdef readonly int n_instructions
    cdef char* scratch             # an idle scratch block of scratch_bytes, or NULL
    cdef size_t scratch_bytes

    def __cinit__(self, tuple shape, tuple reduce_axes, list regs, list consts, list instrs,
                  list reductions, list operands, object blocks=None):
        cdef int i, r
        if blocks is not None:
            self.run_pass = _pass_of(blocks)
        elif _default_pass != NULL:
            self.run_pass = _default_pass
        else:
            raise RuntimeError("no ISA build of the block loops is in use: import numtrace_cpu.isa first")
        if len(shape) > MAXD:
            raise ValueError(f"iteration shape has {len(shape)} dims; at most {MAXD} are supported")
        if not 1 <= len(regs) <= 256:
            raise ValueError(f"a fused kernel needs 1..256 registers, got {len(regs)}")
        if len(operands) > 64 or len(reductions) > 16:
            raise ValueError("a fused kernel takes at most 64 operands and 16 reductions")
        self.ndim = len(shape)
        self.iteration_shape = shape
        self.size = 1
        for i, s in enumerate(shape):
            if s < 0:
                raise ValueError(f"negative dim in iteration shape {shape}")
            self.shape[i] = s
            self.reduced[i] = False
            self.size *= s
        for ax in reduce_axes:
            if not 0 <= ax < self.ndim:
                raise ValueError(f"reduce axis {ax} out of range for iteration shape {shape}")
            self.reduced[ax] = True
        self.nkept_dims = self.ndim - len(set(reduce_axes))
        self.nregs, self.ninstr, self.nred, self.nops = len(regs), len(instrs), len(reductions), len(operands)
        self.n_instructions = self.ninstr
        self.work = self.size * (self.ninstr + self.nred + 1)
        self.instrs = <Instr*>malloc(max(1, self.ninstr) * sizeof(Instr))
        self.reds = <Reduction*>malloc(max(1, self.nred) * sizeof(Reduction))
        self.reg_kind = <int*>malloc(self.nregs * sizeof(int))
        self.reg_arg = <int*>malloc(self.nregs * sizeof(int))
        self.reg_dt = <int*>malloc(self.nregs * sizeof(int))
        self.op_dt = <int*>malloc(max(1, self.nops) * sizeof(int))
        self.op_role = <int*>malloc(max(1, self.nops) * sizeof(int))
        self.fconsts = <double*>malloc(max(1, len(consts)) * sizeof(double))
        self.iconsts = <int64_t*>malloc(max(1, len(consts)) * sizeof(int64_t))
        if (not self.instrs or not self.reds or not self.reg_kind or not self.reg_arg or not self.reg_dt
                or not self.op_dt or not self.op_role or not self.fconsts or not self.iconsts):
            raise MemoryError()
        for i, (dt, role) in enumerate(operands):
            _check_code(dt, NDT, "operand dtype")
            _check_code(role, 3, "operand role")
            self.op_dt[i], self.op_role[i] = dt, role
        for i, c in enumerate(consts):
            if isinstance(c, float):
                self.fconsts[i], self.iconsts[i] = c, 0
            else:
                self.fconsts[i], self.iconsts[i] = float(c), int(c)
        self._load_regs(regs, len(consts))
        self._load_instrs(instrs)
        self._load_reductions(reductions)
        self._mark_feeds()

    cdef _load_regs(self, list regs, int nconsts):
        cdef int r
        cdef list written = [0] * self.nops
        for r, (dt, kind, arg) in enumerate(regs):
            _check_code(dt, NDT, "register dtype")
            _check_code(kind, 4, "register kind")
            self.reg_dt[r], self.reg_kind[r], self.reg_arg[r] = dt, kind, arg
            if kind == REG_CONST:
                _check_code(arg, nconsts, "constant index")
                _check_code(dt, NCOMPUTE, "constant register dtype")
            elif kind != REG_TEMP:
                _check_code(arg, self.nops, "operand index")
                want = ROLE_INPUT if kind == REG_INPUT else ROLE_OUTPUT
                if self.op_role[arg] != want or self.op_dt[arg] != dt:
                    raise ValueError(f"register {r} does not match the role/dtype of operand {arg}")
                if kind == REG_OUTPUT:
                    written[arg] += 1
        for k in range(self.nops):
            if self.op_role[k] == ROLE_OUTPUT and written[k] != 1:
                raise ValueError(f"output operand {k} must be written by exactly one register")

    cdef _load_instrs(self, list instrs):
        cdef Instr* ins
        for i, (op, dt, dst, a, b, c) in enumerate(instrs):
            _check_code(op, NOPS, "opcode")
            _check_code(dt, NDT, "instruction dtype")
            if not (nt_op_dtypes[op] >> dt) & 1:
                raise ValueError(f"instruction {i}: opcode {op} has no kernel for dtype code {dt}")
            ins = &self.instrs[i]
            ins.op, ins.cat, ins.dt, ins.dst, ins.a, ins.b, ins.c = op, nt_op_category[op], dt, dst, a, b, c
            for reg in (dst, a):
                _check_code(reg, self.nregs, "register")
            if self.reg_kind[dst] in (REG_INPUT, REG_CONST):
                raise ValueError(f"instruction {i} writes read-only register {dst}")
            cat = ins.cat
            bool_out = cat in (CAT_UNARY_BOOL, CAT_BINARY_BOOL)
            if self.reg_dt[dst] != (DT_BOOL if bool_out else dt):
                raise ValueError(f"instruction {i}: destination register has the wrong dtype")
            if cat == CAT_CAST:
                ins.c = self.reg_dt[a]
                ins.b = -1
                continue
            if self.reg_dt[a] != dt:
                raise ValueError(f"instruction {i}: operand register a has the wrong dtype")
            if cat in (CAT_BINARY, CAT_BINARY_BOOL, CAT_WHERE):
                _check_code(b, self.nregs, "register")
                if self.reg_dt[b] != dt:
                    raise ValueError(f"instruction {i}: operand register b has the wrong dtype")
            else:
                ins.b = -1
            if cat == CAT_WHERE:
                _check_code(c, self.nregs, "register")
                if self.reg_dt[c] != DT_BOOL:
                    raise ValueError(f"instruction {i}: the condition register must be bool")
            else:
                ins.c = -1

    cdef _load_reductions(self, list reductions):
        cdef Reduction* rd
        for i, (op, src, out, ddof) in enumerate(reductions):
            _check_code(op, NREDUCTIONS, "reduction code")
            _check_code(src, self.nregs, "register")
            _check_code(out, self.nops, "operand index")
            rd = &self.reds[i]
            rd.op, rd.src, rd.out, rd.ddof, rd.dt = op, src, out, ddof, self.reg_dt[src]
            if not (nt_red_dtypes[op] >> rd.dt) & 1:
                raise ValueError(f"reduction {i}: code {op} has no kernel for dtype code {rd.dt}")
            if self.op_role[out] != ROLE_REDUCED or self.op_dt[out] != rd.dt:
                raise ValueError(f"reduction {i}: operand {out} is not a reduced output of its dtype")

    cdef _mark_feeds(self):
        """Set each instruction's feeds_next (see Instr in interp.pxd) from the loaded program."""
        cdef int i, j, t
        cdef Instr* ins
        for i in range(self.ninstr):
            ins = &self.instrs[i]
            ins.feeds_next = 0
            t = ins.dst
            if i + 1 == self.ninstr or self.reg_kind[t] != REG_TEMP:
                continue
            if _reads(&self.instrs[i + 1], t) != 1:
                continue
            if any(self.reds[j].src == t for j in range(self.nred)):
                continue
            for j in range(i + 2, self.ninstr + 1):
                if j == self.ninstr or self.instrs[j].dst == t and not _reads(&self.instrs[j], t):
                    ins.feeds_next = 1   # t is rewritten, or the program ends, before any other read
                    break
                if _reads(&self.instrs[j], t):
                    break

    def __dealloc__(self):
        free(self.instrs)
        free(self.reds)
        free(self.reg_kind)
        free(self.reg_arg)
        free(self.reg_dt)
        free(self.op_dt)
        free(self.op_role)
        free(self.fconsts)
        free(self.iconsts)
        free(self.scratch)

    def run(self, list operands, int nthreads=1):
        """Run the pass over `operands` (ndarrays in operand order; outputs are written in place)."""
        if len(operands) != self.nops:
            raise ValueError(f"fused kernel expects {self.nops} operands, got {len(operands)}")
        self._run(operands, NULL, nthreads)

    cdef int _run(self, list env, const Py_ssize_t* ids, int nthreads) except -1:
        """Operand k is env[ids[k]] (env[k] when ids is NULL)."""
        cdef Ctx cx
        cdef int k, nteam
        cdef Py_ssize_t units, chunk
        cdef size_t need
        cdef char* scratch
        # A small pass (most of them) keeps its operand tables on the stack: no malloc per call.
        cdef Py_ssize_t strides_here[STACK_OPS * MAXD]
        cdef char* data_here[STACK_OPS]
        if self.nops <= STACK_OPS:
            cx.strides, cx.data = strides_here, data_here
        else:
            cx.strides = <Py_ssize_t*>malloc(self.nops * MAXD * sizeof(Py_ssize_t))
            cx.data = <char**>malloc(self.nops * sizeof(char*))
            if not cx.strides or not cx.data:
                free(cx.strides)
                free(cx.data)
                raise MemoryError()
        try:
            for k in range(self.nops):
                self._bind(k, env[ids[k] if ids else k], &cx)
            self._collapse(&cx)
            if self.nred:
                self._check_nonempty_reduction(&cx)
            cx.nregs, cx.ninstr, cx.nred, cx.nops = self.nregs, self.ninstr, self.nred, self.nops
            cx.instrs, cx.reds = self.instrs, self.reds
            cx.fconsts, cx.iconsts = self.fconsts, self.iconsts
            cx.reg_kind, cx.reg_arg, cx.reg_dt, cx.op_role = self.reg_kind, self.reg_arg, self.reg_dt, self.op_role
            cx.cols = _columns_per_block(&cx)
            if cx.cols:
                _swap_last_dims(&cx)
            cx.fold_in_place = self.nred > 0 and self._folds_in_place(&cx)
            if cx.cols and cx.fold_in_place:
                cx.cols = _in_place_columns(cx.shape[cx.nd - 1], nthreads if self.work >= PARALLEL_MIN_WORK else 1)
            cx.rows = _rows_per_block(&cx)
            # Registers need no more elements than the longest block this pass runs.
            cx.reg_elems = cx.rows * (cx.cols if cx.cols else cx.shape[cx.nd - 1])
            cx.reg_elems = BLOCK if cx.reg_elems >= BLOCK else (cx.reg_elems + 7) & ~7
            cx.reg_stride = cx.reg_elems * 8 + REG_PAD
            cx.acc_offset = self.nregs * cx.reg_stride + 64
            cx.scratch_regs = cx.acc_offset + (self.nred * cx.cols * sizeof(Acc) if cx.cols else 0)
            units = _count_units(&cx)
            nteam = nthreads if (nthreads > 1 and units > 1 and self.work >= PARALLEL_MIN_WORK) else 1
            if units == 0:
                return 0
            if nteam > units:
                nteam = <int>units
            chunk = max(1, units // (8 * nteam))
            # The kernel keeps one scratch block between calls (taken and put back under the GIL,
            # so a concurrent call allocates its own): a fresh one per call cost malloc/free time.
            need = nteam * cx.scratch_regs
            if self.scratch != NULL and self.scratch_bytes >= need:
                scratch, need = self.scratch, self.scratch_bytes
                self.scratch = NULL
            else:
                scratch = <char*>malloc(need)
                if not scratch:
                    raise MemoryError()
            if self.work < NOGIL_MIN_WORK:
                self.run_pass(&cx, scratch, nteam, units, chunk)
            else:
                with nogil:
                    self.run_pass(&cx, scratch, nteam, units, chunk)
            if self.scratch == NULL:
                self.scratch, self.scratch_bytes = scratch, need
            else:
                free(scratch)
        finally:
            if self.nops > STACK_OPS:
                free(cx.strides)
                free(cx.data)
        return 0

    cdef int _bind(self, int k, object arr, Ctx* cx) except -1:
        """Validate operand k and record its data pointer and strides broadcast to the iteration shape."""
        cdef cnp.ndarray a
        cdef int d, j, nd, role = self.op_role[k]
        cdef Py_ssize_t want
        if not cnp.PyArray_Check(arr):   # a C check: this runs per operand per call
            raise TypeError(f"operand {k} must be a numpy.ndarray, got {type(arr).__name__}")
        a = <cnp.ndarray>arr
        if cnp.PyArray_TYPE(a) != TYPENUM[self.op_dt[k]] or not cnp.PyArray_ISNOTSWAPPED(a):
            raise TypeError(f"operand {k} has dtype {a.dtype}; expected native "
                            f"{np.dtype(cnp.PyArray_TypeObjectFromType(TYPENUM[self.op_dt[k]]))}")
        nd = cnp.PyArray_NDIM(a)
        if role != ROLE_INPUT and not cnp.PyArray_ISWRITEABLE(a):
            raise ValueError(f"output operand {k} is read-only")
        if role == ROLE_REDUCED and nd == self.nkept_dims and nd != self.ndim:
            return self._bind_reduced(k, a, cx)
        if nd > self.ndim or (role != ROLE_INPUT and nd != self.ndim):
            raise ValueError(f"operand {k} of shape {arr.shape} does not fit iteration shape "
                             f"{self.iteration_shape}")
        cx.data[k] = <char*>cnp.PyArray_DATA(a)
        for d in range(self.ndim):
            j = d - (self.ndim - nd)
            if j < 0:
                cx.strides[k * MAXD + d] = 0
                continue
            want = self.shape[d]
            if role == ROLE_REDUCED and self.reduced[d]:
                want = 1
            if a.shape[j] == want:
                cx.strides[k * MAXD + d] = a.strides[j] if want != 1 else 0
            elif a.shape[j] == 1 and role == ROLE_INPUT:
                cx.strides[k * MAXD + d] = 0
            else:
                raise ValueError(f"operand {k} of shape {arr.shape} does not broadcast to iteration shape "
                                 f"{self.iteration_shape}")
        return 0

    cdef int _bind_reduced(self, int k, cnp.ndarray a, Ctx* cx) except -1:
        """A reduced output given without its reduced dims (keepdims=False): its dims are the kept ones."""
        cdef int d, j = 0
        cx.data[k] = <char*>cnp.PyArray_DATA(a)
        for d in range(self.ndim):
            if self.reduced[d]:
                cx.strides[k * MAXD + d] = 0
                continue
            if a.shape[j] != self.shape[d]:
                raise ValueError(f"reduced output operand {k} of shape {(<object>a).shape} does not match the kept "
                                 f"dims of iteration shape {self.iteration_shape}")
            cx.strides[k * MAXD + d] = a.strides[j] if self.shape[d] != 1 else 0
            j += 1
        return 0

    cdef void _collapse(self, Ctx* cx):
        """Order dims kept-then-reduced, drop size-1 dims and merge neighbours (within one group)
        that every operand walks contiguously, so the innermost loop is as long as possible."""
        cdef int order[MAXD]
        cdef Py_ssize_t tmp[MAXD]
        cdef int n = 0, d, k, grp, nd = 0, nkept0 = 0, nkept = 0
        for grp in range(2):
            for d in range(self.ndim):
                if self.reduced[d] == grp and self.shape[d] != 1:
                    order[n] = d
                    n += 1
            if grp == 0:
                nkept0 = n
        for k in range(self.nops):
            for d in range(n):
                tmp[d] = cx.strides[k * MAXD + order[d]]
            for d in range(n):
                cx.strides[k * MAXD + d] = tmp[d]
        for d in range(n):
            cx.shape[d] = self.shape[order[d]]
        for d in range(n):
            if nd > 0 and d != nkept0 and self._mergeable(cx, nd - 1, d):
                for k in range(self.nops):
                    cx.strides[k * MAXD + nd - 1] = cx.strides[k * MAXD + d]
                cx.shape[nd - 1] *= cx.shape[d]
            else:
                for k in range(self.nops):
                    cx.strides[k * MAXD + nd] = cx.strides[k * MAXD + d]
                cx.shape[nd] = cx.shape[d]
                nd += 1
            if d == nkept0 - 1:
                nkept = nd
        if nd == nkept and (self.nred or nd == 0):
            # Nothing left to reduce over (only size-1 axes), or a 0-d pass: one virtual dim of 1.
            cx.shape[nd] = 1
            for k in range(self.nops):
                cx.strides[k * MAXD + nd] = 0
            nd += 1
        cx.nd = nd
        cx.nkept = nkept if self.nred else nd

    cdef bint _folds_in_place(self, const Ctx* cx):
        """Whether a reduction pass may fold its inputs where they lie (see `_columns_unit` and
        `_reduction_row` in blocks.pxi): it has no instructions and writes nothing but its
        reductions, and each reduction reads an input register of the operand's own dtype whose
        innermost elements (columns, in column mode) are adjacent and whose every element is aligned."""
        cdef int j, k, d, src
        cdef Py_ssize_t isz
        if self.ninstr:
            return False
        for k in range(self.nregs):
            if self.reg_kind[k] == REG_OUTPUT:
                return False
        for j in range(self.nred):
            src = self.reds[j].src
            k = self.reg_arg[src]
            isz = nt_itemsize[self.reg_dt[src]]
            if self.reg_kind[src] != REG_INPUT or self.op_dt[k] != self.reg_dt[src]:
                return False
            if cx.strides[k * MAXD + cx.nd - 1] != isz or (<size_t>cx.data[k]) % isz:
                return False
            for d in range(cx.nd):
                if cx.strides[k * MAXD + d] % isz:
                    return False
        return True

    cdef bint _mergeable(self, Ctx* cx, int a, int b):
        cdef int k
        for k in range(self.nops):
            if cx.strides[k * MAXD + a] != cx.strides[k * MAXD + b] * cx.shape[b]:
                return False
        return True

    cdef int _check_nonempty_reduction(self, Ctx* cx) except -1:
        cdef Py_ssize_t count = 1, rows = 1
        cdef int d
        for d in range(cx.nkept, cx.nd):
            count *= cx.shape[d]
        for d in range(cx.nkept):
            rows *= cx.shape[d]
        if count == 0 and rows > 0:
            for j in range(self.nred):
                if self.reds[j].op in (R_MAX, R_MIN) and self.reds[j].dt != DT_BOOL:
                    raise ValueError("zero-size array to a max/min reduction, which has no identity")
        return 0

    def stats(self):
        """Counts for Executable.stats()."""
        return {"instructions": self.ninstr, "reductions": self.nred, "registers": self.nregs,
                "operands": self.nops}


cdef int _reads(const Instr* ins, int r) noexcept nogil:
    """How many of ins's operand slots read register r (a cast's c holds a dtype, not a register)."""
    return (ins.a == r) + (ins.b == r) + (ins.cat == CAT_WHERE and ins.c == r)


cdef Py_ssize_t _columns_per_block(const Ctx* cx) noexcept nogil:
    """Kept columns per block when a pass should run in column mode (see `_columns_unit` in blocks.pxi), else 0:
    it reduces one dim, and every operand that moves along it moves faster along the innermost kept
    dim (as ``x.mean(axis=0)`` on a C-ordered x). Called on the collapsed dims, kept ones first."""
    cdef int k, kept = cx.nd - 2, red = cx.nd - 1
    cdef Py_ssize_t sk, sr
    if not cx.nred or cx.nd - cx.nkept != 1 or cx.nkept < 1 or cx.shape[red] < 2:
        return 0
    for k in range(cx.nops):
        if cx.op_role[k] == ROLE_REDUCED:
            continue
        sk, sr = cx.strides[k * MAXD + kept], cx.strides[k * MAXD + red]
        if sr != 0 and (sk if sk >= 0 else -sk) >= (sr if sr >= 0 else -sr):
            return 0
    return cx.shape[kept] if cx.shape[kept] < MAXCOLS else MAXCOLS

cdef Py_ssize_t _in_place_columns(Py_ssize_t width, int nthreads) noexcept nogil:
    """Columns per unit of a column-mode pass that folds its inputs in place: as few units as
    IN_PLACE_COLS-wide ones allow, of equal widths (a multiple of 8), but with nthreads > 1 at least
    one unit per thread as long as each keeps MAXCOLS columns (narrower ones would share cache lines)."""
    cdef Py_ssize_t nchunk = (width + IN_PLACE_COLS - 1) // IN_PLACE_COLS
    cdef Py_ssize_t most = (width + MAXCOLS - 1) // MAXCOLS
    if nchunk < nthreads:
        nchunk = nthreads if nthreads < most else most
    cdef Py_ssize_t cols = ((width + nchunk - 1) // nchunk + 7) & ~7
    return min(cols, width, IN_PLACE_COLS)

cdef void _swap_last_dims(Ctx* cx) noexcept nogil:
    cdef int k, a = cx.nd - 2, b = cx.nd - 1
    cdef Py_ssize_t t
    cx.shape[a], cx.shape[b] = cx.shape[b], cx.shape[a]
    for k in range(cx.nops):
        t = cx.strides[k * MAXD + a]
        cx.strides[k * MAXD + a] = cx.strides[k * MAXD + b]
        cx.strides[k * MAXD + b] = t

cdef Py_ssize_t _rows_per_block(const Ctx* cx) noexcept nogil:
    """Rows of the innermost dim a block takes: one, unless that dim is short and the rows around it
    can be batched (an elementwise pass, or one that reduces exactly that dim), or in column mode."""
    cdef Py_ssize_t inner = cx.shape[cx.nd - 1]
    if cx.cols:
        return BLOCK // cx.cols if cx.cols < BLOCK else 1
    if cx.nd < 2 or inner < 1 or inner > BLOCK // 4:
        return 1
    if cx.nred and not (cx.nd - cx.nkept == 1 and cx.nkept >= 1):
        return 1
    return BLOCK // inner

cdef Py_ssize_t _count_units(const Ctx* cx) noexcept nogil:
    """Work units of a pass: see `_rows_unit`, `_reduction_row` and `_elementwise_unit` in blocks.pxi."""
    cdef Py_ssize_t units = 1, per_unit
    cdef int k
    if cx.cols:
        units = (cx.shape[cx.nd - 1] + cx.cols - 1) // cx.cols
        for k in range(cx.nd - 2):
            units *= cx.shape[k]
    elif cx.rows > 1:
        per_unit = cx.rows * (CHUNK // BLOCK)
        units = (cx.shape[cx.nd - 2] + per_unit - 1) // per_unit
        for k in range(cx.nd - 2):
            units *= cx.shape[k]
    elif cx.nred:
        for k in range(cx.nkept):
            units *= cx.shape[k]
    else:
        units = (cx.shape[cx.nd - 1] + CHUNK - 1) // CHUNK
        for k in range(cx.nd - 1):
            units *= cx.shape[k]
    return units

cdef int _check_code(object value, int limit, str what) except -1:
    if not isinstance(value, int) or not 0 <= value < limit:
        raise ValueError(f"invalid {what}: {value!r} (expected an int in [0, {limit}))")
    return 0


# ---------------------------------------------------------------------------------------------
# The per-call loop of an executable, in C so that calling a small graph costs little more than
# its kernels (the Python-level checks and messages stay in numtrace_cpu.executable).

cdef int _num_threads = 1


def set_num_threads(int n):
    """Threads of every pass this module runs from now on (numtrace_cpu.threads owns the setting)."""
    global _num_threads
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    _num_threads = n


cdef class FusedCall:
    """A FusedKernel bound to the environment slots of its operands; `scalars` lists the operands
    that arrive as Python scalars, with the dtype they are converted to per call."""
    cdef FusedKernel kernel
    cdef Py_ssize_t* ids
    cdef int nids
    cdef list scalars

    def __cinit__(self, FusedKernel kernel not None, list ids, list scalars):
        if len(ids) != kernel.nops:
            raise ValueError(f"the kernel has {kernel.nops} operands, got {len(ids)} slots")
        self.kernel = kernel
        self.nids = len(ids)
        self.ids = <Py_ssize_t*>malloc(max(1, self.nids) * sizeof(Py_ssize_t))
        if not self.ids:
            raise MemoryError()
        for k, i in enumerate(ids):
            if i < 0:
                raise ValueError(f"negative environment slot {i}")
            self.ids[k] = i
        self.scalars = scalars

    def __dealloc__(self):
        free(self.ids)

    cdef int call(self, list env, int nthreads) except -1:
        cdef list operands
        cdef Py_ssize_t k
        for k in range(self.nids):
            if self.ids[k] >= len(env):
                raise IndexError(f"environment slot {self.ids[k]} out of range")
        if not self.scalars:
            return self.kernel._run(env, self.ids, nthreads)
        operands = [env[self.ids[k]] for k in range(self.nids)]
        for k, dt in self.scalars:
            operands[k] = np.asarray(operands[k], dt)
        return self.kernel._run(operands, NULL, nthreads)


cdef struct OutSpec:
    # How output j reaches the caller (see CallRunner): its environment slot, dtype, shape and mode.
    Py_ssize_t slot
    int typenum, nd, mode
    size_t nbytes
    cnp.npy_intp dims[MAXD]


cdef class CallRunner:
    """Inputs checked, arena taken, outputs allocated, steps run: the body of `Executable.__call__`.

    `input_specs[i]` is (typenum, shape) for an array input or None (checked by `_check_input`);
    `steps` holds `FusedCall`s (run directly) and Python callables `f(env, nthreads)`; `outputs` is
    (slot, typenum, shape, mode) with mode 0 direct, 1 copy, 2 scalar, 3 dynamic. Subclasses provide
    `_new_arena()`, `_check_inputs(inputs)`, `_prepare_out(out, inputs)` and `_finish_out(out, outs)`.
    The tables live in C arrays: a small call is dominated by what it costs to read them.
    """
    cdef int n_inputs, n_outputs, n_per_call
    cdef int* in_type            # typenum per input, -1 for a non-array input
    cdef int* in_nd
    cdef Py_ssize_t* in_dims     # n_inputs x MAXD
    cdef OutSpec* outs
    cdef Py_ssize_t* per_call
    cdef list steps, arenas
    # One idle arena held apart from `arenas`: taking and giving it back is two pointer swaps under
    # the GIL, where a list pop/append reallocates the list's storage every call.
    cdef object spare

    def _setup(self, list input_specs, list steps, list outputs, list per_call):
        """`per_call`: the environment slots a call fills (inputs, direct outputs, values computed
        as Python objects); they are cleared when the call ends so an idle arena holds no
        caller data."""
        cdef Py_ssize_t i, d
        cdef OutSpec* o
        if self.in_type != NULL:
            raise RuntimeError("CallRunner._setup runs once")
        self.n_inputs, self.n_outputs, self.n_per_call = len(input_specs), len(outputs), len(per_call)
        self.in_type = <int*>malloc(max(1, self.n_inputs) * sizeof(int))
        self.in_nd = <int*>malloc(max(1, self.n_inputs) * sizeof(int))
        self.in_dims = <Py_ssize_t*>malloc(max(1, self.n_inputs) * MAXD * sizeof(Py_ssize_t))
        self.outs = <OutSpec*>malloc(max(1, self.n_outputs) * sizeof(OutSpec))
        self.per_call = <Py_ssize_t*>malloc(max(1, self.n_per_call) * sizeof(Py_ssize_t))
        if not self.in_type or not self.in_nd or not self.in_dims or not self.outs or not self.per_call:
            raise MemoryError()
        for i, spec in enumerate(input_specs):
            self.in_type[i], self.in_nd[i] = -1, 0
            if spec is not None:
                typenum, shape = spec
                if len(shape) > MAXD:
                    raise ValueError(f"input {i} has {len(shape)} dims; at most {MAXD} are supported")
                self.in_type[i], self.in_nd[i] = typenum, len(shape)
                for d in range(len(shape)):
                    self.in_dims[i * MAXD + d] = shape[d]
        for i, (slot, typenum, shape, mode) in enumerate(outputs):
            if len(shape) > MAXD or not 0 <= mode <= 3 or slot < 0:
                raise ValueError(f"invalid output spec {outputs[i]!r}")
            o = &self.outs[i]
            o.slot, o.typenum, o.nd, o.mode = slot, typenum, len(shape), mode
            o.nbytes = cnp.PyArray_DescrFromType(typenum).itemsize if mode <= 1 else 0
            for d in range(len(shape)):
                o.dims[d] = shape[d]
                o.nbytes *= <size_t>o.dims[d]
        for i, slot in enumerate(per_call):
            if slot < 0:
                raise ValueError(f"negative environment slot {slot}")
            self.per_call[i] = slot
        self.steps = steps
        self.arenas = []

    def __dealloc__(self):
        free(self.in_type)
        free(self.in_nd)
        free(self.in_dims)
        free(self.outs)
        free(self.per_call)

    def __call__(self, *inputs, out=None):
        cdef Py_ssize_t i
        if len(inputs) != self.n_inputs:
            raise TypeError(f"expected {self.n_inputs} inputs, got {len(inputs)}")
        for i in range(self.n_inputs):
            if not self._input_ok(i, inputs[i]):
                inputs = self._check_inputs(inputs)
                break
        if out is None:
            return self._execute(inputs)
        return self._finish_out(out, self._execute_into(self._prepare_out(out, inputs), inputs))

    def exact_caller(self, int n_args, tuple extra, list alias_pairs, list write_back, list results,
                     bint single, object build):
        """A fast caller for a frontend that calls this executable with `n_args` arguments followed
        by `extra`; see `ExactCall`."""
        return ExactCall(self, n_args, extra, alias_pairs, write_back, results, single, build)

    cdef inline bint _input_ok(self, Py_ssize_t i, object x):
        """The fast check: an ndarray of the exact native dtype and shape (anything else takes the
        slow, explaining path)."""
        cdef cnp.ndarray a
        cdef int d
        cdef const Py_ssize_t* dims
        if type(x) is not cnp.ndarray or self.in_type[i] < 0:   # cnp: a C pointer, no lookup
            return False
        a = <cnp.ndarray>x
        if (cnp.PyArray_TYPE(a) != self.in_type[i] or not cnp.PyArray_ISNOTSWAPPED(a)
                or cnp.PyArray_NDIM(a) != self.in_nd[i]):
            return False
        dims = &self.in_dims[i * MAXD]
        for d in range(self.in_nd[i]):
            if cnp.PyArray_DIMS(a)[d] != dims[d]:
                return False
        return True

    cdef inline list _take_arena(self):
        cdef list work = self.spare
        if work is not None:
            self.spare = None
            return work
        if self.arenas:
            return self.arenas.pop()
        return self._new_arena()

    cdef inline void _give_back(self, list work):
        cdef Py_ssize_t i
        for i in range(self.n_per_call):
            work[self.per_call[i]] = None
        if self.spare is None:
            self.spare = work
        else:
            self.arenas.append(work)

    cdef int _run_steps(self, list work, tuple inputs) except -1:
        cdef Py_ssize_t i
        cdef object step
        cdef int nthreads = _num_threads
        for i in range(self.n_inputs):
            work[i] = inputs[i]
        for step in self.steps:
            if type(step) is FusedCall:
                (<FusedCall>step).call(work, nthreads)
            else:
                step(work, nthreads)
        return 0

    cdef tuple _execute(self, tuple inputs):
        """Run on checked inputs into fresh outputs; the outputs, as a tuple."""
        cdef Py_ssize_t j
        cdef OutSpec* o
        cdef list work = self._take_arena()
        cdef tuple result
        cdef object value
        try:
            for j in range(self.n_outputs):
                o = &self.outs[j]
                if o.mode == 0:
                    work[o.slot] = _new_output(o)
            self._run_steps(work, inputs)
            result = PyTuple_New(self.n_outputs)
            for j in range(self.n_outputs):
                o = &self.outs[j]
                value = work[o.slot]
                if o.mode == 1:
                    copied = _new_output(o)
                    np.copyto(copied, value)
                    value = copied
                elif o.mode == 3:
                    value = np.array(value, copy=True)
                Py_INCREF(value)
                PyTuple_SET_ITEM(result, j, value)
        finally:
            self._give_back(work)
        return result

    cdef list _execute_into(self, list outs, tuple inputs):
        """Run on checked inputs with the steps writing `outs` (from `_prepare_out`); `outs`."""
        cdef Py_ssize_t j
        cdef OutSpec* o
        cdef list work = self._take_arena()
        try:
            for j in range(self.n_outputs):
                if self.outs[j].mode == 0:
                    work[self.outs[j].slot] = outs[j]
            self._run_steps(work, inputs)
            for j in range(self.n_outputs):
                o = &self.outs[j]
                if o.mode == 1:
                    np.copyto(outs[j], work[o.slot])
        finally:
            self._give_back(work)
        return outs


cdef inline object _new_output(OutSpec* o):
    """A fresh array for output o (its size computed once, at setup)."""
    if o.nbytes < RECYCLE_MIN_BYTES:
        return cnp.PyArray_EMPTY(o.nd, o.dims, o.typenum, 0)
    return _recycled_array(o.nd, o.dims, o.typenum, o.nbytes)


cdef class ExactCall:
    """A frontend's call of one executable reduced to C: `run(args)` checks that each argument is
    exactly the array the executable was compiled for (an ndarray, not a subclass, of its native
    dtype and shape) and returns `NotImplemented` when one is not, having run nothing; the caller
    then takes its general path, which explains or converts. Otherwise it runs the executable on
    `args + extra` (module state), copies the outputs `write_back` names, as (output, input), into
    their inputs unless the executable computed them there, and returns the result: `results` lists
    its items, output j as j and input i (an argument returned as itself) as -1 - i; the first item
    when `single`, else their tuple, passed to `build` when given.

    `alias_pairs` are (written input, other input), indices into `args + extra` (module state is an
    input too): when the memory bounds of such a pair overlap, `run` returns `NotImplemented` too, so
    the caller's exact check decides (refuse, or run).
    Holds no per-call state: one ExactCall serves concurrent calls.
    """
    cdef CallRunner runner
    cdef Py_ssize_t n_args, n_pairs, n_write, n_results
    cdef tuple extra
    cdef Py_ssize_t* pairs
    cdef Py_ssize_t* write
    cdef Py_ssize_t* results
    cdef bint single, prefix        # prefix: the results are the first n_results outputs
    cdef object build

    def __cinit__(self, CallRunner runner not None, Py_ssize_t n_args, tuple extra, list alias_pairs,
                  list write_back, list results, bint single, object build):
        cdef Py_ssize_t k, n = n_args + len(extra)
        if n != runner.n_inputs:
            raise ValueError(f"the executable takes {runner.n_inputs} inputs, got {n_args} + {len(extra)}")
        if single and len(results) != 1:
            raise ValueError(f"a single result, but {len(results)} results listed")
        self.runner, self.n_args, self.extra, self.single, self.build = runner, n_args, extra, single, build
        self.n_pairs, self.n_write, self.n_results = len(alias_pairs), len(write_back), len(results)
        self.pairs = <Py_ssize_t*>malloc(max(1, 2 * self.n_pairs) * sizeof(Py_ssize_t))
        self.write = <Py_ssize_t*>malloc(max(1, 2 * self.n_write) * sizeof(Py_ssize_t))
        self.results = <Py_ssize_t*>malloc(max(1, self.n_results) * sizeof(Py_ssize_t))
        if not self.pairs or not self.write or not self.results:
            raise MemoryError()
        for k, (i, j) in enumerate(alias_pairs):
            if not (0 <= i < n and 0 <= j < n):
                raise ValueError(f"alias pair {(i, j)} out of range for {n} inputs")
            self.pairs[2 * k], self.pairs[2 * k + 1] = i, j
        for k, (j, i) in enumerate(write_back):
            if not (0 <= j < runner.n_outputs and 0 <= i < n):
                raise ValueError(f"write-back {(j, i)} out of range")
            self.write[2 * k], self.write[2 * k + 1] = j, i
        for k, r in enumerate(results):
            if not -n <= r < runner.n_outputs:
                raise ValueError(f"result {r} out of range for {runner.n_outputs} outputs and {n} inputs")
            self.results[k] = r
        self.prefix = results == list(range(len(results)))

    def __dealloc__(self):
        free(self.pairs)
        free(self.write)
        free(self.results)

    def run(self, tuple args):
        cdef Py_ssize_t k, r, n = len(args)
        cdef CallRunner runner = self.runner
        cdef tuple inputs, outs, result
        cdef object target, new, item
        if n != self.n_args:
            return NotImplemented
        for k in range(n):
            if not runner._input_ok(k, args[k]):
                return NotImplemented
        if self.extra:
            for k in range(len(self.extra)):
                if not runner._input_ok(n + k, self.extra[k]):
                    return NotImplemented
            inputs = args + self.extra
        else:
            inputs = args
        for k in range(self.n_pairs):
            if _bounds_overlap(<cnp.ndarray>inputs[self.pairs[2 * k]], <cnp.ndarray>inputs[self.pairs[2 * k + 1]]):
                return NotImplemented
        outs = runner._execute(inputs)
        for k in range(self.n_write):
            new, target = outs[self.write[2 * k]], inputs[self.write[2 * k + 1]]
            if new is not target:
                _copy_back(<cnp.ndarray>target, new)
        if self.single:
            r = self.results[0]
            return outs[r] if r >= 0 else inputs[-1 - r]
        if self.prefix:
            result = outs if self.n_results == len(outs) else outs[:self.n_results]
        else:
            result = PyTuple_New(self.n_results)
            for k in range(self.n_results):
                r = self.results[k]
                item = outs[r] if r >= 0 else inputs[-1 - r]
                Py_INCREF(item)
                PyTuple_SET_ITEM(result, k, item)
        return result if self.build is None else self.build(result)


cdef int _copy_back(cnp.ndarray target, object new) except -1:
    """NumPy's ``np.copyto(target, new, casting="no")``, in C when `new` is an array of the same dtype
    and shape."""
    cdef cnp.ndarray a
    cdef int d
    if type(new) is cnp.ndarray:
        a = <cnp.ndarray>new
        if cnp.PyArray_TYPE(a) == cnp.PyArray_TYPE(target) and cnp.PyArray_NDIM(a) == cnp.PyArray_NDIM(target):
            for d in range(cnp.PyArray_NDIM(a)):
                if cnp.PyArray_DIMS(a)[d] != cnp.PyArray_DIMS(target)[d]:
                    break
            else:
                return cnp.PyArray_CopyInto(target, a)
    np.copyto(target, new, casting="no")
    return 0


cdef bint _bounds_overlap(cnp.ndarray a, cnp.ndarray b):
    """Whether the memory bounds of two arrays overlap (NumPy's ``may_share_memory``)."""
    cdef Py_ssize_t alo, ahi, blo, bhi
    if not _bounds(a, &alo, &ahi) or not _bounds(b, &blo, &bhi):
        return False
    return alo < bhi and blo < ahi


cdef bint _bounds(cnp.ndarray a, Py_ssize_t* lo, Py_ssize_t* hi):
    """The byte range [lo, hi) an array's elements lie in; False for an empty array."""
    cdef int d
    cdef Py_ssize_t n, s, low = <Py_ssize_t>cnp.PyArray_DATA(a), high = low
    for d in range(cnp.PyArray_NDIM(a)):
        n = cnp.PyArray_DIMS(a)[d]
        if n == 0:
            return False
        s = cnp.PyArray_STRIDES(a)[d] * (n - 1)
        if s > 0:
            high += s
        else:
            low += s
    lo[0], hi[0] = low, high + cnp.PyArray_ITEMSIZE(a)
    return True


# ---------------------------------------------------------------------------------------------
# Recycled output memory. A large fresh output costs more in page faults than a fused pass takes
# to fill it (40 MB: ~4 ms). Outputs are still fresh arrays the caller owns, but their memory
# comes from blocks that earlier outputs gave back when the caller dropped them: already faulted
# in, on huge pages. A block is reused only after its array (and every view of it) is gone.

cdef size_t RECYCLE_MIN_BYTES = 1 << 20
cdef size_t RECYCLE_MAX_CACHED = 1 << 29          # bytes kept for reuse, all sizes together
cdef int RECYCLE_PER_SIZE = 4
cdef size_t _cached_bytes = 0
cdef dict _free_blocks = {}                        # nbytes -> list of addresses (under the GIL)


cdef class _Block:
    """Owns one block of output memory; its dealloc hands the block back (or frees it)."""
    cdef void* ptr
    cdef size_t nbytes

    def __dealloc__(self):
        global _cached_bytes
        cdef list free_list
        if self.ptr == NULL:
            return
        if (_free_blocks is not None and _cached_bytes + self.nbytes <= RECYCLE_MAX_CACHED):
            free_list = _free_blocks.setdefault(self.nbytes, [])
            if len(free_list) < RECYCLE_PER_SIZE:
                free_list.append(<size_t>self.ptr)
                _cached_bytes += self.nbytes
                return
        free(self.ptr)


cdef object _recycled_array(int nd, cnp.npy_intp* dims, int typenum, size_t nbytes):
    global _cached_bytes
    cdef _Block block = _Block.__new__(_Block)
    cdef list free_list = _free_blocks.get(nbytes)
    if free_list:
        block.ptr = <void*><size_t>free_list.pop()
        _cached_bytes -= nbytes
    else:
        block.ptr = nt_alloc_large(nbytes)
        if block.ptr == NULL:
            raise MemoryError(f"cannot allocate an output of {nbytes} bytes")
    block.nbytes = nbytes
    arr = cnp.PyArray_SimpleNewFromData(nd, dims, typenum, block.ptr)
    cnp.set_array_base(arr, block)
    return arr

