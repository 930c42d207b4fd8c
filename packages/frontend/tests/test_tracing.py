"""Tracing functions: the recorded graph, inputs and outputs, constants, calls on new inputs."""

import warnings

import numpy as np
import numtrace as nt
import pytest

HERE = __file__


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _line_of(text):
    """The line number in this file of the first line containing ``text``."""
    with open(HERE) as f:
        for number, line in enumerate(f, 1):
            if text in line:
                return number
    raise AssertionError(text)


def foo(x, y):
    return 2 * x + y


@pytest.mark.triton
def test_seed_example_foo(backend, rng):
    x, y = _f32(rng, 3), _f32(rng, 3)
    traced = nt.trace(foo, (x, y), backend=backend)
    assert [v.name for v in traced.graph.inputs] == ["x", "y"]
    assert [n.op for n in traced.graph.nodes if n.op != "prim.Constant"] == ["np.multiply", "np.add"]
    a, b = _f32(rng, 3), _f32(rng, 3)
    np.testing.assert_allclose(traced(a, b), foo(a, b), rtol=1e-6)
    assert traced(a, b).dtype == np.float32


def test_tracing_returns_what_the_function_returns(rng):
    seen = {}

    def f(x):
        y = np.exp(x) * 3.0 - x.sum(axis=0)
        seen["y"] = y
        return y

    x = _f32(rng, 4, 5)
    nt.trace(f, (x,), backend="reference", check_trace=False)
    np.testing.assert_array_equal(np.asarray(seen["y"]._concrete), f(x))


def test_every_node_records_the_user_line(rng):
    def g(x):
        a = np.tanh(x)  # LINE-A
        return a * x  # LINE-B

    traced = nt.trace(g, (_f32(rng, 3),), backend="reference")
    locs = {n.op: n.loc for n in traced.graph.nodes}
    assert locs["np.tanh"] == f"{HERE}:{_line_of('# LINE-A')}"
    assert locs["np.multiply"] == f"{HERE}:{_line_of('# LINE-B')}"


