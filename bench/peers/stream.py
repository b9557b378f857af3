"""HW-A and the layers as Stream 2.1.1 inputs (accelerator of two cores, ONNX).

The accelerator is core 0, the ZigZag description of HW-A without DRAM
(:func:`bench.peers.zigzag.core`) plus Stream's ``type`` and operand precisions,
and core 1, the off-chip DRAM; a ``bus`` of 32 B/cycle joins them, one channel
that reads and writes share (a ``link`` would give each direction its own). The
workload must be ONNX with int8 tensors; the driver writes it inside the Stream venv
(which has ``onnx``) from the layer's shape. No mapping is given: Stream's generator
chooses the layer's tiling and ZigZag prices each tile.

Stream's latency (``families/overlap.py``, ``Overlap.objective``) is
``iterations x iteration - (iterations - 1) x overlap + fill``: the tiles of a layer
are modulo-scheduled so that one tile's transfers overlap the previous one's
compute, with transfers on the bus and tensors' residency solved as a MILP.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bench.peers import zigzag
from bench.peers.hwa import HWA, Hardware, Layer


def core(hw: Hardware = HWA) -> dict:
    return {
        "name": "hw_a_core",
        "type": "zigzag.compute",
        **zigzag.core(hw),
        "operand_precision": {"input": "int8", "accumulator": "int32"},
    }


def dram_core(hw: Hardware = HWA) -> dict:
    return {
        "name": "hw_a_dram",
        "type": "zigzag.offchip",
        "memories": {"dram": zigzag.dram(hw)},
        "operational_array": {
            "unit_energy": 0,
            "unit_area": 0,
            "dimensions": ["D1", "D2"],
            "sizes": [0, 0],
        },
    }


def accelerator(hw: Hardware = HWA) -> dict:
    return {
        "name": "hw_a_stream",
        "cores": {0: "./cores/hw_a_core.yaml", 1: "./cores/hw_a_dram.yaml"},
        "core_coordinates": {0: [0, 0], 1: [0, 1]},
        "offchip_core_id": 1,
        "unit_energy_cost": 0,
        "core_connectivity": [
            {"type": "bus", "cores": [0, 1], "bandwidth": 8 * hw.dram_bytes_per_cycle}
        ],
    }


def write_inputs(lay: Layer, folder: Path, hw: Hardware = HWA) -> dict:
    """Write the accelerator files under ``folder``; the driver's job (the layer's
    shape goes in the job: the driver makes the ONNX model)."""
    (folder / "cores").mkdir(parents=True, exist_ok=True)
    files = {
        "hw_a_stream.yaml": accelerator(hw),
        "cores/hw_a_core.yaml": core(hw),
        "cores/hw_a_dram.yaml": dram_core(hw),
    }
    for name, data in files.items():
        # JSON object keys are strings; Stream reads core ids as ints, and YAML
        # turns an unquoted 0 into one, so the core maps are written unquoted
        text = json.dumps(data, indent=1)
        for i in (0, 1):
            text = text.replace(f'"{i}": ', f"{i}: ")
        (folder / name).write_text(text + "\n")
    return {
        "layer": lay.name,
        "accelerator": str(folder / "hw_a_stream.yaml"),
        "onnx": str(folder / f"{lay.name}.onnx"),
        "out": str(folder / "out" / lay.name),
        "shape": asdict(lay),
        "time_limit_s": 120,
    }


#: Stream's fusion choices for a whole model: one group per layer, or the groups
#: and fused tiling its mapping generator derives
FUSIONS = ("per-layer", "auto")


def write_graph_inputs(g, folder: Path, fusion: str, hw: Hardware = HWA) -> dict:
    """The job of a whole model (a :class:`bench.peers.graph.Graph`) run with
    ``fusion`` (one of :data:`FUSIONS`): the accelerator files under ``folder`` and
    the graph's ONNX description (the driver writes the ONNX)."""
    from bench.peers import graph

    if fusion not in FUSIONS:
        raise ValueError(f"stream job: fusion {fusion!r} is not one of {FUSIONS}")
    job = write_inputs(_model_layer(g.name), folder, hw)
    name = f"{g.name}-{fusion}"
    job.update(
        layer=name,
        onnx=str(folder / f"{name}.onnx"),
        out=str(folder / "out" / name),
        graph=graph.onnx_spec(g),
        fusion=fusion,
        time_limit_s=300,
    )
    del job["shape"]
    return job


def _model_layer(name: str) -> Layer:
    return Layer(name, name, "a whole model")
