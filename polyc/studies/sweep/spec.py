"""What a sweep point names: operator specs, schedule choices, and their text forms.

An **op spec** says which kernel to build, in a form that pickles and prints:

- text ``"matmul:M=256,N=256,K=256"`` or ``"conv1=conv2d:input=1x64x56x56,
  weight=64x64x3x3,padding=1"`` (an optional ``LABEL=`` names the layer; ``AxBxC`` is
  a shape; ``true``/``false``/``none``, numbers, ``(1, 2)`` and bare words such as
  ``int8`` are read as Python values; arguments without ``=`` are positional);
- a tuple ``("matmul", {"M": 256, ...})`` or ``("matmul", (256, 256, 256), {})``,
  resolved by name in :mod:`polyc.ops` (kernel level);
- a :class:`~polyc.ir.Kernel`, or a function of no arguments that returns one (for
  multi-op kernels built with the compute API).

A **schedule choice** is one of the words in :data:`SCHEDULES`, an isl YAML schedule
(a ``.yaml`` file or the text itself), a scheduled Kernel (a transformed version of
the op's kernel), or a function ``kernel -> Kernel`` (``lambda k: schedules.tile(k,
...)``). ``(label, choice)`` names a choice in tables and plots.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from polyc.errors import ArgumentError

#: schedule choices by name, and what each compiles
SCHEDULES = {
    "none": "the kernel as written (its program-order schedule)",
    "default": "what polyc.compile chooses when given no schedule",
    "energy": "polyc.compile(objective='energy'): the scheduler minimises energy",
    "edp": "polyc.compile(objective='edp'): the scheduler minimises energy x delay",
    "auto": "schedules.auto(kernel), the automatic polyhedral scheduler",
}

_SHAPE = re.compile(r"-?\d+(x-?\d+)+")


# op specs ------------------------------------------------------------------------


@dataclass(frozen=True)
class OpSpec:
    """A picklable recipe for a kernel: ``build()`` makes it, ``text`` names it,
    ``key`` identifies it (equal keys build equal kernels).

    Exactly one of ``name`` (an op of :mod:`polyc.ops`, with ``args``/``kwargs``),
    ``kernel`` or ``factory`` is set.
    """

    text: str
    key: str
    name: str | None = None
    args: tuple = ()
    kwargs: tuple[tuple[str, object], ...] = ()
    kernel: object = None
    factory: Callable | None = None

    def build(self):
        """The Kernel (raises what the op raises for bad arguments)."""
        if self.kernel is not None:
            return self.kernel
        if self.factory is not None:
            from polyc.ir.kernel import Kernel

            out = self.factory()
            if not isinstance(out, Kernel):
                raise ArgumentError(
                    f"op spec: op factory {self.text} returned a {type(out).__name__} "
                    "because it is not a kernel builder. Return a polyc Kernel."
                )
            return out
        import polyc.ops

        return getattr(polyc.ops, self.name)(*self.args, **dict(self.kwargs))


def library_ops() -> list[str]:
    """Names of the kernel-level ops of :mod:`polyc.ops`."""
    import polyc.ops

    return [n for n in polyc.ops.__all__ if n not in ("nn", "t")]


def op_spec(value: object) -> tuple[str | None, OpSpec]:
    """``(label or None, OpSpec)`` for any accepted op form (see module docstring).

    Raises:
        ArgumentError: for an unknown op name, malformed text or an unusable value.
    """
    from polyc.ir.kernel import Kernel

    if isinstance(value, OpSpec):
        return None, value
    if isinstance(value, str):
        label, name, args, kwargs = parse_op(value)
        return label, _library(name, args, kwargs)
    if isinstance(value, Kernel):
        key = "kernel:" + _digest(dumps(value))
        return None, OpSpec(text=value.name, key=key, kernel=value)
    if isinstance(value, tuple) and value and isinstance(value[0], str):
        return None, _library(*_tuple_parts(value))
    if callable(value):
        key = "fn:" + _digest(dumps(value))
        return None, OpSpec(text=_callable_name(value), key=key, factory=value)
    raise ArgumentError(
        f"op spec: op {value!r} is a {type(value).__name__} because it was passed as "
        "is. Pass 'matmul:M=64,N=64,K=64', ('matmul', {'M': 64, ...}), a Kernel or "
        "a function returning a Kernel."
    )


def _tuple_parts(value: tuple) -> tuple[str, tuple, dict]:
    name, rest = value[0], value[1:]
    if len(rest) == 1 and isinstance(rest[0], Mapping):
        return name, (), dict(rest[0])
    if len(rest) == 1 and isinstance(rest[0], (tuple, list)):
        return name, tuple(rest[0]), {}
    if len(rest) == 2 and isinstance(rest[1], Mapping):
        return name, tuple(rest[0]), dict(rest[1])
    if not rest:
        return name, (), {}
    raise ArgumentError(
        f"op spec: op {value!r} is not (name, kwargs) or (name, args, kwargs) because "
        f"it has {len(value)} items of types "
        f"{', '.join(type(v).__name__ for v in value)}. Pass "
        "('matmul', {'M': 64, 'N': 64, 'K': 64})."
    )


def _library(name: str, args: tuple, kwargs: dict) -> OpSpec:
    known = library_ops()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        fix = (
            f"Did you mean {close[0]!r}?"
            if close
            else f"Use one of {', '.join(known)}."
        )
        raise ArgumentError(
            f"op spec: unknown op {name!r} because polyc.ops has no kernel-level op of "
            f"that name. {fix}"
        )
    for key in kwargs:
        if not isinstance(key, str):
            raise ArgumentError(
                f"op spec: op {name} has argument name {key!r} because the kwargs "
                "mapping has a non-string key. Use argument names as strings."
            )
    items = [format_value(a) for a in args]
    items += [f"{k}={format_value(v)}" for k, v in kwargs.items()]
    text = f"{name}:{','.join(items)}" if items else name
    _check_arguments(name, text, args, kwargs)
    return OpSpec(
        text=text,
        key=text,
        name=name,
        args=tuple(_freeze(a) for a in args),
        kwargs=tuple((k, _freeze(v)) for k, v in kwargs.items()),
    )


def _check_arguments(name: str, text: str, args: tuple, kwargs: dict) -> None:
    """Refuse arguments that ``polyc.ops.<name>`` cannot take, when the spec is
    made rather than when its kernel is built."""
    import inspect

    sig = op_signature(name)
    params = sig.parameters
    kinds = {p.kind for p in params.values()}
    takes = ", ".join(
        p.name
        for p in params.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    )
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        for key in kwargs:
            if key not in params or params[key].kind == params[key].POSITIONAL_ONLY:
                close = difflib.get_close_matches(key, list(params), n=1)
                hint = f"Did you mean {close[0]}?" if close else f"Remove {key}."
                raise ArgumentError(
                    f"op spec: op {text!r} has the unknown argument {key} because "
                    f"polyc.ops.{name} takes {takes}. {hint}"
                )
    try:
        sig.bind(*args, **kwargs)
    except TypeError as err:
        required = [
            p.name
            for p in params.values()
            if p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        missing = [m for m in required[len(args) :] if m not in kwargs]
        if missing:
            example = ",".join(f"{m}=VALUE" for m in missing)
            raise ArgumentError(
                f"op spec: op {text!r} is missing {', '.join(missing)} because "
                f"polyc.ops.{name} needs {', '.join(required)}. Add {example}."
            ) from None
        raise ArgumentError(
            f"op spec: op {text!r} does not fit polyc.ops.{name}{sig} because {err}. "
            "Pass the arguments that op takes."
        ) from None


def op_signature(name: str):
    """The arguments ``polyc.ops.<name>`` takes. A one- or two-tensor op passes its
    extra arguments on to ``polyc.ops.nn.<name>``, so theirs are read there."""
    import inspect

    import polyc.ops
    from polyc.ops import nn

    sig = inspect.signature(getattr(polyc.ops, name))
    var = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    inner = getattr(nn, name, None)
    if inner is None or not any(p.kind in var for p in sig.parameters.values()):
        return sig
    own = [p for p in sig.parameters.values() if p.kind not in var]
    tensors = [p for p in own if p.kind == p.POSITIONAL_OR_KEYWORD]
    rest = [
        p
        for p in list(inspect.signature(inner).parameters.values())[len(tensors) :]
        if p.name != "name"
    ]
    keyword = [p for p in own if p.kind == p.KEYWORD_ONLY]
    try:
        return inspect.Signature([*tensors, *rest, *keyword])
    except ValueError:  # an order Signature refuses: check nothing rather than guess
        return sig


def parse_op(text: str) -> tuple[str | None, str, tuple, dict]:
    """``"[LABEL=]name[:arg,...,key=value,...]"`` -> ``(label, name, args, kwargs)``.

    Raises:
        ArgumentError: for an empty name or a positional argument after a keyword.
    """
    head, _, rest = text.strip().partition(":")
    label = None
    if "=" in head:
        label, head = (p.strip() for p in head.split("=", 1))
    name = head.strip()
    if not name or not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ArgumentError(
            f"op spec: op text {text!r} has no op name because it does not start with "
            "an identifier. Write NAME:key=value,... e.g. 'matmul:M=64,N=64,K=64'."
        )
    args: list = []
    kwargs: dict = {}
    for item in _split(rest) if rest.strip() else []:
        key, eq, val = item.partition("=")
        if not eq:
            if kwargs:
                raise ArgumentError(
                    f"op spec: op text {text!r} has the positional argument {item!r} "
                    "after a keyword argument because of its order. Put positional "
                    "arguments first."
                )
            args.append(parse_value(item))
        elif not key.strip() or not val.strip():
            raise ArgumentError(
                f"op spec: op text {text!r} has the argument {item.strip()!r} with no "
                f"{'name' if not key.strip() else 'value'} because nothing is on that "
                "side of '='. Write key=value, e.g. 'matmul:M=64,N=64,K=64'."
            )
        else:
            kwargs[key.strip()] = parse_value(val)
    return label, name, tuple(args), kwargs


def _split(text: str) -> list[str]:
    """Split on commas outside brackets."""
    items, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur).strip())
    return [i for i in items if i]


def parse_value(text: str) -> object:
    """One argument value: ``AxB`` shapes, booleans, numbers, tuples, bare words."""
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    if _SHAPE.fullmatch(t):
        return tuple(int(p) for p in t.split("x"))
    try:
        return _freeze(ast.literal_eval(t))
    except (ValueError, SyntaxError):
        return t


def format_value(value: object) -> str:
    """The text :func:`parse_value` reads back as ``value``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (tuple, list)):
        if len(value) >= 2 and all(type(v) is int for v in value):
            return "x".join(str(v) for v in value)
        return repr(tuple(value))
    if isinstance(value, str):
        return value
    return repr(value)


