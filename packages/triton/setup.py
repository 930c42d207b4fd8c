"""Builds numtrace-triton (pure Python): version and exact pins from the repo's VERSION file."""

from pathlib import Path

from setuptools import setup

VERSION = (Path(__file__).resolve().parent.parent.parent / "VERSION").read_text().strip()

setup(
    version=VERSION,
    install_requires=["numpy>=1.26", "triton>=3.6", f"numtrace-ir=={VERSION}"],
    extras_require={"cupy": ["cupy-cuda12x"], "cuda-python": ["cuda-python>=12"]},
)
