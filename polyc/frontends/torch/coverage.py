"""The op-coverage table of the torch frontend, rendered from the lowering registry.

``docs/torch-ops.md`` holds the table between two markers; a test checks that it is
current. Regenerate it after adding a lowering::

    python -m polyc.frontends.torch.coverage --write docs/torch-ops.md
"""

from __future__ import annotations

import sys
from pathlib import Path

BEGIN = "<!-- begin generated: python -m polyc.frontends.torch.coverage -->"
END = "<!-- end generated -->"

#: the module a lowering lives in -> the family the table files it under
FAMILIES = {
    "ops": "core: contractions, element-wise, normalisation, pooling, shapes",
    "ops_compare": "comparisons, logic, where and masks",
    "ops_gather": "gathers: embedding, index_select, gather, x[idx]",
    "ops_scan": "scans and index reductions",
    "ops_sort": "topk, sort and argsort (small sizes)",
    "ops_norm": "vector norms, group and instance norm",
    "ops_resize": "interpolation",
    "ops_transformer": "fused transformer fast path",
}


def rows() -> list[tuple[str, str, str, bool]]:
    """``(family, ATen packet, handler, kept whole)`` for every registered lowering,
    in family order, then by packet."""
    from polyc.frontends.torch.lowerings import KEEP, LOWERINGS

    order = list(FAMILIES)
    out = []
    for packet, fn in LOWERINGS.items():
        if not packet.startswith("aten."):
            continue
        module = fn.__module__.rsplit(".", 1)[-1]
        out.append((module, packet, fn.__name__, packet in KEEP))
    out.sort(key=lambda r: (order.index(r[0]) if r[0] in order else len(order), r[1]))
    return [(FAMILIES.get(m, m), p, f"{m}.{h}", k) for m, p, h, k in out]


def table() -> str:
    """The Markdown table, one section per family."""
    lines: list[str] = []
    family = None
    for fam, packet, handler, keep in rows():
        if fam != family:
            if family is not None:
                lines.append("")
            lines += [f"### {fam}", "", "| ATen op | lowering | kept whole |"]
            lines.append("|---|---|---|")
            family = fam
        lines.append(f"| `{packet}` | `{handler}` | {'yes' if keep else ''} |")
    count = len(rows())
    return "\n".join([f"{count} ATen ops are lowered.", "", *lines])


def render(document: str) -> str:
    """``document`` with the text between the markers replaced by the table."""
    head, rest = document.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--write":
        path = Path(argv[1])
        path.write_text(render(path.read_text()))
        return 0
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
