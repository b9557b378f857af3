"""HW-A and the layers as ZigZag 3.9.1 inputs (accelerator, mapping, workload).

ZigZag reads YAML; the files written here are JSON, which YAML parsers read as the
same mappings. Units are ZigZag's: memory sizes in bits, port bandwidths in bits per
cycle, energies in pJ per access of one port word. Stream 2.1.1 prices every tile
with ZigZag, so :func:`core` is also Stream's compute core (:mod:`bench.peers.stream`).

The model (``zigzag/cost_model/cost_model.py``, ``CostModelEvaluation``) is
analytical and per layer: ``latency_total2 = ideal_temporal_cycle + stall_slack_comb
+ data_onloading_cycle + data_offloading_cycle + systolic_drain_cycle``, where the
stall is the worst memory port's transfer time beyond the window the mapping allows
it, and the systolic drain, ``(rows - 1) + (cols - 1)``, is charged once per layer.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.peers.hwa import HWA, Hardware, Layer


def _port(name: str, kind: str, bits: int, allocation: list[str]) -> dict:
    return {
        "name": name,
        "type": kind,
        "bandwidth_min": bits,
        "bandwidth_max": bits,
        "allocation": allocation,
    }


def _memory(bits, r_cost, w_cost, operands, ports, served) -> dict:
    return {
        "size": bits,
        "r_cost": r_cost,
        "w_cost": w_cost,
        "area": 0,
        "latency": HWA.latency_cycles,
        "operands": operands,
        "ports": ports,
        "served_dimensions": served,
    }


def memories(hw: Hardware = HWA) -> dict:
    """The on-chip levels: a stationary int8 weight register (two weights deep, so
    ZigZag lets the next one load while the current one is used: otherwise every
    weight tile stalls on the weight SRAM's port) and an int32 partial sum register
    per PE, then one SRAM per operand serving the whole array."""
    word = 8 * hw.operand_bytes
    psum = 8 * hw.psum_bytes
    in_port = 8 * hw.in_sram_bytes_per_cycle
    out_port = psum * hw.out_sram_psums_per_cycle
    sram = 8 * hw.sram_bytes
    both = ["D1", "D2"]
    return {
        "reg_W": _memory(
            word * hw.weight_reg_words,
            hw.reg_pj,
            hw.reg_pj,
            ["I2"],
            [
                _port("r_port_1", "read", word, ["I2, tl"]),
                _port("w_port_1", "write", word, ["I2, fh"]),
            ],
            [],
        ),
        "reg_O": _memory(
            psum,
            hw.psum_reg_pj,
            hw.psum_reg_pj,
            ["O"],
            [
                _port("r_port_1", "read", psum, ["O, tl"]),
                _port("r_port_2", "read", psum, ["O, th"]),
                _port("w_port_1", "write", psum, ["O, fh"]),
                _port("w_port_2", "write", psum, ["O, fl"]),
            ],
            [],
        ),
        "sram_I": _memory(
            sram,
            hw.sram_read_pj,
            hw.sram_write_pj,
            ["I1"],
            [
                _port("r_port_1", "read", in_port, ["I1, tl"]),
                _port("w_port_1", "write", in_port, ["I1, fh"]),
            ],
            both,
        ),
        "sram_W": _memory(
            sram,
            hw.sram_read_pj,
            hw.sram_write_pj,
            ["I2"],
            [
                _port("r_port_1", "read", in_port, ["I2, tl"]),
                _port("w_port_1", "write", in_port, ["I2, fh"]),
            ],
            both,
        ),
        "sram_O": _memory(
            sram,
            hw.out_sram_read_pj,
            hw.out_sram_write_pj,
            ["O"],
            [
                _port("r_port_1", "read", out_port, ["O, tl", "O, th"]),
                _port("w_port_1", "write", out_port, ["O, fh", "O, fl"]),
            ],
            both,
        ),
    }


def dram(hw: Hardware = HWA) -> dict:
    """DRAM: one read-write port allocated to every operand and direction, which
    is how ZigZag says one channel shared by reads and writes."""
    bits = 8 * hw.dram_bytes_per_cycle
    every = ["I1, fh", "I1, tl", "I2, fh", "I2, tl", "O, fh", "O, tl", "O, fl", "O, th"]
    return _memory(
        10**10,
        hw.dram_pj,
        hw.dram_pj,
        ["I1", "I2", "O"],
        [_port("rw_port_1", "read_write", bits, every)],
        ["D1", "D2"],
    )


def operational_array(hw: Hardware = HWA) -> dict:
    return {
        "input_precision": [8 * hw.operand_bytes, 8 * hw.operand_bytes],
        "unit_energy": hw.mac_pj,
        "unit_area": 1,
        "dimensions": ["D1", "D2"],
        "sizes": [hw.rows, hw.cols],
        "systolic_dimensions": ["D1", "D2"],
    }


def core(hw: Hardware = HWA) -> dict:
    """The compute core without DRAM (Stream's core 0)."""
    return {"memories": memories(hw), "operational_array": operational_array(hw)}


def accelerator(hw: Hardware = HWA) -> dict:
    c = core(hw)
    return {
        "name": "hw_a",
        "memories": {**c["memories"], "dram": dram(hw)},
        "operational_array": c["operational_array"],
    }


def row_unrolling(lay: Layer, hw: Hardware = HWA) -> list[str]:
    """Weight-stationary rows: the reduction. Input channels first; a layer with
    fewer channels than rows also unrolls its taps (K = 27 of a 3-channel 3x3
    uses 27 rows, as SCALE-Sim's im2col does)."""
    if not lay.is_conv:
        return [f"C, {min(hw.rows, lay.k)}"]
    out, used = [f"C, {min(hw.rows, lay.c)}"], min(hw.rows, lay.c)
    for dim, size in (("FY", lay.fy), ("FX", lay.fx)):
        if size > 1 and used * size <= hw.rows:
            out.append(f"{dim}, {size}")
            used *= size
    return out


def mapping(lay: Layer, hw: Hardware = HWA) -> list:
    """Weight stationary: the reduction on D1 (rows), output channels on D2
    (columns); the temporal order is left to ZigZag's LOMA search."""
    return [
        {
            "name": "default",
            "spatial_mapping": {
                "D1": row_unrolling(lay, hw),
                "D2": [f"K, {min(hw.cols, lay.n)}"],
            },
            "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"},
        }
    ]


def workload(lay: Layer, hw: Hardware = HWA) -> list:
    """The layer as a ZigZag workload (int8 operands, int32 partial sums, int8
    final outputs)."""
    precision = {"W": 8, "I": 8, "O": 8 * hw.psum_bytes, "O_final": 8}
    base = {"id": 0, "name": lay.name, "operand_precision": precision}
    source = {"operand_source": {"I": 0, "W": 0}}
    if not lay.is_conv:
        return [
            {
                **base,
                "operator_type": "Gemm",
                "equation": "O[b][k]+=I[b][c]*W[c][k]",
                "dimension_relations": [],
                "loop_dims": ["B", "C", "K"],
                "loop_sizes": [lay.m, lay.k, lay.n],
                **source,
            }
        ]
    s = lay.stride
    return [
        {
            **base,
            "operator_type": "Conv",
            "equation": "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]",
            "dimension_relations": [f"ix={s}*ox+1*fx", f"iy={s}*oy+1*fy"],
            "loop_dims": ["B", "K", "C", "OY", "OX", "FY", "FX"],
            "loop_sizes": [1, lay.n, lay.c, lay.oy, lay.ox, lay.fy, lay.fx],
            # padding only applies when the partially relevant loops are named
            "pr_loop_dims": ["IX", "IY"],
            "pr_loop_sizes": [lay.w + 2 * lay.pad, lay.h + 2 * lay.pad],
            "padding": [[lay.pad, lay.pad], [lay.pad, lay.pad]],
            **source,
        }
    ]


def write_inputs(lay: Layer, folder: Path, hw: Hardware = HWA) -> dict:
    """Write the three input files under ``folder``; the driver's job."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "accelerator": ("hw_a.yaml", accelerator(hw)),
        "mapping": (f"mapping_{lay.name}.yaml", mapping(lay, hw)),
        "workload": (f"{lay.name}.yaml", workload(lay, hw)),
    }
    job = {"layer": lay.name, "dump": str(folder / "out" / lay.name), "lpf_limit": 6}
    for key, (name, data) in files.items():
        (folder / name).write_text(json.dumps(data, indent=1) + "\n")
        job[key] = str(folder / name)
    return job
