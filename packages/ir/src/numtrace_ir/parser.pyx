"""Reads the text IR back into a `Graph`: `parse(str(g))` gives a graph equal to `g`.

A hand-written recursive-descent reader over one line at a time. Literals are read by this
grammar only (never `eval`): strings go through `ast.literal_eval` on the exact quoted token.
Errors are `ParseError` with the line and column of the offending character.
"""

import ast

import numpy as np

from numtrace_ir.graph cimport Graph, Node, Value
from numtrace_ir.types cimport TensorType

from numtrace_ir.attrs import MAX_ATTR_DEPTH
from numtrace_ir.graph import check_value_name, register_presentation
from numtrace_ir.types import SCALAR_KINDS, ScalarType, TupleType, check_dim, dtype_from_name

__all__ = ["ParseError", "parse"]


class ParseError(ValueError):
    """Text that is not valid IR; `.line` and `.column` (1-based) locate the problem."""

    def __init__(self, message: str, line: int, column: int):
        super().__init__(f"line {line}, column {column}: {message}")
        self.line = line
        self.column = column


cdef int _MAX_DEPTH = MAX_ATTR_DEPTH

# What `_Parser.seq` reads.
cdef enum:
    _TYPES, _LITERALS, _USES


cdef inline bint _is_name_char(Py_UCS4 c):
    return c == u"_" or u"a" <= c <= u"z" or u"A" <= c <= u"Z" or u"0" <= c <= u"9"


