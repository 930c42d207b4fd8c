"""The block interpreter on its own: program validation, both ISA builds, edge layouts."""

import numpy as np
import pytest
from numtrace_cpu import isa, runtime
from numtrace_cpu.isa import DTYPES, OPS, REDUCTIONS, REG_KINDS, ROLES, FusedKernel

F32 = DTYPES[np.dtype(np.float32)]
F64 = DTYPES[np.dtype(np.float64)]
BOOL = DTYPES[np.dtype(bool)]
INPUT, OUTPUT, TEMP, CONST = (REG_KINDS[k] for k in ("input", "output", "temp", "const"))
# Every ISA build this CPU runs (the widest is the one in use; the others must agree with it).
BUILDS = [isa.load(b) for b in isa.built() if isa.BUILDS[b][1] <= runtime.cpu_features()]


def _add_kernel(module, shape=(10,)):
    regs = [(F32, INPUT, 0), (F32, INPUT, 1), (F32, OUTPUT, 2)]
    return FusedKernel(shape, (), regs, [], [(OPS["add"][0], F32, 2, 0, 1, -1)], [],
                       [(F32, ROLES["input"]), (F32, ROLES["input"]), (F32, ROLES["output"])], module)


def _unary_kernel(module, name, dt, shape):
    """out = name(x) over `shape`: one instruction, one input, one output of dtype code `dt`."""
    return FusedKernel(shape, (), [(dt, INPUT, 0), (dt, OUTPUT, 1)], [], [(OPS[name][0], dt, 1, 0, -1, -1)],
                       [], [(dt, ROLES["input"]), (dt, ROLES["output"])], module)


@pytest.mark.parametrize("module", BUILDS, ids=lambda m: m.__name__)
def test_builds_agree_on_transcendentals(module):
    x = np.linspace(-110, 100, 20001, dtype=np.float32)
    x[:3] = [np.nan, np.inf, -np.inf]
    for name, ref in (("exp", np.exp), ("tanh", np.tanh)):
        k = _unary_kernel(module, name, F32, x.shape)
        out = np.empty_like(x)
        k.run([x, out], 1)
        with np.errstate(all="ignore"):
            expected = ref(x)
        np.testing.assert_allclose(out, expected, rtol=3e-7 * 8, atol=1e-44, equal_nan=True)


@pytest.mark.parametrize("module", BUILDS, ids=lambda m: m.__name__)
@pytest.mark.parametrize(("dt", "np_dt"), [(F32, np.float32), (F64, np.float64)])
def test_negative_flips_the_sign_of_zero(module, dt, np_dt):
    x = np.array([0.0, -0.0, 1.5, np.inf, np.nan], np_dt)
    k = _unary_kernel(module, "negative", dt, x.shape)
    out = np.empty_like(x)
    k.run([x, out], 1)
    np.testing.assert_array_equal(out, -x)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(-x))   # -(+0.0) is -0.0


@pytest.mark.parametrize("module", BUILDS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("n", [1, 7, 8, 13, 263])
def test_transcendental_edges_any_length_in_place(module, n):
    """Every element, the last partial vector of a block included, keeps the scalar function's edge
    cases: exact +-1 past tanh's saturation point, x itself for tiny x (sign of zero kept), NaN out
    for NaN in, and exp's overflow, underflow and subnormal results; run in place as well."""
    edge = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, -3e-4, 8.0, -8.0, 1e30, 7.9, 88.7, 89.5,
                     -87.0, -95.0, -103.9, -110.0, 86.7, 0.5], np.float32)
    x = np.resize(edge, n)
    for name, ref in (("exp", np.exp), ("tanh", np.tanh)):
        k = _unary_kernel(module, name, F32, x.shape)
        out = np.empty_like(x)
        k.run([x, out], 1)
        inplace = x.copy()
        k.run([inplace, inplace], 1)
        np.testing.assert_array_equal(inplace, out)
        with np.errstate(all="ignore"):
            expected = ref(x.astype(np.float64)).astype(np.float32)
        np.testing.assert_allclose(out, expected, rtol=3e-7 * 8, atol=1e-44, equal_nan=True)
        if name == "tanh":
            big = np.abs(x) > 7.91
            assert np.array_equal(out[big], np.sign(x[big]))
            tiny = np.abs(x) < 4e-4
            assert np.array_equal(out[tiny].view(np.uint32), x[tiny].view(np.uint32))


