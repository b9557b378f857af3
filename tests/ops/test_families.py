"""The op library's conditions, scans, index reductions, group norms and
interpolation on their own: numbers against numpy, the scan's dependence, errors."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import ArgumentError, DTypeError, IllegalTransformError, ShapeError
from polyc import compute as pc
from polyc.ops import nn
from polyc.ops.resize import pieces, tables
from schedules.marks import parallel

rng = np.random.default_rng(15)


def ph(name, shape, dtype="float32"):
    return pc.placeholder(name, shape, dtype)


def run(outputs, **inputs):
    kernel = pc.kernel("k", outputs)
    return kernel, polyc.interpret(kernel, inputs)


def test_comparisons_and_logic_make_bool_tensors():
    x = ph("x", (3, 4))
    y = ph("y", (4,))
    gt = nn.gt(x, y, name="gt")
    both = nn.logical_and(gt, nn.lt(x, 1.0), name="both")
    w = nn.where(both, x, 0.0, name="w")
    a = rng.standard_normal((3, 4), dtype=np.float32)
    b = rng.standard_normal(4, dtype=np.float32)
    _, out = run([gt, both, w], x=a, y=b)
    assert out["gt"].dtype == np.bool_
    np.testing.assert_array_equal(out["both"], (a > b) & (a < 1))
    np.testing.assert_array_equal(out["w"], np.where((a > b) & (a < 1), a, 0))


def test_cast_to_bool_is_non_zero_and_back():
    x = ph("x", (5,))
    flag = nn.cast(x, "bool", name="flag")
    back = nn.cast(flag, "float32", name="back")
    a = np.float32([0, -0.0, 0.5, -2, 0])
    _, out = run([flag, back], x=a)
    np.testing.assert_array_equal(out["flag"], a != 0)
    np.testing.assert_array_equal(out["back"], (a != 0).astype(np.float32))


def test_cumsum_is_a_scan_whose_dependence_schedules_respect():
    x = ph("x", (6, 4))
    y = nn.cumsum(x, 0, name="y")
    kernel, out = run([y], x=np.arange(24, dtype=np.float32).reshape(6, 4))
    np.testing.assert_array_equal(out["y"], np.cumsum(np.arange(24.0).reshape(6, 4), 0))
    # the scan dim carries a flow dependence: it cannot run in parallel
    with pytest.raises(
        IllegalTransformError,
        match=r"flow dependence S1\[i0=1, i1=0\] -> S1\[i0=2, i1=0\] on y",
    ):
        parallel(kernel, "S1")


def test_argmax_takes_the_first_of_equal_maxima():
    x = ph("x", (2, 5))
    i = nn.argmax(x, 1, name="i")
    j = nn.argmin(x, None, name="j")
    a = np.float32([[1, 3, 3, 0, 3], [2, 2, 2, 2, 2]])
    _, out = run([i, j], x=a)
    assert out["i"].dtype == np.int64
    np.testing.assert_array_equal(out["i"], [1, 0])
    assert out["j"] == 3


@pytest.mark.parametrize("target", ["interpret", "host"])
def test_argmax_and_argmin_pick_the_first_nan(target):
    x = ph("x", (2, 5))
    kernel = pc.kernel("k", [nn.argmax(x, 1, name="i"), nn.argmin(x, 1, name="j")])
    a = np.float32([[1, np.nan, 3, np.nan, 0], [3, 2, 5, 1, np.nan]])
    run_ = polyc.interpret if target == "interpret" else polyc.build(kernel)
    out = run_(kernel, {"x": a}) if target == "interpret" else run_({"x": a})
    np.testing.assert_array_equal(out["i"], [1, 4])
    np.testing.assert_array_equal(out["j"], [1, 4])


def test_group_norm_matches_numpy():
    x = ph("x", (2, 4, 3))
    y = nn.group_norm(x, 2, name="y")
    a = rng.standard_normal((2, 4, 3), dtype=np.float32)
    _, out = run([y], x=a)
    g = a.reshape(2, 2, 6)
    ref = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out["y"], ref.reshape(2, 4, 3), rtol=1e-5, atol=1e-5)


def test_bilinear_x2_is_one_definition_per_residue_and_border():
    index, weight = tables(4, 8, "linear", False)
    runs = pieces(index, weight, 1, 2)
    # the first and last outputs are clamped; the rest follow two residues
    assert len(runs) == 4
    assert index[0].tolist() == [0, 1] and weight[0].tolist() == [1.0, 0.0]
    assert index[-1].tolist() == [3, 3]


def test_errors_name_the_argument_and_the_fix():
    with pytest.raises(
        ShapeError, match=r"num_groups=3 does not divide the 4 channels"
    ):
        nn.group_norm(ph("x", (1, 4, 2)), 3)
    with pytest.raises(
        ArgumentError, match=r"instance_norm: x has shape \(1, 4\) but instance_norm"
    ):
        nn.instance_norm(ph("x", (1, 4)))
    with pytest.raises(ArgumentError, match=r"mode='nearest' is not supported"):
        nn.interpolate(ph("x", (1, 1, 2, 2)), (4, 4), mode="nearest")
    with pytest.raises(DTypeError, match=r"where: c is float32 but where accepts bool"):
        nn.where(ph("c", (2,)), ph("a", (2,)), 0.0)
    with pytest.raises(DTypeError, match=r"bool tensors combine with True and False"):
        nn.eq(nn.gt(ph("a", (2,)), 0.0), 1)
