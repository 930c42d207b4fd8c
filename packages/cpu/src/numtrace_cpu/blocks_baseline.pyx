"""The block loops built for baseline x86-64 (or, off x86, the compiler's default target); see blocks.pxi."""
include "blocks.pxi"
include "line_passes.pxi"
include "gemv.pxi"
