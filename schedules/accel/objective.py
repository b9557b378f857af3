"""What the accelerator scheduler minimises: ``cycles``, ``energy`` or ``edp``.

The search (:mod:`schedules.accel.search`) ranks each layer's candidates by their
predicted cycles and keeps the best few; :func:`rank` orders those kept by the
objective, so the scheduler places the first that fits. With ``cycles`` the order
is the search's own. With ``energy`` a candidate costs what differs between
candidates plus the layer's MAC energy:

    MACs x pJ/MAC + DRAM bytes x (DRAM pJ/B + engine-level SRAM write pJ/B)
    + leakage power (the config's area model, 0 without one) x cycles / clock

(every byte from or to DRAM also passes through the engines' SRAM level), and
``edp`` is that energy times the cycles. Ties keep the search's order. The fusion
decisions made before the layers are searched stay those of cycles.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelerator.hardware.roofline import count_points, mac_dtype
from accelerator.hardware.spec import Spec
from polyc.errors import ArgumentError

#: the objectives polyc.compile takes (the first is the default)
OBJECTIVES = ("cycles", "energy", "edp")


def check(objective: str, op: str = "compile") -> str:
    """``objective``, or ArgumentError when it is not one of :data:`OBJECTIVES`."""
    if objective not in OBJECTIVES:
        raise ArgumentError(
            f"{op}: objective={objective!r} is not an objective because the "
            f"scheduler minimises one of {', '.join(OBJECTIVES)}. Pass one of those."
        )
    return objective


#: candidates a layer's search keeps for an objective other than cycles: the
#: search ranks by cycles, so the ones that spend less energy are further down
KEEP = {"cycles": 8, "energy": 48, "edp": 48}


def keep(objective: str) -> int:
    """How many candidates per layer the search keeps for ``objective``."""
    return KEEP[objective]


def rank(cands: Sequence, layer, spec: Spec, objective: str) -> list:
    """``cands`` (one layer's, best first by cycles) best first by ``objective``."""
    if objective == "cycles" or len(cands) < 2:
        return list(cands)
    macs = mac_energy_pj(layer, spec)
    order = {id(c): i for i, c in enumerate(cands)}

    def key(c) -> tuple[float, int]:
        energy = macs + traffic_energy_pj(c, spec)
        value = energy if objective == "energy" else energy * c.cycles
        return (value, order[id(c)])

    return sorted(cands, key=key)


def mac_energy_pj(layer, spec: Spec) -> float:
    """The MAC energy of a layer's multiply-accumulates (the same for every
    candidate; EDP weighs it against their cycles)."""
    total = 0.0
    for stmt in layer.stmts:
        dtype = mac_dtype(stmt)
        if dtype is None:
            continue
        d = spec.mac_array.dtypes.get(dtype)
        pj = d.pj_per_mac if d is not None else 2 * spec.vector.pj_per_op
        total += count_points(stmt.domain) * pj
    return total


def traffic_energy_pj(cand, spec: Spec) -> float:
    """The energy that differs between a layer's candidates: its DRAM traffic
    (through the engines' SRAM) and leakage over its cycles."""
    dram = spec.dram
    inner = spec.sram_levels[-1]
    per_byte = (dram.read_pj_per_byte + dram.write_pj_per_byte) / 2
    energy = cand.dram_bytes * (per_byte + inner.write_pj_per_byte)
    if spec.area is not None:
        from accelerator.hardware.area import area

        seconds = cand.cycles / (spec.clock_ghz * 1e9)
        energy += area(spec).leakage_w * seconds * 1e12
    return energy
