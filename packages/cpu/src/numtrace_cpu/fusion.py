"""Fusion grouping: which nodes of a specialized graph share one fused interpreter pass.

Fusion is greedy in program order. An elementwise node joins the open groups that produce its
inputs when they iterate over the same shape; a reduction joins the group of its producer (or starts
one), and later elementwise nodes of the same shape may still join that pass. A group stays open
only while no node outside it has read one of its values, which is what makes moving the group
to its last node's position (and so merging several groups) always legal.

A cheap elementwise value that another pass computed from values no group computes (inputs, views,
constants), and that is larger than each of its operands (a broadcast, as
``pos[None, :, :] - pos[:, None, :]``), is recomputed inside each later group that reads it instead
of being read from memory: the same operation on the same operands, so the same bits, and the
value's buffer (n*n*3 doubles for that difference) is never written where nothing else reads it.
"""

from __future__ import annotations

import math

from numtrace_cpu.classify import elementwise_plan, folded_reduction, reduction_plan

__all__ = ["Group", "group_nodes", "recomputable"]

# Most reductions one pass folds (see runtime.pyx); a group holding as many starts another.
MAX_REDUCTIONS = 16
# Interpreter ops cheap enough to compute again in every group that reads their result.
RECOMPUTED_OPS = frozenset({"add", "subtract", "multiply", "negative", "copy", "cast"})


class Group:
    """A fusion group: nodes in program order over one iteration shape (plus optional reductions)."""

    __slots__ = ("shape", "nodes", "reduce_axes", "closed", "values", "recomputed")

    def __init__(self, shape: tuple):
        self.shape = shape
        self.nodes: list = []
        self.reduce_axes: tuple | None = None
        self.closed = False
        self.values: set = set()   # elementwise values computed inside
        self.recomputed: set = set()   # values of other groups' nodes computed again here (`recomputable`)


def _size(v) -> int:
    return math.prod(getattr(v.type, "shape", ()))


def recomputable(v, computed) -> bool:
    """Whether value v, computed by an elementwise node of another group, may be computed again
    where it is read: a cheap op (RECOMPUTED_OPS) whose operands no group computes (`computed(w)`
    false: inputs, constants, views), each smaller than v (v broadcasts them), so a group that
    reads them instead of v reads less than it did."""
    node = v.node
    plan = elementwise_plan(node) if node is not None else None
    if plan is None or plan[0] not in RECOMPUTED_OPS or any(computed(w) for w in node.inputs):
        return False
    sizes = [_size(w) for w in node.inputs]
    return max(sizes, default=0) < _size(v)


def group_nodes(nodes: list, position: dict, unfused: frozenset | set = frozenset()) -> list:
    """The nodes as an ordered list of units: `Group`s and single nodes. A group runs where its last
    node was; moving it there is legal because nothing placed after it reads from it while open.
    A node joins the open groups (same iteration shape, same reduced axes) that compute one of its
    inputs or already read one of them, so e.g. the mean and the variance of one input share a pass.
    Nodes whose id is in `unfused` stay single nodes."""
    producer: dict = {}         # value -> group computing it (elementwise values)
    reader: dict = {}           # value from outside a group -> the last group that read it
    reduced_by: dict = {}       # reduction output -> its group
    units: dict = {}            # id -> unit, in execution order (re-inserting moves to the end)

    def move_to_end(unit):
        units.pop(id(unit), None)
        units[id(unit)] = unit

    for node in nodes:
        for v in node.inputs:   # a reduced value is only complete once its whole pass has run
            if v in reduced_by:
                reduced_by[v].closed = True
        if node.op == "prim.Constant":
            move_to_end(node)
            continue
        plan = elementwise_plan(node) if id(node) not in unfused else None
        red = reduction_plan(node) if plan is None and id(node) not in unfused else None
        if plan is None and red is None:
            for v in node.inputs:
                g = producer.get(v)
                if g is not None:
                    g.closed = True
            move_to_end(node)
            continue
        shape = node.outputs[0].type.shape if plan is not None else node.inputs[0].type.shape
        axes = red[1] if red is not None else None
        cands: list = []
        for v in node.inputs:
            g = producer.get(v)
            for c in (g, reader.get(v)):
                if c is None:
                    continue
                if (id(c) in units and not c.closed and c.shape == shape and c not in cands
                        and (c.reduce_axes is None or axes is None or c.reduce_axes == axes)):
                    cands.append(c)
                    axes = axes if c.reduce_axes is None else c.reduce_axes
        def computed(w):
            return w in producer or w in reduced_by

        # an empty pass computes none of v: v's own pass runs (and raises NumPy's flags)
        again = [v for v in node.inputs
                 if producer.get(v) is not None and producer[v] not in cands and id(v.node) not in unfused
                 and math.prod(shape) > 0 and recomputable(v, computed)]
        for v in node.inputs:   # groups it reads but cannot join are now read from outside
            g = producer.get(v)
            if g is not None and g not in cands and v not in again:
                g.closed = True
        target = cands[0] if cands else Group(shape)
        for other in cands[1:]:
            _merge(target, other, producer, reduced_by, units, position)
        if red is not None and sum(folded_reduction(n) is not None for n in target.nodes) >= MAX_REDUCTIONS:
            target.closed = True
            target = Group(shape)
        for v in again:   # in the group the node lands in: its producer's group was left open
            if v not in target.recomputed:
                target.recomputed.add(v)
                target.nodes.append(v.node)
                for w in v.node.inputs:
                    reader[w] = target
        if red is not None:
            target.reduce_axes = axes
            reduced_by[node.outputs[0]] = target
        else:
            target.values.add(node.outputs[0])
            producer[node.outputs[0]] = target
        for v in node.inputs:
            if producer.get(v) is not target:
                reader[v] = target
        target.nodes.append(node)
        move_to_end(target)
    return list(units.values())


def _merge(target: Group, other: Group, producer: dict, reduced_by: dict, units: dict,
           position: dict) -> None:
    """Fold open group `other` into open group `target` of the same shape, keeping program order."""
    both = {id(n): n for n in target.nodes + other.nodes}   # a node both computed once
    target.nodes = sorted(both.values(), key=lambda n: position[id(n)])
    target.values |= other.values
    target.recomputed = (target.recomputed | other.recomputed) - target.values
    if other.reduce_axes is not None:
        target.reduce_axes = other.reduce_axes
    for v in other.values:
        producer[v] = target
    for v, g in reduced_by.items():
        if g is other:
            reduced_by[v] = target
    units.pop(id(other), None)
