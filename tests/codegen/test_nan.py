"""max, min and ReLU of a NaN are NaN in every backend, as in the interpreter
(numpy's maximum/minimum) and in torch: the host C's ``a > b ? a : b``, the
simulator's vector unit and the MLIR export's select dropped a NaN on one side
(``amax`` of a row holding a NaN came out as the row's largest number)."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import compute as pc
from polyc.ops import nn


def _kernel_and_input():
    x = pc.placeholder("x", (4, 16))
    kernel = pc.kernel(
        "nan_minmax",
        [nn.amax(x, 1, name="top"), nn.amin(x, 1, name="low"), nn.relu(x, name="r")],
    )
    value = np.arange(64, dtype=np.float32).reshape(4, 16) - 20
    value[1, 0] = value[2, 7] = value[3, 15] = np.nan  # first, middle, last
    return kernel, {"x": value}


def _same(kernel, feeds, got) -> None:
    want = polyc.interpret(kernel, feeds)
    assert np.isnan(want["top"][1:]).all() and np.isnan(want["low"][1:]).all()
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_host_c_propagates_nan():
    kernel, feeds = _kernel_and_input()
    _same(kernel, feeds, polyc.build(kernel)(**feeds))


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_the_accelerator_propagates_nan(monkeypatch):
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    kernel, feeds = _kernel_and_input()
    _same(kernel, feeds, polyc.compile(kernel, "edge-npu")(feeds))


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_mlir_propagates_nan():
    from codegen.mlir.host import build_many

    kernel, feeds = _kernel_and_input()
    (module,) = build_many([kernel])
    _same(kernel, feeds, module(feeds))
