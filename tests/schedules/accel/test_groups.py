"""Fusion across contractions chosen with the cost model (schedules/accel/groups.py)."""

from __future__ import annotations

import torch
from torch import nn

import polyc
from accelerator.hardware.config import load_config
from schedules.accel.bias import defer_all
from schedules.accel.groups import fusion_cuts
from schedules.accel.layers import split


def _kernel(model, *shape):
    torch.manual_seed(0)
    kernel = polyc.from_torch(model.eval(), (torch.randn(*shape),))
    return defer_all(kernel)  # as the scheduler sees it


def test_a_convolution_and_a_depthwise_one_are_kept_apart():
    """Fused (legal: with the biases in the epilogues the two share their batch
    loop) they ran 124,494 cycles on edge-npu, apart 59,528: the depthwise layer
    wants the vector unit and tiles of its own."""
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1, groups=32),
        nn.ReLU(),
    )
    kernel = _kernel(model, 1, 3, 32, 32)
    (fused,) = [layer for layer in split(kernel) if not layer.opaque]
    assert len(fused.stmts) == 6
    cuts = fusion_cuts(kernel, load_config("edge-npu"), True, {})
    assert cuts == {0, fused.children[3]}  # the depthwise's init starts a layer
    compiled = polyc.compile(kernel, config="edge-npu")
    assert len(compiled.choice.layers) == 2


def test_linear_layers_whose_intermediates_fit_stay_fused():
    """Four 32-wide linear layers on 8 rows: fused, no intermediate goes to DRAM
    (2,196 cycles against 3,560 layer by layer on edge-npu)."""
    layers = []
    for _ in range(4):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    kernel = _kernel(nn.Sequential(*layers), 8, 32)
    assert fusion_cuts(kernel, load_config("edge-npu"), True, {}) == {0}
    compiled = polyc.compile(kernel, config="edge-npu")
    assert len(compiled.choice.layers) == 1


def test_a_pool_after_a_stem_convolution_starts_a_layer_where_that_pays():
    """ResNet's stem, a 7x7/2 convolution of 3 channels with its ReLU and a 3x3/2
    max pool. The pool reads a window of the ReLU's rows, so fused with it the
    layer keeps the rows whole and tiles only the 64 output channels, whose
    accumulator and ReLU (256 KiB each) fit datacenter's 512 KiB local memory
    16 channels at a time: 16 of the array's 64 columns, 51,397 cycles. Cut
    before the pool, the convolution tiles its rows with all 64 channels (17,368
    cycles with the pool as a layer of its own). On edge-npu, whose array is 16
    wide, the ReLU's round trip through DRAM costs more than fusing saves: the
    layer stays whole."""
    model = nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
    )
    kernel = _kernel(model, 1, 3, 64, 64)
    (fused,) = [layer for layer in split(kernel) if not layer.opaque]
    pool = next(i for i, s in enumerate(fused.stmts) if s.target.array == "out")
    cuts = fusion_cuts(kernel, load_config("datacenter"), True, {})
    assert cuts == {0, fused.children[pool]}  # the pool's init starts a layer
    assert fusion_cuts(kernel, load_config("edge-npu"), True, {}) == {0}
    compiled = polyc.compile(kernel, config="datacenter")
    conv = compiled.choice.layers[0].candidate
    assert len(compiled.choice.layers) == 2
    assert 64 in dict(conv.sizes).values()  # every output channel per tile


def test_a_merge_is_modelled_at_the_depth_its_layer_gets():
    """The stem above followed by a 3x3 convolution: the fused group runs over its
    batch loop alone (the second convolution reads every channel of the pool),
    and the stem merged with its pool was modelled at that depth, with no channel
    tile: 177,734 predicted cycles on edge-npu where the layer, at the depth the
    split gives it, takes 159,830 (and runs 157,591 in ResNet-18); the pool was
    cut off for it (171,513 cycles simulated)."""
    model = nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
    )
    kernel = _kernel(model, 1, 3, 64, 64)
    (fused,) = [layer for layer in split(kernel) if not layer.opaque]
    pool = next(i for i, s in enumerate(fused.stmts) if s.target.array == "max_pool2d")
    cuts = fusion_cuts(kernel, load_config("edge-npu"), True, {})
    assert fused.children[pool] not in cuts


def test_a_merge_is_credited_the_loads_it_hides_under_the_layer_before(monkeypatch):
    """A transformer block on datacenter: the copies that merge the attention's
    heads (a permute and a reshape) and the out-projection after them. Apart,
    the copies' layer waits for the attention and the projection's 64 KiB of
    weights load after it; merged, they load under the attention's last tile.
    The search compared the merge (1,159 predicted cycles) with the two apart
    (64 + 1,095, less the 4 cycles of the projection's loads under the copies)
    without the credit of the layer before, and kept them apart: 10,902
    simulated cycles for the model against 10,254 merged. (The scheduler now
    folds those copies into the attention's output, schedules/accel/fold.py;
    the fold is left out here, so that the copies stay to be merged.)"""
    from polyc.frontends.torch.models import TransformerBlock
    from schedules.accel import fold

    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    monkeypatch.setattr(fold, "fold_all", lambda kernel: kernel)
    torch.manual_seed(0)
    block = TransformerBlock(128, 4, 512).eval()
    kernel = polyc.from_torch(block, (torch.randn(1, 16, 128),))
    compiled = polyc.compile(kernel, config="datacenter")
    arrays = [{s.target.array for s in lc.layer.stmts} for lc in compiled.choice.layers]
    (projection,) = [a for a in arrays if "linear_1" in a]
    assert {"permute", "reshape"} <= projection
