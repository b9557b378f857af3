"""Where an FX node came from: the user's source line, module path and layer tag.

torch.export records, per node, the Python stack that created it
(``node.meta["stack_trace"]``, outermost frame first) and the module path it ran in
(``node.meta["nn_module_stack"]``). Error messages name the innermost frame that is
the user's code (not torch's), and statements made for a node carry a layer tag in
their origin: ``"<layer> <- <aten op> <node> at <file>:<line>"``, read back by
:func:`layer_of`.
"""

from __future__ import annotations

import os
import re
import traceback
from dataclasses import dataclass

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
#: separates the layer from the rest of a statement origin
LAYER_SEP = " <- "


@dataclass(frozen=True)
class Location:
    """One frame of the user's source."""

    file: str
    line: int
    code: str = ""

    def __str__(self) -> str:
        text = f"{os.path.basename(self.file)}:{self.line}"
        return f"{text} `{self.code}`" if self.code else text


def _library_dirs() -> tuple[str, ...]:
    import torch

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, here + os.sep)


def _is_user(file: str) -> bool:
    path = os.path.abspath(file)
    return not path.startswith(_library_dirs()) and not file.startswith("<")


def frames_of(stack_trace: str | None) -> list[Location]:
    """Frames of a recorded stack trace, outermost first."""
    if not stack_trace:
        return []
    lines = stack_trace.splitlines()
    out: list[Location] = []
    for n, text in enumerate(lines):
        m = _FRAME.search(text)
        if m is None:
            continue
        code = lines[n + 1].strip() if n + 1 < len(lines) else ""
        if _FRAME.search(code):
            code = ""
        out.append(Location(m["file"], int(m["line"]), code))
    return out


def user_location(stack_trace: str | None) -> Location | None:
    """The innermost frame of the user's code in a recorded stack trace."""
    frames = frames_of(stack_trace)
    users = [f for f in frames if _is_user(f.file)]
    if users:
        return users[-1]
    return frames[-1] if frames else None


def exception_location(exc: BaseException) -> Location | None:
    """The innermost frame of the user's code in an exception's traceback."""
    found = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if _is_user(fr.filename):
            found = Location(fr.filename, fr.lineno or 0, (fr.line or "").strip())
    if found is None:
        # torch quotes the user's frame in the message of some export errors
        frames = frames_of(str(exc))
        users = [f for f in frames if _is_user(f.file)]
        found = users[-1] if users else None
    return found


def node_location(node) -> Location | None:
    return user_location(node.meta.get("stack_trace"))


def module_path(node) -> str:
    """The dotted path of the innermost ``nn.Module`` that ran ``node`` ('' at top)."""
    stack = node.meta.get("nn_module_stack") or {}
    # Dynamo also lists modules reached through a global (G['HELPER'], the
    # wrapped functions of transformers' kernel hub); torch.export does not, and
    # the layer is the innermost module of the model itself, as from_torch has it
    paths = [str(v[0]) for v in stack.values() if not str(v[0]).startswith("G[")]
    if not paths:
        return ""
    path = paths[-1]
    # Dynamo writes paths as L['self'].layer1[0].conv1 or L['fn'].0
    path = re.sub(r"^L\['[^']*'\]\.?", "", str(path))
    path = re.sub(r"\._modules\['([^']*)'\]", r".\1", path)
    return re.sub(r"\[(\d+)\]", r".\1", path).strip(".")


def op_name(target) -> str:
    """``aten.conv2d.default`` for an OpOverload, the function name otherwise."""
    name = str(target)
    if name.startswith("<"):
        name = getattr(target, "__name__", name)
    return name


def origin_of(node, layer: str | None = None) -> str:
    """The origin tag of statements made for ``node``."""
    loc = node_location(node)
    where = f" at {os.path.basename(loc.file)}:{loc.line}" if loc else ""
    return f"{layer or layer_name(node)}{LAYER_SEP}{op_name(node.target)} {node.name}{where}"


def layer_name(node) -> str:
    """The module path of ``node``, or its own name for top-level code."""
    return module_path(node) or node.name


def layer_of(origin: str) -> str | None:
    """The layer tag of a statement origin made by the torch frontend, else None."""
    if LAYER_SEP not in origin:
        return None
    return origin.split(LAYER_SEP, 1)[0]
