# What the ISA-independent runtime (runtime.pyx) and every ISA build of the block loops
# (blocks.pxi) share: the instruction set (from nt_opcodes.h), the program and pass structs, and the
# one function a build hands the runtime. Both sides cimport this file, so they agree on layouts.

from libc.stdint cimport int64_t, uint64_t

cdef extern from "nt_opcodes.h":
    enum:
        DT_BOOL, DT_I32, DT_I64, DT_F32, DT_F64, NCOMPUTE, DT_U8, DT_I8, DT_I16, DT_U16, DT_U32, DT_U64, NDT
        CAT_UNARY, CAT_UNARY_BOOL, CAT_BINARY, CAT_BINARY_BOOL, CAT_WHERE, CAT_CAST
        # No opcode is named here: the loops dispatch on them in C (nt_loops.h), and Python reads
        # them by name from nt_op_names (numtrace_cpu.runtime.OPS).
        NOPS
        R_SUM, R_MEAN, R_VAR, R_STD, R_MAX, R_MIN, NREDUCTIONS
    const Py_ssize_t nt_itemsize[]
    const char* const nt_op_names[]
    const int nt_op_category[]
    const unsigned int nt_op_dtypes[]
    const char* const nt_red_names[]
    const unsigned int nt_red_dtypes[]

cdef extern from "nt_fpflags.h" nogil:
    int nt_fp_take()
    void nt_fp_put(int flags)
    int nt_fp_numpy_bits(int flags)

cdef enum:
    # Elements per block: a register then takes at most 4 KiB, so a typical program's registers stay
    # in L1/L2 while each instruction streams over them, and the per-instruction dispatch is paid
    # once per 512 elements (measured against 256 and 1024: GELU-tanh on 128x1024 float32 ~18%
    # faster than 256, W1 ~8%). Threads take work in chunks of CHUNK elements (a multiple of BLOCK)
    # so per-unit setup is amortized.
    BLOCK = 512
    CHUNK = 16384
    # Column mode (see _columns_unit) takes at most BLOCK / 8 kept columns per block, so a block has at
    # least 8 rows to fold per column; a pass that folds its inputs in place takes up to IN_PLACE_COLS
    # (whole rows of a 1000-wide array: ~25% faster than two halves, each skipping the other's).
    MAXCOLS = 64
    IN_PLACE_COLS = 1024
    # Elements a reduction row folds at a time when it reads its input in place (see _reduction_row):
    # enough to amortize the call, few enough that an any/all stops soon after its decisive element.
    IN_PLACE_CHUNK = 4096
    # Scratch registers are spaced by their size plus REG_PAD bytes: registers a multiple of 4 KiB
    # apart alias in the CPU's store-to-load check, and an instruction that reads one while writing
    # the other stalls (4K aliasing).
    REG_PAD = 192
    MAXD = 64

cdef enum:
    REG_TEMP = 0
    REG_INPUT = 1
    REG_CONST = 2
    REG_OUTPUT = 3

cdef enum:
    ROLE_INPUT = 0
    ROLE_OUTPUT = 1
    ROLE_REDUCED = 2

cdef struct Instr:
    int op, cat, dt, dst, a, b, c
    # 1: dst is a temporary register that the next instruction reads in one operand slot and nothing
    # reads after it (set when the program is loaded), so the two may run as one loop (nt_pairs.h).
    int feeds_next

cdef struct Reduction:
    int op, dt, src, out
    double ddof
    # A float var/std whose source register an earlier float sum/mean of this pass also folds: the
    # index of that reduction (its block sum is this one's, the same nt_sum of the same elements),
    # else -1. Set when the program is loaded; a layer norm's mean and var are the case.
    int shares_sum

cdef struct Acc:
    # Running state of one reduction over one row.
    double s, mean, m2, fext
    int64_t iacc, iext
    Py_ssize_t count
    int nan
    # A float max/min's first NaN (see blocks.pxi's _nan_result): its bits (the element's own bytes,
    # so that a float32 signaling NaN is not quieted by a pass through a double), its position in
    # the row, and whether it is stored wherever it lies (a column, which NumPy folds element by element).
    uint64_t nanbits
    Py_ssize_t nanpos
    int nan_kept

cdef struct Ctx:
    # Everything a pass needs, built per call by FusedKernel._run; read-only while threads run.
    int nregs, ninstr, nred, nops, nd, nkept
    const Instr* instrs
    const Reduction* reds
    const int* reg_kind
    const int* reg_arg
    const int* reg_dt
    const int* op_role
    const double* fconsts       # constant values, as double and as int64 (see _fill_consts)
    const int64_t* iconsts
    Py_ssize_t shape[MAXD]
    Py_ssize_t* strides         # nops x MAXD byte strides over the collapsed dims
    char** data                 # nops base pointers
    Py_ssize_t reg_elems        # elements per scratch register (BLOCK, or less for short passes)
    Py_ssize_t rows             # rows of the innermost dim per block (> 1 only when it is short)
    Py_ssize_t cols             # column mode (see _columns_unit): kept columns per block, else 0
    bint fold_in_place          # a reduction pass with no instructions whose reductions read their inputs in place
    Py_ssize_t acc_offset       # column mode: where a thread's per-column accumulators start in its scratch
    Py_ssize_t reg_stride       # bytes from one scratch register to the next (see REG_PAD)
    Py_ssize_t scratch_regs     # bytes of scratch per thread: nregs registers of 8-byte elements
    uint64_t stream             # generated kernels: bit k, write output operand k with streaming stores
    bint row_tiles              # generated kernels: a reduction of short rows run in tiles of cx.rows rows
    bint raw_sums               # each reduction is a float sum/mean: store its running sum as a double, undivided

# One pass over cx's units on `nteam` threads (scratch holds nteam * cx.scratch_regs bytes), taking
# `chunk` units at a time: what an ISA build provides, as the capsule RUN_PASS named
# "numtrace_cpu.run_pass".
ctypedef void (*run_pass_fn)(const Ctx* cx, char* scratch, int nteam, Py_ssize_t units,
                             Py_ssize_t chunk) noexcept nogil

# The same units of an elementwise pass run by a generated kernel (`kernel`, an nt_gen_fn: see
# nt_gen.h and numtrace_cpu.codegen) instead of the interpreter, as the capsule RUN_GENERATED named
# "numtrace_cpu.run_generated".
ctypedef void (*run_generated_fn)(void* kernel, const Ctx* cx, int nteam, Py_ssize_t units,
                                  Py_ssize_t chunk) noexcept nogil
