"""The cost model's DMA descriptor count against a per-box reading of its rule."""

from __future__ import annotations

import numpy as np

from schedules.accel.evaluate import descriptors


def _one(ext: list[int], shape: list[int], max_dims: int) -> int:
    """Descriptors of one box: merge each dimension into the kept one inside it
    when that one is covered whole, skip extents of 1; the kept dimensions past
    ``max_dims`` (innermost first) take one descriptor per element."""
    kept: list[int] = []
    full = False
    for e, n in zip(reversed(ext), reversed(shape)):
        e = min(e, n)
        if e <= 1:
            continue
        if kept and full:
            kept[-1] *= e
        else:
            kept.append(e)
        full = e >= n
    return int(np.prod(kept[max_dims:], dtype=np.int64)) if kept else 1


def test_descriptors_match_the_rule_box_by_box():
    rng = np.random.default_rng(0)
    for _ in range(300):
        nd = int(rng.integers(1, 6))
        shape = [int(rng.integers(1, 9)) for _ in range(nd)]
        boxes = rng.integers(1, 12, size=(int(rng.integers(1, 20)), nd))
        max_dims = int(rng.integers(0, 5))
        ext = [boxes[:, d].astype(float) for d in range(nd)]
        got = descriptors(ext, shape, max_dims)
        want = [_one(list(b), shape, max_dims) for b in boxes]
        assert got.tolist() == want


def test_a_copy_of_no_dimension_is_one_descriptor():
    assert descriptors([], (), 2).tolist() == [1.0]
