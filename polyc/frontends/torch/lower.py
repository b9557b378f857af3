"""Lower an FX graph of ATen ops to one polyc Kernel.

Each ``call_function`` node is looked up in the registry of
:mod:`polyc.frontends.torch.lowerings` and lowered onto the tensor-level op library
(:mod:`polyc.ops.nn`), so every op of the graph becomes definitions of one compute
program and :func:`polyc.compute.kernel` turns the whole graph into one Kernel.
Placeholders are either the caller's inputs (``arg0``, ``arg1``, ...) or constants
(weights, buffers) bound inside the kernel with :meth:`Kernel.with_data`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from polyc.errors import DTypeError, FrontendError, PolycError, ShapeError
from polyc.frontends.torch import bf16
from polyc.frontends.torch import source as src
from polyc.frontends.torch.registry import packet
from polyc.ir import dtypes
from polyc.ir.kernel import Kernel
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor, TensorLoad

#: ops whose presence means the model branches or sizes on tensor values
DATA_DEPENDENT = {
    "aten.item",
    "aten._local_scalar_dense",
    "aten.nonzero",
    "aten.masked_select",
    "aten.unique",
    "aten._unique2",
    "cond",
    "while_loop",
    "torch.ops.higher_order.cond",
    "torch.ops.higher_order.while_loop",
}


#: ops never evaluated at import time (random, or their values are undefined)
_RANDOM = ("rand", "bernoulli", "dropout", "normal", "uniform", "multinomial")
_UNFOLDABLE = {"aten.empty", "aten.empty_like", "aten.empty_strided", "getitem"}


@dataclass(frozen=True)
class Placeholder:
    """What a graph placeholder is bound to.

    ``kind`` is ``"input"`` (the caller passes it as ``name``), ``"const"`` (bound
    data ``value``) or ``"scalar"`` (a Python value inlined into the program).
    """

    kind: str
    name: str = ""
    value: object = None


def lower_graph(
    graph,
    bindings: Mapping[str, Placeholder],
    name: str,
    *,
    fold: Mapping | None = None,
    operation: str = "from_torch",
) -> Kernel:
    """One Kernel computing ``graph``'s outputs.

    ``bindings`` maps each placeholder node's name to what it is bound to; ``fold``
    maps convolution nodes to folded ``(weight, bias)`` arrays and the batch norms
    they absorbed to their convolution (see :mod:`polyc.frontends.torch.fold`).

    Raises:
        FrontendError: for an op outside the supported set (naming the op, the node
            and the user's source line) or data-dependent control flow.
    """
    return _Lowering(graph, bindings, name, fold or {}, operation).run()


class _Lowering:
    """State of one graph's lowering; handlers see it as ``ctx``."""

    def __init__(self, graph, bindings, name, fold, operation):
        self.graph = graph
        self.bindings = bindings
        self.kernel_name = name
        self.fold = fold
        self.operation = operation
        self.env: dict = {}
        self.data: dict[str, np.ndarray] = {}
        self.inputs: list[Tensor] = []
        self.node = None
        self.seen: set[int] = set()
        self.out_names: dict = {}
        #: the node computes in float32 where torch says bfloat16 (see bf16.lower)
        self.opmath = False

    # what handlers use ---------------------------------------------------------
    @property
    def name(self) -> str:
        """The name the current node's result tensor should take."""
        return self.out_names.get(self.node, self.node.name)

    def result_dtype(self) -> dtypes.DType | None:
        """The dtype the current node computes in: torch's result dtype, but
        float32 for bfloat16 while the node computes in float32 (see
        :mod:`polyc.frontends.torch.bf16`); None when the result is no tensor."""
        val = self.node.meta.get("val")
        if not hasattr(val, "dtype"):
            return None
        dt = _dtype(self, val.dtype)
        return dtypes.float32 if self.opmath and dt == dtypes.bfloat16 else dt

    def sub(self, suffix: str) -> str:
        """A name for an intermediate tensor of the current node."""
        return f"{self.node.name}_{suffix}"

    def constant(self, t) -> np.ndarray | None:
        """The bound value of a constant tensor, or None for computed tensors."""
        if isinstance(t, Tensor):
            return self.data.get(t.name)
        return None

    def new_constant(self, suffix: str, value: np.ndarray) -> Tensor:
        """A constant tensor (bound data) made by a lowering, e.g. folded weights."""
        name = self.sub(suffix)
        t = pc.placeholder(name, value.shape, str(value.dtype))
        self.data[name] = np.ascontiguousarray(value)
        return t

    def error(self, what: str, fix: str) -> FrontendError:
        """A FrontendError about the current node, with its source line."""
        return node_error(self.operation, self.node, what, fix)

    # the walk ----------------------------------------------------------------
    def run(self) -> Kernel:
        outputs = self._output_nodes()
        mutated = {
            n.args[0]
            for n in self.graph.nodes
            if n.op == "call_function" and inplace_base(n) is not None
        }
        for n, node in enumerate(outputs):
            source = _alias_source(node)
            if source is not None and source not in {*self.out_names, *mutated}:
                self.out_names[source] = _out_name(n, len(outputs))
        for node in self.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                self.env[node] = self._placeholder(node)
            elif node.op == "call_function":
                self.env[node] = self._call(node)
            elif node.op == "get_attr":
                raise self.error(
                    f"the graph reads attribute {node.target} directly",
                    "Export the module with torch.export so that its weights are "
                    "lifted to inputs",
                )
            elif node.op == "output":
                return self._kernel(node)
        raise FrontendError(f"{self.operation}: the graph has no output node.")

    def _output_nodes(self) -> list:
        out = next(n for n in self.graph.nodes if n.op == "output")
        values = out.args[0]
        values = values if isinstance(values, (list, tuple)) else [values]
        return [v if hasattr(v, "op") else None for v in values]

    def _placeholder(self, node):
        b = self.bindings[node.name]
        if b.kind == "scalar":
            return b.value
        if b.kind == "input":
            val = node.meta.get("val")
            t = pc.placeholder(b.name, tuple(val.shape), _dtype(self, val.dtype))
            self.inputs.append(t)
            return t
        value = np.asarray(b.value)
        t = pc.placeholder(b.name, value.shape, _dtype(self, value.dtype))
        self.data[b.name] = np.ascontiguousarray(value, dtype=t.dtype.numpy)
        return t

    def _call(self, node):
        from polyc.frontends.torch.lowerings import LOWERINGS

        key = packet(node.target)
        base = inplace_base(node)
        if base is not None:
            key = base
        if node in self.fold.get("absorbed", {}):
            conv = self.env[self.fold["absorbed"][node]]
            multi = isinstance(node.meta.get("val"), (list, tuple))
            return (conv, None, None) if multi else conv
        args = _map(node.args, self.env)
        kwargs = _map(dict(node.kwargs), self.env)
        folded = self._fold_constant(node, key, args, kwargs)
        if folded is not None:
            return folded
        handler = LOWERINGS.get(key)
        if handler is None:
            raise unsupported(self.operation, node)
        conv = self.fold.get("conv", {}).get(node)
        if conv is not None:
            args = list(args)
            args[1] = self.new_constant("w", conv[0])
            bias = self.new_constant("b", conv[1])
            if len(args) > 2:
                args[2] = bias
            else:
                kwargs["bias"] = bias
        try:
            if bf16.applies(node):
                result = bf16.lower(self, key, handler, args, kwargs)
            else:
                result = handler(self, *args, **kwargs)
        except FrontendError:
            raise
        except PolycError as err:
            raise self.error(
                f"lowering it failed because {err}", "Change that line"
            ) from err
        self._tag(node, result)
        self._check(node, result)
        if base is not None:
            # the op wrote its first argument: later readers of it see the result
            self.env[node.args[0]] = result
        return result

    def _fold_constant(self, node, key, args, kwargs):
        """Evaluate ``node`` with torch when its tensors are all constants.

        Weight-only computation (a transposed weight, a mask built with arange, a
        tensor of zeros) then becomes bound data instead of statements.
        """
        tensors = _tensors((args, kwargs))
        if any(w in key for w in _RANDOM) or key in _UNFOLDABLE:
            return None
        if tensors and not all(t.name in self.data for t in tensors):
            return None
        if not tensors and not key.startswith("aten."):
            return None
        import torch

        def as_torch(v):
            if isinstance(v, Tensor):
                return bf16.to_torch(self.data[v.name].copy())
            if isinstance(v, (list, tuple)):
                return type(v)(as_torch(u) for u in v)
            return v

        try:
            value = node.target(*as_torch(args), **as_torch(kwargs))
        except Exception:  # leave it to the lowering, which reports properly
            return None
        if isinstance(value, torch.Tensor):
            return self._bind(node.name, value)
        if isinstance(value, (list, tuple)) and all(
            isinstance(v, torch.Tensor) for v in value
        ):
            return tuple(self._bind(f"{node.name}_{n}", v) for n, v in enumerate(value))
        return None

    def _bind(self, name: str, value) -> Tensor:
        arr = constant_arrays([value])[0]
        if arr.dtype == np.bool_:
            t = pc.placeholder(name, arr.shape, "bool")
        else:
            t = pc.placeholder(name, arr.shape, _dtype(self, arr.dtype))
        self.data[name] = np.ascontiguousarray(arr)
        return t

    def _tag(self, node, result) -> None:
        """Set the origin of every definition made for ``node``."""
        origin = src.origin_of(node)
        todo = [t for t in _tensors(result) if id(t) not in self.seen]
        while todo:
            t = todo.pop()
            if id(t) in self.seen:
                continue
            self.seen.add(id(t))
            for d in t.definitions:
                d.name = f"{origin}: {d.name or t.name}"
                for e in (d.rhs, d.where):
                    for n in e.walk() if e is not None else ():
                        if isinstance(n, TensorLoad) and id(n.tensor) not in self.seen:
                            todo.append(n.tensor)

    def _check(self, node, result) -> None:
        val = node.meta.get("val")
        if not isinstance(result, Tensor) or not hasattr(val, "shape"):
            return
        want = tuple(int(d) for d in val.shape)
        got = tuple(int(d.const) if d.is_constant else -1 for d in result.shape)
        if got != want:
            raise ShapeError(
                f"{self.operation}: the lowering of {src.op_name(node.target)} "
                f"(node {node.name}) made shape {got} but torch says {want}. This is "
                "a bug in polyc's torch frontend; please report it with the model."
            )
        if result.dtype != _dtype(self, val.dtype):
            raise DTypeError(
                f"{self.operation}: the lowering of {src.op_name(node.target)} "
                f"(node {node.name}) made {result.dtype} but torch says {val.dtype}. "
                "This is a bug in polyc's torch frontend; please report it."
            )

    def _kernel(self, out_node) -> Kernel:
        values = out_node.args[0]
        values = values if isinstance(values, (list, tuple)) else [values]
        outs: list[Tensor] = []
        for n, v in enumerate(values):
            t = self.env[v] if hasattr(v, "op") else v
            want = _out_name(n, len(values))
            if not isinstance(t, Tensor):
                raise FrontendError(
                    f"{self.operation}: output {n} is {t!r}, not a tensor, because the "
                    "module returns a Python value. Return tensors only."
                )
            if t.name != want or t.is_placeholder or t in outs:
                t = pc.compute(want, t.shape, lambda *ix, t=t: t[ix])
                for d in t.definitions:
                    d.name = f"output{src.LAYER_SEP}copy of {v}: {want}"
            outs.append(t)
        kernel = pc.kernel(self.kernel_name, outs, inputs=self.inputs)
        used = {k: v for k, v in self.data.items() if k in kernel.arrays}
        return kernel.with_data(used) if used else kernel


_ALIASES = {
    "aten.clone",
    "aten.contiguous",
    "aten.alias",
    "aten.detach",
    "aten.dropout",
}


def _alias_source(node):
    """The node whose tensor ``node`` is (through copies that lower to nothing)."""
    while (
        node is not None
        and node.op == "call_function"
        and packet(node.target) in _ALIASES
        and getattr(node.args[0], "op", None) == "call_function"
    ):
        node = node.args[0]
    return node


def _out_name(n: int, count: int) -> str:
    return "out" if count == 1 else f"out{n}"


def inplace_base(node) -> str | None:
    """``aten.relu`` for ``relu_(x)`` when ``x`` is an op's own result (no view, no
    input), so the mutation can be lowered as a new value; None otherwise."""
    key = packet(node.target)
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.is_mutable or not key.endswith("_"):
        return None
    from polyc.frontends.torch.lowerings import LOWERINGS

    base = key[:-1]
    if base not in LOWERINGS or not node.args:
        return None
    first = schema.arguments[0]
    written = [a for a in schema.arguments if a.alias_info and a.alias_info.is_write]
    if written != [first]:
        return None
    target = node.args[0]
    if getattr(target, "op", None) != "call_function":
        return None
    producer = getattr(target.target, "_schema", None)
    if producer is None or any(r.alias_info is not None for r in producer.returns):
        return None  # a view: writing it writes its base
    return base


def _map(value, env):
    if hasattr(value, "op") and hasattr(value, "graph"):
        return env[value]
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, env) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, env) for k, v in value.items()}
    return value


