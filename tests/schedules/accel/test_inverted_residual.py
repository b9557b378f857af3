"""An inverted residual block fused along its hidden channels
(schedules/accel/mlp.py): the expansion, its ReLU6, the depthwise convolution,
its ReLU6 and the projection as one MLP core, the depthwise convolution run
channel by channel like an element-wise op, so each tile of hidden channels
stays on chip from the expansion to the projection. Found by dataflow, chosen
by the cost model, and computing what the interpreter does."""

from __future__ import annotations

import pytest
import torch

import polyc
from polyc.frontends.torch.models import InvertedResidual, randomize_batch_norms
from polyc.studies.tensor_dram import dram_by_tensor
from schedules.accel import bias, mlp, space

#: predicted over simulated cycles of the whole program
TOLERANCE = 0.10


def _block():
    torch.manual_seed(0)
    block = randomize_batch_norms(InvertedResidual(32, 32)).eval()
    x = torch.randn(1, 32, 16, 16)
    return polyc.from_torch(block, (x,)), {"arg0": x.numpy()}


def _core_layer(compiled):
    (lc,) = [lc for lc in compiled.choice.layers if "fused along the hidden" in lc.note]
    return lc


def test_the_block_is_a_core_through_its_depthwise_convolution():
    """The projection reads the depthwise output at ``h + rh`` with a filter
    row ``rh`` that is 0 alone: a plain ``h``, so the chain back through the
    ReLU6, the depthwise convolution (channel by channel) and the ReLU6 to the
    expansion is a core."""
    kernel, _ = _block()
    (core,) = mlp.cores(bias.defer_all(kernel))
    assert core.first == ("S1",) and core.second == "S7"
    assert core.depthwise == ("S4",)
    assert core.order[:2] == ("n", "rc")  # the hidden channels right after the batch


def test_the_depthwise_split_is_searched_only_where_it_may_decide(monkeypatch):
    """Whether to keep the depthwise convolution whole for the core weighs the
    fused core (79,238 cycles predicted on edge-npu) against the layers apart
    (118,588) less what splitting the depthwise layer across the engines
    saves. A bound on that saving (the layer unsplit less its engine bound)
    decides here, so no split is searched: the splits searched for every
    depthwise layer took 7.6 of hf-mobilenetv2's 17 s of scheduling."""
    from accelerator.hardware.config import load_config
    from schedules.accel import scheduler, share

    kernel, _ = _block()
    spec = load_config("edge-npu")
    searched, seen = [], {}
    plain_saving, plain_kept = share.saving, mlp.depthwise_kept

    def saving(k, stmt, *args):
        searched.append(stmt)
        return plain_saving(k, stmt, *args)

    def kept(k, *args):
        seen["kernel"], seen["kept"] = k, plain_kept(k, *args)
        return seen["kept"]

    monkeypatch.setattr(share, "saving", saving)
    monkeypatch.setattr(mlp, "depthwise_kept", kept)
    scheduler.schedule(kernel, spec)
    assert seen["kept"] == {"S4"} and searched == []
    bound = share.saving_bound(seen["kernel"], "S4", spec)
    assert bound >= plain_saving(seen["kernel"], "S4", spec) > 0


@pytest.fixture(scope="module")
def edge_block():
    """The block on edge-npu, float32: as the scheduler chooses it (fused), and
    with the depthwise convolution not passed through (the layers as on main:
    the depthwise one split across the MAC array and the vector unit)."""
    kernel, feeds = _block()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYC_COMPILE_CACHE", "0")
        fused = polyc.compile(kernel, config="edge-npu", verify=True)
        fused_run = fused.run(**feeds)
        mp.setattr(mlp, "_depthwise_input", lambda _stmt: None)
        apart = polyc.compile(kernel, config="edge-npu")
        apart_run = apart.run(**feeds)
    return fused, fused_run, apart, apart_run


def test_the_block_fuses_along_its_hidden_channels_and_runs_faster(edge_block):
    """One layer holds the expansion, the depthwise convolution on the vector
    unit and the projection, with the expansion a tile of hidden channels
    ahead; the expanded tensors never reach DRAM. 81,764 cycles against
    93,516 as three layers (``verify=True``: the numbers are the
    interpreter's)."""
    fused, (_, report), _, (_, apart_report) = edge_block
    lc = _core_layer(fused)
    names = {s.name for s in lc.layer.stmts}
    assert {"S1", "S4", "S7"} <= names
    engines = dict(lc.candidate.structure.engine)
    assert engines["S1"] == engines["S7"] == "mac" and engines["S4"] == "vector"
    assert lc.candidate.structure.ahead  # the expansion a tile ahead
    moved = dict(dram_by_tensor(fused, report).largest(50))
    assert not {n for n in moved if n.startswith("hardtanh")}, moved
    assert report.cycles < 0.9 * apart_report.cycles
    predicted = fused.choice.predicted_cycles
    assert abs(predicted / report.cycles - 1) <= TOLERANCE


def test_the_projection_issues_one_call_per_tile_of_pixels(edge_block):
    """Under the cap on engine combinations the projection keeps its mapping
    with M over the rows and columns of the image (one call a tile), not only
    its first (one call a row, 16 a tile, whose queue held up the scalar
    core's next vector commands: 92,422 cycles, 81,764 with one call)."""
    fused, *_ = edge_block
    groups = dict(_core_layer(fused).candidate.structure.groups)
    assert len(groups["S7"][0]) == 2, groups["S7"]


def test_the_vector_unit_waiting_behind_a_full_mac_queue_is_charged(monkeypatch):
    """With the projection's calls one per row (offered alone), the scalar
    core issues the next tile's vector work only once all but ``queue_depth``
    of them ran: the vector unit idled about 1,024 cycles a tile. The model
    charges that wait (``Work.mid_wait``): predicted 79,238 against 92,422
    simulated without it."""
    kernel, feeds = _block()
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    plain = space.mac_groups

    def rows_only(layer, stmt, rows=None):
        out = plain(layer, stmt, rows)
        return [g for g in out if len(g[0][0]) == 1] if stmt.name == "S7" else out

    monkeypatch.setattr(space, "mac_groups", rows_only)
    compiled = polyc.compile(kernel, config="edge-npu")
    _, report = compiled.run(**feeds)
    lc = _core_layer(compiled)
    assert len(dict(lc.candidate.structure.groups)["S7"][0]) == 1
    predicted = compiled.choice.predicted_cycles
    assert abs(predicted / report.cycles - 1) <= TOLERANCE, (predicted, report.cycles)
