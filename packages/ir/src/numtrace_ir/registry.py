"""The op registry: one `OpDef` per op holds its schema, shape/dtype rule, NumPy reference, the NumPy
callables that trace to it, and its sample inputs. Nothing about an op lives anywhere else.

Op definitions are grouped by family in `numtrace_ir.ops`; importing `numtrace_ir` registers them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from numtrace_ir.dims import ShapeError
from numtrace_ir.types import ScalarType, TensorType, Type

__all__ = [
    "KINDS",
    "REDUCTION_KINDS",
    "REQUIRED",
    "Attr",
    "Input",
    "Inputs",
    "OpDef",
    "Sample",
    "ShapeError",
    "Unsupported",
    "UnknownOpError",
    "all_ops",
    "for_numpy",
    "get",
    "register",
    "register_target",
]

KINDS = (
    "elementwise",
    "reduction",
    "contraction",
    "movement",
    "index",
    "creation",
    "random",
    "scalar",
    "prim",
    "other",
)


# What a reduction computes, for backends that fold reductions into kernels (`OpDef.reduction`).
REDUCTION_KINDS = ("sum", "prod", "max", "min", "any", "all", "mean", "var", "std", "argmax", "argmin",
                   "cumsum", "cumprod")


class UnknownOpError(KeyError):
    """An op name (or NumPy callable) the registry has no entry for."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Input:
    """A graph input. `accepts` is ``"tensor"``, ``"scalar"`` or ``"any"`` (a NumPy operand: an array
    or a weak Python scalar). An `optional` input may be passed as None or not at all: it is then left
    out of the node's inputs and its name recorded in the attr ``omitted``."""

    name: str
    accepts: str = "tensor"
    optional: bool = False


@dataclass(frozen=True)
class Inputs:
    """A variable number of graph inputs: one sequence argument (``np.concatenate(arrays)``), or with
    `star` every remaining positional argument (``np.einsum(subscripts, *operands)``); at least
    `minimum` of them."""

    name: str
    accepts: str = "tensor"
    star: bool = False
    minimum: int = 1


@dataclass(frozen=True)
class Attr:
    """A static attribute with its default; `convert` normalises a value (and rejects bad ones with
    TypeError/ValueError) so that equal calls give equal, hashable attrs."""

    name: str
    default: Any = REQUIRED
    convert: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Unsupported:
    """A NumPy parameter kept for its position (e.g. ``out``) that must keep its default: the tracer
    functionalizes it before binding. ``same``: other values that act as the default on the plain
    ndarrays a graph holds (``subok=True`` keeps no subclass where there is none)."""

    name: str
    default: Any = None
    same: tuple = ()


Param = Input | Inputs | Attr | Unsupported


@dataclass
class Sample:
    """One sample call: inputs (arrays or Python scalars) and attrs (missing ones take defaults)."""

    inputs: tuple
    attrs: dict = field(default_factory=dict)
    note: str = ""


_TYPE_KINDS = {"tensor": (TensorType,), "scalar": (ScalarType,), "any": (TensorType, ScalarType)}
_ACCEPTS_TEXT = {"tensor": "a TensorType", "scalar": "a ScalarType", "any": "a TensorType or ScalarType"}
_CACHE_LIMIT = 1 << 14


def _freeze(v: Any) -> Any:
    """A hashable stand-in for an attr value in `infer`'s memo key (slices are unhashable before
    Python 3.12)."""
    if type(v) is slice:
        return (slice, v.start, v.stop, v.step)
    if type(v) is tuple:
        return tuple(_freeze(x) for x in v)
    hash(v)
    return v


