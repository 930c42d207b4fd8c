"""`CallSpec`: how a call of a traced function maps onto its graph's executable, and `run_call`, the
one Python implementation of that call convention.

A traced function is called with its arguments flattened to arrays; the graph's inputs are those
arguments followed by module state. The graph's outputs are the function's results followed by the
new contents of the inputs it wrote into (``x += 1``), which the call copies back into the caller's
arrays, as NumPy would have written them. A result that is an argument itself (``return x``, or
``return w`` after ``w -= ...``) is the caller's own array, not a copy, as NumPy returns it. A written
input (argument or module state) must not share memory with another input: the trace reads them as
separate arrays.

Backends receive the spec in `Backend.compile`. Most run only the graph and leave the rest of the call
to `run_call`; a backend may instead implement the whole call (the CPU backend's C fast path,
`exact_caller`), driven by the same spec.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["CallSpec", "check_aliasing", "results_of", "run_call", "write_back"]

# NumPy's bounds check without its ``__array_function__`` dispatch (NEP 18's ``_implementation``):
# arguments are plain ndarrays here, and the dispatch is most of the check's cost on small calls.
_MAY_SHARE_MEMORY = getattr(np.may_share_memory, "_implementation", np.may_share_memory)


@dataclass(frozen=True)
class CallSpec:
    """The call convention of one traced graph.

    Attributes:
        num_args: graph inputs ``[0, num_args)`` are the call's arguments, flattened.
        num_results: graph outputs ``[0, num_results)`` are the function's results (less the returned
            arguments, see ``returned``).
        num_state: graph inputs ``[num_args, num_args + num_state)`` are module state, which the caller
            of the executable passes after the arguments.
        written: graph input indices the function writes into, in write-back order: graph output
            ``num_results + k`` holds input ``written[k]``'s new contents.
        returned: ``(result position, input index)``, ascending: results that are an argument itself
            (written into or not), inserted among the graph's results at those positions.
        single: the function returns one array rather than a tuple (its flat results hold one item).
        name: the function's name, for errors.
        input_names: the graph inputs' names (None where unnamed), for errors.

    Derived (not arguments):
        alias_pairs: ``(written input, other input)`` pairs that must not share memory, each pair once;
            the inputs are the arguments and the module state (a written counter, an argument that is
            the module's own weight array).
        write_backs: ``(graph output, graph input)`` copies after a call, in order.
        result_items: per flat result, the graph output ``j`` it is (``j >= 0``) or the input ``i`` it
            is (``-1 - i``).
    """

    num_args: int
    num_results: int
    num_state: int = 0
    written: tuple[int, ...] = ()
    returned: tuple[tuple[int, int], ...] = ()
    single: bool = False
    name: str = "graph"
    input_names: tuple[str | None, ...] = ()
    alias_pairs: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)
    write_backs: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)
    result_items: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "written", tuple(int(i) for i in self.written))
        set_(self, "returned", tuple(sorted((int(p), int(i)) for p, i in self.returned)))
        set_(self, "input_names", tuple(self.input_names))
        n_in = self.num_inputs
        if min(self.num_args, self.num_results, self.num_state) < 0:
            raise ValueError(f"CallSpec: negative count in {self!r}")
        if len(set(self.written)) != len(self.written) or any(not 0 <= i < n_in for i in self.written):
            raise ValueError(f"CallSpec: written inputs {self.written} must be distinct inputs of {n_in}")
        if any(not 0 <= i < self.num_args for _, i in self.returned):
            raise ValueError(f"CallSpec: returned {self.returned} must name arguments")
        items: list[int] = list(range(self.num_results))
        for pos, i in self.returned:
            if not 0 <= pos <= len(items):
                raise ValueError(f"CallSpec: returned position {pos} out of range")
            items.insert(pos, -1 - i)
        if self.single and len(items) != 1:
            raise ValueError(f"CallSpec: a single result, but {len(items)} results")
        written = self.written
        set_(self, "alias_pairs", tuple((i, j) for i in written for j in range(n_in)
                                        if j != i and not (j in written and j < i)))
        set_(self, "write_backs", tuple((self.num_results + k, i) for k, i in enumerate(self.written)))
        set_(self, "result_items", tuple(items))

    @classmethod
    def plain(cls, num_inputs: int, num_outputs: int) -> CallSpec:
        """Every graph input an argument, every output a result, nothing written: an executable's own
        convention, what a backend assumes when `compile` gets no spec."""
        return cls(num_args=num_inputs, num_results=num_outputs)

    @property
    def num_inputs(self) -> int:
        """The graph's inputs: the arguments, then the state."""
        return self.num_args + self.num_state

    @property
    def num_outputs(self) -> int:
        """The graph's outputs: the results, then the written inputs' new contents."""
        return self.num_results + len(self.written)

    @property
    def in_place_updates(self) -> dict[int, int]:
        """``{graph output j: graph input i}``: written contents a backend may compute straight into the
        caller's array (returning that input array itself as output j, which `write_back` then skips):
        the aliasing check makes sure no other input, argument or state, shares that memory."""
        return dict(self.write_backs)

    def input_name(self, i: int) -> str:
        """How errors name graph input ``i``: ``argument 'x'`` or ``module state 'count'``."""
        name = self.input_names[i] if i < len(self.input_names) else None
        kind = "argument" if i < self.num_args else "module state"
        return f"{kind} {repr(name) if name else f'#{i}'}"


def check_aliasing(spec: CallSpec, inputs: Sequence[Any]) -> None:
    """Refuse a call in which an input (argument or module state, `inputs` is both) the function writes
    into shares memory with another one: the trace reads its inputs as separate arrays, NumPy would
    see the write through the other. NumPy's bounds check runs once per pair; only overlapping bounds
    pay for the exact one."""
    share = _MAY_SHARE_MEMORY
    for i, j in spec.alias_pairs:
        other = inputs[j]
        if share(inputs[i], other):
            try:
                # NumPy's stub admits only -1/0 for max_work; the function takes any bound.
                overlap = np.shares_memory(inputs[i], other, max_work=10_000)  # type: ignore[arg-type]
            except np.exceptions.TooHardError:
                overlap = True
            if overlap:
                raise ValueError(
                    f"{spec.name}(): {spec.input_name(i)} is written into by the traced "
                    f"function and shares memory with {spec.input_name(j)}; a trace treats "
                    "its arguments and module state as separate arrays, so pass a copy")


def write_back(spec: CallSpec, inputs: Sequence[Any], outs: Sequence[Any]) -> None:
    """Copy the written inputs' new contents (graph outputs) into the caller's arrays (`inputs`: the
    arguments, then the state), in order, unless the executable computed them there."""
    for j, i in spec.write_backs:
        target, new = inputs[i], outs[j]
        if new is target:
            continue
        if not isinstance(target, np.ndarray):
            raise TypeError(f"{spec.name}(): {spec.input_name(i)} is written into by the traced "
                            f"function, so it must be a NumPy array, got {type(target).__name__}")
        np.copyto(target, new, casting="no")


def results_of(spec: CallSpec, inputs: Sequence[Any], outs: tuple) -> tuple:
    """The function's flat results from the graph's outputs: the written contents dropped, a returned
    argument being the caller's own array."""
    if spec.returned:
        return tuple(outs[r] if r >= 0 else inputs[-1 - r] for r in spec.result_items)
    return outs if len(outs) == spec.num_results else outs[: spec.num_results]


def run_call(executable: Callable[..., tuple], spec: CallSpec, args: Sequence[Any],
             state: Sequence[Any] = ()) -> tuple:
    """One call of a traced function on an executable that runs only its graph: the aliasing check,
    the run on ``(*args, *state)``, the write-back, and the flat results (`results_of`)."""
    if not spec.written and not spec.returned:
        return executable(*args, *state)
    inputs = [*args, *state] if state else args
    if spec.alias_pairs:
        check_aliasing(spec, inputs)
    outs = executable(*inputs)
    write_back(spec, inputs, outs)
    return results_of(spec, inputs, outs)
