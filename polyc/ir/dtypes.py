"""Element types: the few an ML accelerator computes in, with their C and numpy names."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polyc.errors import DTypeError


@dataclass(frozen=True)
class DType:
    """An element type. Compare and hash by name; ``str(dtype)`` is the name."""

    name: str
    c_type: str
    itemsize: int
    is_float: bool
    is_signed: bool = True

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"polyc.{self.name}"

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(self.name)

    @property
    def is_int(self) -> bool:
        return not self.is_float and self.name != "bool"


float32 = DType("float32", "float", 4, True)
float64 = DType("float64", "double", 8, True)
float16 = DType("float16", "_Float16", 2, True)
int8 = DType("int8", "int8_t", 1, False)
int16 = DType("int16", "int16_t", 2, False)
int32 = DType("int32", "int32_t", 4, False)
int64 = DType("int64", "int64_t", 8, False)
uint8 = DType("uint8", "uint8_t", 1, False, is_signed=False)
bool_ = DType("bool", "_Bool", 1, False, is_signed=False)

ALL = {d.name: d for d in (float32, float64, float16, int8, int16, int32, int64, uint8)}
ALL["bool"] = bool_
#: dtypes the op library supports as tensor element types
SUPPORTED = ("float32", "float16", "int8", "int32", "float64", "int64")

_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "int": "int32"}


def as_dtype(value: object) -> DType:
    """Return the DType named by ``value`` (a DType, a name, or a numpy/torch dtype).

    Raises:
        DTypeError: when the value names no dtype polyc knows.
    """
    if isinstance(value, DType):
        return value
    name = getattr(value, "name", None) if not isinstance(value, str) else value
    if name is None:
        try:
            name = np.dtype(value).name  # type: ignore[arg-type]
        except TypeError:
            name = str(value)
    name = str(name).removeprefix("torch.")
    name = _ALIASES.get(name, name)
    if name in ALL:
        return ALL[name]
    raise DTypeError(
        f"dtype: {value!r} is not a dtype polyc knows because it is none of "
        f"{', '.join(sorted(ALL))}. Use one of those names."
    )


def accumulator(dtype: DType) -> DType:
    """The dtype a reduction over ``dtype`` accumulates in (int8 sums in int32)."""
    if dtype.is_int and dtype.itemsize < 4:
        return int32
    return dtype
