"""Builds numtrace-ir: Cython extensions, version and pins from the repo's VERSION file."""
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
VERSION = (HERE.parent.parent / "VERSION").read_text().strip()
DIRECTIVES = {"language_level": 3, "boundscheck": False, "wraparound": False, "cdivision": True}

extensions = [
    Extension(f"numtrace_ir.{p.stem}", [str(p.relative_to(HERE))])
    for p in sorted((HERE / "src" / "numtrace_ir").glob("*.pyx"))
]

setup(
    version=VERSION,
    install_requires=["numpy>=1.26"],
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES),
    zip_safe=False,
)
