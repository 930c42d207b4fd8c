"""numtrace.dask.map_blocks on a two-process local cluster: equal to NumPy on the whole array."""

import hashlib
import io
import re
import subprocess
import sys
from pathlib import Path

import dask.array as da
import numpy as np
import numtrace as nt
import numtrace.dask as ntd
import pytest
from numtrace import nn

DOCS = Path(__file__).resolve().parents[3] / "docs" / "dask.md"


def scaled_tanh(x, y):
    return np.tanh(x) * y + 0.5 * np.exp(-x * x)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("chunks", [(40, 6), (7, 6), (13, 2), (100, 6), ((50, 30, 20), (1, 5))])
def test_elementwise_matches_numpy_for_each_chunking(client, rng, chunks):
    x, y = f32(rng, 100, 6), f32(rng, 100, 6)
    traced = nt.trace(scaled_tanh, (f32(rng, 4, 3), f32(rng, 4, 3)),
                      check_inputs=[(f32(rng, 9, 5), f32(rng, 9, 5))])
    result = ntd.map_blocks(traced, da.from_array(x, chunks=chunks), da.from_array(y, chunks=(25, 3)))
    assert result.chunks == da.from_array(x, chunks=chunks).chunks
    assert result.dtype == np.float32
    got = result.compute()
    assert got.shape == (100, 6)
    np.testing.assert_allclose(got, scaled_tanh(x, y), rtol=1e-5, atol=1e-6)


class Classifier(nt.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32, seed=0)
        self.norm = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 5, seed=1)

    def forward(self, x):
        h = np.maximum(self.norm(self.fc1(x)), 0)
        logits = self.fc2(h)
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def test_module_trace_row_chunks(client, rng):
    model = Classifier().eval()
    traced = nt.trace_module(model, {"forward": f32(rng, 8, 20)})
    x = f32(rng, 1000, 20)
    result = ntd.map_blocks(traced, da.from_array(x, chunks=(128, 20)))
    assert result.chunks == ((128,) * 7 + (104,), (5,))
    np.testing.assert_allclose(result.compute(), model(x), rtol=1e-4, atol=1e-6)


def test_loaded_trace_and_reference_backend(client, rng, tmp_path):
    traced = nt.trace(scaled_tanh, (f32(rng, 4, 3), f32(rng, 4, 3)))
    path = tmp_path / "f.nt"
    traced.save(path)
    loaded = nt.load(path)
    x, y = f32(rng, 60, 3), f32(rng, 60, 3)
    for backend in ("cpu", "reference"):
        result = ntd.map_blocks(loaded, da.from_array(x, chunks=(16, 3)), da.from_array(y, chunks=(16, 3)),
                                backend=backend)
        np.testing.assert_allclose(result.compute(), scaled_tanh(x, y), rtol=1e-5, atol=1e-6)


def test_numpy_argument_goes_whole_to_every_block(client, rng):
    def affine(x, w):
        return x @ w + 1.0

    w = f32(rng, 6, 4)
    traced = nt.trace(affine, (f32(rng, 5, 6), w))
    x = f32(rng, 90, 6)
    result = ntd.map_blocks(traced, da.from_array(x, chunks=(20, 6)), w)
    assert result.chunks == ((20, 20, 20, 20, 10), (4,))
    np.testing.assert_allclose(result.compute(), affine(x, w), rtol=1e-5, atol=1e-5)


def test_trace_travels_as_saved_bytes_and_loads_once_per_worker(client, rng):
    traced = nt.trace(scaled_tanh, (f32(rng, 4, 3), f32(rng, 4, 3)))
    x = da.from_array(f32(rng, 400, 3), chunks=(10, 3))
    result = ntd.map_blocks(traced, x, x)
    graph = dict(result.__dask_graph__())
    shipped = [key for key, task in graph.items() if str(key).startswith("numtrace-trace-")]
    assert len(shipped) == 1  # one key holds the saved file; the 40 block tasks depend on it
    data = result.__dask_graph__()[shipped[0]]
    data = getattr(data, "value", data)
    assert isinstance(data, bytes) and data[:2] == b"PK"  # the saved zip, not a pickle
    assert nt.load(io.BytesIO(data)).graph is not None
    result.compute()
    key = [hashlib.sha256(data).hexdigest(), "cpu"]
    loads = client.run(lambda: [list(k) for k in __import__("numtrace.dask", fromlist=["_"])._LOADED])
    assert sum(keys.count(key) for keys in loads.values()) >= 1
    assert all(keys.count(key) <= 1 for keys in loads.values())  # loaded once per worker process


@pytest.mark.parametrize("func, message", [
    (lambda x: x - x.mean(axis=0), "depends on more than one block's rows"),
    (lambda x: np.cumsum(x, axis=0), "depends on more than one block's rows"),
    (lambda x: x.sum(axis=0, keepdims=True), "gives 1 output"),
    (lambda x: x.sum(axis=1), "an array of 2 dimension"),
    (lambda x: x[x > 0], "sizes known from the block shapes"),
])
def test_not_blockwise_is_refused(rng, func, message):
    traced = nt.trace(func, f32(rng, 8, 3), check_trace=False)
    with pytest.raises(ValueError, match=re.escape(message)):
        ntd.map_blocks(traced, da.from_array(f32(rng, 50, 3), chunks=(10, 3)))


