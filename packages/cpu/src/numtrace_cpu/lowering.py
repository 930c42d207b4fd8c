"""Lowering a specialized graph into steps: fused interpreter groups, BLAS contractions, fallbacks.

The driver: it numbers the values, asks `numtrace_cpu.fusion` for the fusion groups and
`numtrace_cpu.assemble` for their programs, gives every other node the step `numtrace_cpu.classify`
picks for it (a BLAS or small product, a scan, NumPy's own call into the buffer, a setitem, or its
NumPy reference), then rewrites a few steps in place (setitems, scan prologues). The nodes feeding a
guard on array data whose kernels are only within ulps of NumPy run as their NumPy reference
(`numtrace_ir.exactness.guard_reference_nodes`), so that a guard sees the value NumPy gave when tracing.

The result is plain data (`numtrace_cpu.steps` over value numbers); `numtrace_cpu.planner` assigns
buffers and `numtrace_cpu.executable` runs it.
"""

from __future__ import annotations

from typing import Any

from numtrace_ir.errors import traced_at
from numtrace_ir.exactness import guard_reference_nodes
from numtrace_ir.interpreter import at_location, reference_call
from numtrace_ir.registry import UnknownOpError

from numtrace_cpu.assemble import build_group
from numtrace_cpu.classify import (
    folded_reduction,
    is_matmul,
    is_setitem,
    is_small_matmul,
    is_view,
    scan_plan,
    sections_view,
)
from numtrace_cpu.fusion import Group, group_nodes
from numtrace_cpu.into import basic_index_view, into_call, scatter_call
from numtrace_cpu.products import epilogues, gathered_operand, gemv_form, packed_form
from numtrace_cpu.steps import (
    ConstantStep,
    FallbackStep,
    FusedStep,
    IntoStep,
    MatmulStep,
    ScanStep,
    SetitemStep,
    SmallMatmulStep,
    Step,
    ViewStep,
)

__all__ = ["lower"]


def _prologues_into_scans(steps: list[Step], outputs: set, types: dict) -> None:
    """A scan whose input a fused pass computes for it alone, in the result's dtype: that pass writes
    the values into the scan's result instead (its output renamed), and the scan runs there in place."""
    producer = {v: step for step in steps for v in step.outputs}
    readers: dict = {}
    for step in steps:
        for v in set(step.inputs):
            readers[v] = readers.get(v, 0) + 1
    for step in steps:
        if not isinstance(step, ScanStep):
            continue
        (v,), (out,) = step.inputs, step.outputs
        p = producer.get(v)
        if (not isinstance(p, FusedStep) or readers.get(v) != 1 or v in outputs or types[v] != types[out]
                or step.flatten):
            continue
        p.outputs[:] = [out if w == v else w for w in p.outputs]
        p.overwritable = frozenset(pair for pair in p.overwritable if v not in pair)
        step.inputs[:] = [out]


def _setitem_in_place(nodes: list, outputs: list, group_of: dict, index: dict) -> None:
    """Give a SetitemStep's result the value number (so the buffer) of the array it updates when
    nothing else reads that array: the step then assigns in place instead of copying it first, and
    when the result is a graph output the array's producer writes straight into the caller's array.
    The array must own planned memory: computed by a step (not an input, a constant or a view)."""
    uses: dict = {}
    for node in nodes:
        for v in node.inputs:
            uses[v] = uses.get(v, 0) + 1
    for v in outputs:
        uses[v] = uses.get(v, 0) + 1
    for node in nodes:
        if id(node) in group_of or not is_setitem(node):
            continue
        a = node.inputs[0]
        src = a.node
        if (src is None or src.op == "prim.Constant" or is_view(src) or sections_view(src) is not None
                or uses.get(a) != 1
                or not a.type.is_concrete or a.type != node.outputs[0].type):
            continue
        index[node.outputs[0]] = index[a]


def _gathers(nodes: list, outputs: list, state: frozenset, by_reference: frozenset | set) -> dict:
    """id(product node) -> (stack node, reshape node) for the products that read their right operand
    from the stacked windows themselves (products.gathered_operand). A product small enough for the
    small-K kernel stays one (that kernel reads a made B)."""
    found = {}
    for node in nodes:
        if id(node) in by_reference or is_small_matmul(node):
            continue
        pair = gathered_operand(node, state, set(outputs))
        if pair is not None and not any(id(n) in by_reference for n in pair):
            found[id(node)] = pair
    return found


