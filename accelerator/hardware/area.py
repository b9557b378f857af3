"""Area, leakage and power of a hardware description.

:func:`area` adds up the silicon of each component from the config's ``[area]``
table (:class:`~accelerator.hardware.spec.AreaModel`, each coefficient with its
published source in the TOML file):

- MAC array: ``rows x cols`` PEs, each ``pe_overhead x sum over dtypes of
  mac_um2[dtype] x macs_per_cycle[dtype]`` (a dtype at a quarter rate has a quarter
  of a unit per PE; ``mac_um2`` 0: the dtype runs on another dtype's units);
- vector unit: ``lanes x vector_lane_um2 x pe_overhead``; the scalar core;
- each SRAM level: ``KiB x sram_um2_per_kib x (1 + sram_port_factor x (ports - 1))
  + banks x sram_bank_um2``;
- DMA: ``channels x dma_channel_um2``; the DRAM interface:
  ``GB/s x dram_phy_um2_per_gbps`` (GB/s = DRAM bytes per cycle x clock).

:func:`cost` turns a run (cycles and the simulator's dynamic energy) into latency,
energy (dynamic plus leakage over the run's time), average power and EDP.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelerator.hardware.spec import Spec
from polyc.errors import ConfigError

UM2_PER_MM2 = 1e6


@dataclass(frozen=True)
class Area:
    """The area of one description: mm^2 per component, their total, leakage."""

    components: dict[str, float]
    total_mm2: float
    leakage_w: float


def area(spec: Spec) -> Area:
    """The silicon area of ``spec`` per component (mm^2) and its leakage (W).

    Raises:
        ConfigError: when the description has no ``[area]`` table.
    """
    m = spec.area
    if m is None:
        raise ConfigError(
            f"area: {spec.name} has no area model because its description has no "
            "[area] table. Copy the [area] table of a shipped config "
            "(accelerator/hardware/configs/edge-npu.toml) into it."
        )
    a = spec.mac_array
    pe = m.pe_overhead * sum(
        m.mac_um2[name] * d.macs_per_cycle for name, d in a.dtypes.items()
    )
    parts = {
        "mac_array": a.rows * a.cols * pe,
        "vector": spec.vector.lanes * m.vector_lane_um2 * m.pe_overhead,
        "scalar": m.scalar_core_um2,
    }
    for level in spec.sram_levels:
        ports = m.sram_ports.get(level.name, 1)
        cells = level.capacity_bytes / 1024 * m.sram_um2_per_kib
        parts[f"sram.{level.name}"] = (
            cells * (1 + m.sram_port_factor * (ports - 1))
            + level.banks * m.sram_bank_um2
        )
    parts["dma"] = spec.dma.channels * m.dma_channel_um2
    gbps = spec.dram.bytes_per_cycle * spec.clock_ghz
    parts["dram_phy"] = gbps * m.dram_phy_um2_per_gbps
    mm2 = {k: v / UM2_PER_MM2 for k, v in parts.items()}
    total = sum(mm2.values())
    return Area(mm2, total, total * m.leakage_mw_per_mm2 / 1000)


def area_mm2(spec: Spec) -> float:
    """The total area of ``spec`` in mm^2 (a measure for ``where=`` constraints)."""
    return area(spec).total_mm2


def sram_bytes(spec: Spec) -> int:
    """The bytes of all on-chip levels together."""
    return sum(level.capacity_bytes for level in spec.sram_levels)


#: measures a grid constraint may name besides config keys (``--where``)
MEASURES = {"area_mm2": area_mm2, "sram_bytes": sram_bytes}


def cost(spec: Spec, cycles: float, dynamic_pj: float) -> dict[str, float]:
    """Latency, energy, power and EDP of a run of ``cycles`` that spent
    ``dynamic_pj`` (the simulator's energy) on ``spec``: leakage is the area's
    leakage power over the run's time, power is energy over time, EDP is energy
    times latency (joule-seconds).

    Raises:
        ConfigError: as :func:`area`.
    """
    a = area(spec)
    latency = cycles / (spec.clock_ghz * 1e9)
    dynamic = dynamic_pj * 1e-12
    leak = a.leakage_w * latency
    energy = dynamic + leak
    return {
        "area_mm2": a.total_mm2,
        "latency_s": latency,
        "dynamic_energy_j": dynamic,
        "leakage_energy_j": leak,
        "energy_j": energy,
        "power_w": energy / latency if latency else 0.0,
        "edp_js": energy * latency,
    }
