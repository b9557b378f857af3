"""Small helpers shared by the transformations: argument checks and the Step record."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from polyc.errors import ArgumentError
from polyc.ir.kernel import Step


def step(op: str, *args: Any, **kwargs: Any) -> Step:
    """The history record of ``schedules.<name>(kernel, *args, **kwargs)``; keyword
    arguments left at their default (None) are not recorded."""
    kept = tuple((k, v) for k, v in kwargs.items() if v is not None)
    return Step(op, tuple(args), kept)


def positive_int(op: str, what: str, value: Any) -> int:
    """``value`` as a positive int.

    Raises:
        ArgumentError: when it is not a positive integer.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(
            f"{op}: {what} must be a positive integer because it counts iterations, "
            f"but it is {value!r}. Pass an int >= 1."
        )
    return value


def integer(op: str, what: str, value: Any) -> int:
    """``value`` as an int.

    Raises:
        ArgumentError: when it is not an integer.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentError(
            f"{op}: {what} must be an integer because schedules are integer affine "
            f"functions, but it is {value!r}. Pass an int."
        )
    return value


def mapping(op: str, what: str, value: Any) -> dict:
    """``value`` as a non-empty dict.

    Raises:
        ArgumentError: when it is not a non-empty mapping.
    """
    if not isinstance(value, Mapping) or not value:
        raise ArgumentError(
            f"{op}: {what} must be a non-empty mapping from member names, but it is "
            f"{value!r}. Pass e.g. {{'i': 32}}."
        )
    return dict(value)
