"""numtrace's CPU backend: traced graphs planned into fused, threaded Cython passes.

`Backend` is what the frontend loads (entry point ``cpu`` in group ``numtrace.backends``);
`compile_graph` does the same work without the cache. See docs/cpu.md.
"""

import os

# OpenMP threads that busy-wait between passes take the cores BLAS and the other passes need (on a
# 2-core machine that costs 10x): unless the user chose otherwise, the team sleeps between passes.
# libgomp reads this once, when numtrace_cpu.isa loads a build of the block loops below.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

from numtrace_cpu.backend import Backend, compile_graph
from numtrace_cpu.executable import Executable
from numtrace_cpu.isa import ISA
from numtrace_cpu.threads import get_num_threads, set_num_threads

__all__ = ["ISA", "Backend", "Executable", "compile_graph", "get_num_threads", "set_num_threads"]
