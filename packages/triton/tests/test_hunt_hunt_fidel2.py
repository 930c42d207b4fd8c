"""Hunt around np.clip on the Triton backend: a clip of ``-x`` keeps the NaN sign NumPy's
``np.negative`` gives (it flips the sign bit, of a NaN too), on a GPU too; arithmetic after it keeps the
sign in the interpreter, while a GPU's float32/float16 arithmetic returns the canonical NaN
(docs/guide/sharp-edges.md)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import ON_GPU
from numtrace_ir.testing.clip_cases import same_bits

nt = pytest.importorskip("numtrace")   # the frontend traces the programs (tests_triton runs without it)


def _trace(fn, example):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nt.trace(fn, example, backend="triton", check_trace=False)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("program", ["negative", "clip of negative", "operator"])
def test_negative_flips_the_sign_of_a_nan(dtype, program):
    x = np.array([np.nan, -np.nan, 0.0, -0.0, 1.0, -np.inf], dtype)
    lo, hi = np.array(-0.5, dtype), np.array(0.5, dtype)
    fn = {"negative": lambda x, lo, hi: np.negative(x),
          "clip of negative": lambda x, lo, hi: np.clip(np.negative(x), lo, hi),
          "operator": lambda x, lo, hi: -x * 1 + lo * 0}[program]
    traced = _trace(fn, (x, lo, hi))
    with np.errstate(all="ignore"):
        want = fn(x, lo, hi)
    got = traced(x, lo, hi)
    same = same_bits(got, want)
    if ON_GPU and program == "operator" and dtype != np.float64:
        # NVIDIA's add.f32/add.f16 return 0x7fffffff/0x7fff for any NaN operand; add.f64 keeps its bits
        same |= np.isnan(got) & np.isnan(want)
    assert same.all()
