"""The SRAM banks' bound on the MAC array, for the cost model.

The simulator (``accelerator/sim/runtime/rt_timeline.c``, docs/accelerator.md)
splits an SRAM level of ``B`` banks into equal blocks, each serving
``bytes_per_cycle / B``; a MAC call needs, at each bank its operands sit in, its
bytes there over its cycles, and stretches by its tightest bank's ratio. The
bytes come from the dataflow (:func:`accelerator.hardware.dataflow.mac_bytes`,
the runtime's ``pc_mac_bytes``), with the accumulators read in once more when a
call adds to what earlier calls left.

The plan is not known while the search runs, so the bound assumes what the
memory planner (``schedules/accel/memplan.py``) aims for: each operand of a call
in a bank of its own where its level has as many banks as the call puts operands
there, else the operands sharing the level's banks evenly (the banks the layer
may take: below the home of a weight fetched ahead, as few as one,
:func:`schedules.accel.search.banked`). DMA transfers take what the engines
leave of a bank: :func:`left` is what a statement's calls leave of the banks
the layer may take, which the cost model gives the DMA while they run
(:func:`schedules.accel.work.engines`). With one bank the array's two operand
streams of float16 on edge-npu take all its 64 bytes a cycle, so the layer's
DMA stops while the calls run: hf-convnext's fused MLPs there, below a weight
fetched ahead, ran 23,720 cycles where the model, which gave the DMA DRAM's
rate throughout, said 16,811. What the model leaves out: the vector unit's
banks.

:func:`expressions` lists the symbolic terms (the model evaluates them with its
others); :func:`mac_stretch` is the factor on a statement's MAC cycles.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from schedules.accel import exprs

if TYPE_CHECKING:
    from polyc.ir.kernel import Statement
    from schedules.accel.model import LayerModel


def _terms(model: LayerModel, stmt: Statement) -> dict | None:
    """Per operand role ("a", "b", "c"): its level and bytes per MAC call, with
    the call's steady cycles; None when no SRAM bank can limit the call."""
    memo = model._bank_terms
    if stmt.name in memo:
        return memo[stmt.name]
    from schedules.accel.tensorize import contraction

    spec, array = model.spec, model.spec.mac_array
    con = contraction(stmt)
    out = None
    arrays = {}
    if con is not None:
        arrays = {"a": stmt.reads[con.a].array, "b": stmt.reads[con.b].array}
        arrays["c"] = stmt.target.array
        arrays = {r: a for r, a in arrays.items() if a in model.levels}
    if arrays:
        m, n, k = model.call_extents(stmt)
        esz = stmt.reads[con.a].dtype.itemsize
        asz = stmt.target.dtype.itemsize
        # reduction extent of one output element over the call's K: the calls
        # after the first add to what is there (the accumulators are read in)
        red = math.prod(
            model.layer.extent(stmt, it)
            for it in stmt.iterators
            if not any(aff.coefficient(it) for aff in stmt.target.index)
        )
        add = 1 - k / red
        a, b, cw, mn = exprs.mac_bytes(array, m, n, k, esz, asz)
        if stmt.name in model.st.exchanged:  # B in the array's A port
            a, b = b, a
        moved = {"a": a, "b": b, "c": cw + add * mn}
        moved = {r: moved[r] for r in arrays}
        levels = {r: model.levels[arr] for r, arr in arrays.items()}
        if any(spec.memory[i].kind == "sram" for i in levels.values()):
            out = {
                "levels": levels,
                "bytes": moved,
                "cycles": model._mac_timing(stmt).steady,
            }
    memo[stmt.name] = out
    return out


def expressions(model: LayerModel, stmt: Statement) -> list:
    """The symbolic terms :func:`mac_stretch` evaluates."""
    t = _terms(model, stmt)
    return [] if t is None else [*t["bytes"].values(), t["cycles"]]


def _sram_roles(model: LayerModel, t: dict) -> list:
    """``(level, roles)`` for each SRAM level a call's operands are in."""
    by_level: dict[int, list[str]] = {}
    for role, index in t["levels"].items():
        by_level.setdefault(index, []).append(role)
    return [
        (model.spec.memory[i], roles)
        for i, roles in by_level.items()
        if model.spec.memory[i].kind == "sram"
    ]


def left(model: LayerModel, stmt: Statement, ev, stretch) -> np.ndarray | float:
    """Bytes a cycle that ``stmt``'s MAC calls (stretched by ``stretch``,
    :func:`mac_stretch`) leave of the banks the layer may take at the SRAM
    levels their operands are in, the least over those levels (inf where no
    bank limits them): a call holds its bytes over its cycles at each bank it
    uses while it runs (the runtime's ``pc_take_banks``), and the DMA shares
    what is left (the runtime's water filling). Counted where the level's
    operands of the call share one bank (the layer may take one and no
    quarter of another, ``usable_part``, or one operand is there); with more,
    the planner keeps a double buffer's slots, which the DMA fills, apart
    from the banks the call streams (hf-llama's layers below the homes have
    two whole banks and part of a third: charged as if the three operands
    shared two, a projection chose tiles that ran 31% slower; hf-mobilenetv2's
    projections below its weights fetched ahead have half a bank beside a
    whole one, and charged as one bank one chose tiles that ran 37% slower)."""
    t = _terms(model, stmt)
    if t is None:
        return np.inf
    cycles = np.maximum(ev(t["cycles"]), 1.0) * stretch
    out: np.ndarray | float = np.inf
    for level, roles in _sram_roles(model, t):
        room = (level.usable_banks or level.banks) + level.usable_part
        if room > 1 and len(roles) > 1:
            continue
        held = sum(ev(t["bytes"][r]) for r in roles) / cycles
        width = level.bytes_per_cycle / level.banks
        out = np.minimum(out, np.maximum(width - held, 0.0))
    return out


def mac_stretch(model: LayerModel, stmt: Statement, ev) -> np.ndarray | float:
    """The factor (>= 1) by which the SRAM banks stretch ``stmt``'s MAC calls, at
    every candidate (``ev`` evaluates the model's expressions)."""
    t = _terms(model, stmt)
    if t is None:
        return 1.0
    cycles = np.maximum(ev(t["cycles"]), 1.0)
    stretch = np.ones_like(cycles)
    for level, roles in _sram_roles(model, t):
        width = level.bytes_per_cycle / level.banks
        demand = [ev(t["bytes"][r]) / cycles for r in roles]
        room = level.usable_banks or level.banks
        shared = sum(demand) / (width * min(room, len(roles)))
        stretch = np.maximum(stretch, shared)
        for d in demand:
            stretch = np.maximum(stretch, d / width)
    return stretch
