"""Builds numtrace-cpu: its Cython runtime once, its OpenMP block loops once per ISA; version and pins
from VERSION."""
import os
import platform
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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
# -fno-trapping-math lets GCC if-convert float selects (the vector exp/tanh). The exception flags a
# call reads (nt_fpflags.h) may then be raised by a lane NumPy does not compute: that costs a rerun
# of the references (numtrace_ir.fp_errors), never a report NumPy does not make.
FLAGS = ["-O3", "-ffp-contract=fast", "-fno-math-errno", "-fno-trapping-math"]
SRC = HERE / "src" / "numtrace_cpu"

# The block loops (blocks.pxi, line_passes.pxi, gemv.pxi) are built once per ISA, as
# blocks_<build>.pyx; numtrace_cpu.isa imports only the widest one the CPU runs. The rest
# (runtime.pyx) is ISA-independent and built once.
# -mprefer-vector-width=512: GCC's x86-64-v4 default is 256-bit vectors, which would waste the build.
ARCH_FLAGS = {"baseline": [], "avx2": ["-march=x86-64-v3"],
              "avx512": ["-march=x86-64-v4", "-mprefer-vector-width=512"]}
X86 = platform.machine().lower() in ("x86_64", "amd64")
# Linked with the C math library, so that log, log2, exp, pow... bind to its current versions: unlinked,
# the extension's references carry no version and bind to glibc's oldest (its SVID compatibility
# wrappers), whose log(-1) is +NaN where the current one, and NumPy, give the default NaN (-NaN).
LIBM = ["m"] if os.name == "posix" and platform.system() != "Darwin" else []


def _extension(stem: str, flags: list[str], openmp: bool) -> Extension:
    omp = ["-fopenmp"] if openmp else []
    return Extension(f"numtrace_cpu.{stem}", [f"src/numtrace_cpu/{stem}.pyx"],
                     include_dirs=[numpy.get_include(), str(SRC)], extra_compile_args=FLAGS + omp + flags,
                     extra_link_args=omp, define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                     libraries=LIBM)


extensions = [_extension("runtime", [], openmp=False)] + [
    _extension(f"blocks_{build}", flags, openmp=True)
    for build, flags in ARCH_FLAGS.items() if X86 or not flags
]


class ParallelBuildExt(build_ext):
    """Compiles the extensions side by side (they are independent): the ISA builds dominate the time."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1


setup(
    version=VERSION,
    install_requires=["numpy>=1.26", f"numtrace-ir=={VERSION}"],
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, nthreads=os.cpu_count() or 1,
                          **({"build_dir": "build/boundscheck", "force": True} if CHECKED else {})),
    cmdclass={"build_ext": ParallelBuildExt},
    zip_safe=False,
)
