"""Ownership of graphs, nodes and values: nothing leaks, nothing dangles, nothing is GC-tracked."""

import gc
import tracemalloc

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
    del g  # would overflow the C stack if nodes were freed through their `_next` links


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
