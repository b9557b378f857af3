"""The whole-model comparison's inputs, without running Stream or polyc's
simulator: the two graphs' shapes chain, the ONNX description the Stream driver
builds is well-formed (every node reads a tensor made before it, the weights are
initializers, the layer count), the job and the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import peers_models
from bench.peers import graph, stream


def test_the_cnn_chains_its_shapes():
    g = graph.resnet_block()
    shapes = graph.check(g)
    assert [n.op for n in g.nodes] == ["conv", "conv", "add", "conv"]
    assert shapes["x"] == shapes["a1"] == shapes["a3"] == (1, 64, 28, 28)
    assert shapes["conv1_w"] == (64, 64, 3, 3) and shapes["conv3_w"] == (128, 64, 1, 1)
    assert shapes["y"] == (1, 128, 28, 28)
    # 2 x (28 x 28 x 64 x 576) + 28 x 28 x 128 x 64
    assert graph.macs(g) == 2 * 28 * 28 * 64 * 576 + 28 * 28 * 128 * 64
    # x + y + the three weights, int8, each once
    assert graph.minimum_bytes(g) == 50_176 + 100_352 + 2 * 36_864 + 8_192


def test_the_transformer_chains_its_shapes():
    g = graph.attention_block(tokens=64, d=64, hidden=256)
    shapes = graph.check(g)
    assert len(g.nodes) == 11
    assert sum(n.op == "matmul" for n in g.nodes) == 8
    assert shapes["s"] == shapes["p"] == (64, 64)  # tokens x tokens
    assert shapes["h"] == (64, 256) and shapes["out"] == (64, 64)
    assert graph.macs(g) == 4 * 64**3 + 2 * 64**3 + 2 * 64 * 64 * 256


def test_a_graph_whose_shapes_do_not_chain_is_refused():
    g = graph.attention_block()
    bad = graph.Graph(
        "bad",
        "bad",
        "x",
        (16, 64),
        (
            graph.Node("up", "matmul", ("x",), "u", n=32),
            graph.Node("res", "add", ("u", "x"), "r"),
        ),
    )
    with pytest.raises(graph.GraphError, match="node res: an add of two shapes"):
        graph.check(bad)
    late = graph.Graph("late", "late", "x", (16, 64), (g.nodes[3],))
    with pytest.raises(graph.GraphError, match="node scores reads"):
        graph.check(late)


@pytest.mark.parametrize("g", graph.GRAPHS, ids=lambda g: g.name)
def test_the_onnx_description_is_well_formed(g):
    spec = graph.onnx_spec(g)
    made = {spec["input"]["name"], *spec["initializers"]}
    for node in spec["nodes"]:
        assert all(t in made for t in node["inputs"]), node
        assert node["output"] not in made
        made.add(node["output"])
    assert spec["nodes"][-1]["output"] == spec["output"]["name"]
    assert spec["output"]["shape"] == list(graph.check(g)[g.nodes[-1].out])
    # one ONNX node per layer, plus a Transpose per a @ b^T
    transposes = sum(n.transpose_b for n in g.nodes)
    assert len(spec["nodes"]) == len(g.nodes) + transposes
    weights = [n.weight for n in g.nodes if n.weight]
    assert list(spec["initializers"]) == weights
    for node in spec["nodes"]:
        if node["op"] == "Gemm":  # x [m, k] @ W [k, n]
            x, w = (spec["shapes"][t] for t in node["inputs"])
            assert x[1] == w[0] and spec["shapes"][node["output"]] == [x[0], w[1]]
        if node["op"] == "Conv":
            x, w = (spec["shapes"][t] for t in node["inputs"])
            assert x[1] == w[1] and node["attrs"]["kernel_shape"] == w[2:]


def test_the_transformer_reads_k_transposed_and_keeps_its_softmax():
    spec = graph.onnx_spec(graph.attention_block())
    ops = {n["name"]: n for n in spec["nodes"]}
    assert ops["scores_bt"]["op"] == "Transpose"
    assert ops["scores"]["inputs"] == ["q", "scores_bt"]
    assert spec["shapes"]["scores_bt"] == [64, 64]
    assert ops["softmax"]["op"] == "Softmax" and ops["softmax"]["attrs"] == {"axis": -1}
    assert ops["pv"]["inputs"] == ["p", "v"]


def test_the_stream_job_of_a_model(tmp_path):
    g = graph.resnet_block()
    job = stream.write_graph_inputs(g, tmp_path, "auto")
    assert job["fusion"] == "auto" and job["layer"] == "resnet_block-auto"
    assert job["graph"]["nodes"][0]["op"] == "Conv" and "shape" not in job
    assert '"type": "bus"' in Path(job["accelerator"]).read_text()
    json.dumps(job)  # the driver reads it as JSON on stdin
    with pytest.raises(ValueError, match="fusion 'fused' is not one of"):
        stream.write_graph_inputs(g, tmp_path, "fused")


def test_the_polyc_kernel_takes_the_input_and_every_weight():
    g = graph.resnet_block()
    kernel = graph.polyc_kernel(g)
    names = {a.name for a in kernel.free_inputs}
    assert names == {"x", "conv1_w", "conv2_w", "conv3_w"}
    assert all(a.dtype.name == "int8" for a in kernel.free_inputs)


def test_the_table():
    g = graph.resnet_block()
    data = {
        "models": [peers_models._model(g)],
        "results": {
            "polyc": {g.name: {"cycles": 70_000}},
            "stream": {
                g.name: {
                    "per-layer": {"cycles": 80_000},
                    "auto": {
                        "cycles": 66_466,
                        "groups": [
                            {
                                "layers": ["conv1", "conv2"],
                                "tiling": [
                                    {"dim": "z6", "tile": 4},
                                    {"dim": "z1", "tile": 64},
                                ],
                                "dims": {"z6": 28, "z1": 64},
                                "latency": {
                                    "total": 66_466,
                                    "per_iteration": 3_141,
                                    "overlap_between_iterations": 809,
                                    "fill": 360,
                                },
                            }
                        ],
                    },
                }
            },
        },
    }
    table = peers_models.render(data)
    assert "| 70,000 | - | 80,000 | 66,466 | 1.05 | 0.83 |" in table
    groups = peers_models.render_groups(data)
    # an untiled dimension (64 in 64) is not shown
    assert "conv1+conv2 (tiled: 28 in 4) 66,466 = 28 x 3,141 - 27 x 809 + 360" in groups