def test_unchunked_axis_may_mix(client, rng):
    """Normalizing over the columns is fine when the columns are one chunk."""
    def normalize(x):
        return (x - x.mean(axis=1, keepdims=True)) / (x.std(axis=1, keepdims=True) + 1e-3)

    x = f32(rng, 64, 10)
    traced = nt.trace(normalize, f32(rng, 4, 10))
    result = ntd.map_blocks(traced, da.from_array(x, chunks=(16, 10)))
    np.testing.assert_allclose(result.compute(), normalize(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="axis 1 is chunked"):
        ntd.map_blocks(traced, da.from_array(x, chunks=(16, 5)))


def test_blocks_that_break_a_guard_are_refused(rng):
    def branchy(x):
        return x * 2 if x.shape[0] > 4 else x - 1

    traced = nt.trace(branchy, f32(rng, 8, 3))
    assert traced.guards  # the branch on the row count is a guard of the trace
    with pytest.raises(ValueError, match=r"blocks of shape \(3, 3\) do not fit the trace"):
        ntd.map_blocks(traced, da.from_array(f32(rng, 30, 3), chunks=(10, 3)).rechunk((3, 3)))


def test_a_guard_on_the_chunked_extent_is_checked_against_the_whole_array(client, rng):
    def branchy(x):
        return x * 2 if x.shape[0] > 40 else x - 1

    traced = nt.trace(branchy, f32(rng, 8, 3))
    x = f32(rng, 100, 3)
    with pytest.raises(ValueError, match="does not hold for these input shapes"):
        ntd.map_blocks(traced, da.from_array(x, chunks=(20, 3)))
    whole = nt.trace(branchy, f32(rng, 50, 3))
    with pytest.raises(ValueError, match=r"blocks of shape \(20, 3\) do not fit the trace"):
        ntd.map_blocks(whole, da.from_array(x, chunks=(20, 3)))
    np.testing.assert_allclose(ntd.map_blocks(traced, da.from_array(x[:30], chunks=(10, 3))).compute(),
                               branchy(x[:30]))


@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("func", [lambda x: np.sort(x, axis=0), lambda x: -np.sort(-x, axis=0)],
                         ids=["ascending", "descending"])
def test_a_sort_along_chunks_of_one_or_two_rows_is_refused(rng, rows, func):
    traced = nt.trace(func, f32(rng, 8, 1), check_trace=False)
    for seed in range(4):
        x = np.random.default_rng(seed).standard_normal((10, 1)).astype(np.float32)
        with pytest.raises(ValueError, match="depends on more than one block's rows"):
            ntd.map_blocks(traced, da.from_array(x, chunks=(rows, 1)))


def test_unknown_chunk_sizes_are_refused(rng):
    x = da.from_array(f32(rng, 30, 3), chunks=(10, 3))
    traced = nt.trace(np.tanh, f32(rng, 8, 3))
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        ntd.map_blocks(traced, x[x[:, 0] > 0])


def test_bad_calls(rng):
    x = da.from_array(f32(rng, 20, 3), chunks=(5, 3))
    traced = nt.trace(scaled_tanh, (f32(rng, 4, 3), f32(rng, 4, 3)))
    with pytest.raises(TypeError, match="takes 2 array argument"):
        ntd.map_blocks(traced, x)
    with pytest.raises(TypeError, match="no dask array"):
        ntd.map_blocks(traced, f32(rng, 4, 3), f32(rng, 4, 3))
    with pytest.raises(ValueError, match="must have one shape"):
        ntd.map_blocks(traced, x, da.from_array(f32(rng, 21, 3), chunks=(5, 3)))
    with pytest.raises(TypeError, match="trace the function first"):
        ntd.map_blocks(scaled_tanh, x, x)

    def writes(a):
        a += 1
        return a * 2

    with pytest.raises(ValueError, match="writes into its arguments"):
        ntd.map_blocks(nt.trace(writes, f32(rng, 4, 3)), x)

    def pair(a):
        return a, a * 2

    with pytest.raises(ValueError, match="return one array"):
        ntd.map_blocks(nt.trace(pair, f32(rng, 4, 3)), x)
    with pytest.raises(TypeError, match="dtype int64"):
        ntd.map_blocks(nt.trace(np.tanh, f32(rng, 4, 3)), da.ones((20, 3), dtype=np.int64, chunks=5))


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_numtrace_does_not_import_dask():
    done = _run("import sys, numtrace, numtrace.dask; print(sorted(m for m in sys.modules if "
                "m.split('.')[0] in ('dask', 'distributed')))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_missing_dask_names_the_extra():
    done = _run("import sys; sys.modules['dask'] = None\n"
                "import numpy as np, numtrace as nt, numtrace.dask as ntd\n"
                "try:\n"
                "    ntd.map_blocks(nt.trace(np.tanh, np.ones(3)), None)\n"
                "except ImportError as e:\n"
                "    print(e)\n")
    assert done.returncode == 0, done.stderr
    assert "pip install numtrace[dask]" in done.stdout


def test_docs_example_runs(client):
    """docs/dask.md's example (fenced ``python {.no-run}``: the docs session has no Dask) runs here."""
    blocks = re.findall(r"^```python \{\.no-run\}\n(.*?)^```", DOCS.read_text(), re.S | re.M)
    assert blocks, f"no example in {DOCS}"
    namespace = {"__name__": "__main__"}
    exec(compile("\n".join(blocks), str(DOCS), "exec"), namespace)
    assert namespace["worst"] < 1e-4


def test_plain_dask_map_blocks_with_a_trace(client, rng):
    """What docs/dask.md says of dask.array.map_blocks: a trace pickles as its saved bytes and runs."""
    traced = nt.trace(np.tanh, f32(rng, 8, 3))
    x = f32(rng, 40, 3)
    result = da.map_blocks(traced, da.from_array(x, chunks=(10, 3)), dtype=np.float32)
    np.testing.assert_allclose(result.compute(), np.tanh(x), rtol=1e-6)
