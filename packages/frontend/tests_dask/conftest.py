"""One local Dask cluster of two worker processes for the whole run: every test computes on it.

Needs numtrace's dask extra (the ``dask`` nox session installs it); without it the run fails on import.
"""

import numpy as np
import pytest
from dask.distributed import Client, LocalCluster


@pytest.fixture(scope="session")
def client():
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        yield client


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
