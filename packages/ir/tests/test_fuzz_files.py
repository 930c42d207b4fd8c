"""Hypothesis fuzzing of everything that reads bytes from outside: the text-IR parser, `Graph.lint`
and `serialize.loads`. Every input either loads (and lints, or raises `LintError`) or raises a clear
exception (`ParseError`, `FormatError`, `ValueError`, `TypeError`, ...): never a crash, never a hang,
never an allocation sized by a number in the file.

``NUMTRACE_FUZZ_FILE_EXAMPLES`` sets the examples per test (CI default: 40; the nox ``stress``
session runs >= 100k cases in all).
"""

from __future__ import annotations

import io
import json
import os
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from numtrace_ir import FormatError, Graph, LintError, ParseError, TensorType, parse, serialize

EXAMPLES = int(os.environ.get("NUMTRACE_FUZZ_FILE_EXAMPLES", "40"))
CLEAR = (ParseError, FormatError, LintError, ValueError, TypeError, KeyError, IndexError, OverflowError)
UNCLEAR = (SystemError, AssertionError, NameError, RecursionError, MemoryError)
SLOW_S = 5.0            # one input taking longer than this is a hang
PEAK_BYTES = 64 << 20   # nor may one input make the reader allocate more than this

SEED = os.environ.get("NUMTRACE_FUZZ_FILE_SEED")   # the stress session's batches differ by seed
_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=SEED is None,
                     suppress_health_check=list(HealthCheck))


def FUZZ(test):
    return seed(int(SEED or 0))(_SETTINGS(test))


def sample_graph() -> Graph:
    g = Graph()
    x = g.add_input("x", TensorType("f32", ("B", 3)))
    w = g.add_input("w", TensorType("f32", (3,)))
    n1 = g.create_node("np.multiply", [x, w], loc="m.py:1")
    n2 = g.create_node("np.tanh", [n1.output], loc="m.py:2")
    n3 = g.create_node("np.sum", [n2.output], attrs={"axis": 1, "keepdims": False}, loc="m.py:3")
    c = g.create_node("prim.Constant", [], attrs={"value": np.arange(3, dtype=np.float32)},
                      out_types=[TensorType("f32", (3,))], loc="m.py:4")
    n4 = g.create_node("np.add", [n2.output, c.output], loc="m.py:5")
    g.set_outputs([n3.output, n4.output])
    g.lint()
    return g


TEXT = str(sample_graph())
PAYLOAD = serialize.dumps({"forward": sample_graph(), "other": sample_graph()}, {"k": [1, 2]},
                          {"w": np.ones(3, np.float32)})


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


MEMBERS = _members(PAYLOAD)


