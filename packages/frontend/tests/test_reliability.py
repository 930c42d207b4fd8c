"""Reliability of traced callables: hostile saved files through ``numtrace.load``, bad arguments on every
backend, threads, and (in the nox ``stress`` session) memory growth over many calls.

Every case gives NumPy's result or a clear Python exception, never a crash. ``NUMTRACE_STRESS=1``
turns on the long runs (8 threads x 10k calls, 1M calls and 10k trace cycles for RSS growth).
"""

from __future__ import annotations

import io
import math
import os
import threading
import warnings
import zipfile

import numpy as np
import numtrace as nt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numtrace.backends import get_backend

STRESS = os.environ.get("NUMTRACE_STRESS") == "1"
FILE_EXAMPLES = int(os.environ.get("NUMTRACE_FUZZ_FILE_EXAMPLES", "40"))
UNCLEAR = (SystemError, AssertionError, NameError, RecursionError, MemoryError)


def _clear(exc):
    assert not isinstance(exc, UNCLEAR) and str(exc), f"unclear exception {type(exc).__name__}: {exc!r}"


def model(x, w):
    h = np.tanh(x @ w + 1.0)
    return h.sum(axis=1), h[h > 0.5].sum()


X = np.random.default_rng(0).random((4, 3))
W = np.random.default_rng(1).random((3, 5))


def _saved(backend="reference") -> bytes:
    buf = io.BytesIO()
    nt.trace(model, (X, W), backend=backend).save(buf)
    return buf.getvalue()


# ---- hostile saved traces through numtrace.load, then run -------------------------------------------

SAVED = _saved()