cdef class _Parser:
    cdef str s
    cdef Py_ssize_t pos
    cdef Py_ssize_t n
    cdef Py_ssize_t line_no
    cdef Graph g
    cdef dict values
    cdef dict type_cache
    cdef object arrays
    # Nesting of types and literals being read: bounded, so that no text can exhaust the C stack.
    cdef int depth

    def __cinit__(self, arrays):
        self.g = Graph()
        self.values = {}
        self.type_cache = {}
        self.arrays = arrays

    cdef fail(self, str message, Py_ssize_t at=-1):
        raise ParseError(message, self.line_no, (self.pos if at < 0 else at) + 1)

    cdef Py_UCS4 peek(self):
        return self.s[self.pos] if self.pos < self.n else u"\n"

    cdef void skip_ws(self):
        while self.pos < self.n and (self.s[self.pos] == u" " or self.s[self.pos] == u"\t"):
            self.pos += 1

    cdef expect(self, str token):
        self.skip_ws()
        if not self.s.startswith(token, self.pos):
            found = self.s[self.pos:self.pos + 12] or "end of line"
            self.fail(f"expected {token!r}, found {found!r}")
        self.pos += len(token)

    cdef expect_ch(self, Py_UCS4 c):
        self.skip_ws()
        if self.pos >= self.n or self.s[self.pos] != c:
            found = self.s[self.pos:self.pos + 12] or "end of line"
            self.fail(f"expected {str(c)!r}, found {found!r}")
        self.pos += 1

    cdef bint accept_ch(self, Py_UCS4 c):
        self.skip_ws()
        if self.pos < self.n and self.s[self.pos] == c:
            self.pos += 1
            return True
        return False

    cdef bint accept(self, str token):
        self.skip_ws()
        if self.s.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    cdef str word(self, str what):
        cdef Py_ssize_t start = self.pos
        while self.pos < self.n and _is_name_char(self.s[self.pos]):
            self.pos += 1
        if self.pos == start:
            self.fail(f"expected {what}")
        return self.s[start:self.pos]

    cdef str dotted(self, str what):
        cdef Py_ssize_t start = self.pos
        while self.pos < self.n and (_is_name_char(self.s[self.pos]) or self.s[self.pos] == u"."):
            self.pos += 1
        if self.pos == start:
            self.fail(f"expected {what}")
        return self.s[start:self.pos]

    cdef list seq(self, int what):
        # Items up to the closing ')' (already past the '('), comma-separated, trailing comma allowed.
        cdef list items = []
        while not self.accept_ch(u')'):
            if what == _TYPES:
                items.append(self.read_type())
            elif what == _LITERALS:
                items.append(self.literal())
            else:
                items.append(self.use())
            if not self.accept_ch(u','):
                self.expect_ch(u')')
                break
        return items

    # -- values and types ------------------------------------------------------------------------

    cdef str value_token(self):
        self.skip_ws()
        if self.peek() != u"%":
            self.fail("expected a value such as %x or %3")
        self.pos += 1
        return self.dotted("a value name after '%'")

    cdef Value use(self):
        cdef Py_ssize_t at = self.pos
        token = self.value_token()
        try:
            return self.values[token]
        except KeyError:
            self.fail(f"value %{token} is used before it is defined", at)

    cdef define(self, str token, Value v, Py_ssize_t at):
        if token in self.values:
            self.fail(f"value %{token} is defined twice", at)
        if not token.isdigit():
            try:
                v.name = token
            except ValueError as e:
                self.fail(str(e), at)
        self.values[token] = v

    cdef object read_type(self):
        self.enter()
        t = self._read_type()
        self.depth -= 1
        return t

    cdef enter(self):
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.fail(f"types and attribute values may nest at most {MAX_ATTR_DEPTH} levels deep")

    cdef object _read_type(self):
        cdef Py_ssize_t start
        cdef Py_ssize_t end
        self.skip_ws()
        start = self.pos
        if self.peek() == u"(":
            self.pos += 1
            return TupleType(self.seq(_TYPES))
        end = self.s.find("]", start)
        if end >= 0:
            cached = self.type_cache.get(self.s[start:end + 1])
            if cached is not None:
                self.pos = end + 1
                return cached
        name = self.word("a type such as f32[3] or int")
        if self.peek() != u"[":
            if name not in SCALAR_KINDS:
                self.fail(f"unknown type {name!r}; expected a tensor type such as f32[3] or one of "
                          f"{', '.join(SCALAR_KINDS)}", start)
            return ScalarType(name)
        try:
            dtype = dtype_from_name(name)
        except ValueError as e:
            self.fail(str(e), start)
        if end < 0:
            self.fail("unclosed '[' in tensor type")
        body = self.s[self.pos + 1:end]
        dims = []
        if body.strip():
            for item in _split_top(body):
                item = item.strip()
                try:
                    dims.append(check_dim(int(item) if item.isdigit() else item))
                except (TypeError, ValueError) as e:
                    self.fail(f"bad dim {item!r}: {e}", self.pos + 1)
        t = TensorType(dtype, tuple(dims))
        self.pos = end + 1
        self.type_cache[self.s[start:self.pos]] = t
        return t

    # -- attribute literals ----------------------------------------------------------------------

    cdef object number(self):
        cdef Py_ssize_t start = self.pos
        cdef Py_UCS4 c
        if self.peek() == u"-" or self.peek() == u"+":
            self.pos += 1
        if self.s.startswith("inf", self.pos) or self.s.startswith("nan", self.pos):
            self.pos += 3
            return float(self.s[start:self.pos])
        while self.pos < self.n:
            c = self.s[self.pos]
            if (u"0" <= c <= u"9") or c == u"." or c == u"e" or c == u"E" or (
                    (c == u"+" or c == u"-") and self.s[self.pos - 1] in "eE"):
                self.pos += 1
            else:
                break
        text = self.s[start:self.pos]
        try:
            if "." in text or "e" in text or "E" in text:
                return float(text)
            return int(text)
        except ValueError:
            self.fail(f"bad number {text!r}", start)

    cdef str string(self):
        cdef Py_ssize_t start = self.pos
        cdef Py_UCS4 quote = self.s[self.pos]
        self.pos += 1
        while self.pos < self.n and self.s[self.pos] != quote:
            self.pos += 2 if self.s[self.pos] == u"\\" else 1
        if self.pos >= self.n:
            self.fail("unterminated string", start)
        self.pos += 1
        try:
            value = ast.literal_eval(self.s[start:self.pos])
        except (ValueError, SyntaxError) as e:
            self.fail(f"bad string literal: {e}", start)
        if type(value) is not str:
            self.fail("expected a string literal", start)
        return value

    cdef object literal(self):
        self.enter()
        value = self._literal()
        self.depth -= 1
        return value

    cdef object _literal(self):
        cdef Py_UCS4 c
        cdef Py_ssize_t start
        self.skip_ws()
        c = self.peek()
        start = self.pos
        if c == u"(":
            self.pos += 1
            return tuple(self.seq(_LITERALS))
        if c == u"'" or c == u'"':
            return self.string()
        if c == u".":
            self.expect("...")
            return Ellipsis
        if c == u"-" or c == u"+" or u"0" <= c <= u"9":
            return self.number()
        word = self.word("an attribute value")
        if word == "None":
            return None
        if word == "True":
            return True
        if word == "False":
            return False
        if word == "inf" or word == "nan":
            return float(word)
        if word == "slice":
            self.expect_ch(u'(')
            start_, stop, step = self.literal(), None, None
            self.expect_ch(u',')
            stop = self.literal()
            self.expect_ch(u',')
            step = self.literal()
            self.expect_ch(u')')
            return slice(start_, stop, step)
        if word == "complex":
            self.expect_ch(u'(')
            re_ = self.real()
            self.expect_ch(u',')
            im = self.real()
            self.expect_ch(u')')
            return complex(re_, im)
        if word == "dtype":
            self.expect_ch(u'(')
            self.skip_ws()
            at = self.pos
            name = self.word("a dtype name")
            self.expect_ch(u')')
            try:
                return dtype_from_name(name)
            except ValueError as e:
                self.fail(str(e), at)
        if word == "array":
            return self.array()
        self.fail(f"unknown attribute value {word!r}", start)

    cdef double real(self):
        self.skip_ws()
        value = self.literal()
        if type(value) is not float and type(value) is not int:
            self.fail("expected a real number")
        return value

    cdef object array(self):
        cdef Py_ssize_t at
        self.expect_ch(u'(')
        at = self.pos
        t = self.read_type()
        if type(t) is not TensorType or not t.is_concrete:
            self.fail("an array's type must be a tensor type with concrete dims", at)
        tt = <TensorType>t
        self.expect_ch(u';')
        self.skip_ws()
        if self.peek() == u"@":
            self.pos += 1
            self.skip_ws()
            return self.array_ref(tt)
        if self.s.startswith(u"...", self.pos):
            self.fail(f"abbreviated array {tt} ('...'): str(graph) shortens large constants for reading; "
                      "parse the full text of numtrace_ir.format_graph(graph) or a saved file instead", at)
        kind = tt.dtype.kind
        items = []
        while not self.accept_ch(u')'):
            self.skip_ws()
            at = self.pos
            x = self.literal()
            if not _element_ok(x, kind):
                self.fail(f"{x!r} is not a {tt.dtype_name} element", at)
            items.append(x)
            if not self.accept_ch(u','):
                self.expect_ch(u')')
                break
        count = 1
        for d in tt.shape:
            count *= d
        if len(items) != count:
            self.fail(f"array of type {tt} needs {count} elements, got {len(items)}", at)
        try:
            # Subnormals may underflow on the way to f16/f32; only a value too large is an error.
            with np.errstate(over="raise", under="ignore"):
                wide = np.array(items, dtype=tt.dtype if kind in "biu" else
                                (np.complex128 if kind == "c" else np.float64))
                return wide.astype(tt.dtype, copy=False).reshape(tt.shape)
        except (OverflowError, FloatingPointError, ValueError) as e:
            self.fail(f"array elements do not fit {tt.dtype_name}: {e}", at)

    cdef object array_ref(self, TensorType tt):
        cdef Py_ssize_t at = self.pos
        if self.peek() != u"'" and self.peek() != u'"':
            self.fail("expected a quoted array member name after '@'")
        name = self.string()
        self.expect_ch(u')')
        if self.arrays is None:
            self.fail(f"array reference @{name!r} but no arrays were given to parse()", at)
        try:
            arr = self.arrays[name]
        except KeyError:
            self.fail(f"array reference @{name!r} names no stored array", at)
        if not isinstance(arr, np.ndarray) or arr.dtype != tt.dtype or arr.shape != tt.shape:
            found = f"{arr.dtype}{list(arr.shape)}" if isinstance(arr, np.ndarray) else type(arr).__name__
            self.fail(f"stored array {name!r} is {found}, but the text says {tt}", at)
        return arr

    # -- lines -----------------------------------------------------------------------------------

    cdef header(self):
        cdef Py_ssize_t at
        self.expect("graph")
        self.expect_ch(u'(')
        while not self.accept_ch(u')'):
            self.skip_ws()
            at = self.pos
            token = self.value_token()
            self.expect_ch(u':')
            v = self.g.add_input(None, self.read_type())
            self.define(token, v, at)
            if not self.accept_ch(u','):
                self.expect_ch(u')')
                break
        self.expect_ch(u':')
        self.end_of_line()

    cdef end_of_line(self):
        self.skip_ws()
        if self.pos < self.n:
            self.fail(f"unexpected {self.s[self.pos:self.pos + 12]!r} at the end of the line")

    cdef node_line(self):
        cdef list tokens = []
        cdef list starts = []
        cdef list types = []
        cdef list inputs
        cdef dict attrs = {}
        cdef Node node
        cdef Py_ssize_t i
        self.skip_ws()
        if self.peek() == u"%":
            while True:
                self.skip_ws()
                starts.append(self.pos)
                tokens.append(self.value_token())
                self.expect_ch(u':')
                types.append(self.read_type())
                if not self.accept_ch(u','):
                    break
        self.expect_ch(u'=')
        self.skip_ws()
        at = self.pos
        op = self.dotted("an op name")
        if self.accept_ch(u'['):
            while True:
                self.skip_ws()
                key_at = self.pos
                key = self.word("an attribute name")
                if key in attrs:
                    self.fail(f"attribute {key!r} given twice", key_at)
                self.expect_ch(u'=')
                attrs[key] = self.literal()
                if not self.accept_ch(u','):
                    break
            self.expect_ch(u']')
        self.expect_ch(u'(')
        inputs = self.seq(_USES)
        self.skip_ws()
        errstate = None
        if self.s.startswith(u"errstate(", self.pos):
            end = self.s.find(u")", self.pos)
            if end < 0:
                self.fail("errstate( without its closing parenthesis", self.pos)
            errstate = self.s[self.pos + len(u"errstate("):end]
            self.pos = end + 1
            self.skip_ws()
        loc = None
        if self.peek() == u"#":
            loc = self.s[self.pos + 1:].strip() or None
            self.pos = self.n
        self.end_of_line()
        try:
            node = self.g.create_node(op, inputs, attrs, loc, types)
            node.errstate = errstate
        except (TypeError, ValueError) as e:
            self.fail(str(e), at)
        for i in range(len(tokens)):
            self.define(tokens[i], node.outputs[i], starts[i])

    cdef return_line(self):
        self.expect("return")
        self.expect_ch(u'(')
        outs = self.seq(_USES)
        self.end_of_line()
        self.g.set_outputs(outs)

    cdef Graph run(self, str text):
        # Lines are sliced one at a time: a list of every line would be re-scanned by each GC pass.
        cdef Py_ssize_t start = 0
        cdef Py_ssize_t end
        cdef Py_ssize_t size = len(text)
        cdef int state = 0  # 0: before the header, 1: in the body, 2: after `return`
        while start <= size:
            end = text.find("\n", start)
            if end < 0:
                end = size
            self.s = text[start:end]
            start = end + 1
            self.n = len(self.s)
            self.pos = 0
            self.line_no += 1
            self.skip_ws()
            if self.pos == self.n or self.s[self.pos] == u"#":  # blank, or a comment line
                continue
            if state == 0:
                self.header()
                state = 1
            elif state == 1:
                if self.s[self.pos] == u"r" and self.s.startswith("return", self.pos):
                    self.return_line()
                    state = 2
                else:
                    self.node_line()
            else:
                self.fail("text after the return line")
        if state != 2:
            self.pos = 0
            self.fail("missing 'graph(...):' header" if state == 0 else "missing 'return (...)' line")
        return self.g


cdef bint _element_ok(object x, str kind):
    cdef type t = type(x)
    if kind == "b":
        return t is bool
    if kind == "i" or kind == "u":
        return t is int
    if kind == "f":
        return t is float or t is int
    return t is complex or t is float or t is int


cdef list _split_top(str body):
    # Split at commas outside parentheses: symbolic dims such as max(B,C) contain commas.
    cdef list parts = []
    cdef int depth = 0
    cdef Py_ssize_t start = 0
    cdef Py_ssize_t i
    cdef Py_UCS4 c
    for i in range(len(body)):
        c = body[i]
        if c == u"(":
            depth += 1
        elif c == u")":
            depth -= 1
        elif c == u"," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return parts


def parse(str text not None, *, arrays=None):
    """Read the text IR into a new `Graph`.

    `arrays` maps member names to arrays for `array(type; @"name")` references (graphs saved by
    `numtrace_ir.serialize` keep their array attributes outside the text).
    """
    return _Parser(arrays).run(text)


register_presentation("parse", parse)