@pytest.mark.triton
def test_operators_reflected_and_inplace(backend, rng):
    def f(x, y):
        z = -x + abs(y) - 1.5 * x / (y * y + 1.0) ** 2 // 0.5 % 3.0
        z += x
        z *= 2.0
        z -= y
        z /= 3.0
        w = (x > y) & (x < 1.0) | ~(y >= 0.5) ^ (x == y) | (x != 0)
        return z, w, x @ y.T, 1.0 - x, 2.0 / (x * x + 1.0)

    x, y = _f32(rng, 3, 4), _f32(rng, 3, 4)
    traced = nt.trace(f, (x, y), backend=backend)
    a, b = _f32(rng, 3, 4), _f32(rng, 3, 4)
    for got, want in zip(traced(a, b), f(a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_integer_operators(backend, rng):
    def f(x, y):
        return x << 2, x >> 1, x % 5, x // 3, divmod(x, 4), -x, ~x, x & y

    x = rng.integers(0, 100, (4, 3)).astype(np.int64)
    y = rng.integers(0, 100, (4, 3)).astype(np.int64)
    traced = nt.trace(f, (x, y), backend=backend)
    a = rng.integers(0, 100, (4, 3)).astype(np.int64)
    got, want = traced(a, y), f(a, y)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_ufunc_methods_reduce_accumulate_outer(backend, rng):
    def f(x, y):
        return np.add.reduce(x, axis=1), np.multiply.outer(x[0], y[0]), np.maximum.reduce(x)

    x, y = _f32(rng, 3, 4), _f32(rng, 3, 4)
    traced = nt.trace(f, (x, y), backend=backend)
    a = _f32(rng, 3, 4)
    for got, want in zip(traced(a, y), f(a, y)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_out_and_where_are_functionalized(backend, rng):
    def f(x, y):
        out = np.zeros_like(x)
        np.add(x, y, out=out)
        np.multiply(out, 2.0, out=out, where=x > 0)
        np.exp(x, out=y)
        return out, y

    x, y = _f32(rng, 3, 4), _f32(rng, 3, 4)
    traced = nt.trace(f, (x.copy(), y.copy()), backend=backend)
    a, b = _f32(rng, 3, 4), _f32(rng, 3, 4)
    for got, want in zip(traced(a.copy(), b.copy()), f(a.copy(), b.copy())):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_where_without_out_is_an_error(rng):
    with pytest.raises(ValueError, match="where= without out="):
        nt.trace(lambda x: np.add(x, 1.0, where=x > 0), (_f32(rng, 3),), backend="reference")


def test_array_methods_and_attributes(backend, rng):
    def f(x):
        assert x.ndim == 3 and x.size == 24 and x.dtype == np.float32
        return (x.reshape(4, 6).T, x.transpose(2, 0, 1), x.astype(np.float64), x.sum(axis=1), x.mean(),
                x.max(axis=-1), x.min(), x.argmax(axis=0), x.copy(), x.clip(-0.5, 0.5), x.squeeze(),
                x.flatten(), x.ravel(), x[0].dot(x[1].T), x.std(axis=0), x.var(), x.prod(axis=2),
                x.cumsum(axis=1), x.swapaxes(0, 2))

    x = _f32(rng, 2, 3, 4)
    traced = nt.trace(f, (x,), backend=backend)
    a = _f32(rng, 2, 3, 4)
    for got, want in zip(traced(a), f(a)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_indexing_basic_advanced_and_masks(backend, rng):
    idx = np.array([2, 0, 1])

    def f(x):
        return (x[1], x[:, 1:3], x[..., None, 0], x[None, ::2], x[idx], x[[0, 2], 1:],
                x[x > 0], x[-1, -2])

    x = _f32(rng, 3, 4)
    traced = nt.trace(f, (x,), backend="reference")
    a = _f32(rng, 3, 4)
    for got, want in zip(traced(a), f(a)):
        np.testing.assert_array_equal(got, want)
    if backend != "reference":
        no_mask = nt.trace(lambda x: (x[1], x[:, 1:3], x[idx]), (x,), backend=backend)
        for got, want in zip(no_mask(a), (a[1], a[:, 1:3], a[idx])):
            np.testing.assert_array_equal(got, want)


def fill_row_zero(x):
    x[0] = np.zeros(x.shape[1], dtype=x.dtype)
    return x


def test_seed_example_fill_row_zero_is_functionalized(backend, rng):
    traced = nt.trace(fill_row_zero, (_f32(rng, 3, 4),), backend=backend)
    assert "np.setitem" in [n.op for n in traced.graph.nodes]
    a = _f32(rng, 3, 4)
    want = a.copy()
    want[0] = 0
    np.testing.assert_array_equal(traced(a.copy()), want)


def test_writes_through_views_update_their_base(backend, rng):
    def f(x):
        row = x[1]
        row += 10.0  # writes into x
        block = x[:, 2:]
        block[0] = -1.0  # writes into x, and into row's element 2
        x[x < -0.5] = 0.0  # a boolean-mask write
        return x, row

    x = _f32(rng, 3, 4)
    traced = nt.trace(f, (x.copy(),), backend=backend)
    a = _f32(rng, 3, 4)
    for got, want in zip(traced(a.copy()), f(a.copy())):
        np.testing.assert_array_equal(got, want)


def test_a_write_under_an_untracked_view_is_refused_where_the_stale_view_is_used():
    def f(x):
        t = np.diagonal(x)  # a view NumPy makes and the tracer does not track
        x[0] = 0.0
        return t * 1

    with pytest.raises(NotImplementedError, match="does not track"):
        nt.trace(f, (np.arange(4.0).reshape(2, 2),), backend="reference", check_trace=False)


def test_an_untracked_view_not_used_after_a_write_is_harmless(backend):
    def f(x):
        d = np.diagonal(x) * 2
        x[0] = 0.0
        return d + x

    x = np.arange(4.0).reshape(2, 2)
    traced = nt.trace(f, (x.copy(),), backend=backend, check_trace=False)
    eager, mine = x.copy(), x.copy()
    np.testing.assert_array_equal(traced(mine), f(eager))
    np.testing.assert_array_equal(mine, eager)


def test_flip_views_follow_writes(backend, rng):
    def f(x):
        t = np.flip(x)
        x[0] = 0.0  # seen through t
        np.flip(x, 1)[:, 0] = 5.0  # reaches x
        return t * 1.0

    traced = nt.trace(f, (_f32(rng, 2, 3),), backend=backend)
    for shape in ((2, 3), (5, 4)):
        a = _f32(rng, *shape)
        ours, eager = a.copy(), a.copy()
        np.testing.assert_array_equal(traced(ours), f(eager))
        np.testing.assert_array_equal(ours, eager)


def test_transpose_and_reshape_views_follow_writes(backend, rng):
    def f(x):
        t = x.T
        x[0] = 0.0  # seen through t
        x.reshape(-1)[-1] = 7.0
        return t * 1.0

    traced = nt.trace(f, (_f32(rng, 2, 3),), backend=backend)
    for shape in ((2, 3), (5, 3)):
        a = _f32(rng, *shape)
        ours, eager = a.copy(), a.copy()
        np.testing.assert_array_equal(traced(ours), f(eager))
        np.testing.assert_array_equal(ours, eager)


def test_container_inputs_and_dict_keys(backend, rng):
    def f(pair, d, lst):
        return pair[0] * d["a"] + pair[1][0] - lst[1], d["b"]

    pair = (_f32(rng, 3), (_f32(rng, 3),))
    d = {"a": _f32(rng, 3), "b": _f32(rng, 3)}
    lst = [_f32(rng, 3), _f32(rng, 3)]
    traced = nt.trace(f, (pair, d, lst), backend=backend)
    assert [v.name for v in traced.graph.inputs] == ["pair_0", "pair_1_0", "d_a", "d_b", "lst_0", "lst_1"]
    new_d = {"extra": _f32(rng, 3), "b": _f32(rng, 3), "a": _f32(rng, 3)}  # reordered, one extra key
    got, want = traced(pair, new_d, lst), f(pair, new_d, lst)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    with pytest.raises(KeyError, match="'a'"):
        traced(pair, {"b": d["b"]}, lst)
    with pytest.raises(TypeError, match="expected 2 items"):
        traced(pair, d, lst[:1])


def test_single_dict_example_input_is_one_argument(rng):
    d = {"x": _f32(rng, 3)}
    traced = nt.trace(lambda inputs: inputs["x"] * 2.0, d, backend="reference")
    np.testing.assert_allclose(traced(d), d["x"] * 2.0)


def test_keyword_example_inputs(backend, rng):
    def f(x, y, scale=2.0):
        return x * scale - y

    x, y = _f32(rng, 4), _f32(rng, 4)
    traced = nt.trace(f, example_kwarg_inputs={"y": y, "x": x}, backend=backend)
    assert [v.name for v in traced.graph.inputs] == ["x", "y"]
    np.testing.assert_allclose(traced(x=x, y=y), f(x, y), rtol=1e-6)
    np.testing.assert_allclose(traced(x, y=y), f(x, y), rtol=1e-6)
    with pytest.raises(TypeError, match="missing argument 'y'"):
        traced(x=x)
    with pytest.raises(TypeError, match="unexpected"):
        traced(x, y, z=y)
    with pytest.raises(TypeError, match="not parameters"):
        nt.trace(f, example_kwarg_inputs={"nope": x}, backend="reference")


def test_misspelled_or_repeated_keyword_is_named(backend, rng):
    """A misspelled or repeated keyword is the error, not the argument it leaves missing."""
    x, y = _f32(rng, 3), _f32(rng, 3)
    traced = nt.trace(lambda x, y: x - y, (x, y), backend=backend)
    with pytest.raises(TypeError, match="unexpected or repeated keyword argument\\(s\\) 'z'"):
        traced(x, z=y)
    with pytest.raises(TypeError, match="unexpected or repeated keyword argument\\(s\\) 'x'"):
        traced(y, x=x)


def test_python_scalars_are_frozen_in(rng):
    def f(x, k):
        return x * k

    x = _f32(rng, 3)
    traced = nt.trace(f, (x, 3.0), backend="reference")
    consts = [n.attrs["value"] for n in traced.graph.nodes if n.op == "prim.Constant"]
    assert consts == [3.0]
    np.testing.assert_allclose(traced(x, 3.0), x * 3.0)
    with pytest.raises(ValueError, match="frozen into the trace as the constant 3.0"):
        traced(x, 4.0)


def test_same_array_twice_is_two_inputs(backend, rng):
    x = _f32(rng, 3)
    traced = nt.trace(lambda a, b: a - b, (x, x), backend=backend)
    assert len(traced.graph.inputs) == 2
    y = _f32(rng, 3)
    np.testing.assert_allclose(traced(x, y), x - y)


GLOBAL = np.arange(3, dtype=np.float32)


def uses_global(x):
    return x + GLOBAL + np.ones(3, dtype=np.float32)


def test_outside_arrays_become_frozen_constants(backend, rng):
    global GLOBAL
    x = _f32(rng, 3)
    traced = nt.trace(uses_global, (x,), backend=backend)
    ops = [n.op for n in traced.graph.nodes]
    assert ops.count("prim.Constant") == 1 and ops.count("prim.full") == 1  # np.ones: a small node
    saved = GLOBAL
    try:
        GLOBAL = GLOBAL + 100  # a later change of the global does not change the trace
        np.testing.assert_allclose(traced(x), x + np.arange(3) + 1)
    finally:
        GLOBAL = saved


def test_non_native_byte_order_constants_and_inputs(backend, rng):
    """Backends take native byte order: a big-endian constant is stored native, a big-endian input is
    a clear error at trace time (as at call time), not a failure of the checker's run."""
    big_endian = np.arange(4, dtype=">f4")
    x = _f32(rng, 2, 4)
    traced = nt.trace(lambda x: x * big_endian, (x,), backend=backend)
    np.testing.assert_allclose(traced(x), x * big_endian)
    with pytest.raises(TypeError, match="input 'x' has non-native byte order"):
        nt.trace(lambda x: x * 2.0, (x.astype(">f4"),), backend=backend)


@pytest.mark.parametrize("returned, kind", [(lambda x: (x,), tuple), (lambda x: (x, (x * 2,)), tuple),
                                            (lambda x: x, np.ndarray)])
def test_tuple_outputs_keep_their_structure(returned, kind, rng):
    x = _f32(rng, 2)
    traced = nt.trace(returned, (x,), backend="reference")
    out = traced(x)
    assert isinstance(out, kind)
    if kind is tuple:
        assert len(out) == len(returned(x))


def test_list_output_warns_under_strict(rng):
    x = _f32(rng, 2)
    with pytest.warns(nt.TracerWarning, match="returns a list") as record:
        traced = nt.trace(lambda x: [x, x + 1.0], (x,), backend="reference", check_trace=False)
    assert record[0].filename == HERE
    out = traced(x)
    assert isinstance(out, list) and len(out) == 2
    traced = nt.trace(lambda x: [x, x + 1.0], (x,), backend="reference", strict=False)
    assert isinstance(traced(x), list)


def test_dict_output_needs_strict_false(rng):
    x = _f32(rng, 2)
    with pytest.raises(RuntimeError, match="strict=False"):
        nt.trace(lambda x: {"a": x}, (x,), backend="reference")
    traced = nt.trace(lambda x: {"a": x, "b": (x * 2.0,)}, (x,), backend="reference", strict=False)
    out = traced(x)
    assert set(out) == {"a", "b"}
    np.testing.assert_allclose(out["b"][0], x * 2)


@pytest.mark.parametrize("returned, match", [(lambda x: None, "returned nothing"),
                                             (lambda x: 3, "only Python values"),
                                             (lambda x: (1.0, "a"), "only Python values"),
                                             (lambda x: (x, "a"), "str"),
                                             (lambda x: (x, x.shape[0]), r"output\[1\] .* is a int \(2\)")])
def test_bad_outputs_are_clear_errors(returned, match, rng):
    with pytest.raises((RuntimeError, TypeError), match=match):
        nt.trace(returned, (_f32(rng, 2),), backend="reference")


def test_call_errors_name_what_is_wrong(rng):
    x = _f32(rng, 3, 4)
    traced = nt.trace(lambda x: x.reshape(4, 3) * 2.0, (x,), backend="reference")
    with pytest.raises(TypeError, match="takes 1 array argument"):
        traced(x, x)
    with pytest.raises(TypeError, match="dtype float64"):
        traced(x.astype(np.float64))
    with pytest.raises(ValueError, match="3 dimension"):
        traced(x[None])
    with pytest.raises(ValueError, match="shapes do not fit"):
        traced(_f32(rng, 5, 4))
    with pytest.raises(TypeError, match="must be a NumPy array"):
        traced([[1.0] * 4] * 3)


def test_other_batch_sizes_run_when_the_program_allows(backend, rng):
    def f(x, w):
        h = np.maximum(x @ w, 0.0)
        return h.reshape(x.shape[0], -1).sum(axis=1)

    w = _f32(rng, 4, 6)
    traced = nt.trace(f, (_f32(rng, 2, 4), w), backend=backend)
    for batch in (1, 5, 7):
        a = _f32(rng, batch, 4)
        np.testing.assert_allclose(traced(a, w), f(a, w), rtol=1e-5)


def test_numpy_scalars_and_noncontiguous_inputs(backend, rng):
    traced = nt.trace(lambda x, s: x * s, (_f32(rng, 4, 4), np.float32(2.0)), backend=backend)
    a = _f32(rng, 4, 8)[:, ::2]
    np.testing.assert_allclose(traced(a, np.float32(3.0)), a * 3.0)


def test_is_tracing_and_nested_trace_errors(rng):
    seen = []

    def f(x):
        seen.append(nt.is_tracing())
        return x + 1.0

    assert not nt.is_tracing()
    nt.trace(f, (_f32(rng, 2),), backend="reference", check_trace=False)
    assert seen == [True]

    def nested(x):
        return nt.trace(f, (np.ones(2),), backend="reference")(x)

    with pytest.raises(RuntimeError, match="tracing inside a traced function"):
        nt.trace(nested, (_f32(rng, 2),), backend="reference")
    assert not nt.is_tracing()


def test_tracing_a_traced_function_returns_it(rng):
    traced = nt.trace(foo, (_f32(rng, 2), _f32(rng, 2)), backend="reference")
    with pytest.warns(nt.TracerWarning, match="already traced") as record:
        again = nt.trace(traced, (_f32(rng, 2), _f32(rng, 2)))
    assert again is traced
    assert record[0].filename == HERE


def test_bad_trace_arguments():
    with pytest.raises(ValueError, match="exactly one of"):
        nt.trace(foo, backend="reference")
    with pytest.raises(TypeError, match="expects a function"):
        nt.trace(3, (np.ones(2),), backend="reference")
    with pytest.raises(TypeError, match="example inputs must be"):
        nt.trace(foo, "abc", backend="reference")
    with pytest.raises(TypeError, match="cannot be traced"):
        nt.trace(lambda x: x, (np.array(["a"]),), backend="reference")


def test_unknown_backend_lists_installed_ones(rng):
    with pytest.raises(ValueError, match=r"backend 'nope' cannot be used \(not installed\).*reference"):
        nt.trace(foo, (_f32(rng, 2), _f32(rng, 2)), backend="nope")


def test_to_switches_backend(backend, rng):
    x, y = _f32(rng, 3), _f32(rng, 3)
    traced = nt.trace(foo, (x, y), backend="reference")
    moved = traced.to(backend)
    assert moved.backend == backend and moved.graph is traced.graph
    np.testing.assert_allclose(moved(x, y), foo(x, y), rtol=1e-6)


def test_random_draws_are_nondeterministic_nodes(rng):
    def noisy(x):
        return x + np.random.standard_normal(x.shape[1])

    traced = nt.trace(noisy, (_f32(rng, 2, 3),), backend="reference", check_trace=False)
    assert "np.random.standard_normal" in [n.op for n in traced.graph.nodes]
    x = np.zeros((2, 3), np.float32)
    assert not np.array_equal(traced(x), traced(x))
    assert np.random.standard_normal is not None and not nt.is_tracing()


def test_inplace_methods_are_functionalized(backend, rng):
    def f(x, y):
        x.sort(axis=1)
        y.fill(2.0)
        return x, y

    x, y = _f32(rng, 3, 4), _f32(rng, 2)
    traced = nt.trace(f, (x.copy(), y.copy()), backend=backend)
    a = _f32(rng, 3, 4)
    got_x, got_y = traced(a.copy(), y.copy())
    np.testing.assert_array_equal(got_x, np.sort(a, axis=1))
    np.testing.assert_array_equal(got_y, np.full(2, 2.0, np.float32))


def test_unsupported_array_operations_are_clear_errors(rng):
    x = _f32(rng, 3)
    with pytest.raises(NotImplementedError, match="ndarray.view"):
        nt.trace(lambda x: x.view(np.int32), (x,), backend="reference")
    with pytest.raises(NotImplementedError, match="ndarray.tobytes is not supported"):
        nt.trace(lambda x: x.tobytes(), (x,), backend="reference")
    with pytest.raises(TypeError, match="out= must be a traced array"):
        nt.trace(lambda x: np.add(x, 1.0, out=GLOBAL), (x,), backend="reference")


@pytest.mark.parametrize("write", [lambda x: np.putmask(x, x > 0, 0.0), lambda x: np.copyto(x, 1.0),
                                   lambda x: np.fill_diagonal(x, 9.0), lambda x: np.add.at(x, [0, 0], 1.0)])
def test_in_place_write_by_a_function_without_an_op_is_recorded(write):
    """Recorded with its write (a host call returning the written copy, or NumPy's own code traced): the
    later ops compute with the written values at every call, and the caller's array is written."""
    def f(x):
        write(x)
        return x * 2.0

    x = np.linspace(-1.0, 1.0, 9, dtype=np.float32).reshape(3, 3)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "np.* runs as a host call", nt.TracerWarning)
        traced = nt.trace(f, (x.copy(),), backend="reference")
    for backend in nt.available_backends():
        if backend == "triton":
            continue
        y = np.linspace(-3.0, 2.0, 9, dtype=np.float32).reshape(3, 3)
        got, expected = y.copy(), y.copy()
        np.testing.assert_array_equal(traced.to(backend)(got), f(expected))
        np.testing.assert_array_equal(got, expected)


def test_default_backend_is_cpu(rng):
    x = _f32(rng, 2)
    if "cpu" in nt.available_backends():
        assert nt.trace(lambda x: x + 1.0, (x,), check_trace=False).backend == "cpu"
    else:
        with pytest.raises(ValueError, match="backend 'cpu' cannot be used.*Installed backends: reference"):
            nt.trace(lambda x: x + 1.0, (x,))


def test_creation_with_traced_shapes_and_contiguous_copies(backend, rng):
    def f(x):
        n = x.shape[0]
        return np.zeros((n, 2)) + np.ones(n)[:, None] * np.full((1, 2), 3.0), np.ascontiguousarray(x.T)

    traced = nt.trace(f, (_f32(rng, 3, 2),), backend=backend)
    ops = [n.op for n in traced.graph.nodes]
    assert ops.count("prim.full") == 3 and "np.ascontiguousarray" in ops
    for batch in (3, 6):
        a = _f32(rng, batch, 2)
        for got, want in zip(traced(a), f(a)):
            np.testing.assert_allclose(got, want)


def test_concurrent_calls_share_the_cache(backend, rng):
    from concurrent.futures import ThreadPoolExecutor

    traced = nt.trace(foo, (_f32(rng, 8), _f32(rng, 8)), backend=backend)
    inputs = [(_f32(rng, n), _f32(rng, n)) for n in (8, 16, 8, 32) * 4]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda ab: traced(*ab), inputs))
    for (a, b), got in zip(inputs, results):
        np.testing.assert_allclose(got, foo(a, b), rtol=1e-6)


def test_a_traced_function_called_inside_a_trace_is_inlined(backend, rng):
    inner = nt.trace(foo, (_f32(rng, 3), _f32(rng, 3)), backend="reference")

    def outer(x):
        return inner(x, x * 3.0) - 1.0

    traced = nt.trace(outer, (_f32(rng, 3),), backend=backend)
    ops = [n.op for n in traced.graph.nodes if n.op != "prim.Constant"]
    assert ops == ["np.multiply", "np.multiply", "np.add", "np.subtract"]
    a = _f32(rng, 3)
    np.testing.assert_allclose(traced(a), 5.0 * a - 1.0, rtol=1e-6)


def test_concurrent_traces_and_numpy_is_restored(rng):
    from concurrent.futures import ThreadPoolExecutor

    original = (np.random.rand, np.zeros, np.ascontiguousarray)

    def noisy(x):
        return x + np.random.rand(x.shape[0]) * 0.0 + np.zeros(x.shape[0])

    def trace_one(n):
        traced = nt.trace(noisy, (np.ones(n),), backend="reference", check_trace=False)
        return traced(np.full(n, 2.0))

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(trace_one, [2, 3, 4, 5, 6, 7]))
    for n, got in zip([2, 3, 4, 5, 6, 7], results):
        np.testing.assert_array_equal(got, np.full(n, 2.0))
    assert (np.random.rand, np.zeros, np.ascontiguousarray) == original


def test_python_scalar_constants_are_shared_only_when_identical(backend):
    """A scalar used again (``x * 1.0001`` in a loop) is one constant node; 0.0 and -0.0, 1 and 1.0 and
    True, and NaN stay distinct constants with their own dtype rules and signs."""
    def f(x):
        y = x
        for _ in range(5):
            y = y * 0.5
        return y, x * 0.0, x * -0.0, x + 1, x + 1.0, x + True, x * float("nan")

    x = np.arange(1, 5, dtype=np.int32)
    traced = nt.trace(f, (x,), check_trace=False, backend=backend)
    constants = [n for n in traced.graph.nodes if n.op == "prim.Constant"]
    assert len(constants) == 7   # 0.5 once; 0.0, -0.0, 1, 1.0, True, nan
    for got, expected in zip(traced(x + 3), f(x + 3)):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
