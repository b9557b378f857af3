"""The error classes are listed once (polyc/errors.py) and polyc exports each."""

from __future__ import annotations

import inspect

import polyc
from polyc import errors


def test_every_error_class_is_listed_and_exported():
    defined = [
        name
        for name, value in inspect.getmembers(errors, inspect.isclass)
        if issubclass(value, errors.PolycError)
    ]
    assert sorted(errors.__all__) == sorted(defined)
    for name in defined:
        assert getattr(polyc, name) is getattr(errors, name)
        assert name in polyc.__all__
        assert getattr(errors, name).__doc__, f"{name} says when it is raised"
