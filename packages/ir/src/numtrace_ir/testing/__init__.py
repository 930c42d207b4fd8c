"""Helpers for op tests on every backend (the OpInfo pattern): iterate ``(op, sample)`` cases, build a
one-op graph from a sample, run the reference, compare outputs with per-dtype tolerances, and make
non-contiguous copies of inputs.

The rule for comparing with NumPy (docs/cpu.md, "Exact and ulp-bounded results"): a test may compare a
backend's result with NumPy's bit for bit only where NumPy's result is the same on every machine
(`numpy_exact`: arithmetic, sqrt, comparisons, casts, integer ops, reductions in a fixed order);
math-library results (exp, log, sin, power, ...) differ between NumPy's AVX2 and AVX-512 loops, so
they are compared within `NUMPY_ULPS` (`assert_matches_numpy`, and `assert_outputs_close` given the
op).

The tools every package's own tests use live here, in the one package each of them depends on, so
that a package's tests run with only that package and its declared dependencies installed:
`numtrace_ir.testing.import_cycles` (each package's test that its modules form layers) and
`hypothesis_profiles` (the derandomized profile CI runs)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from numtrace_ir import registry
from numtrace_ir.exactness import math_library, numpy_exact
from numtrace_ir.graph import Graph
from numtrace_ir.interpreter import Interpreter
from numtrace_ir.registry import OpDef, Sample
from numtrace_ir.types import ScalarType, TensorType, Type, normalize_dtype

__all__ = [
    "NUMPY_ULPS",
    "TOLERANCES",
    "assert_matches_numpy",
    "assert_outputs_close",
    "build_graph",
    "case_id",
    "iter_cases",
    "math_sweep",
    "noncontiguous",
    "numpy_exact",
    "reference_outputs",
    "run_reference",
    "sampled_dtypes",
    "type_of",
    "ulp_distance",
]

# (rtol, atol) per result dtype kind and size; integers and bools compare exactly.
TOLERANCES = {
    np.dtype(np.float16): (1e-2, 1e-3),
    np.dtype(np.float32): (1e-4, 1e-5),
    np.dtype(np.float64): (1e-9, 1e-12),
    np.dtype(np.complex64): (1e-4, 1e-5),
    np.dtype(np.complex128): (1e-9, 1e-12),
}

# Largest distance in ulps between a backend's result of a math-library ufunc and NumPy's, per result
# dtype: the backend's own error (docs/cpu.md: the CPU's vector kernels 1.5 ulp, the C library's
# functions up to 4, float32 tanh about 5) plus NumPy's, whose AVX-512 and AVX2 loops are up to 3 ulp
# apart (ci/isa_ulps.py). float16 is computed in float32 and rounded once on either side. Complex
# results keep TOLERANCES: a part near zero is not accurate in its own ulps.
NUMPY_ULPS = {np.dtype(np.float16): 2, np.dtype(np.float32): 8, np.dtype(np.float64): 8}


def type_of(value: Any) -> TensorType | ScalarType:
    """The IR type of a runtime value: arrays and NumPy scalars are tensors, Python scalars weak."""
    if isinstance(value, (np.ndarray, np.generic)):
        return TensorType(normalize_dtype(value.dtype), value.shape)
    if isinstance(value, bool):
        return ScalarType("bool")
    for kind, py in (("int", int), ("float", float), ("complex", complex)):
        if isinstance(value, py):
            return ScalarType(kind)
    raise TypeError(f"no IR type for {type(value).__name__} {value!r}")


def iter_cases(ops: Iterable[OpDef] | None = None, seed: int = 0) -> Iterator[tuple[OpDef, Sample]]:
    """Every ``(op, sample)`` pair; each op draws from its own generator seeded by `seed` and its name,
    so adding an op never changes another op's samples."""
    for op in registry.all_ops() if ops is None else ops:
        rng = np.random.default_rng([seed, *op.name.encode()])
        for sample in op.samples(rng):
            yield op, sample


def case_id(op: OpDef, sample: Sample, i: int) -> str:
    """A readable pytest id: op name, sample index, input types."""
    return f"{op.name}-{i}-" + ",".join(str(type_of(v)) for v in sample.inputs)


def reference_outputs(op: OpDef, sample: Sample) -> tuple:
    """The reference's outputs as a tuple (one entry per output). A reference returns a one-output
    node's value itself, never a sequence of one (which a backend would read as one more axis)."""
    out = op.reference(*sample.inputs, **sample.attrs)
    if isinstance(out, (tuple, list)) and len(out) == 1:
        raise AssertionError(f"{op.name}: the reference returned a {type(out).__name__} of one array")
    return out if isinstance(out, tuple) else (out,)


