"""The call protocol of an executable (included by runtime.pyx), in C so that calling a small graph
costs little more than its kernels: the thread count of every pass, `FusedCall` (a kernel bound to
environment slots) and `CallRunner`, the body of `numtrace_cpu.Executable.__call__` (inputs checked,
arena taken, outputs allocated, steps run). The Python-level checks and messages stay in
numtrace_cpu.executable; the call convention of a traced function is exact_call.pxi's."""

cdef int _num_threads = 1


def set_num_threads(int n):
    """Threads of every pass this module runs from now on (numtrace_cpu.threads owns the setting)."""
    global _num_threads
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    _num_threads = n


cdef class FusedCall:
    """A FusedKernel bound to the environment slots of its operands; `scalars` lists the operands
    that arrive as Python scalars, with the dtype they are converted to per call."""
    cdef FusedKernel kernel
    cdef Py_ssize_t* ids
    cdef int nids
    cdef list scalars

    def __cinit__(self, FusedKernel kernel not None, list ids, list scalars):
        if len(ids) != kernel.nops:
            raise ValueError(f"the kernel has {kernel.nops} operands, got {len(ids)} slots")
        self.kernel = kernel
        self.nids = len(ids)
        self.ids = <Py_ssize_t*>malloc(max(1, self.nids) * sizeof(Py_ssize_t))
        if not self.ids:
            raise MemoryError()
        for k, i in enumerate(ids):
            if i < 0:
                raise ValueError(f"negative environment slot {i}")
            self.ids[k] = i
        self.scalars = scalars

    def __dealloc__(self):
        free(self.ids)

    cdef int call(self, list env, int nthreads) except -1:
        cdef list operands
        cdef Py_ssize_t k
        for k in range(self.nids):
            if self.ids[k] >= len(env):
                raise IndexError(f"environment slot {self.ids[k]} out of range")
        if not self.scalars:
            return self.kernel._run(env, self.ids, nthreads)
        operands = [env[self.ids[k]] for k in range(self.nids)]
        for k, dt in self.scalars:
            operands[k] = np.asarray(operands[k], dt)
        return self.kernel._run(operands, NULL, nthreads)


cdef struct OutSpec:
    # How output j reaches the caller (see CallRunner): its environment slot, dtype, shape and mode.
    Py_ssize_t slot
    int typenum, nd, mode
    size_t nbytes
    cnp.npy_intp dims[MAXD]


