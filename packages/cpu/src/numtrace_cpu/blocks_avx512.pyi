# The same build as blocks_baseline for another instruction set: see blocks_baseline.pyi.
from numtrace_cpu.blocks_baseline import *  # noqa: F403 (a stub re-exports every name)
