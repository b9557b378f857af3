"""Element types: the few an ML accelerator computes in, with their C and numpy names.

bfloat16 has no C arithmetic type (gcc 12 has no ``__bf16`` arithmetic) and numpy has
no such dtype: its arrays hold ``ml_dtypes.bfloat16`` (imported on first use, it
costs half a second), and the generated C stores it as ``uint16_t`` (the upper half
of a float's bits) and computes in float, rounding every result to bfloat16
(:mod:`codegen.cexpr`).
"""

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
        if self.name == "bfloat16":
            return bfloat16_numpy()
        return np.dtype(self.name)

    @property
    def is_int(self) -> bool:
        return not self.is_float and self.name != "bool"


float32 = DType("float32", "float", 4, True)
float64 = DType("float64", "double", 8, True)
float16 = DType("float16", "_Float16", 2, True)
#: stored as the upper 16 bits of a float (C: ``uint16_t``), computed in float
bfloat16 = DType("bfloat16", "uint16_t", 2, True)
int8 = DType("int8", "int8_t", 1, False)
int16 = DType("int16", "int16_t", 2, False)
int32 = DType("int32", "int32_t", 4, False)
int64 = DType("int64", "int64_t", 8, False)
uint8 = DType("uint8", "uint8_t", 1, False, is_signed=False)
bool_ = DType("bool", "_Bool", 1, False, is_signed=False)

ALL = {
    d.name: d
    for d in (float32, float64, float16, bfloat16, int8, int16, int32, int64, uint8)
}
ALL["bool"] = bool_
#: dtypes the op library supports as tensor element types
SUPPORTED = ("float32", "float16", "bfloat16", "int8", "int32", "float64", "int64")

_ALIASES = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "int": "int32",
    "bf16": "bfloat16",
}


def bfloat16_numpy() -> np.dtype:
    """numpy's dtype for bfloat16 (``ml_dtypes``'s, imported here on first use)."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def to_bfloat16(value) -> np.ndarray:
    """``value`` rounded to bfloat16 through float32, as PyTorch converts (a double
    is rounded to float first; ``ml_dtypes`` alone would round it once)."""
    return np.asarray(value, dtype=np.float32).astype(bfloat16_numpy())


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
    """The dtype a contraction over ``dtype`` accumulates in and returns: int8 sums
    in int32, bfloat16 in float32 (as PyTorch's CPU matmul and convolution do; the
    caller rounds the sum to bfloat16 once)."""
    if dtype.is_int and dtype.itemsize < 4:
        return int32
    if dtype == bfloat16:
        return float32
    return dtype


def opmath(dtype: DType) -> DType:
    """The dtype PyTorch's CPU kernels compute a ``dtype`` op's statistics in
    (float16 and bfloat16 -> float32; others in themselves)."""
    return float32 if dtype in (float16, bfloat16) else dtype
