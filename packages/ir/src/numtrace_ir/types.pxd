# Value types of the IR; graph.pyx cimports them to type-check without Python lookups.

cdef class Type:
    # The constructor arguments: the value a type is compared, hashed and pickled by.
    cdef tuple _args
    cdef Py_hash_t _hash


cdef class TensorType(Type):
    cdef readonly object dtype
    cdef readonly tuple shape
    cdef readonly str dtype_name
    cdef str _text


cdef class ScalarType(Type):
    cdef readonly str kind


cdef class TupleType(Type):
    cdef readonly tuple elements
