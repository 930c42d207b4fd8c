"""The interpreter's ISA-independent half, compiled once into one extension module from the parts it
includes, each owning one idea:

- this file: the interpreter's tables (dtype and op codes from nt_opcodes.h) and the choice of the
  ISA build of the block loops every kernel runs on (`use_blocks`);
- fused_kernel.pxi: `FusedKernel`, the program loader and the per-call binding of a fused pass;
- call_runner.pxi: the thread count, `FusedCall` and `CallRunner`, the per-call loop of an executable;
- exact_call.pxi: `ExactCall`, a traced function's whole call (numtrace_ir.CallSpec) in C;
- output_recycler.pxi: recycled memory for large outputs.

They are included, not separate extensions, so the hot path's calls between them stay direct C
calls (inlined where marked) with no cimport across modules. One kernel can run from several Python
threads at once.
"""


cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t, uint64_t
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
cdef run_generated_fn _default_generated = NULL


cdef run_pass_fn _pass_of(object blocks) except NULL:
    return <run_pass_fn>PyCapsule_GetPointer(blocks.RUN_PASS, b"numtrace_cpu.run_pass")


cdef run_generated_fn _generated_of(object blocks) except NULL:
    return <run_generated_fn>PyCapsule_GetPointer(blocks.RUN_GENERATED, b"numtrace_cpu.run_generated")


BLOCK_ELEMENTS = BLOCK
"""Elements of the innermost dim per block of a reduction row (the tiles of a generated kernel)."""

UNIT_ELEMENTS = CHUNK
"""Elements of the innermost dim per work unit of an elementwise pass (NT_GEN_CHUNK in nt_gen.h)."""


def use_blocks(blocks):
    """Make `blocks` (an ISA build module: blocks_baseline, blocks_avx2, ...) the one that kernels
    built without an explicit `blocks=` run on. numtrace_cpu.isa calls it once, at import."""
    global _default_pass, _default_generated
    _default_pass = _pass_of(blocks)
    _default_generated = _generated_of(blocks)


# Work (elements x instructions) below which a pass stays on the calling thread: waking a sleeping


include "fused_kernel.pxi"
include "call_runner.pxi"
include "exact_call.pxi"
include "output_recycler.pxi"
