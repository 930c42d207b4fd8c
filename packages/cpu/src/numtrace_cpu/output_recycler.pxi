"""Recycled output memory (included by runtime.pyx). A large fresh output costs more in page faults
than a fused pass takes to fill it (40 MB: ~4 ms). Outputs are still fresh arrays the caller owns,
but their memory comes from blocks that earlier outputs gave back when the caller dropped them:
already faulted in, on huge pages. A block is reused only after its array (and every view of it) is
gone."""

cdef size_t RECYCLE_MIN_BYTES = 1 << 20
cdef size_t RECYCLE_MAX_CACHED = 1 << 29          # bytes kept for reuse, all sizes together
cdef int RECYCLE_PER_SIZE = 4
cdef size_t _cached_bytes = 0
cdef dict _free_blocks = {}                        # nbytes -> list of addresses (under the GIL)


cdef class _Block:
    """Owns one block of output memory; its dealloc hands the block back (or frees it)."""
    cdef void* ptr
    cdef size_t nbytes

    def __dealloc__(self):
        global _cached_bytes
        cdef list free_list
        if self.ptr == NULL:
            return
        if (_free_blocks is not None and _cached_bytes + self.nbytes <= RECYCLE_MAX_CACHED):
            free_list = _free_blocks.setdefault(self.nbytes, [])
            if len(free_list) < RECYCLE_PER_SIZE:
                free_list.append(<size_t>self.ptr)
                _cached_bytes += self.nbytes
                return
        free(self.ptr)


cdef object _recycled_array(int nd, cnp.npy_intp* dims, int typenum, size_t nbytes):
    global _cached_bytes
    cdef _Block block = _Block.__new__(_Block)
    cdef list free_list = _free_blocks.get(nbytes)
    if free_list:
        block.ptr = <void*><size_t>free_list.pop()
        _cached_bytes -= nbytes
    else:
        block.ptr = nt_alloc_large(nbytes)
        if block.ptr == NULL:
            raise MemoryError(f"cannot allocate an output of {nbytes} bytes")
    block.nbytes = nbytes
    arr = cnp.PyArray_SimpleNewFromData(nd, dims, typenum, block.ptr)
    cnp.set_array_base(arr, block)
    return arr
