"""The fast path of a traced call (the last executable's exact caller, on backends that offer one):
every call it takes gives NumPy's answer, and every call it declines gets the general path's
handling (re-specializing, converting, or the same clear error)."""

import threading
import warnings

import numpy as np
import numtrace as nt
import pytest

SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e308, -1e-310, 5e-324])


def axpy(x, y):
    return x * y + 1.0


def sgd(w, m, g):
    m *= 0.9
    m += g
    w -= 0.01 * m


def _values(rng, shape, dtype=np.float64):
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[: min(flat.size, SPECIALS.size)] = SPECIALS[: flat.size].astype(dtype)
    return x


def _fast_engaged(traced, backend):
    """The CPU backend offers the fast path: after a call it is set, so these tests exercise it."""
    if backend == "cpu":
        assert traced._fast is not None
    return traced._fast is not None


@pytest.mark.parametrize("shape", [(1000,), (7,), (3, 5), (2, 3, 4), ()])
def test_fast_calls_match_numpy_with_special_values(backend, rng, shape):
    x0, y0 = _values(rng, shape), _values(rng, shape)
    with np.errstate(all="ignore"):
        traced = nt.trace(axpy, (x0, y0), backend=backend)
        for _ in range(3):
            x, y = _values(rng, shape), _values(rng, shape)
            np.testing.assert_array_equal(traced(x, y), axpy(x, y))
    _fast_engaged(traced, backend)
    if not shape:   # NumPy scalars for 0-d array arguments are refused (NumPy's operators differ on them)
        with pytest.raises(TypeError, match="is the NumPy scalar float64, but the function was traced "
                                            "with an array there"):
            traced(np.float64(2.0), np.float64(3.0))
        np.testing.assert_array_equal(traced(np.array(2.0), np.array(4.0)), 9.0)
        # Traced with NumPy scalars: the general path serves them (the fast path takes ndarrays only)
        scalars = nt.trace(axpy, (np.float64(2.0), np.float64(3.0)), backend=backend)
        for _ in range(3):
            assert scalars(np.float64(2.0), np.float64(4.0)) == 9.0 and scalars._fast is None


def test_non_contiguous_arguments_on_the_fast_path(backend, rng):
    base = rng.standard_normal((6, 10))
    traced = nt.trace(axpy, (np.ones((5, 6)), np.ones((5, 6))), backend=backend)
    traced(np.ones((5, 6)), np.ones((5, 6)))
    _fast_engaged(traced, backend)
    x, y = base.T[1:6], base[::-1, ::2].T   # (5, 6) each: a transposed slice, reversed rows
    assert not x.flags.c_contiguous and not y.flags.c_contiguous
    np.testing.assert_array_equal(traced(x, y), axpy(x, y))
    np.testing.assert_array_equal(traced(y, x), axpy(y, x))


def test_new_shapes_after_many_fast_calls_specialize_again(backend, rng):
    traced = nt.trace(axpy, (np.ones(5), np.ones(5)), backend=backend)
    for _ in range(50):
        x, y = rng.standard_normal(5), rng.standard_normal(5)
        np.testing.assert_array_equal(traced(x, y), axpy(x, y))
    for n in (7, 5, 1, 7, 0):
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        got = traced(x, y)
        assert got.shape == (n,)
        np.testing.assert_array_equal(got, axpy(x, y))
    assert len(traced.stats()["signatures"]) == 4


