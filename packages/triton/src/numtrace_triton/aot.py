"""Ahead-of-time compile check: generated kernels built for an H100 (CUDA capability 90) without a GPU.

The interpreter accepts code the real compiler rejects (``tl.dot`` blocks
under 16, non-power-of-two ``arange``, type mismatches across loop
iterations); ``triton.compile`` with a ``GPUTarget`` runs the whole pipeline
(TTIR, TTGIR, LLIR, PTX, and cubin through the ``ptxas`` Triton ships)
without touching a device. It must run where ``TRITON_INTERPRET`` is unset
(interpreter mode replaces Triton's own language functions), so
:func:`compile_for_gpu` runs it in a child process:
``python -m numtrace_triton.aot spec.json`` prints one JSON result per kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .emit_body import COMPILE_OPTIONS, GeneratedKernel
from .kernel_cache import load_file, load_kernel

__all__ = ["compile_for_gpu", "compile_specs_for_gpu", "compiler_process", "kernel_spec"]


def compile_for_gpu(kernels: Sequence[GeneratedKernel], arch: int = 90, timeout: float = 600,
                    ptx: bool = False, sass: bool = False) -> list[dict]:
    """Compile each kernel for CUDA ``arch``; one ``{"name", "ok", "stages" | "error"}`` per kernel.
    ``ptx=True`` stops after PTX (no ``ptxas``) and adds each kernel's PTX text as ``"ptx"``;
    ``sass=True`` goes on to the cubin and adds its PTX and its machine code (``cuobjdump -sass``) as
    ``"sass"``: what runs, where ``ptxas`` has rewritten PTX instructions."""
    return compile_specs_for_gpu([kernel_spec(k) for k in kernels], arch, timeout, ptx, sass)


def compile_specs_for_gpu(specs: list[dict], arch: int = 90, timeout: float = 600, ptx: bool = False,
                          sass: bool = False) -> list[dict]:
    """`compile_for_gpu` of `kernel_spec` dicts (``num_stages`` optional: one autotune config each)."""
    stop_at_ptx = ptx and not sass
    flags = (["--ptx"] if stop_at_ptx else []) + (["--return-ptx"] if ptx or sass else []) \
        + (["--return-sass"] if sass else [])
    env = _compiler_env(cubin=not stop_at_ptx)
    proc = subprocess.run(
        [sys.executable, "-m", "numtrace_triton.aot", str(arch)] + flags,
        input=json.dumps(specs),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"AOT compile process failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def kernel_spec(k: GeneratedKernel) -> dict:
    """What the compiling child needs to know about kernel ``k`` (loaded to a file first)."""
    _, path = load_kernel(k.name, k.source) if k.path is None else (None, k.path)
    return {"name": k.name, "path": str(path), "signature": k.signature, "constexprs": k.constexprs,
            "num_warps": k.num_warps}


def compiler_process(arch: int = 90, cubin: bool = True,
                     stderr: Any = subprocess.DEVNULL) -> subprocess.Popen:
    """A child that compiles kernels as they come: one `kernel_spec` JSON per line on its stdin, one
    result JSON per line on its stdout (its stderr to ``stderr``: a file, never an unread pipe, which
    would stall it). ``cubin=False`` stops after PTX (skips ``ptxas``)."""
    env = _compiler_env(cubin)
    args = [sys.executable, "-m", "numtrace_triton.aot", str(arch), "--lines"] + ([] if cubin else ["--ptx"])
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            text=True, env=env, bufsize=1)


def _compiler_env(cubin: bool) -> dict[str, str]:
    """The compiling child's environment: the interpreter off, and a PTX-only build's own cache."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    if not cubin:  # its cache holds empty cubins: never Triton's own, which a GPU run loads from
        env["TRITON_CACHE_DIR"] = str(Path(env.get("TRITON_CACHE_DIR", Path.home() / ".triton" / "cache"))
                                      .with_name("numtrace-ptx-only"))
    return env


def _skip_ptxas() -> None:
    """Stop Triton's CUDA pipeline at PTX: the rejections this check exists for come before it."""
    from triton.backends.nvidia.compiler import CUDABackend

    add_stages = CUDABackend.add_stages

    def without_cubin(self, stages, options, *args, **kwargs):
        add_stages(self, stages, options, *args, **kwargs)
        stages["cubin"] = lambda src, metadata: b""

    CUDABackend.add_stages = without_cubin


def _compile_one(spec: dict, arch: int) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget

    module = load_file(f"aot_{spec['name']}", spec["path"])
    fn = getattr(module, spec["name"])
    if isinstance(fn, triton.runtime.Autotuner):
        fn = fn.fn  # the JITFunction it tunes
    src = triton.compiler.ASTSource(fn, signature=spec["signature"], constexprs=spec["constexprs"])
    try:
        compiled = triton.compile(
            src,
            target=GPUTarget("cuda", arch, 32),
            options={"num_warps": spec["num_warps"], "num_stages": spec.get("num_stages", 3),
                     **COMPILE_OPTIONS},
        )
    except Exception as exc:  # report every kernel's failure, not just the first
        return {"name": spec["name"], "ok": False, "error": f"{type(exc).__name__}: {exc}"[-3000:]}
    result = {"name": spec["name"], "ok": True, "stages": list(compiled.asm.keys())}
    if "--return-ptx" in sys.argv:
        result["ptx"] = compiled.asm["ptx"]
    if "--return-sass" in sys.argv:
        result["sass"] = compiled.asm["sass"]   # Triton runs the cuobjdump it ships
    return result


def _main() -> None:
    arch = int(sys.argv[1]) if len(sys.argv) > 1 else 90
    if "--ptx" in sys.argv:
        _skip_ptxas()
    if "--lines" in sys.argv:
        for line in sys.stdin:
            print(json.dumps(_compile_one(json.loads(line), arch)), flush=True)
        return
    specs = json.loads(sys.stdin.read())
    print(json.dumps([_compile_one(spec, arch) for spec in specs]))


if __name__ == "__main__":
    _main()
