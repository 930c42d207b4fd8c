"""Safe serialization of graphs: a zip of text IR, `.npy` arrays and JSON, never pickles.

Layout (format version 1)::

    manifest.json         {"format": "numtrace-ir", "version": 1, "graphs": {name: member},
                           "arrays": {name: member}, "constants": [member, ...]}
    meta.json             the caller's JSON metadata
    graphs/<i>.ir         text IR; array attributes read `array(f32[3]; @"constants/<k>.npy")`
    arrays/<i>.npy        the caller's named arrays (weights)
    constants/<k>.npy     array attributes of the graphs

Names live in the manifest, so any string may name a graph or an array. Loading reads only these
members, with `allow_pickle=False`, and checks every array's dtype; anything malformed is a
`FormatError` naming what is wrong.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.parser import ParseError, parse
from numtrace_ir.printer import format_graph
from numtrace_ir.types import normalize_dtype

__all__ = ["FORMAT_VERSION", "FormatError", "MAX_MEMBERS", "MAX_TOTAL_BYTES", "dumps", "loads"]

FORMAT_NAME = "numtrace-ir"
FORMAT_VERSION = 1
# Bounds checked against the zip's directory before anything is decompressed, so that a small
# hostile payload (a zip bomb) cannot make `loads` allocate without limit. `loads(max_bytes=...)`
# raises the total for payloads with larger weights.
MAX_MEMBERS = 1 << 16
MAX_TOTAL_BYTES = 1 << 33


class FormatError(ValueError):
    """Bytes that are not a numtrace-ir payload this version can read; the message says what is wrong."""


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _check_array(what: str, a: Any) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{what} must be a numpy.ndarray, got {type(a).__name__}")
    normalize_dtype(a.dtype)  # TypeError names the unsupported dtype
    return a


# Ops whose attributes name code to call at run time: their names are checked against the allow-lists
# (`ops.foreign.UFUNC_MODULES`, `ops.host.HOST_MODULES`) when a graph is read, not when it first runs.
_NAMES_CODE = ("np.ufunc", "prim.host_call")


def _check_named_code(name: str, graph: Graph) -> None:
    for node in graph.nodes:
        if node.op in _NAMES_CODE:
            try:
                registry.get(node.op).normalize_attrs(dict(node.attrs))
            except (TypeError, ValueError) as e:
                raise FormatError(f"graph {name!r}: node {node.op}{' at ' + node.loc if node.loc else ''} is "
                                  f"refused: {e}") from None


def dumps(graphs: Mapping[str, Graph], meta: Mapping[str, Any] | None = None,
          arrays: Mapping[str, np.ndarray] | None = None) -> bytes:
    """Serialize named graphs, JSON-able `meta` and named arrays into bytes (see the module docstring)."""
    meta = {} if meta is None else dict(meta)
    arrays = {} if arrays is None else dict(arrays)
    manifest: dict[str, Any] = {"format": FORMAT_NAME, "version": FORMAT_VERSION,
                                "graphs": {}, "arrays": {}, "constants": []}
    members: dict[str, bytes] = {}
    constant_of: dict[int, str] = {}  # id(array) -> member, so a shared array is stored once
    keep_alive: list[np.ndarray] = []

    def array_ref(a: np.ndarray) -> str:
        member = constant_of.get(id(a))
        if member is None:
            member = f"constants/{len(constant_of)}.npy"
            constant_of[id(a)] = member
            keep_alive.append(a)
            members[member] = _npy_bytes(a)
            manifest["constants"].append(member)
        return member

    for i, (name, g) in enumerate(graphs.items()):
        if not isinstance(name, str) or not isinstance(g, Graph):
            raise TypeError(f"graphs must map str names to Graphs, got {name!r}: {type(g).__name__}")
        member = f"graphs/{i}.ir"
        members[member] = format_graph(g, array_ref).encode("utf-8")
        manifest["graphs"][name] = member
    for i, (name, a) in enumerate(arrays.items()):
        if not isinstance(name, str):
            raise TypeError(f"array names must be str, got {name!r}")
        member = f"arrays/{i}.npy"
        members[member] = _npy_bytes(_check_array(f"array {name!r}", a))
        manifest["arrays"][name] = member
    try:
        meta_text = json.dumps(meta, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"meta must be JSON-serializable (no NaN/inf): {e}") from None
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        head: dict[str, str | bytes] = {"manifest.json": json.dumps(manifest), "meta.json": meta_text}
        for member, data in {**head, **members}.items():
            # A fixed date, not the clock's: the same trace gives the same bytes (save and to_bytes
            # a second apart differed in the zip's two-second time field, and failed CI's comparison).
            z.writestr(zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


class _Reader:
    """Reads members of one payload, turning every low-level failure into a `FormatError`."""

    def __init__(self, data: bytes, max_bytes: int):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"loads expects bytes, got {type(data).__name__}")
        if type(max_bytes) is not int or max_bytes < 0:
            raise TypeError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(bytes(data)))
        except Exception as e:  # zipfile also raises NotImplementedError, struct.error, EOFError...
            raise FormatError(f"not a numtrace-ir file: not a zip archive ({e})") from None
        infos = self.zip.infolist()
        if len(infos) > MAX_MEMBERS:
            raise FormatError(f"the archive has {len(infos)} members; at most {MAX_MEMBERS} are allowed")
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            raise FormatError("the archive names a member twice")
        # zipfile never decompresses past a member's declared size, so these sizes bound memory.
        total = sum(info.file_size for info in infos)
        if total > max_bytes:
            raise FormatError(f"the archive's members decompress to {total} bytes, more than "
                              f"max_bytes={max_bytes}")

    def read(self, member: str) -> bytes:
        if not isinstance(member, str):
            raise FormatError(f"manifest names a member that is not a string: {member!r}")
        try:
            return self.zip.read(member)
        except KeyError:
            raise FormatError(f"missing member {member!r}") from None
        except Exception as e:  # CRC errors, truncated or badly compressed data
            raise FormatError(f"member {member!r} is corrupt: {e}") from None

    def json(self, member: str) -> Any:
        try:
            return json.loads(self.read(member).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise FormatError(f"member {member!r} is not valid JSON: {e}") from None

    def array(self, member: str) -> np.ndarray:
        try:
            a = np.load(io.BytesIO(self.read(member)), allow_pickle=False)
        except FormatError:
            raise
        except Exception as e:  # bad header, truncated data, object arrays (pickle refused)
            raise FormatError(f"member {member!r} is not a valid .npy array: {e}") from None
        if not isinstance(a, np.ndarray):
            raise FormatError(f"member {member!r} is not a single .npy array")
        try:
            dtype = normalize_dtype(a.dtype)
        except TypeError as e:
            raise FormatError(f"member {member!r}: {e}") from None
        return a if a.dtype == dtype and a.dtype.isnative else a.astype(dtype)


def _names(manifest: dict, key: str) -> dict[str, str]:
    table = manifest.get(key)
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                             for k, v in table.items()):
        raise FormatError(f"manifest.json: {key!r} must map names to member paths")
    return table


def loads(data: bytes, *, max_bytes: int = MAX_TOTAL_BYTES
          ) -> tuple[dict[str, Graph], dict[str, Any], dict[str, np.ndarray]]:
    """Read what `dumps` wrote: `(graphs, meta, arrays)`. `FormatError` for malformed data, including
    more than `MAX_MEMBERS` members or members that decompress to more than `max_bytes` in total."""
    r = _Reader(data, max_bytes)
    manifest = r.json("manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise FormatError("manifest.json does not describe a numtrace-ir file")
    version = manifest.get("version")
    if version != FORMAT_VERSION:
        raise FormatError(f"unsupported format version {version!r}; this numtrace-ir reads version "
                          f"{FORMAT_VERSION}")
    constants_list = manifest.get("constants")
    if not isinstance(constants_list, list):
        raise FormatError("manifest.json: 'constants' must be a list of member paths")
    constants = {m: r.array(m) for m in constants_list}
    graphs = {}
    for name, member in _names(manifest, "graphs").items():
        try:
            text = r.read(member).decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(f"graph {name!r} ({member}) is not UTF-8 text: {e}") from None
        try:
            graphs[name] = parse(text, arrays=constants)
        except ParseError as e:
            raise FormatError(f"graph {name!r} ({member}) does not parse: {e}") from None
        _check_named_code(name, graphs[name])
    arrays = {name: r.array(member) for name, member in _names(manifest, "arrays").items()}
    meta = r.json("meta.json")
    if not isinstance(meta, dict):
        raise FormatError("meta.json must hold a JSON object")
    return graphs, meta, arrays
