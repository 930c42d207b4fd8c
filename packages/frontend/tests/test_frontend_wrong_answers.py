"""Silent wrong answers of the frontend, each a regression test: a trace called with other inputs returns
what NumPy returns, or refuses them with a clear error.

Each case traces with the default checker off, then calls the trace at the traced inputs and at others
(other sizes, values, structures) and compares with the eager function.
"""

import copy
import io
import json
import numbers
import warnings
import zipfile

import numpy as np
import numtrace as nt
import pytest
from numtrace import TracerWarning
from numtrace_ir import FormatError


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def _retraced(traced, *args):
    """``traced(*args)``, allowing the re-trace warning of a call whose shapes break a guard."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "numtrace: re-tracing", TracerWarning)
        return traced(*args)


def _agrees(fn, example, others, backend):
    traced = nt.trace(fn, copy.deepcopy(example), check_trace=False, backend=backend)
    for args in (example, *others):
        _same(_retraced(traced, *copy.deepcopy(args)), fn(*copy.deepcopy(args)))
    return traced


# -- sizes leaving the graph: hashing, text, isinstance, seeds -----------------------------------------

SIZE_USES = {
    "dict get": lambda x: x * {5: 2.0}.get(x.shape[0], 3.0),
    "in a set": lambda x: x * (2.0 if x.shape[0] in {5, 7} else 3.0),
    "shape in a set": lambda x: x * (2.0 if x.shape in {(5,), (7,)} else 3.0),
    "f-string": lambda x: x * (2.0 if f"n{x.shape[0]}" == "n5" else 3.0),
    "str": lambda x: x * (2.0 if str(x.shape[0]) == "5" else 3.0),
    "len of str": lambda x: x * len(str(x.shape[0])),
    "format": lambda x: x * (2.0 if format(x.shape[0], "d") == "5" else 3.0),
    "repr": lambda x: x * (2.0 if repr(x.shape[0]) == "5" else 3.0),
    "str of shape": lambda x: x * (2.0 if str(x.shape) == "(5,)" else 3.0),
    "isinstance int": lambda x: x * (2.0 if isinstance(x.shape[0], int) else 3.0),
    "isinstance Integral": lambda x: x * (2.0 if isinstance(x.shape[0], numbers.Integral) else 3.0),
    "isinstance float": lambda x: x * (2.0 if isinstance(x.shape[0] / 2, float) else 3.0),
    "seed": lambda x: x + np.random.default_rng(x.shape[0]).random(3)[0],
}


@pytest.mark.parametrize("use", SIZE_USES)
def test_a_size_used_as_a_python_value_is_guarded(use, backend):
    fn = SIZE_USES[use]
    # 6 first: a re-trace at a size where the lookup misses must still record what it read.
    _agrees(fn, (np.ones(5),), [(np.ones(6),), (np.ones(7),), (np.ones(12),), (np.ones(5),)], backend)


def test_hashing_a_size_records_a_guard():
    traced = nt.trace(lambda x: x * (2.0 if x.shape[0] in {5, 7} else 3.0), (np.ones(6),),
                      check_trace=False, backend="reference")
    assert [g.split("  #")[0] for g in traced.guards] == ["x.shape[0] == 6"]


@pytest.mark.parametrize("fn", [
    lambda x: tuple(np.split(x, x.shape[0] // 2)),
    lambda x: tuple(np.array_split(x, x.shape[0] // 2)),
    lambda x: tuple(np.split(x, (x.shape[0] // 2,))),
    lambda x: np.pad(x, x.shape[0]),
    lambda x: np.pad(x, (x.shape[0], 1)),
    lambda x: np.pad(x, ((x.shape[0] // 2, 1),)),
], ids=["split", "array_split", "split at", "pad", "pad pair", "pad pairs"])
def test_split_and_pad_take_sizes_computed_from_shapes(fn, backend):
    _agrees(fn, (np.arange(6.0),), [(np.arange(8.0),), (np.arange(4.0),), (np.arange(10.0),)], backend)


def test_split_and_pad_of_two_dims(backend):
    _agrees(lambda x: np.pad(x, ((x.shape[0], 1), (0, x.shape[1]))), (np.ones((2, 3)),), [(np.ones((3, 2)),)],
            backend)


def test_a_guard_made_by_an_op_rule_names_the_users_line():
    def f(x):
        return tuple(np.split(x, x.shape[0] // 2))

    traced = nt.trace(f, (np.arange(6.0),), check_trace=False, backend="reference")
    # the op rule's guard on the section count, and the split's own one that the sections stay even
    assert any("// 2" in g for g in traced.guards) and all(__file__ in g for g in traced.guards)


# -- container arguments --------------------------------------------------------------------------------

def test_assigning_into_a_dict_argument_is_refused():
    def f(state, x):
        state["m"] = state["m"] * 0.5 + x
        return x * 2

    with pytest.raises(NotImplementedError, match=r"changed its argument 'state'.*state\['m'\]"):
        nt.trace(f, ({"m": np.ones(3)}, np.ones(3)), check_trace=False, backend="reference")


@pytest.mark.parametrize("change", [
    lambda p, x: p.append(x * 3),
    lambda p, x: p.__setitem__(0, p[0] * 2),
    lambda p, x: p.pop(),
    lambda p, x: p[1].update(z=x),
], ids=["append", "replace", "pop", "nested dict"])
def test_changing_a_list_argument_is_refused(change):
    def f(p, x):
        change(p, x)
        return x + 1

    with pytest.raises(NotImplementedError, match="changed its argument 'p'"):
        nt.trace(f, ([np.ones(2), {"a": np.ones(2)}], np.ones(2)), check_trace=False, backend="reference")


def test_writing_into_an_array_held_in_a_list_is_written_back(backend):
    def f(p, x):
        p[0] += x
        return x + 1

    traced = nt.trace(f, ([np.ones(2)], np.ones(2)), check_trace=False, backend=backend)
    ours, eager = [np.ones(2)], [np.ones(2)]
    traced(ours, np.full(2, 3.0))
    f(eager, np.full(2, 3.0))
    _same(ours[0], eager[0])


def test_a_dict_the_function_iterates_must_keep_its_keys_and_order(backend):
    def f(d):
        return tuple(v * (i + 1) for i, v in enumerate(d.values())) + (np.full(1, float(len(d))),)

    d = {"a": np.ones(1), "b": np.full(1, 2.0)}
    traced = _agrees(f, (d,), [], backend)
    _same(traced(d={"a": np.ones(1), "b": np.ones(1)}), f({"a": np.ones(1), "b": np.ones(1)}))
    for other in ({"b": d["b"], "a": d["a"]}, {**d, "c": np.full(1, 3.0)}):
        with pytest.raises(ValueError, match="reads this dict's structure"):
            traced(other)


def test_a_dict_looked_up_for_a_missing_key_must_keep_its_keys(backend):
    def f(d):
        return d["a"] * 2 + (d["c"] if "c" in d else 0.0) + d.get("e", 1.0)

    traced = _agrees(f, ({"a": np.ones(1)},), [], backend)
    with pytest.raises(ValueError, match="reads this dict's structure"):
        traced({"a": np.ones(1), "c": np.ones(1)})


def test_a_dict_read_by_key_takes_other_orders_and_keys(backend):
    traced = _agrees(lambda d: d["b"] * 2 + d.get("a"), ({"a": np.ones(1), "b": np.ones(1)},), [], backend)
    _same(traced({"c": 1, "b": np.full(1, 2.0), "a": np.ones(1)}), np.full(1, 5.0))


def test_a_dict_kept_and_read_after_tracing_does_not_change_the_trace():
    kept = []

    def f(d):
        kept.append(d)
        return d["a"] * 2

    traced = nt.trace(f, ({"a": np.ones(1), "b": np.ones(1)},), check_trace=False, backend="reference")
    assert list(kept[0]) == ["a", "b"]
    _same(traced({"b": np.ones(1), "a": np.ones(1)}), np.full(1, 2.0))


def test_an_exact_dict_survives_save_and_load():
    traced = nt.trace(lambda d: sum(d.values()), ({"a": np.ones(1), "b": np.ones(1)},), check_trace=False,
                      backend="reference")
    loaded = nt.load(io.BytesIO(traced.to_bytes()))
    _same(loaded({"a": np.ones(1), "b": np.ones(1)}), np.full(1, 2.0))
    with pytest.raises(ValueError, match="reads this dict's structure"):
        loaded({"b": np.ones(1), "a": np.ones(1)})


# -- scalar arguments -----------------------------------------------------------------------------------

@pytest.mark.parametrize("traced_with, called_with", [
    (0.0, -0.0), (-0.0, 0.0), (float("nan"), -float("nan")), (1, 1.0), (1, True), (1.0, True),
])
def test_a_scalar_argument_is_matched_by_type_and_bits(traced_with, called_with, backend):
    def f(x, s):
        return x / s

    with np.errstate(divide="ignore", invalid="ignore"):
        traced = nt.trace(f, (np.ones(2), traced_with), check_trace=False, backend=backend)
        _same(traced(np.ones(2), traced_with), f(np.ones(2), traced_with))
    with pytest.raises(ValueError, match="frozen into the trace as the constant"):
        traced(np.ones(2), called_with)


def test_nan_constants_of_either_sign_stay_apart(backend):
    nan = float("nan")
    _agrees(lambda x: (np.copysign(x, nan), np.copysign(x, -nan)), (np.ones(2),), [(np.ones(3),)], backend)


# -- modules --------------------------------------------------------------------------------------------

class _Step(nt.Module):
    def __init__(self):
        super().__init__()
        self.w = nt.Parameter(np.ones(3))

    def forward(self, x):
        self.w -= 0.1 * x
        return self.w * 2


def test_an_in_place_update_of_a_parameter_keeps_it_a_parameter(backend):
    model, eager = _Step(), _Step()
    traced = nt.trace(model, (np.ones(3),), check_trace=False, backend=backend)
    assert list(model.state_dict()) == ["w"] and isinstance(model.w, nt.Parameter)
    for _ in range(2):
        _same(traced(np.ones(3)), eager(np.ones(3)))
    _same(model.w, eager.w)


class _RunningMean(nt.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", np.zeros(3))

    def forward(self, x):
        self.mean = 0.9 * self.mean + 0.1 * x
        return x - self.mean


class _Counter(nt.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("n", np.zeros(()))

    def forward(self, x):
        self.n += 1
        return x * self.n


@pytest.mark.parametrize("cls", [_RunningMean, _Counter])
def test_the_checker_leaves_module_state_as_it_was(cls, backend):
    model, eager = cls(), cls()
    state = dict(model.state_dict())
    traced = nt.trace(model, (np.ones(3),), backend=backend)   # the checker runs forward three times
    for name, array in state.items():
        assert model.state_dict()[name] is array
        _same(array, eager.state_dict()[name])
    x = np.arange(3.0)
    for _ in range(2):
        _same(traced(x), eager(x))
    for name in state:
        _same(model.state_dict()[name], eager.state_dict()[name])


# -- NumPy functions ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["ALWAYS", "IF_NEEDED"])
def test_copy_modes(mode, backend):
    copy_mode = getattr(np._CopyMode, mode)
    _agrees(lambda x: np.array(x, copy=copy_mode) * 2, (np.ones(2),), [(np.arange(3.0),)], backend)
    _agrees(lambda x: np.asarray(x, copy=copy_mode) * 2, (np.ones(2),), [(np.arange(3.0),)], backend)


@pytest.mark.parametrize("fn", [
    lambda x: np.where(x > 0),
    lambda x: np.nonzero(x),
    lambda x: (x > 1).nonzero(),
], ids=["where", "nonzero", "method"])
def test_nonzero_and_one_argument_where_follow_the_data(fn, backend):
    others = [(np.array([[0.0, 2], [2, 3], [0, -1]]),), (np.zeros((2, 2)),), (np.array([[5.0, -1, 2]]),)]
    _agrees(fn, (np.array([[1.0, 0, 2], [0, 0, 3]]),), others, backend)
    _agrees(fn, (np.array([1.0, -1, 2]),), [(np.array([-1.0, 2, 2, 3]),), (np.array([-1.0]),)], backend)


def test_a_masked_array_around_a_traced_array_is_refused_at_the_users_line():
    def f(x):
        return np.ma.masked_array(x, mask=[0, 1, 0]).sum() * x

    with pytest.raises(TypeError, match=r"numpy.ma cannot hold a traced array \(at .*test_frontend_wrong"):
        nt.trace(f, (np.array([1.0, -1, 2]),), check_trace=False, backend="reference")


# -- loading --------------------------------------------------------------------------------------------

def _with_meta(data, edit):
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            content = source.read(name)
            if name == "meta.json":
                meta = json.loads(content)
                edit(meta["methods"]["forward"])
                content = json.dumps(meta).encode()
            target.writestr(name, content)
    return out.getvalue()


@pytest.mark.parametrize("edit", [
    lambda m: m.__setitem__("arg_names", ["y", "x"]),
    lambda m: m.__setitem__("arg_names", ["a", "b"]),
], ids=["swapped", "renamed"])
def test_argument_names_that_contradict_the_graph_are_a_format_error(edit):
    traced = nt.trace(lambda x, y: x - y, (np.ones(2), np.zeros(2)), check_trace=False, backend="reference")
    data = traced.to_bytes()
    _same(nt.load(io.BytesIO(data))(y=np.zeros(2), x=np.ones(2)), np.ones(2))
    with pytest.raises(FormatError, match="argument and state names"):
        nt.load(io.BytesIO(_with_meta(data, edit)))


# -- random ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: (np.random.seed(123), x + np.random.random(2))[1],
    lambda x: (np.random.shuffle(x), x * 1.0)[1],
    lambda x: x[np.random.permutation(2)],
    lambda x: x + np.random.choice(5),
    lambda x: x + np.random.exponential(),
    lambda x: (np.random.set_state(np.random.get_state()), x + np.random.random(2))[1],
], ids=["seed", "shuffle", "permutation", "choice", "exponential", "set_state"])
def test_global_random_functions_no_op_records_are_refused(fn):
    with pytest.raises(NotImplementedError, match=r"np\.random\.\w+ cannot be traced \(at .*test_frontend"):
        nt.trace(fn, (np.arange(2.0),), check_trace=False, backend="reference")


def test_global_random_functions_run_as_usual_outside_a_trace():
    nt.trace(lambda x: x + np.random.random(2), (np.ones(2),), check_trace=False, backend="reference")
    np.random.seed(5)
    first = np.random.permutation(4)
    np.random.seed(5)
    np.testing.assert_array_equal(np.random.permutation(4), first)


@pytest.mark.parametrize("fn, x", [
    (lambda x: x * np.random.default_rng(0).random(), np.ones(3, np.float32)),
    (lambda x: x * np.random.default_rng(0).standard_normal(dtype=np.float32), np.ones(3, np.float32)),
    (lambda x: x + np.random.default_rng(0).integers(3), np.ones(3, np.float32)),     # np.int64: strong
    (lambda x: x + np.random.randint(5, 6), np.full(3, 125, np.int8)),                 # a Python int: wraps
    (lambda x: x + np.random.randint(5, 6, dtype=np.int64), np.full(3, 125, np.int8)),
    (lambda x: x * (np.random.uniform(2.0, 2.0) * 2 + 1), np.ones(3, np.float32)),
], ids=["random", "standard_normal f32", "integers", "randint", "randint int64", "uniform arithmetic"])
def test_a_single_draw_is_typed_as_numpy_returns_it(fn, x, backend):
    _agrees(fn, (x,), [(np.concatenate([x, x]),)], backend)


def test_single_draws_are_fresh_on_every_call(backend):
    traced = nt.trace(lambda x: x * np.random.random(), (np.ones(2, np.float32),), check_trace=False,
                      backend=backend)
    draws = {float(traced(np.ones(2, np.float32))[0]) for _ in range(4)}
    assert len(draws) > 1 and traced(np.ones(2, np.float32)).dtype == np.float32


class _Holder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)


_HOLDER = _Holder(1)
_HELPER_RNG = np.random.default_rng(2)
_RNGS = [np.random.default_rng(4)]


def _helper_draw():
    return _HELPER_RNG.random()


class _Noisy(nt.Module):
    def __init__(self):
        super().__init__()
        self.rng = np.random.default_rng(3)

    def forward(self, x):
        return x + self.rng.normal()


@pytest.mark.parametrize("reach", ["attribute", "helper", "module attribute", "list"])
def test_draws_of_generators_reached_by_attribute_or_helper_are_recorded(reach, backend):
    fn = {"attribute": lambda x: x + _HOLDER.rng.random(),
          "helper": lambda x: x * _helper_draw(),
          "module attribute": _Noisy(),
          "list": lambda x: x - _RNGS[0].uniform()}[reach]
    traced = nt.trace(fn, (np.ones(2, np.float32),), check_trace=False, backend=backend)
    draws = {float(traced(np.ones(2, np.float32))[0]) for _ in range(4)}
    assert len(draws) > 1   # fresh values on every call, as NumPy draws them
    assert all(type(g) is np.random.Generator for g in (_HOLDER.rng, _HELPER_RNG, _RNGS[0]))


# -- a NumPy scalar is immutable: `s += x` binds a new value (skfuzzy's defuzz_bisector) --------------


def _scalar_accumulate(m):
    s = m[0] * 1.0
    first = s
    s += m[1]
    return np.stack([first, s])


def _array_accumulate(m):
    a = m[:1] * 1.0      # an array: `+=` writes it in place, and every reference sees the write
    first = a
    a += m[1]
    return np.stack([first, a])


def _zero_d_array_accumulate(m):
    a = np.array(m[0] * 1.0)   # a 0-d array, not a scalar: also written in place
    first = a
    a += m[1]
    return np.stack([first, a])


def _scalar_loop(m):
    total = m[0] * 0.0
    seen = []
    for i in range(3):
        total += m[i]
        seen.append(total)
    return np.stack(seen)


@pytest.mark.parametrize("fn", [_scalar_accumulate, _array_accumulate, _zero_d_array_accumulate,
                                _scalar_loop])
def test_in_place_operator_on_a_numpy_scalar_rebinds(fn, backend):
    x = np.array([1.0, 5.0, 0.01])
    _agrees(fn, (x,), [(np.array([2.0, -3.0, 7.0]),), (np.array([0.5, 0.25, 4.0, 9.0]),)], backend)


# -- `x ** 2` is np.square for ndarray.__pow__: bool gives int8, not np.power's int64 ------------------


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.float32])
@pytest.mark.parametrize("exponent", [2, 2.0, 3, 1, 0])
def test_power_operator_types_as_numpy(dtype, exponent, backend):
    x = np.array([1, 0, 1, 1], dtype=dtype)
    _agrees(lambda a: a ** exponent, (x,), [(np.array([0, 1, 1, 0, 1], dtype=dtype),)], backend)


# -- an internal array written with out= keeps its shape at other shapes ----------------


def _multiply_into_empty(x, y):
    z = np.empty_like(x)
    np.multiply(x, y, out=z)
    return z


def test_out_into_an_internal_array_keeps_its_shape(backend):
    """x (7, 1) * y (7,) into an out array of x's shape: NumPy raises 'non-broadcastable output operand';
    the trace took the product's (7, 7) as the array's new shape."""
    traced = nt.trace(_multiply_into_empty, (np.ones((4, 5)), np.ones(5)), check_trace=False, backend=backend)
    with pytest.raises(ValueError):
        _retraced(traced, np.ones((7, 1)), np.ones(7))


# -- a value NumPy gives as a scalar is hashable (its data guarded); an array is not --------------------


def _scalar_as_key(x):
    table = {1.0: 10.0, 2.0: 20.0}
    return x * table.get(x[0] * 1.0, -1.0)


def test_a_numpy_scalar_value_hashes_by_its_data(backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TracerWarning)   # the conversion of data is said once, at trace
        traced = _agrees(_scalar_as_key, (np.array([1.0, 3.0]),),
                         [(np.array([2.0, 5.0]),), (np.array([7.0, 1.0, 2.0]),)], backend)

    def array_hash(x):
        return x * len({x: 1})

    with pytest.raises(TypeError, match="unhashable"):
        nt.trace(array_hash, (np.ones(3),), check_trace=False, backend=backend)
    assert traced is not None


@pytest.mark.triton
@pytest.mark.parametrize("fn", [
    lambda x: np.mean(x, axis=0), lambda x: np.var(x, axis=0), lambda x: np.std(x, axis=0, ddof=1),
    lambda x: np.mean(x.T, axis=1), lambda x: np.mean(x), lambda x: np.mean(x.astype(np.float32), axis=0),
], ids=["mean0", "var0", "std0-ddof1", "mean-rows", "mean-all", "mean-f32"])
def test_a_mean_of_an_empty_slice_is_numpys_nan_bit_for_bit(fn, backend):
    # 0/0 gives the platform's default NaN: its sign bit is set on x86, and NumPy returns that NaN.
    traced = nt.trace(fn, (np.ones((2, 3)),), backend=backend)
    empty = np.empty((0, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want, got = fn(empty), traced(empty)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


def test_subok_true_is_plain_broadcasting_for_traced_arrays(backend):
    # SciPy's array-API layer calls broadcast_to(..., subok=True); on plain ndarrays it changes nothing.
    def f(x, y):
        a, b = np.broadcast_arrays(x, y, subok=True)
        return np.broadcast_to(x, (4, 1, *x.shape), subok=True) + a * b

    rng = np.random.default_rng(0)
    traced = nt.trace(f, (rng.standard_normal(3), rng.standard_normal((2, 1))), backend=backend)
    for n in (3, 5):
        x, y = rng.standard_normal(n), rng.standard_normal((2, 1))
        np.testing.assert_array_equal(traced(x, y), f(x, y))
