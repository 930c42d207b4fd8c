"""Hunt in var/std taking a sum's block sums, and in transposed run-time B packed through register
transposes: the cases the change's own tests leave out. Sharing: a sum (not a mean) beside the var,
several var/std with different ddof (ddof > n included) reading one sum, a var folded before the mean
(which shares nothing), rows of 1 and 2 elements and long rows (threaded), NaN, inf and -0.0 in one
block only. Transposed B: every N and K about the 16-row blocks and 32-column panels, and the
strided and reversed views of it, bit for bit the contiguous B's. Interpreted passes on the thread
team (from TEAM_MIN_WORK): odd shapes about it in every layout and thread count (more than the
team's scratch blocks included), a worker's overflow under errstate raise and warn, Python threads
calling at once while the thread count changes, in-place updates of the arguments."""

import threading

import numpy as np
import pytest
from numtrace_cpu import compile_graph, set_num_threads
from numtrace_ir.types import TensorType
from test_fast_paths import _compile, _op
from test_packed import _graph
from test_reductions import _check, _threads

pytestmark = [pytest.mark.usefixtures("numpy_quiet"),   # NaN and inf on purpose
              pytest.mark.filterwarnings("ignore:.*Degrees of freedom")]   # ddof past the row, as NumPy

_STATS = [("np.sum", {}), ("np.var", {}), ("np.std", {"ddof": 1}), ("np.var", {"ddof": 7}),
          ("np.std", {"ddof": 10**6})]


def _stats(t, ops):
    """The reductions `ops` (name, attrs) of one input over its last axis, in one pass."""
    return _compile([t], lambda g, x: [_op(g, name, x, axis=-1, **attrs) for name, attrs in ops])


def _numpy(name, x, attrs):
    return getattr(np, name[3:])(x, axis=-1, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (3, 2), (1, 70001), (2, 131075)], ids=str)
@pytest.mark.parametrize("special", ["none", "nan", "inf", "zeros"])
@pytest.mark.parametrize("threads", [1, 2])
def test_vars_of_every_ddof_beside_a_sum(dtype, shape, special, threads):
    """A sum and four var/std (ddof 0, 1, 7 and more than the row) of one input in one pass give each
    var/std's bits without the sum beside it, and NumPy's values; the specials sit in the last block."""
    dtype = np.dtype(dtype)
    x = (np.random.default_rng(shape[-1]).standard_normal(shape) * 3 + 50).astype(dtype)
    if special == "nan":
        x[..., -1] = np.nan
    elif special == "inf":
        x[0, -1] = np.inf
    elif special == "zeros":
        x[...] = -0.0
    t = TensorType(dtype, shape)
    with _threads(threads):
        together = _stats(t, _STATS)
        got = together(x)
        for (name, attrs), value in zip(_STATS, got):
            if name != "np.sum":
                (alone,) = _stats(t, [(name, attrs)])(x)
                assert value.tobytes() == alone.tobytes(), (name, attrs)
            _check(value, np.asarray(_numpy(name, x, attrs)), x, shape[-1])
    if shape[-1] > 1000:
        assert together.stats()["shared_sum_runs"] > 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_var_folded_before_its_mean(dtype):
    """A var listed before the mean of the same input has no sum to take (it folds first): it sums
    itself, and both are NumPy's."""
    dtype = np.dtype(dtype)
    x = (np.random.default_rng(2).standard_normal((2, 50001)) + 10).astype(dtype)
    ops = [("np.var", {"ddof": 1}), ("np.mean", {})]
    exe = _stats(TensorType(dtype, x.shape), ops)
    for (name, attrs), value in zip(ops, exe(x)):
        _check(value, np.asarray(_numpy(name, x, attrs)), x, x.shape[-1])
    assert exe.stats()["shared_sum_runs"] == 0


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_var_beside_a_sum_shares_nothing(dtype):
    """An integer input's sum stays exact and its var (taken in float64) NumPy's."""
    x = np.random.default_rng(3).integers(-2**40 if dtype == np.int64 else -2**20, 2**20, (2, 40001))
    x = x.astype(dtype)
    ops = [("np.sum", {}), ("np.var", {})]
    g = _stats(TensorType(np.dtype(dtype), x.shape), ops)
    total, var = g(x)
    np.testing.assert_array_equal(total, x.sum(-1))
    _check(var, x.var(-1), x, x.shape[-1])


def _transposed_product(m, bt):
    """x @ bt.T on the packed kernels (a run-time B), and the same with B passed contiguous."""
    rng = np.random.default_rng(bt.size)
    x = rng.standard_normal((m, bt.shape[1])).astype(bt.dtype)
    g = _graph(x.shape, bt.T, bt.dtype, constant=False)
    exe = compile_graph(g, [v.type for v in g.inputs])
    (got,) = exe(x, bt.T)
    (want,) = exe(x, np.ascontiguousarray(bt.T))
    return exe, x, got, want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 15, 16, 17, 31, 33])
