"""Whole models for the layer-fusion comparison, described once for polyc and Stream.

A :class:`Graph` is a list of :class:`Node` s over named int8 tensors: the model's
input, the weights (one per contraction, made by the node) and the intermediates.
:func:`check` infers every tensor's shape and refuses a graph whose shapes do not
chain. From the one description :func:`polyc_kernel` builds the polyc Kernel (int8
contractions accumulated in int32 and requantized to int8 in HW-A's output path,
so the MAC array runs them) and :func:`onnx_spec` the plain JSON the Stream driver
turns into an int8 ONNX graph inside Stream's venv (this venv has no ``onnx``).

Operators: ``conv`` (with its ReLU, fused into the requantization), ``matmul``
(``x @ W`` with a weight, or ``a @ b`` / ``a @ b^T`` of two activations),
``add`` (int8, the residual) and ``softmax`` (last axis). polyc runs the softmax on
the vector unit in float32 and quantizes it back to int8 (``p * 127``); Stream
2.1.1 reads ONNX ``Softmax`` as a normalization node. A ReLU is not an ONNX node of
its own: HW-A applies it in the requantization of the array's output path, free
in both tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: ops every tool is given
OPS = ("conv", "matmul", "add", "softmax")
#: the ONNX op of each op (a matmul with a weight is a Gemm)
ONNX_OPS = {"conv": "Conv", "add": "Add", "softmax": "Softmax"}


@dataclass(frozen=True)
class Node:
    """One layer. ``inputs`` name tensors; ``out`` is the tensor it makes.

    conv: ``n`` filters of ``f x f`` taps, ``pad``, stride 1, ``relu``.
    matmul: ``n`` columns of a weight (``n > 0``), or two activations
    (``n == 0``; ``transpose_b`` reads the second as ``b^T``), ``relu``.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    out: str
    n: int = 0
    f: int = 0
    pad: int = 0
    relu: bool = False
    transpose_b: bool = False

    @property
    def weight(self) -> str | None:
        """The weight tensor the node owns (conv, or matmul with ``n > 0``)."""
        if self.op == "conv" or (self.op == "matmul" and self.n):
            return f"{self.name}_w"
        return None


@dataclass(frozen=True)
class Graph:
    name: str
    what: str
    input: str
    input_shape: tuple[int, ...]
    nodes: tuple[Node, ...]
    notes: tuple[str, ...] = field(default=())


class GraphError(ValueError):
    """A graph whose shapes do not chain (the message names the node)."""


def check(g: Graph) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape, activations and weights, in node order.

    Raises:
        GraphError: an unknown op, an input not made before, or shapes that do
            not chain.
    """
    shapes: dict[str, tuple[int, ...]] = {g.input: tuple(g.input_shape)}
    for node in g.nodes:
        if node.op not in OPS:
            raise GraphError(f"graph {g.name}: node {node.name} has op {node.op}")
        missing = [t for t in node.inputs if t not in shapes]
        if missing or node.out in shapes:
            raise GraphError(
                f"graph {g.name}: node {node.name} reads {missing} before they "
                f"are made, or remakes {node.out}"
            )
        ins = [shapes[t] for t in node.inputs]
        out, weight = _infer(g.name, node, ins)
        if weight is not None:
            shapes[node.weight] = weight
        shapes[node.out] = out
    return shapes


def _infer(graph: str, node: Node, ins: list[tuple[int, ...]]):
    def fail(why: str) -> GraphError:
        return GraphError(f"graph {graph}: node {node.name}: {why} ({ins})")

    if node.op == "conv":
        (x,) = ins
        if len(x) != 4:
            raise fail("a conv reads an NCHW tensor")
        _, c, h, w = x
        oy, ox = h + 2 * node.pad - node.f + 1, w + 2 * node.pad - node.f + 1
        return (1, node.n, oy, ox), (node.n, c, node.f, node.f)
    if node.op == "matmul":
        if node.n:
            ((m, k),) = ins
            return (m, node.n), (k, node.n)
        (m, k), b = ins
        kb, n = b[::-1] if node.transpose_b else b
        if kb != k:
            raise fail(f"the reduction sizes {k} and {kb} differ")
        return (m, n), None
    if node.op == "add":
        a, b = ins
        if a != b:
            raise fail("an add of two shapes")
        return a, None
    (x,) = ins  # softmax
    return x, None


def macs(g: Graph) -> int:
    """The graph's multiply-accumulates (convs and matmuls)."""
    shapes, total = check(g), 0
    for node in g.nodes:
        out = shapes[node.out]
        if node.op == "conv":
            _, c, fy, fx = shapes[node.weight]
            total += out[1] * out[2] * out[3] * c * fy * fx
        elif node.op == "matmul":
            k = shapes[node.inputs[0]][1]
            total += out[0] * out[1] * k
    return total


def minimum_bytes(g: Graph) -> int:
    """int8 bytes of the input, the weights and the final output, each once: what
    a model that keeps every intermediate on chip must move."""
    shapes = check(g)
    weights = [n.weight for n in g.nodes if n.weight]
    total = _size(shapes[g.input]) + _size(shapes[g.nodes[-1].out])
    return total + sum(_size(shapes[w]) for w in weights)


