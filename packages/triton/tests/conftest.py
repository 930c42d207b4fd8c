"""Every test runs in Triton's interpreter mode, on host NumPy buffers, without a GPU or PyTorch.

``TRITON_INTERPRET`` must be set before Triton defines any kernel, so it is set here, at import time,
before any test module imports triton or numtrace_triton. Generated kernels go to a fresh directory,
removed at exit.
"""

import atexit
import os
import shutil
import tempfile

os.environ["TRITON_INTERPRET"] = "1"
if "NUMTRACE_TRITON_CACHE_DIR" not in os.environ:
    _dir = tempfile.mkdtemp(prefix="numtrace-triton-tests-")
    os.environ["NUMTRACE_TRITON_CACHE_DIR"] = _dir
    atexit.register(shutil.rmtree, _dir, True)

from numtrace_ir.testing import hypothesis_profiles

hypothesis_profiles.load()  # derandomized under CI
