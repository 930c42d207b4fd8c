# What attrs.pyx exports, for type checkers (mypy cannot read Cython); kept beside the .pyx it describes.
from collections.abc import Callable
from typing import Any

__all__ = ["Abbreviate", "check_attr", "format_array", "format_attr", "format_float"]

MAX_ATTR_DEPTH: int

class Abbreviate:
    limit: int
    def __init__(self, limit: int) -> None: ...

def check_attr(value: object, where: str, depth: int = 0) -> None: ...
def format_float(x: object) -> str: ...
def format_array(arr: Any, array_ref: Callable[[Any], str] | Abbreviate | None = None) -> str: ...
def format_attr(
    value: object, array_ref: Callable[[Any], str] | Abbreviate | None = None, depth: int = 0
) -> str: ...