cdef class CallRunner:
    """Inputs checked, arena taken, outputs allocated, steps run: the body of `Executable.__call__`.

    `input_specs[i]` is (typenum, shape) for an array input or None (checked by `_check_input`);
    `steps` holds `FusedCall`s (run directly) and Python callables `f(env, nthreads)`; `outputs` is
    (slot, typenum, shape, mode) with mode 0 direct, 1 copy, 2 scalar, 3 dynamic. Subclasses provide
    `_new_arena()`, `_check_inputs(inputs)`, `_prepare_out(out, inputs)` and `_finish_out(out, outs)`.
    The tables live in C arrays: a small call is dominated by what it costs to read them.
    """
    cdef int n_inputs, n_outputs, n_per_call
    cdef int* in_type            # typenum per input, -1 for a non-array input
    cdef int* in_nd
    cdef Py_ssize_t* in_dims     # n_inputs x MAXD
    cdef OutSpec* outs
    cdef Py_ssize_t* per_call
    cdef list steps, arenas
    # NumPy's floating-point reports (a numtrace_ir.fp_errors.Reporter): called after a run whose
    # kernels raised a flag, or every run when `report_always` (the shapes warn). `reports[k]`: step k
    # is a node's NumPy reference, which reports itself (its flags are not the kernels').
    cdef object report
    cdef bint report_always
    cdef bytes reports
    # One idle arena held apart from `arenas`: taking and giving it back is two pointer swaps under
    # the GIL, where a list pop/append reallocates the list's storage every call.
    cdef object spare

    def _setup(self, list input_specs, list steps, list outputs, list per_call, object report,
               list reports):
        """`per_call`: the environment slots a call fills (inputs, direct outputs, values computed
        as Python objects); they are cleared when the call ends so an idle arena holds no
        caller data. `report`: a `numtrace_ir.fp_errors.Reporter`; `reports[k]`: step k reports its
        floating-point errors itself (a NumPy reference)."""
        cdef Py_ssize_t i, d
        cdef OutSpec* o
        if self.in_type != NULL:
            raise RuntimeError("CallRunner._setup runs once")
        self.n_inputs, self.n_outputs, self.n_per_call = len(input_specs), len(outputs), len(per_call)
        self.in_type = <int*>malloc(max(1, self.n_inputs) * sizeof(int))
        self.in_nd = <int*>malloc(max(1, self.n_inputs) * sizeof(int))
        self.in_dims = <Py_ssize_t*>malloc(max(1, self.n_inputs) * MAXD * sizeof(Py_ssize_t))
        self.outs = <OutSpec*>malloc(max(1, self.n_outputs) * sizeof(OutSpec))
        self.per_call = <Py_ssize_t*>malloc(max(1, self.n_per_call) * sizeof(Py_ssize_t))
        if not self.in_type or not self.in_nd or not self.in_dims or not self.outs or not self.per_call:
            raise MemoryError()
        for i, spec in enumerate(input_specs):
            self.in_type[i], self.in_nd[i] = -1, 0
            if spec is not None:
                typenum, shape = spec
                if len(shape) > MAXD:
                    raise ValueError(f"input {i} has {len(shape)} dims; at most {MAXD} are supported")
                self.in_type[i], self.in_nd[i] = typenum, len(shape)
                for d in range(len(shape)):
                    self.in_dims[i * MAXD + d] = shape[d]
        for i, (slot, typenum, shape, mode) in enumerate(outputs):
            if len(shape) > MAXD or not 0 <= mode <= 3 or slot < 0:
                raise ValueError(f"invalid output spec {outputs[i]!r}")
            o = &self.outs[i]
            o.slot, o.typenum, o.nd, o.mode = slot, typenum, len(shape), mode
            o.nbytes = cnp.PyArray_DescrFromType(typenum).itemsize if mode <= 1 else 0
            for d in range(len(shape)):
                o.dims[d] = shape[d]
                o.nbytes *= <size_t>o.dims[d]
        for i, slot in enumerate(per_call):
            if slot < 0:
                raise ValueError(f"negative environment slot {slot}")
            self.per_call[i] = slot
        self.steps = steps
        self.arenas = []
        if len(reports) != len(steps):
            raise ValueError(f"{len(steps)} steps, {len(reports)} report flags")
        self.report, self.report_always = report, report.always
        self.reports = bytes([1 if r else 0 for r in reports])

    def __dealloc__(self):
        free(self.in_type)
        free(self.in_nd)
        free(self.in_dims)
        free(self.outs)
        free(self.per_call)

    def __call__(self, *inputs, out=None):
        cdef Py_ssize_t i
        if len(inputs) != self.n_inputs:
            raise TypeError(f"expected {self.n_inputs} inputs, got {len(inputs)}")
        for i in range(self.n_inputs):
            if not self._input_ok(i, inputs[i]):
                inputs = self._check_inputs(inputs)
                break
        if out is None:
            return self._execute(inputs)
        return self._finish_out(out, self._execute_into(self._prepare_out(out, inputs), inputs))

    def exact_caller(self, call_spec, tuple state=(), build=None):
        """The whole call of a traced function on this executable, as `call_spec` (a
        `numtrace_ir.CallSpec`) says, with `state` after the arguments; see `ExactCall`."""
        return ExactCall(self, call_spec, state, build)

    cdef inline bint _input_ok(self, Py_ssize_t i, object x):
        """The fast check: an ndarray of the exact native dtype and shape (anything else takes the
        slow, explaining path)."""
        cdef cnp.ndarray a
        cdef int d
        cdef const Py_ssize_t* dims
        if type(x) is not cnp.ndarray or self.in_type[i] < 0:   # cnp: a C pointer, no lookup
            return False
        a = <cnp.ndarray>x
        if (cnp.PyArray_TYPE(a) != self.in_type[i] or not cnp.PyArray_ISNOTSWAPPED(a)
                or cnp.PyArray_NDIM(a) != self.in_nd[i]):
            return False
        dims = &self.in_dims[i * MAXD]
        for d in range(self.in_nd[i]):
            if cnp.PyArray_DIMS(a)[d] != dims[d]:
                return False
        return True

    cdef inline list _take_arena(self):
        cdef list work = self.spare
        if work is not None:
            self.spare = None
            return work
        if self.arenas:
            return self.arenas.pop()
        return self._new_arena()

    cdef inline void _give_back(self, list work):
        cdef Py_ssize_t i
        for i in range(self.n_per_call):
            work[self.per_call[i]] = None
        if self.spare is None:
            self.spare = work
        else:
            self.arenas.append(work)

    cdef int _run_steps(self, list work, tuple inputs) except -1:
        """The steps, then NumPy's floating-point reports of what the kernels raised
        (numtrace_ir.fp_errors). A NumPy call clears the flags before its loop, so they are read before
        each step that calls into Python; a step that is a NumPy reference reports itself, and the flags
        it leaves are dropped. A step that raises reports the kernels' flags before it first."""
        cdef Py_ssize_t k
        cdef object step
        cdef int nthreads = _num_threads
        cdef int fp = 0
        cdef const unsigned char* reports = self.reports
        for k in range(self.n_inputs):
            work[k] = inputs[k]
        nt_fp_take()   # flags raised before the call are not its own
        for k, step in enumerate(self.steps):
            if type(step) is FusedCall:
                (<FusedCall>step).call(work, nthreads)
            else:
                fp |= nt_fp_take()
                try:
                    step(work, nthreads)
                except BaseException:
                    # A NumPy step that raises (under np.errstate "raise", or ValueError) comes after
                    # the kernels' ops: NumPy would have reported (or raised) theirs first.
                    fp = nt_fp_numpy_bits(fp)
                    if fp:
                        self.report(inputs, fp)
                    raise
                if reports[k]:
                    nt_fp_take()
        fp = nt_fp_numpy_bits(fp | nt_fp_take())
        if fp or self.report_always:
            self.report(inputs, fp)
        return 0

    cdef tuple _execute(self, tuple inputs):
        """Run on checked inputs into fresh outputs; the outputs, as a tuple."""
        cdef Py_ssize_t j
        cdef OutSpec* o
        cdef list work = self._take_arena()
        cdef tuple result
        cdef object value
        try:
            for j in range(self.n_outputs):
                o = &self.outs[j]
                if o.mode == 0:
                    work[o.slot] = _new_output(o)
            self._run_steps(work, inputs)
            result = PyTuple_New(self.n_outputs)
            for j in range(self.n_outputs):
                o = &self.outs[j]
                value = work[o.slot]
                if o.mode == 1:
                    copied = _new_output(o)
                    np.copyto(copied, value)
                    value = copied
                elif o.mode == 3:
                    value = np.array(value, copy=True)
                Py_INCREF(value)
                PyTuple_SET_ITEM(result, j, value)
        finally:
            self._give_back(work)
        return result

    cdef list _execute_into(self, list outs, tuple inputs):
        """Run on checked inputs with the steps writing `outs` (from `_prepare_out`); `outs`."""
        cdef Py_ssize_t j
        cdef OutSpec* o
        cdef list work = self._take_arena()
        try:
            for j in range(self.n_outputs):
                if self.outs[j].mode == 0:
                    work[self.outs[j].slot] = outs[j]
            self._run_steps(work, inputs)
            for j in range(self.n_outputs):
                o = &self.outs[j]
                if o.mode == 1:
                    np.copyto(outs[j], work[o.slot])
        finally:
            self._give_back(work)
        return outs


cdef inline object _new_output(OutSpec* o):
    """A fresh array for output o (its size computed once, at setup)."""
    if o.nbytes < RECYCLE_MIN_BYTES:
        return cnp.PyArray_EMPTY(o.nd, o.dims, o.typenum, 0)
    return _recycled_array(o.nd, o.dims, o.typenum, o.nbytes)
