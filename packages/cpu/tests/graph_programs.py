"""Programs written once, with NumPy's operators, that either build a numtrace graph (on `Value`s,
with `GraphNumpy` as their `np`) or run in NumPy: the hunts' way of comparing one program's
generated kernel, interpreter and NumPy results. `RUNNABLE`: the ISA builds this CPU can run."""

from __future__ import annotations

import numpy as np
from numtrace_cpu import isa, runtime
from numtrace_ir import Graph, testing

RUNNABLE = [b for b in isa.built() if isa.BUILDS[b][1] <= runtime.cpu_features()]


class Value:
    """A graph value with NumPy's operators, so one program builds a graph and runs in NumPy."""

    def __init__(self, g: Graph, v) -> None:
        self.g, self.v = g, v

    def _arg(self, a):
        if isinstance(a, Value):
            return a.v
        return self.g.create_node("prim.Constant", [], attrs={"value": a}).output

    def node(self, op, *args, **attrs):
        return Value(self.g, self.g.create_node(op, [self._arg(a) for a in args], attrs=attrs).output)

    def __neg__(self): return self.node("np.negative", self)
    def __abs__(self): return self.node("np.absolute", self)
    def __add__(self, o): return self.node("np.add", self, o)
    def __sub__(self, o): return self.node("np.subtract", self, o)
    def __rsub__(self, o): return self.node("np.subtract", o, self)
    def __mul__(self, o): return self.node("np.multiply", self, o)
    def __rmul__(self, o): return self.node("np.multiply", o, self)
    def __truediv__(self, o): return self.node("np.divide", self, o)
    def __gt__(self, o): return self.node("np.greater", self, o)
    def __lt__(self, o): return self.node("np.less", self, o)
    def astype(self, dtype): return self.node("np.astype", self, dtype=np.dtype(dtype))

    def _reduce(self, op, axis, keepdims):
        return self.node(op, self, axis=axis, keepdims=keepdims)

    def sum(self, axis=None, keepdims=False): return self._reduce("np.sum", axis, keepdims)
    def max(self, axis=None, keepdims=False): return self._reduce("np.max", axis, keepdims)
    def min(self, axis=None, keepdims=False): return self._reduce("np.min", axis, keepdims)
    def mean(self, axis=None, keepdims=False): return self._reduce("np.mean", axis, keepdims)
    def var(self, axis=None, keepdims=False): return self._reduce("np.var", axis, keepdims)
    def std(self, axis=None, keepdims=False): return self._reduce("np.std", axis, keepdims)


class GraphNumpy:
    """`np` for a program building a graph: np.name(...) is a node of op np.name."""

    inf, nan, int64, float32 = np.inf, np.nan, np.int64, np.float32

    def __getattr__(self, name):
        return lambda *args, **attrs: next(a for a in args if isinstance(a, Value)).node(f"np.{name}", *args,
                                                                                         **attrs)


def graph_of(fn, examples) -> tuple[Graph, list]:
    """The graph of fn(np, *inputs) over inputs typed as `examples`, and those input types."""
    g = Graph()
    ins = [Value(g, g.add_input(f"x{i}", testing.type_of(a))) for i, a in enumerate(examples)]
    out = fn(GraphNumpy(), *ins)
    g.set_outputs([o.v for o in (out if isinstance(out, tuple) else (out,))])
    return g, [testing.type_of(a) for a in examples]


def compiled_both(fn, examples, updates=None):
    """fn(np, *inputs) compiled with generated kernels ("sync") and for the interpreter ("off")."""
    from test_codegen import _compiled

    g, types = graph_of(fn, examples)
    return _compiled(g, types, "sync", updates), _compiled(g, types, "off", updates)


def each_setting(threads, streaming):
    """Yield (thread count, streaming threshold) for each pair, both set while the caller runs its
    calls (runtime.set_stream_min_bytes: generated passes stream outputs from that many bytes); the
    thread count and the threshold are restored after."""
    import numtrace_cpu

    old = numtrace_cpu.get_num_threads()
    try:
        for t in threads:
            numtrace_cpu.set_num_threads(t)
            for s in streaming:
                before = runtime.set_stream_min_bytes(s)
                try:
                    yield t, s
                finally:
                    runtime.set_stream_min_bytes(before)
    finally:
        numtrace_cpu.set_num_threads(old)


def numpy_outputs(fn, *args) -> tuple:
    """fn(np, *args) run in NumPy, its outputs as a tuple."""
    out = fn(np, *args)
    return out if isinstance(out, tuple) else (out,)