def run_reference(graph: Any, inputs: Iterable[Any]) -> tuple:
    """The graph's outputs computed node by node with each op's NumPy reference (the test oracle), as
    the references return them (see `numtrace_ir.interpreter.Interpreter.run`)."""
    return tuple(Interpreter(graph).run(*inputs))


def build_graph(op: OpDef, sample: Sample, inputs: Iterable[Any] | None = None) -> Graph:
    """A graph with one input per sample input (typed from the values, or from `inputs` when given:
    types or values) and one node of `op`, whose outputs are the graph's outputs."""
    g = Graph()
    values = [
        g.add_input(f"x{i}", v if isinstance(v, Type) else type_of(v))
        for i, v in enumerate(sample.inputs if inputs is None else inputs)
    ]
    node = g.create_node(op.name, values, attrs=op.normalize_attrs(sample.attrs))
    g.set_outputs(node.outputs)
    return g


def noncontiguous(value: Any) -> Any:
    """A copy of an array with the same values and a strided (non-contiguous) layout; other values
    are returned unchanged. 0-d and empty arrays cannot be made non-contiguous and are copied."""
    if not isinstance(value, np.ndarray) or value.ndim == 0 or value.size == 0:
        return value.copy() if isinstance(value, np.ndarray) else value
    buf = np.empty(value.shape[:-1] + (2 * value.shape[-1],), value.dtype)
    view = buf[..., ::2]
    view[...] = value
    return view


def sampled_dtypes(op: OpDef) -> list[str]:
    """Short names of the input dtypes the op's samples cover (for docs and coverage reports)."""
    seen: dict[str, None] = {}
    rng = np.random.default_rng(0)
    for s in op.samples(rng):
        for v in s.inputs:
            t = type_of(v)
            seen[t.dtype_name if isinstance(t, TensorType) else t.kind] = None
    return list(seen)


def assert_outputs_close(actual: Any, expected: Any, *, what: str = "", computed_in: Any = None,
                         op: OpDef | None = None, inputs: Sequence[Any] = ()) -> None:
    """Outputs equal the reference's: same count, dtype and shape exactly; values within the
    tolerance of their dtype (exact for ints and bools; nan equals nan). `computed_in`: a float dtype
    some intermediate was rounded to, whose looser tolerance then applies to float outputs too (a
    float64 result of float32 work is only as close as float32). Given the `op` (one node) and its
    `inputs`, the float outputs of a math-library op are held to `NUMPY_ULPS` instead."""
    ulps = op is not None and math_library(op, inputs)
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    if len(actual) != len(expected):
        raise AssertionError(f"{what}: {len(actual)} outputs, expected {len(expected)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        where = f"{what} output {i}"
        if not isinstance(e, (np.ndarray, np.generic)):  # a Python scalar
            if type(a) is not type(e) or not (a == e or (a != a and e != e)):
                raise AssertionError(f"{where}: {a!r} != expected {e!r}")
            continue
        a, e = np.asarray(a), np.asarray(e)
        if a.dtype != e.dtype or a.shape != e.shape:
            raise AssertionError(f"{where}: got {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}")
        if ulps and e.dtype in NUMPY_ULPS:
            _assert_within_ulps(a, e, NUMPY_ULPS[e.dtype], where)
            continue
        rtol, atol = TOLERANCES.get(e.dtype, (0, 0))
        if computed_in is not None and e.dtype.kind in "fc":
            rtol, atol = map(max, (rtol, atol), TOLERANCES.get(np.dtype(computed_in), (0, 0)))
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=where, strict=True)


def ulp_distance(a: Any, b: Any) -> np.ndarray:
    """Elementwise distance between two float arrays of one dtype in units in the last place: how many
    steps from one float to the next lead from a to b, as float64. 0.0 and -0.0 are 0 apart, and so
    are two NaNs; a NaN and a number are inf apart. Complex values: the larger of the parts'."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.dtype.kind not in "fc":
        raise TypeError(f"ulp_distance: two float arrays of one dtype, got {a.dtype} and {b.dtype}")
    if a.dtype.kind == "c":
        return np.maximum(ulp_distance(a.real, b.real), ulp_distance(a.imag, b.imag))
    bits = np.dtype(f"i{a.dtype.itemsize}")
    lowest = np.iinfo(bits).min

    def ordered(x: np.ndarray) -> np.ndarray:
        """The float's rank among all floats of its dtype (0.0 and -0.0 both 0)."""
        i = x.reshape(-1).view(bits).astype(np.int64).reshape(x.shape)
        return np.where(i < 0, lowest - i, i)

    ia, ib = ordered(a), ordered(b)
    same_sign = (ia >= 0) == (ib >= 0)
    # Of one sign the int64 difference is exact; across zero it is the sum of the two ranks.
    apart = np.where(same_sign, np.abs(np.where(same_sign, ia - ib, 0)).astype(np.float64),
                     np.abs(ia).astype(np.float64) + np.abs(ib).astype(np.float64))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    apart[nan_a | nan_b] = np.inf
    apart[nan_a & nan_b] = 0.0
    return apart



