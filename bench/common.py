"""Helpers shared by the benchmarks: timing, native baselines, JSON and tables."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def best_time(
    fn: Callable[[], object], repeat: int = 5, min_time: float = 0.2
) -> float:
    """Best wall time of ``fn`` in seconds over ``repeat`` runs (after one warm-up).

    Each run repeats ``fn`` until ``min_time`` has passed, so short kernels are timed
    over many calls.
    """
    fn()
    best = float("inf")
    for _ in range(repeat):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


def compile_native(
    source: str, function: str, flags: Sequence[str] = ("-O3", "-march=native")
):
    """Compile a C function with gcc directly (no polyc) and return it via ctypes."""
    tmp = Path(tempfile.mkdtemp(prefix="polyc-bench-"))
    c_file, so_file = tmp / "native.c", tmp / "native.so"
    c_file.write_text(source)
    subprocess.run(
        ["gcc", *flags, "-fPIC", "-shared", str(c_file), "-o", str(so_file), "-lm"],
        check=True,
    )
    return getattr(ctypes.CDLL(str(so_file)), function)


def machine() -> dict:
    return {
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def out_argument(parser) -> None:
    """``--out PATH``: a bench's JSON written there instead of bench/results/,
    and docs/results.md left as it is (a run to compare, not to publish)."""
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the JSON there instead of bench/results/ (docs/results.md is "
        "then left as it is)",
    )


def write_json(name: str, payload: dict) -> Path:
    """Write ``bench/results/<name>.json`` atomically; return the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def table(rows: list[dict], columns: Sequence[str]) -> str:
    """A markdown table of ``rows`` restricted to ``columns``."""

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def geomean(values: Sequence[float]) -> float:
    return statistics.geometric_mean(values)


# tables in the docs, between markers -------------------------------------------------
DOCS = Path(__file__).resolve().parents[1] / "docs"
END_MARKER = "<!-- end table -->"


class SectionError(ValueError):
    """A document's table markers are missing, repeated or not closed."""


def begin_marker(name: str) -> str:
    """The line that opens table section ``name`` in a document."""
    return f"<!-- table: {name} -->"


def _bounds(text: str, name: str, where: str) -> tuple[int, int]:
    """Start and end offsets of section ``name``'s body in ``text``.

    Raises:
        SectionError: the begin marker is missing or repeated, or no end marker
            closes the section before the next section opens.
    """
    begin = begin_marker(name)
    count = text.count(begin)
    if count == 0:
        raise SectionError(
            f"rewrite {where}: no table section {name!r} because the line {begin} "
            f"is not in it. Put {begin} and {END_MARKER} around the table."
        )
    if count > 1:
        raise SectionError(
            f"rewrite {where}: table section {name!r} is ambiguous because {begin} "
            f"occurs {count} times. Keep one."
        )
    start = text.index(begin) + len(begin)
    end = text.find(END_MARKER, start)
    following = text.find("<!-- table: ", start)
    if end < 0 or 0 <= following < end:
        line = text.count("\n", 0, start) + 1
        raise SectionError(
            f"rewrite {where}: table section {name!r} is not closed because no "
            f"{END_MARKER} follows its {begin} (line {line}) before the next "
            f"section or the end. Add {END_MARKER} after its table."
        )
    return start, end


def read_section(text: str, name: str, where: str = "the document") -> str:
    """The body of table section ``name`` of ``text`` (without its markers).

    Raises:
        SectionError: see :func:`replace_section`.
    """
    start, end = _bounds(text, name, where)
    return text[start:end].strip("\n")


def replace_section(
    text: str, name: str, body: str, where: str = "the document"
) -> str:
    """``text`` with the body of table section ``name`` replaced by ``body``.

    A section is the text between the line ``<!-- table: NAME -->`` and the next
    ``<!-- end table -->``; the markers stay, each on its own line, with a blank
    line between them and the body (so that no markdown reader takes a marker for
    part of the table).

    Raises:
        SectionError: the section's begin marker is missing or repeated, or no end
            marker closes it.
    """
    start, end = _bounds(text, name, where)
    return text[:start] + "\n\n" + body.strip("\n") + "\n\n" + text[end:]


def write_section(doc: Path, name: str, body: str) -> bool:
    """Rewrite table section ``name`` of the file ``doc``; True when it changed.

    Raises:
        SectionError: see :func:`replace_section`.
    """
    text = doc.read_text()
    new = replace_section(text, name, body, where=_shown(doc))
    if new != text:
        doc.write_text(new)
    return new != text


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it."""
    try:
        return str(path.resolve().relative_to(DOCS.parent))
    except ValueError:
        return str(path)
