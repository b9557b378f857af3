"""Run Stream on one job (JSON on stdin); print the layer's or model's cycles.

Runs inside the Stream venv (bench/peers/env.py), so it imports only the standard
library, numpy, onnx and stream. It writes the layer (``shape``) or the whole model
(``graph``: bench.peers.graph.onnx_spec) as an int8 ONNX model (shapes only: Stream
reads the element types, not the values), then evaluates it on the accelerator the
job names (bench/peers/stream.py writes it). A model job's ``fusion`` is
``"per-layer"`` (one fusion group per layer: layer by layer) or ``"auto"`` (the
groups and tiling Stream's mapping generator derives: layer fusion).
"""

import json
import logging
import os
import sys
import time


def onnx_model(shape: dict, path: str) -> None:
    """A one-node int8 ONNX model of the layer (a Gemm or a Conv)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    def weight(name, dims):
        t = helper.make_tensor(
            name, TensorProto.INT8, dims, np.zeros(int(np.prod(dims)), np.int8)
        )
        for field in ("float_data", "int32_data", "raw_data"):
            t.ClearField(field)
        return t

    s = shape
    if s["fy"] == 0:
        x = helper.make_tensor_value_info("A", TensorProto.INT8, [s["m"], s["k"]])
        y = helper.make_tensor_value_info("Y", TensorProto.INT8, [s["m"], s["n"]])
        w = weight("B", [s["k"], s["n"]])
        node = helper.make_node("Gemm", ["A", "B"], ["Y"], name=s["name"])
    else:
        oy = (s["h"] + 2 * s["pad"] - s["fy"]) // s["stride"] + 1
        ox = (s["w"] + 2 * s["pad"] - s["fx"]) // s["stride"] + 1
        x = helper.make_tensor_value_info(
            "X", TensorProto.INT8, [1, s["c"], s["h"], s["w"]]
        )
        y = helper.make_tensor_value_info("Y", TensorProto.INT8, [1, s["n"], oy, ox])
        w = weight("W", [s["n"], s["c"], s["fy"], s["fx"]])
        node = helper.make_node(
            "Conv",
            ["X", "W"],
            ["Y"],
            name=s["name"],
            kernel_shape=[s["fy"], s["fx"]],
            pads=[s["pad"]] * 4,
            strides=[s["stride"]] * 2,
        )
    graph = helper.make_graph([node], s["name"], [x], [y], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def graph_model(spec: dict, path: str) -> None:
    """A multi-node int8 ONNX model from the graph's JSON description."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    def value(t):
        return helper.make_tensor_value_info(t["name"], TensorProto.INT8, t["shape"])

    inits = []
    for name, dims in spec["initializers"].items():
        t = helper.make_tensor(
            name, TensorProto.INT8, dims, np.zeros(int(np.prod(dims)), np.int8)
        )
        inits.append(t)
    nodes = [
        helper.make_node(
            n["op"], n["inputs"], [n["output"]], name=n["name"], **n["attrs"]
        )
        for n in spec["nodes"]
    ]
    infos = [
        helper.make_tensor_value_info(name, TensorProto.INT8, shape)
        for name, shape in spec["shapes"].items()
        if name not in spec["initializers"]
        and name not in (spec["input"]["name"], spec["output"]["name"])
    ]
    graph = helper.make_graph(
        nodes,
        spec["name"],
        [value(spec["input"])],
        [value(spec["output"])],
        initializer=inits,
        value_info=infos,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def main() -> None:
    job = json.load(sys.stdin)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # the accelerator names its cores by paths relative to its own folder
    os.chdir(os.path.dirname(job["accelerator"]))
    if "graph" in job:
        graph_model(job["graph"], job["onnx"])
    else:
        onnx_model(job["shape"], job["onnx"])
    from stream.api import SolveOptions, evaluate_mapping

    stage_options = {}
    if job.get("fusion") == "per-layer":
        stage_options["fusion_cut_points"] = "per-layer"
    start = time.perf_counter()
    est = evaluate_mapping(
        job["accelerator"],
        job["onnx"],
        job["out"],
        mapping=None,
        options=SolveOptions(
            time_limit_s=job["time_limit_s"],
            artifacts=False,
            stage_options=stage_options,
        ),
    )
    wall = time.perf_counter() - start
    result = {
        "layer": job["layer"],
        "cycles": int(est.cycles),
        "wall_s": round(wall, 2),
        "group_cycles": [int(c) for c in est.group_cycles],
        "dispatch_cycles": int(est.dispatch_cycles),
    }
    if "graph" in job:
        result["groups"] = _groups(est.context)
    try:
        latency = est.context.get("group_allocations")[0]["latency"]
        result["breakdown"] = {k: _plain(v) for k, v in dict(latency).items()}
    except (AttributeError, IndexError, KeyError, TypeError):
        pass  # the decomposition is a detail; the cycles are the answer
    print(json.dumps(result))


def _groups(ctx) -> list:
    """Per fusion group: its layers and, where Stream says, its tiling, its
    per-tile latency decomposition and its energy."""
    out = []
    workloads = ctx.get("sub_workloads")
    mappings = ctx.get("sub_mappings")
    allocations = _get(ctx, "group_allocations") or {}
    accesses = _get(ctx, "group_memory_accesses") or {}
    for i, sub in enumerate(workloads):
        group = {"layers": [n.name for n in sub.get_computation_nodes()]}
        try:  # the fused tiling: (global dimension, tile size) per fused group
            group["tiling"] = [
                {"dim": str(dim), "tile": int(tile)}
                for fused in mappings[i].fused_groups
                for dim, tile in fused.intra_core_tiling
            ]
            group["dims"] = {
                str(dim): int(sub.get_dimension_size(dim))
                for dim in {
                    d for f in mappings[i].fused_groups for d, _ in f.intra_core_tiling
                }
            }
        except (AttributeError, TypeError, ValueError):
            group["tiling"] = None
        try:
            latency = allocations[i]["latency"]
            group["latency"] = {k: _plain(v) for k, v in dict(latency).items()}
        except (IndexError, KeyError, TypeError, ValueError):
            pass
        offchip = _offchip(accesses.get(i))
        if offchip is not None:
            group["dram"] = offchip
        out.append(group)
    return out


def _offchip(ir) -> dict | None:
    """Bytes the group reads from and writes to the off-chip core, per tensor
    (Stream counts port-wide transfers: times the port's bits / 8)."""
    if not ir:
        return None
    for core in ir.get("cores", ()):
        if not core.get("is_offchip"):
            continue
        rd, wr = core["read_bandwidth"] / 8, core["write_bandwidth"] / 8
        tensors = {
            t["tensor"]: round(t["read"] * rd + t["write"] * wr)
            for t in core["tensors"]
        }
        return {"bytes": round(core["read"] * rd + core["write"] * wr), **tensors}
    return None


def _get(ctx, key):
    try:
        return ctx.get(key)
    except (KeyError, AttributeError):
        return None


def _plain(v):
    try:
        return int(v) if float(v).is_integer() else float(v)
    except (TypeError, ValueError):
        return str(v)


if __name__ == "__main__":
    main()
