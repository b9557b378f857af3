"""Every op of the library and the multi-op examples, compiled by the accelerator
scheduler (placed, tensorized) on tiny, edge-npu and datacenter, against the
interpreter on the untransformed kernel.

The default run compiles each batch of ops (and each example) on one config, the
configs taking turns, so that every op and every config is covered within the
test-time budget; ``-m slow`` runs every batch and example on every config.
"""

from __future__ import annotations

import math

import pytest

import polyc
from polyc import compute as pc
from polyc.ops import nn
from tests.support import placecheck as P

BATCH = 5
TABLE = {**P.OPS, **P.INT8}  # int8 contractions must be exact (int32 accumulators)
NAMES = sorted(TABLE)
BATCHES = [NAMES[i : i + BATCH] for i in range(0, len(NAMES), BATCH)]
CONFIG_ORDER = ("tiny", "edge-npu", "datacenter")


def _run(ops: dict, config: str, name: str, rng) -> polyc.Compiled:
    kernel, data = P.batch(name, ops, rng)
    compiled = polyc.compile(kernel, config=config)
    got, report = compiled.run(data)
    P.check(kernel, got, data, f"{name} on {config}")
    assert report.mode == "placed"
    return compiled


def test_the_table_covers_every_op_of_the_library():
    library = {n for n in polyc.ops.__all__ if n not in ("nn", "t", "quant")}
    assert set(P.OPS) == library


@pytest.mark.parametrize("index", range(len(BATCHES)))
def test_every_op_placed_equals_the_interpreter(index, rng):
    names = BATCHES[index]
    config = CONFIG_ORDER[index % 3]
    compiled = _run({n: TABLE[n] for n in names}, config, f"ops{index}", rng)
    notes = [
        lc.note
        for lc in compiled.choice.layers
        if lc.candidate is None and not lc.extra_cycles  # a gather: indirect DMA
    ]
    assert not notes, notes  # every layer of the library is placed


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIG_ORDER)
@pytest.mark.parametrize("index", range(len(BATCHES)))
def test_every_op_on_every_config(index, config, rng):
    _run({n: TABLE[n] for n in BATCHES[index]}, config, f"ops{index}", rng)


# multi-op examples ------------------------------------------------------------------


def _cnn_block():
    x = pc.placeholder("x", (2, 3, 9, 7))
    w = pc.placeholder("w", (5, 3, 3, 3))
    b = pc.placeholder("bias", (5,))
    fc = pc.placeholder("fc", (4, 5 * 5 * 4))
    fcb = pc.placeholder("fcb", (4,))
    y = nn.relu(nn.conv2d(x, w, b, stride=1, padding=1))
    p = nn.max_pool2d(y, 2, ceil_mode=True)
    z = nn.gelu(nn.linear(nn.flatten(p, 1), fc, fcb))
    return pc.kernel("cnn_block", [y, z])


def _attention():
    q = pc.placeholder("q", (2, 5, 8))
    k = pc.placeholder("k", (2, 7, 8))
    v = pc.placeholder("v", (2, 7, 3))
    scores = nn.mul(nn.batch_matmul(q, nn.transpose(k, 1, 2)), 1 / math.sqrt(8))
    return pc.kernel("attention", [nn.batch_matmul(nn.softmax(scores, dim=-1), v)])


def _mlp_residual():
    x = pc.placeholder("x", (3, 6))
    w1 = pc.placeholder("w1", (10, 6))
    w2 = pc.placeholder("w2", (6, 10))
    g = pc.placeholder("g", (6,))
    h = nn.linear(nn.gelu(nn.linear(x, w1), approximate="tanh"), w2)
    return pc.kernel("mlp_residual", [nn.layer_norm(nn.add(x, h), 6, weight=g)])


def _demo_block():
    from polyc.demo import mlp_block

    return mlp_block(tokens=8, width=16, hidden=24)


def _two_mm():
    from polyc.ops.polybench import two_mm

    return two_mm(12)


def _producer_consumer():
    from polyc.ops.polybench import producer_consumer

    return producer_consumer(24)


EXAMPLES = {
    "cnn_block": _cnn_block,
    "attention": _attention,
    "mlp_residual": _mlp_residual,
    "demo_mlp_block": _demo_block,
    "two_mm": _two_mm,
    "producer_consumer": _producer_consumer,
}


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_multi_op_examples_equal_the_interpreter(index, rng):
    name = sorted(EXAMPLES)[index]
    _example(name, CONFIG_ORDER[index % 3], rng)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIG_ORDER)
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_multi_op_examples_on_every_config(example, config, rng):
    _example(example, config, rng)


def _example(example: str, config: str, rng) -> None:
    kernel = EXAMPLES[example]()
    data = {}
    for a in kernel.free_inputs:
        values = rng.standard_normal(a.concrete_shape({})) * 0.5
        data[a.name] = values.astype(a.dtype.numpy)
    compiled = polyc.compile(kernel, config=config)
    got, report = compiled.run({n: v.copy() for n, v in data.items()})
    P.check(kernel, got, data, f"{example} on {config}")
    assert report.mode == "placed" and report.cycles > 0