def _group_with_epilogues(nodes: list, outputs: list, state: frozenset, position: dict,
                          by_reference: frozenset | set,
                          skip: frozenset | set = frozenset()) -> tuple[dict, list]:
    """The products' fused epilogues and the fusion units of the other nodes (those in `by_reference`,
    which a guard needs as NumPy computes them, in neither). A packed product's epilogue may read
    values computed by the program (a residual): it keeps only the ops whose operands are computed by
    units that run before the product's own, regrouping until that holds."""
    fused_after = {k: e for k, e in epilogues(nodes, outputs, state).items()
                   if k not in by_reference and not any(id(n) in by_reference for n in e.nodes)}
    while True:
        absorbed = {id(n): p for p, e in fused_after.items() for n in e.nodes}
        units = group_nodes([n for n in nodes if id(n) not in absorbed and id(n) not in skip], position,
                            by_reference)
        unit_at: dict = {}
        for k, u in enumerate(units):
            for n in (u.nodes if isinstance(u, Group) else (u,)):
                unit_at[id(n)] = k
        for n, p in absorbed.items():
            unit_at[n] = unit_at[p]
        changed = False
        for p, e in list(fused_after.items()):
            for j, v in enumerate(op[1] for op in e.ops):
                if (v is None or v.node is None or v.node.op == "prim.Constant"
                        or unit_at[id(v.node)] < unit_at[p]):
                    continue
                changed = True
                if j == 0:
                    del fused_after[p]
                else:
                    del e.ops[j:], e.nodes[j:]
                    e.result = e.nodes[-1].outputs[0]
                break
        if not changed:
            return fused_after, units


def _needed(nodes: list, units: list, outputs: list) -> set:
    """The values some step other than their group's own (or the caller) reads."""
    needed = set(outputs)
    grouped: set = set()
    for u in units:
        if isinstance(u, Group):
            members = {id(n) for n in u.nodes}
            grouped |= members
            needed.update(v for n in u.nodes for v in n.inputs if v.node is None or id(v.node) not in members)
    for node in nodes:
        if id(node) not in grouped:
            needed.update(node.inputs)
    return needed


def _drop_unread(nodes: list, units: list, outputs: list) -> list:
    """The units without the elementwise nodes whose every reader computes their value again
    (fusion's `recomputable`), and without groups left empty."""
    while True:
        needed = _needed(nodes, units, outputs)
        dropped = False
        for u in units:
            if not isinstance(u, Group):
                continue
            read = {v for n in u.nodes for v in n.inputs}
            keep = [n for n in u.nodes if folded_reduction(n) is not None or n.outputs[0] in read
                    or (n.outputs[0] in needed and n.outputs[0] not in u.recomputed)]
            dropped |= len(keep) < len(u.nodes)
            u.nodes = keep
        units = [u for u in units if not isinstance(u, Group) or u.nodes]
        if not dropped:
            return units


