"""The device-memory interface (host allocator, selection, availability) and the kernel source cache."""

import threading

import numpy as np
import numtrace_triton
import pytest
from conftest import INTERPRETER_ONLY
from numtrace_ir.graph import Graph
from numtrace_ir.types import TensorType
from numtrace_triton import kernel_cache
from numtrace_triton.device_memory import HostAllocator, interpreter_enabled, select_allocator
from numtrace_triton.host_buffer import HostBuffer


@INTERPRETER_ONLY
def test_interpreter_mode_selects_host_memory_and_reports_available():
    assert interpreter_enabled()
    assert select_allocator().name == "host"
    assert numtrace_triton.Backend().is_available() == (True, "")


def test_host_allocator_round_trip_and_alignment():
    alloc = HostAllocator()
    rng = np.random.default_rng(1)
    data = rng.standard_normal((3, 5))[:, ::2]  # non-contiguous: uploaded in C order
    buf = alloc.upload(data)
    assert buf.ptr % 16 == 0 and buf.nbytes == data.size * 8
    out = np.empty((3, 3))
    alloc.download(buf, out)
    np.testing.assert_array_equal(out, data)
    ptr = alloc.pointer(buf, np.float64)
    assert isinstance(ptr, HostBuffer) and ptr.data_ptr() == buf.ptr and ptr.size() == (9,)
    assert alloc.empty(0).nbytes == 0


