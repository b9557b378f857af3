"""The ``torch.compile(model, backend="polyc")`` backend.

Dynamo hands the backend one FX graph per region it could trace (a graph break, such
as a ``print`` or a data-dependent branch, splits a function into several graphs and
runs the code between them in Python). Each graph is exported to ATen and lowered to
one polyc Kernel, compiled once per input shape, and run on the chosen target; its
outputs come back as torch tensors. In a graph with ops polyc cannot lower, only those
ops run eagerly, between polyc kernels for the regions around them
(:mod:`polyc.integrations.torch_compile.partition`), and an :class:`EagerFallbackWarning` names
them. :func:`report` lists the graphs, what ran where, and Dynamo's graph breaks.

The backend is registered through the ``torch_dynamo_backends`` entry point (see
setup.cfg), so torch finds it by name without ``import polyc`` importing torch.
Options (``torch.compile(m, backend="polyc", options={...})``):

- ``target``: ``"host"`` (native C, the default), ``"interpret"`` (the reference
  interpreter) or ``"accelerator"`` (``polyc.compile`` and the simulator);
- ``config``: the accelerator configuration, a shipped name, a TOML path or a Spec
  (implies ``target="accelerator"``; default ``"edge-npu"``). ``records()[i].compiled``
  holds the compiled kernels, whose ``last_report``
  :func:`polyc.studies.model_report.model_report` breaks down;
- ``verify``: ``True`` compares every run of every polyc kernel with the reference
  interpreter (:mod:`polyc.verify`) and raises ``VerificationError`` on a difference.
  The interpreter runs the whole model in numpy: keep it for small models and tests.

An unknown option, target or config raises the polyc error itself (``ArgumentError``,
``ConfigError``) when the compiled model is first called (Dynamo calls the backend
lazily, on the first call). It is raised by the function the backend returns rather
than by the backend, so Dynamo neither wraps it in ``BackendCompilerFailed`` nor
swallows it into an eager run under ``torch._dynamo.config.suppress_errors``: a
mistyped config never silently runs eager PyTorch.

Dynamo passes a module's parameters and buffers to the graph as inputs. The backend
binds them as constants of the kernel (as :func:`polyc.from_torch` does), so inference
batch norms fold into the convolutions before them and ``torch.compile`` gives the same
kernels, and the same cycles, as ``from_torch`` + ``polyc.compile``. Each call checks
that those tensors still hold the values that were compiled in and recompiles when
they do not (after ``load_state_dict``, say), so stale weights are never used.

Outputs carry no autograd history: the backend compiles inference.
"""

from __future__ import annotations

import re
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
#: a key the records leave in a set ``torch._dynamo.reset()`` clears (Dynamo
#: has no reset hook): while the key is missing the records predate a reset
_GENERATION = f"polyc.torch_compile.records:{id(_RECORDS)}"


