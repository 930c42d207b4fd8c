"""Saving and loading traces, and the ``numtrace`` command line."""

import copy
import io
import pickle
import zipfile

import numpy as np
import numtrace as nt
import pytest
from numtrace import nn
from numtrace.cli import main
from numtrace_ir import FormatError


def _model():
    return nn.Sequential(nn.Linear(4, 8, seed=0), nn.ReLU(), nn.Linear(8, 2, seed=1))


def test_function_round_trip_with_containers(tmp_path, backend, rng):
    def f(x, d):
        return (x * d["scale"] + 1.0, d["bias"] - x)

    x = rng.standard_normal(3).astype(np.float32)
    d = {"scale": rng.standard_normal(3).astype(np.float32),
         "bias": rng.standard_normal(3).astype(np.float32)}
    traced = nt.trace(f, (x, d), backend="reference")
    path = tmp_path / "f.nt"
    traced.save(path)
    loaded = nt.load(path, backend=backend)
    assert loaded.backend == backend
    for got, want in zip(loaded(x, d), f(x, d)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert str(loaded.graph) == str(traced.graph)


def test_module_round_trip_keeps_state_and_tree(tmp_path, rng):
    model = _model()
    x = rng.standard_normal((3, 4)).astype(np.float32)
    traced = nt.trace(model, x, backend="reference")
    path = tmp_path / "m.nt"
    traced.save(path)
    loaded = nt.load(path)
    assert isinstance(loaded, nt.TracedModule)
    np.testing.assert_allclose(loaded(x), model(x), rtol=1e-6)
    assert list(loaded.state_dict()) == list(model.state_dict())
    assert loaded.training is True
    np.testing.assert_array_equal(getattr(loaded, "0").weight, model[0].weight)
    new = {k: np.zeros_like(v) for k, v in loaded.state_dict().items()}
    loaded.load_state_dict(new)
    np.testing.assert_array_equal(loaded(x), np.zeros((3, 2), np.float32))
    np.testing.assert_allclose(traced(x), model(x), rtol=1e-6)  # the loaded copy is independent


def test_a_method_of_a_traced_module_saves_with_its_state(tmp_path, backend, rng):
    """``traced.forward.save`` alone: the state it reads goes into the file, so it loads on its own."""
    model = _model()
    x = rng.standard_normal((3, 4)).astype(np.float32)
    traced = nt.trace(model, x, backend="reference")
    path = tmp_path / "forward.nt"
    traced.forward.save(path)
    loaded = nt.load(path, backend=backend)
    np.testing.assert_allclose(loaded(x), model(x), rtol=1e-5, atol=1e-6)


def test_pickle_deepcopy_and_file_objects(backend, rng):
    """Pickling (multiprocessing, deepcopy) and ``save``/``load`` on file objects use the saved form."""
    model = _model()
    x = rng.standard_normal((3, 4)).astype(np.float32)
    traced = nt.trace(model, x, backend=backend)
    traced(x)  # compiled executables and the lock are not part of the pickle
    function = nt.trace(lambda x: x * 2.0, (x,), backend=backend)
    np.testing.assert_allclose(pickle.loads(pickle.dumps(function))(x), x * 2.0)
    np.testing.assert_allclose(copy.deepcopy(function)(x), x * 2.0)
    copied = pickle.loads(pickle.dumps(traced))
    np.testing.assert_allclose(copied(x), model(x), rtol=1e-6)
    copied.load_state_dict({k: np.zeros_like(v) for k, v in copied.state_dict().items()})
    np.testing.assert_array_equal(copied(x), np.zeros((3, 2), np.float32))  # state still shared inside
    buffer = io.BytesIO()
    traced.save(buffer)
    buffer.seek(0)
    np.testing.assert_allclose(nt.load(buffer)(x), model(x), rtol=1e-6)


def test_traces_serialize_themselves(tmp_path, rng):
    """``to_bytes`` is what ``save`` writes and ``from_bytes`` what ``load`` reads; each class takes only
    its own kind of saved trace."""
    model = _model()
    x = rng.standard_normal((3, 4)).astype(np.float32)
    traced = nt.trace(model, x, backend="reference")
    function = nt.trace(lambda x: x * 2.0, (x,), backend="reference")
    for obj, cls in ((traced, nt.TracedModule), (function, nt.TracedFunction)):
        path = tmp_path / "saved.nt"
        obj.save(path)
        assert path.read_bytes() == obj.to_bytes()
        loaded = cls.from_bytes(obj.to_bytes())
        assert type(loaded) is cls and loaded.backend == "reference"
        np.testing.assert_allclose(loaded(x), obj(x), rtol=1e-6)
    with pytest.raises(FormatError, match="holds a traced function, not a module"):
        nt.TracedModule.from_bytes(function.to_bytes())
    with pytest.raises(FormatError, match="holds a traced module, not a function"):
        nt.TracedFunction.from_bytes(traced.to_bytes(), where="'m.nt'")
    with pytest.raises(FormatError, match="not a zip"):
        nt.TracedFunction.from_bytes(b"junk")


def _edit_meta(source, dest, old: bytes, new: bytes):
    """A copy of the saved trace ``source`` whose meta.json has ``old`` replaced by ``new``."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(dest, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            dst.writestr(item, data.replace(old, new) if item.filename == "meta.json" else data)
    return dest


def test_corrupt_files_are_clear_errors(tmp_path, rng):
    bad = tmp_path / "bad.nt"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(FormatError, match="not a zip"):
        nt.load(bad)
    traced = nt.trace(lambda x: x + 1.0, (rng.standard_normal(2),), backend="reference")
    good = tmp_path / "good.nt"
    traced.save(good)
    with pytest.raises(FormatError, match="malformed"):
        nt.load(_edit_meta(good, tmp_path / "edited.nt", b'"in_spec"', b'"in_spek"'))
    with pytest.raises(FormatError, match="do not match"):
        nt.load(_edit_meta(good, tmp_path / "leaves.nt", b'"index": 0', b'"index": 5'))
    with pytest.raises(ValueError, match="backend 'nope' cannot be used"):
        nt.load(good, backend="nope")


def test_cli_show_prints_the_graphs(tmp_path, capsys, rng):
    traced = nt.trace(_model(), rng.standard_normal((2, 4)).astype(np.float32), backend="reference")
    path = tmp_path / "model.nt"
    traced.save(path)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "saved module 'Sequential'" in out
    assert "# method forward" in out
    assert "np.matmul" in out and "graph(%x" in out


def test_cli_errors_and_backends(tmp_path, capsys):
    assert main(["show", str(tmp_path / "missing.nt")]) == 1
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "junk.nt").write_bytes(b"junk")
    assert main(["show", str(tmp_path / "junk.nt")]) == 1
    assert "not a valid saved trace" in capsys.readouterr().err
    assert main(["backends"]) == 0
    assert "reference: available" in capsys.readouterr().out


def test_tied_state_stays_tied_after_loading(tmp_path, rng):
    class Tied(nt.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3, bias=False, seed=0)
            self.b = nn.Linear(3, 3, bias=False, seed=1)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    x = rng.standard_normal((2, 3)).astype(np.float32)
    path = tmp_path / "tied.nt"
    nt.trace(Tied(), x, backend="reference").save(path)
    loaded = nt.load(path)
    state = loaded.state_dict()
    assert state["a.weight"] is state["b.weight"]
    w = rng.standard_normal((3, 3)).astype(np.float32)
    loaded.load_state_dict({"a.weight": w, "b.weight": w})
    np.testing.assert_allclose(loaded(x), x @ w.T @ w.T, rtol=1e-5)
