"""The block interpreter built for x86-64-v3 (AVX2 + FMA); imported only where the CPU has both.
See fused_impl.pxi."""
include "fused_impl.pxi"
