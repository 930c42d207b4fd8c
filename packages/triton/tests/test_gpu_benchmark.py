"""``benchmarks/gpu.py`` stays runnable: its ``--quick`` smoke run in Triton's interpreter checks every
workload against NumPy (gathers, scatters, mask reads and einsum included), and without a GPU and
without the interpreter it says so and exits 0."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu.py"


def _run(env: dict) -> subprocess.CompletedProcess:
    pytest.importorskip("numtrace")  # the benchmark traces with the frontend
    if not SCRIPT.exists():
        pytest.skip("benchmarks/ is not beside this package")
    return subprocess.run([sys.executable, str(SCRIPT), "--quick"], env=env, capture_output=True, text=True,
                          timeout=900, check=False)


def test_quick_run_in_the_interpreter_checks_every_workload():
    proc = _run({**os.environ, "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    for name in ("w1", "mlp", "gather", "scatter", "mask_read", "einsum_bmm", "einsum_trace"):
        assert f"\n{name} " in "\n" + proc.stdout, proc.stdout


def test_without_a_gpu_it_says_so_and_exits_0():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = _run({**env, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "no GPU benchmark" in proc.stdout
