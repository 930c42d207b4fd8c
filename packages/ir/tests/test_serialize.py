"""`serialize.dumps`/`loads`: round trips, and a `FormatError` for every kind of malformed payload."""

import io
import json
import zipfile

import numpy as np
import pytest
from numtrace_ir import FormatError, Graph, TensorType, graphs_equal, serialize


def graph_with_constants(shared):
    g = Graph()
    x = g.add_input("x", TensorType("f32", ("B", 3)))
    c = g.create_node("prim.Constant", [], attrs={"value": shared}, out_types=[TensorType("f32", (3,))])
    d = g.create_node("prim.Constant", [], attrs={"value": (shared, np.array(2 + 1j, np.complex64))},
                      out_types=[TensorType("f32", (3,))], loc="m.py:2")
    a = g.create_node("np.add", [x, c.output], loc="m.py:3")
    g.set_outputs([a.output, d.output])
    return g


def payload():
    shared = np.array([1.5, -0.0, np.nan], np.float32)
    graphs = {"forward": graph_with_constants(shared), "encode/é": graph_with_constants(shared[::-1])}
    meta = {"version": "0.1", "inputs": [["x", "f32"]], "nested": {"a": None}}
    arrays = {"layers.0.weight": np.arange(6, dtype=np.float64).reshape(2, 3).T,
              "empty": np.zeros((0, 2), np.int8), "scalar": np.array(True),
              "big_endian": np.array([1, 2], ">i4")}
    return graphs, meta, arrays


def test_round_trip():
    graphs, meta, arrays = payload()
    data = serialize.dumps(graphs, meta, arrays)
    g2, m2, a2 = serialize.loads(data)
    assert list(g2) == list(graphs) and m2 == meta and list(a2) == list(arrays)
    for name in graphs:
        assert graphs_equal(g2[name], graphs[name])
        assert str(g2[name]) == str(graphs[name])
    for name, a in arrays.items():
        assert a2[name].dtype == a.dtype.newbyteorder("=") and a2[name].dtype.isnative
        assert a2[name].shape == a.shape and np.array_equal(a2[name], a)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        text = z.read(json.loads(z.read("manifest.json"))["graphs"]["forward"]).decode()
        assert "@'constants/0.npy'" in text and "1.5" not in text  # arrays are members, not inline
        # The shared constant is stored once per graph object identity.
        assert json.loads(z.read("manifest.json"))["constants"] == [f"constants/{i}.npy" for i in range(4)]


def test_defaults_and_empty():
    g2, m2, a2 = serialize.loads(serialize.dumps({}))
    assert (g2, m2, a2) == ({}, {}, {})


@pytest.mark.parametrize(("kwargs", "err", "match"), [
    ({"graphs": {"g": "graph(...)"}}, TypeError, "map str names to Graphs"),
    ({"meta": {"x": np.float32(1)}}, TypeError, "JSON-serializable"),
    ({"meta": {"x": float("nan")}}, TypeError, "JSON-serializable"),
    ({"arrays": {"w": [1, 2]}}, TypeError, "must be a numpy.ndarray"),
    ({"arrays": {"w": np.array(["a"])}}, TypeError, "not supported"),
    ({"arrays": {1: np.zeros(1)}}, TypeError, "names must be str"),
])
def test_dumps_rejects_bad_arguments(kwargs, err, match):
    args = {"graphs": {}, "meta": None, "arrays": None} | kwargs
    with pytest.raises(err, match=match):
        serialize.dumps(args["graphs"], args["meta"], args["arrays"])


def rebuild(data, *, drop=(), replace=None):
    """The payload with members dropped or replaced."""
    replace = replace or {}
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            if info.filename not in drop:
                zout.writestr(info.filename, replace.get(info.filename, zin.read(info.filename)))
        for name, content in replace.items():
            if name not in zin.namelist():
                zout.writestr(name, content)
    return out.getvalue()


def manifest_with(data, **changes):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        manifest = json.loads(z.read("manifest.json"))
    manifest.update(changes)
    return rebuild(data, replace={"manifest.json": json.dumps(manifest)})


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


def bad_npy(member, content):
    return rebuild(good(), replace={member: content})


