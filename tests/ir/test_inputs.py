"""Inputs keyed by something other than an array name, or parameters that are not
integers, are refused with an InputError at the call (``polyc.ir.inputs.prepare``)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc


def _inputs(kernel):
    return {a.name: np.ones((4, 4), np.float32) for a in kernel.free_inputs}


def test_an_array_object_as_the_key():
    kernel = polyc.ops.matmul(4, 4, 4)
    inputs = {kernel.arrays[k]: v for k, v in _inputs(kernel).items()}
    with pytest.raises(
        polyc.InputError,
        match=r"matmul: input key 'A' is not a str because it is a Array object, and "
        r"inputs are keyed by array name\. Key it by its name: \{'A': value\}\.",
    ):
        polyc.interpret(kernel, inputs)


def test_an_array_object_as_the_key_on_the_simulator():
    kernel = polyc.ops.matmul(4, 4, 4)
    compiled = polyc.compile(kernel, config="tiny")
    inputs = {kernel.arrays["A"]: np.ones((4, 4), np.float32)}
    with pytest.raises(polyc.InputError, match=r"input key 'A' is not a str"):
        compiled.run(inputs)


def test_a_key_that_is_neither_a_name_nor_an_array():
    kernel = polyc.ops.matmul(4, 4, 4)
    with pytest.raises(
        polyc.InputError,
        match=r"input key 0 is not a str because it is a int object.*Use the array "
        r"names: A, B\.",
    ):
        polyc.interpret(kernel, {0: np.ones((4, 4), np.float32)})


def test_a_parameter_that_is_not_an_integer():
    kernel = polyc.ops.matmul("n", 4, 4)  # a symbolic size
    inputs = {"A": np.ones((3, 4), np.float32), "B": np.ones((4, 4), np.float32)}
    with pytest.raises(
        polyc.InputError,
        match=r"parameter n is '3' because it was passed as a str\. Pass an "
        r"integer, e\.g\. n=64\.",
    ):
        polyc.interpret(kernel, inputs, n="3")
    # numpy integers are integers
    out = polyc.interpret(kernel, inputs, n=np.int64(3))
    assert out["out"].shape == (3, 4)
