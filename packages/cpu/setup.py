"""Builds numtrace-cpu: OpenMP-enabled Cython kernels, version and pins from VERSION."""
import os
import platform
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
VERSION = (HERE.parent.parent / "VERSION").read_text().strip()
DIRECTIVES = {"language_level": 3, "boundscheck": False, "wraparound": False, "cdivision": True,
              "initializedcheck": False}
# NUMTRACE_CPU_BOUNDSCHECK=1 (the nox `boundscheck` session): every memoryview access checked, so an
# out-of-bounds index in a kernel is an IndexError instead of memory corruption.
# Its C files go to their own folder, so a checked build never leaves its C beside the sources for
# the next ordinary build to reuse.
CHECKED = os.environ.get("NUMTRACE_CPU_BOUNDSCHECK") == "1"
if CHECKED:
    DIRECTIVES.update(boundscheck=True, wraparound=True, initializedcheck=True)
# -fno-trapping-math lets GCC if-convert float selects (the vector exp/tanh); nothing here reads
# floating-point exception flags.
FLAGS = ["-O3", "-fopenmp", "-ffp-contract=fast", "-fno-math-errno", "-fno-trapping-math"]

# A module whose name ends in `_avx2` is the same source built for x86-64-v3; numtrace_cpu.kernels
# imports it only on CPUs that have AVX2 and FMA, so the package still runs on any x86-64.
ARCH_FLAGS = {"_avx2": ["-march=x86-64-v3"]}
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _arch_flags(stem: str) -> list[str]:
    return next((flags for suffix, flags in ARCH_FLAGS.items() if stem.endswith(suffix)), [])


def _buildable(stem: str) -> bool:
    return X86 or not _arch_flags(stem)


extensions = [
    Extension(f"numtrace_cpu.{p.stem}", [str(p.relative_to(HERE))],
              include_dirs=[numpy.get_include()], extra_compile_args=FLAGS + _arch_flags(p.stem),
              extra_link_args=["-fopenmp"],
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
    for p in sorted((HERE / "src" / "numtrace_cpu").glob("*.pyx")) if _buildable(p.stem)
]

setup(
    version=VERSION,
    install_requires=["numpy>=1.26", f"numtrace-ir=={VERSION}"],
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES,
                          **({"build_dir": "build/boundscheck", "force": True} if CHECKED else {})),
    zip_safe=False,
)
