# The SSA graph: values, nodes, graphs.
#
# Ownership (no reference cycles, so none of these objects is tracked by the cyclic GC, which would
# otherwise re-scan every node of a large graph many times while it is built):
#   Graph --owns--> first node --owns--> next node ... ; Graph --owns--> input and output values
#   Node  --owns--> its input values and output values
#   back pointers are borrowed (PyObject*): Value._node, Value._graph, Value._uses, Node._graph,
#   Node._prev, Graph._tail. Whoever dies first clears the pointers to itself (see the __dealloc__s).

from cpython.ref cimport PyObject


cdef class Graph
cdef class Node


cdef class Value:
    cdef readonly object type
    cdef str _name
    cdef PyObject* _node
    cdef readonly Py_ssize_t index
    cdef PyObject* _graph
    # The nodes using this value, once per use (a node using it twice appears twice).
    cdef PyObject** _uses
    cdef Py_ssize_t _nuses
    cdef Py_ssize_t _cap
    # Scratch space of Graph.lint: the lint run that saw this value defined, and its uses counted.
    cdef unsigned long long _lint_mark
    cdef Py_ssize_t _lint_uses
    cdef int _add_use(self, Node n) except -1
    cdef void _remove_use(self, Node n)
    cdef list _use_list(self)


cdef class Node:
    cdef readonly str op
    cdef tuple _inputs
    cdef readonly tuple outputs
    cdef dict _attrs
    cdef str _loc
    # NumPy's error state set inside the traced function for this op (`check_errstate`), or None.
    cdef str _errstate
    cdef PyObject* _graph
    cdef PyObject* _prev
    cdef Node _next
    # Program-order key: strictly increasing along the list, renumbered when an insertion finds no gap.
    cdef long long _pos
    # True while this node is recorded in its inputs' use lists (from creation until erased or freed).
    cdef bint _registered


cdef class Graph:
    cdef list _inputs
    cdef list _outputs
    cdef Node _head
    cdef PyObject* _tail
    cdef Py_ssize_t _len
    # New nodes go before this node; None means at the end.
    cdef Node _insert_before
    cdef void _link(self, Node node)
    cdef void _renumber(self)
    cpdef Node create_node(self, str op, object inputs, dict attrs=*, str loc=*, object out_types=*)
