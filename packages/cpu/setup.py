"""Builds numtrace-cpu: OpenMP-enabled Cython kernels, version and pins from VERSION."""
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
VERSION = (HERE.parent.parent / "VERSION").read_text().strip()
DIRECTIVES = {"language_level": 3, "boundscheck": False, "wraparound": False, "cdivision": True,
              "initializedcheck": False}
FLAGS = ["-O3", "-fopenmp", "-ffp-contract=fast", "-fno-math-errno"]

extensions = [
    Extension(f"numtrace_cpu.{p.stem}", [str(p.relative_to(HERE))],
              include_dirs=[numpy.get_include()], extra_compile_args=FLAGS, extra_link_args=["-fopenmp"],
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
    for p in sorted((HERE / "src" / "numtrace_cpu").glob("*.pyx"))
]

setup(
    version=VERSION,
    install_requires=["numpy>=1.26", f"numtrace-ir=={VERSION}"],
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES),
    zip_safe=False,
)