def test_a_guarded_shape_after_fast_calls_traces_again(backend):
    def head(x):
        return x[: x.shape[0] // 2] * 2.0 if x.shape[0] > 4 else x + 1.0

    traced = nt.trace(head, (np.arange(6.0),), backend=backend)
    for _ in range(20):
        np.testing.assert_array_equal(traced(np.arange(6.0)), head(np.arange(6.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        np.testing.assert_array_equal(traced(np.arange(3.0)), head(np.arange(3.0)))
    np.testing.assert_array_equal(traced(np.arange(8.0)), head(np.arange(8.0)))
    assert traced.retraces == 1


def test_arguments_the_fast_path_declines_take_the_general_path(backend, rng):
    class Sub(np.ndarray):
        pass

    traced = nt.trace(axpy, (np.ones(4), np.ones(4)), backend=backend)
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    for _ in range(10):
        traced(x, y)
    _fast_engaged(traced, backend)
    with pytest.raises(TypeError, match="ndarray subclass"):   # its meaning may differ: refused
        traced(x.view(Sub), y)
    got = traced(np.float64(2.0) * np.ones(4), y)   # still an exact array: the fast path
    np.testing.assert_array_equal(got, 2.0 * y + 1.0)
    with pytest.raises(TypeError, match="non-native byte order"):
        traced(x.astype(">f8"), y)
    with pytest.raises(TypeError, match="has dtype float32"):
        traced(x.astype(np.float32), y)
    with pytest.raises(TypeError, match=r"takes 2 array argument\(s\) \(x, y\) as traced, got 3"):
        traced(x, y, y)
    with pytest.raises(TypeError, match="must be a NumPy array"):
        traced([1.0, 2.0, 3.0, 4.0], y)
    with pytest.raises(ValueError, match="dimension"):
        traced(x.reshape(2, 2), y.reshape(2, 2))
    np.testing.assert_array_equal(traced(y=y, x=x), axpy(x, y))
    np.testing.assert_array_equal(traced(x, y), axpy(x, y))


def test_in_place_update_on_the_fast_path_writes_back_like_numpy(backend, rng):
    traced = nt.trace(sgd, (np.ones(999, np.float32), np.ones(999, np.float32), np.ones(999, np.float32)),
                      backend=backend)
    w, m = rng.standard_normal(999).astype(np.float32), rng.standard_normal(999).astype(np.float32)
    ew, em = w.copy(), m.copy()
    for _ in range(5):
        g = rng.standard_normal(999).astype(np.float32)
        assert traced(w, m, g) is None
        sgd(ew, em, g)
        np.testing.assert_allclose(w, ew, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(m, em, rtol=1e-6, atol=1e-7)
    _fast_engaged(traced, backend)


def test_aliasing_is_refused_after_fast_calls_and_disjoint_interleaved_views_run(backend, rng):
    traced = nt.trace(sgd, (np.ones(8), np.ones(8), np.ones(8)), backend=backend)
    for _ in range(5):
        traced(np.ones(8), np.ones(8), np.ones(8))
    shared = np.ones(8)
    with pytest.raises(ValueError, match="shares memory with argument"):
        traced(shared, np.ones(8), shared)
    with pytest.raises(ValueError, match="shares memory with argument"):
        traced(np.ones(8), shared, shared[::-1])
    # Bounds overlap but no element is shared: the exact check lets it run.
    buf = rng.standard_normal(16)
    w, m, g = buf[0::2], buf[1::2], rng.standard_normal(8)
    ew, em = w.copy(), m.copy()
    traced(w, m, g)
    sgd(ew, em, g)
    np.testing.assert_allclose(buf[0::2], ew, rtol=1e-12)
    np.testing.assert_allclose(buf[1::2], em, rtol=1e-12)


@pytest.fixture
def generated_on_two_threads(backend):
    """On the cpu backend: passes compiled to C before the first call, run on two threads (a large
    pass's chunks then split over the thread team)."""
    if backend != "cpu":
        yield
        return
    import numtrace_cpu
    from numtrace_cpu import compiler

    old_mode, old_threads = compiler.set_mode("sync"), numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(2)
    try:
        yield
    finally:
        numtrace_cpu.set_num_threads(old_threads)
        compiler.set_mode(old_mode)


def test_large_in_place_update_keeps_numpys_bits_and_refuses_aliasing(backend, rng, generated_on_two_threads):
    n = 1_000_003
    traced = nt.trace(sgd, tuple(np.ones(n, np.float32) for _ in range(3)), backend=backend)
    w, m = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    m[::1001] = -0.0
    ew, em = w.copy(), m.copy()
    for _ in range(3):
        g = rng.standard_normal(n).astype(np.float32)
        assert traced(w, m, g) is None
        sgd(ew, em, g)
        assert w.tobytes() == ew.tobytes() and m.tobytes() == em.tobytes()
    shared = np.ones(n, np.float32)
    for args in ((shared, shared, np.ones(n, np.float32)),        # w is m
                 (np.ones(n, np.float32), shared, shared),        # g is m
                 (shared[1:], shared[:-1], np.ones(n - 1, np.float32))):   # overlapping views
        if args[0].shape != (n,):
            traced(*(np.ones(n - 1, np.float32) for _ in range(3)))   # that shape's executable first
        with pytest.raises(ValueError, match="shares memory with argument"):
            traced(*args)
    assert np.all(shared == 1.0), "a refused call wrote nothing"
    # Disjoint interleaved views of one buffer: every element is its own, so the update runs.
    buf = rng.standard_normal(2 * n).astype(np.float32)
    w, m, g = buf[0::2], buf[1::2], rng.standard_normal(n).astype(np.float32)
    ew, em = w.copy(), m.copy()
    traced(w, m, g)
    sgd(ew, em, g)
    assert buf[0::2].tobytes() == ew.tobytes() and buf[1::2].tobytes() == em.tobytes()
    if backend == "cpu":
        runs = [s["generated_team_runs"] for s in traced.stats()["signatures"].values()]
        assert sum(runs) >= 4, runs


def test_written_argument_and_tuple_of_outputs(backend, rng):
    def step(a, b):
        a += 1.0
        return b * 2.0, b * 3.0

    traced = nt.trace(step, (np.zeros(4), np.ones(4)), backend=backend)
    for _ in range(3):
        a, b = np.zeros(4), rng.standard_normal(4)
        got = traced(a, b)
        assert isinstance(got, tuple) and len(got) == 2
        np.testing.assert_array_equal(got[0], b * 2.0)
        np.testing.assert_array_equal(got[1], b * 3.0)
        np.testing.assert_array_equal(a, 1.0)


def test_dict_output_and_returned_argument(backend, rng):
    def f(x, y):
        return {"sum": x + y, "diff": x - y}

    def scale(w):
        w *= 2.0
        return w

    traced = nt.trace(f, (np.ones(3), np.ones(3)), backend=backend, strict=False)
    for _ in range(3):
        x, y = rng.standard_normal(3), rng.standard_normal(3)
        got = traced(x, y)
        assert set(got) == {"sum", "diff"}
        np.testing.assert_array_equal(got["sum"], x + y)
        np.testing.assert_array_equal(got["diff"], x - y)
    traced_scale = nt.trace(scale, (np.ones(3),), backend=backend)
    for _ in range(3):
        w = rng.standard_normal(3)
        want = w * 2.0
        assert traced_scale(w) is w
        np.testing.assert_array_equal(w, want)
    _fast_engaged(traced_scale, backend)


def test_written_arguments_returned_among_outputs_are_the_callers_arrays(backend, rng):
    def step(w, g, m):
        sgd(w, m, g)
        return w, m, w * 2.0

    traced = nt.trace(step, (np.ones(5), np.ones(5), np.ones(5)), backend=backend)
    for _ in range(4):
        w, g, m = rng.standard_normal(5), rng.standard_normal(5), rng.standard_normal(5)
        ew, em = w.copy(), m.copy()
        got, want = traced(w, g, m), step(ew, g, em)
        assert got[0] is w and got[1] is m and len(got) == 3
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12)
    _fast_engaged(traced, backend)


def test_a_traced_function_called_while_tracing_after_fast_calls_is_inlined(backend, rng):
    inner = nt.trace(axpy, (np.ones(4), np.ones(4)), backend=backend)
    for _ in range(10):
        inner(np.ones(4), np.ones(4))

    def outer(x):
        return inner(x, x) * 2.0

    traced = nt.trace(outer, (np.ones(4),), backend=backend)
    assert any(n.op.endswith("multiply") for n in traced.graph.nodes)
    x = rng.standard_normal(4)
    np.testing.assert_array_equal(traced(x), axpy(x, x) * 2.0)


def test_module_state_on_the_fast_path_follows_load_state_dict(backend, rng):
    model = nt.nn.Linear(4, 3, seed=0)
    a = rng.standard_normal((2, 4))
    traced = nt.trace(model, a, backend=backend)
    for _ in range(5):
        np.testing.assert_allclose(traced(a), model(a), rtol=1e-12)
    state = {k: v * 2.0 for k, v in model.state_dict().items()}
    traced.load_state_dict(state)
    model.load_state_dict(state)
    np.testing.assert_allclose(traced(a), model(a), rtol=1e-12)


@pytest.mark.parametrize("threads", [1, 2])
def test_concurrent_calls_from_four_threads(backend, threads):
    try:
        from numtrace_cpu import threads as cpu_threads
    except ImportError:
        cpu_threads = None
    before = cpu_threads.get_num_threads() if cpu_threads else 1
    if cpu_threads:
        cpu_threads.set_num_threads(threads)
    try:
        n = 300_000 if threads == 2 else 1000   # large enough for a two-thread pass
        pure = nt.trace(axpy, (np.ones(n), np.ones(n)), backend=backend)
        update = nt.trace(sgd, (np.ones(n), np.ones(n), np.ones(n)), backend=backend)
        errors = []
        barrier = threading.Barrier(4)

        def worker(k):
            try:
                rng = np.random.default_rng(k)
                w, m = rng.standard_normal(n), rng.standard_normal(n)
                ew, em = w.copy(), m.copy()
                barrier.wait()
                for _ in range(20):
                    x, y, g = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
                    np.testing.assert_array_equal(pure(x, y), axpy(x, y))
                    update(w, m, g)
                    sgd(ew, em, g)
                np.testing.assert_allclose(w, ew, rtol=1e-12)
                np.testing.assert_allclose(m, em, rtol=1e-12)
            except BaseException as exc:   # reported below, with the thread's number
                errors.append((k, exc))

        workers = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        assert not errors, errors
    finally:
        if cpu_threads:
            cpu_threads.set_num_threads(before)
