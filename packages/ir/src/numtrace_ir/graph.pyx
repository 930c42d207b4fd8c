"""The SSA graph: `Value`, `Node`, `Graph` and the editing API that the tracer and the passes use.

Invariants (checked by `Graph.lint`): every value is assigned once, by a graph input or by one node
output; nodes are kept in program order, which is a topological order; every value records each of
its uses, so "users of", "replace all uses" and "erase" never scan the graph.

Lifetime: a graph owns its nodes and values; nodes and values point back to it without owning it
(see graph.pxd). A node or value that outlives its graph, or whose node was erased, is detached:
its `.graph` is None, and a value whose producing node was freed has `.node` None.
"""

import re

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.ref cimport PyObject

from numtrace_ir.attrs cimport check_attr
from numtrace_ir.types cimport TensorType, Type

from numtrace_ir.registry import get as _registry_get

__all__ = ["Graph", "LintError", "Node", "Value", "register_presentation"]


class LintError(ValueError):
    """A graph breaks an IR invariant; the message names the node and its source location."""


# Positions of appended nodes are this far apart, so that most insertions find a free position.
cdef long long _GAP = 1 << 20

_VALUE_NAME = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*\Z")
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
# Names and locations already validated: a trace repeats the same few ops, attributes and lines.
cdef set _valid_ops = set()
cdef set _valid_attr_names = set()
cdef set _valid_locs = set()
# Op name -> its registry rule (the bound `OpDef.infer`).
cdef dict _infer_of = {}
# How graphs are shown and rebuilt (text, drawing, parsing) is the job of the modules above this one
# (printer, dot, parser): each registers its functions here when imported, and `numtrace_ir` imports
# them all, so a graph can be printed, drawn and pickled without this module importing them.
cdef dict _presentation = {}


def register_presentation(str name, object func):
    """Make `func` what the graph classes call for `name` (``format_node``, ``display_text``,
    ``format_graph``, ``to_dot``, ``repr_svg``, ``parse``); called by the modules that define them."""
    _presentation[name] = func


cdef object _presented(str name):
    try:
        return _presentation[name]
    except KeyError:
        raise RuntimeError(f"numtrace_ir.graph: {name} is defined by a module that registers it when "
                           "imported; import numtrace_ir first") from None


cpdef str check_value_name(object name):
    """Validate a debug name: letters, digits, `_` and inner dots, not all digits (those are numbers)."""
    if name is None:
        return None
    if not isinstance(name, str) or not _VALUE_NAME.match(name) or name.isdigit():
        raise ValueError(
            f"invalid value name {name!r}: expected letters, digits, '_' and inner '.', not all digits")
    return name


cpdef str check_op_name(object op):
    """Validate an op name such as `np.add` or `prim.Constant` (dotted identifiers)."""
    if op in _valid_ops:
        return op
    if not isinstance(op, str) or not _OP_NAME.match(op):
        raise ValueError(f"invalid op name {op!r}: expected dotted identifiers such as 'np.add'")
    _valid_ops.add(op)
    return op


cpdef str check_loc(object loc):
    """Validate a source location (`"file:line"`): one line, no outer spaces."""
    if loc is None or loc in _valid_locs:
        return loc
    if (not isinstance(loc, str) or not loc or loc != loc.strip() or "\n" in loc or "\r" in loc
            or not _utf8_encodable(loc)):
        raise ValueError(f"invalid source location {loc!r}: expected a one-line UTF-8 string such as "
                         f"'model.py:12'")
    if len(_valid_locs) < 1 << 16:
        _valid_locs.add(loc)
    return loc


_ERR_KINDS = ("divide", "over", "under", "invalid")
_ERR_MODES = frozenset({"ignore", "warn", "raise", "call", "print", "log"})


