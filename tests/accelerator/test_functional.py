"""The functional model: DMA, MAC tiles and vector ops equal numpy; violations stop.

Everything runs on real data in the runtime's memories, driven through its Python
bindings (``accelerator.sim.simulator.Simulator``).
"""

from __future__ import annotations

import numpy as np
import pytest

from accelerator.hardware.config import load_config
from accelerator.sim.simulator import Simulator
from codegen.accel.direct import build_runtime
from polyc.errors import SimulationError


@pytest.fixture(scope="module")
def rt():
    return build_runtime()


@pytest.fixture
def sim(rt):
    return Simulator(rt, load_config("tiny"))


def test_dma_strided_2d_and_transposed(sim, rng):
    a = rng.standard_normal((8, 10)).astype(np.float32)
    out = np.zeros((6, 4), dtype=np.float32)
    A, Out = sim.bind("A", a), sim.bind("Out", out)
    t = sim.alloc("l1", 0, 4 * 6 * 4, "t")
    # rows 2..5, every other column from 1 (1, 3, 5, 7, 9 and one more is too many)
    sim.dma((t, 0, [6, 1]), (A, 2 * 10 + 3, [10, 1]), [4, 6], 4)
    assert np.array_equal(sim.array(t, np.float32, (4, 6)), a[2:6, 3:9])
    # back out transposed: destination strides swapped
    sim.dma((Out, 0, [1, 4]), (t, 0, [6, 1]), [4, 6], 4)
    assert np.array_equal(out, a[2:6, 3:9].T)


def test_dma_strided_3d(sim, rng):
    a = rng.integers(-128, 127, size=(4, 5, 6)).astype(np.int8)
    out = np.zeros((2, 3, 4), dtype=np.int8)
    A, Out = sim.bind("A", a), sim.bind("Out", out)
    t = sim.alloc("l1", 0, 64, "t")
    # a[1:3, 0:5:2, 1:5]: a stride of two in the middle dimension
    sim.dma((t, 0, [12, 4, 1]), (A, 30 + 1, [30, 12, 1]), [2, 3, 4], 1)
    sim.dma((Out, 0, [12, 4, 1]), (t, 0, [12, 4, 1]), [2, 3, 4], 1)
    assert np.array_equal(out, a[1:3, 0:5:2, 1:5])
    report = sim.finish()
    # tiny's descriptors have 2 dimensions: the strided block needs 2 of them;
    # the contiguous copy back merges into one dimension
    assert report.dma_descriptors == 2 + 1
    assert report.dma_transfers == 2


def test_dma_negative_stride_reverses(sim):
    a = np.arange(12, dtype=np.int32)
    A = sim.bind("A", a)
    t = sim.alloc("l1", 0, 48, "t")
    sim.dma((t, 0, [1]), (A, 11, [-1]), [12], 4)
    assert np.array_equal(sim.array(t, np.int32, (12,)), a[::-1])


def _sequential(a, b, acc_dtype, c0=None):
    """C = c0 + A @ B accumulated in k order in acc_dtype, rounding every step."""
    m, n = a.shape[0], b.shape[1]
    c = np.zeros((m, n), acc_dtype) if c0 is None else c0.astype(acc_dtype)
    for kk in range(a.shape[1]):
        prod = a[:, kk : kk + 1].astype(acc_dtype) * b[kk : kk + 1, :].astype(acc_dtype)
        c = (c + prod.astype(acc_dtype)).astype(acc_dtype)
    return c


