# Passes outside the interpreter: scans (np.cumsum/np.cumprod, ScanStep) and tiny-K products
# (SmallMatmulStep). Each walks "lines" of its arrays (one index of every dim but one or two), the
# lines' dims merged first where both arrays allow it.
#
# Included by each ISA build (blocks_<isa>.pyx) right after blocks.pxi, so its loops get that build's
# vector width and call blocks.pxi's helpers (cimports, `_gather`, `_cast_dispatch`, nt_loops.h's
# scalar ops) directly within one C module; it is separate because it never runs the interpreter.

# The dtypes of the scan kernel and of the tiny-K products (narrower than `num`: every fused type
# is compiled once per member, three times over for the ISA builds).
ctypedef fused scanned:
    int32_t
    int64_t
    float
    double

ctypedef fused real:
    float
    double

cdef int _merge_dims(int nd, Py_ssize_t* shape, Py_ssize_t* sa, Py_ssize_t* sb) noexcept nogil:
    """Merge neighbouring dims that both stride sets (byte strides of two arrays over `shape`) walk
    as one, dropping size-1 dims; returns the new number of dims (0 for a single line)."""
    cdef int d, n = 0
    for d in range(nd):
        if shape[d] == 1:
            continue
        if n and sa[n - 1] == sa[d] * shape[d] and sb[n - 1] == sb[d] * shape[d]:
            shape[n - 1] *= shape[d]
            sa[n - 1] = sa[d]
            sb[n - 1] = sb[d]
            continue
        shape[n] = shape[d]
        sa[n] = sa[d]
        sb[n] = sb[d]
        n += 1
    return n

cdef void _line_offsets(Py_ssize_t index, int nd, const Py_ssize_t* shape, const Py_ssize_t* sa,
                        const Py_ssize_t* sb, Py_ssize_t* oa, Py_ssize_t* ob) noexcept nogil:
    """Byte offsets in both arrays of line `index` (row-major over the merged line dims)."""
    cdef int d
    cdef Py_ssize_t i
    oa[0] = 0
    ob[0] = 0
    for d in range(nd - 1, -1, -1):
        i = index % shape[d]
        index = index // shape[d]
        oa[0] += i * sa[d]
        ob[0] += i * sb[d]

cdef int _line_space(object a, object out, int skip, int nskip, Py_ssize_t* shape, Py_ssize_t* sa,
                     Py_ssize_t* sb) except -1:
    """The merged line dims of `a` and `out` (same leading shape), leaving out dims [skip, skip+nskip)
    of `a` and of `out`: fills shape/sa/sb, returns their count."""
    cdef int d, n = 0, nd = cnp.PyArray_NDIM(<cnp.ndarray>a)
    cdef cnp.npy_intp* ash = cnp.PyArray_DIMS(<cnp.ndarray>a)
    cdef cnp.npy_intp* ast = cnp.PyArray_STRIDES(<cnp.ndarray>a)
    cdef cnp.npy_intp* ost = cnp.PyArray_STRIDES(<cnp.ndarray>out)
    if nd > MAXD:
        raise ValueError(f"arrays of more than {MAXD} dims are not supported")
    for d in range(nd):
        if skip <= d < skip + nskip:
            continue
        shape[n] = ash[d]
        sa[n] = ast[d]
        sb[n] = ost[d]
        n += 1
    return _merge_dims(n, shape, sa, sb)

cdef inline scanned _scan_step(int op, scanned acc, scanned x) noexcept nogil:
    if scanned is int32_t:
        return nt_op_add_i32(acc, x) if op == 0 else nt_op_multiply_i32(acc, x)
    elif scanned is int64_t:
        return nt_op_add_i64(acc, x) if op == 0 else nt_op_multiply_i64(acc, x)
    elif scanned is float:
        return nt_op_add_f32(acc, x) if op == 0 else nt_op_multiply_f32(acc, x)
    else:
        return nt_op_add_f64(acc, x) if op == 0 else nt_op_multiply_f64(acc, x)

