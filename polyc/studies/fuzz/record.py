"""The fuzzer's accumulated record: one JSON line per batch, appended.

Each line holds a batch's seed, its counts (cases by kind, config, frontend,
family, dtype; layers; ops) and its failures (each with the whole case, so it can
be run again). Lines are appended under an exclusive lock in one write, so
concurrent batches (several processes, several machines on a shared disk) do not
interleave; a reader skips a line a killed writer left torn, so a batch killed at
any moment loses only itself. :func:`totals` sums the lines.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import math
import os
import subprocess
from collections import Counter
from pathlib import Path

from polyc.studies.fuzz import Result


def batch_line(result: Result, jobs: str = "") -> dict:
    """The record line of one batch."""
    recs = result.records
    count = _counter

    def config_kind(c) -> str:
        return c.hardware if isinstance(c.hardware, str) else "random"

    return {
        "seed": result.seed,
        "first_case": min((c.index for c in result.cases), default=0),
        "cases": len(recs),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "commit": _commit(),
        "where": jobs or result.where,
        "seconds": round(result.seconds, 1),
        "kinds": count(r["status"] for r in recs),
        "configs": count(config_kind(c) for c in result.cases),
        "frontends": count(r["frontend"] for r in recs),
        "families": count(r["family"] for r in recs),
        "dtypes": count(r["dtype"] for r in recs),
        "layers": sum(r["layers"] for r in recs),
        "ops": count(op for r in recs for op in r["ops"]),
        "fallback_layers": sum(len(r["fallbacks"]) for r in recs),
        "prefetched": sum(r.get("prefetched", 0) for r in recs),
        "fidelity": fidelity(result),
        "failures": [
            {
                "kind": r["status"],
                "stage": r["stage"],
                "error_type": r["error_type"],
                "error": (r["error"] or "")[:2000],
                "case": c.to_dict(),
            }
            for c, r in result.failures()
        ],
    }


#: how many of the farthest predictions a batch line and the totals keep
FARTHEST = 5


def fidelity(result: Result) -> dict:
    """The cost model against the simulator over a batch's cases that ran and
    came out right: how many, the sum of the logs of predicted over simulated
    cycles (their geomean over batches), how many within 10% and within 25%,
    and the :data:`FARTHEST` farthest, each with its case."""
    ratios = [
        (r["predicted"] / r["cycles"], c)
        for c, r in zip(result.cases, result.records)
        if r["status"] == "ok" and r.get("predicted") and r.get("cycles")
    ]
    logs = [math.log(x) for x, _ in ratios]
    far = sorted(ratios, key=lambda rc: _farther(rc[0]))[:FARTHEST]
    return {
        "cases": len(ratios),
        "log_sum": sum(logs),
        "within_10": sum(abs(v) <= math.log(1.1) for v in logs),
        "within_25": sum(abs(v) <= math.log(1.25) for v in logs),
        "farthest": [
            {
                "ratio": round(x, 4),
                "seed": result.seed,
                "case": c.index,
                "label": c.label,
                "config": c.config,
            }
            for x, c in far
        ],
    }


def _farther(ratio: float) -> float:
    """A sort key: the farther ``ratio`` is from 1 either way, the lower."""
    return -abs(math.log(ratio))


def _counter(items) -> dict:
    return dict(sorted(Counter(items).items()))


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def append(path: str | Path, line: dict) -> None:
    """Append one batch line to the record at ``path`` (created if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(line, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # a torn line left by a killed writer must not swallow this one
        size = os.fstat(fd).st_size
        if size and _last_byte(path, size) != b"\n":
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _last_byte(path: Path, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(size - 1)
        return f.read(1)


def read(path: str | Path) -> list[dict]:
    """Every complete batch line of the record (torn lines are skipped)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for text in path.read_text().splitlines():
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(line, dict) and "cases" in line:
            out.append(line)
    return out


def totals(lines: list[dict]) -> dict:
    """The sums over batches: cases, layers, seconds, and each counter."""
    out: dict = {"batches": len(lines), "cases": 0, "layers": 0, "seconds": 0.0}
    counters = ("kinds", "configs", "frontends", "families", "dtypes", "ops")
    for key in counters:
        out[key] = Counter()
    out["fallback_layers"] = out["prefetched"] = 0
    fid = {"cases": 0, "log_sum": 0.0, "within_10": 0, "within_25": 0}
    far: list[dict] = []
    for line in lines:
        got = line.get("fidelity")  # (batches before it was recorded have none)
        if got:
            for key in fid:
                fid[key] += got[key]
            far += got["farthest"]
        out["cases"] += line["cases"]
        out["layers"] += line["layers"]
        out["seconds"] += line.get("seconds", 0.0)
        out["fallback_layers"] += line.get("fallback_layers", 0)
        out["prefetched"] += line.get("prefetched", 0)
        for key in counters:
            out[key].update(line.get(key, {}))
    for key in counters:
        out[key] = dict(sorted(out[key].items()))
    out["seeds"] = sorted({line["seed"] for line in lines})
    fid["farthest"] = sorted(far, key=lambda f: _farther(f["ratio"]))[:FARTHEST]
    fid["seeds"] = sorted({line["seed"] for line in lines if line.get("fidelity")})
    out["fidelity"] = fid
    return out


def next_seed(lines: list[dict]) -> int:
    """A batch seed the record has not used."""
    return max((line["seed"] for line in lines), default=-1) + 1
