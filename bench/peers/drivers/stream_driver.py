"""Run Stream on one job (JSON on stdin); print the layer's cycles.

Runs inside the Stream venv (bench/peers/env.py), so it imports only the standard
library, numpy, onnx and stream. It writes the layer as an int8 ONNX model (shapes
only: Stream reads the element types, not the values), then evaluates it on the
accelerator the job names (bench/peers/stream.py writes it).
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


def main() -> None:
    job = json.load(sys.stdin)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # the accelerator names its cores by paths relative to its own folder
    os.chdir(os.path.dirname(job["accelerator"]))
    onnx_model(job["shape"], job["onnx"])
    from stream.api import SolveOptions, evaluate_mapping

    start = time.perf_counter()
    est = evaluate_mapping(
        job["accelerator"],
        job["onnx"],
        job["out"],
        mapping=None,
        options=SolveOptions(time_limit_s=job["time_limit_s"], artifacts=False),
    )
    wall = time.perf_counter() - start
    result = {
        "layer": job["layer"],
        "cycles": int(est.cycles),
        "wall_s": round(wall, 2),
        "group_cycles": [int(c) for c in est.group_cycles],
    }
    try:
        latency = est.context.get("group_allocations")[0]["latency"]
        result["breakdown"] = {k: _plain(v) for k, v in dict(latency).items()}
    except (AttributeError, IndexError, KeyError, TypeError):
        pass  # the decomposition is a detail; the cycles are the answer
    print(json.dumps(result))


def _plain(v):
    try:
        return int(v) if float(v).is_integer() else float(v)
    except (TypeError, ValueError):
        return str(v)


if __name__ == "__main__":
    main()