def test_transposed_b_every_width_about_the_panels(dtype, k):
    """N = 1..40 for K about the 16-row blocks: bits of the contiguous B, values NumPy's; -0.0, inf
    and NaN in B."""
    for n in range(1, 41):
        bt = np.random.default_rng(n * 100 + k).standard_normal((n, k)).astype(dtype)
        bt.flat[::5] = -0.0
        if n > 3:
            bt[n // 2, k // 2] = np.inf
            bt[n - 1, 0] = np.nan
        exe, x, got, want = _transposed_product(40, bt)
        assert k < 9 or exe.stats()["packed_runtime"] == 1   # K < 9 may be a small-K product
        assert got.tobytes() == want.tobytes(), (n, k)
        ref = x @ bt.T
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        ok = np.isfinite(ref)
        np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-4, atol=1e-4 * k)


@pytest.mark.parametrize("view", ["columns_strided", "rows_reversed", "rows_strided", "rows_broadcast"])
@pytest.mark.parametrize("nk", [(33, 17), (40, 48), (7, 64)], ids=str)
def test_transposed_b_of_a_view(view, nk):
    """B = v.T where v is itself a view (k[:, ::2], k[::-1], k[::3], a broadcast row): its k stride 1
    or not, its column stride any; bits of the contiguous B."""
    n, k = nk
    base = np.random.default_rng(n + k).standard_normal((3 * n, 2 * k)).astype(np.float32)
    v = {"columns_strided": base[:n, ::2], "rows_reversed": base[:n, :k][::-1],
         "rows_strided": base[::3, :k], "rows_broadcast": np.broadcast_to(base[0, :k], (n, k))}[view]
    _, x, got, want = _transposed_product(33, v)
    assert got.tobytes() == want.tobytes()
    np.testing.assert_allclose(got, x @ v.T, rtol=1e-4, atol=1e-4 * k)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kn", [(257, 33), (1000, 47), (1031, 64)], ids=str)
def test_transposed_b_deep_and_constant(kn, threads):
    """K past the product's K blocks (a block may start off a 16-row boundary), run-time and constant
    B = w.T, one and two threads: bits of the contiguous B, values NumPy's."""
    k, n = kn
    rng = np.random.default_rng(k)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    with _threads(threads):
        _, x, got, want = _transposed_product(67, bt)
        assert got.tobytes() == want.tobytes()
        np.testing.assert_allclose(got, x @ bt.T, rtol=1e-4, atol=1e-4 * k)
        t = [TensorType(x.dtype, x.shape)]
        (const_t,) = compile_graph(_graph(x.shape, bt.T, np.float32, constant=True), t)(x)
        contiguous = np.ascontiguousarray(bt.T)
        (const_c,) = compile_graph(_graph(x.shape, contiguous, np.float32, constant=True), t)(x)
    assert const_t.tobytes() == const_c.tobytes()
    np.testing.assert_allclose(const_t, x @ bt.T, rtol=1e-4, atol=1e-4 * k)


# Interpreted passes on the spinning thread team (blocks.pxi's _run_pass, from TEAM_MIN_WORK = 1 << 17
# work): what the change's own test (one softmax shape, C order, one program per process thread) leaves
# out. Each thread takes a free block of scratch registers; the floating-point flags of every unit go
# to the call that posted the job.

_TEAM_SHAPES = [(1023, 129), (129, 1023), (8191, 17), (1, 140001), (255, 511)]   # work about 1 << 17


def _team_programs():
    def layer_norm(x):
        m = np.mean(x, axis=-1, keepdims=True)
        return (x - m) / np.sqrt(np.var(x, axis=-1, keepdims=True) + 1e-5) * 1.5 + 0.25

    def columns(x):
        return np.sum(x * x, axis=0), np.max(x, axis=0), np.mean(x, axis=0)

    def where_casts(x):
        y = np.where(x > 0, x * 2.0, -x)
        return y.astype(np.int32) + 1, np.abs(y).astype(np.float64) * 0.5, np.any(y > 5, axis=-1)

    def scans(x):
        return np.cumsum(x * 2, axis=-1), np.argmax(x + 1, axis=-1)

    return [layer_norm, columns, where_casts, scans]


