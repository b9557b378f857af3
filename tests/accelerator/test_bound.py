"""The engine bound (accelerator/hardware/bound.py): hand-computed cases, the exact
maximum of the dual against a fine grid, and real simulated layers never below it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import polyc
from accelerator import load_config
from accelerator.hardware.bound import ENGINES, Work, _best_weights, engine_bound
from accelerator.hardware.roofline import roofline
from polyc import ops
from polyc.studies.sweep.task import make_inputs


@pytest.fixture(scope="module")
def edge():
    spec = load_config("edge-npu")
    # the numbers the hand computations below use
    assert (spec.vector.lanes, spec.vector.cycles["transcendental"]) == (16, 16)
    assert (spec.scalar.statement_cycles, spec.scalar.cycles["transcendental"]) == (
        2,
        40,
    )
    assert min(m.latency_cycles for m in spec.memory) == 2
    assert (spec.mac_array.rows, spec.mac_array.cols) == (16, 16)
    assert spec.mac_array.dataflow == "output_stationary"
    assert spec.mac_array.dtypes["float16"].macs_per_cycle == 1.0
    assert spec.dram.bytes_per_cycle == 16.0
    return spec


def test_an_exp_is_bound_by_the_vector_unit_and_the_scalar_core(edge):
    # 16,384 exps: the vector unit takes 16 cycles per 16 lanes (1 per element),
    # the scalar core 2 + 40 + 2 (an SRAM read) + 1 = 45; together 1 + 1/45 a cycle
    eb = engine_bound(ops.exp(input=(64, 256)), edge, {})
    assert eb.compute_cycles == pytest.approx(16384 * 45 / 46)
    assert eb.cycles == math.ceil(16384 * 45 / 46) == 16028
    assert eb.memory_cycles == 64 * 256 * 4 * 2 / 16  # 8,192: below it
    assert eb.bound == "vector+scalar"
    assert eb.weights == pytest.approx((0.0, 45 / 46, 1 / 46))


def test_a_depthwise_conv_reaches_a_fraction_of_the_mac_array(edge):
    """16 channels of 10x10, 3x3 taps, padded, float16. The update runs 16 * 28 * 28
    = 12,544 useful MACs (28 taps land inside per row of 10 outputs): on the
    output-stationary array a fold holds 16 outputs on its rows, one channel on
    its columns (the weights have no output-channel dimension of their own) and
    streams the 9 taps, but folds start 16 cycles apart, and a channel's 100
    outputs take 7 folds of 16 rows: 7 * 16 cycles per 900 MACs. The vector unit
    takes 2 cycles (mul, add) per 16 MACs, the scalar core 2 + 1 + 1 + 2 + 1 = 7
    per MAC. The bias init (1,600 copies of the bias) is data movement the DMA
    does (it used to count 1/16 cycle each on the vector unit). At the optimum
    every engine shares the update: T = 28a/225 = b / 8 = 7c with a + b + c =
    12,544, T = 12,544 * 28 / 453 = 775.3; less the MAC array's weight
    (225 / 453) times its 16-cycle floor: 768."""
    k = ops.conv2d(
        input=(1, 16, 10, 10),
        weight=(16, 1, 3, 3),
        padding=1,
        groups=16,
        dtype="float16",
    )
    eb = engine_bound(k, edge, {})
    assert sorted(w.instances for w in eb.work) == [12544]
    update = max(eb.work, key=lambda w: w.instances)
    assert update.cycles == pytest.approx((7 * 16 / 900, 2 / 16, 7))
    assert eb.weights == pytest.approx((225 / 453, 224 / 453, 4 / 453))
    assert eb.compute_cycles == pytest.approx(12544 * 28 / 453 - 225 / 453 * 16)
    assert eb.cycles == 768
    # bytes: input, output 1,600 x 2 each, weights 144 x 2, bias 16 x 2
    assert eb.memory_cycles == (3200 + 3200 + 288 + 32) / 16
    # the roofline counts the MACs at the array's peak only: 12,544 / 256 = 49,
    # so DRAM's 420 cycles set it
    assert roofline(k, edge, {}).cycles == 420


@pytest.mark.parametrize(
    "work, want",
    [
        # one engine: its cycles
        ([Work("s", 100, (None, None, 2.0))], 200.0),
        # one rate per engine (cycles per instance 1, 2, 6): the work over the
        # sum of the rates, 120 / (1 + 1/2 + 1/6) = 72
        ([Work("s", 120, (1.0, 2.0, 6.0))], 72.0),
        # work only {vector, scalar} can do, work only {mac, vector} can do, all
        # at one cycle: 200 / 3 (each pair alone would only need 50)
        (
            [Work("a", 100, (None, 1.0, 1.0)), Work("b", 100, (1.0, 1.0, None))],
            200 / 3,
        ),
        # the vector unit's own 100 plus 300 it shares with the MAC array: the
        # pair's 400 / 2
        (
            [Work("a", 100, (None, 1.0, None)), Work("b", 300, (1.0, 1.0, None))],
            200.0,
        ),
        # the MAC array is 4x faster on the shared work, so it takes all but what
        # levels the vector unit's own 100: 100 + b = (300 - b) / 4... b < 0, so
        # the MAC array does all 300 in 75 and the vector unit's 100 binds
        (
            [Work("a", 100, (None, 1.0, None)), Work("b", 300, (0.25, 1.0, None))],
            100.0,
        ),
    ],
)
def test_the_bound_of_hand_made_work(work, want):
    value, weights = _best_weights(tuple(work))
    assert value == pytest.approx(want)
    assert sum(weights) == pytest.approx(1.0) and min(weights) >= 0.0


def test_the_floor_comes_off_once_in_proportion_to_the_mac_arrays_weight():
    work = (Work("a", 100, (1.0, None, None)),)
    assert _best_weights(work, slack=16.0)[0] == pytest.approx(84.0)


def test_the_maximum_is_exact_against_a_fine_grid():
    """g is concave and linear between the lines where two engines tie, so the
    vertex search finds its maximum; a grid of weights never beats it and comes
    within its own step of it."""
    rng = np.random.default_rng(7)
    steps = 300
    grid = np.array(
        [
            (i / steps, j / steps, (steps - i - j) / steps)
            for i in range(steps + 1)
            for j in range(steps + 1 - i)
        ]
    )
    for _ in range(20):
        work = []
        for n in range(int(rng.integers(1, 6))):
            cycles = [float(x) for x in rng.uniform(0.1, 10.0, 3)]
            if rng.random() < 0.5:
                cycles[0] = None
            work.append(Work(f"s{n}", int(rng.integers(1, 1000)), tuple(cycles)))
        value, _ = _best_weights(tuple(work))
        cost = np.array([[w.instances * (c or np.inf) for c in w.cycles] for w in work])
        finite = np.isfinite(cost)
        known = np.where(finite, cost, 0.0)
        scaled = np.where(finite[None], grid[:, None, :] * known[None], np.inf)
        g = scaled.min(axis=2).sum(axis=1)
        assert g.max() <= value + 1e-6
        assert value - g.max() <= known.max(axis=1).sum() * 2 / steps


LAYERS = {
    "softmax": lambda: ops.softmax(input=(32, 128)),
    "layer_norm": lambda: ops.layer_norm(input=(32, 128), normalized_shape=(128,)),
    "depthwise": lambda: ops.conv2d(
        input=(1, 16, 12, 12), weight=(16, 1, 3, 3), padding=1, groups=16
    ),
    "conv": lambda: ops.conv2d(input=(1, 8, 12, 12), weight=(16, 8, 3, 3), padding=1),
    "matmul": lambda: ops.matmul(64, 64, 64, "float16"),
}


@pytest.mark.parametrize(
    "name, config",
    [*itertools.product(LAYERS, ["edge-npu"]), ("softmax", "datacenter")],
)
def test_no_simulated_layer_beats_its_engine_bound(name, config):
    kernel = LAYERS[name]()
    compiled = polyc.compile(kernel, config=config)
    _, report = compiled.run(make_inputs(kernel, "random", seed=0))
    eb = report.engine_bound
    assert eb is not None and report.engine_bound_cycles == eb.cycles
    assert report.cycles >= eb.cycles, f"{name} beats its engine bound"
    assert report.engine_ratio == report.cycles / eb.cycles
    if name in ("softmax", "layer_norm"):
        # the MAC array can do none of it: the bound is the vector unit's
        assert eb.weights[ENGINES.index("mac_array")] == 0.0
        assert eb.cycles > report.roofline_cycles
    if name == "softmax":  # an exp per element: well above the DRAM roofline
        assert eb.cycles > 2 * report.roofline_cycles
    data = report.to_dict()
    assert data["engine_bound_cycles"] == eb.cycles
    assert data["engine_bound"]["bound"] == eb.bound
    text = str(report)
    assert f"engine bound   {eb.cycles:>16,}" in text
    assert f"engine ratio   {report.engine_ratio:>16,.2f}x" in text


def _fewest_folds(x: int, y: int, r: int, c: int) -> int:
    """The fewest product sets of at most ``r`` rows times ``c`` columns that
    cover an ``x`` by ``y`` grid, by search: the first cell not yet covered
    is in some fold, and a fold may as well hold as many rows and columns as
    it can."""
    from itertools import combinations

    cells = frozenset((i, j) for i in range(x) for j in range(y))
    rows = [set(s) for s in combinations(range(x), min(r, x))]
    cols = [set(s) for s in combinations(range(y), min(c, y))]

    def cover(left: frozenset, depth: int) -> bool:
        if not left:
            return True
        if depth == 0:
            return False
        i, j = min(left)
        return any(
            cover(left - {(a, b) for a in rs for b in cs}, depth - 1)
            for rs in rows
            if i in rs
            for cs in cols
            if j in cs
        )

    depth = 0
    while not cover(cells, depth):
        depth += 1
    return depth


@pytest.mark.parametrize("r,c", [(1, 2), (2, 2), (2, 3), (3, 2)])
def test_spatial_folds_is_a_lower_bound_that_holds_whole_tiles(r, c):
    """No cover of the grid by folds takes fewer than spatial_folds; it is exact
    where the rows or the columns divide, and above the product of the extents
    over the array's size wherever a fold is left part empty."""
    from accelerator.hardware.bound import spatial_folds

    for x in range(1, 6):
        for y in range(1, 5):
            bound = spatial_folds(x, y, r, c)
            fewest = _fewest_folds(x, y, r, c)
            assert bound <= fewest + 1e-9, (x, y, r, c)
            if x % r == 0 or y % c == 0:
                assert bound == pytest.approx(fewest), (x, y, r, c)
            assert bound >= max(x / r, 1) * max(y / c, 1) - 1e-9
    assert spatial_folds(17, 256, 16, 16) == 32  # ViT's tokens on edge-npu


