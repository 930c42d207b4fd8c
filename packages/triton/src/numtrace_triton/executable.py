"""Running a plan: buffers in, kernels launched in order, results out.

Each call allocates its own temporaries and outputs, so one executable can be
called from several threads at once; launches of autotuned kernels (GPU) take a lock, since
Triton's autotuner is not safe to enter from two threads. Under the interpreter, NumPy's
floating-point warnings are silenced around launches: masked-off lanes compute
on padding (``log(0)``...), as they do silently on a GPU; and launches run one
at a time, since the interpreter patches ``triton.language`` process-wide while
a kernel runs.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numtrace_ir.backend import plain_array
from numtrace_ir.types import TensorType

from .coverage import HOST_OPS
from .device_arrays import export_array, import_array, is_device_array
from .device_memory import DeviceAllocator, DeviceBuffer, interpreter_enabled
from .emit_body import COMPILE_OPTIONS, GeneratedKernel
from .host_steps import HostRunner
from .kernel_cache import load_kernel
from .planner import OutputSpec, Plan

__all__ = ["KernelInfo", "TritonExecutable", "kernel_info", "launch_kernels"]

# Triton's interpreter patches triton.language while a kernel runs: one launch at a time.
_INTERPRETER_LOCK = threading.Lock()
# triton.autotune's Autotuner keeps the call's arguments on itself while it launches (and benchmarks,
# on its first call) and clears them after: two threads in one autotuned kernel at once break it.
# A launch only queues work on the GPU, so holding the lock costs little.
_AUTOTUNE_LOCK = threading.Lock()


@dataclass(frozen=True)
class KernelInfo:
    """What the user can inspect about one generated kernel."""

    name: str
    source: str
    grid: tuple[int, ...] | None
    path: str
    constexprs: dict
    signature: dict


def kernel_info(k: GeneratedKernel) -> tuple[Any, KernelInfo]:
    """Kernel ``k`` loaded (its jitted function) and what the user can inspect about it."""
    fn, path = load_kernel(k.name, k.source)
    k.path = str(path)
    return fn, KernelInfo(k.name, k.source, k.grid, str(path), dict(k.constexprs), dict(k.signature))


def launch_kernels(kernels: list[tuple[GeneratedKernel, Any]], allocator: DeviceAllocator,
                   bufs: dict[int, DeviceBuffer], interpret: bool) -> None:
    """Launch ``(kernel, jitted function)`` pairs in order on ``bufs`` (a kernel's buffer ids index it)."""
    if not kernels:
        return
    if not interpret:
        for k, fn in kernels:
            _launch(k, fn, allocator, bufs, False)
        return
    with _INTERPRETER_LOCK, np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for k, fn in kernels:
            _launch(k, fn, allocator, bufs, True)


def _launch(k: GeneratedKernel, fn: Any, allocator: DeviceAllocator, bufs: dict[int, DeviceBuffer],
            interpret: bool) -> None:
    args = [allocator.pointer(bufs[b], dt) for b, dt in zip(k.buffers, k.buffer_dtypes)]
    if interpret:
        fn[k.grid](*args, **k.constexprs)
    elif k.tuned:  # block sizes and warps come from the config triton.autotune picks
        with _AUTOTUNE_LOCK:
            fn[k.grid_fn](*args, **COMPILE_OPTIONS, **k.launch_constexprs)
    else:
        fn[k.grid](*args, num_warps=k.num_warps, **COMPILE_OPTIONS, **k.constexprs)


class TritonExecutable:
    """A compiled graph for one input signature (the backend protocol's ``Executable``)."""

    def __init__(self, plan: Plan, allocator: DeviceAllocator) -> None:
        self.plan = plan
        self.allocator = allocator
        self._interpret = interpreter_enabled()
        loaded = [kernel_info(k) for k in plan.kernels]
        self._fns = [fn for fn, _ in loaded]
        self.kernels: tuple[KernelInfo, ...] = tuple(info for _, info in loaded)
        self._consts = {
            b: allocator.upload(spec.const_data)
            for b, spec in enumerate(plan.buffers)
            if spec.role == "const"
        }
        # Host calls and guards on data, run between kernels; their results are uploaded per run.
        self._host = [HostRunner(step, plan.buffers) for step in plan.host_steps]
        self._host_written = {b for step in plan.host_steps for b in step.outputs if b is not None}
        self._launches = list(zip(plan.kernels, self._fns))
        self._flags = [b for b, spec in enumerate(plan.buffers) if spec.role == "flag"]
        self._lock = threading.Lock()
        self._calls = 0

    def __call__(self, *inputs: Any, out: tuple | None = None) -> tuple:
        bound, like = self.bind(inputs, out)
        return self.run_bound(bound, like, out)

    def bind(self, inputs: tuple, out: tuple | None = None) -> tuple[list, object]:
        """The call's inputs checked and in device memory (one per plan input; None: empty, never read),
        and the first device array among them (results are returned as its library's arrays)."""
        plan = self.plan
        if len(inputs) != len(plan.inputs):
            raise TypeError(f"expected {len(plan.inputs)} inputs, got {len(inputs)}")
        if out is not None and len(out) != len(plan.outputs):
            raise TypeError(f"out= needs {len(plan.outputs)} arrays, got {len(out)}")
        bound: list = []
        like = None
        for i, (value, b) in enumerate(zip(inputs, plan.inputs)):
            if b is None:
                bound.append(None)
                continue
            spec = plan.buffers[b]
            if is_device_array(value):
                if self._interpret:
                    raise TypeError(f"input {i}: device arrays cannot be used under TRITON_INTERPRET=1")
                shape = tuple(plan.input_types[i].shape)
                bound.append(import_array(value, plan.input_types[i].dtype, shape, f"input {i}"))
                like = like if like is not None else value
            else:
                bound.append(self.allocator.upload(self._host_input(i, value, spec.dtype)))
        return bound, like

    def run_bound(self, bound: list, like: object = None, out: tuple | None = None) -> tuple:
        """Run on inputs already bound (`bind`, or buffers an earlier stage left on the device)."""
        bufs = self.execute(bound)
        return tuple(
            self._result(j, o, bufs, like, None if out is None else out[j])
            for j, o in enumerate(self.plan.outputs)
        )

    def execute(self, bound: list) -> dict[int, DeviceBuffer]:
        """Every kernel and host step run; the buffers by plan id. ``bound[i]``: input ``i`` as a device
        buffer of its storage bytes, or a host value (uploaded here)."""
        plan = self.plan
        bufs: dict[int, DeviceBuffer] = dict(self._consts)
        for i, (value, b) in enumerate(zip(bound, plan.inputs)):
            if b is not None:
                bufs[b] = value if isinstance(value, DeviceBuffer) else self.allocator.upload(
                    self._host_input(i, value, plan.buffers[b].dtype))
        for b, spec in enumerate(plan.buffers):
            if spec.role in ("temp", "output") and b not in self._host_written:
                bufs[b] = self.allocator.empty(spec.nbytes)
            elif spec.role == "flag":  # cleared per call: the out-of-range flags of gathers and scatters
                bufs[b] = self.allocator.upload(spec.const_data)
        self._launch_all(bufs)
        self._check_flags(bufs)
        with self._lock:
            self._calls += 1
        return bufs

    def _check_flags(self, bufs: dict[int, DeviceBuffer]) -> None:
        """NumPy's IndexError for a gather that met an index out of range (its flag set by a kernel)."""
        for b in self._flags:
            seen = np.zeros(1, np.int32)
            self.allocator.download(bufs[b], seen)
            if seen[0]:
                raise IndexError(f"{self.plan.buffers[b].doc}: an index is out of bounds for the "
                                 "indexed axis")

    def _host_input(self, i: int, value: Any, storage: np.dtype) -> np.ndarray:
        """Input ``i`` as the C-ordered bytes the kernels read; its type must be the compiled one
        (a smaller array would make kernels read past its end)."""
        t = self.plan.input_types[i]
        if isinstance(t, TensorType):
            array = np.asarray(plain_array(value, f"input {i}"))
            if array.dtype != t.dtype or array.shape != tuple(t.shape):
                raise TypeError(
                    f"input {i}: got {array.dtype}{list(array.shape)}, but this executable was "
                    f"compiled for {t}"
                )
            return np.ascontiguousarray(array).view(storage)
        if not isinstance(value, (bool, int, float, np.generic)):
            raise TypeError(f"input {i}: expected a Python {t.kind}, got {type(value).__name__}")
        return np.asarray(value, storage)

    def _launch_all(self, bufs: dict[int, DeviceBuffer]) -> None:
        """The kernels in order, each host step after the kernels before it (outside the interpreter's
        lock and error state: a host function warns as it does eagerly)."""
        start = 0
        for host in self._host:
            self._launch_range(start, host.step.after, bufs)
            host(self.allocator, bufs)
            start = host.step.after
        self._launch_range(start, len(self._fns), bufs)

    def _launch_range(self, start: int, stop: int, bufs: dict[int, DeviceBuffer]) -> None:
        launch_kernels(self._launches[start:stop], self.allocator, bufs, self._interpret)

    def _result(self, j: int, spec: OutputSpec, bufs: dict[int, DeviceBuffer], like: object,
                dest: np.ndarray | None) -> Any:
        if spec.buffer is None:
            value = spec.folded
            if spec.dtype is None:  # a Python scalar
                return value
            result = np.array(value, dtype=spec.dtype)
            if dest is not None:
                np.copyto(dest, result)
                return dest
            return result
        buf = bufs[spec.buffer]
        if spec.dtype is None:
            raise AssertionError(f"output {j} is in a buffer but has no dtype")
        if like is not None and dest is None:
            return export_array(buf, spec.dtype, spec.shape, like)
        if dest is not None:
            if dest.dtype != spec.dtype or dest.shape != tuple(spec.shape):
                raise ValueError(
                    f"out[{j}] is {dest.dtype}{list(dest.shape)}, expected {spec.dtype}{list(spec.shape)}"
                )
            if dest.flags.c_contiguous:
                self.allocator.download(buf, dest)
                return dest
        host = np.empty(spec.shape, spec.dtype)
        self.allocator.download(buf, host)
        if dest is not None:
            np.copyto(dest, host)
            return dest
        return host

    def explain(self) -> str:
        """What one call does: the device buffers by role, then each kernel launched, in order, with its
        grid and its generated Triton source."""
        plan = self.plan
        sig = ", ".join(str(t) for t in plan.input_types)
        mode = "Triton interpreter (TRITON_INTERPRET=1)" if self._interpret else "GPU"
        lines = [f"triton executable for ({sig})",
                 f"  {len(self.kernels)} kernel launch{'' if len(self.kernels) == 1 else 'es'} per call "
                 f"on the {mode}, allocator {self.allocator.name}"]
        roles: dict[str, list[int]] = {}
        for spec in plan.buffers:
            entry = roles.setdefault(spec.role, [0, 0])
            entry[0] += 1
            entry[1] += spec.nbytes
        lines.append("  buffers: " + (", ".join(f"{count} {role} ({nbytes} bytes)"
                                                for role, (count, nbytes) in roles.items()) or "none"))
        ops = [h.step.node.op for h in self._host if h.step.node.op not in HOST_OPS]
        lines.append("  ops on the host: " + (", ".join(ops) if ops else
                                                 "none (every op runs in a kernel or was folded)"))
        folded = sum(o.buffer is None for o in plan.outputs)
        if folded:
            lines.append(f"  {folded} output(s) folded at compile time (no kernel)")
        host: dict[int, list[str]] = {}
        for h in self._host:
            host.setdefault(h.step.after, []).append(h.step.description)
        for k, info in enumerate(self.kernels, 1):
            lines.extend(f"  {line}" for line in host.pop(k - 1, ()))
            grid = "chosen at launch" if info.grid is None else str(tuple(info.grid))
            lines.append(f"  kernel {k}: {info.name}, grid {grid}  ({info.path})")
            lines.extend("      " + line if line.strip() else ""
                         for line in info.source.rstrip().splitlines())
        lines.extend(f"  {line}" for lines_after in host.values() for line in lines_after)
        return "\n".join(lines) + "\n"

    def stats(self) -> dict:
        roles: dict[str, int] = {}
        for spec in self.plan.buffers:
            roles[spec.role] = roles.get(spec.role, 0) + spec.nbytes
        return {
            "backend": "triton",
            "allocator": self.allocator.name,
            "interpreter": self._interpret,
            "kernels": len(self.plan.kernels),
            "kernel_names": [k.name for k in self.plan.kernels],
            "calls": self._calls,
            "launches": self._calls * len(self.plan.kernels),
            "bytes_by_role": roles,
            "fallbacks": 0,
            "host_calls": [h.step.node.attrs["func"] for h in self._host
                           if h.step.node.op == "prim.host_call"],
            "host_steps": [h.step.node.op for h in self._host if h.step.node.op not in HOST_OPS],
            "tuned": {k.name: _autotuned(fn) for k, fn in self._launches
                      if k.tuned and getattr(fn, "best_config", None) is not None},
        }


def _autotuned(fn: Any) -> dict:
    """What triton.autotune chose for a kernel at its first GPU launch, and the time (ms) of each
    config it tried (``BLOCK_M x BLOCK_N x BLOCK_K``-like sizes, warps, pipeline stages)."""

    def text(config: Any) -> str:
        sizes = "x".join(str(v) for v in config.kwargs.values())
        return f"{sizes} w{config.num_warps} s{config.num_stages}"

    timings = getattr(fn, "configs_timings", None) or {}
    return {"chosen": text(fn.best_config),
            "timings_ms": {text(c): float(np.min(t)) for c, t in timings.items()}}
