"""A layer as text: what the accelerator search reads of it, under canonical names.

The search cache (:mod:`schedules.accel.cache`) keys a layer's candidates by this
text and the hardware; the layer models shared across hardware points
(:mod:`schedules.accel.models`) key by it under the layer's own names.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from polyc.ir.expr import describe
from polyc.ir.kernel import Kernel, Statement
from schedules.accel.layers import Layer
from schedules.accel.resident import read_later

#: engine words in a candidate: a name equal to one of them is not renamed
WORDS = frozenset({"mac", "vector", "scalar", "fold", "mac_out"})
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def renamer(names: dict[str, str]) -> Callable[[str], str]:
    """A function that replaces every identifier of a text that ``names`` maps."""

    def rn(text: str) -> str:
        return TOKEN.sub(lambda m: names.get(m.group(0), m.group(0)), text)

    return rn


def layer_text(
    kernel: Kernel, layer: Layer, engines_of: Callable[[Statement], list[str]]
) -> tuple[list[str], dict[str, str]] | None:
    """``(lines, names)``: the layer as the search sees it but for the hardware
    (its statements, bounds, bodies, the engines ``engines_of`` offers each,
    its arrays and whether the rest of the kernel reads them), under canonical
    names, and each name's canonical one; ``None`` when the names cannot be
    renamed safely (a name that is also an engine word, or not an identifier)."""
    names = layer.canonical_names
    if any(n in WORDS or not TOKEN.fullmatch(n) for n in names):
        return None
    rn = renamer(names)
    lines = [f"depth {layer.depth}"]
    for s in layer.stmts:
        engines = ",".join(engines_of(s))
        its = ", ".join(names[it] for it in s.iterators)
        lines.append(f"stmt {names[s.name]}[{its}] on {engines}")
        lo_hi = ", ".join(
            f"{layer.lo(s, it)}..{layer.lo(s, it) + layer.extent(s, it) - 1}"
            for it in s.iterators
        )
        lines.append(f"  bounds {lo_hi}")
        lines.append(
            f"  {describe(s.target, names.get, rn)} = {describe(s.body, names.get, rn)}"
        )
    for a in layer.arrays:
        arr = kernel.arrays[a]
        shape = arr.concrete_shape({})
        where = f" home {arr.home}" if arr.home else ""
        lines.append(
            f"array {names[a]} {arr.dtype}{list(shape)} {arr.role.value}{where}"
        )
        lines.append(f"  read later {read_later(kernel, layer, a)}")
    return lines, names
