"""Generated kernel source on disk, and the jitted kernels made from it, keyed by a hash of the source.

Triton reads a kernel's source with ``inspect`` (its JIT and its interpreter
both do), so each generated kernel is written to a real ``.py`` file and
imported from there. The file name holds a hash of the source: the same source
is written once, imported once per process (the in-memory table), and
Triton's own binary cache, keyed by the same source, skips recompiling it.

The directory is ``$NUMTRACE_TRITON_CACHE_DIR``, else ``~/.cache/numtrace/triton``;
:func:`set_cache_dir` changes it for the process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

import triton

__all__ = ["cache_dir", "load_kernel", "set_cache_dir", "source_hash"]

_lock = threading.Lock()
_loaded: dict[str, tuple[object, Path]] = {}
_dir: Path | None = None


def cache_dir() -> Path:
    """The directory generated kernels are written to."""
    if _dir is not None:
        return _dir
    env = os.environ.get("NUMTRACE_TRITON_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "numtrace" / "triton"


def set_cache_dir(path: str | os.PathLike[str] | None) -> None:
    """Write generated kernels under ``path`` from now on (None: back to the default)."""
    global _dir
    _dir = None if path is None else Path(path)


def source_hash(source: str) -> str:
    """The cache key of a kernel source (Triton's version is part of it: generated code targets one)."""
    return hashlib.sha256(f"{triton.__version__}\n{source}".encode()).hexdigest()[:24]


def load_file(module_name: str, path: str | os.PathLike[str], *, register: bool = False) -> ModuleType:
    """Run the Python file ``path`` as module ``module_name`` (kept in ``sys.modules`` if ``register``,
    unless running it fails)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    loader = None if spec is None else spec.loader
    if spec is None or loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[module_name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        if register:
            del sys.modules[module_name]
        raise
    return module


def load_kernel(name: str, source: str) -> tuple[object, Path]:
    """The jitted kernel ``name`` defined by ``source``, and the file it was loaded from."""
    if not name.isidentifier():
        raise ValueError(f"load_kernel: kernel name {name!r} is not a Python identifier")
    key = source_hash(source)
    module_name = f"numtrace_triton_kernels.{name}_{key}"
    with _lock:
        cached = _loaded.get(module_name)
        if cached is not None:
            return cached
        path = _write_once(cache_dir() / f"{name}_{key}.py", source)
        # Registered in sys.modules: inspect.getsource (Triton's JIT) looks modules up there.
        module = load_file(module_name, path, register=True)
        kernel = getattr(module, name, None)
        if kernel is None:
            raise RuntimeError(f"generated source in {path} does not define kernel {name!r}")
        _loaded[module_name] = (kernel, path)
        return kernel, path


def _write_once(path: Path, source: str) -> Path:
    """Write ``source`` to ``path`` atomically unless an identical file is already there."""
    try:
        if path.read_text() == source:
            return path
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