class OpDef:
    """One op. `rule(input_types, attrs) -> tuple[Type, ...]` is the shape/dtype rule, `impl` the NumPy
    reference taking the schema's parameters by name."""

    __slots__ = (
        "name",
        "kind",
        "params",
        "rule",
        "impl",
        "numpy_targets",
        "nondeterministic",
        "data_dependent_shape",
        "effect",
        "pure",
        "view",
        "as_view",
        "ufunc",
        "reduction",
        "decompose",
        "result_attrs",
        "shape_warning",
        "doc",
        "_sample_fn",
        "_binder",
        "_memo_key",
        "_cache",
        "_attr_params",
        "_input_params",
        "_has_optional",
        "_plain_inputs",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        params: Sequence[Param],
        rule: Callable,
        impl: Callable,
        *,
        numpy_targets: Iterable = (),
        samples: Callable | None = None,
        nondeterministic: bool = False,
        data_dependent_shape: bool = False,
        effect: bool = False,
        pure: bool = True,
        view: str | None = None,
        as_view: Callable | None = None,
        ufunc: Any = None,
        reduction: str | None = None,
        decompose: Callable | None = None,
        result_attrs: Callable[[Any], dict] | None = None,
        shape_warning: Callable[[Sequence[Any], dict], bool] | None = None,
        doc: str = "",
        binder: Callable | None = None,
        memo_key: Callable[[dict | None], Any] | None = None,
        omitted: tuple[str, ...] = (),
    ):
        if kind not in KINDS:
            raise ValueError(f"op {name}: kind {kind!r} is not one of {KINDS}")
        self.name = name
        self.kind = kind
        self.params = tuple(params)
        self.rule = rule
        self.impl = impl
        self.numpy_targets = tuple(t if isinstance(t, tuple) else (t, "__call__") for t in numpy_targets)
        self.nondeterministic = nondeterministic
        self.data_dependent_shape = data_dependent_shape
        # A check (a guard) that matters even when its output is unused: never dead code.
        self.effect = effect
        # The result depends only on the inputs and attrs, and computing it does nothing else, so two
        # equal nodes are one value (`passes.cse`). False for calls out of the graph (a host call runs
        # any Python function) and for writes (``np.setitem``, which a backend may do in its input's
        # memory); random draws and guards are never merged either, by their own facts.
        self.pure = pure and not nondeterministic and not effect
        # NumPy returns a view of the first input holding all its elements, regrouped (``"reshape"``:
        # reshape, ravel, squeeze, expand_dims) or with permuted axes (``"permute"``: transpose,
        # swapaxes, moveaxis), so a write into the result is a write into the input.
        if view not in (None, "reshape", "permute"):
            raise ValueError(f"op {name}: view must be None, 'reshape' or 'permute', got {view!r}")
        self.view = view
        # ``as_view(a, out_shape, attrs, dims)``: the NumPy call giving this op's result (a tuple of them
        # for several outputs) as a view of ``a``, an array laid out like the first input: ``out_shape``
        # is the output's concrete shape, ``dims`` the values of the op's trailing scalar inputs
        # (``prim.reshape``'s traced dims). None from it: no view for these attrs (an array index). A
        # backend that keeps results as views of their input (no copy) calls it on a stand-in and reads
        # the strides off NumPy's answer; NumPy may still copy for some layouts, which the backend
        # checks. The reference (`impl`) copies where NumPy views: graph values never alias.
        if view is not None and as_view is None:
            raise ValueError(f"op {name}: an op with a view fact needs its as_view function")
        self.as_view = as_view
        # The NumPy ufunc whose loop computes this op (dtype resolution and values), for elementwise ops
        # that are one: a backend reads its loops and name from it instead of from the op's name.
        self.ufunc = ufunc
        # What a reduction (or scan) computes (one of REDUCTION_KINDS): np.sum and np.add.reduce are
        # both "sum"; a backend keys its reduction kernels by this.
        if reduction is not None and reduction not in REDUCTION_KINDS:
            raise ValueError(f"op {name}: reduction must be one of {REDUCTION_KINDS}, got {reduction!r}")
        self.reduction = reduction
        # ``decompose(graph, node) -> list[Value] | None``: the node rebuilt from simpler registry ops
        # (created at the graph's insertion point), one value per output of the same type, or None
        # where no exact rewrite exists for these inputs. `numtrace_ir.passes.decompose` applies it
        # for backends that do not lower the op themselves.
        self.decompose = decompose
        # ``result_attrs(result) -> dict``: attrs read off NumPy's eager result when a call is recorded,
        # for a result type NumPy decides from the values (``np.linalg.eig``'s real or complex dtype);
        # the reference then checks every call's result against them (a broken guard, not a cast).
        self.result_attrs = result_attrs
        # ``shape_warning(input_types, attrs) -> bool``: the reference warns at these input shapes
        # whatever the data (``np.mean`` over an empty axis: "Mean of empty slice"); a backend that
        # computes the op without NumPy says it through `numtrace_ir.fp_errors`.
        self.shape_warning = shape_warning
        self.doc = doc
        self._sample_fn = samples
        # A call convention the schema cannot express (``x[key]``): args, kwargs -> inputs, attrs.
        self._binder = binder
        # The attrs part of `infer`'s memo key when ``tuple(attrs.items())`` is not enough (a rule that
        # tells 1 from 1.0 or True, which compare equal); the key must capture all the rule reads.
        self._memo_key = memo_key
        self._cache: dict = {}
        self._attr_params = {p.name: p for p in self.params if isinstance(p, Attr)}
        self._input_params = [p for p in self.params if isinstance(p, (Input, Inputs))]
        if sum(isinstance(p, Inputs) for p in self.params) > 1:
            raise ValueError(f"op {name}: at most one variadic input group")
        self._has_optional = any(isinstance(p, Input) and p.optional for p in self.params)
        if self._has_optional:
            # `omitted`: the optional inputs a node without the attr lacks (inputs added to an op later
            # default to absent, so its older graphs keep their meaning).
            self._attr_params["omitted"] = Attr("omitted", tuple(omitted), tuple)
        # Ops whose parameters are only required inputs (then unsupported options): a call with exactly
        # that many positional arguments binds them as they are (most recorded calls: ``x * y``).
        leading = 0
        for p in self.params:
            if not (isinstance(p, Input) and type(p) is Input and not p.optional):
                break
            leading += 1
        plain = leading and all(isinstance(p, Unsupported) for p in self.params[leading:])
        self._plain_inputs = leading if plain else -1

    def __repr__(self) -> str:
        return f"<OpDef {self.name} ({self.kind})>"

    @property
    def schema(self) -> tuple:
        """The parameters in NumPy's positional order."""
        return self.params

    @property
    def absent_by_default(self) -> tuple[str, ...]:
        """The optional inputs a node lacks when its attrs do not say (NumPy's default for them is not
        None, so a call leaves them out rather than passing None)."""
        return self._attr_params["omitted"].default if self._has_optional else ()

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(self._attr_params)

    # -- binding a NumPy-style call ---------------------------------------------------------------
    def bind(self, args: Sequence, kwargs: dict | None = None) -> tuple[list, dict]:
        """Map ``op(*args, **kwargs)`` (NumPy's calling convention) onto the schema: the graph inputs in
        order and every attr (defaults filled, values normalised). `TypeError` names the op and the
        parameter of a bad call."""
        if self._binder is not None:
            inputs, attrs = self._binder(tuple(args), dict(kwargs or {}))
            return inputs, self.normalize_attrs(attrs)
        return self.bind_schema(args, kwargs)

    def bind_schema(self, args: Sequence, kwargs: dict | None = None) -> tuple[list, dict]:
        """`bind` by the schema alone (what a custom binder defers to after rewriting a call)."""
        if not kwargs and len(args) == self._plain_inputs:
            return list(args), {}
        kwargs = dict(kwargs or {})
        args = list(args)
        inputs: list = []
        attrs: dict = {}
        omitted: list[str] = []
        for p in self.params:
            if isinstance(p, Inputs) and p.star:
                if p.name in kwargs:
                    raise TypeError(f"{self.name}: {p.name} are positional arguments, not a keyword")
                inputs.extend(args)
                args = []
                continue
            if args:
                value = args.pop(0)
                if p.name in kwargs:
                    raise TypeError(f"{self.name}: got multiple values for argument {p.name!r}")
            elif p.name in kwargs:
                value = kwargs.pop(p.name)
            else:
                value = REQUIRED
            if isinstance(p, Input):
                if value is REQUIRED and not p.optional:
                    raise TypeError(f"{self.name}: missing required argument {p.name!r}")
                if (value is None or value is REQUIRED) and p.optional:
                    omitted.append(p.name)
                else:
                    inputs.append(value)
            elif isinstance(p, Inputs):
                if value is REQUIRED:
                    raise TypeError(f"{self.name}: missing required argument {p.name!r}")
                if not isinstance(value, (list, tuple)):
                    raise TypeError(
                        f"{self.name}: {p.name} must be a list or tuple of arrays, got {type(value).__name__}"
                    )
                inputs.extend(value)
            elif isinstance(p, Unsupported):
                if value is not REQUIRED and value is not p.default and not any(value is v for v in p.same):
                    raise TypeError(
                        f"{self.name}: argument {p.name!r} is not supported here "
                        f"(only {p.default!r}); the tracer must functionalize it"
                    )
            else:
                attrs[p.name] = p.default if value is REQUIRED else value
        if args:
            raise TypeError(
                f"{self.name}: takes at most {len(self.params)} positional arguments, "
                f"got {len(self.params) + len(args)}"
            )
        if kwargs:
            raise TypeError(
                f"{self.name}: unexpected keyword argument(s) {', '.join(map(repr, kwargs))}; "
                f"expected {', '.join(p.name for p in self.params)}"
            )
        if self._has_optional:
            attrs["omitted"] = tuple(omitted)
        self._layout(len(inputs), tuple(omitted))  # e.g. an empty sequence of arrays
        return inputs, self.normalize_attrs(attrs)

    def normalize_attrs(self, attrs: dict | None) -> dict:
        """Every attr in schema order: defaults filled, values converted; `TypeError` for an unknown or
        missing attr or a value its converter rejects."""
        attrs = attrs or {}
        unknown = set(attrs) - set(self._attr_params)
        if unknown:
            raise TypeError(
                f"{self.name}: unknown attribute(s) {', '.join(sorted(unknown))}; "
                f"expected {', '.join(self._attr_params) or 'none'}"
            )
        out = {}
        for name, p in self._attr_params.items():
            value = attrs.get(name, p.default)
            if value is REQUIRED:
                raise TypeError(f"{self.name}: missing required attribute {name!r}")
            if p.convert is not None:
                try:
                    value = p.convert(value)
                except (TypeError, ValueError) as e:
                    raise type(e)(f"{self.name}: bad value for {name!r}: {e}") from None
            out[name] = value
        return out

    # -- shape/dtype rule ---------------------------------------------------------------------------
    def infer(self, input_types: Sequence[Type], attrs: dict | None = None) -> tuple[Type, ...]:
        """The output types for these input types and attrs (memoized: the tracer calls this for every
        node). `ShapeError` for incompatible shapes, `TypeError` for unsupported dtypes or inputs."""
        # On a memo hit attrs are not re-validated: values that compare equal (1, 1.0, True) share an
        # entry. `bind` always yields canonical attrs.
        types = input_types if type(input_types) is tuple else tuple(input_types)
        try:
            if self._memo_key is not None:
                key = (types, self._memo_key(attrs))
            else:
                key = (types, tuple(attrs.items()) if attrs else ())
            return self._cache[key]
        except KeyError:
            pass
        except AttributeError:
            raise TypeError(
                f"{self.name}: attrs must be a dict or None, got {type(attrs).__name__}"
            ) from None
        except TypeError:
            try:
                key = (types, _freeze(tuple(attrs.items()) if attrs else ()))
                if key in self._cache:
                    return self._cache[key]
            except TypeError:  # no hashable stand-in (or not types at all): skip the memo
                return self._infer(types, attrs)
        out = self._infer(key[0], attrs)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = out
        return out

    def _infer(self, types: tuple, attrs: dict | None) -> tuple[Type, ...]:
        full = self.normalize_attrs(attrs)
        self._check_input_types(types, full)
        out = self.rule(types, full)
        return out if type(out) is tuple else (out,)

    def _check_input_types(self, types: tuple, attrs: dict) -> None:
        for p, t in zip(self._layout(len(types), attrs.get("omitted", ())), types):
            if not isinstance(t, _TYPE_KINDS[p.accepts]):
                raise TypeError(
                    f"{self.name}: input {p.name!r} must be {_ACCEPTS_TEXT[p.accepts]}, got {t!r}"
                )

    def _layout(self, n: int, omitted: tuple) -> list:
        """The parameter of each of `n` input positions (optional inputs in `omitted` are absent);
        `TypeError` when `n` does not fit the schema."""
        fixed = [p for p in self._input_params if isinstance(p, Input) and p.name not in omitted]
        variadic = next((p for p in self._input_params if isinstance(p, Inputs)), None)
        if n < len(fixed) + (variadic.minimum if variadic else 0) or (variadic is None and n != len(fixed)):
            expected = f"{len(fixed) + variadic.minimum} or more" if variadic else str(len(fixed))
            raise TypeError(
                f"{self.name}: expected {expected} inputs "
                f"({', '.join(p.name for p in self._input_params)}), got {n}"
            )
        out: list[Input | Inputs] = []
        for p in self._input_params:
            if p is variadic:
                out.extend([p] * (n - len(fixed)))
            elif p in fixed:
                out.append(p)
        return out

    # -- reference ------------------------------------------------------------------------------------
    def reference(self, *inputs: Any, **attrs: Any) -> Any:
        """Run the NumPy reference: one array (or scalar), or a tuple for a multi-output op."""
        attrs = self.normalize_attrs(attrs)
        omitted = attrs.pop("omitted", ()) if self._has_optional else ()
        named: dict = {name: None for name in omitted}
        for p, v in zip(self._layout(len(inputs), omitted), inputs):
            if isinstance(p, Inputs):
                named.setdefault(p.name, []).append(v)
            else:
                named[p.name] = v
        for p in self._input_params:  # an empty variadic group is still passed, as []
            if isinstance(p, Inputs):
                named.setdefault(p.name, [])
        return self.impl(**named, **attrs)

    def samples(self, rng: Any) -> list[Sample]:
        """Sample calls covering the op's shapes (broadcasting, 0-d, empty) and dtypes."""
        return list(self._sample_fn(rng)) if self._sample_fn is not None else []

    def variant(self, *, binder: Callable | None = None, **defaults: Any) -> OpDef:
        """The same op called another way: other attr defaults (``np.add.reduce`` is ``np.sum`` with
        ``axis=0``) and/or another calling convention (``ndarray.reshape(*shape)``). Only the NumPy
        dispatch table holds variants; their nodes are ordinary nodes of `name`, sharing its memo."""
        params = [
            Attr(p.name, defaults.pop(p.name), p.convert) if isinstance(p, Attr) and p.name in defaults else p
            for p in self.params
        ]
        if defaults:
            raise ValueError(f"{self.name}: no attributes {sorted(defaults)}")
        variant = OpDef(
            self.name,
            self.kind,
            params,
            self.rule,
            self.impl,
            nondeterministic=self.nondeterministic,
            data_dependent_shape=self.data_dependent_shape,
            effect=self.effect,
            pure=self.pure,
            view=self.view,
            as_view=self.as_view,
            ufunc=self.ufunc,
            reduction=self.reduction,
            decompose=self.decompose,
            result_attrs=self.result_attrs,
            doc=self.doc,
            binder=binder or self._binder,
            memo_key=self._memo_key,
            omitted=self.absent_by_default,
        )
        variant._cache = self._cache
        return variant