def _freeze(value: object) -> object:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _callable_name(fn: object) -> str:
    inner = getattr(fn, "func", fn)  # functools.partial
    return getattr(inner, "__qualname__", None) or type(fn).__name__


# schedule choices ------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleChoice:
    """How to schedule a point's kernel: ``word`` (a key of :data:`SCHEDULES`),
    ``yaml`` (isl YAML text), ``kernel`` (a scheduled Kernel) or ``function``."""

    label: str
    key: str
    word: str | None = None
    yaml: str | None = None
    kernel: object = None
    function: Callable | None = None

    @property
    def objective(self) -> str:
        """What polyc.compile's scheduler minimises for this choice."""
        return self.word if self.word in ("energy", "edp") else "cycles"

    def apply(self, kernel):
        """The scheduled Kernel to compile, or None to let polyc.compile choose.

        Raises:
            PolycError: what the scheduler or transformation raises.
        """
        from polyc.ir.kernel import Kernel

        if self.word == "none":
            return kernel
        if self.word in ("default", "energy", "edp"):
            return None
        if self.word == "auto":
            return _schedules_attr("auto", "auto")(kernel)
        if self.yaml is not None:
            return _schedules_attr("apply_schedule", self.label)(kernel, self.yaml)
        if self.kernel is not None:
            return self.kernel
        out = self.function(kernel)
        if not isinstance(out, Kernel):
            raise ArgumentError(
                f"schedule choice: schedule function {self.label} returned a "
                f"{type(out).__name__} because it does not return its result. Return "
                "the transformed Kernel (e.g. schedules.tile(kernel, ...))."
            )
        return out


