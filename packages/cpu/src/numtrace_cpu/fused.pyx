"""The block interpreter built for the baseline x86-64 ISA; see fused_impl.pxi."""
include "fused_impl.pxi"