def good():
    graphs, meta, arrays = payload()
    return serialize.dumps(graphs, meta, arrays)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: b"not a zip at all", "not a zip archive"),
    (lambda: good()[:200], "not a zip archive"),
    (lambda: rebuild(good(), drop=["manifest.json"]), "missing member 'manifest.json'"),
    (lambda: rebuild(good(), drop=["meta.json"]), "missing member 'meta.json'"),
    (lambda: rebuild(good(), drop=["graphs/0.ir"]), "missing member 'graphs/0.ir'"),
    (lambda: rebuild(good(), drop=["arrays/1.npy"]), "missing member 'arrays/1.npy'"),
    (lambda: rebuild(good(), drop=["constants/1.npy"]), "missing member 'constants/1.npy'"),
    (lambda: rebuild(good(), replace={"manifest.json": b"{not json"}), "'manifest.json' is not valid JSON"),
    (lambda: rebuild(good(), replace={"manifest.json": b"\xff\xfe"}), "'manifest.json' is not valid JSON"),
    (lambda: rebuild(good(), replace={"meta.json": b"[1, 2"}), "'meta.json' is not valid JSON"),
    (lambda: rebuild(good(), replace={"meta.json": b"[1, 2]"}), "meta.json must hold a JSON object"),
    (lambda: rebuild(good(), replace={"manifest.json": b"[]"}), "does not describe a numtrace-ir file"),
    (lambda: manifest_with(good(), format="zip"), "does not describe a numtrace-ir file"),
    (lambda: manifest_with(good(), version=2),
     "unsupported format version 2; this numtrace-ir reads version 1"),
    (lambda: manifest_with(good(), version=None), "unsupported format version None"),
    (lambda: manifest_with(good(), graphs=["graphs/0.ir"]), "'graphs' must map names to member paths"),
    (lambda: manifest_with(good(), arrays={"w": 3}), "'arrays' must map names to member paths"),
    (lambda: manifest_with(good(), constants="constants/0.npy"), "'constants' must be a list"),
    (lambda: manifest_with(good(), constants=[7]), "not a string"),
    (lambda: bad_npy("arrays/0.npy", b"\x93NUMPY garbage"), "'arrays/0.npy' is not a valid .npy"),
    (lambda: bad_npy("arrays/0.npy", npy(np.zeros(3))[:-8]), "'arrays/0.npy' is not a valid .npy"),
    (lambda: rebuild(good(), replace={"arrays/0.npy": npy(np.array([{"a": 1}], dtype=object))}),
     "'arrays/0.npy' is not a valid .npy array: .*pickle"),
    (lambda: rebuild(good(), replace={"constants/0.npy": npy(np.array(["text"]))}), "not supported by the"),
    (lambda: rebuild(good(), replace={"arrays/0.npy": npy(np.zeros(2, [("a", "f4")]))}), "not supported"),
    (lambda: rebuild(good(), replace={"graphs/0.ir": b"graph(%x : f32[3]):\n  retrn (%x)\n"}),
     "graph 'forward' \\(graphs/0.ir\\) does not parse: line 2, column 3"),
    (lambda: rebuild(good(), replace={"graphs/1.ir": b"\xff\xff"}), "graph 'encode/é' .* is not UTF-8"),
    (lambda: rebuild(good(), replace={"constants/0.npy": npy(np.zeros(4, np.float32))}),
     "stored array 'constants/0.npy' is float32\\[4\\], but the text says f32\\[3\\]"),
])
def test_malformed_payloads_raise_format_error(make, match):
    with pytest.raises(FormatError, match=match):
        serialize.loads(make())


def test_corrupt_member_data():
    data = bytearray(good())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo("arrays/0.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 100] ^= 0xFF  # flips a byte of the stored data: the CRC check fails
    with pytest.raises(FormatError, match="'arrays/0.npy' is corrupt"):
        serialize.loads(bytes(data))


def test_loads_rejects_non_bytes():
    with pytest.raises(TypeError, match="expects bytes"):
        serialize.loads("text")


def deflated(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, content in members.items():
            z.writestr(name, content)
    return buf.getvalue()


def test_zip_bombs_are_refused_before_decompressing(monkeypatch):
    bomb = deflated({"manifest.json": b" " * (1 << 24)})  # 16 MiB in about 16 KiB
    assert len(bomb) < 1 << 15
    with pytest.raises(FormatError, match="decompress to 16777216 bytes, more than max_bytes=1048576"):
        serialize.loads(bomb, max_bytes=1 << 20)
    monkeypatch.setattr(serialize, "MAX_MEMBERS", 8)
    with pytest.raises(FormatError, match="has 9 members; at most 8 are allowed"):
        serialize.loads(deflated({f"m{i}": b"" for i in range(9)}))
    monkeypatch.undo()
    with pytest.raises(TypeError, match="max_bytes must be an int >= 0"):
        serialize.loads(good(), max_bytes=-1)
    # A real payload passes a bound just above its size and fails one just below.
    data = good()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        size = sum(info.file_size for info in z.infolist())
    serialize.loads(data, max_bytes=size)
    with pytest.raises(FormatError, match="more than max_bytes"):
        serialize.loads(data, max_bytes=size - 1)


def test_a_member_larger_than_its_declared_size_is_corrupt():
    # The directory claims 2 bytes; zipfile stops there, so memory stays bounded and the CRC fails.
    data = bytearray(deflated({"manifest.json": b"{" + b" " * 100000 + b"}"}))
    central = data.rfind(b"PK\x01\x02")
    data[central + 24:central + 28] = (2).to_bytes(4, "little")
    with pytest.raises(FormatError, match="'manifest.json' is corrupt"):
        serialize.loads(bytes(data))


def test_duplicate_member_names_are_refused():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z, pytest.warns(UserWarning, match="Duplicate name"):
        z.writestr("manifest.json", b"{}")
        z.writestr("manifest.json", b"{}")
    with pytest.raises(FormatError, match="names a member twice"):
        serialize.loads(buf.getvalue())


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9, 0.99])
def test_truncated_payloads_raise_format_error(cut):
    data = good()
    with pytest.raises(FormatError):
        serialize.loads(data[:int(len(data) * cut)])


@pytest.mark.parametrize("seed", range(3))
def test_random_byte_flips_raise_format_error_or_load(seed):
    # Flips in zip headers hit zipfile's less common errors (NotImplementedError for a "version"...).
    data = good()
    rng = np.random.default_rng(seed)
    for _ in range(400):
        flipped = bytearray(data)
        for at in rng.integers(0, len(data), rng.integers(1, 4)):
            flipped[at] = rng.integers(0, 256)
        try:
            graphs, meta, arrays = serialize.loads(bytes(flipped))
        except FormatError:
            continue
        # A flip the checks let through (in compressed padding, a name...) still reads as a file's parts.
        assert all(isinstance(g, Graph) for g in graphs.values()) and isinstance(meta, dict)
        assert all(isinstance(a, np.ndarray) for a in arrays.values())
