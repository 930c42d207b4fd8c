"""The fused pass (included by runtime.pyx): the program loader and the per-call binding.

A `FusedKernel` holds a flat three-address program over typed block registers (plain C arrays
built from Python lists, so the lowering never cimports anything), validated here before it can
ever run. `FusedKernel.run()` validates every operand (count, dtype, shape broadcastable to the
iteration shape, outputs writable and exactly shaped) before any pointer is formed, collapses the
dims, picks the pass geometry (rows, columns, work units, threads) and hands the pass to one ISA
build of the block loops (blocks.pxi), with the GIL released (unless the pass is small: see
NOGIL_MIN_WORK); that build only visits indices inside the validated shape."""
# Work from which a full sum's one row is split (see _splits_row) and a column pass folding its inputs in
# place is cut for more than one thread.
cdef Py_ssize_t PARALLEL_MIN_WORK = 1 << 20

# Work from which a pass is shared by the thread team of nt_team.h: its workers spin after each job
# (NUMTRACE_TEAM_SPIN_US), so a job posted between two matrix products or passes costs about a
# microsecond, and a worker that is asleep or starved of a core only joins late (the caller claims
# every unit it has not started; a team that keeps missing backs off to the calling thread). Below
# this, a pass's work is a few microseconds, about what the job costs.
cdef Py_ssize_t TEAM_MIN_WORK = 1 << 17

# Work below which a pass keeps the GIL: giving it up and taking it back costs about 0.1 us, a
# sizeable part of a small call, and other Python threads wait no longer than such a pass runs.
cdef Py_ssize_t NOGIL_MIN_WORK = 1 << 14

# Elements up to which a pass with short rows (see _rows_per_block) that its generated kernel cannot
# run in blocks of rows (a reduction outside codegen.folds_in_registers' row blocks; an elementwise
# pass outside codegen.has_rows_path) runs on that kernel, which
# then walks one row per unit; a larger one keeps the interpreter's blocks of many rows. None: one
# unit per short row cost 0.5-4 us more than the interpreter's blocks on every small pass measured
# (benchmarks/realistic.py's small rows: logsumexp over rows of 10, softmax, image normalization).
# NUMTRACE_CODEGEN_SHORT_ROWS sets the limit: the tests raise it so generated code meets short rows.
cdef Py_ssize_t GENERATED_SHORT_ROWS_MAX = int(__import__("os").environ.get("NUMTRACE_CODEGEN_SHORT_ROWS", "0"))

# Elements below which a short row of a reduction runs generated in row blocks (nt_gen.h), summed in
# a register: the AVX2 and AVX-512 builds' NT_SUM_SEQUENTIAL_BELOW. Longer short rows keep the
# interpreter's batched sums (the generated kernel would call the build's fold once per row); on the
# baseline build these rows are folded by it too, with the same bits and at about its speed.
cdef Py_ssize_t GENERATED_ROW_BLOCK_MAX = 16

# Elements from which a full float sum/mean (one row) is shared by the thread team in rows of a
# block (see FusedKernel._run_split_row): a few chunks per thread.
cdef Py_ssize_t SPLIT_ROW_MIN = 8 * CHUNK


def _last_level_cache_bytes():
    """The largest CPU cache Linux's sysfs reports, or 32 MiB where it reports none."""
    import glob
    sizes = [0]
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as f:
                text = f.read().strip()
            sizes.append(int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}[text[-1]] if text[-1] in "KM" else int(text))
        except (OSError, ValueError):
            continue
    return max(sizes) or 32 << 20


# Output bytes of a pass from which a generated kernel writes them with streaming stores (see
# FusedKernel._streamed): outputs that do not fit the last-level cache would leave it anyway, and
# writing them through the cache costs a read of every line first. NUMTRACE_STREAM_MIN_BYTES sets the
# threshold (the tests lower it, so the fuzzers' generated passes meet both stores).
def _env_stream_min_bytes():
    """NUMTRACE_STREAM_MIN_BYTES, or the last-level cache's size where it is unset or empty. A value
    that is not a whole number of bytes of at least 1 is refused by name, as set_stream_min_bytes
    refuses it."""
    text = __import__("os").environ.get("NUMTRACE_STREAM_MIN_BYTES", "").strip()
    if not text:
        return _last_level_cache_bytes()
    value = int(text) if text.lstrip("+-").isdigit() else 0
    if value < 1:
        raise ValueError(f"NUMTRACE_STREAM_MIN_BYTES={text!r}: expected a number of bytes, at least 1")
    return value


