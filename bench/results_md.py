"""Regenerate the measured tables of the docs from ``bench/results/*.json``.

    python -m bench.results_md            # rewrite every table section
    python -m bench.results_md --check    # exit 1 naming each section that differs

Each table of ``docs/results.md`` (and the scheduling table of ``docs/schedules.md``)
sits between ``<!-- table: NAME -->`` and ``<!-- end table -->``; its body is what the
benchmark's own rendering function makes of the benchmark's JSON, so running the
benchmark (which regenerates its sections after writing the JSON) and running this
module give the same text. The prose around the tables is written by hand.
This module is not a benchmark: ``bench.run_all`` skips it.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.common import DOCS, RESULTS, SectionError, read_section, write_section


@dataclass(frozen=True)
class Section:
    """One table: where it lives, which JSON it shows, which function renders it.

    ``render`` names a function of the benchmark ``module`` that takes the JSON
    payload (or its ``key`` entry when ``key`` is set) and returns markdown.
    """

    name: str
    source: str
    module: str
    render: str
    key: str | None = None
    doc: str = "results.md"

    def body(self, results: Path = RESULTS) -> str:
        """The section's table, rendered from its JSON under ``results``.

        Raises:
            SectionError: the JSON file is missing.
        """
        path = results / self.source
        if not path.exists():
            bench = self.module.removeprefix("bench.")
            raise SectionError(
                f"render table {self.name}: no JSON to render because "
                f"bench/results/{self.source} does not exist. Run python -m "
                f"bench.{bench} (it writes the file)."
            )
        payload = json.loads(path.read_text())
        if self.key is not None:
            payload = payload[self.key]
        fn = getattr(importlib.import_module(self.module), self.render)
        return fn(payload).strip("\n")


SECTIONS: tuple[Section, ...] = (
    Section(
        "matmul_baseline",
        "matmul_baseline.json",
        "bench.matmul_baseline",
        "table",
        key="rows",
    ),
    Section("roofline", "roofline.json", "bench.roofline", "render"),
    Section("roofline-summary", "roofline.json", "bench.roofline", "summary"),
    Section(
        "sim_overhead", "sim_overhead.json", "bench.sim_overhead", "table", key="rows"
    ),
    Section(
        "timing_only", "timing_only.json", "bench.timing_only", "table", key="rows"
    ),
    Section(
        "codesign-zigzag",
        "codesign_zigzag.json",
        "bench.codesign_zigzag",
        "table",
        doc="codesign.md",
    ),
    Section(
        "compile_time",
        "compile_time.json",
        "bench.compile_time",
        "table",
        key="results",
    ),
    Section(
        "compile_time-stages",
        "compile_time.json",
        "bench.compile_time",
        "stages_table",
        key="results",
    ),
    Section("study", "study.json", "bench.study", "table"),
    Section("models", "models.json", "bench.models", "table"),
    Section("models-summary", "models.json", "bench.models", "summary"),
    Section("int8", "int8.json", "bench.int8", "table"),
    Section("bfloat16", "bfloat16.json", "bench.bfloat16", "table"),
    Section(
        "torch_parity",
        "torch_parity.json",
        "bench.torch_parity",
        "table",
        doc="torch.md",
    ),
    Section("host_c", "host_c.json", "bench.host_c", "table", key="rows"),
    Section("host_c_blas", "host_c.json", "bench.host_c", "blas_table", key="rows"),
    Section("host_c_corpus", "host_c_corpus.json", "bench.host_c_corpus", "table"),
    Section("sched", "schedules.json", "bench.sched", "render", doc="schedules.md"),
    Section(
        "fidelity-table",
        "fidelity.json",
        "bench.peers.report",
        "render_table",
        doc="fidelity.md",
    ),
    Section(
        "fidelity-breakdown",
        "fidelity.json",
        "bench.peers.report",
        "render_breakdown",
        doc="fidelity.md",
    ),
    Section(
        "fidelity-runtime",
        "fidelity.json",
        "bench.peers.report",
        "render_runtime",
        doc="fidelity.md",
    ),
    Section(
        "fidelity-compute",
        "fidelity.json",
        "bench.peers.report",
        "render_compute",
        doc="fidelity.md",
    ),
    Section(
        "fusion-models",
        "peers_models.json",
        "bench.peers_models",
        "render",
        doc="fidelity.md",
    ),
    Section(
        "fusion-groups",
        "peers_models.json",
        "bench.peers_models",
        "render_groups",
        doc="fidelity.md",
    ),
    Section(
        "codesign-calibration",
        "codesign.json",
        "bench.codesign",
        "calibration_section",
        doc="codesign.md",
    ),
    Section(
        "codesign-front", "codesign.json", "bench.codesign", "front", doc="codesign.md"
    ),
    Section(
        "codesign-best", "codesign.json", "bench.codesign", "best", doc="codesign.md"
    ),
    Section(
        "codesign-speed",
        "codesign_speed.json",
        "bench.codesign_speed",
        "table",
        doc="codesign.md",
    ),
    Section(
        "full-size", "full_size.json", "bench.full_size", "table", doc="codesign.md"
    ),
    Section(
        "full-size-runs",
        "full_size.json",
        "bench.full_size",
        "functional_table",
        doc="codesign.md",
    ),
    Section(
        "fidelity-errors",
        "fidelity.json",
        "bench.peers.report",
        "render_errors",
        doc="fidelity.md",
    ),
)


def regenerate(
    sections: tuple[Section, ...] = SECTIONS, docs: Path = DOCS, quiet: bool = False
) -> list[str]:
    """Rewrite ``sections`` in their documents under ``docs``; return the names of
    those whose text changed.

    Raises:
        SectionError: a document lacks a section's markers or does not close one.
    """
    changed = []
    for s in sections:
        if write_section(docs / s.doc, s.name, s.body()):
            changed.append(s.name)
        if not quiet:
            state = "rewritten" if s.name in changed else "unchanged"
            print(f"docs/{s.doc}: table {s.name} {state} from {s.source}")
    return changed


def regenerate_for(path: Path) -> list[str]:
    """Rewrite the sections that show the JSON file ``path`` (a benchmark calls
    this after writing it; a file no section shows, such as a ``--quick`` run's,
    rewrites nothing). Returns the names of the sections that changed.

    Raises:
        SectionError: see :func:`regenerate`.
    """
    path = Path(path).resolve()
    chosen = tuple(s for s in SECTIONS if (RESULTS / s.source).resolve() == path)
    return regenerate(chosen)


def check(sections: tuple[Section, ...] = SECTIONS, docs: Path = DOCS) -> list[str]:
    """One line per section whose text in its document is not what its JSON
    renders (with a short diff), or whose markers are broken; empty when all agree.
    """
    problems = []
    for s in sections:
        where = f"docs/{s.doc}"
        try:
            have = read_section((docs / s.doc).read_text(), s.name, where)
        except SectionError as err:
            problems.append(f"{where}: table {s.name}: {err}")
            continue
        want = s.body()
        if have != want:
            diff = difflib.unified_diff(
                have.splitlines(), want.splitlines(), "doc", s.source, n=0, lineterm=""
            )
            shown = "\n".join(list(diff)[2:12])
            problems.append(
                f"{where}: table {s.name} is not what bench/results/{s.source} "
                f"renders (run python -m bench.results_md):\n{shown}"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    """Rewrite the sections, or with ``--check`` report the stale ones (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="only compare; exit 1 when one differs"
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    try:
        regenerate()
    except SectionError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
