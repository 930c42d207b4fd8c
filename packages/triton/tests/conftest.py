"""Every test runs in Triton's interpreter mode, on host NumPy buffers, without a GPU or PyTorch.

``TRITON_INTERPRET`` must be set before Triton defines any kernel, so it is set here, at import time,
before any test module imports triton or numtrace_triton. Generated kernels go to a fresh directory,
removed at exit. ``NUMTRACE_TRITON_TESTS_ON_GPU=1`` (``ci/gpu_check.sh`` on a CUDA machine) runs the same
tests on the GPU instead: the interpreter stays off, and the compile-only check below is not needed.
"""

import atexit
import dataclasses
import os
import shutil
import tempfile

import pytest
from numtrace_ir.testing import hypothesis_profiles  # numtrace_ir imports no triton

ON_GPU = os.environ.get("NUMTRACE_TRITON_TESTS_ON_GPU") == "1"
if ON_GPU:
    os.environ.pop("TRITON_INTERPRET", None)
else:
    os.environ["TRITON_INTERPRET"] = "1"
if "NUMTRACE_TRITON_CACHE_DIR" not in os.environ:
    _dir = tempfile.mkdtemp(prefix="numtrace-triton-tests-")
    os.environ["NUMTRACE_TRITON_CACHE_DIR"] = _dir
    atexit.register(shutil.rmtree, _dir, True)

hypothesis_profiles.load()  # derandomized under CI

# A test of the interpreter's own path (host memory, HostBuffer launches): skipped on a GPU.
INTERPRETER_ONLY = pytest.mark.skipif(ON_GPU, reason="the interpreter's path (host memory, HostBuffer "
                                      "launches); NUMTRACE_TRITON_TESTS_ON_GPU=1 runs on the GPU")


# -- every kernel a test runs also compiled for a GPU (see gpu_compile_check) ----------------------------
_CHECK = None


def pytest_configure(config):
    global _CHECK
    import gpu_compile_check

    ok, why = (False, "the tests run on the GPU") if ON_GPU else gpu_compile_check.enabled()
    if not ok:
        config._numtrace_gpu_compile = f"kernels not compiled for a GPU: {why}"
        return
    from numtrace_triton import backend, staged

    _CHECK = gpu_compile_check.GpuCompileCheck(workers=max(1, min(4, (os.cpu_count() or 2) - 1)))
    plan_graph = backend.plan_graph

    def plan_and_check(graph, tuning, by_reference=None):
        """The plan the test runs; the check compiles the GPU's form of it (libdevice math) instead."""
        plan = plan_graph(graph, tuning, by_reference)
        gpu = plan if tuning.libdevice else plan_graph(graph, dataclasses.replace(tuning, libdevice=True),
                                                       by_reference)
        _CHECK.add(gpu.kernels)
        return plan

    backend.plan_graph = staged.plan_graph = plan_and_check
    staged_init = staged.StagedExecutable.__init__

    def staged_init_and_check(self, *args, **kwargs):  # the mask reads' kernels (its plans are above)
        staged_init(self, *args, **kwargs)
        _CHECK.add(self.stage_kernels)

    staged.StagedExecutable.__init__ = staged_init_and_check


def pytest_runtest_setup(item):
    if _CHECK is not None:
        _CHECK.test = item.nodeid


def pytest_sessionfinish(session, exitstatus):
    if _CHECK is None:
        return
    count, failures = _CHECK.finish()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\n{count} distinct kernels run by the tests compiled for CUDA capability 90: "
                            f"{len(failures)} rejected")
        for f in failures:
            reporter.write_line(f)
    if failures:
        session.exitstatus = 1