def schedule_choice(value: object) -> ScheduleChoice:
    """A :class:`ScheduleChoice` for any accepted form (see module docstring).

    Raises:
        ArgumentError: for an unknown word, a missing file, or an unusable value.
    """
    from polyc.ir.kernel import Kernel

    if isinstance(value, ScheduleChoice):
        return value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        inner = schedule_choice(value[1])
        return ScheduleChoice(
            value[0], inner.key, inner.word, inner.yaml, inner.kernel, inner.function
        )
    if isinstance(value, Path) or (isinstance(value, str) and _is_yaml_file(value)):
        path = Path(value)
        if not path.is_file():
            raise ArgumentError(
                f"schedule choice: schedule file {str(path)!r} cannot be read "
                "because it does not exist. Pass an existing isl YAML file."
            )
        text = path.read_text()
        _schedules_attr("apply_schedule", path.name)
        return ScheduleChoice(path.stem, "yaml:" + _digest(text), yaml=text)
    if isinstance(value, str):
        if value in SCHEDULES:
            if value == "auto":
                _schedules_attr("auto", "auto")
            return ScheduleChoice(value, value, word=value)
        if "domain" in value and "\n" in value:
            _schedules_attr("apply_schedule", "yaml")
            key = _digest(value)
            return ScheduleChoice(f"yaml-{key[:8]}", "yaml:" + key, yaml=value)
        raise ArgumentError(
            f"schedule choice: schedule {value!r} is not known because it is none of "
            f"{', '.join(SCHEDULES)} and not a .yaml file. Pass one of those, a YAML "
            "file, a scheduled Kernel or a function kernel -> Kernel."
        )
    if isinstance(value, Kernel):
        steps = "+".join(step.name for step in value.history) or value.name
        return ScheduleChoice(steps, "kernel:" + _digest(dumps(value)), kernel=value)
    if callable(value):
        name = _callable_name(value)
        return ScheduleChoice(name, "fn:" + _digest(dumps(value)), function=value)
    raise ArgumentError(
        f"schedule choice: schedule {value!r} is a {type(value).__name__} because "
        f"it was passed as is. Pass one of {', '.join(SCHEDULES)}, a YAML file, a "
        "scheduled Kernel or a function kernel -> Kernel."
    )


def _is_yaml_file(text: str) -> bool:
    return "\n" not in text and text.endswith((".yaml", ".yml"))


def _schedules_attr(name: str, what: str):
    module = importlib.import_module("schedules")
    fn = getattr(module, name, None)
    if fn is None:
        raise ArgumentError(
            f"schedule choice: schedule {what!r} is not available because this "
            f"installation's schedules package has no {name}(). Use 'none' or "
            "'default', or update polyc."
        )
    return fn


def dumps(value: object) -> bytes:
    """Serialise for another process: cloudpickle (lambdas, closures) when installed."""
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover - cloudpickle comes with the sweep extra
        import pickle

        return pickle.dumps(value)
    return cloudpickle.dumps(value)


def _digest(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha1(raw).hexdigest()
