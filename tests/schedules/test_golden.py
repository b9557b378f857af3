"""Golden C for scheduled kernels (``pytest --update-golden`` rewrites them)."""

from __future__ import annotations

import schedules as S
from codegen.host import generate
from polyc.ops import polybench as ex
from tests.support.sched import jacobi_time_tiled


def test_golden_tiled_matmul(golden):
    k = S.tile(ex.matmul(None), "S1", {"i": 32, "j": 32, "k": 32})
    golden("sched_tiled_matmul.c", generate(S.parallel(k, "S1_t")).text)


def test_golden_fused_producer_consumer(golden):
    k = S.fuse(ex.producer_consumer(None), ["S0", "S1"])
    golden("sched_fused_producer_consumer.c", generate(k).text)


def test_golden_skewed_tiled_jacobi2d(golden):
    _, k = jacobi_time_tiled(None, None, "float32", size=16)
    golden("sched_time_tiled_jacobi2d.c", generate(k).text)
