"""Hunt for wrong answers and wrong refusals around guards on array data and host calls: functions are
traced at one shape and value and called at others; every call returns what eager NumPy does (or
re-traces), never a refusal of a program NumPy runs."""

import warnings

import numpy as np
import numtrace as nt
import pytest

pytestmark = pytest.mark.triton   # small arrays: the interpreter runs them quickly


def _trace(f, *args, backend="reference"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return nt.trace(f, tuple(np.copy(a) for a in args), check_trace=False, backend=backend)


def _call(traced, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return traced(*args)


def _srgb_like(x):
    """colour's ``eotf_inverse_sRGB``: ``as_float`` converts a whole array with ``np.float64(a)``, so its
    value is a constant of the trace that a later ``np.where`` combines with the input."""
    y = np.float64(1.055 * np.abs(x) ** (1 / 2.4) - 0.055)
    return np.where(x <= 0.0031308, x * 12.92, y)


def test_array_converted_whole_then_combined_with_input_retraces_at_other_size(backend, rng):
    x = rng.random((5, 3))
    traced = _trace(_srgb_like, x, backend=backend)
    for n in (7, 5, 1, 7):
        z = rng.random((n, 3))
        np.testing.assert_allclose(_call(traced, z), _srgb_like(z), rtol=1e-15, atol=0)


def test_loaded_trace_refuses_other_size_naming_the_guard(backend, rng, tmp_path):
    x = rng.random((5, 3))
    path = tmp_path / "srgb.nt"
    _trace(_srgb_like, x, backend=backend).save(path)
    loaded = nt.load(path, backend=backend)
    np.testing.assert_allclose(_call(loaded, x), _srgb_like(x), rtol=1e-15, atol=0)
    with pytest.raises(nt.GuardError, match="loaded from a file"):
        _call(loaded, rng.random((7, 3)))


def _host_view_written(x):
    y = np.fft.fftshift(x)       # a host call whose result the trace writes in place
    y[0] = 2.0
    s = float(np.exp(y).sum())   # a guard on a transcendental reduction of it
    return y * s, y


def _module_like_guard_and_output(x):
    t = np.tanh(x) + x           # one node feeds both a guard and a returned output
    return t, t * t.sum().item()


@pytest.mark.parametrize("f", [_host_view_written, _module_like_guard_and_output])
def test_guarded_host_results_agree_with_numpy_across_calls(f, backend, rng):
    x0 = rng.standard_normal((5, 3))
    traced = _trace(f, x0, backend=backend)
    kept = []
    for x in (x0, x0, rng.standard_normal((7, 3)), x0):
        arg = np.copy(x)
        got, want = _call(traced, arg), f(np.copy(x))
        np.testing.assert_array_equal(arg, x)    # the argument is not written
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0)
        kept.append((got, [np.copy(g) for g in got]))
    for got, snapshot in kept:                 # a later call changed no earlier call's results
        for g, s in zip(got, snapshot):
            np.testing.assert_array_equal(g, s)


def test_scipy_fft_of_a_traced_array_is_a_host_call(rng):
    # scipy.fft dispatches through uarray, not __array_function__: numtrace's uarray backend records it.
    sfft = pytest.importorskip("scipy.fft")
    x = rng.standard_normal((4, 3))
    traced = _trace(lambda a: sfft.rfft(a, axis=0), x)
    np.testing.assert_array_equal(_call(traced, x), sfft.rfft(x, axis=0))
    assert [n.attrs["func"] for n in traced.graph.nodes if n.op == "prim.host_call"] == ["scipy.fft.rfft"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        for shape in ((5, 3), (4, 3), (9, 2)):   # other shapes trace again
            y = rng.standard_normal(shape)
            np.testing.assert_array_equal(traced(y), sfft.rfft(y, axis=0))
        single = _trace(lambda a: sfft.rfft(a, axis=0), x.astype(np.float32))
        y = rng.standard_normal((7, 3)).astype(np.float32)
        got = single(y)
        assert got.dtype == np.complex64    # SciPy keeps single precision, unlike np.fft
        np.testing.assert_array_equal(got, sfft.rfft(y, axis=0))
        ortho = _trace(lambda a: sfft.dct(a, norm="ortho") * 2.0, x)
        np.testing.assert_array_equal(_call(ortho, x * 3), sfft.dct(x * 3, norm="ortho") * 2.0)
    assert sfft.rfft(x).dtype == np.complex128   # outside a trace, SciPy's own backend as before
