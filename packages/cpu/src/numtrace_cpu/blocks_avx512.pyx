"""The block loops built for x86-64-v4 (AVX-512 F/BW/CD/DQ/VL, 512-bit vectors); see blocks.pxi."""
include "blocks.pxi"
include "line_passes.pxi"
include "gemv.pxi"