def _team_input(shape, dtype, seed=1):
    x = (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)
    flat = x.reshape(-1)
    flat[-1], flat[-7], flat[flat.size // 2], flat[-3] = np.nan, -0.0, np.inf, -np.inf
    return x


def _layouts_of(x):
    return {"C": x, "F": np.asfortranarray(x), "strided": np.repeat(x, 2, axis=-1)[..., ::2]}


def _bits(result):
    return [a.dtype.str + a.tobytes().hex() for a in (result if isinstance(result, tuple) else (result,))]


def _team_runs_of(traced):
    return sum(v["interpreted_team_runs"] for v in traced.stats()["signatures"].values())


@pytest.mark.parametrize("prog", _team_programs(), ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_interpreted_team_passes_keep_one_threads_bits(team, prog, dtype):
    """Rows, columns, casts, selects and scans at about TEAM_MIN_WORK, odd shapes, NaN/inf/-0.0, in C,
    Fortran and strided layouts: 2, 3 and 100 threads (more than the team's 64 scratch blocks) give
    one thread's bits for each layout, and NumPy's values."""
    nt = pytest.importorskip("numtrace")
    for shape in _TEAM_SHAPES:
        x = _team_input(shape, dtype)
        traced = nt.trace(prog, (x,), backend="cpu", check_trace=False)
        for layout, xx in _layouts_of(x).items():
            got = {}
            for threads in (1, 2, 3, 100):
                set_num_threads(threads)
                got[threads] = _bits(traced(xx))
            assert got[2] == got[1] and got[3] == got[1] and got[100] == got[1], (shape, layout)
        set_num_threads(1)
        for g, w in zip(_as_tuple(traced(x)), _as_tuple(prog(x))):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=2e-5 if dtype == np.float32 else 1e-11, atol=1e-5)
    assert _team_runs_of(traced) > 0


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _overflowing_row_sum(x):
    return np.sum(x * x, axis=-1) + 1.0


@pytest.mark.parametrize("shape", [(1023, 129), (8191, 17), (129, 1025)], ids=str)
def test_a_workers_flag_reaches_the_caller_of_an_interpreted_team_pass(team, shape):
    """An overflow in one element (first, middle or last unit: the caller's or a worker's chunk)
    raises under np.errstate(over="raise") and warns once otherwise, on every thread count."""
    nt = pytest.importorskip("numtrace")
    x0 = np.random.default_rng(0).random(shape).astype(np.float32) + 0.5
    traced = nt.trace(_overflowing_row_sum, (x0,), backend="cpu", check_trace=False)
    for pos in (0, x0.size // 2 + 3, x0.size - 1):
        x = x0.copy()
        x.reshape(-1)[pos] = np.float32(3e30)
        for threads in (1, 2, 3):
            set_num_threads(threads)
            with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="overflow"):
                traced(x)
            with np.errstate(over="warn"), pytest.warns(RuntimeWarning, match="overflow") as caught:
                traced(x)
            assert len(caught) == 1, (pos, threads)
            with np.errstate(all="raise"):
                traced(x0)   # no flag left over from the call before
    assert _team_runs_of(traced) > 0


def test_concurrent_calls_keep_their_own_flags_and_bits(team):
    """Four Python threads call four traced functions whose passes share the team (or run alone while
    another call holds it), one thread count changed meanwhile: each call gets its own bits, and an
    overflow raised in one call under np.errstate (per thread) never reaches another."""
    nt = pytest.importorskip("numtrace")
    progs = _team_programs()[:2] + [_overflowing_row_sum]
    rng = np.random.default_rng(5)
    cases = []
    set_num_threads(1)
    for prog in progs:
        x = rng.standard_normal((1024, 129)).astype(np.float32)
        traced = nt.trace(prog, (x,), backend="cpu", check_trace=False)
        cases.append((traced, x, _bits(traced(x))))
    hot = cases[-1][1].copy()
    hot[-1, -1] = np.float32(3e30)
    errors, stop = [], threading.Event()

    def caller(seed):
        r = np.random.default_rng(seed)
        for _ in range(40):
            k = int(r.integers(len(cases)))
            traced, x, want = cases[k]
            try:
                with np.errstate(over="raise"):
                    if k == len(cases) - 1 and r.random() < 0.5:
                        traced(hot)
                        errors.append("overflow lost")
                        continue
                    got = traced(x)
            except FloatingPointError:
                if k != len(cases) - 1:
                    errors.append(f"spurious overflow in {k}")
                continue
            if _bits(got) != want:
                errors.append(f"bits of {k}")

    def toggle():
        r = np.random.default_rng(9)
        while not stop.is_set():
            set_num_threads(int(r.integers(1, 4)))

    toggler = threading.Thread(target=toggle)
    callers = [threading.Thread(target=caller, args=(s,)) for s in range(4)]
    toggler.start()
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    stop.set()
    toggler.join()
    assert not errors, errors[:5]


def _updates(a, b):
    a -= np.max(a, axis=-1, keepdims=True)
    b /= np.sum(np.abs(b), axis=0)
    np.multiply(a, b, out=b)
    return a, b


def test_in_place_updates_of_arguments_on_the_team(team):
    """Row and column reductions written back into the caller's arrays (-=, /=, out=) about
    TEAM_MIN_WORK, in C and Fortran order, on 1 to 3 threads: NumPy's arrays, the outputs the
    arguments themselves."""
    nt = pytest.importorskip("numtrace")
    rng = np.random.default_rng(7)
    ex = [rng.standard_normal((1023, 129)) for _ in range(2)]
    traced = nt.trace(_updates, tuple(a.copy() for a in ex), backend="cpu", check_trace=False)
    for threads in (1, 2, 3):
        set_num_threads(threads)
        for order in "CF":
            args = [np.array(rng.standard_normal((1023, 129)), order=order) for _ in range(2)]
            want = [a.copy(order="K") for a in args]
            _updates(*want)
            got = traced(*args)
            assert got[0] is args[0] and got[1] is args[1]
            for a, w in zip(args, want):
                np.testing.assert_allclose(a, w, rtol=1e-12, atol=1e-12)
    assert _team_runs_of(traced) > 0
