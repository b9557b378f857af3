"""The ``torch.compile(model, backend="polyc")`` backend.

Dynamo hands the backend one FX graph per region it could trace (a graph break, such
as a ``print`` or a data-dependent branch, splits a function into several graphs and
runs the code between them in Python). Each graph is exported to ATen and lowered to
one polyc Kernel, compiled once per input shape, and run on the chosen target; its
outputs come back as torch tensors. In a graph with ops polyc cannot lower, only those
ops run eagerly, between polyc kernels for the regions around them
(:mod:`polyc.frontend.torch_partition`), and an :class:`EagerFallbackWarning` names
them. :func:`report` lists the graphs, what ran where, and Dynamo's graph breaks.

The backend is registered through the ``torch_dynamo_backends`` entry point (see
setup.cfg), so torch finds it by name without ``import polyc`` importing torch.
Options (``torch.compile(m, backend="polyc", options={...})``):

- ``target``: ``"host"`` (native C, the default), ``"interpret"`` (the reference
  interpreter) or ``"accelerator"`` (``polyc.compile`` and the simulator);
- ``config``: the accelerator configuration (implies ``target="accelerator"``; default
  ``"edge-npu"``). ``records()[i].compiled`` holds the compiled kernels, whose
  ``last_report`` :func:`polyc.frontend.torch_report.model_report` breaks down.

Outputs carry no autograd history: the backend compiles inference.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field

from polyc.errors import ArgumentError, FrontendError, PolycError

TARGETS = ("host", "interpret", "accelerator")
OPERATION = "torch.compile(backend='polyc')"
DEFAULT_CONFIG = "edge-npu"


class EagerFallbackWarning(UserWarning):
    """A graph (or part of one) runs in eager PyTorch instead of polyc."""


@dataclass
class GraphRecord:
    """What happened to one graph Dynamo handed to the backend."""

    index: int
    ops: int
    status: str = "compiled"  # or "partial" (some ops eager), "eager"
    reason: str = ""
    kernels: list = field(default_factory=list)
    eager: list = field(default_factory=list)  # ops that run eagerly, and where
    compiled: list = field(default_factory=list)  # polyc.compile results (accelerator)


_LOCK = threading.Lock()
_RECORDS: list[GraphRecord] = []


def polyc_backend(gm, example_inputs, options: dict | None = None, **_):
    """Compile a Dynamo graph with polyc; see the module docstring."""
    target, config = _options(options or {})
    ops = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
    with _LOCK:
        record = GraphRecord(len(_RECORDS), ops)
        _RECORDS.append(record)
    compiled = _Compiled(gm, record, target, config)
    try:
        compiled.prepare(example_inputs)
    except PolycError as err:
        return compiled.fall_back(err)
    return compiled


def _options(options: dict) -> tuple[str, object]:
    unknown = set(options) - {"target", "config"}
    if unknown:
        raise ArgumentError(
            f"torch.compile(backend='polyc'): unknown option(s) {sorted(unknown)} "
            "because the backend takes 'target' and 'config'. Pass only those."
        )
    config = options.get("config")
    target = options.get("target", "accelerator" if config is not None else "host")
    if target not in TARGETS:
        raise ArgumentError(
            f"torch.compile(backend='polyc'): target={target!r} is unknown because "
            f"the targets are {', '.join(TARGETS)}. Pass one of those."
        )
    return target, config


class _Compiled:
    """A graph's compiled forms, one per tuple of input shapes and dtypes."""

    def __init__(self, gm, record: GraphRecord, target: str, config):
        self.gm = gm
        self.record = record
        self.target = target
        self.config = config
        self.runners: dict = {}
        self.eager = False

    def prepare(self, inputs) -> None:
        """Compile for the example inputs now (errors show at compile time), unless
        Dynamo made the graph shape-polymorphic: then compile per shape when called.
        """
        if all(_concrete(a) for a in inputs):
            self._runner(inputs)

    def fall_back(self, err: Exception):
        self.record.status = "eager"
        self.record.reason = str(err)
        self.eager = True
        warnings.warn(
            f"polyc: graph {self.record.index} runs in eager PyTorch because {err}",
            EagerFallbackWarning,
            stacklevel=2,
        )
        return self.gm.forward

    def __call__(self, *args):
        if self.eager:
            return self.gm.forward(*args)
        try:
            run = self._runner(args)
        except PolycError as err:
            self.fall_back(err)
            return self.gm.forward(*args)
        return run(args)

    def _runner(self, inputs):
        key = tuple(
            (tuple(a.shape), a.dtype) if hasattr(a, "shape") else ("value", a)
            for a in inputs
        )
        run = self.runners.get(key)
        if run is None:
            run = self._compile(inputs)
            self.runners[key] = run
        return run

    def _compile(self, inputs):
        from polyc.frontend.torch_export import export, from_exported

        name = f"graph{self.record.index}"
        ep = export(self.gm, tuple(inputs), operation=OPERATION)
        try:
            kernel = from_exported(ep, name=name, operation=OPERATION)
        except FrontendError as err:
            return self._split(ep, name, err)
        self.record.kernels.append(kernel)
        execute = _executor(kernel, self.target, self.config, self.record)
        positions = [
            n
            for n, a in enumerate(inputs)
            if f"arg{n}" in kernel.arrays and hasattr(a, "shape")
        ]
        outputs = [a.name for a in kernel.outputs]

        def run(args):
            import torch

            arrays = {f"arg{n}": args[n].detach().cpu().numpy() for n in positions}
            result = execute(arrays)
            return tuple(torch.from_numpy(result[o]) for o in outputs)

        return run

    def _split(self, ep, name: str, err: FrontendError):
        """Lowerable regions in polyc, the rest eagerly (or all of it eagerly)."""
        from polyc.frontend.torch_partition import split

        parts = split(
            ep,
            name,
            lambda k: _executor(k, self.target, self.config, self.record),
            OPERATION,
        )
        if not parts.kernels:
            raise err
        self.record.status = "partial"
        self.record.kernels += parts.kernels
        self.record.eager += parts.eager
        self.record.reason = parts.reasons[0] if parts.reasons else str(err)
        warnings.warn(
            f"polyc: graph {self.record.index} runs {', '.join(parts.eager)} in eager "
            f"PyTorch and the rest in {len(parts.kernels)} polyc kernel(s) because "
            f"{self.record.reason}",
            EagerFallbackWarning,
            stacklevel=3,
        )
        return parts.run