cpdef str check_errstate(object errstate):
    """Validate a node's error state: NumPy's modes for the kinds the traced function set around the
    op (``np.errstate(divide="ignore")``), as `"divide=ignore,invalid=raise"`, kinds in NumPy's order
    (divide, over, under, invalid); the caller's state applies to the others."""
    if errstate is None:
        return None
    if not isinstance(errstate, str) or not errstate:
        raise ValueError(f"invalid error state {errstate!r}: expected text such as 'divide=ignore'")
    cdef int last = -1
    cdef bint ok = True
    for item in errstate.split(","):
        kind, eq, mode = item.partition("=")
        if not eq or mode not in _ERR_MODES or kind not in _ERR_KINDS or _ERR_KINDS.index(kind) <= last:
            ok = False
            break
        last = _ERR_KINDS.index(kind)
    if not ok:
        raise ValueError(f"invalid error state {errstate!r}: expected kind=mode items such as "
                         "'divide=ignore,invalid=raise' (kinds divide, over, under, invalid in that order; "
                         f"modes {', '.join(sorted(_ERR_MODES))})")
    return errstate


cdef bint _utf8_encodable(str s):
    # Lone surrogates print but cannot be serialized (the text IR is stored as UTF-8).
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


cdef dict _checked_attrs(str op, dict attrs):
    cdef dict out = dict(attrs)
    for key, value in out.items():
        if key not in _valid_attr_names:
            if not isinstance(key, str) or not key.isidentifier() or not key.isascii():
                raise ValueError(f"{op}: attribute name {key!r} is not an identifier")
            _valid_attr_names.add(key)
        check_attr(value, f"{op}: attribute {key}")
    return out


cpdef tuple infer_types(str op, tuple input_types, dict attrs):
    """The output types of `op` by its registry rule."""
    infer = _infer_of.get(op)
    if infer is None:
        infer = _infer_of[op] = _registry_get(op).infer  # a name is registered once, so this never goes stale
    return _check_types(op, infer(input_types, attrs))


cdef tuple _check_types(str op, object types):
    if type(types) is not tuple:
        if isinstance(types, (Type, str)) or not hasattr(types, "__iter__"):
            raise TypeError(f"{op}: output types must be a sequence of types, got {types!r}")
        types = tuple(types)
    for t in <tuple>types:
        if type(t) is not TensorType and not isinstance(t, Type):
            raise TypeError(f"{op}: output types must be numtrace_ir types, got {type(t).__name__} {t!r}")
    return <tuple>types


cdef inline Value _new_value(object type_, str name, Node node, Py_ssize_t index, Graph graph):
    cdef Value v = Value.__new__(Value)
    v.type = type_
    v._name = name
    v._node = <PyObject*>node if node is not None else NULL
    v.index = index
    v._graph = <PyObject*>graph
    return v


cdef inline bint _in_graph(object v, Graph g):
    return type(v) is Value and (<Value>v)._graph == <PyObject*>g


@cython.no_gc
@cython.final
cdef class Value:
    """An SSA value: a graph input or one output of a node. Made by `Graph.add_input`/`create_node`."""

    def __init__(self):
        raise TypeError("values are created by Graph.add_input and Graph.create_node")

    def __dealloc__(self):
        PyMem_Free(self._uses)

    cdef int _add_use(self, Node n) except -1:
        cdef PyObject** grown
        cdef Py_ssize_t cap
        if self._nuses == self._cap:
            cap = 4 if self._cap == 0 else 2 * self._cap
            grown = <PyObject**>PyMem_Realloc(self._uses, cap * sizeof(PyObject*))
            if grown == NULL:
                raise MemoryError()
            self._uses = grown
            self._cap = cap
        self._uses[self._nuses] = <PyObject*>n
        self._nuses += 1
        return 0

    cdef void _remove_use(self, Node n):
        # One use of `n`; the latest first, as passes tend to remove recent users.
        cdef Py_ssize_t i = self._nuses - 1
        while i >= 0 and self._uses[i] != <PyObject*>n:
            i -= 1
        if i < 0:
            return
        while i + 1 < self._nuses:
            self._uses[i] = self._uses[i + 1]
            i += 1
        self._nuses -= 1

    cdef list _use_list(self):
        return [<object>self._uses[i] for i in range(self._nuses)]

    @property
    def name(self):
        """The debug name (shown in the text IR) or None."""
        return self._name

    @name.setter
    def name(self, value):
        self._name = check_value_name(value)

    @property
    def node(self):
        """The node producing this value; None for a graph input (or once that node was freed)."""
        return <object>self._node if self._node != NULL else None

    @property
    def graph(self):
        """The graph this value belongs to (None once its node was erased or its graph freed)."""
        return <object>self._graph if self._graph != NULL else None

    @property
    def users(self):
        """The distinct nodes that use this value, in program order."""
        return sorted(set(self._use_list()), key=_node_pos)

    @property
    def uses(self):
        """`(node, input_index)` for every use, in program order."""
        out = []
        for n in self.users:
            for i, v in enumerate((<Node>n)._inputs):
                if v is self:
                    out.append((n, i))
        return out

    def replace_all_uses_with(self, Value other not None):
        """Make every user of this value, and the graph outputs, use `other` instead."""
        if other._graph != self._graph or self._graph == NULL:
            raise ValueError("replace_all_uses_with: both values must belong to the same graph")
        if other is self:
            return
        cdef Node n
        cdef list users = self._use_list()
        for n in users:
            _check_defined_before(other, n, "replace_all_uses_with")
        for n in set(users):
            n._inputs = tuple([other if v is self else v for v in n._inputs])
        for n in users:
            other._add_use(n)
        self._nuses = 0
        outs = (<Graph>self._graph)._outputs
        for i in range(len(outs)):
            if outs[i] is self:
                outs[i] = other

    def __repr__(self):
        where = "input" if self._node == NULL else f"output {self.index} of {(<Node>self._node).op}"
        return f"<Value {self._name or '?'} : {self.type} ({where})>"