def _tensors(value) -> list[Tensor]:
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _dtype(ctx, dtype) -> dtypes.DType:
    try:
        return dtypes.as_dtype(dtype)
    except DTypeError:
        raise ctx.error(
            f"its dtype {dtype} is not one polyc computes in",
            f"Cast to one of {', '.join(dtypes.SUPPORTED)} before it",
        ) from None


def _where(node) -> str:
    loc = src.node_location(node)
    return f"node {node.name}" + (f" at {loc}" if loc else "")


def node_error(operation: str, node, what: str, fix: str) -> FrontendError:
    """``<operation>: <op> (node <name> at <file:line>): <what>. <fix>.``"""
    return FrontendError(
        f"{operation}: {src.op_name(node.target)} ({_where(node)}): {what}. {fix}."
    )


def unsupported(operation: str, node) -> FrontendError:
    """The error for an op with no lowering (or one that depends on data)."""
    key = packet(node.target)
    op = src.op_name(node.target)
    if key in DATA_DEPENDENT or op in DATA_DEPENDENT:
        return FrontendError(
            f"{operation}: the model has data-dependent control flow because {op} "
            f"({_where(node)}) makes a value or shape depend on tensor contents. "
            "Compute both branches and pick with torch.where, or keep this part "
            "outside the compiled module."
        )
    return FrontendError(
        f"{operation}: {op} is not supported because polyc has no lowering for it "
        f"({_where(node)}). Express that line with supported operations, or keep it "
        "outside the compiled module."
    )


def constant_arrays(values: Sequence) -> list[np.ndarray]:
    """Detached numpy copies of torch tensors."""
    return [np.asarray(bf16.to_numpy(v)) for v in values]
