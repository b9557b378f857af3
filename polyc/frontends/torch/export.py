"""``polyc.from_torch``: a PyTorch module, through torch.export, into one Kernel.

::

    kernel = polyc.from_torch(model.eval(), (torch.randn(1, 3, 64, 64),))
    out = polyc.interpret(kernel, {"arg0": x.numpy()})["out"]

The module is exported with :func:`torch.export.export`, decomposed to core ATen
except for the ops polyc lowers whole (convolution, linear, layer norm, softmax,
attention, pooling, ...), batch norms are folded into the convolutions before them,
and every remaining ATen op is lowered onto :mod:`polyc.ops.nn`. The Kernel's inputs
are the flattened example inputs by position (``arg0``, ``arg1``, ...); parameters
and buffers are bound inside it (:attr:`Kernel.data`); its output is ``out``, or
``out0``, ``out1``, ... when the module returns several tensors.
"""

from __future__ import annotations

import re

from polyc.errors import ArgumentError, DTypeError, FrontendError
from polyc.frontends.torch import source as src
from polyc.frontends.torch.lower import Placeholder, constant_arrays, lower_graph
from polyc.ir.kernel import Kernel

__all__ = ["export", "from_exported", "from_torch", "layer_of"]

layer_of = src.layer_of


def from_torch(
    module, example_inputs, *, name: str | None = None, fold_batch_norm: bool = True
) -> Kernel:
    """Import ``module`` run on ``example_inputs`` as one polyc Kernel.

    Args:
        module: a ``torch.nn.Module`` (put it in ``eval()`` mode for inference) or a
            ``torch.export.ExportedProgram``.
        example_inputs: a tensor or a tuple of the module's positional inputs; their
            shapes and dtypes become the Kernel's.
        name: the Kernel's name (default: the module's class name).
        fold_batch_norm: fold inference batch norms into the convolution before them.

    Raises:
        FrontendError: for an op polyc cannot lower (naming the ATen op, the node and
            the source line), data-dependent control flow, a module that mutates its
            buffers (training mode), or a failed export.
        ArgumentError: when ``module`` is not a module.
    """
    import torch

    if isinstance(module, torch.export.ExportedProgram):
        ep = module
        label = name or "exported"
    else:
        if not isinstance(module, torch.nn.Module):
            raise ArgumentError(
                f"from_torch: module is a {type(module).__name__}, not a "
                "torch.nn.Module. Wrap the function in an nn.Module."
            )
        ep = export(module, example_inputs)
        label = name or type(module).__name__
    return from_exported(ep, name=_identifier(label), fold_batch_norm=fold_batch_norm)


def export(module, example_inputs, operation: str = "from_torch"):
    """``torch.export.export`` with its failures turned into FrontendErrors."""
    import torch
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    if isinstance(example_inputs, list):
        args = tuple(example_inputs)
    try:
        with torch.no_grad():
            return torch.export.export(module, args)
    except GuardOnDataDependentSymNode as err:
        loc = src.exception_location(err)
        where = f" at {loc}" if loc else ""
        raise FrontendError(
            f"{operation}: the model has data-dependent control flow{where} because "
            "a branch or a size depends on the values in a tensor. Compute both "
            "branches and pick with torch.where, or move the branch out of the model."
        ) from None
    except Exception as err:  # torch raises many types; keep its reason
        loc = src.exception_location(err)
        where = f" at {loc}" if loc else ""
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise FrontendError(
            f"{operation}: torch.export could not trace the model{where} because "
            f"{type(err).__name__}: {first}. Make the module exportable "
            "(torch.export.export(module, args) must succeed)."
        ) from err


def decompositions():
    """Core-ATen decompositions, minus the ops polyc lowers whole."""
    import torch

    from polyc.frontends.torch.lowerings import KEEP

    table = torch.export.default_decompositions()
    for packet in KEEP:
        op = getattr(torch.ops.aten, packet.removeprefix("aten."), None)
        if op is None:
            continue
        for overload in op.overloads():
            table.pop(getattr(op, overload), None)
    return table


def needs_decomposition(graph) -> bool:
    """Whether the graph has an op to decompose or a mutation to functionalise.

    Decomposing costs seconds whatever the model (4 s on ResNet-18), so a graph whose
    ops are all lowered directly skips it. An in-place op (``relu_``) is lowered
    directly when it mutates an op's own result; a mutation through a view or of an
    input needs torch's functionalisation.
    """
    from polyc.frontends.torch.lower import inplace_base, packet
    from polyc.frontends.torch.lowerings import LOWERINGS

    for node in graph.nodes:
        if node.op != "call_function":
            continue
        key = packet(node.target)
        schema = getattr(node.target, "_schema", None)
        if schema is not None and schema.is_mutable:
            if inplace_base(node) is None:
                return True
        elif key not in LOWERINGS:
            return True
    return False


