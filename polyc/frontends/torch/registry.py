"""The registry of ATen lowerings: ``LOWERINGS`` maps an ATen packet
(``aten.conv2d``) to its handler, ``KEEP`` lists the packets torch's decompositions
must leave whole. Handlers register with :func:`lowering` in the family modules
(``ops``, ``ops_compare``, ...); :mod:`polyc.frontends.torch.lowerings` imports them
all, and is what readers of the registry import.
"""

from __future__ import annotations

from polyc.frontends.torch import source as src

LOWERINGS: dict = {}
#: ATen packets kept whole by run_decompositions (lowered directly by polyc)
KEEP: list[str] = []


def lowering(*packets: str, keep: bool = False):
    """Register the decorated handler for ``packets``; ``keep`` also exempts them
    from torch's decompositions."""

    def register(fn):
        for p in packets:
            LOWERINGS[p] = fn
            if keep and p not in KEEP:
                KEEP.append(p)
        return fn

    return register


def packet(target) -> str:
    """``aten.conv2d`` for ``aten.conv2d.default``; the name for Python callables."""
    name = src.op_name(target)
    if name.startswith("aten."):
        return ".".join(name.split(".")[:2])
    return name