cdef void _scan_line(int op, const char* a, Py_ssize_t sa, char* o, Py_ssize_t so, Py_ssize_t n,
                     scanned* kind) noexcept nogil:
    """One line of a scan, strictly left to right as NumPy's add/multiply.accumulate: o[i] is
    o[i-1] (op) a[i], so floats round exactly as NumPy's cumsum/cumprod do."""
    cdef Py_ssize_t i
    cdef scanned acc
    if n == 0:
        return
    acc = (<const scanned*>a)[0]
    (<scanned*>o)[0] = acc
    if sa == sizeof(scanned) and so == sizeof(scanned):
        for i in range(1, n):
            acc = _scan_step(op, acc, (<const scanned*>a)[i])
            (<scanned*>o)[i] = acc
    else:
        for i in range(1, n):
            acc = _scan_step(op, acc, (<const scanned*>(a + i * sa))[0])
            (<scanned*>(o + i * so))[0] = acc

cdef void _scan_line_widened(int op, int src, const char* a, Py_ssize_t sa, char* o, Py_ssize_t so,
                             Py_ssize_t n) noexcept nogil:
    """A line of bool or narrower ints scanned in int64 (NumPy's accumulator for them): each block
    converted first, then the same left-to-right fold from the identity (exact for integers)."""
    cdef int64_t buf[BLOCK]
    cdef char raw[BLOCK * 8]
    cdef int64_t acc = 0 if op == 0 else 1
    cdef Py_ssize_t start = 0, m, i, isz = nt_itemsize[src]
    while start < n:
        m = n - start if n - start < BLOCK else BLOCK
        _gather(raw, a + start * sa, sa, isz, m)
        _cast_dispatch(DT_I64, src, <char*>buf, raw, m)
        for i in range(m):
            acc = _scan_step(op, acc, buf[i])
            (<int64_t*>(o + (start + i) * so))[0] = acc
        start += m