cdef Py_ssize_t STREAM_MIN_BYTES = _env_stream_min_bytes()


def set_stream_min_bytes(Py_ssize_t nbytes):
    """Set the output bytes from which a generated pass streams its outputs; returns the old value."""
    global STREAM_MIN_BYTES
    if nbytes < 1:
        raise ValueError("the streaming threshold must be at least 1 byte")
    old, STREAM_MIN_BYTES = STREAM_MIN_BYTES, nbytes
    return old


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
    cdef run_generated_fn run_generated
    cdef void* generated           # an nt_gen_fn for this program (see set_generated), or NULL
    cdef object generated_owner    # what keeps the generated code loaded
    cdef bint generated_folds      # the generated kernel has column and row-block units (see set_generated)
    cdef bint generated_rows       # the generated kernel runs short rows in blocks of rows
    cdef bint generated_row_tiles  # the generated kernel reduces short rows in tiles of whole rows
    cdef readonly Py_ssize_t generated_runs, interpreted_runs
    cdef readonly Py_ssize_t generated_team_runs   # generated runs split over the thread team (nt_team.h)
    cdef readonly Py_ssize_t interpreted_team_runs   # interpreted runs split over the thread team
    cdef readonly Py_ssize_t generated_column_runs   # generated runs in column mode (middle-axis reductions)
    cdef readonly Py_ssize_t generated_row_block_runs   # generated runs reducing short rows in blocks of them
    cdef readonly Py_ssize_t rows_widened_runs   # passes whose short rows were walked along a longer dim
    cdef readonly Py_ssize_t streamed_runs       # generated passes that streamed their outputs
    cdef readonly Py_ssize_t generated_rows_runs # generated passes run in blocks of short rows
    cdef readonly Py_ssize_t generated_row_tile_runs   # generated reductions of short rows in tiles of rows
    cdef readonly Py_ssize_t generated_row_scalar_runs # generated tiles of rows reading per-row scalars in place
    cdef readonly Py_ssize_t generated_short_tile_runs # generated elementwise passes run in short tiles
    cdef Py_ssize_t short_from     # elements from which the kernel takes short tiles (codegen.short_tiles_from)
    cdef uint64_t row_scalars      # operands the generated kernel reads once per row (codegen.row_scalar_operands)
    cdef readonly Py_ssize_t shared_sum_runs     # interpreted reduction rows whose var/std took a sum's block sums
    cdef readonly Py_ssize_t split_row_runs      # full reductions whose one row ran as rows of a block (see _run_split_row)
    cdef bint shares_sums                        # some reduction's shares_sum is set
    cdef readonly Py_ssize_t extreme_rows_runs   # interpreted runs folding a max/min of blocks of short rows (_extreme_rows)
    cdef bint has_extremes                       # some reduction is a max or min
    cdef Py_ssize_t out_item_bytes               # bytes of one element of every output (not reduced) together
    cdef readonly tuple program    # the constructor's arguments but `blocks`, for numtrace_cpu.codegen
    cdef readonly tuple iteration_shape
    cdef readonly int n_instructions
    cdef char* scratch             # an idle scratch block of scratch_bytes, or NULL
    cdef size_t scratch_bytes

    def __cinit__(self, tuple shape, tuple reduce_axes, list regs, list consts, list instrs,
                  list reductions, list operands, object blocks=None):
        cdef int i, r
        if blocks is not None:
            self.run_pass = _pass_of(blocks)
            self.run_generated = _generated_of(blocks)
        elif _default_pass != NULL:
            self.run_pass = _default_pass
            self.run_generated = _default_generated
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
        self.program = (shape, reduce_axes, regs, consts, instrs, reductions, operands)
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
        for i, operand in enumerate(operands):   # (dtype, role[, codegen's per-row hint])
            dt, role = operand[0], operand[1]
            _check_code(dt, NDT, "operand dtype")
            _check_code(role, 3, "operand role")
            self.op_dt[i], self.op_role[i] = dt, role
            if role == ROLE_OUTPUT:
                self.out_item_bytes += nt_itemsize[dt]
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
            rd.shares_sum = -1
            if op == R_MAX or op == R_MIN:
                self.has_extremes = True
            if (op == R_VAR or op == R_STD) and (rd.dt == DT_F32 or rd.dt == DT_F64):
                for j in range(i):
                    if self.reds[j].src == src and (self.reds[j].op == R_SUM or self.reds[j].op == R_MEAN):
                        rd.shares_sum = j
                        self.shares_sums = True
                        break

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

    def set_generated(self, Py_ssize_t address, object owner, bint folds=False, bint rows=False,
                      bint row_tiles=False, uint64_t row_scalars=0, Py_ssize_t short_from=0):
        """Run this program's passes through the generated kernel at `address` (an nt_gen_fn built
        by numtrace_cpu.codegen from `program`; `owner` keeps its code loaded); 0 goes back to the
        interpreter. `folds`: the kernel has the column and row-block units of
        codegen.folds_in_registers, which then run a reduction in column mode or over short rows in
        the interpreter's units and blocks. `rows`: the kernel has the path for short rows
        (codegen.has_rows_path), which then runs an elementwise pass whose innermost dim is short in
        the interpreter's blocks of many rows. `row_tiles`: the kernel has the tiles of short rows for
        a reduction of its innermost dim (codegen.has_row_tiles), which then runs in the
        interpreter's blocks of rows where the row blocks of `folds` do not. Without them such a
        pass, when large, keeps the interpreter (see GENERATED_SHORT_ROWS_MAX), and so does a
        reduction in column mode or folding its inputs in place. `row_scalars`: the operands (bit k:
        operand k) that the kernel's tiles of rows read once per row where each is constant along the
        innermost dim (codegen.row_scalar_operands), counted in generated_row_scalar_runs.
        `short_from`: the elements from which the kernel runs an elementwise pass in short tiles
        (codegen.short_tiles_from; 0: never), counted in generated_short_tile_runs."""
        self.generated = <void*>address
        self.row_scalars = row_scalars if address else 0
        self.short_from = short_from if address else 0
        self.generated_owner = owner if address else None
        self.generated_folds = folds and address != 0
        self.generated_rows = rows and address != 0
        self.generated_row_tiles = row_tiles and address != 0

    @property
    def has_generated(self):
        """Whether a generated kernel is set."""
        return self.generated != NULL

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
        cx.stream = 0
        cx.row_tiles = False
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
            cx.raw_sums = 0
            if self._splits_row(&cx, nthreads):
                self._run_split_row(&cx, env, ids, nthreads)
            else:
                self._dispatch(&cx, env, ids, nthreads)
        finally:
            if self.nops > STACK_OPS:
                free(cx.strides)
                free(cx.data)
        return 0

    cdef int _dispatch(self, Ctx* cxp, list env, const Py_ssize_t* ids, int nthreads) except -1:
        """Pick the geometry of the bound, collapsed pass cxp and run it (generated or interpreted)."""
        cdef Ctx cx = cxp[0]
        cdef int nteam
        cdef Py_ssize_t units, chunk
        cdef size_t need
        cdef char* scratch
        if True:
            cx.cols = _columns_per_block(&cx)
            if cx.cols:
                _swap_last_dims(&cx)
            cx.fold_in_place = self.nred > 0 and self._folds_in_place(&cx)
            if cx.cols and cx.fold_in_place:
                cx.cols = _in_place_columns(cx.shape[cx.nd - 1], nthreads if self.work >= PARALLEL_MIN_WORK else 1)
            cx.rows = _rows_per_block(&cx)
            if cx.rows > 1 and not cx.cols and _widen_rows(&cx):
                self.rows_widened_runs += 1
            # Registers need no more elements than the longest block this pass runs.
            cx.reg_elems = cx.rows * (cx.cols if cx.cols else cx.shape[cx.nd - 1])
            cx.reg_elems = BLOCK if cx.reg_elems >= BLOCK else (cx.reg_elems + 7) & ~7
            cx.reg_stride = cx.reg_elems * 8 + REG_PAD
            cx.acc_offset = self.nregs * cx.reg_stride + 64
            cx.scratch_regs = cx.acc_offset + (self.nred * cx.cols * sizeof(Acc) if cx.cols else 0)
            units = _count_units(&cx)
            if units == 0:
                return 0
            nteam = _team_threads(self.work, units, nthreads)
            chunk = max(1, units // (8 * nteam))
            if (self.generated != NULL and self.generated_folds and not cx.fold_in_place
                    and (cx.cols or (cx.rows > 1 and self.nred and cx.shape[cx.nd - 1] < GENERATED_ROW_BLOCK_MAX))):
                # Column mode or row blocks: the interpreter's units and blocks (see nt_gen.h's
                # nt_gen_reduce).
                self.generated_runs += 1
                if cx.cols:
                    self.generated_column_runs += 1
                else:
                    self.generated_row_block_runs += 1
                if nteam > 1:
                    self.generated_team_runs += 1
                if self.work < NOGIL_MIN_WORK:
                    self.run_generated(self.generated, &cx, nteam, units, chunk)
                else:
                    with nogil:
                        self.run_generated(self.generated, &cx, nteam, units, chunk)
                return 0
            if (self.generated != NULL and self.generated_row_tiles and self.nred and cx.rows > 1
                    and not cx.cols and not cx.fold_in_place):
                # A reduction of short rows the kernel's row blocks above do not take (a table op
                # such as exp, a max, rows of 16 or more): the interpreter's units and blocks of rows,
                # each block computed as one tile and its rows folded by the interpreter's
                # _fold_rows_of (see codegen's _row_tile_units).
                cx.row_tiles = True
                self.generated_runs += 1
                self.generated_row_tile_runs += 1
                self._count_row_scalars(&cx)
                if nteam > 1:
                    self.generated_team_runs += 1
                if self.work < NOGIL_MIN_WORK:
                    self.run_generated(self.generated, &cx, nteam, units, chunk)
                else:
                    with nogil:
                        self.run_generated(self.generated, &cx, nteam, units, chunk)
                return 0
            if (self.generated != NULL and not cx.cols and not cx.fold_in_place
                    and (cx.rows == 1 or self.size <= GENERATED_SHORT_ROWS_MAX
                         or (self.generated_rows and not self.nred))):
                if cx.rows > 1 and self.generated_rows and not self.nred:
                    self.generated_rows_runs += 1   # the interpreter's units of blocks of rows
                    self._count_row_scalars(&cx)
                else:
                    # The units of one-row blocks (see nt_gen.h), so the kernel is told rows of one
                    # (not its row blocks).
                    cx.rows = 1
                    units = _count_kept_units(&cx) if self.nred else _count_rows_units(&cx)
                    if self.short_from and not self.nred and _elements(&cx) >= self.short_from:
                        self.generated_short_tile_runs += 1   # the kernel's test (codegen's `total`)
                nteam = _team_threads(self.work, units, nthreads)
                chunk = max(1, units // (8 * nteam))
                self.generated_runs += 1
                if nteam > 1:
                    self.generated_team_runs += 1
                cx.stream = self._streamed(env, ids)
                if self.work < NOGIL_MIN_WORK:
                    self.run_generated(self.generated, &cx, nteam, units, chunk)
                else:
                    with nogil:
                        self.run_generated(self.generated, &cx, nteam, units, chunk)
                return 0
            self.interpreted_runs += 1
            if nteam > 1:
                self.interpreted_team_runs += 1
            if self.shares_sums and not cx.cols and cx.rows <= 1:
                self.shared_sum_runs += 1   # _reduction_row folds the shared block sums once
            if self.has_extremes and not cx.cols and cx.rows > 1:
                self.extreme_rows_runs += 1   # _fold_rows' max/min go through _extreme_rows
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
        return 0

    cdef void _count_row_scalars(self, const Ctx* cx) noexcept:
        """Count a run in tiles of rows whose kernel reads its per-row operands once per row: the
        condition codegen's _rows_units tests (`rowwise`): the program's own innermost length, and
        each of those operands constant along it (stride 0)."""
        cdef int k
        if not self.row_scalars or cx.shape[cx.nd - 1] != self.shape[self.ndim - 1]:
            return
        for k in range(cx.nops):
            if k < 64 and (self.row_scalars >> k) & 1 and cx.strides[k * MAXD + cx.nd - 1] != 0:
                return
        self.generated_row_scalar_runs += 1

    cdef bint _splits_row(self, const Ctx* cx, int nthreads):
        """Whether a pass that reduces everything to one value should run as `_run_split_row`: its
        row is long enough for a thread team, and each reduction is a float sum or mean (whose row is
        folded as 0 + the sum of block 0 + that of block 1 + ..., so block sums computed apart and added
        in the same order give the same bits). A pass that folds its inputs in place (no
        instructions) is left whole: its chunks are not blocks."""
        cdef int j, k
        if (nthreads < 2 or not self.nred or cx.nd != 1 or cx.nkept != 0 or self.work < PARALLEL_MIN_WORK
                or cx.shape[0] < SPLIT_ROW_MIN or self.nops > STACK_OPS or not self.ninstr):
            return False
        for j in range(self.nred):
            if (self.reds[j].op != R_SUM and self.reds[j].op != R_MEAN) or self.reds[j].shares_sum >= 0:
                return False
            if self.reds[j].dt != DT_F64 and self.reds[j].dt != DT_F32:
                return False
        # Rows of a block that no operand walks would be taken for columns (_columns_per_block).
        for k in range(self.nops):
            if self.op_role[k] != ROLE_REDUCED and cx.strides[k * MAXD] != 0:
                return True
        return False

    cdef int _run_split_row(self, Ctx* cx, list env, const Py_ssize_t* ids, int nthreads) except -1:
        """A full reduction's one row as rows of BLOCK elements (one unit each, so the team shares
        them) plus the rest: each writes its raw sum (cx.raw_sums) into a partial, and the partials
        are added here in block order, as the one row would have added its block sums."""
        cdef Ctx rows = cx[0], rest = cx[0]
        cdef Py_ssize_t strides2[STACK_OPS * MAXD]
        cdef Py_ssize_t strides3[STACK_OPS * MAXD]
        cdef char* data2[STACK_OPS]
        cdef char* data3[STACK_OPS]
        cdef Py_ssize_t n = cx.shape[0], nb = n // BLOCK, tail = n - nb * BLOCK, i, s
        cdef Py_ssize_t nparts = nb + (tail > 0)
        cdef int k, j
        cdef const Reduction* rd
        cdef double total
        cdef double* parts = <double*>malloc(nparts * self.nred * sizeof(double))
        if parts == NULL:
            raise MemoryError()
        try:
            rows.strides, rows.data, rest.strides, rest.data = strides2, data2, strides3, data3
            rows.nd, rows.nkept, rows.shape[0], rows.shape[1] = 2, 1, nb, BLOCK
            rest.nd, rest.nkept, rest.shape[0] = 1, 0, tail
            rows.raw_sums = rest.raw_sums = 1
            for k in range(self.nops):
                s = cx.strides[k * MAXD]
                strides2[k * MAXD], strides2[k * MAXD + 1] = s * BLOCK, s
                data2[k] = cx.data[k]
                strides3[k * MAXD] = s
                data3[k] = cx.data[k] + nb * BLOCK * s
            for j in range(self.nred):
                k = self.reds[j].out
                data2[k], strides2[k * MAXD], strides2[k * MAXD + 1] = <char*>(parts + j * nparts), sizeof(double), 0
                data3[k], strides3[k * MAXD] = <char*>(parts + j * nparts + nb), 0
            self._dispatch(&rows, env, ids, nthreads)
            if tail:
                self._dispatch(&rest, env, ids, 1)
            self.split_row_runs += 1
            for j in range(self.nred):
                rd = &self.reds[j]
                total = 0.0
                for i in range(nparts):   # as _fold's nt_gen_add: the first NaN, sign included
                    if total == total:
                        total = total + parts[j * nparts + i]
                if rd.op == R_MEAN:
                    total = total / <double>n
                if rd.dt == DT_F32:   # as blocks.pxi's _acc_store
                    (<float*>cx.data[rd.out])[0] = <float>total
                else:
                    (<double*>cx.data[rd.out])[0] = total
        finally:
            free(parts)
        return 0

    cdef uint64_t _streamed(self, list env, const Py_ssize_t* ids) except? 0:
        """Output operands (bit k: operand k) a generated kernel writes with streaming stores: those not
        reduced, when together they hold STREAM_MIN_BYTES or more, except any that shares memory with
        an input of the pass (an argument updated in place: the pass has just read its lines, so they
        are in the cache already, and may read them again)."""
        cdef int k, j
        cdef uint64_t mask = 0
        if self.size * self.out_item_bytes < STREAM_MIN_BYTES or self.nops > 64:
            return 0
        inputs = [env[ids[j] if ids else j] for j in range(self.nops) if self.op_role[j] == ROLE_INPUT]
        for k in range(self.nops):
            if self.op_role[k] == ROLE_OUTPUT:
                out = env[ids[k] if ids else k]
                if not any(np.may_share_memory(out, x) for x in inputs):
                    mask |= (<uint64_t>1) << k
        if mask:
            self.streamed_runs += 1
        return mask

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


cdef inline int _team_threads(Py_ssize_t work, Py_ssize_t units, int nthreads) noexcept nogil:
    """Threads of the team (nt_team.h) that run a pass of `work` in `units`."""
    if nthreads < 2 or units < 2 or work < TEAM_MIN_WORK:
        return 1
    return <int>units if units < nthreads else nthreads


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

cdef bint _widen_rows(Ctx* cx) noexcept nogil:
    """Swap the longest outer dim into dim nd-2 when the rows there cannot fill one block, e.g. the
    (n, 8, 4) of ``((x[:, None] - c[None]) ** 2).sum(-1)``: a unit then walks blocks of cx.rows rows
    instead of 8, so dispatch and fold setup are paid per block rather than per 32 elements. Every
    element and every reduced row (the innermost dim, whole in one block) is computed as before;
    only the order of the rows changes. Dims before nd-2 are kept ones in a reduction pass (see
    _rows_per_block), so kept dims stay first."""
    cdef int k, d, best = -1, rowd = cx.nd - 2
    cdef Py_ssize_t t
    if cx.nd < 3 or cx.shape[rowd] >= cx.rows:
        return False
    for d in range(rowd):
        if cx.shape[d] > cx.shape[rowd] and (best < 0 or cx.shape[d] > cx.shape[best]):
            best = d
    if best < 0:
        return False
    cx.shape[best], cx.shape[rowd] = cx.shape[rowd], cx.shape[best]
    for k in range(cx.nops):
        t = cx.strides[k * MAXD + best]
        cx.strides[k * MAXD + best] = cx.strides[k * MAXD + rowd]
        cx.strides[k * MAXD + rowd] = t
    return True

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


cdef inline Py_ssize_t _elements(const Ctx* cx) noexcept:
    """The elements of the pass's (collapsed) shape: the `total` of a generated kernel's short tiles."""
    cdef Py_ssize_t n = 1
    cdef int d
    for d in range(cx.nd):
        n *= cx.shape[d]
    return n

cdef Py_ssize_t _count_rows_units(const Ctx* cx) noexcept nogil:
    """Work units of an elementwise pass in one-row blocks (`_elementwise_unit`'s)."""
    cdef Py_ssize_t units = (cx.shape[cx.nd - 1] + CHUNK - 1) // CHUNK
    cdef int k
    for k in range(cx.nd - 1):
        units *= cx.shape[k]
    return units

cdef Py_ssize_t _count_kept_units(const Ctx* cx) noexcept nogil:
    """Work units of a reduction pass one reduction row at a time (`_reduction_row`'s)."""
    cdef Py_ssize_t units = 1
    cdef int k
    for k in range(cx.nkept):
        units *= cx.shape[k]
    return units

cdef int _check_code(object value, int limit, str what) except -1:
    if not isinstance(value, int) or not 0 <= value < limit:
        raise ValueError(f"invalid {what}: {value!r} (expected an int in [0, {limit}))")
    return 0