def _node_pos(Node n):
    return n._pos


cdef _check_defined_before(Value v, Node user, str what):
    # SSA order: a node may only use values defined before it (a graph input or an earlier node's
    # output); anything else would make a cycle or a use before definition.
    cdef Node producer
    if v._node == NULL:
        return
    producer = <Node>v._node
    if producer is user or producer._pos >= user._pos:
        raise ValueError(f"{what}: {v!r} is defined at or after {user!r}, where it would be used; "
                         f"a node may only use values defined before it")


@cython.no_gc
@cython.final
cdef class Node:
    """One operation: `op` applied to `inputs` with static `attrs`, producing typed `outputs`."""

    def __init__(self):
        raise TypeError("nodes are created by Graph.create_node")

    def __dealloc__(self):
        # Only a detached node can die (a graph owns its nodes): clear what points back at it.
        cdef Value v
        if self._registered:
            for x in self._inputs:
                (<Value>x)._remove_use(self)
        if self.outputs is not None:
            for x in self.outputs:
                v = <Value>x
                if v._node == <PyObject*>self:
                    v._node = NULL

    @property
    def inputs(self):
        return self._inputs

    @property
    def attrs(self):
        """The attributes (static values), in the op's schema order."""
        return self._attrs

    @property
    def loc(self):
        """The user's source location, `"file:line"`, or None."""
        return self._loc

    @loc.setter
    def loc(self, value):
        self._loc = check_loc(value)

    @property
    def errstate(self):
        """NumPy's error state the traced function set around this op (`check_errstate`), or None:
        the caller's state at call time applies."""
        return self._errstate

    @errstate.setter
    def errstate(self, value):
        self._errstate = check_errstate(value)

    @property
    def graph(self):
        """The graph holding this node; None once erased (or once its graph was freed)."""
        return <object>self._graph if self._graph != NULL else None

    @property
    def output(self):
        """The only output; `ValueError` for a node with zero or several outputs."""
        if len(self.outputs) != 1:
            raise ValueError(f"{self.op} has {len(self.outputs)} outputs; use .outputs")
        return self.outputs[0]

    def replace_input(self, Py_ssize_t i, Value value not None):
        """Make input `i` use `value`."""
        cdef Py_ssize_t n = len(self._inputs)
        if not 0 <= i < n:
            raise IndexError(f"{self.op} has {n} inputs; input index {i} is out of range")
        if value._graph != self._graph or self._graph == NULL:
            raise ValueError(f"{self.op}: the replacement input must be a value of the same graph")
        _check_defined_before(value, self, "replace_input")
        value._add_use(self)
        (<Value>self._inputs[i])._remove_use(self)
        self._inputs = self._inputs[:i] + (value,) + self._inputs[i + 1:]

    def __str__(self):
        return _presented("format_node")(self)

    def __repr__(self):
        return f"<Node {self.op} at {self._loc or 'unknown location'}>"