cdef void _scan_lines(int op, int dt, int src, const char* a, char* o, Py_ssize_t sa, Py_ssize_t so,
                      Py_ssize_t n, int nd, const Py_ssize_t* shape, const Py_ssize_t* la, const Py_ssize_t* lo,
                      Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
    cdef Py_ssize_t line, oa, oo
    for line in range(first, stop):
        _line_offsets(line, nd, shape, la, lo, &oa, &oo)
        if src != dt: _scan_line_widened(op, src, a + oa, sa, o + oo, so, n)
        elif dt == DT_F64: _scan_line(op, a + oa, sa, o + oo, so, n, <double*>NULL)
        elif dt == DT_F32: _scan_line(op, a + oa, sa, o + oo, so, n, <float*>NULL)
        elif dt == DT_I64: _scan_line(op, a + oa, sa, o + oo, so, n, <int64_t*>NULL)
        else: _scan_line(op, a + oa, sa, o + oo, so, n, <int32_t*>NULL)

cdef void _sweep_rows(int op, const char* a, Py_ssize_t sa, char* o, Py_ssize_t so, Py_ssize_t n,
                      Py_ssize_t width, scanned* kind) noexcept nogil:
    """A scan along a strided axis, `width` contiguous columns at once: row i of the result is row
    i-1 (op) row i of `a`, one vectorizable loop per row. Each column is still folded left to
    right, so the bits are the per-line scan's (and NumPy's)."""
    cdef Py_ssize_t i, j
    cdef const scanned* x
    cdef const scanned* prev
    cdef scanned* cur
    for j in range(width):
        (<scanned*>o)[j] = (<const scanned*>a)[j]
    for i in range(1, n):
        x = <const scanned*>(a + i * sa)
        prev = <const scanned*>(o + (i - 1) * so)
        cur = <scanned*>(o + i * so)
        for j in range(width):
            cur[j] = _scan_step(op, prev[j], x[j])

cdef void _scan_sweeps(int op, int dt, const char* a, char* o, Py_ssize_t sa, Py_ssize_t so, Py_ssize_t n,
                       int nd, const Py_ssize_t* shape, const Py_ssize_t* la, const Py_ssize_t* lo,
                       Py_ssize_t cw, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
    """Units [first, stop) of a swept scan: unit u is column chunk u % nchunks (cw columns of the
    innermost line dim) of outer line u // nchunks."""
    cdef Py_ssize_t u, oa, oo, c0, w, width = shape[nd - 1], nchunks = (shape[nd - 1] + cw - 1) // cw
    cdef Py_ssize_t isz = nt_itemsize[dt]
    for u in range(first, stop):
        _line_offsets(u // nchunks, nd - 1, shape, la, lo, &oa, &oo)
        c0 = (u % nchunks) * cw
        w = width - c0 if width - c0 < cw else cw
        oa += c0 * isz
        oo += c0 * isz
        if dt == DT_F64: _sweep_rows(op, a + oa, sa, o + oo, so, n, w, <double*>NULL)
        elif dt == DT_F32: _sweep_rows(op, a + oa, sa, o + oo, so, n, w, <float*>NULL)
        elif dt == DT_I64: _sweep_rows(op, a + oa, sa, o + oo, so, n, w, <int64_t*>NULL)
        else: _sweep_rows(op, a + oa, sa, o + oo, so, n, w, <int32_t*>NULL)

def scan(a, out, int axis, int op, int nthreads):
    """``out = cumsum(a, axis)`` (op 0) or ``cumprod`` (op 1) for float64, float32, int64 or int32 `a`
    and `out` of one dtype and shape (`out` may be `a` itself: each element is read before it is
    written), or bool/int8/int16/int32 `a` into int64 `out`. Lines whose neighbours are contiguous
    (a scan along a leading axis) are swept together row by row (`_sweep_rows`), the others one by
    one; either way in parallel when there are several and the work is large."""
    cdef Py_ssize_t shape[MAXD]
    cdef Py_ssize_t la[MAXD]
    cdef Py_ssize_t lo[MAXD]
    cdef int nd, dt, k, src, fp = 0
    cdef Py_ssize_t lines = 1, n, sa, so, per, cw, units, u
    cdef bint big
    cdef char* pa
    cdef char* po
    dt = _scan_dtype(a, out, &src)
    if not 0 <= axis < cnp.PyArray_NDIM(<cnp.ndarray>a):
        raise ValueError(f"scan axis {axis} is out of range for {cnp.PyArray_NDIM(<cnp.ndarray>a)} dims")
    n = cnp.PyArray_DIMS(<cnp.ndarray>a)[axis]
    sa = cnp.PyArray_STRIDES(<cnp.ndarray>a)[axis]
    so = cnp.PyArray_STRIDES(<cnp.ndarray>out)[axis]
    nd = _line_space(a, out, axis, 1, shape, la, lo)
    for k in range(nd):
        lines *= shape[k]
    pa = <char*>cnp.PyArray_DATA(<cnp.ndarray>a)
    po = <char*>cnp.PyArray_DATA(<cnp.ndarray>out)
    if lines == 0 or n == 0:
        return
    if src == dt and nd and shape[nd - 1] >= 4 and la[nd - 1] == nt_itemsize[dt] and lo[nd - 1] == nt_itemsize[dt]:
        # Contiguous lines side by side (a scan along a leading axis): sweep them row by row.
        big = nthreads > 1 and lines * n >= (1 << 20)
        cw = BLOCK if big else shape[nd - 1]
        units = (lines // shape[nd - 1]) * ((shape[nd - 1] + cw - 1) // cw)
        if not big or units < 2:
            with nogil:
                _scan_sweeps(op, dt, pa, po, sa, so, n, nd, shape, la, lo, cw, 0, units)
        else:
            with nogil:
                for u in prange(units, num_threads=nthreads, schedule="static"):
                    _scan_sweeps(op, dt, pa, po, sa, so, n, nd, shape, la, lo, cw, u, u + 1)
                    fp |= nt_fp_take()   # each thread's flags to this one (nt_fpflags.h)
                nt_fp_put(fp)
        return
    if nthreads > 1 and lines > 1 and lines * n >= (1 << 20):
        per = (lines + nthreads - 1) // nthreads
        with nogil:
            for k in prange(nthreads, num_threads=nthreads, schedule="static"):
                _scan_lines(op, dt, src, pa, po, sa, so, n, nd, shape, la, lo, k * per,
                            min(lines, (k + 1) * per))
                fp |= nt_fp_take()
            nt_fp_put(fp)
    else:
        with nogil:
            _scan_lines(op, dt, src, pa, po, sa, so, n, nd, shape, la, lo, 0, lines)

cdef int _scan_dtype(object a, object out, int* src) except -1:
    """The dtype code of the scan's output, and in `src` its input's (checked here: the kernel reads
    raw memory)."""
    cdef int t, to
    if not (cnp.PyArray_Check(a) and cnp.PyArray_Check(out)):
        raise TypeError("scan operands must be numpy arrays")
    t = cnp.PyArray_TYPE(<cnp.ndarray>a)
    to = cnp.PyArray_TYPE(<cnp.ndarray>out)
    src[0] = _WIDENED_SCAN.get(t, -1) if to == cnp.NPY_INT64 else -1
    if src[0] >= 0:
        t = to
    if (t != to or not cnp.PyArray_SAMESHAPE(<cnp.ndarray>a, <cnp.ndarray>out)
            or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a) or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>out)
            or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>out)):
        raise TypeError(f"scan operands must share one native dtype and shape, got {(<object>a).dtype}"
                        f"{list((<object>a).shape)} and {(<object>out).dtype}{list((<object>out).shape)}")
    if t == cnp.NPY_DOUBLE: to = DT_F64
    elif t == cnp.NPY_FLOAT: to = DT_F32
    elif t == cnp.NPY_INT64: to = DT_I64
    elif t == cnp.NPY_INT32: to = DT_I32
    else: raise TypeError(f"no scan kernel for dtype {(<object>a).dtype}")
    if src[0] < 0:
        src[0] = to
    return to

# Input typenums a scan widens to int64 (NumPy accumulates these in int64) -> their dtype code.
_WIDENED_SCAN = {cnp.NPY_BOOL: DT_BOOL, cnp.NPY_INT8: DT_I8, cnp.NPY_INT16: DT_I16, cnp.NPY_INT32: DT_I32}

cdef extern from "nt_smallk.h" nogil:
    void nt_smallk_rows_f32(const float* a, const float* w, float* o, Py_ssize_t n, int K)
    void nt_smallk_rows_f64(const double* a, const double* w, double* o, Py_ssize_t n, int K)

cdef int _small_k_rows(const real* w, Py_ssize_t K, Py_ssize_t m, const char* a, Py_ssize_t sk,
                       char* o, Py_ssize_t sj, int nd, const Py_ssize_t* shape, const Py_ssize_t* la,
                       const Py_ssize_t* lo, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
    """Rows [first, stop) of ``o[r, j] = sum_k a[r, k] * w[k * m + j]``, summed over k in order from
    +0 as NumPy's matmul sums (a sum of -0.0 products is +0.0). Returns 1 when nt_smallk.h's loop
    over back-to-back rows computed some of them, else 0."""
    cdef Py_ssize_t r, j, k, oa, oo, sr_a = la[nd - 1] if nd else 0, sr_o = lo[nd - 1] if nd else 0
    cdef Py_ssize_t inner = shape[nd - 1] if nd else 1, r0, r1, line
    cdef const char* ar
    cdef char* orow
    cdef real acc
    cdef int packed = 0
    line = first // inner
    r0 = first % inner
    while first < stop:
        _line_offsets(line, nd - 1 if nd else 0, shape, la, lo, &oa, &oo)
        r1 = inner if stop - first >= inner - r0 else r0 + stop - first
        ar = a + oa + r0 * sr_a
        orow = o + oo + r0 * sr_o
        if (m == 1 and sk == sizeof(real) and sr_a == K * sizeof(real) and sr_o == sizeof(real)
                and <size_t>ar % sizeof(real) == 0 and <size_t>orow % sizeof(real) == 0
                and (orow >= ar + (r1 - r0) * sr_a or ar >= orow + (r1 - r0) * sr_o)):
            # Back-to-back rows into a separate contiguous output: nt_smallk.h's vectorized loop.
            packed = 1
            if real is float:
                nt_smallk_rows_f32(<const float*>ar, w, <float*>orow, r1 - r0, <int>K)
            else:
                nt_smallk_rows_f64(<const double*>ar, w, <double*>orow, r1 - r0, <int>K)
        elif K == 3 and m == 1 and sk == sizeof(real):
            for r in range(r0, r1):
                ar = a + oa + r * sr_a
                (<real*>(o + oo + r * sr_o))[0] = (<real>0 + (<const real*>ar)[0] * w[0]
                                                 + (<const real*>ar)[1] * w[1] + (<const real*>ar)[2] * w[2])
        else:
            for r in range(r0, r1):
                ar = a + oa + r * sr_a
                for j in range(m):
                    acc = 0
                    for k in range(K):
                        acc = acc + (<const real*>(ar + k * sk))[0] * w[k * m + j]
                    (<real*>(o + oo + r * sr_o + j * sj))[0] = acc
        first += r1 - r0
        r0 = 0
        line += 1
    return packed

def small_k_matmul(a, b, out, int nthreads):
    """``out = a @ b`` for a float `a` of shape (..., K), `b` of shape (K,) or (K, m) with K and m at
    most 8, and `out` of a's dtype and the product's shape: each output element is its K products
    summed in order (BLAS may pair or fuse them differently: equal within float rounding). Returns
    whether the loop over back-to-back rows (nt_smallk.h) computed some of them."""
    cdef Py_ssize_t shape[MAXD]
    cdef Py_ssize_t la[MAXD]
    cdef Py_ssize_t lo[MAXD]
    cdef double wd[64]
    cdef float wf[64]
    cdef int nd, k, ad, bd, t
    cdef bint bad
    cdef Py_ssize_t K, m, rows = 1, sk, sj, per, j, sb0, sb1
    cdef int fp = 0, packed = 0
    cdef char* pb
    cdef char* pa
    cdef char* po
    if not (cnp.PyArray_Check(a) and cnp.PyArray_Check(b) and cnp.PyArray_Check(out)):
        raise TypeError("small_k_matmul operands must be numpy arrays")
    t = cnp.PyArray_TYPE(<cnp.ndarray>a)
    ad, bd = cnp.PyArray_NDIM(<cnp.ndarray>a), cnp.PyArray_NDIM(<cnp.ndarray>b)
    if (t not in (cnp.NPY_DOUBLE, cnp.NPY_FLOAT) or cnp.PyArray_TYPE(<cnp.ndarray>b) != t
            or cnp.PyArray_TYPE(<cnp.ndarray>out) != t or ad < 2 or bd not in (1, 2)
            or not (cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a) and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>b)
                    and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>out) and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>out))):
        raise TypeError("small_k_matmul takes native float32/float64 a (..., K), b (K,) or (K, m) of one dtype")
    cdef cnp.npy_intp* adims = cnp.PyArray_DIMS(<cnp.ndarray>a)
    cdef cnp.npy_intp* odims = cnp.PyArray_DIMS(<cnp.ndarray>out)
    K = adims[ad - 1]
    m = 1 if bd == 1 else cnp.PyArray_DIMS(<cnp.ndarray>b)[1]
    if cnp.PyArray_DIMS(<cnp.ndarray>b)[0] != K or not 1 <= K <= 8 or not 1 <= m <= 8:
        raise ValueError(f"small_k_matmul: shapes {(<object>a).shape} and {(<object>b).shape} are not "
                         f"(..., K) @ (K, m) with K, m <= 8")
    bad = cnp.PyArray_NDIM(<cnp.ndarray>out) != ad - 1 + (bd == 2) or (bd == 2 and odims[ad - 1] != m)
    for k in range(ad - 1):
        bad = bad or odims[k] != adims[k]
    if bad:
        raise ValueError(f"small_k_matmul: out has shape {(<object>out).shape}, the product of "
                         f"{(<object>a).shape} and {(<object>b).shape} does not")
    pb = <char*>cnp.PyArray_DATA(<cnp.ndarray>b)
    sb0 = cnp.PyArray_STRIDES(<cnp.ndarray>b)[0]
    sb1 = cnp.PyArray_STRIDES(<cnp.ndarray>b)[1] if bd == 2 else 0
    for k in range(K):
        for j in range(m):
            if t == cnp.NPY_DOUBLE:
                wd[k * m + j] = (<double*>(pb + k * sb0 + j * sb1))[0]
            else:
                wf[k * m + j] = (<float*>(pb + k * sb0 + j * sb1))[0]
    sk = cnp.PyArray_STRIDES(<cnp.ndarray>a)[ad - 1]
    sj = cnp.PyArray_STRIDES(<cnp.ndarray>out)[ad - 1] if bd == 2 else 0
    nd = _line_space(a, out, ad - 1, 1, shape, la, lo)
    for k in range(nd):
        rows *= shape[k]
    pa = <char*>cnp.PyArray_DATA(<cnp.ndarray>a)
    po = <char*>cnp.PyArray_DATA(<cnp.ndarray>out)
    if rows == 0:
        return False
    if nthreads > 1 and rows * K * m >= (1 << 20):
        per = (rows + nthreads - 1) // nthreads
        with nogil:
            for k in prange(nthreads, num_threads=nthreads, schedule="static"):
                if t == cnp.NPY_DOUBLE:
                    packed |= _small_k_rows(wd, K, m, pa, sk, po, sj, nd, shape, la, lo, k * per,
                                            min(rows, (k + 1) * per))
                else:
                    packed |= _small_k_rows(wf, K, m, pa, sk, po, sj, nd, shape, la, lo, k * per,
                                            min(rows, (k + 1) * per))
                fp |= nt_fp_take()
            nt_fp_put(fp)
    elif t == cnp.NPY_DOUBLE:
        with nogil:
            packed = _small_k_rows(wd, K, m, pa, sk, po, sj, nd, shape, la, lo, 0, rows)
    else:
        with nogil:
            packed = _small_k_rows(wf, K, m, pa, sk, po, sj, nd, shape, la, lo, 0, rows)
    return packed != 0


