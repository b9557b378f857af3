"""Run what polyc lowers in polyc and only the rest in eager PyTorch.

When a graph has ops polyc cannot lower, the ATen graph is split with torch's
``CapabilityBasedPartitioner``: maximal regions of lowerable ops become one polyc
Kernel each (compiled once, run on the backend's target; the graph's parameters and
buffers are bound inside it and batch norms fold as in ``from_torch``), and the nodes
between them run as ATen calls in Python. A region whose lowering still fails (an unsupported
variant of a known op) runs eagerly too.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from polyc.errors import FrontendError
from polyc.frontends.torch import bf16
from polyc.frontends.torch import source as src
from polyc.frontends.torch.fold import fold_batch_norms
from polyc.frontends.torch.lower import (
    Placeholder,
    constant_arrays,
    inplace_base,
    lower_graph,
    packet,
    unsupported,
)


@dataclass
class Split:
    """A graph split between polyc kernels and eager ATen calls."""

    run: object  # callable(args) -> tuple of tensors
    kernels: list = field(default_factory=list)
    eager: list[str] = field(default_factory=list)  # what runs eagerly, and where
    reasons: list[str] = field(default_factory=list)


def split(ep, name: str, executor, operation: str) -> Split:
    """Partition the exported program ``ep``; ``executor(kernel)`` makes a runner
    ``(arrays) -> outputs`` for a polyc region."""
    import torch
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    from polyc.frontends.torch.export import decompositions, needs_decomposition
    from polyc.frontends.torch.lowerings import LOWERINGS

    if needs_decomposition(ep.graph_module.graph):
        ep = ep.run_decompositions(decompositions())

    class Lowerable(OperatorSupportBase):
        def is_node_supported(self, submodules, node) -> bool:
            if node.op != "call_function":
                return False
            key = packet(node.target)
            return key in LOWERINGS or inplace_base(node) is not None

    fused = CapabilityBasedPartitioner(
        ep.graph_module, Lowerable(), allows_single_node_partition=True
    ).partition_and_fuse()
    result = Split(run=None)
    for node in fused.graph.nodes:
        if node.op == "call_function":
            result.eager.append(_describe(node))
            result.reasons.append(str(unsupported(operation, node)))
    constants = _constant_placeholders(ep)
    calls = {n.target: n for n in fused.graph.nodes if n.op == "call_module"}
    for child, sub in list(fused.named_children()):
        bindings = _bindings(sub, calls[child], constants)
        try:
            kernel = lower_graph(
                sub.graph,
                bindings,
                f"{name}_{child}",
                fold=fold_batch_norms(sub.graph, bindings),
                operation=operation,
            )
        except FrontendError as err:
            result.eager += [
                _describe(n) for n in sub.graph.nodes if n.op == "call_function"
            ]
            result.reasons.append(str(err))
            continue
        result.kernels.append(kernel)
        setattr(fused, child, _region_class()(kernel, executor(kernel), _single(sub)))
    values = _lifted_values(ep)

    def run(args):
        flat = [next(it) if v is _USER else v for it in [iter(args)] for v in values]
        with torch.no_grad():
            out = fused(*flat)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    result.run = run
    return result


_USER = object()


def _constant_placeholders(ep) -> dict:
    """Placeholder name -> array, for the graph's parameters, buffers and constant
    tensors (lifted by torch.export)."""
    from torch.export.graph_signature import InputKind

    out = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT or not hasattr(spec.arg, "name"):
            continue
        value = ep.state_dict.get(spec.target)
        if value is None:
            value = ep.constants.get(spec.target)
        if value is not None:
            out[spec.arg.name] = constant_arrays([value])[0]
    return out


def _bindings(sub, call, constants: dict) -> dict:
    """A region's placeholders: the graph's constants bound inside the kernel (so
    batch norms fold as in from_torch), the rest inputs ``arg<k>`` by position."""
    out = {}
    placeholders = [p for p in sub.graph.nodes if p.op == "placeholder"]
    for k, (p, arg) in enumerate(zip(placeholders, call.args)):
        name = getattr(arg, "name", None)
        if getattr(arg, "op", None) == "placeholder" and name in constants:
            out[p.name] = Placeholder("const", p.name, constants[name])
        else:
            out[p.name] = Placeholder("input", f"arg{k}")
    return out


def _lifted_values(ep) -> list:
    """The graph's placeholders in order: constants' values, ``_USER`` for inputs."""
    from torch.export.graph_signature import InputKind

    out = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            out.append(_USER)
        elif spec.target in ep.state_dict:
            out.append(ep.state_dict[spec.target])
        else:
            out.append(ep.constants[spec.target])
    return out


def _single(sub) -> bool:
    out = next(n for n in sub.graph.nodes if n.op == "output")
    return not isinstance(out.args[0], (tuple, list))


def _describe(node) -> str:
    loc = src.node_location(node)
    return f"{src.op_name(node.target)} (node {node.name}" + (
        f" at {loc})" if loc else ")"
    )


@functools.cache
def _region_class():
    import torch

    class Region(torch.nn.Module):
        """A polyc kernel standing in for a fused region of the graph."""

        def __init__(self, kernel, runner, single: bool):
            super().__init__()
            self.kernel = kernel
            self.runner = runner
            self.single = single
            self.outputs = [a.name for a in kernel.outputs]

        def forward(self, *args):
            arrays = {
                f"arg{n}": bf16.to_numpy(a)
                for n, a in enumerate(args)
                if f"arg{n}" in self.kernel.arrays
            }
            result = self.runner(arrays)
            outs = tuple(bf16.to_torch(result[o]) for o in self.outputs)
            return outs[0] if self.single else outs

    return Region
