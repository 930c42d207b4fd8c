"""The text IR (TorchScript-like): one line per node, `%name : type = op[attrs](inputs)  # loc`, with
` errstate(divide=ignore)` before the comment for an op the traced function ran in its own
``np.errstate`` (`Node.errstate`).

Value names: a debug name that is unique in the graph is printed as is; clashing debug names get
`.1`, `.2`, ... (as TorchScript does); unnamed values print as their position among all values.
Debug names are never all digits, so the two kinds cannot collide.

`str(graph)` is the text for people: constants of more than `SHOWN_ELEMENTS` elements print as
`array(f32[784, 512]; ...)` and source locations are shortened (`locations.display_location`).
`format_graph(g)` (the default arguments) is the full text that `parse` reads back exactly; canonical
forms and saved files use it.
"""

from numtrace_ir.attrs cimport format_attr

from numtrace_ir.attrs import Abbreviate
from numtrace_ir.guards import guard_text
from numtrace_ir.locations import display_location
from numtrace_ir.graph cimport Graph, Node, Value

from numtrace_ir.graph import register_presentation

__all__ = ["SHOWN_ELEMENTS", "display_text", "format_graph", "format_node", "value_names"]

# `str(graph)` prints constants of at most this many elements in full.
SHOWN_ELEMENTS = 16


cpdef dict value_names(Graph g, bint debug_names=True):
    """The printed name (without `%`) of every value of `g`, keyed by value (numbers only when
    `debug_names` is false)."""
    cdef list values = list(g._inputs)
    cdef Node n = g._head
    cdef Value v
    cdef dict counts = {}
    cdef dict names = {}
    cdef set taken
    cdef Py_ssize_t k
    while n is not None:
        values.extend(n.outputs)
        n = n._next
    if not debug_names:
        return {values[k]: str(k) for k in range(len(values))}
    for v in values:
        if v._name is not None:
            counts[v._name] = counts.get(v._name, 0) + 1
    taken = {name for name, c in counts.items() if c == 1}
    for k in range(len(values)):
        v = values[k]
        name = v._name
        if name is None:
            names[v] = str(k)
        elif counts[name] == 1:
            names[v] = name
        elif name not in taken:
            taken.add(name)
            names[v] = name
        else:
            j = 1
            while f"{name}.{j}" in taken:
                j += 1
            names[v] = f"{name}.{j}"
            taken.add(names[v])
    return names


cdef str _node_line(Node n, dict names, object array_ref, bint locs=True, dict short_locs=None):
    # short_locs: None for the recorded locations, else a cache of their shortened forms.
    cdef Value v
    outs = ", ".join([f"%{names[v]} : {v.type}" for v in n.outputs])
    ins = ", ".join(["%" + names.get(v, "<undefined>") for v in n._inputs])
    if n._attrs:
        attrs = "[" + ", ".join([f"{k}={format_attr(a, array_ref)}" for k, a in n._attrs.items()]) + "]"
    else:
        attrs = ""
    line = f"  {outs} = {n.op}{attrs}({ins})" if outs else f"  = {n.op}{attrs}({ins})"
    if n._errstate is not None:
        line = f"{line} errstate({n._errstate})"
    if n._loc is None or not locs:
        return line
    if short_locs is None:
        return f"{line}  # {n._loc}"
    short = short_locs.get(n._loc)
    if short is None:
        short = short_locs[n._loc] = display_location(n._loc)
    return f"{line}  # {short}"


cpdef str format_graph(Graph g, object array_ref=None, bint debug_names=True, bint locs=True,
                       bint display=False):
    """The text IR of `g`; `array_ref` (see `attrs.format_array`) replaces inline arrays by references.

    `debug_names=False` / `locs=False` leave out debug names / source locations (canonical forms).
    `display=True` gives the text for people (`str(g)`): large constants abbreviated (unless
    `array_ref` is given) and locations shortened; `parse` cannot read abbreviated constants back.
    """
    if display and array_ref is None:
        array_ref = Abbreviate(SHOWN_ELEMENTS)
    cdef dict names = value_names(g, debug_names)
    cdef Value v
    cdef Node n = g._head
    cdef dict short_locs = {} if display else None
    cdef list lines = ["graph(" + ", ".join([f"%{names[v]} : {v.type}" for v in g._inputs]) + "):"]
    lines.extend(_guard_comments(g))
    while n is not None:
        lines.append(_node_line(n, names, array_ref, locs, short_locs))
        n = n._next
    lines.append("  return (" + ", ".join(["%" + names.get(v, "<undefined>") for v in g._outputs]) + ")")
    lines.append("")
    return "\n".join(lines)


cdef list _guard_comments(Graph g):
    """`# guard: x.shape[0] == 5` lines under the header: what the graph was specialized on at a glance
    (the `prim.guard` nodes below are the guards themselves; the parser skips comment lines)."""
    cdef Node n = g._head
    cdef list lines = []
    while n is not None:
        if n.op == "prim.guard":
            lines.append(f"  # guard: {guard_text(n)} == {format_attr(n._attrs['expected'])}")
        n = n._next
    return lines


def format_node(Node n, bint display=False):
    """The text line of one node, with the value names its graph gives (for messages); large
    constants abbreviated, locations shortened too with `display=True`."""
    cdef dict names = value_names(<Graph>n._graph) if n._graph != NULL else {}
    cdef Value v
    for v in n.outputs + n._inputs:  # a detached node's values keep only their debug names
        if v not in names:
            names[v] = "?" if v._name is None else v._name
    return _node_line(n, names, Abbreviate(SHOWN_ELEMENTS), True, {} if display else None).strip()


def display_text(Graph g):
    """`str(g)`: the text IR for reading (see the module docstring)."""
    return format_graph(g, None, True, True, True)


register_presentation("format_node", format_node)
register_presentation("display_text", display_text)
register_presentation("format_graph", format_graph)