# -- argmin/argmax along contiguous rows (into.RowArg) --------------------------------------------

cdef extern from "math.h" nogil:
    # C99's quiet comparisons: false on a NaN operand without raising invalid (NumPy's argmin and
    # argmax raise no floating-point error).
    bint c_isless "isless"(double a, double b)
    bint c_isgreater "isgreater"(double a, double b)

cdef Py_ssize_t _row_arg(const real* p, Py_ssize_t k, bint want_max) noexcept nogil:
    """NumPy's argmin (argmax with `want_max`) of one row: the first index of its first NaN if it
    has one, else the first index of its minimum (maximum; ±0 compare equal). The scan keeps the
    running extreme without branches; a row with a NaN is walked again for its first NaN."""
    cdef real m = p[0]
    cdef real v
    cdef Py_ssize_t idx = 0, j
    cdef bint nan = m != m, better
    if want_max:
        for j in range(1, k):
            v = p[j]
            nan |= v != v
            better = c_isgreater(v, m)
            idx = j if better else idx
            m = v if better else m
    else:
        for j in range(1, k):
            v = p[j]
            nan |= v != v
            better = c_isless(v, m)
            idx = j if better else idx
            m = v if better else m
    if nan:
        for j in range(k):
            if p[j] != p[j]:
                return j
    return idx


