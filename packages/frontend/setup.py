"""Builds numtrace (pure Python): version and exact pins from the repo's VERSION file."""
from pathlib import Path

from setuptools import setup

VERSION = (Path(__file__).resolve().parent.parent.parent / "VERSION").read_text().strip()

setup(
    version=VERSION,
    install_requires=["numpy>=1.26", f"numtrace-ir=={VERSION}"],
    extras_require={"cpu": [f"numtrace-cpu=={VERSION}"], "triton": [f"numtrace-triton=={VERSION}"],
                    # numtrace.dask: traces mapped over chunked dask arrays, on local or distributed workers.
                    "dask": ["dask[array]", "distributed"]},
)
