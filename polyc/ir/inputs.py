"""Checking and preparing the arrays a caller passes to a kernel."""

from __future__ import annotations

import operator
from collections.abc import Mapping

import numpy as np

from polyc.errors import InputError
from polyc.ir import dtypes
from polyc.ir.kernel import Kernel, Role


def prepare(
    kernel: Kernel,
    inputs: Mapping[str, object],
    params: Mapping[str, int] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Validate ``inputs`` against the kernel and allocate every other array.

    Returns ``(arrays, params)``: contiguous numpy arrays for every array of the
    kernel (inputs copied only when an in-place kernel writes them; outputs and
    temporaries zero-filled) and the parameter values.

    Raises:
        InputError: for a missing or unknown input, a key that is not a str (an
            ``Array`` instead of its name), a parameter that is not an integer, or
            a wrong shape or dtype.
    """
    if not isinstance(inputs, Mapping):
        raise InputError(
            f"{kernel.name}: the inputs are a {type(inputs).__name__} because "
            "kernels take a mapping from array name to array. Pass a dict, e.g. "
            f"{{{', '.join(repr(a.name) + ': ...' for a in kernel.free_inputs)}}}."
        )
    for key in inputs:
        if not isinstance(key, str):
            raise InputError(_key_error(kernel, key))
    names = {a.name for a in kernel.free_inputs}
    unknown = sorted(set(inputs) - names - set(kernel.params))
    if unknown:
        raise InputError(
            f"{kernel.name}: unknown input(s) {', '.join(unknown)} because the kernel's "
            f"inputs are {', '.join(sorted(names)) or '(none)'}. Pass those names."
        )
    missing = sorted(names - set(inputs))
    if missing:
        raise InputError(
            f"{kernel.name}: missing input(s) {', '.join(missing)}. Pass every input: "
            f"{', '.join(a.name for a in kernel.free_inputs)}."
        )
    given = {k: v for k, v in inputs.items() if k not in names}
    given.update(params or {})
    arrays = {k: _as_numpy(v) for k, v in inputs.items() if k in names}
    values = kernel.param_values(
        arrays, {k: _integer(kernel, k, v) for k, v in given.items()}
    )
    out: dict[str, np.ndarray] = {}
    for a in kernel.arrays.values():
        shape = a.concrete_shape(values)
        if a.name in kernel.data:
            out[a.name] = kernel.data[a.name]
            continue
        if a.name in arrays:
            arr = arrays[a.name]
            if arr.shape != shape:
                raise InputError(
                    f"{kernel.name}: input {a.name} has shape {arr.shape} but the "
                    f"kernel expects {shape} because {a.name} is declared "
                    f"[{', '.join(map(str, a.shape))}]. Pass an array of shape {shape}."
                )
            if arr.dtype != a.dtype.numpy:
                raise InputError(
                    f"{kernel.name}: input {a.name} has dtype {arr.dtype} but the "
                    f"kernel expects {a.dtype}. Convert it with "
                    f".astype(np.{a.dtype.name})."
                )
            copy = a.role == Role.INOUT
            out[a.name] = (
                np.array(arr, order="C", copy=True)
                if copy
                else (np.ascontiguousarray(arr))
            )
        else:
            out[a.name] = np.zeros(shape, dtype=a.dtype.numpy)
    return out, values


def _as_numpy(value: object) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # torch tensors
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":  # numpy has none: exact via float32
            return value.float().numpy().astype(dtypes.bfloat16_numpy())
        value = value.numpy()
    return np.asarray(value)


def _key_error(kernel: Kernel, key: object) -> str:
    name = getattr(key, "name", None)
    fix = (
        f"Key it by its name: {{{name!r}: value}}."
        if isinstance(name, str)
        else f"Use the array names: {', '.join(a.name for a in kernel.free_inputs)}."
    )
    return (
        f"{kernel.name}: input key {name or key!r} is not a str because it is a "
        f"{type(key).__name__} object, and inputs are keyed by array name. {fix}"
    )


def _integer(kernel: Kernel, name: str, value: object) -> int:
    """A parameter's value as an int (numpy integers too), else InputError."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise InputError(
            f"{kernel.name}: parameter {name} is {value!r} because it was passed as "
            f"a {type(value).__name__}. Pass an integer, e.g. {name}=64."
        ) from None
