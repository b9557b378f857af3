"""The fuzzer at scale: seeded batches of :mod:`polyc.studies.fuzz`, accumulated in a record.

    python -m bench.fuzz [--batches 4] [--cases 500] [--jobs 2] [--cluster ADDR]
    python -m bench.fuzz --report          # only regenerate the table in docs/fuzz.md

Each batch takes the next seed the record has not used (or ``--seed``), runs its
cases on a local process pool (or a Dask cluster), and appends one line to
``bench/results/fuzz.jsonl``: the seed, the commit, counts by kind, config,
frontend, family, dtype and op, and every failure with its whole case. Batches may
run at once from several processes or machines: lines are appended under a lock.
The totals table in ``docs/fuzz.md`` is regenerated from the record, the
repository's own only: a run into another ``--record`` (a trial on a branch)
leaves the docs as they are.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from bench.common import DOCS, RESULTS, write_section

RECORD = RESULTS / "fuzz.jsonl"
DOC = DOCS / "fuzz.md"
#: the table section of docs/fuzz.md (see bench.common.replace_section)
SECTION = "fuzz-totals"


def main(argv: list[str] | None = None) -> int:
    from polyc.studies import fuzz
    from polyc.studies.fuzz import record as rec

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=1)
    parser.add_argument("--cases", type=int, default=200, help="cases per batch")
    parser.add_argument("--seed", type=int, default=None, help="first batch seed")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--cluster", default=None, help="a Dask scheduler address")
    parser.add_argument("--record", default=str(RECORD))
    parser.add_argument("--report", action="store_true", help="only the docs table")
    args = parser.parse_args(argv)
    failed = 0
    if not args.report:
        for b in range(args.batches):
            lines = rec.read(args.record)
            seed = args.seed + b if args.seed is not None else rec.next_seed(lines)
            result = fuzz.run(
                args.cases, seed, jobs=args.jobs, cluster=args.cluster, progress=True
            )
            rec.append(args.record, rec.batch_line(result))
            print(result.summary(), flush=True)
            failed += len(result.failures())
    if Path(args.record).resolve() == RECORD.resolve():
        write_table(rec.totals(rec.read(args.record)))
    return 1 if failed else 0


def table(t: dict) -> str:
    """The totals of the record as markdown."""
    kinds = t["kinds"]
    rows = [
        "| | |",
        "|---|---:|",
        f"| batches | {t['batches']:,} |",
        f"| cases (a program compiled, simulated and compared on one config) | "
        f"{t['cases']:,} |",
        f"| layers in those programs | {t['layers']:,} |",
        f"| CPU time of the cases, summed over the batches' wall times | "
        f"{t['seconds'] / 3600:,.1f} h |",
    ]
    from polyc.studies.fuzz import KINDS

    for kind in (*KINDS, *sorted(set(kinds) - set(KINDS))):
        rows.append(f"| {kind} | {kinds.get(kind, 0):,} |")
    rows.append(f"| layers that fell back to DRAM-direct | {t['fallback_layers']:,} |")
    rows.append(f"| weights fetched ahead | {t['prefetched']:,} |")
    fid = t.get("fidelity") or {}
    if fid.get("cases"):
        n = fid["cases"]
        rows.append(
            f"| predicted over simulated cycles, {n:,} cases that came out right "
            f"(seeds {fid['seeds'][0]} on): geomean | "
            f"{math.exp(fid['log_sum'] / n):.3f} |"
        )
        rows.append(f"| ... within 10% | {fid['within_10'] / n:.1%} |")
        rows.append(f"| ... within 25% | {fid['within_25'] / n:.1%} |")
    configs = ", ".join(f"{k} {v:,}" for k, v in t["configs"].items())
    fronts = ", ".join(f"{k} {v:,}" for k, v in t["frontends"].items())
    fams = ", ".join(f"{k} {v:,}" for k, v in t["families"].items())
    dts = ", ".join(f"{k} {v:,}" for k, v in t["dtypes"].items())
    ops = ", ".join(
        f"{k} {v:,}" for k, v in sorted(t["ops"].items(), key=lambda x: -x[1])
    )
    seeds = t["seeds"]
    span = f"{seeds[0]}-{seeds[-1]}" if seeds else "-"
    far = ", ".join(
        f"{f['ratio']:.2f} (seed {f['seed']} case {f['case']}, {f['config']})"
        for f in fid.get("farthest", [])
    )
    far = f"Farthest predictions (predicted / simulated): {far}." if far else ""
    return "\n".join(
        [
            *rows,
            "",
            f"Hardware: {configs}. Frontends: {fronts}. Families: {fams}. "
            f"Dtypes: {dts}.",
            "",
            f"Layers drawn: {ops}.",
            "",
            f"Batch seeds: {span}.",
            *(["", far] if far else []),
        ]
    )


def write_table(t: dict) -> None:
    """Rewrite the totals section of docs/fuzz.md (when the file exists).

    Raises:
        SectionError: the section's markers are missing or not closed.
    """
    if DOC.exists():
        write_section(DOC, SECTION, table(t))


if __name__ == "__main__":
    sys.exit(main())