def from_exported(
    ep, *, name: str = "model", fold_batch_norm: bool = True, operation="from_torch"
) -> Kernel:
    """Lower an ``ExportedProgram`` (see :func:`from_torch`)."""
    from torch.export.graph_signature import InputKind, OutputKind

    from polyc.frontends.torch import quant

    quant.check(ep.graph_module.graph, operation)
    check_dtypes(ep, operation)
    if needs_decomposition(ep.graph_module.graph):
        ep = ep.run_decompositions(decompositions())
    sig = ep.graph_signature
    for spec in sig.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            what = spec.kind.name.lower().replace("_", " ")
            raise FrontendError(
                f"{operation}: the module's forward has a {what} of {spec.target} "
                "because it updates state while running (training-mode batch norm "
                "does). Call module.eval() before importing it."
            )
    bindings: dict[str, Placeholder] = {}
    position = 0
    for spec in sig.input_specs:
        arg = spec.arg
        node_name = getattr(arg, "name", None)
        if spec.kind == InputKind.USER_INPUT:
            if node_name is not None and hasattr(arg, "name"):
                value = getattr(arg, "value", None)
                if type(arg).__name__ == "ConstantArgument":
                    bindings[node_name] = Placeholder("scalar", value=value)
                else:
                    bindings[node_name] = Placeholder("input", f"arg{position}")
            position += 1
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            value = ep.state_dict.get(spec.target)
            if value is None:
                value = ep.constants[spec.target]
            bindings[node_name] = Placeholder("const", node_name, _array(value))
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            value = ep.constants[spec.target]
            bindings[node_name] = Placeholder("const", node_name, _array(value))
        else:
            raise FrontendError(
                f"{operation}: input {spec.target} is a {spec.kind.name.lower()} "
                "because the module uses a custom object or effect token. Use "
                "tensors only."
            )
    graph = ep.graph_module.graph
    if quant.is_quantized(graph):  # a PT2E-quantized model: int8 kernels
        graph, bindings = quant.fold(graph, bindings)
    fold = {}
    if fold_batch_norm:
        from polyc.frontends.torch.fold import fold_batch_norms

        fold = fold_batch_norms(graph, bindings)
    return lower_graph(graph, bindings, name, fold=fold, operation=operation)


def check_dtypes(ep, operation: str = "from_torch") -> None:
    """Refuse a program with a tensor of a dtype polyc has no type for.

    Raises:
        FrontendError: naming the dtype and the first input, parameter or node that
            has it.
    """
    from polyc.ir import dtypes

    kinds = {
        s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")
    }
    position = 0
    inputs: dict[str, str] = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            inputs[getattr(spec.arg, "name", "")] = f"input arg{position}"
            position += 1
    for node in ep.graph_module.graph.nodes:
        if node.op not in ("placeholder", "call_function"):
            continue
        val = node.meta.get("val")
        for v in val if isinstance(val, (list, tuple)) else (val,):
            dtype = getattr(v, "dtype", None)
            if dtype is None:
                continue
            try:
                dtypes.as_dtype(dtype)
            except DTypeError:
                raise _dtype_error(operation, node, dtype, kinds, inputs) from None


def _dtype_error(operation, node, dtype, kinds, inputs) -> FrontendError:
    name = str(dtype).removeprefix("torch.")
    if node.op == "placeholder":
        spec = kinds.get(node.name)
        kind = spec.kind.name.lower().replace("_", " ") if spec is not None else ""
        where = inputs.get(node.name) or f"{kind} {getattr(spec, 'target', node.name)}"
    else:
        loc = src.node_location(node)
        where = f"{src.op_name(node.target)} (node {node.name}" + (
            f" at {loc})" if loc else ")"
        )
    return FrontendError(
        f"{operation}: {name} is not supported because {where} is {name} and polyc "
        "computes in float32, float16, bfloat16, float64, int8, int32, int64 and bool "
        "only. "
        "Cast it to one of those before importing the model."
    )


def _array(value):
    return constant_arrays([value])[0]


def _identifier(label: str) -> str:
    text = re.sub(r"\W", "_", label)
    return text if text and not text[0].isdigit() else f"m_{text}"
