"""Ownership of graphs, nodes and values: nothing leaks, nothing dangles, nothing is GC-tracked."""

import gc
import random
import tracemalloc
from contextlib import nullcontext

import pytest
from numtrace_ir import Graph, TensorType, passes

V = TensorType("f32", (4,))


def chain(n, g=None):
    g = Graph() if g is None else g
    x = g.add_input("x", V)
    h = x
    for _ in range(n):
        h = g.create_node("np.add", [h, x]).output
    g.set_outputs([h])
    return g


def test_graph_objects_are_not_tracked_by_the_cyclic_gc():
    g = chain(3)
    assert not gc.is_tracked(g)
    assert not any(gc.is_tracked(n) or gc.is_tracked(n.output) for n in g)


def test_freeing_a_long_graph_does_not_recurse():
    g = chain(300_000)
    first, last = g.nodes[0].output, g.nodes[-1].output
    del g  # would overflow the C stack if nodes were freed through their `_next` links
    # Every node was freed: the values kept alive see neither their node nor their graph.
    assert (first.node, first.graph, last.node, last.graph) == (None, None, None, None)


def test_a_node_outlives_its_graph_detached():
    g = chain(3)
    x = g.inputs[0]
    last = g.nodes[-1]
    first_out = g.nodes[0].output
    del g
    assert last.graph is None and x.graph is None
    assert last.inputs[1] is x and x.users == [last]  # the surviving node still uses x
    assert first_out.node is None  # its node was freed with the graph
    assert str(last) == "%? : f32[4] = np.add(%?, %x)"
    del last
    assert x.users == []


def test_an_output_outlives_its_erased_node():
    g = chain(2)
    x = g.inputs[0]
    g.set_outputs([x])
    n = g.nodes[-1]
    v = n.output
    g.erase_node(n)
    assert v.graph is None and v.node is n and n.graph is None
    del n
    assert v.node is None
    assert len(g) == 1 and x.users == [g.nodes[0]]
    g.lint()


def test_no_memory_is_kept_after_graphs_die():
    def churn():
        g = chain(2000)
        kept = g.nodes[1000]
        for n in g.nodes[1500:1600]:
            with g.inserting_before(n):
                m = g.create_node("np.negative", [n.inputs[0]])
            n.replace_input(0, m.output)
        g.set_outputs([g.nodes[10].output])
        passes.dce(g)
        c = g.copy()
        return kept, c

    churn()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            kept, c = churn()
            del kept, c
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 200_000, f"{after - before} bytes still allocated"


def test_graphs_copy_and_pickle_through_their_text():
    import copy
    import pickle

    g = chain(3)
    g.nodes[0].loc = "a.py:1"
    for h in [copy.deepcopy(g), pickle.loads(pickle.dumps(g)), copy.copy(g)]:
        assert h is not g and str(h) == str(g)
        h.lint()


def poke(obj):
    """Touch everything a held node or value exposes (must never crash, attached or detached)."""
    if hasattr(obj, "op"):
        return (obj.op, obj.inputs, obj.outputs, obj.attrs, obj.loc, obj.graph, str(obj), repr(obj))
    return (obj.type, obj.name, obj.node, obj.index, obj.graph, obj.users, obj.uses, repr(obj))


@pytest.mark.parametrize("seed", range(20))
def test_random_edits_keep_the_graph_consistent(seed):
    rng = random.Random(seed)
    g = Graph()
    values = [g.add_input(f"in{i}", V) for i in range(3)]
    held = []
    for _ in range(300):
        action = rng.random()
        nodes = g.nodes
        if action < 0.45 or not nodes:
            where = rng.choice(nodes) if nodes and rng.random() < 0.3 else None
            ins = [rng.choice(values) for _ in range(2)]
            if where is not None:  # inputs must come before the insertion point
                ins = [v for v in ins if v.node is None or v.node in nodes[:nodes.index(where)]]
                ins = ins or [g.inputs[0]]
            with g.inserting_before(where) if where is not None else nullcontext():
                n = g.create_node("np.add" if len(ins) == 2 else "np.negative", ins)
            values.append(n.output)
        elif action < 0.6:
            n = rng.choice(nodes)
            if not any(v.users for v in n.outputs):
                g.set_outputs([v for v in g.outputs if v.node is not n])
                g.erase_node(n)
                held.append(n)
                values = [v for v in values if v.graph is g]
        elif action < 0.75:
            n = rng.choice(nodes)
            earlier = [v for v in values if v.node is None or (v.node in nodes[:nodes.index(n)])]
            n.replace_input(rng.randrange(len(n.inputs)), rng.choice(earlier))
        elif action < 0.85:
            a, b = rng.sample(nodes, 2) if len(nodes) > 1 else (nodes[0], nodes[0])
            first, second = sorted([a, b], key=nodes.index)
            second.output.replace_all_uses_with(first.output)  # later uses now read an earlier value
        elif action < 0.92:
            g.set_outputs(rng.sample(values, min(2, len(values))))
            passes.dce(g)
            values = [v for v in values if v.graph is g]
        else:
            passes.cse(g)
            values = [v for v in values if v.graph is g]
        if rng.random() < 0.1:
            held.append(rng.choice(values))
        g.lint()
    held.extend(rng.sample(g.nodes, min(5, len(g))))
    copy = g.copy()
    assert str(copy) == str(g)
    del g, values, nodes
    for obj in held:
        poke(obj)
    copy.lint()