def _size(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


# the two models --------------------------------------------------------------------
def resnet_block(c: int = 64, hw: int = 28, expand: int = 128) -> Graph:
    """A ResNet basic block and a 1x1 projection: conv 3x3 + ReLU, conv 3x3, the
    residual add, conv 1x1 ``c -> expand`` + ReLU (int8 NCHW)."""
    return Graph(
        "resnet_block",
        f"ResNet basic block {c}ch {hw}x{hw} + 1x1 conv {c}->{expand}",
        "x",
        (1, c, hw, hw),
        (
            Node("conv1", "conv", ("x",), "a1", n=c, f=3, pad=1, relu=True),
            Node("conv2", "conv", ("a1",), "a2", n=c, f=3, pad=1),
            Node("add", "add", ("a2", "x"), "a3"),
            Node("conv3", "conv", ("a3",), "y", n=expand, f=1, relu=True),
        ),
    )


def attention_block(tokens: int = 64, d: int = 64, hidden: int = 256) -> Graph:
    """One single-head transformer block without its norms: Q, K, V projections,
    ``S = Q K^T``, softmax, ``P V``, the output projection and residual, an MLP
    ``d -> hidden -> d`` with a ReLU, and its residual (int8, ``tokens x d``)."""
    return Graph(
        "attention_block",
        f"transformer block {tokens} tokens, width {d}, MLP {hidden}",
        "x",
        (tokens, d),
        (
            Node("q_proj", "matmul", ("x",), "q", n=d),
            Node("k_proj", "matmul", ("x",), "k", n=d),
            Node("v_proj", "matmul", ("x",), "v", n=d),
            Node("scores", "matmul", ("q", "k"), "s", transpose_b=True),
            Node("softmax", "softmax", ("s",), "p"),
            Node("pv", "matmul", ("p", "v"), "o"),
            Node("o_proj", "matmul", ("o",), "y1", n=d),
            Node("res1", "add", ("y1", "x"), "r1"),
            Node("fc1", "matmul", ("r1",), "h", n=hidden, relu=True),
            Node("fc2", "matmul", ("h",), "y2", n=d),
            Node("res2", "add", ("y2", "r1"), "out"),
        ),
        notes=("no layer norm (Stream 2.1.1 has no operator for it)",),
    )


GRAPHS = (resnet_block(), attention_block())


def graph(name: str) -> Graph:
    for g in GRAPHS:
        if g.name == name:
            return g
    raise KeyError(name)


# polyc ---------------------------------------------------------------------------
#: the requantization scale of every contraction (values stay small: any works)
SCALE = 1.0 / 64


def polyc_kernel(g: Graph):
    """The graph as one polyc Kernel: int8 in and out of every layer."""
    from polyc import compute as pc
    from polyc.ops import elementwise as ew
    from polyc.ops import nn, quant, reduce, shape

    shapes = check(g)
    t = {g.input: pc.placeholder(g.input, shapes[g.input], "int8")}
    weights = []
    for node in g.nodes:
        ins = [t[name] for name in node.inputs]
        if node.weight:
            w = pc.placeholder(node.weight, shapes[node.weight], "int8")
            weights.append(w)
        if node.op == "conv":
            acc = nn.conv2d(ins[0], w, None, 1, node.pad, name=f"{node.name}_acc")
        elif node.op == "matmul":
            b = w if node.weight else ins[1]
            if node.transpose_b:
                b = shape.transpose(b, 0, 1, name=f"{node.name}_bt")
            acc = nn.matmul(ins[0], b, name=f"{node.name}_acc")
        if node.op in ("conv", "matmul"):
            out = quant.requantize(acc, SCALE, relu=node.relu, name=node.out)
        elif node.op == "add":
            out = ew.add(ins[0], ins[1], name=node.out)
        else:
            p = reduce.softmax(ew.cast(ins[0], "float32"), -1, name=f"{node.name}_f")
            out = ew.cast(ew.mul(p, 127.0), "int8", name=node.out)
        t[node.out] = out
    return pc.kernel(g.name, [t[g.nodes[-1].out]], inputs=[t[g.input], *weights])


# Stream --------------------------------------------------------------------------
def onnx_spec(g: Graph) -> dict:
    """The graph as the Stream driver builds it in ONNX: nodes with their ONNX op,
    inputs, output and attributes, the weights (initializers) and every tensor's
    shape (Stream 2.1.1 parses every op of :data:`OPS`)."""
    shapes = check(g)
    nodes, initializers = [], {}
    for node in g.nodes:
        ins = list(node.inputs)
        entry = {"name": node.name, "inputs": ins, "output": node.out, "attrs": {}}
        entry["op"] = ONNX_OPS.get(node.op, "MatMul")
        if node.op == "conv":
            entry["inputs"] = [*ins, node.weight]
            f = node.f
            entry["attrs"] = {"kernel_shape": [f, f], "pads": [node.pad] * 4}
            entry["attrs"]["strides"] = [1, 1]
        elif node.op == "matmul" and node.weight:
            entry["op"] = "Gemm"
            entry["inputs"] = [*ins, node.weight]
        elif node.op == "softmax":
            entry["attrs"] = {"axis": -1}
        elif node.op == "matmul" and node.transpose_b:
            # b^T as a Transpose node, which Stream folds into the MatMul's access
            bt = f"{node.name}_bt"
            perm = {"perm": [1, 0]}
            nodes.append(
                {"name": bt, "op": "Transpose", "inputs": [ins[1]], "output": bt,
                 "attrs": perm}
            )  # fmt: skip
            shapes[bt] = shapes[node.inputs[1]][::-1]
            entry["inputs"] = [ins[0], bt]
        if node.weight:
            initializers[node.weight] = list(shapes[node.weight])
        nodes.append(entry)
    last = g.nodes[-1].out
    return {
        "name": g.name,
        "input": {"name": g.input, "shape": list(shapes[g.input])},
        "output": {"name": last, "shape": list(shapes[last])},
        "initializers": initializers,
        "nodes": nodes,
        "shapes": {name: list(s) for name, s in shapes.items()},
    }