def _concrete(value) -> bool:
    import torch

    if isinstance(value, torch.SymInt):
        return False
    if isinstance(value, torch.Tensor):
        return all(isinstance(d, int) for d in value.shape)
    return True


def _executor(kernel, target: str, config, record: GraphRecord):
    import polyc

    if target == "interpret":
        return lambda arrays: polyc.interpret(kernel, arrays)
    if target == "host":
        module = polyc.build(kernel)
        return lambda arrays: module(arrays)
    compiled = polyc.compile(kernel, config=config or DEFAULT_CONFIG)
    record.compiled.append(compiled)  # its last_report is the last run's
    return lambda arrays: compiled(arrays)


def records() -> list[GraphRecord]:
    """The graphs handed to the backend so far in this process."""
    with _LOCK:
        return list(_RECORDS)


def reset() -> None:
    """Forget the recorded graphs (Dynamo's own counters: ``torch._dynamo.reset``)."""
    with _LOCK:
        _RECORDS.clear()


def report() -> str:
    """Which graphs polyc compiled, which ran eagerly and why, and Dynamo's breaks."""
    lines = []
    recs = records()
    counts = {k: sum(r.status == k for r in recs) for k in ("compiled", "partial")}
    lines.append(
        f"polyc backend: {len(recs)} graph(s), {counts['compiled']} compiled, "
        f"{counts['partial']} partly eager, "
        f"{len(recs) - sum(counts.values())} eager"
    )
    for r in recs:
        stmts = sum(len(k.statements) for k in r.kernels)
        if r.status == "compiled":
            what = f"{stmts} statements"
        elif r.status == "partial":
            what = (
                f"{len(r.kernels)} polyc kernel(s) of {stmts} statements; eager: "
                f"{', '.join(r.eager)}"
            )
        else:
            what = r.reason
        lines.append(f"  graph {r.index}: {r.ops} ops, {r.status}: {what}")
    breaks = _graph_breaks()
    lines.append(f"graph breaks (run in Python between graphs): {sum(breaks.values())}")
    for reason, count in breaks.items():
        first = reason.strip().splitlines()[0] if reason.strip() else reason
        lines.append(f"  {count} x {first}")
    return "\n".join(lines)


def _graph_breaks() -> dict:
    import sys

    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is None:
        return {}
    return dict(dynamo.counters.get("graph_break", {}))
