"""The call convention of a traced function (`numtrace_ir.CallSpec`) in C (included by runtime.pyx):
`ExactCall` is the CPU backend's fast path of a whole traced call, the exact-argument check, aliasing
bounds, run, write-back and returned arguments, driven by the spec object. Anything it does not take
it declines (NotImplemented) to `numtrace_ir.call_spec.run_call`, the one Python implementation of
the same rules."""

cdef class ExactCall:
    """A traced function's call of one executable reduced to C, as `call_spec` (a
    `numtrace_ir.CallSpec`) says: `run(args)` checks that each argument is exactly the array the
    executable was compiled for (an ndarray, not a subclass, of its native dtype and shape) and
    returns `NotImplemented` when one is not, having run nothing; the caller then takes its general
    path, which explains or converts. Otherwise it runs the executable on `args + state` (module
    state), copies the written inputs' new contents back in the spec's order unless the executable
    computed them there, and returns the results (`call_spec.result_items`: output j as j, an
    argument returned as itself, input i, as -1 - i): the first item when `call_spec.single`, else
    their tuple, passed to `build` when given.

    When the memory bounds of one of the spec's alias pairs (indices into `args + state`: module
    state is an input too) overlap, `run` returns `NotImplemented` too, so the general path's exact check decides (refuse, or run). Holds no per-call state: one
    ExactCall serves concurrent calls.
    """
    cdef CallRunner runner
    cdef Py_ssize_t n_args, n_pairs, n_write, n_results
    cdef tuple extra
    cdef Py_ssize_t* pairs
    cdef Py_ssize_t* write
    cdef Py_ssize_t* results
    cdef bint single, prefix        # prefix: the results are the first n_results outputs
    cdef object build
    cdef readonly object call_spec

    def __cinit__(self, CallRunner runner not None, object call_spec not None, tuple state, object build):
        cdef Py_ssize_t k, n_args = call_spec.num_args, n = n_args + len(state)
        cdef tuple alias_pairs = call_spec.alias_pairs, write_back = call_spec.write_backs
        cdef tuple results = call_spec.result_items
        if len(state) != call_spec.num_state:
            raise ValueError(f"the call spec has {call_spec.num_state} state inputs, got {len(state)}")
        if n != runner.n_inputs:
            raise ValueError(f"the executable takes {runner.n_inputs} inputs, got {n_args} + {len(state)}")
        if call_spec.num_outputs != runner.n_outputs:
            raise ValueError(f"the executable has {runner.n_outputs} outputs, the call spec "
                             f"{call_spec.num_outputs}")
        self.runner, self.n_args, self.extra, self.build = runner, n_args, state, build
        self.call_spec, self.single = call_spec, call_spec.single
        self.n_pairs, self.n_write, self.n_results = len(alias_pairs), len(write_back), len(results)
        self.pairs = <Py_ssize_t*>malloc(max(1, 2 * self.n_pairs) * sizeof(Py_ssize_t))
        self.write = <Py_ssize_t*>malloc(max(1, 2 * self.n_write) * sizeof(Py_ssize_t))
        self.results = <Py_ssize_t*>malloc(max(1, self.n_results) * sizeof(Py_ssize_t))
        if not self.pairs or not self.write or not self.results:
            raise MemoryError()
        for k, (i, j) in enumerate(alias_pairs):
            if not (0 <= i < n and 0 <= j < n):
                raise ValueError(f"alias pair {(i, j)} out of range for {n} inputs")
            self.pairs[2 * k], self.pairs[2 * k + 1] = i, j
        for k, (j, i) in enumerate(write_back):
            if not (0 <= j < runner.n_outputs and 0 <= i < n):
                raise ValueError(f"write-back {(j, i)} out of range")
            self.write[2 * k], self.write[2 * k + 1] = j, i
        for k, r in enumerate(results):
            if not -n <= r < runner.n_outputs:
                raise ValueError(f"result {r} out of range for {runner.n_outputs} outputs and {n} inputs")
            self.results[k] = r
        self.prefix = results == tuple(range(len(results)))

    def __dealloc__(self):
        free(self.pairs)
        free(self.write)
        free(self.results)

    def run(self, tuple args):
        cdef Py_ssize_t k, r, n = len(args)
        cdef CallRunner runner = self.runner
        cdef tuple inputs, outs, result
        cdef object target, new, item
        if n != self.n_args:
            return NotImplemented
        for k in range(n):
            if not runner._input_ok(k, args[k]):
                return NotImplemented
        if self.extra:
            for k in range(len(self.extra)):
                if not runner._input_ok(n + k, self.extra[k]):
                    return NotImplemented
            inputs = args + self.extra
        else:
            inputs = args
        for k in range(self.n_pairs):
            if _bounds_overlap(<cnp.ndarray>inputs[self.pairs[2 * k]],
                               <cnp.ndarray>inputs[self.pairs[2 * k + 1]]):
                return NotImplemented
        outs = runner._execute(inputs)
        for k in range(self.n_write):
            new, target = outs[self.write[2 * k]], inputs[self.write[2 * k + 1]]
            if new is not target:
                _copy_back(<cnp.ndarray>target, new)
        if self.single:
            r = self.results[0]
            return outs[r] if r >= 0 else inputs[-1 - r]
        if self.prefix:
            result = outs if self.n_results == len(outs) else outs[:self.n_results]
        else:
            result = PyTuple_New(self.n_results)
            for k in range(self.n_results):
                r = self.results[k]
                item = outs[r] if r >= 0 else inputs[-1 - r]
                Py_INCREF(item)
                PyTuple_SET_ITEM(result, k, item)
        return result if self.build is None else self.build(result)


cdef int _copy_back(cnp.ndarray target, object new) except -1:
    """NumPy's ``np.copyto(target, new, casting="no")``, in C when `new` is an array of the same dtype
    and shape."""
    cdef cnp.ndarray a
    cdef int d
    if type(new) is cnp.ndarray:
        a = <cnp.ndarray>new
        if cnp.PyArray_TYPE(a) == cnp.PyArray_TYPE(target) and cnp.PyArray_NDIM(a) == cnp.PyArray_NDIM(target):
            for d in range(cnp.PyArray_NDIM(a)):
                if cnp.PyArray_DIMS(a)[d] != cnp.PyArray_DIMS(target)[d]:
                    break
            else:
                return cnp.PyArray_CopyInto(target, a)
    np.copyto(target, new, casting="no")
    return 0


cdef bint _bounds_overlap(cnp.ndarray a, cnp.ndarray b):
    """Whether the memory bounds of two arrays overlap (NumPy's ``may_share_memory``)."""
    cdef Py_ssize_t alo, ahi, blo, bhi
    if not _bounds(a, &alo, &ahi) or not _bounds(b, &blo, &bhi):
        return False
    return alo < bhi and blo < ahi


cdef bint _bounds(cnp.ndarray a, Py_ssize_t* lo, Py_ssize_t* hi):
    """The byte range [lo, hi) an array's elements lie in; False for an empty array."""
    cdef int d
    cdef Py_ssize_t n, s, low = <Py_ssize_t>cnp.PyArray_DATA(a), high = low
    for d in range(cnp.PyArray_NDIM(a)):
        n = cnp.PyArray_DIMS(a)[d]
        if n == 0:
            return False
        s = cnp.PyArray_STRIDES(a)[d] * (n - 1)
        if s > 0:
            high += s
        else:
            low += s
    lo[0], hi[0] = low, high + cnp.PyArray_ITEMSIZE(a)
    return True
