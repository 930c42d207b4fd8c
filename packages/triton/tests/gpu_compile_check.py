"""Every kernel a test runs in the interpreter is also compiled for an H100 (CUDA capability 90), in the
form a GPU launch would write it (libdevice math, `Tuning.libdevice`), so a kernel that only the
interpreter accepts (a loop-carried type change, a ``tl.dot`` shape the GPU lacks) fails the suite.

The compiling happens beside the tests, in child processes fed as kernels appear (each distinct source
once), through Triton's pipeline up to PTX (``ptxas`` is left to ``test_aot_compile``, which goes to a
cubin); the session waits for them at its end and fails naming each rejected kernel and the tests that
ran it. Triton caches what it compiled, so a rerun compiles only new kernels.
``NUMTRACE_TRITON_GPU_COMPILE=0`` turns it off.
"""

from __future__ import annotations

import json
import os
import queue
import re
import tempfile
import threading

from numtrace_triton.aot import compiler_process, kernel_spec


def enabled() -> tuple[bool, str]:
    if os.environ.get("NUMTRACE_TRITON_GPU_COMPILE", "1") == "0":
        return False, "NUMTRACE_TRITON_GPU_COMPILE=0"
    try:
        import triton.backends.nvidia.compiler  # noqa: F401
    except ImportError as exc:  # a Triton without its CUDA backend cannot compile for a GPU
        return False, f"Triton has no CUDA backend here ({exc})"
    return True, ""


_PTX_ATOMIC = re.compile(r"\b(red|atom)((?:\.\w+)+)")
_SASS_ATOMIC = re.compile(r"\b((?:REDG?|ATOMG?)(?:\.\w+)+)")
_SASS_FLUSHING = re.compile(r"\b[A-Z][A-Z0-9]*(?:\.\w+)*\.FTZ\b(?:\.\w+)*")


def ptx_atomics(ptx: str) -> list[tuple[str, frozenset[str]]]:
    """Each ``red``/``atom`` instruction of ``ptx``: its opcode and its qualifiers as a set, since PTX
    spellings differ in their order (Triton writes ``atom.global.gpu.relaxed.add.f32``)."""
    return [(m[1], frozenset(m[2].lstrip(".").split("."))) for m in _PTX_ATOMIC.finditer(ptx)]


def sass_atomics(sass: str) -> set[str]:
    """The distinct atomic instructions of machine code ``sass`` with their qualifiers
    (``REDG.E.ADD.F32.FTZ.RN.STRONG.GPU``, ``ATOMG.E.CAS.STRONG.GPU``)."""
    return {m[1] for m in _SASS_ATOMIC.finditer(sass)}


def sass_flushing(sass: str) -> set[str]:
    """The distinct instructions of ``sass`` that flush subnormal operands and results to zero (``.FTZ``)."""
    return set(_SASS_FLUSHING.findall(sass))


def assert_relaxed_atomics(result: dict, *ops: str) -> set[str]:
    """`compile_for_gpu(..., sass=True)`'s ``result`` updates global memory only by relaxed, GPU-scoped
    atomics, among them one of each of ``ops`` (``"max.s32"``); returns its `sass_atomics`, what runs:
    ``ptxas`` rewrites some PTX atomics (an ``atom`` whose value is unused becomes a ``RED``)."""
    found = ptx_atomics(result["ptx"])
    assert found, result["ptx"][-2000:]
    for opcode, quals in found:
        assert {"global", "gpu", "relaxed"} <= quals, (opcode, sorted(quals))
        assert not quals & {"acquire", "release", "acq_rel", "sys", "cta"}, (opcode, sorted(quals))
    for op in ops:
        assert any(set(op.split(".")) <= quals for _, quals in found), (op, found)
    sass = sass_atomics(result["sass"])
    assert sass, result["sass"][-2000:]
    return sass


def assert_relaxed_reductions(result: dict, *ops: str) -> None:
    """`assert_relaxed_atomics`, and each atomic runs as a fire-and-forget reduction: SASS ``RED``, never
    an ``ATOM`` that waits for the old value. Triton 3.6 writes the PTX of an atomic whose value is
    unused as ``atom`` (Triton 3.9 as ``red``), and ``ptxas`` makes it a ``RED``, so the machine code is
    what is checked."""
    sass = assert_relaxed_atomics(result, *ops)
    assert {s.split(".")[0] for s in sass} <= {"RED", "REDG"}, sass


class GpuCompileCheck:
    """Sends each new kernel to a compiling child; `finish` returns the failures."""

    def __init__(self, workers: int) -> None:
        self._logs = [tempfile.TemporaryFile("w+") for _ in range(workers)]
        self._procs = [compiler_process(90, cubin=False, stderr=log) for log in self._logs]
        self._sent: list[list[str]] = [[] for _ in self._procs]  # per child: sources, in order
        self._results: list[list[dict]] = [[] for _ in self._procs]
        # Writes go through a queue: a test never waits for a child to take its kernels.
        self._queues: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in self._procs]
        self._readers = [threading.Thread(target=self._read, args=(i,), daemon=True)
                         for i in range(len(self._procs))]
        self._writers = [threading.Thread(target=self._write, args=(i,), daemon=True)
                         for i in range(len(self._procs))]
        for t in self._readers + self._writers:
            t.start()
        self._tests: dict[str, set[str]] = {}  # source -> the tests that ran it
        self.test = "(outside a test)"

    def _read(self, i: int) -> None:
        out = self._procs[i].stdout
        assert out is not None
        for line in out:
            self._results[i].append(json.loads(line))

    def _write(self, i: int) -> None:
        stdin = self._procs[i].stdin
        assert stdin is not None
        while (line := self._queues[i].get()) is not None:
            stdin.write(line)
            stdin.flush()
        stdin.close()

    def add(self, kernels) -> None:
        for k in kernels:
            tests = self._tests.get(k.source)
            if tests is not None:
                tests.add(self.test)
                continue
            self._tests[k.source] = {self.test}
            i = len(self._tests) % len(self._procs)
            self._queues[i].put(json.dumps(kernel_spec(k)) + "\n")
            self._sent[i].append(k.source)

    def finish(self) -> tuple[int, list[str]]:
        """(kernels compiled, one message per rejected kernel)."""
        failures = []
        for i, proc in enumerate(self._procs):
            self._queues[i].put(None)
            self._writers[i].join()
            self._readers[i].join()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
            self._logs[i].seek(0)
            err = self._logs[i].read()
            self._logs[i].close()
            if len(self._results[i]) != len(self._sent[i]):
                failures.append(f"the compiling child {i} stopped early ({proc.returncode}):\n{err[-3000:]}")
            for source, result in zip(self._sent[i], self._results[i]):
                if not result["ok"]:
                    tests = ", ".join(sorted(self._tests[source])[:5])
                    failures.append(f"{result['name']} (run by {tests}):\n{result['error']}")
        return len(self._tests), failures