def _dynamo_marks():
    """The set ``torch._dynamo.reset()`` empties (its warn-once cache), or None
    when this torch has none (then only :func:`reset` forgets the records)."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    marks = getattr(utils, "warn_once_cache", None)
    return marks if isinstance(marks, set) else None


def _forget_if_dynamo_reset() -> None:
    """Drop the records made before the last ``torch._dynamo.reset()`` (call
    with ``_LOCK`` held)."""
    marks = _dynamo_marks()
    if _RECORDS and marks is not None and _GENERATION not in marks:
        _RECORDS.clear()


def polyc_backend(gm, example_inputs, options: dict | None = None, **_):
    """Compile a Dynamo graph with polyc; see the module docstring.

    Returns the callable Dynamo runs in place of the graph. A bad option is raised
    by that callable on its first call (see the module docstring for why).
    """
    try:
        opts = _options(options)
    except PolycError as err:
        return _Refused(err)
    ops = sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
    with _LOCK:
        _forget_if_dynamo_reset()
        record = GraphRecord(len(_RECORDS), ops)
        _RECORDS.append(record)
        marks = _dynamo_marks()
        if marks is not None:
            marks.add(_GENERATION)
    compiled = _Compiled(gm, record, opts, _static_positions(gm, example_inputs))
    try:
        compiled.prepare(example_inputs)
    except PolycError as err:
        return compiled.fall_back(err)
    return compiled


OPTIONS = ("target", "config", "verify")


@dataclass(frozen=True)
class _Options:
    target: str
    spec: object  # accelerator.Spec for the accelerator target, else None
    verify: bool


def _options(options) -> _Options:
    """The checked options.

    Raises:
        ArgumentError: for an unknown option or target, a non-bool ``verify``, or a
            ``config`` with a target other than the accelerator.
        ConfigError: for an unknown or malformed config.
    """
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise ArgumentError(
            f"{OPERATION}: options is a {type(options).__name__} because it was "
            "passed as is. Pass a dict, e.g. options={'config': 'edge-npu'}."
        )
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ArgumentError(
            f"{OPERATION}: unknown option(s) {unknown} because the backend takes "
            f"{', '.join(map(repr, OPTIONS))}. Pass only those."
        )
    config = options.get("config")
    target = options.get("target", "accelerator" if config is not None else "host")
    if target not in TARGETS:
        raise ArgumentError(
            f"{OPERATION}: target={target!r} is unknown because the targets are "
            f"{', '.join(TARGETS)}. Pass one of those."
        )
    if config is not None and target != "accelerator":
        raise ArgumentError(
            f"{OPERATION}: config={config!r} has no effect because target={target!r} "
            "does not run the accelerator. Drop config, or pass "
            "target='accelerator'."
        )
    verify = options.get("verify", False)
    if not isinstance(verify, bool):
        raise ArgumentError(
            f"{OPERATION}: verify={verify!r} is not a bool because it is a "
            f"{type(verify).__name__}. Pass verify=True or verify=False."
        )
    spec = None
    if target == "accelerator":
        from accelerator import load_config

        spec = load_config(DEFAULT_CONFIG if config is None else config)
    return _Options(target, spec, verify)


class _Refused:
    """What the backend returns for bad options: it raises the error when called."""

    def __init__(self, err: PolycError):
        self.err = err

    def __call__(self, *args):
        raise self.err


def _static_positions(gm, example_inputs) -> tuple[int, ...]:
    """The graph inputs that are a module's parameters or buffers.

    Dynamo lifts them to graph inputs and marks them static
    (``_dynamo_static_input_type``); parameters passed as arguments are marked too.
    """
    import torch

    nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = []
    for pos, (node, value) in enumerate(zip(nodes, example_inputs)):
        if not isinstance(value, torch.Tensor):
            continue
        marked = node.meta.get("tensor_dict", {}).get("_dynamo_static_input_type")
        if marked or isinstance(value, torch.nn.Parameter):
            out.append(pos)
    return tuple(out)


class _Compiled:
    """A graph's compiled forms, one per tuple of input shapes and dtypes."""

    def __init__(self, gm, record: GraphRecord, options: _Options, static=()):
        self.gm = gm
        self.record = record
        self.options = options
        self.static = tuple(static)  # positions bound as constants
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
        entry = self.runners.get(key)
        if entry is None or not _same_constants(entry[1], inputs):
            constants = {p: inputs[p].detach().clone() for p in self.static}
            entry = (self._compile(inputs, constants), constants)
            self.runners[key] = entry
        return entry[0]

    def _compile(self, inputs, constants: dict):
        """A runner ``(all graph args) -> outputs`` with ``constants`` compiled in."""
        from polyc.frontends.torch.export import export, from_exported

        name = f"graph{self.record.index}"
        user = [n for n in range(len(inputs)) if n not in constants]
        module = _bind(self.gm, constants) if constants else self.gm
        ep = export(module, tuple(inputs[n] for n in user), operation=OPERATION)
        try:
            kernel = from_exported(ep, name=name, operation=OPERATION)
        except FrontendError as err:
            split_run = self._split(ep, name, err)
            return lambda args: split_run([args[n] for n in user])
        self.record.kernels.append(kernel)
        execute = self._executor(kernel)
        # the exported module's input j is the graph's input user[j]
        positions = {
            f"arg{j}": n
            for j, n in enumerate(user)
            if f"arg{j}" in kernel.arrays and hasattr(inputs[n], "shape")
        }
        outputs = [a.name for a in kernel.outputs]

        def run(args):
            from polyc.frontends.torch import bf16

            arrays = {k: bf16.to_numpy(args[n]) for k, n in positions.items()}
            result = execute(arrays)
            return tuple(bf16.to_torch(result[o]) for o in outputs)

        return run

    def _executor(self, kernel):
        return _executor(kernel, self.options, self.record)

    def _split(self, ep, name: str, err: FrontendError):
        """Lowerable regions in polyc, the rest eagerly (or all of it eagerly)."""
        from polyc.integrations.torch_compile.partition import split

        parts = split(ep, name, self._executor, OPERATION)
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


