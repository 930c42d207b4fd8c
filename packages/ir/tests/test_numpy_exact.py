"""The rule for comparing a backend with NumPy (`numtrace_ir.testing`): bit for bit where NumPy's result
is the same on every machine, within `NUMPY_ULPS` for math-library ufuncs. The last test checks the
rule itself against NumPy run twice, with its AVX-512 loops and with its AVX2 ones."""

import os
import subprocess
import sys

import numpy as np
import pytest
from numtrace_ir import registry, testing
from numtrace_ir.ops.elementwise import BINARY_UFUNCS, MATH_LIBRARY_UFUNCS, UNARY_UFUNCS

AVX2_ONLY = {"NPY_DISABLE_CPU_FEATURES": "AVX512_ICL X86_V4"}
SWEEP_DTYPES = ("float16", "float32", "float64", "complex64", "complex128")


def _up(x, k=1):
    """x moved k floats up."""
    for _ in range(k):
        x = np.nextafter(x, np.inf)
    return x


def test_ulp_distance_counts_the_floats_between():
    one = np.float64(1.0)
    a = np.array([one, 0.0, np.nan, np.nan, np.inf, 5e-324, -1.0, one])
    b = np.array([_up(one, 3), -0.0, np.nan, 1.0, np.finfo(np.float64).max, -5e-324, _up(-1.0), one])
    np.testing.assert_array_equal(testing.ulp_distance(a, b), [3, 0, 0, np.inf, 1, 2, 1, 0])
    f = np.float32(2.0)
    assert testing.ulp_distance(np.float32([f]), np.float32([_up(f, 5)]))[0] == 5
    assert testing.ulp_distance(np.complex128([1 + 1j]), np.complex128([_up(one) + 1j]))[0] == 1
    with pytest.raises(TypeError, match="one dtype"):
        testing.ulp_distance(np.ones(2), np.ones(2, np.float32))


@pytest.mark.parametrize(("op", "inputs", "exact"), [
    ("np.add", (np.ones(3), 2.0), True),
    ("np.sqrt", (np.ones(3),), True),
    ("np.divide", (np.ones(3, np.float32), np.ones(3, np.float32)), True),
    ("np.sum", (np.ones(3),), True),
    ("np.exp", (np.ones(3),), False),
    ("np.exp", (np.arange(3),), False),                       # an int array: the float64 loop
    ("np.power", (np.arange(3), 2), True),                    # the integer loop
    ("np.power", (np.ones(3), 2.5), False),
    ("np.absolute", (np.ones(3, np.complex128),), False),      # hypot
    ("np.absolute", (np.ones(3),), True),
    ("np.matmul", (np.ones((2, 2)), np.ones((2, 2))), False),  # the BLAS
])
def test_numpy_exact_classes(op, inputs, exact):
    assert testing.numpy_exact(op, inputs) is exact


def test_math_library_ufuncs_are_registry_ops():
    for u in MATH_LIBRARY_UFUNCS:
        assert registry.for_numpy(u).ufunc is u


def test_assert_matches_numpy_is_exact_or_within_ulps():
    x = np.linspace(0.1, 2, 50)
    want = np.exp(x)
    testing.assert_matches_numpy(_up(want, 2), want, "np.exp", [x])
    with pytest.raises(AssertionError, match="9 ulp"):
        testing.assert_matches_numpy(_up(want, 9), want, "np.exp", [x])
    with pytest.raises(AssertionError, match="special values"):
        testing.assert_matches_numpy(np.where(x > 1, np.nan, want), np.where(x > 1, np.inf, want), "np.exp",
                                     [x])
    with pytest.raises(AssertionError):
        testing.assert_matches_numpy(_up(x * 2), x * 2, "np.add", [x, x])
    with pytest.raises(AssertionError, match="signs"):
        testing.assert_matches_numpy(np.zeros(3), -np.zeros(3), "np.multiply", [x[:3], -0.0])
    with pytest.raises(AssertionError, match="float32"):
        testing.assert_matches_numpy(want.astype(np.float32), want, "np.exp", [x])


def test_assert_outputs_close_holds_a_math_op_to_ulps():
    """Given the op, a math-library result is held to NUMPY_ULPS, not the looser rtol of its dtype."""
    x = np.linspace(0.1, 2, 50)
    want, off = np.exp(x), np.exp(x) * (1 + 1e-12)   # thousands of ulps, within rtol 1e-9
    testing.assert_outputs_close(off, want)
    with pytest.raises(AssertionError, match="ulp"):
        testing.assert_outputs_close(off, want, op=registry.get("np.exp"), inputs=[x])
    testing.assert_outputs_close(off * 2, want * 2, op=registry.get("np.add"), inputs=[x, x])


def _numpy_results(n: int) -> dict[str, np.ndarray]:
    """Every registry ufunc on `math_sweep` inputs of each float and complex dtype it has a loop for."""
    out = {}
    with np.errstate(all="ignore"):
        for u in UNARY_UFUNCS + BINARY_UFUNCS:
            for dt in SWEEP_DTYPES:
                try:
                    loop = u.resolve_dtypes((np.dtype(dt),) * u.nin + (None,) * u.nout)
                except TypeError:
                    continue
                if loop[0] == dt:
                    results = u(*testing.math_sweep(u.nin, dt, n))
                    for i, r in enumerate(results if u.nout > 1 else (results,)):
                        out[f"{u.__name__}.{dt}.{i}"] = r
    return out


def _dispatch_target() -> str:
    from numpy.lib.introspect import opt_func_info

    return opt_func_info(func_name="^power$")["power"]["ddd"]["current"]


def test_the_rule_holds_between_numpys_avx512_and_avx2_loops(tmp_path):
    """NumPy with and without its AVX-512 loops (a second process): every result `numpy_exact` calls
    exact is the same bits, every math-library one within NUMPY_ULPS. Skipped where NumPy has no
    AVX-512 loops to turn off (both processes would run the same code)."""
    path = tmp_path / "avx2.npz"
    subprocess.run([sys.executable, __file__, str(path)], check=True, env={**os.environ, **AVX2_ONLY})
    with np.load(path) as f:
        narrow = {k: f[k] for k in f.files}
    if str(narrow.pop("target")) == _dispatch_target():
        pytest.skip(f"NumPy runs its {_dispatch_target()} loops either way on this CPU")
    wide = _numpy_results(2000)
    assert wide.keys() == narrow.keys()
    for key, got in narrow.items():
        name, dt, _ = key.split(".")
        op = registry.for_numpy(getattr(np, name))
        testing.assert_matches_numpy(got, wide[key], op, testing.math_sweep(op.ufunc.nin, dt, 2000),
                                     what=f"{name} {dt}, AVX2 against AVX-512")


if __name__ == "__main__":   # the second process of the test above
    np.savez(sys.argv[1], **_numpy_results(2000), target=np.array(_dispatch_target()))