cdef class _InsertionPoint:
    """Context manager that moves a graph's insertion point and restores the previous one on exit."""
    cdef Graph graph
    cdef Node before
    cdef Node saved

    def __init__(self):
        raise TypeError("insertion points are created by Graph.inserting_before/inserting_after")

    def __enter__(self):
        if self.graph is None:  # made by __new__ from Python: nothing to move
            raise TypeError("insertion points are created by Graph.inserting_before/inserting_after")
        self.saved = self.graph._insert_before
        self.graph._insert_before = self.before
        return self

    def __exit__(self, *exc):
        # The saved anchor may have been erased meanwhile: then insert at the end.
        cdef Node saved = self.saved
        if self.graph is None:
            return False
        self.graph._insert_before = saved if saved is None or saved._graph == <PyObject*>self.graph else None
        return False


@cython.no_gc
@cython.final
cdef class Graph:
    """A typed SSA graph: inputs, nodes in program order, outputs. `str(g)` is the text IR."""

    def __cinit__(self):
        self._inputs = []
        self._outputs = []

    def __dealloc__(self):
        # Detach every node and value, releasing the node chain from its tail so that freeing a
        # long graph never recurses through `_next`.
        cdef Node n
        cdef PyObject* p = self._tail
        for x in self._inputs:
            (<Value>x)._graph = NULL
        self._insert_before = None
        while p != NULL:
            n = <Node>p
            p = n._prev
            for x in n.outputs:
                (<Value>x)._graph = NULL
            n._graph = NULL
            n._prev = NULL
            if p != NULL:
                (<Node>p)._next = None
            else:
                self._head = None
            n = None  # frees the node unless the user still holds it

    @property
    def inputs(self):
        return tuple(self._inputs)

    @property
    def outputs(self):
        return tuple(self._outputs)

    @property
    def nodes(self):
        """The nodes in program order (a fresh list)."""
        cdef list out = []
        cdef Node n = self._head
        while n is not None:
            out.append(n)
            n = n._next
        return out

    def __len__(self):
        return self._len

    def __iter__(self):
        # A snapshot, so that passes may erase or insert nodes while iterating.
        return iter(self.nodes)

    def add_input(self, name, Type type not None):
        """Append a graph input named `name` (or None) of type `type`; returns its `Value`."""
        v = _new_value(type, check_value_name(name), None, len(self._inputs), self)
        self._inputs.append(v)
        return v

    def set_outputs(self, values):
        """Set the graph outputs (values of this graph; repeats allowed)."""
        outs = list(values)
        for i, v in enumerate(outs):
            if not _in_graph(v, self):
                raise ValueError(f"output {i} is not a value of this graph: {v!r}")
        self._outputs = outs

    cpdef Node create_node(self, str op, object inputs, dict attrs=None, str loc=None, object out_types=None):
        """Insert a node at the insertion point. `out_types=None` computes them with the op's rule."""
        cdef tuple ins = inputs if type(inputs) is tuple else tuple(inputs)
        cdef tuple types
        cdef Py_ssize_t i, n_out
        cdef Node node
        check_op_name(op)
        for i in range(len(ins)):
            if not _in_graph(ins[i], self):
                raise ValueError(f"{op}: input {i} is not a value of this graph: {ins[i]!r}")
            if self._insert_before is not None:
                _check_defined_before(<Value>ins[i], self._insert_before, op)
        attrs = _checked_attrs(op, attrs) if attrs else {}
        check_loc(loc)
        if out_types is None:
            try:
                types = infer_types(op, tuple([(<Value>x).type for x in ins]), attrs)
            except (TypeError, ValueError) as e:
                e.add_note(f"while creating {op} at {loc or 'unknown location'}")
                raise
        else:
            types = _check_types(op, out_types)
        node = Node.__new__(Node)
        node.op = op
        node._inputs = ins
        node._attrs = attrs
        node._loc = loc
        node._graph = <PyObject*>self
        n_out = len(types)
        if n_out == 1:
            node.outputs = (_new_value(types[0], None, node, 0, self),)
        else:
            node.outputs = tuple([_new_value(types[i], None, node, i, self) for i in range(n_out)])
        node._registered = True  # before recording the uses, so a failure midway is still undone
        for x in ins:
            (<Value>x)._add_use(node)
        self._link(node)
        return node

    cdef void _link(self, Node node):
        cdef Node after = self._insert_before
        cdef Node prev
        if after is None:
            node._prev = self._tail
            if self._tail == NULL:
                node._pos = 0
                self._head = node
            else:
                prev = <Node>self._tail
                node._pos = prev._pos + _GAP
                prev._next = node
            self._tail = <PyObject*>node
        else:
            node._prev = after._prev
            node._next = after
            after._prev = <PyObject*>node
            if node._prev == NULL:
                node._pos = after._pos - _GAP
                self._head = node
            else:
                prev = <Node>node._prev
                prev._next = node
                if after._pos - prev._pos >= 2:
                    node._pos = prev._pos + (after._pos - prev._pos) // 2
                else:
                    self._renumber()
        self._len += 1

    cdef void _renumber(self):
        cdef Node n = self._head
        cdef long long pos = 0
        while n is not None:
            n._pos = pos
            pos += _GAP
            n = n._next

    def inserting_before(self, Node node not None):
        """Context manager: nodes created inside it go right before `node`."""
        if node._graph != <PyObject*>self:
            raise ValueError("inserting_before: the node is not in this graph")
        cdef _InsertionPoint p = _InsertionPoint.__new__(_InsertionPoint)
        p.graph, p.before = self, node
        return p

    def inserting_after(self, Node node not None):
        """Context manager: nodes created inside it go after `node`, in creation order."""
        if node._graph != <PyObject*>self:
            raise ValueError("inserting_after: the node is not in this graph")
        cdef _InsertionPoint p = _InsertionPoint.__new__(_InsertionPoint)
        p.graph, p.before = self, node._next
        return p

    def erase_node(self, Node node not None):
        """Remove `node`; `ValueError` if one of its outputs still has users or is a graph output."""
        if node._graph != <PyObject*>self:
            raise ValueError(f"erase_node: {node!r} is not in this graph")
        cdef Value v
        for x in node.outputs:
            v = <Value>x
            if v._nuses:
                raise ValueError(f"cannot erase {node!r}: its output {v.index} still has "
                                 f"{v._nuses} use(s), e.g. by {<object>v._uses[0]!r}")
            for o in self._outputs:
                if o is v:
                    raise ValueError(f"cannot erase {node!r}: its output {v.index} is a graph output")
        for x in node._inputs:
            (<Value>x)._remove_use(node)
        node._registered = False
        if self._insert_before is node:
            self._insert_before = node._next
        for x in node.outputs:
            (<Value>x)._graph = NULL
        node._graph = NULL
        # Unlink (the argument reference keeps `node` alive while the owning links are rewired).
        if node._next is None:
            self._tail = node._prev
        else:
            node._next._prev = node._prev
        if node._prev == NULL:
            self._head = node._next
        else:
            (<Node>node._prev)._next = node._next
        node._prev = NULL
        node._next = None
        self._len -= 1

    def copy(self):
        """An independent copy (same names, attrs, locations; attribute arrays are shared, not copied)."""
        cdef Graph g = Graph()
        cdef dict vmap = {}
        cdef Value v, nv
        cdef Node n = self._head
        cdef Node m
        cdef Py_ssize_t i
        for x in self._inputs:
            v = <Value>x
            nv = _new_value(v.type, v._name, None, v.index, g)
            vmap[v] = nv
            g._inputs.append(nv)
        while n is not None:
            m = Node.__new__(Node)
            m.op = n.op
            m._inputs = tuple([vmap[x] for x in n._inputs])
            m._attrs = dict(n._attrs)
            m._loc = n._loc
            m._errstate = n._errstate
            m._graph = <PyObject*>g
            m.outputs = tuple([_new_value((<Value>x).type, (<Value>x)._name, m, (<Value>x).index, g)
                               for x in n.outputs])
            for i in range(len(n.outputs)):
                vmap[n.outputs[i]] = m.outputs[i]
            m._registered = True
            for x in m._inputs:
                (<Value>x)._add_use(m)
            g._link(m)
            n = n._next
        g._outputs = [vmap[x] for x in self._outputs]
        return g

    def lint(self, *, bint check_types=True):
        """Check the IR invariants; raise `LintError` naming the first bad node and its location.

        `check_types=False` skips re-running each op's registry rule (for graphs of ops the
        registry does not know, e.g. in tests of the graph structure itself).
        """
        global _lint_run
        _lint_run += 1
        # A value is defined in this run when its mark equals `run`: no set or dict per value.
        cdef unsigned long long run = _lint_run
        cdef Node n = self._head
        cdef PyObject* prev = NULL
        cdef Value v
        cdef Py_ssize_t count = 0
        cdef Py_ssize_t i
        for i in range(len(self._inputs)):
            v = <Value>self._inputs[i]
            if v._graph != <PyObject*>self or v._node != NULL or v.index != i or v._lint_mark == run:
                raise LintError(f"graph input {i} ({v!r}) is not registered once as input {i} of this graph")
            v._lint_mark = run
            v._lint_uses = 0
        while n is not None:
            if n._graph != <PyObject*>self or n._prev != prev or not n._registered:
                _lint_fail(n, "is not linked into this graph correctly")
            if prev != NULL and n._pos <= (<Node>prev)._pos:
                _lint_fail(n, "is out of program order")
            for i in range(len(n._inputs)):
                v = <Value>n._inputs[i]
                if v._lint_mark != run:
                    what = "from another graph" if v._graph != <PyObject*>self else "defined later or erased"
                    _lint_fail(n, f"input {i} ({v!r}) is not defined before use ({what})")
                v._lint_uses += 1
            for i in range(len(n.outputs)):
                v = <Value>n.outputs[i]
                if v._node != <PyObject*>n or v.index != i or v._graph != <PyObject*>self:
                    _lint_fail(n, f"output {i} ({v!r}) does not point back to this node")
                if v._lint_mark == run:
                    _lint_fail(n, f"output {i} ({v!r}) is assigned twice")
                v._lint_mark = run
                v._lint_uses = 0
            if check_types:
                _lint_types(n)
            prev = <PyObject*>n
            n = n._next
            count += 1
        if self._tail != prev or count != self._len:
            raise LintError("the node list is corrupt (tail or length do not match)")
        for x in self._inputs:
            _lint_uses(<Value>x, self)
        n = self._head
        while n is not None:
            for x in n.outputs:
                _lint_uses(<Value>x, self)
            n = n._next
        for i in range(len(self._outputs)):
            if (<Value>self._outputs[i])._lint_mark != run:
                raise LintError(f"graph output {i} ({self._outputs[i]!r}) is not defined in this graph")

    def __str__(self):
        # For reading: large constants abbreviated, locations shortened (format_graph gives the full text).
        return _presented("display_text")(self)

    def to_dot(self, **options):
        """This graph in Graphviz DOT (see `numtrace_ir.dot.to_dot`)."""
        return _presented("to_dot")(self, **options)

    def _repr_svg_(self):
        # Jupyter: a drawing when Graphviz `dot` is installed (None lets it fall back to the text).
        return _presented("repr_svg")(self)

    def __reduce__(self):
        # Pickling and deepcopy go through the full text form, the one serialization of a graph.
        return (_graph_from_text, (_presented("format_graph")(self),))

    def __repr__(self):
        return f"<Graph: {len(self._inputs)} inputs, {self._len} nodes, {len(self._outputs)} outputs>"


