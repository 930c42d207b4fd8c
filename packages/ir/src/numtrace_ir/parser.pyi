# What parser.pyx exports, for type checkers (mypy cannot read Cython); kept beside the .pyx it describes.
from collections.abc import Mapping

import numpy as np

from numtrace_ir.graph import Graph

__all__ = ["ParseError", "parse"]

class ParseError(ValueError):
    line: int
    column: int
    def __init__(self, message: str, line: int, column: int) -> None: ...

def parse(text: str, *, arrays: Mapping[str, np.ndarray] | None = None) -> Graph: ...