def _same_constants(saved: dict, inputs) -> bool:
    """Whether the static inputs still hold the values compiled in."""
    import torch

    for pos, value in saved.items():
        now = inputs[pos]
        same = (
            isinstance(now, torch.Tensor)
            and now.shape == value.shape
            and now.dtype == value.dtype
            and torch.equal(now.detach(), value)
        )
        if not same:
            return False
    return True


def _bind(gm, constants: dict):
    """A copy of the Dynamo graph whose static inputs are attributes (``get_attr``
    nodes), so that ``torch.export`` lifts them as constants, as it does a module's
    own parameters. Each keeps its module path and kind where Dynamo's source
    names them (``model.fc1.weight``, a parameter), so the kernel's arrays have
    the names ``from_torch`` gives them (``p_model_fc1_weight``): the schedulers
    break ties by array name, and the same names give the same kernels and the
    same cycles. The other nodes keep their metadata (source lines, module
    paths), which the error messages and the model report use."""
    import torch

    graph = torch.fx.Graph()
    env: dict = {}
    attrs: dict = {}
    placeholders = 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            pos, placeholders = placeholders, placeholders + 1
            if pos in constants:
                path, parameter = _module_path(node)
                if path is None or path in attrs:
                    path, parameter = f"_polyc_static{pos}", False
                value = constants[pos]
                if parameter:
                    value = torch.nn.Parameter(value, requires_grad=False)
                attrs[path] = value
                env[node] = graph.get_attr(path)
                continue
        elif node.op in ("get_attr", "call_module"):
            attrs[node.target] = _attribute(gm, node.target)
        env[node] = graph.node_copy(node, lambda n: env[n])
    return torch.fx.GraphModule(attrs, graph)


#: ``L['fn']._modules['fc1']._parameters['weight']``: Dynamo's source of a
#: module's parameter (or ``_buffers``) in the compiled module
_SOURCE = re.compile(
    r"^L\['(?:fn|self|mod)'\]((?:\._modules\['[^']+'\])*)"
    r"\._(parameters|buffers)\['([^']+)'\]$"
)


def _module_path(node) -> tuple[str | None, bool]:
    """``(dotted path in the compiled module, is a parameter)`` of a static
    graph input, from the source Dynamo records; ``(None, False)`` when the
    source is not the compiled module's own parameter or buffer."""
    arg = node.meta.get("grapharg")
    source = getattr(arg, "source", None)
    if source is None:
        return None, False
    try:
        name = source.name() if callable(source.name) else source.name
    except Exception:  # a source kind without a name: keep the generic one
        return None, False
    match = _SOURCE.match(str(name))
    if match is None:
        return None, False
    modules = re.findall(r"\._modules\['([^']+)'\]", match.group(1))
    path = ".".join([*modules, match.group(3)])
    return path, match.group(2) == "parameters"


def _attribute(module, target: str):
    for part in target.split("."):
        module = getattr(module, part)
    return module


def _executor(kernel, options: _Options, record: GraphRecord):
    """A runner ``{arg name: array} -> {output: array}`` on the chosen target."""
    import polyc

    if options.target == "accelerator":
        compiled = polyc.compile(kernel, config=options.spec, verify=options.verify)
        record.compiled.append(compiled)  # its last_report is the last run's
        return lambda arrays: compiled(arrays)
    if options.target == "interpret":
        return lambda arrays: polyc.interpret(kernel, arrays)
    module = polyc.build(kernel)
    if not options.verify:
        return lambda arrays: module(arrays)

    def verified(arrays):
        from polyc.oracle.verify import check

        outputs = module(arrays)
        check(kernel, arrays, outputs, run="on the host")
        return outputs

    return verified


def records() -> list[GraphRecord]:
    """The graphs handed to the backend since the last reset (this module's
    :func:`reset` or ``torch._dynamo.reset()``, which also forgets the compiled
    graphs themselves)."""
    with _LOCK:
        _forget_if_dynamo_reset()
        return list(_RECORDS)


def reset() -> None:
    """Forget the recorded graphs, so :func:`report` starts empty (Dynamo's
    compiled code stays; ``torch._dynamo.reset()`` drops both)."""
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