@pytest.mark.parametrize(
    "dtype,acc",
    [
        ("int8", "int32"),
        ("float16", "float16"),
        ("float16", "float32"),
        ("float32", "float32"),
    ],
)
def test_mac_tile_equals_numpy(sim, rng, dtype, acc):
    m, n, k = 7, 5, 9
    if dtype == "int8":
        a = rng.integers(-128, 128, size=(m, k)).astype(np.int8)
        b = rng.integers(-128, 128, size=(k, n)).astype(np.int8)
    else:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
    c0 = rng.integers(-50, 50, size=(m, n)).astype(acc)
    es, ea = np.dtype(dtype).itemsize, np.dtype(acc).itemsize
    A = sim.alloc("l1", 0, 1024, "A")
    B = sim.alloc("l1", 1024, 1024, "B")
    C = sim.alloc("l1", 2048, 1024, "C")
    sim.array(A, dtype, (m, k))[:] = a
    # B stored transposed: the view's strides read it as k x n
    sim.array(B, dtype, (n, k))[:] = b.T
    sim.array(C, acc, (m, n))[:] = c0
    sim.mac(
        m,
        n,
        k,
        (A, 0, k, 1),
        (B, 0, 1, k),
        (C, 0, n, 1),
        dtype=dtype,
        acc_dtype=acc,
        accumulate=True,
    )
    got = sim.array(C, acc, (m, n))
    want = _sequential(a, b, np.dtype(acc), c0)
    if dtype == "int8":
        want = c0.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64)
        assert np.array_equal(got, want.astype(np.int32))
    else:
        assert np.array_equal(got, want), np.abs(got - want).max()
    assert es and ea


def test_mac_without_accumulate_overwrites(sim, rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    A = sim.alloc("l1", 0, 256, "A")
    B = sim.alloc("l1", 256, 256, "B")
    C = sim.alloc("l1", 512, 256, "C")
    sim.array(A, np.float32, (4, 3))[:] = a
    sim.array(B, np.float32, (3, 4))[:] = b
    sim.array(C, np.float32, (4, 4))[:] = 99.0
    sim.mac(4, 4, 3, (A, 0, 3, 1), (B, 0, 4, 1), (C, 0, 4, 1))
    assert np.array_equal(
        sim.array(C, np.float32, (4, 4)), _sequential(a, b, np.float32)
    )


BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8"])
def test_vector_binary_with_broadcast(sim, rng, op, dtype):
    rows, cols = 3, 7
    if dtype.startswith("int"):
        x = rng.integers(-100, 100, size=(rows, cols)).astype(dtype)
        bias = rng.integers(-100, 100, size=(cols,)).astype(dtype)
    else:
        x = rng.standard_normal((rows, cols)).astype(dtype)
        bias = rng.standard_normal(cols).astype(dtype)
    X = sim.alloc("l1", 0, 256, "x")
    Bv = sim.alloc("l1", 256, 64, "bias")
    Out = sim.alloc("l1", 512, 256, "o")
    sim.array(X, dtype, (rows, cols))[:] = x
    sim.array(Bv, dtype, (cols,))[:] = bias
    # the bias row is broadcast by a row stride of 0
    sim.vec_binary(
        op, dtype, rows, cols, (Out, 0, cols, 1), (X, 0, cols, 1), (Bv, 0, 0, 1)
    )
    with np.errstate(over="ignore"):
        want = BINARY[op](x, bias[None, :]).astype(dtype)
    assert np.array_equal(sim.array(Out, dtype, (rows, cols)), want)


UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "relu": lambda x: np.maximum(x, 0),
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "copy": lambda x: x,
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_vector_unary_float32(sim, rng, op):
    x = (rng.random(13) + 0.1).astype(np.float32) * (1 if op in ("log", "sqrt") else 2)
    X = sim.alloc("l1", 0, 64, "x")
    Out = sim.alloc("l1", 64, 64, "o")
    sim.array(X, np.float32, (13,))[:] = x
    sim.vec_unary(op, "float32", 1, 13, (Out, 0, 0, 1), (X, 0, 0, 1))
    want = UNARY[op](x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(sim.array(Out, np.float32, (13,)), want, rtol=1e-6)


def test_vector_rint_rounds_half_to_even(sim):
    """PC_OP_RINT: the rounding of the int8 requantization (numpy's rint)."""
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 3.75, -3.75], np.float32)
    X = sim.alloc("l1", 0, 64, "x")
    Out = sim.alloc("l1", 64, 64, "o")
    sim.array(X, np.float32, (9,))[:] = x
    sim.vec_unary("rint", "float32", 1, 9, (Out, 0, 0, 1), (X, 0, 0, 1))
    np.testing.assert_array_equal(sim.array(Out, np.float32, (9,)), np.rint(x))