def test_download_checks_destination():
    alloc = HostAllocator()
    buf = alloc.upload(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        alloc.download(buf, np.zeros((4, 2), np.float32)[:, 0])
    with pytest.raises(ValueError, match="bytes requested"):
        alloc.download(buf, np.zeros(8, np.float32))


def test_without_interpreter_and_without_cuda_libraries(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr("numtrace_triton.device_memory._selected", None)
    for name in ("cupy", "cuda", "cuda.bindings", "cuda.cudart"):
        monkeypatch.setitem(__import__("sys").modules, name, None)  # make the import fail
    with pytest.raises(RuntimeError, match=r"numtrace-triton\[cupy\].*numtrace-triton\[cuda-python\]"):
        select_allocator()
    ok, why = numtrace_triton.Backend().is_available()
    assert not ok and why  # no GPU here (or no CUDA memory library): the reason is spelled out


@INTERPRETER_ONLY
def test_kernel_cache_writes_each_source_once_and_reuses_it(tmp_path):
    kernel_cache.set_cache_dir(tmp_path)
    try:
        source = (
            "import triton\nimport triton.language as tl\n\n@triton.jit\n"
            "def cached_k(p, BLOCK: tl.constexpr):\n    tl.store(p + tl.arange(0, BLOCK), 1.0)\n"
        )
        fn1, path1 = kernel_cache.load_kernel("cached_k", source)
        fn2, path2 = kernel_cache.load_kernel("cached_k", source)
        assert fn1 is fn2 and path1 == path2
        assert path1.parent == tmp_path and kernel_cache.source_hash(source) in path1.name
        assert path1.read_text() == source
        other, path3 = kernel_cache.load_kernel("cached_k", source + "\n# changed\n")
        assert other is not fn1 and path3 != path1
        out = np.zeros(4, np.float32)
        fn1[(1,)](HostBuffer(out), BLOCK=4)
        np.testing.assert_array_equal(out, 1.0)
    finally:
        kernel_cache.set_cache_dir(None)


def test_kernel_cache_rejects_bad_names_and_missing_kernels(tmp_path):
    kernel_cache.set_cache_dir(tmp_path)
    try:
        with pytest.raises(ValueError, match="identifier"):
            kernel_cache.load_kernel("not a name", "")
        with pytest.raises(RuntimeError, match="does not define"):
            kernel_cache.load_kernel("missing_k", "x = 1\n")
    finally:
        kernel_cache.set_cache_dir(None)


class _FakeCudaArray:
    """Looks like a CUDA array to the importer (no memory is ever touched here)."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (ptr, False),
            "strides": strides,
            "version": 3,
        }


def test_device_arrays_are_imported_in_place_and_checked():
    from numtrace_triton.device_arrays import CudaArray, export_array, import_array, is_device_array

    arr = _FakeCudaArray((4, 5))
    assert is_device_array(arr) and not is_device_array(np.zeros(3))
    buf = import_array(arr, np.float32, (4, 5), "input 0")
    assert buf.ptr == 0x7F0000000000 and buf.nbytes == 80 and buf.owner is arr
    contiguous_strides = _FakeCudaArray((4, 5), strides=(20, 4))
    assert import_array(contiguous_strides, np.float32, (4, 5), "input 0").nbytes == 80
    with pytest.raises(TypeError, match=r"expected float32\[4, 6\]"):
        import_array(arr, np.float32, (4, 6), "input 0")
    with pytest.raises(ValueError, match="non-contiguous"):
        import_array(_FakeCudaArray((4, 5), strides=(40, 8)), np.float32, (4, 5), "input 0")
    out = export_array(buf, np.float32, (4, 5), like=arr)  # an unknown library: a plain CUDA array
    assert isinstance(out, CudaArray)
    assert out.__cuda_array_interface__["data"] == (buf.ptr, False)
    assert out.__cuda_array_interface__["shape"] == (4, 5)


@INTERPRETER_ONLY
def test_device_arrays_are_refused_under_the_interpreter():
    from numtrace_ir.graph import Graph
    from numtrace_ir.types import TensorType

    g = Graph()
    x = g.add_input("x", TensorType("float32", (4, 5)))
    g.set_outputs([g.create_node("np.exp", [x]).output])
    exe = numtrace_triton.Backend().compile(g, [TensorType("float32", (4, 5))])
    with pytest.raises(TypeError, match="TRITON_INTERPRET"):
        exe(_FakeCudaArray((4, 5)))


def test_an_executable_runs_from_several_threads_under_the_interpreter():
    # The interpreter patches triton.language during a launch: concurrent launches must not overlap.
    g = Graph()
    xv = g.add_input("x", TensorType("float64", (3, 5)))
    g.set_outputs([g.create_node("np.sum", [g.create_node("np.exp", [xv]).output], attrs={"axis": 1}).output])
    exe = numtrace_triton.Backend().compile(g, [TensorType("float64", (3, 5))])
    x = np.random.default_rng(3).standard_normal((3, 5))
    errors = []

    def work():
        for _ in range(20):
            try:
                np.testing.assert_allclose(exe(x)[0], np.exp(x).sum(1), rtol=1e-12)
            except Exception as e:  # any failure, reported below
                errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_gpu_launches_take_turns_in_an_autotuned_kernel_and_never_contract_to_fma():
    """triton.autotune's Autotuner keeps a call's arguments on itself until the call ends (a second
    thread inside it meets None: "'NoneType' object is not a mapping"), so the executable's GPU launches
    of an autotuned kernel take turns. Every GPU launch passes ``enable_fp_fusion=False``."""
    import time

    from numtrace_triton import executable
    from numtrace_triton.emit_body import GeneratedKernel

    inside, overlaps, options = [], [], []

    class Kernel:  # a jitted (or autotuned) kernel as `_launch` drives it
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                overlaps.extend(inside)
                inside.append(1)
                time.sleep(0.001)
                inside.pop()
                options.append(kwargs.get("enable_fp_fusion"))

            return launch

    tuned = GeneratedKernel("k", "", [], [], None, {"BLOCK_M": 4}, 4, {}, tuned=("BLOCK_M",),
                            grid_fn=lambda meta: (1,))
    plain = GeneratedKernel("k", "", [], [], (1,), {"BLOCK": 4}, 4, {})
    threads = [threading.Thread(target=lambda: [executable._launch(tuned, Kernel(), None, {}, False)
                                                for _ in range(20)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    executable._launch(plain, Kernel(), None, {}, False)
    assert not overlaps
    assert options == [False] * 81


def test_stats_report_what_autotune_chose_and_the_time_of_each_config():
    """On a GPU, ``stats()["tuned"]`` says which config triton.autotune chose for each kernel and what every
    config it tried took (benchmarks/gpu.py prints them); nothing is tuned in the interpreter."""
    from types import SimpleNamespace

    import triton
    from numtrace_triton.executable import _autotuned

    fast = triton.Config({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 16}, num_warps=4, num_stages=3)
    slow = triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=8, num_stages=4)
    fn = SimpleNamespace(best_config=fast, configs_timings={fast: [0.25, 0.5], slow: 0.75})
    assert _autotuned(fn) == {"chosen": "64x32x16 w4 s3",
                              "timings_ms": {"64x32x16 w4 s3": 0.25, "128x128x32 w8 s4": 0.75}}
    if interpreter_enabled():
        g = Graph()
        a = g.add_input("a", TensorType("float32", (4, 3)))
        b = g.add_input("b", TensorType("float32", (3, 2)))
        g.set_outputs([g.create_node("np.matmul", [a, b]).output])
        exe = numtrace_triton.Backend().compile(g, [a.type, b.type])
        exe(np.ones((4, 3), np.float32), np.ones((3, 2), np.float32))
        assert exe.stats()["tuned"] == {}
