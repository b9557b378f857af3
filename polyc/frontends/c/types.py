"""C types for the SCoP frontend: declarations, literals, the usual arithmetic
conversions, and the variables a region can name."""

from __future__ import annotations

from dataclasses import dataclass, field

from pycparser import c_ast

from polyc.ir import dtypes
from polyc.ir.dtypes import DType

#: C type names (sorted words) -> dtype; None for types that have no dtype
_BASE = {
    ("double",): dtypes.float64,
    ("float",): dtypes.float32,
    ("int",): dtypes.int32,
    ("int", "signed"): dtypes.int32,
    ("signed",): dtypes.int32,
    ("long",): dtypes.int64,
    ("int", "long"): dtypes.int64,
    ("long", "long"): dtypes.int64,
    ("int", "long", "long"): dtypes.int64,
    ("long", "signed"): dtypes.int64,
    ("int", "long", "signed"): dtypes.int64,
    ("short",): dtypes.int16,
    ("int", "short"): dtypes.int16,
    ("short", "signed"): dtypes.int16,
    ("char",): dtypes.int8,
    ("char", "signed"): dtypes.int8,
    ("char", "unsigned"): dtypes.uint8,
    ("_Bool",): dtypes.bool_,
}
#: integer types a loop iterator or parameter may have (values only, never data)
_INDEX_WORDS = {"int", "long", "short", "char", "signed", "unsigned", "_Bool"}
_RANK = {
    "bool": 0,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "int32": 3,
    "int64": 4,
    "float16": 5,
    "float32": 6,
    "float64": 7,
}


@dataclass
class CType:
    """A declared C type: base words and its dimensions, outermost first (pycparser
    nodes; ``None`` for ``[]`` and for each pointer level, which indexes like an
    array of unknown extent)."""

    words: tuple[str, ...]
    dims: list = field(default_factory=list)
    pointers: int = 0

    @property
    def dtype(self) -> DType | None:
        return _BASE.get(tuple(sorted(self.words)))

    @property
    def is_integer(self) -> bool:
        return bool(self.words) and set(self.words) <= _INDEX_WORDS

    @property
    def ndim(self) -> int:
        return len(self.dims)


def resolve(node, typedefs: dict[str, CType]) -> CType | None:
    """The CType of a declaration's type node; None for functions and structs."""
    dims: list = []
    pointers = 0
    while True:
        if isinstance(node, c_ast.ArrayDecl):
            dims.append(node.dim)
            node = node.type
        elif isinstance(node, c_ast.PtrDecl):
            dims.append(None)  # a pointer indexes like an array of unknown extent
            pointers += 1
            node = node.type
        else:
            break
    if not isinstance(node, c_ast.TypeDecl):
        return None
    inner = node.type
    if not isinstance(inner, c_ast.IdentifierType):
        return None
    names = tuple(inner.names)
    if len(names) == 1 and names[0] in typedefs:
        base = typedefs[names[0]]
        # pointers declared on the variable come after the typedef's own dims
        return CType(base.words, base.dims + dims, base.pointers + pointers)
    return CType(names, dims, pointers)


def typedef_table(file_ast: c_ast.FileAST) -> dict[str, CType]:
    out: dict[str, CType] = {}
    for ext in file_ast.ext:
        if isinstance(ext, c_ast.Typedef):
            t = resolve(ext.type, out)
            if t is not None:
                out[ext.name] = t
    return out


def int_literal(text: str) -> tuple[int, DType]:
    """Value and type of a C integer literal (``10``, ``0x1F``, ``017``, ``5L``)."""
    body = text.rstrip("uUlL")
    suffix = text[len(body) :].lower()
    if body.lower().startswith("0x"):
        value = int(body, 16)
    elif body.lower().startswith("0b"):
        value = int(body, 2)
    elif len(body) > 1 and body.startswith("0"):
        value = int(body, 8)
    else:
        value = int(body)
    wide = "l" in suffix or value > 2**31 - 1
    return value, (dtypes.int64 if wide else dtypes.int32)


def float_literal(text: str) -> tuple[float, DType]:
    """Value and type of a C floating literal (``1.5``, ``2e-3f``, ``0x1p-3``)."""
    body = text.rstrip("fFlL")
    suffix = text[len(body) :].lower()
    value = float.fromhex(body) if body.lower().startswith("0x") else float(body)
    return value, (dtypes.float32 if suffix == "f" else dtypes.float64)


def char_literal(text: str) -> int:
    inner = text[1:-1]
    if inner.startswith("\\"):
        escapes = {"n": 10, "t": 9, "r": 13, "0": 0, "\\": 92, "'": 39, '"': 34}
        if inner[1:] in escapes:
            return escapes[inner[1:]]
        if inner[1] == "x":
            return int(inner[2:], 16)
        return int(inner[1:], 8)
    return ord(inner)


def promote(dt: DType) -> DType:
    """C's integer promotion: anything narrower than int computes as int."""
    if not dt.is_float and _RANK[dt.name] < _RANK["int32"]:
        return dtypes.int32
    return dt


def common(a: DType, b: DType) -> DType:
    """C's usual arithmetic conversions for two operand types."""
    a, b = promote(a), promote(b)
    return a if _RANK[a.name] >= _RANK[b.name] else b


def ctype_name(dt: DType) -> str:
    return dt.c_type


@dataclass
class Var:
    """A variable a region can name."""

    name: str
    ctype: CType
    scope: str  # "global", "param", "local" (in the function), "region"
    node: object = None  # the pycparser Decl

    @property
    def is_array(self) -> bool:
        return self.ctype.ndim > 0