def test_count_points_remembers_a_count_by_the_sets_text():
    import islpy as isl

    from accelerator.hardware import roofline

    # a padded convolution's (h, kh) pair: not a box, counted by groups
    text = "{ S[h, kh, w] : 0 <= h < 30 and 0 <= kh < 3 and 1 <= h + kh <= 30 and 0 <= w < 7 }"
    s = isl.Set(text)
    roofline._COUNTS.pop(str(s), None)
    first = roofline.count_points(s)
    assert first == s.count_val().to_python() == (30 * 3 - 2) * 7
    assert roofline._COUNTS[str(s)] == first
    # the same set built again (another object) is the count remembered
    assert roofline.count_points(isl.Set(text)) == first


def test_no_run_beats_the_bound_of_a_program_with_a_view_copy():
    """A transpose feeding an exp, float32 on HW-A (whose MAC array takes int8
    only: the vector unit does the work). The frontend writes the transpose
    as a copy statement, which the scheduler inlines (the add reads through
    it): counted as a vector pass, the copy made the "bound" higher than the
    simulated run (hf-mobilenetv2 on HW-A: 311,900 cycles against 321,653).
    A copy is the DMA's work, so the bound leaves it out."""
    torch = pytest.importorskip("torch")

    class Transposed(torch.nn.Module):
        def forward(self, x):
            return torch.exp(x.transpose(1, 2))

    x = torch.randn(4, 64, 96)
    compiled = polyc.compile(polyc.from_torch(Transposed(), (x,)), config="hw-a")
    out, report = compiled.run(arg0=x.numpy())
    want = torch.exp(x.transpose(1, 2)).numpy()
    np.testing.assert_allclose(next(iter(out.values())), want, rtol=1e-6)
    assert len(report.engine_bound.work) == 1  # the exp; the copy is data movement
    assert report.engine_bound.bound == "vector+scalar"
    assert report.cycles >= report.engine_bound.cycles