def lower(graph, state: frozenset = frozenset()) -> tuple[list[Step], dict, dict]:
    """Steps for a specialized graph, its value numbering (graph inputs first), and its constants.
    `state`: the positions of the graph inputs that are module state (parameters, buffers), whose
    products run on the packed-weight kernels."""
    index: dict = {}
    for v in graph.inputs:
        index[v] = len(index)
    nodes = graph.nodes
    position: dict = {}
    consts: dict = {}
    for i, node in enumerate(nodes):
        position[id(node)] = i
        for v in node.outputs:
            index[v] = len(index)
        if node.op == "prim.Constant":
            consts[node.outputs[0]] = node.attrs["value"]
    state_values = frozenset(graph.inputs[i] for i in state)
    by_reference = guard_reference_nodes(graph)
    # bias/residual/ReLU nodes the GEMV and packed steps apply
    gathers = _gathers(nodes, graph.outputs, state_values, by_reference)
    # the stacks and reshapes those products read through: never made
    skip = {id(n) for pair in gathers.values() for n in pair}
    fused_after, units = _group_with_epilogues(nodes, graph.outputs, state_values, position, by_reference,
                                               skip)
    units = _drop_unread(nodes, units, graph.outputs)
    group_of: dict = {}
    for u in units:
        if isinstance(u, Group):
            for n in u.nodes:
                if n.outputs[0] not in u.recomputed:
                    group_of[id(n)] = u
    _setitem_in_place(nodes, graph.outputs, group_of, index)
    needed = _needed(nodes, units, graph.outputs)
    steps: list[Step] = []
    for u in units:
        if isinstance(u, Group):
            steps.extend(build_group(u, consts, index, needed - u.recomputed))
        elif u.op == "prim.Constant":
            steps.append(ConstantStep(inputs=[], outputs=[index[u.outputs[0]]], nodes=[u]))
        elif id(u) in by_reference:
            numpy_fn, numpy_attrs = reference_call(u)
            steps.append(FallbackStep(inputs=[index[v] for v in u.inputs],
                                      outputs=[index[v] for v in u.outputs], nodes=[u],
                                      fn=at_location(numpy_fn, u),
                                      attrs=numpy_attrs, for_guard=True))
        elif is_small_matmul(u) and id(u) not in fused_after:   # a fused epilogue needs the GEMV step
            steps.append(SmallMatmulStep(inputs=[index[v] for v in u.inputs], outputs=[index[u.outputs[0]]],
                                         nodes=[u]))
        elif (scan := scan_plan(u)) is not None:
            axis, op, flatten = scan
            steps.append(ScanStep(inputs=[index[u.inputs[0]]], outputs=[index[u.outputs[0]]], nodes=[u],
                                  axis=axis, op=op, flatten=flatten))
        elif is_matmul(u):
            epi = fused_after.get(id(u))
            gemv, packed = gemv_form(u, state_values), packed_form(u, state_values)
            operands = epi.operands() if epi else []
            out = index[epi.result if epi else u.outputs[0]]
            nodes_of = [u, *(epi.nodes if epi else ())]
            if packed is not None and id(u) in gathers:
                stack, reshape = gathers[id(u)]
                ops = tuple(name for name, _ in (epi.ops if epi else ()))
                windows = [index[v] for v in stack.inputs]
                axis = int(stack.attrs.get("axis", 0)) % (stack.inputs[0].type.ndim + 1)
                steps.append(MatmulStep(inputs=[index[u.inputs[0]], *windows] + [index[v] for v in operands],
                                        outputs=[out], nodes=[stack, reshape, *nodes_of], packed=packed,
                                        epilogue=ops,
                                        gather=(len(windows), axis, tuple(reshape.outputs[0].type.shape))))
            elif packed is not None:
                ops = tuple(name for name, _ in (epi.ops if epi else ()))
                steps.append(MatmulStep(inputs=[index[v] for v in u.inputs] + [index[v] for v in operands],
                                        outputs=[out], nodes=nodes_of, packed=packed, epilogue=ops))
            else:
                steps.append(MatmulStep(inputs=[index[v] for v in u.inputs] + [index[v] for v in operands],
                                        outputs=[out], nodes=nodes_of, gemv=gemv, bias=epi is not None,
                                        activation=epi.activation if epi else None))
        elif into_call(u) is not None:
            steps.append(IntoStep(inputs=[index[v] for v in u.inputs], outputs=[index[v] for v in u.outputs],
                                  nodes=[u], fn=into_call(u)))
        elif is_setitem(u):
            steps.append(SetitemStep(inputs=[index[v] for v in u.inputs], outputs=[index[u.outputs[0]]],
                                     nodes=[u], index=tuple(u.attrs.get("index", ())),
                                     scatter=scatter_call(u)))
        else:
            kind = ViewStep if is_view(u) else FallbackStep
            fn = basic_index_view(u)
            attrs: dict[str, Any] = {}
            if fn is None and (fn := sections_view(u)) is not None:
                kind = ViewStep
            if fn is None:
                try:
                    fn, attrs = reference_call(u)
                except UnknownOpError:
                    raise NotImplementedError(f"cpu backend: node {u.op}{traced_at(u)} has no kernel and the "
                                              f"registry has no reference for it") from None
            steps.append(kind(inputs=[index[v] for v in u.inputs], outputs=[index[v] for v in u.outputs],
                              nodes=[u], fn=fn if kind is ViewStep else at_location(fn, u), attrs=attrs))
    _prologues_into_scans(steps, {index[v] for v in graph.outputs}, {n: v.type for v, n in index.items()})
    return steps, index, consts