def _graph_from_text(text):
    return _presented("parse")(text)


cdef unsigned long long _lint_run = 0


cdef _lint_types(Node n):
    try:
        expected = infer_types(n.op, tuple([(<Value>x).type for x in n._inputs]), n._attrs)
    except Exception as e:
        _lint_fail(n, f"its op's rule fails: {type(e).__name__}: {e}")
    actual = tuple([(<Value>x).type for x in n.outputs])
    if expected != actual:
        _lint_fail(n, f"has output types ({', '.join(map(str, actual))}) but its op's rule "
                      f"gives ({', '.join(map(str, expected))})")


cdef _lint_uses(Value v, Graph g):
    # The use records must be exactly the uses counted by the walk, each by a node of this graph.
    cdef Node user
    if v._nuses != v._lint_uses:
        raise LintError(f"value {v!r} records {v._nuses} uses but {v._lint_uses} nodes use it")
    for i in range(v._nuses):
        user = <Node>v._uses[i]
        if user._graph != <PyObject*>g or v not in user._inputs:
            raise LintError(f"value {v!r} records a use by {user!r}, which does not use it in this graph")


cdef _lint_fail(Node n, str problem):
    try:
        text = str(n)
    except Exception:
        text = repr(n)
    raise LintError(f"{text.strip()}\n  at {n._loc or 'unknown location'}: node {problem}")