@pytest.mark.parametrize("op,fn", [("sum", np.sum), ("rmax", np.max), ("rmin", np.min)])
def test_vector_reduce_rows(sim, rng, op, fn):
    x = rng.integers(-1000, 1000, size=(4, 9)).astype(np.int32)
    X = sim.alloc("l1", 0, 256, "x")
    Out = sim.alloc("l1", 256, 64, "o")
    sim.array(X, np.int32, (4, 9))[:] = x
    sim.vec_reduce(op, "int32", 4, 9, (Out, 0, 1, 0), (X, 0, 9, 1))
    assert np.array_equal(sim.array(Out, np.int32, (4,)), fn(x, axis=1))
    sim.vec_reduce(op, "int32", 4, 9, (Out, 0, 1, 0), (X, 0, 9, 1), accumulate=True)
    if op == "sum":
        assert np.array_equal(sim.array(Out, np.int32, (4,)), 2 * x.sum(axis=1))


def test_vector_reduce_float16_rounds_every_step(sim, rng):
    x = rng.standard_normal((2, 33)).astype(np.float16)
    X = sim.alloc("l1", 0, 256, "x")
    Out = sim.alloc("l1", 256, 64, "o")
    sim.array(X, np.float16, (2, 33))[:] = x
    sim.vec_reduce("sum", "float16", 2, 33, (Out, 0, 1, 0), (X, 0, 33, 1))
    want = x[:, 0].copy()
    for c in range(1, 33):
        want = (want + x[:, c]).astype(np.float16)
    assert np.array_equal(sim.array(Out, np.float16, (2,)), want)


def test_new_buffers_hold_poison_not_stale_bytes(sim):
    """A buffer reads as NaN (0xFF bytes) until written, even over bytes an earlier
    buffer left data in: a read of unwritten SRAM cannot pass for correct zeros or
    for the earlier buffer's values (the halo bug of issue 11 read such bytes)."""
    a = sim.alloc("l1", 0, 64, "a")
    assert np.all(sim.array(a, np.uint8, (64,)) == 0xFF)
    sim.array(a, np.float32, (16,))[:] = 1.5
    sim.free(a)
    b = sim.alloc("l1", 0, 64, "b")
    assert np.all(np.isnan(sim.array(b, np.float32, (16,))))
    sim.zero_fill(b)
    assert np.all(sim.array(b, np.float32, (16,)) == 0)


# violations ----------------------------------------------------------------------


def test_dma_outside_a_buffer_is_reported(sim):
    A = sim.bind("A", np.zeros((8, 10), dtype=np.float32))
    t = sim.alloc("l1", 0, 96, "A_tile")
    with pytest.raises(
        SimulationError,
        match=r"pc_dma load: reading bytes \[212, 356\) of buffer A are outside it "
        r"because A holds 320 bytes",
    ):
        sim.dma((t, 0, [6, 1]), (A, 5 * 10 + 3, [10, 1]), [4, 6], 4, label="load")
    # nothing was copied: the tile still holds the poison pc_alloc fills it with
    assert np.all(sim.array(t, np.uint32, (24,)) == 0xFFFFFFFF)


def test_dma_writing_past_a_tile_is_reported(sim):
    A = sim.bind("A", np.zeros(64, dtype=np.float32))
    t = sim.alloc("l1", 0, 128, "tile")
    with pytest.raises(
        SimulationError, match=r"writing bytes \[64, 320\) of buffer tile"
    ):
        sim.dma((t, 16, [1]), (A, 0, [1]), [64], 4)


def test_mac_view_outside_is_reported(sim):
    a = sim.alloc("l1", 0, 64, "a")
    with pytest.raises(SimulationError, match=r"pc_mac mm: reading bytes \[0, 256\)"):
        sim.mac(4, 4, 16, (a, 0, 16, 1), (a, 0, 4, 1), (a, 0, 4, 1), label="mm")


