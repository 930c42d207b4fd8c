"""Generated kernels built and loaded: the system C compiler, a disk cache shared by processes, and a
background worker, so that the interpreter runs a pass until its kernel is ready.

Each eligible fused pass (see numtrace_cpu.codegen) becomes a `Job` when its executable is built.
The mode (``NUMTRACE_CODEGEN``, or `set_mode`) decides what happens then:

- ``background`` (the default, also ``1``): one worker thread compiles the jobs in order; a pass runs
  on the interpreter until its kernel is loaded, then on the kernel;
- ``sync``: the job compiles before the executable is returned (tests use it, so generated kernels
  run deterministically);
- ``off`` (also ``0``): no generation; every pass is interpreted.

The compiler is the one that built the Cython extensions (sysconfig's CC), with the ISA build's
``-march`` and contraction off. Shared objects are cached under ``$NUMTRACE_CACHE_DIR`` (default
``$XDG_CACHE_HOME/numtrace`` or ``~/.cache/numtrace``) in ``cpu-kernels/``, named by a hash of the
source, the headers it includes, the compiler's command and version: a second process loads them
without compiling. A file is written under a unique temporary name and renamed into place, so
concurrent writers never expose a partial object. Where no compiler runs, one line says so on
stderr, once, and the passes stay interpreted. Kernels are never saved with a trace: a loaded
trace builds its executables, and so its kernels, again.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import queue
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numtrace_cpu import codegen
from numtrace_cpu.isa import BUILD, BUILDS
from numtrace_cpu.runtime import FusedKernel

__all__ = ["Job", "cache_dir", "flush", "mode", "request", "set_mode"]

MODES = ("off", "background", "sync")
_ALIASES = {"0": "off", "1": "background", "": "background"}
HEADERS = ("nt_opcodes.h", "nt_gen.h")
_HERE = Path(__file__).resolve().parent


def _env_mode() -> str:
    value = os.environ.get("NUMTRACE_CODEGEN", "").strip().lower()
    value = _ALIASES.get(value, value)
    if value not in MODES:
        raise ValueError(f"NUMTRACE_CODEGEN={value!r}: expected one of 0, 1, {', '.join(MODES)}")
    return value


_mode = _env_mode()


def mode() -> str:
    """The current generation mode (see the module doc)."""
    return _mode


def set_mode(new: str) -> str:
    """Set the generation mode for executables built from now on; returns the previous one."""
    global _mode
    if new not in MODES:
        raise ValueError(f"codegen mode must be one of {', '.join(MODES)}, got {new!r}")
    old, _mode = _mode, new
    return old


def cache_dir() -> Path:
    """Where compiled kernels are cached."""
    root = os.environ.get("NUMTRACE_CACHE_DIR")
    if root:
        return Path(root) / "cpu-kernels"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "numtrace" / "cpu-kernels"


@dataclass(eq=False)
class Job:
    """One pass's generated kernel: its source, where its shared object is, and its state
    ("compiling", "ready", "off", or why the pass stays interpreted)."""
    kernel: FusedKernel = field(repr=False)
    source: str | None
    state: str
    entry: str = codegen.ENTRY
    path: Path | None = None


@dataclass(eq=False)
class _Batch:
    """Jobs compiled into one shared object (one compiler run for all passes of an executable)."""
    jobs: list[Job]
    done: threading.Event = field(default_factory=threading.Event, repr=False)


def request(kernels: list[FusedKernel], how: str | None = None) -> list[Job]:
    """Start generating the kernels' code as the mode (or `how`, a mode) says; each kernel switches
    to its code once it is loaded."""
    how = how or _mode
    if how not in MODES:
        raise ValueError(f"codegen mode must be one of {', '.join(MODES)}, got {how!r}")
    jobs = []
    for kernel in kernels:
        source = codegen.generate(kernel.program) if how != "off" else None
        if source is None:
            state = "off" if how == "off" else "interpreted: program not generated"
            jobs.append(Job(kernel, None, state))
            continue
        entry = f"nt_kernel_{hashlib.sha256(source.encode()).hexdigest()[:20]}"
        jobs.append(Job(kernel, codegen.generate(kernel.program, entry), "compiling", entry))
    batch = _Batch([job for job in jobs if job.state == "compiling"])
    if not batch.jobs:
        batch.done.set()
    elif how == "sync":
        _build(batch, strict=True)
    else:
        _queue().put(batch)
    return jobs


def flush(timeout: float | None = None) -> bool:
    """Wait until every background job queued so far is finished; False if `timeout` ran out."""
    q = _jobs
    if q is None:
        return True
    marker = _Batch([])
    q.put(marker)
    return marker.done.wait(timeout)


# -- the compiler ------------------------------------------------------------------------------------
_lock = threading.Lock()   # the loaded-library table and the notes
_loaded: dict[str, tuple[Any, int, Path]] = {}   # entry -> (library, address, its file)
_noted: set[str] = set()
_toolchain: tuple[list[str], str] | None = None


def _note(kind: str, message: str) -> None:
    with _lock:
        if kind in _noted:
            return
        _noted.add(kind)
    print(f"numtrace: {message}", file=sys.stderr)


def _arch_flags() -> list[str]:
    isa = BUILDS[BUILD][0]
    if BUILD == "baseline":
        return []
    return [f"-march={isa}"] + (["-mprefer-vector-width=512"] if BUILD == "avx512" else [])


def _command() -> list[str] | None:
    """The compiler and flags, or None (with a note) where no compiler runs."""
    global _toolchain
    if _toolchain is None:
        cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
        found = shutil.which(cc[0]) if cc else None
        version = ""
        if found:
            try:
                version = subprocess.run(cc + ["--version"], capture_output=True, text=True, timeout=60,
                                         check=True).stdout.split("\n", 1)[0]
            except (OSError, subprocess.SubprocessError):
                found = None
        if not found:
            _note("no-compiler", f"no C compiler runs here ({' '.join(cc)}): fused passes stay on "
                                 "the interpreter (NUMTRACE_CODEGEN=0 turns generation off)")
            _toolchain = ([], "")
        else:
            # -fno-builtin-hypot: GCC folds hypot(-x, y) into hypot(x, y), and so returns a NaN x
            # with its sign flipped where the interpreter's loop (and NumPy) return -x's.
            flags = ["-O3", "-std=gnu11", "-fPIC", "-shared", "-fwrapv", "-ffp-contract=off",
                     "-fno-math-errno", "-fno-trapping-math", "-fno-builtin-hypot", *_arch_flags(),
                     f"-I{_HERE}"]
            _toolchain = (cc + flags, version)
    return _toolchain[0] or None


def _key(source: str, command: list[str]) -> str:
    h = hashlib.sha256(source.encode())
    for name in HEADERS:
        h.update((_HERE / name).read_bytes())
    h.update("\0".join(command).encode())
    h.update((_toolchain[1] if _toolchain else "").encode())
    return h.hexdigest()[:32]


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _intact(so: Path) -> bool:
    """Whether the cached shared object is the one its compile wrote: a truncated or corrupted file
    must never reach dlopen (a short ELF file kills the process with SIGBUS)."""
    try:
        return so.with_suffix(".sha256").read_text().strip() == _digest(so)
    except OSError:
        return False


def _compile(source: str, command: list[str], so: Path) -> None:
    src = so.with_suffix(".c")
    _atomic_write(src, lambda tmp: Path(tmp).write_text(source))
    digest = ""

    def run(tmp: str) -> None:
        nonlocal digest
        done = subprocess.run(command + ["-o", tmp, str(src), "-lm"], capture_output=True, text=True,
                              timeout=300)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed on {src}:\n{done.stderr.strip()}")
        digest = _digest(Path(tmp))
    _atomic_write(so, run)
    _atomic_write(so.with_suffix(".sha256"), lambda tmp: Path(tmp).write_text(digest))


def _build(batch: _Batch, strict: bool) -> None:
    """Compile (or find in the cache) and load the batch's kernels, then hand each to its FusedKernel."""
    jobs = batch.jobs
    try:
        command = _command()
        if command is None:
            for job in jobs:
                job.state = "interpreted: no C compiler"
            return
        with _lock:
            todo = {job.entry: job.source for job in jobs if job.source and job.entry not in _loaded}
        if todo:
            source = "".join(todo[e] for e in sorted(todo))
            path = cache_dir() / f"{_key(source, command)}.so"
            if not _intact(path):
                path.parent.mkdir(parents=True, exist_ok=True)
                _compile(source, command, path)
            lib = ctypes.CDLL(str(path))
            with _lock:
                for e in todo:
                    _loaded[e] = (lib, ctypes.cast(getattr(lib, e), ctypes.c_void_p).value or 0, path)
        for job in jobs:
            lib, address, job.path = _loaded[job.entry]
            program = job.kernel.program
            job.kernel.set_generated(address, lib, folds=codegen.folds_in_registers(program),
                                     rows=codegen.has_rows_path(program),
                                     row_tiles=codegen.has_row_tiles(program),
                                     row_scalars=codegen.row_scalar_operands(program),
                                     short_from=codegen.short_tiles_from(job.source or ""))
            job.state = "ready"
    except Exception as e:
        for job in jobs:
            if job.state != "ready":
                job.state = f"interpreted: kernel build failed ({type(e).__name__})"
        if strict:
            raise
        _note("failed", f"building a generated kernel failed, passes stay interpreted: {e}")
    finally:
        batch.done.set()


_jobs: queue.Queue | None = None


def _queue() -> queue.Queue:
    global _jobs
    with _lock:
        if _jobs is None:
            _jobs = queue.Queue()
            threading.Thread(target=_work, args=(_jobs,), name="numtrace-codegen", daemon=True).start()
    return _jobs


def _forget_worker() -> None:
    global _jobs
    _jobs = None   # a forked child has no worker thread: the next job starts one


os.register_at_fork(after_in_child=_forget_worker)


def _work(batches: queue.Queue) -> None:
    while True:
        _build(batches.get(), strict=False)
