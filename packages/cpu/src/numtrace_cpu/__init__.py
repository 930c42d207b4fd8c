"""numtrace's CPU backend: traced graphs planned into fused, threaded Cython passes.

`Backend` is what the frontend loads (entry point ``cpu`` in group ``numtrace.backends``);
`compile_graph` does the same work without the cache. See docs/cpu.md.
"""

from numtrace_cpu.backend import Backend, compile_graph
from numtrace_cpu.executable import Executable
from numtrace_cpu.kernels import ISA
from numtrace_cpu.threads import get_num_threads, set_num_threads

__all__ = ["ISA", "Backend", "Executable", "compile_graph", "get_num_threads", "set_num_threads"]
