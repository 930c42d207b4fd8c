# Attribute validation and text form, cimported by graph.pyx and printer.pyx.

cpdef object check_attr(object value, str where, int depth=*)
cpdef str format_float(object x)
cpdef str format_array(object arr, object array_ref=*)
cpdef str format_attr(object value, object array_ref=*, int depth=*)
