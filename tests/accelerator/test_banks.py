"""SRAM banks in the timing model (rt_timeline.c), closed forms.

A level of B banks is block-partitioned (bank i holds bytes [i * capacity / B,
(i + 1) * capacity / B)), each bank serving bytes_per_cycle / B. Transfers share a
bank's bandwidth max-min fairly; the MAC array and the vector unit take what they
need first and stretch where a bank cannot feed them. The numbers are tiny's
(ISSUE 1, DMA SETUP 4 and 8 B/cycle per channel, LAT 20) with the L1 edited.
"""

from __future__ import annotations

import numpy as np
import pytest

from accelerator.hardware.dataflow import mac_bytes
from accelerator.hardware.spec import DATAFLOWS
from accelerator.sim.simulator import Simulator
from tests.accelerator.test_timing import ISSUE, LAT, SETUP, rt, tiny_with

__all__ = ["rt"]  # the runtime fixture, shared with test_timing

B = 1024  # bytes per transfer
BANK = 8192  # tiny's 16 KiB L1 in two banks


def _two_loads(rt, second_at: int) -> tuple[int, int]:
    """Two 1 KiB loads on the two channels into L1 offsets 0 and ``second_at``;
    L1 in two banks of 8 B/cycle, DRAM 16 B/cycle (so DRAM feeds both at once)."""
    spec = tiny_with(
        memory__0__bytes_per_cycle=16.0,
        memory__1__banks=2,
        memory__1__bytes_per_cycle=16.0,
    )
    sim = Simulator(rt, spec)
    src = sim.bind("A", np.arange(2 * B, dtype=np.uint8))
    d0 = sim.alloc("l1", 0, B, "x")
    d1 = sim.alloc("l1", second_at, B, "y")
    sim.dma((d0, 0, [1]), (src, 0, [1]), [B], 1, channel=0)
    sim.dma((d1, 0, [1]), (src, B, [1]), [B], 1, channel=1)
    sim.finish()
    assert np.array_equal(sim.array(d1, np.uint8, (B,)), np.arange(B, 2 * B) % 256)
    return sim.ready(d0), sim.ready(d1)


def test_two_transfers_into_different_banks_run_at_full_rate(rt):
    # issued at 1 and 2; each moves at its channel's 8 B/cycle in its own bank
    first = ISSUE + SETUP + B // 8 + LAT
    assert _two_loads(rt, BANK) == (first, first + 1)


def test_two_transfers_into_one_bank_share_it(rt):
    # the first moves alone for one cycle (8 B), then both share the bank's 8
    # B/cycle, 4 each, until the first is done; the second moves its last 8 B alone
    start = ISSUE + SETUP  # the first's data phase begins
    first_data = start + 1 + (B - 8) // 4
    second_data = first_data + (B - (B - 8)) // 8
    assert _two_loads(rt, 1024) == (first_data + LAT, second_data + LAT)


def _mac_busy(rt, banks: int, bytes_per_cycle: float, at: tuple[int, int, int]):
    """One fp32 call 16 x 4 x 4 on tiny's 4x4 weight-stationary array without
    double buffering (one fold: load 4 + stream 16 + skew 6 = 26 cycles), its
    operands A, B, C at the L1 offsets ``at``; returns the array's busy cycles."""
    spec = tiny_with(
        mac_array__double_buffered=False,
        memory__1__banks=banks,
        memory__1__bytes_per_cycle=bytes_per_cycle,
    )
    sim = Simulator(rt, spec)
    a = sim.alloc("l1", at[0], 16 * 4 * 4, "a")
    b = sim.alloc("l1", at[1], 4 * 4 * 4, "b")
    c = sim.alloc("l1", at[2], 16 * 4 * 4, "c")
    sim.array(a, np.float32, (16, 4))[:] = 1.0
    sim.array(b, np.float32, (4, 4))[:] = 2.0
    sim.mac(16, 4, 4, (a, 0, 4, 1), (b, 0, 4, 1), (c, 0, 4, 1))
    report = sim.finish()
    assert np.all(sim.array(c, np.float32, (16, 4)) == 8.0)
    return report.engine("mac_array").busy


# the call moves A 16 x 4 x 4 B = 256 B (one fold), B 64 B, C 256 B written
A_BYTES, B_BYTES, C_BYTES, ALONE = 256, 64, 256, 26


def test_a_mac_call_that_its_banks_feed_takes_its_dataflow_time(rt):
    assert _mac_busy(rt, 4, 512.0, (0, 256, 512)) == ALONE


def test_a_mac_call_starved_by_one_narrow_bank_takes_its_bytes_over_the_width(rt):
    # all 576 bytes through one 8 B/cycle bank: 72 cycles instead of 26
    busy = _mac_busy(rt, 1, 8.0, (0, 1024, 2048))
    assert busy == (A_BYTES + B_BYTES + C_BYTES) // 8 == 72