def test_mac_on_dram_is_refused(sim):
    A = sim.bind("A", np.zeros(64, dtype=np.float32))
    with pytest.raises(SimulationError, match=r"input buffer A is in level dram"):
        sim.mac(2, 2, 2, (A, 0, 2, 1), (A, 8, 2, 1), (A, 16, 2, 1))


def test_mac_unsupported_dtype(rt):
    from tests.accelerator.test_timing import tiny_with

    spec = tiny_with(
        mac_array__dtypes={"int8": {"macs_per_cycle": 1.0, "pj_per_mac": 0.3}}
    )
    sim = Simulator(rt, spec)
    a = sim.alloc("l1", 0, 256, "a")
    with pytest.raises(SimulationError, match=r"does not support float32 because"):
        sim.mac(2, 2, 2, (a, 0, 2, 1), (a, 16, 2, 1), (a, 32, 2, 1))


def test_buffer_overlap_misalignment_and_capacity(sim):
    sim.alloc("l1", 0, 256, "x")
    with pytest.raises(
        SimulationError,
        match=r"buffer y \[128, 384\) overlaps live "
        r"buffer x \[0, 256\) in l1",
    ):
        sim.alloc("l1", 128, 256, "y")


def test_an_array_bound_on_chip_moves_at_the_levels_timing_and_keeps_its_place(sim, rt):
    """``pc_bind_at``: the values stay in the caller's array, a copy from it
    to another buffer of the level moves them (no DRAM bytes), and a buffer
    that would overlap it, or one out of the level, is refused."""
    home = np.arange(64, dtype=np.float32)
    h = sim.bind_at("h", home, "l1", 1024)
    b = sim.alloc("l1", 0, 256, "b")
    sim.dma((b, 0, [1]), (h, 0, [1]), [64], 4, label="h in")
    sim.wait_all()
    np.testing.assert_array_equal(sim.array(b, np.float32, [64]), home)
    with pytest.raises(SimulationError, match=r"overlaps live buffer h \[1024, 1280\)"):
        sim.alloc("l1", 1152, 256, "c")
    other = Simulator(rt, sim.spec)  # the first stopped on its violation
    with pytest.raises(SimulationError, match=r"array g \[16384, 16640\) does not fit"):
        other.bind_at("g", np.zeros(64, dtype=np.float32), "l1", 16384)


def test_buffer_misaligned(sim):
    with pytest.raises(
        SimulationError,
        match=r"offset 8 in l1 is misaligned because "
        r"the level's alignment is 16 bytes",
    ):
        sim.alloc("l1", 8, 16, "z")


def test_buffer_larger_than_level(sim):
    with pytest.raises(
        SimulationError,
        match=r"does not fit in l1 because the level "
        r"holds 16384 bytes",
    ):
        sim.alloc("l1", 16000, 1024, "big")


def test_freed_space_can_be_reused(sim):
    x = sim.alloc("l1", 0, 256, "x")
    sim.free(x)
    y = sim.alloc("l1", 0, 512, "y")
    with pytest.raises(SimulationError, match=r"buffer \d+ is not live"):
        sim.free(x if x != y else 99)


def test_bad_channel(sim):
    A = sim.bind("A", np.zeros(4, dtype=np.float32))
    with pytest.raises(
        SimulationError,
        match=r"channel 5 does not exist because the "
        r"config has 2 DMA channels",
    ):
        sim.dma((A, 0, [1]), (A, 0, [1]), [4], 4, channel=5)


def test_vector_on_dram_is_refused(sim):
    A = sim.bind("A", np.zeros(8, dtype=np.float32))
    with pytest.raises(
        SimulationError,
        match=r"buffer A is in level dram .* the "
        r"vector unit cannot access",
    ):
        sim.vec_unary("relu", "float32", 1, 8, (A, 0, 0, 1), (A, 0, 0, 1))


def test_first_error_sticks(sim):
    A = sim.bind("A", np.zeros(8, dtype=np.float32))
    with pytest.raises(SimulationError):
        sim.dma((A, 0, [1]), (A, 4, [1]), [8], 4)
    with pytest.raises(SimulationError, match=r"reading bytes \[16, 48\)"):
        sim.wait_all()