def _zip(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _guarded(fn, arg):
    """Run ``fn(arg)``: a result, or a clear exception; bounded time and memory."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        out = fn(arg)
    except UNCLEAR as exc:
        raise AssertionError(f"unclear exception {type(exc).__name__}: {exc!r}") from exc
    except CLEAR as exc:
        assert str(exc), f"{type(exc).__name__} without a message"
        out = exc
    finally:
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert elapsed < SLOW_S, f"took {elapsed:.1f}s"
    assert peak < PEAK_BYTES, f"allocated {peak} bytes"
    return out


def _parse_and_lint(text):
    g = parse(text)
    g.lint()
    str(g)          # a graph that parsed and linted prints
    return g


def _load_and_lint(data):
    graphs, meta, arrays = serialize.loads(data)
    for g in graphs.values():
        g.lint()
        str(g)
    return graphs


# ---- the text parser and lint ----------------------------------------------------------------------

edit_st = st.tuples(st.integers(0, len(TEXT)), st.integers(0, 8), st.text(max_size=8))


@FUZZ
@given(edits=st.lists(edit_st, min_size=1, max_size=5))
def test_mutated_text_parses_and_lints_or_raises_clearly(edits):
    text = TEXT
    for at, cut, insert in edits:
        at = min(at, len(text))
        text = text[:at] + insert + text[at + cut:]
    _guarded(_parse_and_lint, text)


TOKENS = ["graph", "(", ")", "%x", "%1", "%w", ":", "f32", "i64", "bool", "[", "]", "B", "3", "-1",
          "99999999999999999999", ",", "=", "np.add", "np.sum", "prim.Constant", "return", "\n", "  ",
          "{", "}", "axis=", "keepdims=True", "array(f32[3]; 1, 2, 3)", "(", "tuple", "#", "m.py:1",
          "\"", "'", "\\", "slice(", "None", "...", "@\"constants/0.npy\"", "\x00", "\ud800", "é"]


@FUZZ
@given(toks=st.lists(st.sampled_from(TOKENS), max_size=60))
def test_token_soup_parses_and_lints_or_raises_clearly(toks):
    _guarded(_parse_and_lint, " ".join(toks))


@pytest.mark.parametrize("depth", [10, 1000, 100_000])
@pytest.mark.parametrize(("opener", "closer"), [("(", ")"), ("[", "]")])
def test_deep_nesting_is_an_error_not_a_stack_overflow(depth, opener, closer):
    body = opener * depth + "f32[3]" + closer * depth
    _guarded(_parse_and_lint, f"graph(%x : {body}):\n  return (%x)\n")
    attr = "{a=" + opener * depth + "1" + closer * depth + "}"
    _guarded(_parse_and_lint, f"graph(%x : f32[3]):\n  %1 : f32[3] = np.negative(%x){attr}\n  return (%1)\n")


@pytest.mark.parametrize("dims", ["2147483648, 2147483648", "9223372036854775807, 9223372036854775807",
                                  "9223372036854775807", "-5", "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0",
                                  ", ".join(["2"] * 4096)])
def test_huge_declared_shapes_allocate_nothing(dims):
    text = (f"graph(%x : f32[{dims}]):\n  %1 : f32[{dims}] = np.negative(%x)\n"
            f"  %2 : f32[{dims}] = np.add(%1, %1)\n  return (%2)\n")
    _guarded(_parse_and_lint, text)


# ---- the saved-file loader -------------------------------------------------------------------------

byte_edit_st = st.tuples(st.integers(0, len(PAYLOAD) - 1), st.integers(0, 255))


@FUZZ
@given(edits=st.lists(byte_edit_st, min_size=1, max_size=8), cut=st.none() | st.integers(0, len(PAYLOAD)))
def test_mutated_payload_bytes_load_or_raise_clearly(edits, cut):
    data = bytearray(PAYLOAD)
    for at, b in edits:
        data[at] = b
    _guarded(_load_and_lint, bytes(data[:cut] if cut is not None else data))


_scalar_st = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_st = st.recursive(_scalar_st,
                       lambda c: st.lists(c, max_size=4)
                       | st.dictionaries(st.text(max_size=10), c, max_size=4),
                       max_leaves=12)
member_name_st = st.sampled_from(["../../etc/passwd", "/etc/passwd", "graphs/0.ir", "constants/0.npy",
                                  "C:\\x.npy", "graphs/../graphs/0.ir", "", ".", "arrays/0.npy\x00x",
                                  "manifest.json", "meta.json"]) | st.text(max_size=12)


@FUZZ
@given(key=st.sampled_from(["format", "version", "graphs", "arrays", "constants", "extra"]),
       value=json_st | member_name_st | st.dictionaries(st.text(max_size=8), member_name_st, max_size=3)
       | st.lists(member_name_st, max_size=3))
def test_mutated_manifest_loads_or_raises_clearly(key, value):
    manifest = json.loads(MEMBERS["manifest.json"])
    manifest[key] = value
    members = dict(MEMBERS, **{"manifest.json": json.dumps(manifest).encode()})
    _guarded(_load_and_lint, _zip(members))


@FUZZ
@given(member=st.sampled_from(sorted(MEMBERS)), data=st.binary(max_size=200)
       | st.sampled_from([b"\xff\xfe\x00", TEXT.encode("utf-16"), b"\x93NUMPY\x01\x00"]))
def test_replaced_member_loads_or_raises_clearly(member, data):
    _guarded(_load_and_lint, _zip(dict(MEMBERS, **{member: data})))


def _npy_header(descr: str, shape: str, fortran="False") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"
    header = header.ljust(118) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()


HOSTILE_NPY = {
    "pickled object array": lambda: _npy(np.array([{"a": 1}, None], dtype=object)),
    "huge declared shape": lambda: _npy_header("<f4", "(4611686018427387904,)"),
    "huge 2-d shape": lambda: _npy_header("<f4", "(2147483648, 2147483648)"),
    "negative shape": lambda: _npy_header("<f4", "(-3,)"),
    "declared shape larger than data": lambda: _npy_header("<f4", "(1000000,)") + b"\0" * 16,
    "object descr": lambda: _npy_header("|O", "(3,)") + b"\0" * 24,
    "evil descr": lambda: _npy_header("__import__('os').system('true')", "(3,)"),
    "structured": lambda: _npy(np.zeros(3, [("a", "<f4"), ("b", "<i8")])),
    "fortran": lambda: _npy(np.asfortranarray(np.ones((3, 1), np.float32))),
    "big-endian": lambda: _npy(np.ones(3, ">f4")),
    "zero-d": lambda: _npy(np.float32(1.0)),
}


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize("member", ["constants/0.npy", "arrays/0.npy"])
@pytest.mark.parametrize("what", sorted(HOSTILE_NPY))
def test_hostile_npy_members_raise_clearly(member, what):
    if member not in MEMBERS:
        pytest.skip(f"{member} not in the payload")
    out = _guarded(_load_and_lint, _zip(dict(MEMBERS, **{member: HOSTILE_NPY[what]()})))
    if not isinstance(out, BaseException):
        assert what in ("fortran", "big-endian", "zero-d"), f"{what} loaded"


@pytest.mark.parametrize("name", ["../../../tmp/evil.ir", "/abs/evil.ir", "graphs/../../evil.ir",
                                  "C:\\evil.ir", "evil\x00.ir"])
def test_path_traversal_member_names_are_only_names(name, tmp_path):
    manifest = json.loads(MEMBERS["manifest.json"])
    manifest["graphs"] = {"forward": name}
    members = dict(MEMBERS, **{"manifest.json": json.dumps(manifest).encode(), name: TEXT.encode()})
    before = set(os.listdir(tmp_path))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        _guarded(_load_and_lint, _zip(members))
    finally:
        os.chdir(cwd)
    assert set(os.listdir(tmp_path)) == before   # nothing is ever extracted


def test_zip_bomb_is_refused_before_decompressing():
    bomb = _zip(dict(MEMBERS, **{"arrays/0.npy": b"\0" * (64 << 20)}))
    assert len(bomb) < (1 << 20)
    out = _guarded(lambda d: serialize.loads(d, max_bytes=16 << 20), bomb)
    assert isinstance(out, FormatError) and "more than" in str(out)


@pytest.mark.parametrize("version", [0, 2, -1, 1.0, "1", None, True, 2**70, [1]])
def test_wrong_versions_are_format_errors(version):
    manifest = json.loads(MEMBERS["manifest.json"])
    manifest["version"] = version
    data = _zip(dict(MEMBERS, **{"manifest.json": json.dumps(manifest).encode()}))
    out = _guarded(_load_and_lint, data)
    if version == 1:   # 1.0 and True compare equal to 1 in JSON-decoded Python: accepted as version 1
        return
    assert isinstance(out, FormatError), out