cdef void _row_args(const real* p, Py_ssize_t k, Py_ssize_t* out, Py_ssize_t r0, Py_ssize_t r1,
                    bint want_max) noexcept nogil:
    cdef Py_ssize_t r
    for r in range(r0, r1):
        out[r] = _row_arg(p + r * k, k, want_max)


ctypedef struct RowArgJob:
    const char* x
    Py_ssize_t* out
    Py_ssize_t k, rows, chunk
    bint want_max, f64


cdef void _row_arg_unit(void* arg, int c) noexcept nogil:
    """Team unit c of row_arg_extreme: rows [c * chunk, (c + 1) * chunk)."""
    cdef const RowArgJob* j = <const RowArgJob*>arg
    cdef Py_ssize_t r0 = c * j.chunk, r1 = min((c + 1) * j.chunk, j.rows)
    if j.f64:
        _row_args(<const double*>j.x, j.k, j.out, r0, r1, j.want_max)
    else:
        _row_args(<const float*>j.x, j.k, j.out, r0, r1, j.want_max)


# Elements below which row_arg_extreme stays on the calling thread (waking the team costs more).
cdef Py_ssize_t _ROW_ARG_PARALLEL_MIN = 1 << 18


def row_arg_extreme(a, out, bint want_max, int nthreads) -> bool:
    """``out[...] = argmax(a, axis=-1)`` (`want_max`) or ``argmin`` for an aligned C-contiguous native
    float64/float32 `a` with non-empty rows and a C-contiguous intp `out` of one element per row
    (keepdims or not), with NumPy's answer; large ones split their rows over the thread team
    (nt_team.h), as generated passes do. False, with nothing written, for any other operands (the
    caller runs NumPy)."""
    cdef cnp.ndarray x, o
    cdef RowArgJob job
    cdef Py_ssize_t k, rows
    cdef int t, nchunks
    if not (cnp.PyArray_Check(a) and cnp.PyArray_Check(out)):
        return False
    x, o = <cnp.ndarray>a, <cnp.ndarray>out
    t = cnp.PyArray_TYPE(x)
    if (t not in (cnp.NPY_DOUBLE, cnp.NPY_FLOAT) or cnp.PyArray_NDIM(x) == 0
            or cnp.PyArray_TYPE(o) != cnp.NPY_INTP
            or not (cnp.PyArray_IS_C_CONTIGUOUS(x) and cnp.PyArray_ISALIGNED(x) and cnp.PyArray_ISNOTSWAPPED(x)
                    and cnp.PyArray_IS_C_CONTIGUOUS(o) and cnp.PyArray_ISALIGNED(o)
                    and cnp.PyArray_ISNOTSWAPPED(o) and cnp.PyArray_ISWRITEABLE(o))):
        return False
    k = cnp.PyArray_DIMS(x)[cnp.PyArray_NDIM(x) - 1]
    if k == 0:
        return False
    rows = cnp.PyArray_SIZE(x) // k
    if cnp.PyArray_SIZE(o) != rows:
        return False
    job.x, job.out, job.k, job.rows = <const char*>cnp.PyArray_DATA(x), <Py_ssize_t*>cnp.PyArray_DATA(o), k, rows
    job.want_max, job.f64 = want_max, t == cnp.NPY_DOUBLE
    with nogil:
        if nthreads < 2 or rows < 2 or rows * k < _ROW_ARG_PARALLEL_MIN:
            job.chunk = rows
            _row_arg_unit(&job, 0)
        else:
            nchunks = min(4 * nthreads, NT_TEAM_MAX_UNITS)
            job.chunk = (rows + nchunks - 1) // nchunks
            nchunks = <int>((rows + job.chunk - 1) // job.chunk)
            nt_team_run_spin(_row_arg_unit, &job, nchunks, nthreads, nt_team_spin_ns)
    return True
