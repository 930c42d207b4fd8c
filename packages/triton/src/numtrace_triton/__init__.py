"""numtrace's Triton backend: fused GPU kernels generated from traced graphs.

Registered as ``triton`` in the ``numtrace.backends`` entry-point group. Under
``TRITON_INTERPRET=1`` every kernel runs on the CPU in Triton's interpreter on
host NumPy buffers (how the tests run, without a GPU or PyTorch).
"""

from .backend import Backend, generate
from .device_memory import DeviceAllocator, select_allocator
from .emit_body import GeneratedKernel, Tuning
from .executable import KernelInfo, TritonExecutable
from .host_buffer import HostBuffer
from .kernel_cache import cache_dir, set_cache_dir

__all__ = [
    "Backend",
    "DeviceAllocator",
    "GeneratedKernel",
    "HostBuffer",
    "KernelInfo",
    "TritonExecutable",
    "Tuning",
    "cache_dir",
    "generate",
    "select_allocator",
    "set_cache_dir",
]