def fp_reports(fn: Any) -> tuple[list[tuple[str, str]], str | None, Any]:
    """What calling `fn()` reports of floating-point errors, NumPy's way: the sorted (category, message) of
    each RuntimeWarning, NumPy's message of the FloatingPointError it raises (or None; a traced call's
    names the node first), and what it returned (None when it raised), so a test can check the answer
    that comes after a warning as well as the warning."""
    import warnings

    result = raised = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn()
        except FloatingPointError as exc:
            raised = str(exc).rsplit("FloatingPointError: ", 1)[-1]
    reports = sorted((w.category.__name__, str(w.message)) for w in caught
                     if issubclass(w.category, RuntimeWarning))
    return reports, raised, result

def math_sweep(nin: int, dtype: Any, n: int) -> tuple[np.ndarray, ...]:
    """`nin` operand arrays of `n` values of `dtype` (float or complex) for measuring math functions:
    every magnitude and sign (log-uniform, subnormals to the largest float), small numbers densely,
    the special values, and for a second operand integers and halves (`power`'s distinct paths).
    Made with ldexp and arithmetic only, so they are the same bits whichever SIMD loops NumPy runs."""
    rng = np.random.default_rng(0)
    dtype = np.dtype(dtype)
    info = np.finfo(dtype)   # of the real part
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, np.pi, -np.pi])

    def magnitudes(size: int, lo: int, hi: int) -> np.ndarray:
        return np.ldexp(rng.uniform(1, 2, size), rng.integers(lo, hi, size))

    def one(k: int) -> np.ndarray:
        q = max(n - special.size, 4) // 4
        parts = [rng.uniform(-10, 10, q),
                 np.round(rng.uniform(-12, 12, q) * 2) / 2 if k == 1 else rng.uniform(0, 2, q),
                 magnitudes(q, info.minexp - info.nmant, info.maxexp) * rng.choice([-1.0, 1.0], q),
                 magnitudes(q, -29, 29), special]
        return rng.permutation(np.concatenate(parts)) if k else np.concatenate(parts)

    def operand(k: int) -> np.ndarray:
        re = one(k)
        z = np.empty(re.size, dtype)
        with np.errstate(over="ignore", under="ignore"):   # float16 has not the range
            z.real = re
            if dtype.kind == "c":
                z.imag = one(2)
        return z

    return tuple(operand(k) for k in range(nin))


def _assert_within_ulps(actual: np.ndarray, expected: np.ndarray, ulps: float, where: str) -> None:
    """Float values within `ulps` of the expected ones; NaN where it has NaN, and its infinities and
    zeros with their signs exactly (a math function's special values are not a matter of accuracy)."""
    special = np.isnan(expected) | np.isinf(expected) | (expected == 0)
    np.testing.assert_array_equal(actual[special], expected[special], err_msg=f"{where}: special values")
    np.testing.assert_array_equal(np.signbit(actual[special & ~np.isnan(expected)]),
                                  np.signbit(expected[special & ~np.isnan(expected)]),
                                  err_msg=f"{where}: signs of zeros and infinities")
    apart = ulp_distance(actual, expected)
    if apart.size and apart.max() > ulps:
        i = np.unravel_index(int(np.argmax(apart)), apart.shape)
        raise AssertionError(f"{where}: {actual[i]!r} is {apart[i]:g} ulp from {expected[i]!r} (at {i}), "
                             f"more than {ulps}; {int((apart > ulps).sum())} of {apart.size} elements")


def assert_matches_numpy(actual: Any, expected: Any, op: OpDef | str, inputs: Sequence[Any], *,
                         what: str = "") -> None:
    """A backend's result of one `op` on `inputs` against NumPy's, under the project's rule: bit for
    bit (dtype, shape, values, NaN places, signs of zeros) where `numpy_exact`, else float values
    within `NUMPY_ULPS` with special values exact. For a path documented to equal NumPy exactly."""
    op = registry.get(op) if isinstance(op, str) else op
    actual, expected = np.asarray(actual), np.asarray(expected)
    where = what or op.name
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        raise AssertionError(f"{where}: got {actual.dtype}{list(actual.shape)}, "
                             f"expected {expected.dtype}{list(expected.shape)}")
    if not numpy_exact(op, inputs) and expected.dtype in NUMPY_ULPS:
        _assert_within_ulps(actual, expected, NUMPY_ULPS[expected.dtype], where)
        return
    np.testing.assert_array_equal(actual, expected, err_msg=where, strict=True)
    if expected.dtype.kind == "f":   # 0.0 == -0.0 above; a NaN's sign is not part of the result
        number = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(actual[number]), np.signbit(expected[number]),
                                      err_msg=f"{where}: signs")