@pytest.mark.parametrize("dataflow", DATAFLOWS)
def test_the_cost_models_mac_bytes_are_what_the_runtime_charges(rt, dataflow):
    """dataflow.mac_bytes (the cost model's) against the runtime's pc_mac_bytes: the
    16 x 4 x 4 fp32 call with all its operands in one 8 B/cycle bank takes their
    bytes over the width (weight-stationary 576 B, the others 768 B)."""
    spec = tiny_with(
        mac_array__dataflow=dataflow,
        mac_array__double_buffered=False,
        memory__1__banks=1,
        memory__1__bytes_per_cycle=8.0,
    )
    a, b, c, _ = mac_bytes(spec.mac_array, 16, 4, 4, 4, 4)
    sim = Simulator(rt, spec)
    bufs = [
        sim.alloc("l1", at, size, name)
        for at, size, name in ((0, 256, "a"), (1024, 64, "b"), (2048, 256, "c"))
    ]
    sim.mac(16, 4, 4, *((buf, 0, 4, 1) for buf in bufs))
    report = sim.finish()
    assert report.engine("mac_array").busy == (a + b + c) // 8


def test_a_mac_call_with_its_operands_in_separate_banks_waits_for_the_busiest(rt):
    # four 4 KiB banks of 8 B/cycle: A, B, C in banks 0, 1, 2; A and C need 32
    # cycles at 8 B/cycle, B 8
    busy = _mac_busy(rt, 4, 32.0, (0, 4096, 8192))
    assert busy == max(A_BYTES, B_BYTES, C_BYTES) // 8 == 32


def test_a_transfer_into_a_bank_the_array_holds_gets_what_is_left(rt):
    """The array takes its bank first: a load into the bank of its A operand moves
    at what the call leaves (8 B/cycle less the call's share) until the call ends,
    then at the full 8 B/cycle."""
    spec = tiny_with(
        mac_array__double_buffered=False,
        memory__1__banks=4,
        memory__1__bytes_per_cycle=32.0,
    )
    sim = Simulator(rt, spec)
    src = sim.bind("X", np.arange(B, dtype=np.uint8))
    a = sim.alloc("l1", 0, 256, "a")
    b = sim.alloc("l1", 4096, 64, "b")
    c = sim.alloc("l1", 8192, 256, "c")
    d = sim.alloc("l1", 1024, B, "d")  # bank 0, beside A
    sim.mac(16, 4, 4, (a, 0, 4, 1), (b, 0, 4, 1), (c, 0, 4, 1))  # issued at 1
    sim.dma((d, 0, [1]), (src, 0, [1]), [B], 1, channel=0)  # issued at 2
    sim.finish()
    # the call runs 1..33 holding all of bank 0 (256 B over 32 cycles = 8
    # B/cycle): the load's data phase, from 2 + SETUP = 6, waits until 33, then
    # moves 1 KiB at 8 B/cycle
    mac_end = ISSUE + A_BYTES // 8
    assert sim.ready(d) == mac_end + B // 8 + LAT


def _vector_after_mac(rt, with_mac: bool) -> tuple[int, int]:
    """A relu over 64 floats in bank 0 issued right after (or without) a MAC call
    whose A operand streams bank 0 at its whole 8 B/cycle; returns the vector
    unit's busy cycles and the array's."""
    spec = tiny_with(
        mac_array__double_buffered=False,
        memory__1__banks=4,
        memory__1__bytes_per_cycle=32.0,
    )
    sim = Simulator(rt, spec)
    a = sim.alloc("l1", 0, 256, "a")
    b = sim.alloc("l1", 4096, 64, "b")
    c = sim.alloc("l1", 8192, 256, "c")
    x = sim.alloc("l1", 1024, 256, "x")  # bank 0, beside A
    sim.array(x, np.float32, (64,))[:] = -1.0
    if with_mac:
        sim.mac(16, 4, 4, (a, 0, 4, 1), (b, 0, 4, 1), (c, 0, 4, 1))  # issued at 1
    sim.vec_unary("relu", "float32", 1, 64, (x, 0, 0, 1), (x, 0, 0, 1))
    report = sim.finish()
    assert np.all(sim.array(x, np.float32, (64,)) == 0.0)
    return report.engine("vector").busy, report.engine("mac_array").busy


def test_two_engines_on_one_bank_never_take_more_than_its_bandwidth(rt):
    """The array streams A through all of bank 0 (256 B over 32 cycles) from 1 to
    33; a vector operation on bank 0 issued at 2 gets nothing until the call frees
    the bank, then runs as it does alone. (Regression: the second engine used to get
    at least half the bank, 12 B/cycle out of an 8 B/cycle bank together.)"""
    alone, _ = _vector_after_mac(rt, with_mac=False)
    busy, mac = _vector_after_mac(rt, with_mac=True)
    assert mac == A_BYTES // 8 == 32
    mac_end, vec_start = ISSUE + mac, 2 * ISSUE
    assert busy == (mac_end - vec_start) + alone