def _load_and_run(data: bytes, backend: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = nt.load(io.BytesIO(data), backend=backend)
    except Exception as exc:
        _clear(exc)
        return "refused"
    try:
        loaded(X, W)
    except Exception as exc:
        _clear(exc)
        return "raised"
    return "ran"


@settings(max_examples=FILE_EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(edits=st.lists(st.tuples(st.integers(0, len(SAVED) - 1), st.integers(0, 255)), min_size=1, max_size=6))
def test_mutated_saved_trace_loads_and_runs_or_raises_clearly(edits, backend):
    data = bytearray(SAVED)
    for at, b in edits:
        data[at] = b
    _load_and_run(bytes(data), backend)


def _members(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _zip(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for k, v in members.items():
            z.writestr(k, v)
    return buf.getvalue()


@settings(max_examples=FILE_EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(line=st.integers(0, 40), col=st.integers(0, 80), cut=st.integers(0, 6),
       insert=st.sampled_from(["", "f32", "f64", "i64", "1", "9999999999", "-1", "0", "B", ",", "%1", "%x",
                               "np.exp", "np.sum", "axis=0", "keepdims=True", "[", "]", "bool", "u8"]))
def test_edited_graph_text_in_a_saved_trace_lints_or_runs_correctly(line, col, cut, insert, backend):
    """A well-formed but lying graph (shapes, dtypes, ops edited) must be refused or run, never crash."""
    members = _members(SAVED)
    name = next(k for k in members if k.endswith(".ir"))
    lines = members[name].decode().split("\n")
    row = lines[line % len(lines)]
    col %= len(row) + 1
    lines[line % len(lines)] = row[:col] + insert + row[col + cut:]
    members[name] = "\n".join(lines).encode()
    _load_and_run(_zip(members), backend)


# ---- bad arguments on every backend -----------------------------------------------------------------

def _writes(x, y):
    x[0] = y.sum()
    x += 1.0
    return x * y


BAD_ARGS = {
    "no args": lambda: (),
    "one arg": lambda: (np.ones((4, 3)),),
    "three args": lambda: (np.ones((4, 3)), np.ones((4, 3)), np.ones((4, 3))),
    "int dtype": lambda: (np.ones((4, 3), np.int64), np.ones((4, 3))),
    "float32": lambda: (np.ones((4, 3), np.float32), np.ones((4, 3))),
    "complex": lambda: (np.ones((4, 3), complex), np.ones((4, 3))),
    "object": lambda: (np.ones((4, 3), object), np.ones((4, 3))),
    "string": lambda: (np.full((4, 3), "a"), np.ones((4, 3))),
    "list": lambda: ([[1.0] * 3] * 4, np.ones((4, 3))),
    "None": lambda: (None, np.ones((4, 3))),
    "rank 1": lambda: (np.ones(3), np.ones((4, 3))),
    "rank 3": lambda: (np.ones((2, 4, 3)), np.ones((4, 3))),
    "0-d": lambda: (np.float64(1.0), np.ones((4, 3))),
    "incompatible": lambda: (np.ones((4, 3)), np.ones((4, 2))),
    "empty": lambda: (np.ones((0, 3)), np.ones((0, 3))),
    "empty cols": lambda: (np.ones((4, 0)), np.ones((4, 0))),
    "non-contiguous": lambda: (np.ones((8, 6))[::2, ::2], np.ones((4, 3))),
    "fortran": lambda: (np.asfortranarray(np.random.default_rng(2).random((4, 3))), np.ones((4, 3))),
    "negative strides": lambda: (np.random.default_rng(3).random((4, 3))[::-1, ::-1], np.ones((4, 3))[::-1]),
    "broadcast (0 strides)": lambda: (np.ones((4, 3)), np.broadcast_to(np.arange(3.0), (4, 3))),
    "read-only": lambda: (_readonly(np.ones((4, 3))), np.ones((4, 3))),
    "nan inf": lambda: (np.array([[np.nan, np.inf, -np.inf]] * 4), np.full((4, 3), np.nan)),
    "big-endian": lambda: (np.ones((4, 3), ">f8"), np.ones((4, 3))),
    "unaligned": lambda: (_unaligned((4, 3)), np.ones((4, 3))),
    "same array twice": "same",
    "overlapping views": "overlap",
}


def _readonly(a):
    a.flags.writeable = False
    return a


def _unaligned(shape):
    buf = np.zeros(np.prod(shape) * 8 + 1, np.uint8)[1:]
    a = buf.view(np.float64).reshape(shape)
    a[...] = 0.5
    return a


def _make(what):
    """Fresh arguments for case ``what`` (deterministic: the eager and traced calls get equal ones,
    aliasing each other the same way)."""
    make = BAD_ARGS[what]
    if make == "same":
        a = np.random.default_rng(4).random((4, 3))
        return (a, a)
    if make == "overlap":
        base = np.random.default_rng(5).random((5, 3))
        return (base[1:], base[:-1])
    return make()


def _compare(fn, traced, what):
    args, eager_args = _make(what), _make(what)
    try:
        with np.errstate(all="ignore"):
            want = fn(*eager_args)
        eager_exc = None
    except Exception as exc:
        want, eager_exc = None, exc
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = traced(*args)
    except Exception as exc:
        _clear(exc)
        return "raised"
    assert eager_exc is None, f"NumPy raises {eager_exc!r}, the traced call returned {got!r}"
    for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
        np.testing.assert_allclose(g, w, rtol=1e-12, equal_nan=True)
        assert np.asarray(g).dtype == np.asarray(w).dtype
    for w, g in zip(eager_args, args):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=1e-12, equal_nan=True, err_msg="argument after the call")
    return "ok"


ALIASING = "shares memory with argument"


@pytest.mark.parametrize("fn", [lambda x, y: np.exp(x) * y + x.sum(0), _writes], ids=["pure", "writes"])
@pytest.mark.parametrize("what", sorted(BAD_ARGS))
def test_bad_arguments_give_numpys_result_or_a_clear_error(what, fn, backend):
    traced = nt.trace(fn, (np.ones((4, 3)), np.ones((4, 3))), backend=backend, check_trace=False)
    if fn is _writes and what in ("same array twice", "overlapping views"):  # refused, never stale
        with pytest.raises(ValueError, match=ALIASING):
            traced(*_make(what))
        return
    if what == "read-only" and fn is _writes:
        with pytest.raises(ValueError, match="read-only"):
            traced(*_make(what))
        return
    _compare(fn, traced, what)


def test_same_array_passed_twice_to_a_writing_function_is_refused(backend):
    def f(x, y):
        x += 1.0
        return x * y

    traced = nt.trace(f, (np.ones(3), np.ones(3)), backend=backend)
    a = np.arange(3.0)
    with pytest.raises(ValueError, match=r"argument 'x' is written into .* shares memory with argument 'y'"):
        traced(a, a)   # NumPy would give [1, 4, 9]: the trace reads y as a separate array
    np.testing.assert_array_equal(a, np.arange(3.0))  # refused before anything ran
    np.testing.assert_array_equal(traced(a, a.copy()), f(np.arange(3.0), np.arange(3.0)))


def test_view_of_a_view_sees_later_writes_to_its_base(backend):
    def f(x):
        v = x[None].squeeze(0)
        x[...] = 5.0
        return v

    traced = nt.trace(f, (np.zeros(3),), backend=backend)
    np.testing.assert_array_equal(traced(np.arange(3.0)), f(np.arange(3.0)))   # NumPy: [5, 5, 5]


def test_dead_raising_step_still_raises(backend):
    """A step whose result is unused is not computed, but NumPy's error in it (here an empty max) is
    still raised for the shapes that cause it, as a live one's is."""
    def dead(x):
        x[1:].max(axis=0)
        return x + 1

    def live(x):
        return x[1:].max(axis=0)

    one = np.ones((1, 4))
    for fn in (live, dead):
        with pytest.raises(ValueError, match="zero-size"):
            fn(one)
        traced = nt.trace(fn, (np.ones((3, 4)),), backend=backend)
        with pytest.raises(ValueError, match="zero-size"):
            traced(one)
    np.testing.assert_array_equal(traced(np.ones((2, 4))), dead(np.ones((2, 4))))


def test_read_only_argument_of_a_writing_function_raises_like_numpy(backend):
    traced = nt.trace(_writes, (np.ones((4, 3)), np.ones((4, 3))), backend=backend)
    x = _readonly(np.ones((4, 3)))
    with pytest.raises(ValueError, match="read-only"):
        _writes(x, np.ones((4, 3)))
    with pytest.raises(ValueError, match="read-only"):
        traced(x, np.ones((4, 3)))
    assert (x == 1).all()


def _executable(fn, args, backend):
    traced = nt.trace(fn, args, backend=backend, check_trace=False)
    graph = traced.graph
    return get_backend(backend).compile(graph, [v.type for v in graph.inputs])


@pytest.mark.parametrize("case", ["out is an input", "out overlaps an input", "out is a view of an input",
                                  "outs overlap each other", "wrong shape", "wrong dtype", "read-only",
                                  "not a sequence", "too few", "non-contiguous out"])
def test_out_arrays_aliasing_inputs_give_numpys_result(case, backend):
    def f(x, y):
        return x[::-1] + y, np.exp(y) - x

    x0 = np.random.default_rng(6).random((6,))
    y0 = np.random.default_rng(7).random((6,))
    exe = _executable(f, (x0, y0), backend)
    x, y = x0.copy(), y0.copy()
    want = [a.copy() for a in f(x0, y0)]
    buf = np.zeros(12)
    out = {"out is an input": lambda: [x, y],
           "out overlaps an input": lambda: [y, np.zeros(6)],
           "out is a view of an input": lambda: [x[::-1], y[::-1]],
           "outs overlap each other": lambda: [buf[:6], buf[3:9]],
           "wrong shape": lambda: [np.zeros(5), np.zeros(6)],
           "wrong dtype": lambda: [np.zeros(6, np.float32), np.zeros(6)],
           "read-only": lambda: [_readonly(np.zeros(6)), np.zeros(6)],
           "not a sequence": lambda: np.zeros(6),
           "too few": lambda: [np.zeros(6)],
           "non-contiguous out": lambda: [np.zeros(12)[::2], np.zeros(12)[1::2]]}[case]()
    try:
        got = exe(x, y, out=out)
    except (ValueError, TypeError) as exc:
        _clear(exc)
        assert case in ("wrong shape", "wrong dtype", "read-only", "not a sequence", "too few"), exc
        return
    assert case not in ("wrong shape", "wrong dtype", "read-only", "not a sequence", "too few")
    if case == "outs overlap each other":
        return  # NumPy has no answer for two outputs sharing memory; only no crash is asked
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    if case != "out is an input" and case != "out is a view of an input" and case != "out overlaps an input":
        np.testing.assert_array_equal(x, x0)


# ---- threads ---------------------------------------------------------------------------------------

THREADS = 8
CALLS = 10_000 if STRESS else 50


def _run_threads(target, n=THREADS):
    errors = []

    def wrapped(k):
        try:
            target(k)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def test_one_executable_from_many_threads_equals_serial_calls(backend):
    traced = nt.trace(model, (X, W), backend=backend)
    inputs = [(np.random.default_rng(k).random((4 + k % 3, 3)), W) for k in range(THREADS)]
    serial = [traced(*a) for a in inputs]

    def work(k):
        for _ in range(CALLS):
            got = traced(*inputs[k])
            for g, s in zip(got, serial[k]):
                assert np.array_equal(g, s)

    _run_threads(work)


def test_tracing_in_one_thread_while_others_run_traced_functions(backend):
    traced = nt.trace(model, (X, W), backend=backend)
    want = traced(X, W)
    seen = []

    def work(k):
        if k == 0:
            for i in range(5 if not STRESS else 200):
                t = nt.trace(lambda x, i=i: np.sin(x) * (i + 1), (X,), backend=backend)
                assert np.allclose(t(X), np.sin(X) * (i + 1))
        else:
            for _ in range(CALLS):
                assert not nt.is_tracing()   # another thread's trace is not this thread's
                got = traced(X, W)
                assert all(np.array_equal(g, w) for g, w in zip(got, want))
            seen.append(k)

    _run_threads(work)
    assert len(seen) == THREADS - 1


def test_is_tracing_is_per_thread():
    inside = threading.Event()
    release = threading.Event()
    result = {}

    def traced_fn(x):
        result["inside"] = nt.is_tracing()
        inside.set()
        release.wait(30)
        return x + 1

    t = threading.Thread(target=lambda: nt.trace(traced_fn, (X,), check_trace=False, backend="reference"))
    t.start()
    assert inside.wait(30)
    result["other"] = nt.is_tracing()
    release.set()
    t.join(60)
    assert result == {"inside": True, "other": False}


def test_retracing_on_a_guard_miss_from_many_threads(backend):
    def f(x):
        return x / math.sqrt(x.shape[0])

    traced = nt.trace(f, (np.ones((4, 3)),), backend=backend)
    sizes = [5, 6, 7, 8, 9, 10, 11, 12]
    barrier = threading.Barrier(THREADS)

    def work(k):
        x = np.random.default_rng(k).random((sizes[k % len(sizes)], 3))
        barrier.wait(30)
        for _ in range(3 if not STRESS else 300):
            np.testing.assert_allclose(traced(x), f(x), rtol=1e-12)

    # The filter is set once, here: warnings.catch_warnings() swaps process-wide state, so one
    # thread leaving its block would turn the re-trace warnings of the others back into errors.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        _run_threads(work)


# ---- leaks (stress only) ---------------------------------------------------------------------------

def _rss():
    psutil = pytest.importorskip("psutil")
    return psutil.Process().memory_info().rss


@pytest.mark.skipif(not STRESS, reason="long run: NUMTRACE_STRESS=1 (nox -s stress)")
def test_no_rss_growth_over_a_million_calls(backend):
    traced = nt.trace(lambda x: np.tanh(x) * 2.0 + 1.0, (np.ones(8),), backend=backend)
    x = np.ones(8)
    for _ in range(20_000):
        traced(x)
    before = _rss()
    for _ in range(1_000_000):
        traced(x)
    after = _rss()
    growth = (after - before) / before
    print(f"\n[{backend}] 1M calls: RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB ({growth:+.3%})")
    assert growth < 0.01


@pytest.mark.skipif(not STRESS, reason="long run: NUMTRACE_STRESS=1 (nox -s stress)")
def test_no_rss_growth_over_ten_thousand_trace_cycles(backend):
    import gc

    def cycle():
        t = nt.trace(model, (X, W), backend=backend)
        t(X, W)

    for _ in range(500):
        cycle()
    gc.collect()
    before = _rss()
    for _ in range(10_000):
        cycle()
    gc.collect()
    after = _rss()
    growth = (after - before) / before
    print(f"\n[{backend}] 10k trace/compile cycles: RSS {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB "
          f"({growth:+.3%})")
    assert growth < 0.01


def _fill_reduction(x):
    s = x.sum()
    s.fill(0.5)  # NumPy: a no-op on the immutable scalar
    return s


def _write_a_reshaped_scalar(x):
    s = x.max()
    r = s.reshape(1)  # a new array, not a view of the scalar
    r[0] = 7.0
    return s, r


def _write_an_indexed_scalar(x):
    s = x[1]
    v = s[...]
    v[...] = -1.0
    return s + 0, v


@pytest.mark.parametrize("f", [_fill_reduction, _write_a_reshaped_scalar, _write_an_indexed_scalar])
def test_a_numpy_scalar_from_traced_code_stays_immutable(backend, f):
    traced = nt.trace(f, (np.ones(3),), backend=backend, check_trace=False)
    got, want = traced(np.arange(3.0)), f(np.arange(3.0))
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, w)


def _set_all(s):
    s[...] = 1.0


@pytest.mark.parametrize("write", [_set_all, lambda s: np.add(s, 1.0, out=s)], ids=["setitem", "out"])
def test_writing_into_a_numpy_scalar_is_refused_as_numpy_refuses_it(write):
    def f(x):
        s = x.sum()
        write(s)
        return s

    with pytest.raises(TypeError):
        f(np.ones(3))
    with pytest.raises(TypeError):
        nt.trace(f, (np.ones(3),), backend="reference", check_trace=False)
