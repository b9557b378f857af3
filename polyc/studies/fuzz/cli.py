"""``polyc fuzz``: run a batch of the whole-pipeline fuzzer from the shell."""

from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser(
        "fuzz",
        help="differential fuzzing of the accelerator pipeline against the interpreter",
        description=(
            "Generate random programs of real layers, compile them for shipped and "
            "random hardware, simulate, and compare with the reference interpreter. "
            "Exits 1 when a case fails."
        ),
    )
    p.add_argument("--cases", type=int, default=50, help="cases in the batch (50)")
    p.add_argument("--seed", type=int, default=0, help="the batch seed (0)")
    p.add_argument("--start", type=int, default=0, help="index of the first case")
    p.add_argument(
        "--configs",
        nargs="+",
        default=None,
        metavar="CONFIG",
        help="shipped configs and 'random', drawn in turn (default: the three "
        "shipped configs and three random descriptions)",
    )
    p.add_argument("--jobs", type=int, default=None, help="local processes (cores)")
    p.add_argument("--cluster", default=None, help="a Dask scheduler address")
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="CPU seconds per case (a case past it is a hang)",
    )
    p.add_argument(
        "--shrink",
        action="store_true",
        help="shrink every failing case and print it as a regression-test entry",
    )
    p.add_argument("--record", default=None, help="append the batch to this record")


def run(args) -> int:
    from polyc.studies import fuzz
    from polyc.studies.fuzz import record as rec
    from polyc.studies.fuzz.grammar import InvalidProgram

    configs = tuple(args.configs) if args.configs else fuzz.DEFAULT_CONFIGS
    _check_configs(configs)
    if args.cases < 1:
        raise InvalidProgram(
            f"polyc fuzz: --cases {args.cases} runs nothing because a batch needs at "
            "least one case. Pass --cases 1 or more."
        )
    batch = fuzz.make_cases(args.cases, args.seed, configs, start=args.start)
    result = fuzz.run(
        batch,
        args.seed,
        jobs=args.jobs,
        cluster=args.cluster,
        progress=True,
        timeout=args.timeout,
    )
    print(result.summary())
    if args.record:
        rec.append(args.record, rec.batch_line(result))
    if args.shrink:
        for case, _ in result.failures():
            small, r = fuzz.shrink(case, timeout=args.timeout)
            print(f"\n# {r['status']}: {r['error_type']}: {r['error']}")
            print(small.program.text())
            print(json.dumps(small.to_dict(), sort_keys=True))
    sys.stdout.flush()
    return 1 if result.failures() else 0


def _check_configs(configs) -> None:
    from accelerator import CONFIGS
    from polyc.errors import ConfigError

    bad = [c for c in configs if c != "random" and c not in CONFIGS]
    if bad:
        raise ConfigError(
            f"polyc fuzz: unknown config(s) {', '.join(bad)} because the fuzzer takes "
            f"the shipped configs ({', '.join(CONFIGS)}) and 'random'. Pass those."
        )