@pytest.mark.parametrize("module", BUILDS, ids=lambda m: m.__name__)
def test_operand_checks(module):
    k = _add_kernel(module)
    a = np.ones(10, np.float32)
    with pytest.raises(ValueError, match="3 operands"):
        k.run([a, a], 1)
    with pytest.raises(TypeError, match="dtype float64"):
        k.run([a, a.astype(np.float64), np.empty(10, np.float32)], 1)
    with pytest.raises(ValueError, match="does not broadcast"):
        k.run([a, np.ones(3, np.float32), np.empty(10, np.float32)], 1)
    with pytest.raises(ValueError, match="does not fit"):
        k.run([a, a, np.empty((1, 10), np.float32)], 1)
    ro = np.empty(10, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        k.run([a, a, ro], 1)
    with pytest.raises(TypeError, match="ndarray"):
        k.run([a, [1.0] * 10, np.empty(10, np.float32)], 1)
    misaligned = np.frombuffer(np.zeros(41, np.uint8).data, np.uint8)[1:].view(np.float32)
    out = np.empty(10, np.float32)
    k.run([misaligned, a, out], 1)
    assert np.array_equal(out, np.ones(10, np.float32))


@pytest.mark.parametrize(("regs", "instrs", "operands", "match"), [
    ([(F32, INPUT, 0)], [(999, F32, 0, 0, -1, -1)], [(F32, 0)], "opcode"),
    ([(F32, INPUT, 0), (F32, TEMP, 0)], [(OPS["divide"][0], BOOL, 1, 0, 0, -1)], [(F32, 0)], "no kernel"),
    ([(F32, INPUT, 0), (F64, TEMP, 0)], [(OPS["add"][0], F32, 1, 0, 0, -1)], [(F32, 0)], "destination"),
    ([(F32, INPUT, 0)], [(OPS["add"][0], F32, 0, 0, 0, -1)], [(F32, 0)], "read-only"),
    ([(F32, INPUT, 0), (F32, TEMP, 0)], [(OPS["add"][0], F32, 1, 0, 7, -1)], [(F32, 0)], "register"),
    ([(F32, INPUT, 3)], [], [(F32, 0)], "operand index"),
    ([(F64, INPUT, 0)], [], [(F32, 0)], "role/dtype"),
    ([(F32, INPUT, 0)], [], [(F32, 0), (F32, 1)], "exactly one"),
])
def test_program_validation(regs, instrs, operands, match):
    with pytest.raises(ValueError, match=match):
        FusedKernel((4,), (), regs, [], instrs, [], operands)


def test_reduction_validation_and_empty_rows():
    regs = [(F32, INPUT, 0)]
    ops = [(F32, ROLES["input"]), (F32, ROLES["reduced"])]
    with pytest.raises(ValueError, match="reduce axis"):
        FusedKernel((3, 0), (2,), regs, [], [], [(REDUCTIONS["max"][0], 0, 1, 0.0)], ops)
    k = FusedKernel((3, 0), (1,), regs, [], [], [(REDUCTIONS["max"][0], 0, 1, 0.0)], ops)
    with pytest.raises(ValueError, match="zero-size"):
        k.run([np.empty((3, 0), np.float32), np.empty(3, np.float32)], 1)
    k = FusedKernel((3, 0), (1,), regs, [], [], [(REDUCTIONS["sum"][0], 0, 1, 0.0)], ops)
    out = np.full(3, 7, np.float32)
    k.run([np.empty((3, 0), np.float32), out], 1)
    assert np.array_equal(out, np.zeros(3, np.float32))


def test_opcode_table_is_one_list():
    """nt_opcodes.h expands one list into the enum and the names table: the codes are 0..n-1 in list
    order, so a name can never point at another op's code."""
    assert [code for code, _, _ in OPS.values()] == list(range(len(OPS)))
    assert [code for code, _ in REDUCTIONS.values()] == list(range(len(REDUCTIONS)))
    assert {"exp", "tanh", "reciprocal", "arctan2", "logical_xor", "where", "cast"} <= set(OPS)


_SAMPLES = {np.float32: np.linspace(-3, 3, 37, dtype=np.float32), np.float64: np.linspace(-3, 3, 37),
            np.int32: np.arange(-18, 19, dtype=np.int32), np.int64: np.arange(-18, 19, dtype=np.int64) * 7,
            np.bool_: np.arange(37) % 3 == 0}
_CATEGORY_ARITY = {0: (1, False), 1: (1, True), 2: (2, False), 3: (2, True)}   # CAT_* -> (inputs, bool out)


@pytest.mark.parametrize("module", BUILDS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("name", [n for n, (_, cat, _) in OPS.items() if cat in _CATEGORY_ARITY])
def test_every_op_computes_what_its_name_says(module, name):
    """Each opcode, in every dtype its table entry lists, equals the NumPy function of its name: the
    dispatch (switches over opcodes) agrees with the names table."""
    code, cat, dts = OPS[name]
    arity, bool_out = _CATEGORY_ARITY[cat]
    for np_dt in (d.type for d, c in DTYPES.items() if c in dts):
        dt = DTYPES[np.dtype(np_dt)]
        out_dt = BOOL if bool_out else dt
        xs = [_SAMPLES[np_dt], np.roll(_SAMPLES[np_dt], 5)][:arity]
        regs = [(dt, INPUT, i) for i in range(arity)] + [(out_dt, OUTPUT, arity)]
        k = FusedKernel(xs[0].shape, (), regs, [], [(code, dt, arity, 0, 1 if arity == 2 else -1, -1)], [],
                        [(dt, ROLES["input"])] * arity + [(out_dt, ROLES["output"])], module)
        out = np.empty(xs[0].shape, bool if bool_out else np_dt)
        k.run([*xs, out], 1)
        with np.errstate(all="ignore"):
            if name == "scalar_power":   # NumPy scalars' **, elementwise
                expected = np.array([a ** b for a, b in zip(*xs)], np_dt)
            elif name == "power_broadcast":   # np.power with one exponent per call (NumPy's branches)
                expected = np.array([np.power(a, b) for a, b in zip(*xs)], np_dt)
            else:
                expected = getattr(np, name)(*xs)
        tol = 3e-6 if np_dt is np.float32 else 1e-13
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol, equal_nan=True,
                                   err_msg=f"{name} {np_dt}")
