"""A differential fuzzer of the whole accelerator pipeline.

Random programs of real layers (:mod:`polyc.studies.fuzz.grammar`), built through the
compute API or as generated PyTorch modules (:mod:`polyc.studies.fuzz.build`), compiled by
:func:`polyc.compile` for shipped configs and for random valid hardware
(:mod:`polyc.studies.fuzz.hardware`), simulated, and compared with the reference
interpreter on the untransformed kernel (:mod:`polyc.studies.fuzz.runner`). A failing
case shrinks to a minimal one (:mod:`polyc.studies.fuzz.shrink`) to keep as a regression
test; batches append their seed and counts to a record (:mod:`polyc.studies.fuzz.record`).

::

    from polyc.studies import fuzz
    result = fuzz.run(cases=200, seed=7, jobs=2)   # or cluster="tcp://host:8786"
    print(result.summary())
    for case, record in result.failures():
        small = fuzz.shrink(case)

From the shell: ``polyc fuzz --cases 200 --seed 7 --jobs 2 [--shrink]``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from polyc.studies.fuzz.build import torch_supports
from polyc.studies.fuzz.grammar import Program, generate, shapes
from polyc.studies.fuzz.hardware import random_config
from polyc.studies.fuzz.runner import KINDS, Case, blank, mismatch, run_case
from polyc.studies.fuzz.shrink import shrink

#: hardware of a batch by default: the shipped configs and random descriptions
DEFAULT_CONFIGS = ("tiny", "edge-npu", "datacenter", "random", "random", "random")

__all__ = [
    "Case",
    "KINDS",
    "Program",
    "Result",
    "generate",
    "make_cases",
    "mismatch",
    "run",
    "run_case",
    "shapes",
    "shrink",
]


def make_cases(
    n: int,
    seed: int,
    configs: Sequence[str] = DEFAULT_CONFIGS,
    torch_share: float = 0.3,
    start: int = 0,
) -> list[Case]:
    """The cases ``start .. start + n - 1`` of the batch ``seed`` (deterministic:
    case ``i`` is the same whatever ``n``). ``configs`` are shipped names or
    ``"random"`` (a random valid description per case), drawn in turn;
    ``torch_share`` of the float32 programs go through ``from_torch``."""
    out = []
    for i in range(start, start + n):
        rng = random.Random(f"polyc-fuzz-{seed}-{i}")
        program = generate(rng)
        frontend = (
            "torch"
            if torch_supports(program) and rng.random() < torch_share
            else "compute"
        )
        which = configs[i % len(configs)]
        hardware = (
            random_config(rng, f"fuzz-{seed}-{i}") if which == "random" else which
        )
        out.append(Case(i, rng.randrange(1 << 31), program, frontend, hardware))
    return out


@dataclass
class Result:
    """The records of one batch, in case order, with the cases they came from."""

    seed: int
    cases: list[Case]
    records: list[dict]
    seconds: float = 0.0
    where: str = ""
    counts: Counter = field(default_factory=Counter)

    def __post_init__(self):
        self.counts = Counter(r["status"] for r in self.records)

    def failures(self) -> list[tuple[Case, dict]]:
        return [(c, r) for c, r in zip(self.cases, self.records) if r["status"] != "ok"]

    def summary(self) -> str:
        """Counts by kind, then one line per failure."""
        total = len(self.records)
        kinds = ", ".join(f"{k} {self.counts[k]}" for k in KINDS if self.counts[k])
        lines = [
            f"polyc fuzz: seed {self.seed}, {total} cases in {self.seconds:.0f} s"
            f"{' on ' + self.where if self.where else ''}: {kinds or 'none'}"
        ]
        for case, r in self.failures():
            lines.append(
                f"  {r['label']} on {r['config']} ({case.frontend}, "
                f"{'+'.join(r['ops'])}): {r['status']} at {r['stage']}: "
                f"{r['error_type']}: {_short(r['error'])}"
            )
        return "\n".join(lines)


def _short(text: str | None, n: int = 300) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 3] + "..."


def run(
    cases: int | Sequence[Case] = 100,
    seed: int = 0,
    *,
    configs: Sequence[str] = DEFAULT_CONFIGS,
    jobs: int | None = None,
    cluster=None,
    progress=False,
    timeout: float | None = 300.0,
) -> Result:
    """Run a batch: ``cases`` new cases of batch ``seed`` (or the given cases), in
    this process (``jobs=1``), a local pool of ``jobs`` processes (default: one
    per core) or on a Dask ``cluster``. A case that kills its worker is recorded as
    ``crash``; one that uses more than ``timeout`` seconds of CPU as ``hang``."""
    import time

    from polyc.studies import executors as ex

    batch = make_cases(cases, seed, configs) if isinstance(cases, int) else cases
    jobs = ex.default_jobs() if jobs is None else jobs
    where = "a Dask cluster" if cluster else f"{jobs} process" + ("es" * (jobs > 1))
    shown = ex.progress_for(progress, len(batch), where)
    shown.name, shown.failure = "fuzz", _failure_line
    runner = _runner(timeout)
    t0 = time.perf_counter()
    shown.start()
    if cluster is not None:
        client, owned = ex.connect(cluster)
        try:
            records = ex.run_dask(batch, client, shown, runner, _died, None)
        finally:
            if owned:
                client.close()
    elif jobs <= 1:
        records = ex.run_inline(batch, shown, runner)
    else:
        records = ex.run_pool(batch, jobs, shown, runner, _died, None)
    shown.finish()
    return Result(seed, list(batch), records, time.perf_counter() - t0, where)


def _runner(timeout):
    return run_case if timeout == 300.0 else _Bounded(timeout)


class _Bounded:
    """``run_case`` with another time limit (picklable, for the workers)."""

    def __init__(self, timeout):
        self.timeout = timeout

    def __call__(self, case: Case) -> dict:
        return run_case(case, self.timeout)


def _died(case: Case, error_type: str, message: str) -> dict:
    record = blank(case)
    record.update(stage="worker", error_type=error_type, error=message)
    return record


def _failure_line(record: dict) -> str:
    return (
        f"{record['label']} on {record['config']}: {record['status']} at "
        f"{record['stage']}: {record['error_type']}: {_short(record['error'], 200)}"
    )
