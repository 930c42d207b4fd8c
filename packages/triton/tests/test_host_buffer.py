"""The duck-typed tensor adapter that Triton's interpreter drives, on its own and in a real launch."""

import numpy as np
import pytest
import triton
import triton.language as tl
from conftest import INTERPRETER_ONLY
from numtrace_triton.host_buffer import HostBuffer, HostStorage


@triton.jit
def _strided_copy(src, dst, n, src_stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs * src_stride, mask=mask) * 2, mask=mask)


def test_attributes_of_a_strided_view():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[1:, ::2]
    buf = HostBuffer(view)
    assert buf.dtype == np.float32
    assert buf.size() == (3, 3) and buf.size(1) == 3
    assert buf.stride() == (6, 2) and buf.stride(0) == 6
    assert buf.data_ptr() == view.ctypes.data
    assert buf.storage_offset() == 0  # the storage starts at the view's first element
    assert buf.untyped_storage().nbytes() == (2 * 6 + 4 + 1) * 4
    assert buf.numel() == 9 and buf.element_size() == 4


def test_negative_strides_keep_a_nonnegative_offset():
    base = np.arange(10, dtype=np.int64)
    buf = HostBuffer(base[::-3])
    storage = buf.untyped_storage()
    assert buf.storage_offset() == 9
    assert buf.stride() == (-3,)
    assert storage.data_ptr() == base.ctypes.data


def test_new_empty_and_set_rebuild_the_same_view():
    base = np.arange(30, dtype=np.float64).reshape(5, 6)
    src = HostBuffer(base[::2, 1::2])
    clone = src.new_empty(0, device="cpu")
    clone.set_(src.untyped_storage(), src.storage_offset(), src.size(), src.stride())
    np.testing.assert_array_equal(clone.array, base[::2, 1::2])
    clone.array[0, 0] = -1.0  # shares memory with the original
    assert base[0, 1] == -1.0


def test_set_rejects_views_outside_the_storage():
    buf = HostBuffer(np.zeros(8, np.float32))
    with pytest.raises(IndexError, match="outside a storage"):
        buf.new_empty(0).set_(buf.untyped_storage(), 4, (5,), (1,))
    with pytest.raises(ValueError, match="negative"):
        buf.new_empty(0).set_(buf.untyped_storage(), -1, (1,), (1,))
    with pytest.raises(TypeError, match="HostStorage"):
        buf.set_(object(), 0, (1,), (1,))


def test_storage_copy_between_distinct_storages_and_onto_itself():
    a, b = np.arange(4, dtype=np.int32), np.zeros(4, np.int32)
    sa, sb = HostStorage.of(a), HostStorage.of(b)
    sb.copy_(sa)
    np.testing.assert_array_equal(b, a)
    sa.copy_(sa)  # the interpreter copies results back onto the same memory
    with pytest.raises(ValueError, match="size mismatch"):
        HostStorage.of(np.zeros(3, np.int32)).copy_(sa)


def test_bad_arrays_are_rejected_with_clear_errors():
    with pytest.raises(TypeError, match="numpy.ndarray"):
        HostBuffer([1, 2, 3])
    with pytest.raises(TypeError, match="unsupported dtype"):
        HostBuffer(np.array(["a"]))
    with pytest.raises(TypeError, match="byte-swapped"):
        HostBuffer(np.zeros(3, dtype=">f4"))
    record = np.zeros(4, dtype=[("a", "i1"), ("b", "f4")])
    with pytest.raises(TypeError, match="unsupported dtype"):
        HostBuffer(record)
    with pytest.raises(ValueError, match="multiples"):
        HostBuffer(np.lib.stride_tricks.as_strided(np.zeros(8, np.int16), (3,), (3,)))


@INTERPRETER_ONLY
def test_interpreter_launch_reads_strided_and_writes_in_place():
    rng = np.random.default_rng(0)
    src = rng.standard_normal(40).astype(np.float32)
    dst = np.zeros(20, np.float32)
    _strided_copy[(2,)](HostBuffer(src), HostBuffer(dst), 20, 2, BLOCK=16)
    np.testing.assert_array_equal(dst, src[::2] * 2)


@INTERPRETER_ONLY
def test_interpreter_launch_on_a_view_with_an_offset():
    base = np.arange(32, dtype=np.float32)
    dst_base = np.zeros(32, np.float32)
    _strided_copy[(1,)](HostBuffer(base[5:]), HostBuffer(dst_base[3:13]), 10, 1, BLOCK=16)
    np.testing.assert_array_equal(dst_base[3:13], base[5:15] * 2)
    assert not dst_base[:3].any() and not dst_base[13:].any()
