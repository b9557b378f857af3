"""max/avg/adaptive pooling and nearest upsampling against torch (padding, dilation,
ceil_mode, count_include_pad), interpreted and compiled."""

from __future__ import annotations

import torch.nn.functional as F

from polyc.ops import nn
from tests.support.opcheck import Batch, f64

MAX_CASES = [
    ((1, 1, 1, 1), {"kernel_size": 1}),
    ((2, 3, 7, 6), {"kernel_size": 2}),
    ((1, 2, 9, 7), {"kernel_size": 3, "stride": 2, "padding": 1}),
    ((1, 2, 8, 9), {"kernel_size": (3, 2), "stride": (2, 1), "dilation": (2, 3)}),
    ((1, 2, 7, 6), {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
    ((2, 5, 5), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ((1, 1, 6, 5), {"kernel_size": 3, "stride": 3, "padding": 1, "dilation": 2}),
]
AVG_CASES = [
    ((1, 1, 1, 1), {"kernel_size": 1}),
    ((2, 3, 7, 6), {"kernel_size": 2}),
    ((1, 2, 9, 7), {"kernel_size": 3, "stride": 2, "padding": 1}),
    (
        (1, 2, 9, 7),
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    ),
    ((1, 2, 7, 6), {"kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": True}),
    (
        (2, 6, 5),
        {"kernel_size": 3, "stride": 2, "ceil_mode": True, "count_include_pad": False},
    ),
    ((1, 1, 5, 5), {"kernel_size": (3, 2), "padding": (1, 1), "divisor_override": 4}),
]
ADAPTIVE_CASES = [
    ((1, 1, 1, 1), 1),
    ((2, 3, 7, 6), 1),
    ((1, 2, 7, 6), (3, 4)),
    ((1, 2, 5, 9), (5, 2)),
    ((2, 8, 8), (None, 3)),
    ((1, 1, 3, 2), (5, 4)),  # upsampling: windows overlap
]


def test_max_pool2d(rng):
    b = Batch("max_pool", rng)
    for n, (shape, kw) in enumerate(MAX_CASES):
        x = b.randn(f"x{n}", shape)
        b.check(nn.max_pool2d(x, **kw), F.max_pool2d(f64(b[f"x{n}"]), **kw))
    i8 = b.randint("i8", (1, 2, 5, 5), -128, 128)
    b.check(nn.max_pool2d(i8, 3, 2, 1), F.max_pool2d(f64(b["i8"]), 3, 2, 1).numpy())
    b.run()


def test_avg_pool2d(rng):
    b = Batch("avg_pool", rng)
    for n, (shape, kw) in enumerate(AVG_CASES):
        x = b.randn(f"x{n}", shape)
        b.check(nn.avg_pool2d(x, **kw), F.avg_pool2d(f64(b[f"x{n}"]), **kw))
    h = b.randn("h", (1, 2, 6, 6), "float16")
    b.check(nn.avg_pool2d(h, 3, 2, 1), F.avg_pool2d(f64(b["h"]), 3, 2, 1))
    b.run()


def test_adaptive_pools_and_nearest_upsampling(rng):
    b = Batch("adaptive_pool", rng)
    for n, (shape, size) in enumerate(ADAPTIVE_CASES):
        x = b.randn(f"x{n}", shape)
        t = f64(b[f"x{n}"])
        b.check(nn.adaptive_avg_pool2d(x, size), F.adaptive_avg_pool2d(t, size))
        b.check(nn.adaptive_max_pool2d(x, size), F.adaptive_max_pool2d(t, size))
    x = b.randn("up", (1, 2, 3, 5))
    for kw in (
        {"size": (7, 4)},
        {"size": 6},
        {"scale_factor": (3, 1)},
        {"size": (2, 3)},
    ):
        ref = F.interpolate(f64(b["up"]), mode="nearest", **kw)
        b.check(nn.upsample_nearest2d(x, **kw), ref)
    b.run()