_OPS: dict[str, OpDef] = {}
_NUMPY: dict[tuple[Any, str], OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Add `op` (a name may be registered once) and its NumPy targets to the dispatch table."""
    if op.name in _OPS:
        raise ValueError(f"op {op.name} is already registered")
    _OPS[op.name] = op
    for func, method in op.numpy_targets:
        _add_target(func, method, op)
    return op


def register_target(func: Any, method: str, op: OpDef) -> None:
    """Dispatch ``func.method`` (e.g. ``np.add``, ``"reduce"``) to `op` or a `variant` of it."""
    _add_target(func, method, op)


def _add_target(func: Any, method: str, op: OpDef) -> None:
    key = (func, method)
    if key in _NUMPY and _NUMPY[key].name != op.name:
        raise ValueError(f"{func!r}.{method} already traces to {_NUMPY[key].name}, not {op.name}")
    _NUMPY[key] = op


def get(name: str) -> OpDef:
    """The op called `name`; `UnknownOpError` otherwise."""
    try:
        return _OPS[name]
    except KeyError:
        raise UnknownOpError(f"unknown op {name!r}; see numtrace_ir.registry.all_ops()") from None


def all_ops() -> list[OpDef]:
    """Every op, sorted by name."""
    return [_OPS[n] for n in sorted(_OPS)]


def for_numpy(func: Any, method: str = "__call__") -> OpDef | None:
    """The op a NumPy callable traces to (``np.add``; ``np.add, "reduce"``; ``np.ndarray.sum``), or None
    when the registry has none (the tracer then runs it eagerly and warns)."""
    try:
        return _NUMPY.get((func, method))
    except TypeError:  # unhashable callable
        return None
