"""Seeded differential hunt for silent wrong answers in the fused elementwise kernels: single ops over
every ufunc the registry has, casts, where, two ops joined by a one-use temporary (the pair loops),
and chains of up to eight exact ops; every dtype; operands that are arrays, broadcast arrays, 0-d
arrays, constant Python scalars (NEP 50 weak) on either side, or one value in two slots; special
values (signed zeros, inf, NaN, subnormals, integer extremes, shift counts past the width, zero
divisors); sizes around the block size and big enough to split over threads; strided and reversed
layouts. Compared with eager NumPy under the project's rule (`numtrace_ir.testing.
assert_matches_numpy`); where NumPy raises, the backend must raise too.

`run_case(seed)` builds and checks one case; the suite runs a modest number of seeds, and
``python test_hunt_elementwise.py N [START]`` runs N of them from START."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
from numtrace_cpu import compile_graph
from numtrace_cpu.isa import OPS
from numtrace_ir import Graph, registry, testing
from numtrace_ir.ops.elementwise import MATH_LIBRARY_UFUNCS
from numtrace_ir.types import TensorType

DTYPES = [np.dtype(d) for d in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                "uint64", "float16", "float32", "float64")]
# The dtypes the interpreter computes in, drawn more often: the others mostly reach NumPy.
COMPUTE = [np.dtype(d) for d in ("bool", "int32", "int64", "float32", "float64")]
BLOCK = 512
SIZES = [0, 1, 2, 3, 7, 8, 9, 31, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 3, 4099]


def _ufunc_ops(nin: int) -> list[str]:
    return sorted(op.name for op in registry.all_ops()
                  if op.ufunc is not None and op.ufunc.nin == nin and op.ufunc.nout == 1
                  and op.name.startswith("np.") and op.ufunc.__name__ != "matmul"
                  and not op.name.startswith("np.linalg"))


BINARY = _ufunc_ops(2)
UNARY = _ufunc_ops(1)
# The ones the interpreter has kernels for (nt_opcodes.h), drawn more often.
KERNEL_BINARY = [n for n in BINARY if registry.get(n).ufunc.__name__ in OPS]
KERNEL_UNARY = [n for n in UNARY if registry.get(n).ufunc.__name__ in OPS]
# First ops of two-op cases: no math-library ones, whose ulps the second op could amplify past any
# bound (x + arctan2(y, z) cancelling).
# Nor fmax and fmin, whose zero ties (see `_tie_signs`) a second op could turn into infinities.
FIRST = [n for n in KERNEL_BINARY
         if registry.get(n).ufunc not in MATH_LIBRARY_UFUNCS and n not in ("np.fmax", "np.fmin")]
# Ops whose results are the same bits on every machine, for chains compared bit for bit.
# fmax and fmin are left out: NumPy signs the zero of a -0.0/0.0 tie by the element's place.
EXACT = ["np.add", "np.subtract", "np.multiply", "np.divide", "np.maximum", "np.minimum", "np.copysign",
         "np.bitwise_and", "np.bitwise_or", "np.bitwise_xor", "np.left_shift", "np.right_shift",
         "np.less", "np.equal", "np.greater_equal", "np.not_equal", "np.logical_and", "np.logical_xor",
         "np.negative", "np.absolute", "np.square", "np.sign", "np.floor", "np.rint", "np.sqrt", "np.isnan",
         "np.isfinite", "np.signbit", "np.logical_not", "np.invert", "np.heaviside", "np.where", "np.astype",
         "np.astype"]
# The float ops the pair loops join (nt_pairs.h), drawn more often in two-op cases.
PAIRED = ["np.add", "np.subtract", "np.multiply", "np.divide", "np.maximum", "np.minimum"]


def _specials(dt: np.dtype) -> list:
    if dt.kind == "b":
        return [False, True]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        small = [0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 100]
        neg = [-1, -2, -3, -7, -8, -31, -32, -63, -64, -65] if dt.kind == "i" else []
        edge = [info.min, info.min + 1, info.max, info.max - 1, info.max // 2, info.max // 2 + 1]
        return [v for v in small + neg + edge if info.min <= v <= info.max]
    fi = np.finfo(dt)
    return [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1.5, -2.5, 0.1, 7.0, 64.0, 1e3,
            np.inf, -np.inf, np.nan, -np.nan, float(fi.max), -float(fi.max), float(fi.tiny),
            float(fi.smallest_subnormal), -float(fi.smallest_subnormal), float(fi.eps), 100.5, -100.5,
            2.0 ** 31, -(2.0 ** 31), 2.0 ** 63, 1e20]


def _values(rng, dt: np.dtype, shape) -> np.ndarray:
    spec = np.array(_specials(dt), dtype=object)
    n = int(np.prod(shape, dtype=np.int64))
    picks = spec[rng.integers(0, len(spec), n)]
    if dt.kind == "f":
        rand = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        rand = rng.integers(max(info.min, -200), min(info.max, 200) + 1, n)
    else:
        rand = rng.integers(0, 2, n)
    mix = rng.random(n) < 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = np.where(mix, picks, rand.astype(object)).astype(dt) if n else np.zeros(0, dt)
    return out.reshape(shape)


def _layout(rng, x: np.ndarray) -> np.ndarray:
    """x itself, or the same values strided or reversed along its last dim."""
    if x.ndim == 0 or x.size == 0:
        return x
    k = rng.integers(0, 3)
    if k == 1:
        return testing.noncontiguous(x)
    if k == 2:
        buf = np.ascontiguousarray(x[..., ::-1])
        return buf[..., ::-1]
    return x


def _scalar(rng, kind: str):
    """A Python scalar of `kind` for a constant operand."""
    if kind == "bool":
        return bool(rng.integers(0, 2))
    if kind == "int":
        return int(rng.choice([0, 1, -1, 2, 3, 7, 8, 31, 32, 63, 64, -8, 127, 128, 255, 256, -129, 300,
                               2 ** 31 - 1, 2 ** 31, -(2 ** 31), 2 ** 63 - 1, -(2 ** 63), 2 ** 32]))
    return float(rng.choice([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.5, 3.0, np.inf, -np.inf, np.nan, 1e-310,
                             1e300, 7.0, 0.1]))


class _Operand:
    """One operand of the case: an array input (of `shape`, or broadcast to it, or 0-d), or a constant
    Python scalar (not when `array`); of dtype `dt`, or a random one."""

    def __init__(self, rng, shape, dt=None, array=False):
        self.const = None
        self.value = None
        form = rng.integers(0, 3 if array else 6)
        if dt is None:
            dt = DTYPES[rng.integers(0, len(DTYPES))] if rng.random() < 0.4 else COMPUTE[rng.integers(0, 5)]
        if form == 1 and shape:   # broadcast along some dims
            shape = tuple(d if rng.random() < 0.5 else 1 for d in shape)
            shape = shape[rng.integers(0, len(shape) + 1):]
        elif form == 2:           # 0-d array input
            shape = ()
        elif form == 3:           # constant Python scalar
            self.const = _scalar(rng, ["bool", "int", "float"][rng.integers(0, 3)])
            return
        self.value = _layout(rng, _values(rng, dt, shape))


def _graph_of(operands, build):
    g = Graph()
    vals, args = [], []
    for i, o in enumerate(operands):
        if o in operands[:i]:    # the same value in two slots
            vals.append(vals[operands.index(o)])
        elif o.const is None:
            vals.append(g.add_input(f"x{i}", TensorType(o.value.dtype, o.value.shape)))
            args.append(o.value)
        else:
            vals.append(g.create_node("prim.Constant", [], attrs={"value": o.const}).output)
    out = build(g, vals)
    g.set_outputs([out])
    return g, args


def _eager(operands, fn):
    return fn(*[o.value if o.const is None else o.const for o in operands])


def run_case(seed: int) -> None:
    """Builds case `seed` and checks the backend against NumPy; returns quietly when the graph is not
    one NumPy accepts."""
    rng = np.random.default_rng([seed, 17])
    nd = int(rng.integers(1, 3))
    shape = tuple(int(rng.choice(SIZES)) if i == nd - 1 else int(rng.choice([1, 2, 3, 5])) for i in range(nd))
    if rng.random() < 0.01:   # big enough for a pass to split over threads
        shape = (int(rng.choice([2, 3])), 600_001)
    kind = rng.integers(0, 7)
    if kind == 6:
        _chain(rng, shape, seed)
        return
    if kind <= 1:            # one binary op
        pool = KERNEL_BINARY if rng.random() < 0.7 else BINARY
        name = pool[rng.integers(0, len(pool))]
        ops = [_Operand(rng, shape), _Operand(rng, shape)]
        if ops[0].const is not None and ops[1].const is not None:
            ops[1] = _Operand(rng, shape, array=True)
        if ops[0].const is None and rng.random() < 0.1:
            ops[1] = ops[0]
        uf = registry.get(name).ufunc
        _check(name, ops, lambda g, v: g.create_node(name, v).output, uf, str(seed))
    elif kind == 2:          # one unary op
        pool = KERNEL_UNARY if rng.random() < 0.7 else UNARY
        name = pool[rng.integers(0, len(pool))]
        ops = [_Operand(rng, shape, array=True)]
        uf = registry.get(name).ufunc
        _check(name, ops, lambda g, v: g.create_node(name, v).output, uf, str(seed))
    elif kind == 4:          # a cast
        dt = DTYPES[rng.integers(0, len(DTYPES))]
        ops = [_Operand(rng, shape, array=True)]
        _check("np.astype", ops, lambda g, v: g.create_node("np.astype", v, attrs={"dtype": dt}).output,
               lambda x: x.astype(dt), f"{seed}: astype {dt}")
    elif kind == 5:          # where, constants in any slot
        ops = [_Operand(rng, shape, np.dtype(bool)), _Operand(rng, shape), _Operand(rng, shape)]
        _check("np.where", ops, lambda g, v: g.create_node("np.where", v).output, np.where, f"{seed}: where")
    else:                    # (3) two binary ops joined by a one-use temporary, maybe a cast
        n1, n2 = (str(rng.choice(PAIRED if rng.random() < 0.6 else more)) for more in (FIRST, KERNEL_BINARY))
        dt = [np.dtype("float32"), np.dtype("float64")][rng.integers(0, 2)] if rng.random() < 0.7 else None
        ops = [_Operand(rng, shape, dt), _Operand(rng, shape, dt),
               _Operand(rng, shape, dt if rng.random() < 0.7 else None)]
        if ops[0].const is None and rng.random() < 0.15:
            ops[2] = ops[0]
        tleft = bool(rng.integers(0, 2))
        cast = DTYPES[rng.integers(0, len(DTYPES))] if rng.random() < 0.2 else None
        u1, u2 = registry.get(n1).ufunc, registry.get(n2).ufunc

        def build(g, v):
            t = g.create_node(n1, v[:2]).output
            if cast is not None:
                t = g.create_node("np.astype", [t], attrs={"dtype": cast}).output
            return g.create_node(n2, [t, v[2]] if tleft else [v[2], t]).output

        def eager(x, y, z):
            t = u1(x, y)
            if cast is not None:
                t = t.astype(cast)
            return u2(t, z) if tleft else u2(z, t)

        via = f"cast {cast} then " if cast else ""
        side = "left" if tleft else "right"
        def second_inputs(x, y, z):   # what the second op reads, for its comparison rule
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = u1(x, y)
                t = t.astype(cast) if cast is not None else t
            return (t, z) if tleft else (z, t)

        _check(n2, ops, build, eager, f"{seed}: {n1} then {via}{n2} (t {side})", second_inputs)


def _chain(rng, shape, seed: int) -> None:
    """Up to eight exact ops (no math-library ones) over three inputs and constants, with casts:
    longer programs, registers reused, values read by several ops; the last value is compared bit
    for bit, a middle one too."""
    g = Graph()
    inputs = [_Operand(rng, shape, COMPUTE[rng.integers(0, 5)] if rng.random() < 0.8 else None, array=True)
              for _ in range(3)]
    values = [(g.add_input(f"x{i}", TensorType(o.value.dtype, o.value.shape)), o.value)
              for i, o in enumerate(inputs)]
    last = None
    for _ in range(int(rng.integers(2, 9))):
        name = EXACT[rng.integers(0, len(EXACT))]
        if name == "np.astype":
            dt = COMPUTE[rng.integers(0, 5)]
            v, x = values[rng.integers(0, len(values))]
            node = g.create_node(name, [v], attrs={"dtype": dt})
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values.append((node.output, x.astype(dt)))
            continue
        uf = registry.get(name).ufunc or np.where
        slots = []
        for _ in range(3 if uf is np.where else uf.nin):
            if rng.random() < 0.2:
                c = _scalar(rng, ["bool", "int", "float"][rng.integers(0, 3)])
                slots.append((g.create_node("prim.Constant", [], attrs={"value": c}).output, c))
            else:
                slots.append(values[rng.integers(0, len(values))])
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = uf(*[x for _, x in slots])
            except (TypeError, ValueError, OverflowError, np.exceptions.DTypePromotionError):
                continue
        try:
            node = g.create_node(name, [v for v, _ in slots])
        except (TypeError, ValueError):
            continue
        values.append((node.output, expected))
        last = name
    if last is None:
        return
    outs = [values[-1]]
    if len(values) > 3:
        outs.append(values[3 + int(rng.integers(0, len(values) - 3))])
    g.set_outputs([v for v, _ in outs])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compile_graph(g, [v.type for v in g.inputs])(*[o.value for o in inputs])
    for (_, e), a in zip(outs, got):
        testing.assert_matches_numpy(a, e, "np.add", [], what=f"chain {seed}\n{g}")


def _tie_signs(got, expected, ins):
    """`got` with the zeros of fmax/fmin ties (-0.0 against 0.0) signed as NumPy's: NumPy's own sign
    there depends on the element's place (its vector loop gives the second operand, its scalar tail the
    first), so the kernels give the second throughout (nt_opcodes.h) and only the zero is checked."""
    a, b = (np.asarray(x, dtype=expected.dtype) for x in ins)
    tie = np.broadcast_to((a == 0) & (b == 0), expected.shape)
    if not tie.any():
        return got
    np.testing.assert_array_equal(np.asarray(got)[tie], 0)
    return np.where(tie, expected, got)


def _check(label: str, operands, build, eager, what: str, rule_inputs=None) -> None:
    """The backend's result of the graph `build` makes of `operands` against `eager` on them, under
    the comparison rule of the op `label` on its inputs (`rule_inputs` of the operands' values where
    those are not the operands themselves)."""
    try:
        g, args = _graph_of(operands, build)
    except (TypeError, ValueError):
        return
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = _eager(operands, eager)
        except (TypeError, ValueError, OverflowError, np.exceptions.DTypePromotionError, ZeroDivisionError):
            expected = None
        try:
            exe = compile_graph(g, [v.type for v in g.inputs])
            got = exe(*args)
        except Exception as e:   # any refusal is fine where NumPy refused too
            if expected is None:
                return
            raise AssertionError(f"case {what}: the backend raised {e!r}; NumPy did not\n{g}") from e
    if expected is None:
        raise AssertionError(f"case {what}: NumPy raised but the backend returned {got!r}\n{g}")
    if isinstance(got, tuple):
        got = got[0]
    # Python bools as NumPy bools: resolve_dtypes takes int, float and complex but not bool.
    ins = [o.value if o.const is None else np.bool_(o.const) if isinstance(o.const, bool) else o.const
           for o in operands]
    if rule_inputs is not None:
        ins = list(rule_inputs(*ins))
    if label in ("np.fmax", "np.fmin"):
        got = _tie_signs(got, expected, ins)
    testing.assert_matches_numpy(got, expected, label, ins, what=f"case {what}\n{g}")


def _one_op(name: str, x: np.ndarray, value: int, left: bool):
    g = Graph()
    a = g.add_input("x", TensorType(x.dtype, x.shape))
    c = g.create_node("prim.Constant", [], attrs={"value": value}).output
    g.set_outputs(g.create_node(name, [c, a] if left else [a, c]).outputs)
    return compile_graph(g, [a.type])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**32, 2**63, -(2**63) - 1, 2**64])
@pytest.mark.parametrize("name", ["np.less", "np.equal", "np.greater_equal", "np.not_equal"])
@pytest.mark.parametrize("left", [False, True])
def test_comparison_with_a_python_int_outside_the_dtype(dtype, value, name, left):
    """NumPy compares a Python int outside the array's integer range exactly (x < 2**31 is all True
    for int32 x); a register holding the int wrapped into the dtype compared something else."""
    info = np.iinfo(dtype)
    x = np.array([info.min, -1, 0, 1, info.max, 7], dtype)
    uf = registry.get(name).ufunc
    expected = uf(value, x) if left else uf(x, value)
    testing.assert_matches_numpy(_one_op(name, x, value, left)(x)[0], expected, name, [x, value])


@pytest.mark.parametrize("name", ["np.add", "np.multiply", "np.minimum", "np.right_shift", "np.bitwise_and"])
def test_arithmetic_with_a_python_int_outside_the_dtype_raises(name):
    """NumPy refuses a Python int outside the array's dtype in arithmetic (OverflowError); the backend
    raises its error (a RuntimeError naming the node) instead of computing with the int wrapped."""
    x = np.arange(5, dtype=np.int32)
    with pytest.raises(OverflowError):
        registry.get(name).ufunc(x, 2**31)
    with pytest.raises(RuntimeError, match="OverflowError"):
        _one_op(name, x, 2**31, False)(x)


@pytest.mark.parametrize("chunk", range(10))
def test_backend_matches_numpy(chunk):
    for seed in range(chunk * 60, chunk * 60 + 60):
        run_case(seed)


if __name__ == "__main__":
    count, start = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0
    failures = 0
    for s in range(start, start + count):
        try:
            run_case(s)
        except AssertionError as e:
            failures += 1
            print("FAIL", str(e).splitlines()[0][:300], file=sys.stderr)
            print(str(e)[:1500], file=sys.stderr)
    print(f"{count} cases, {failures} failures")
