"""The block loops built for x86-64-v3 (AVX2, FMA); see blocks.pxi."""
include "blocks.pxi"
include "line_passes.pxi"
include "gemv.pxi"
