"""Run every benchmark in turn (``make bench``); each writes bench/results/<name>.json.

    python -m bench.run_all [--only NAME ...] [--list]

A benchmark is a module of this package with a ``main(argv)`` function; it runs with
its default arguments. The slow ones (the roofline suite, the scheduling suite) take
minutes; ``--only`` picks some.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
import time

import bench

#: modules that are not benchmarks: helpers, the C sources of the plain baselines,
#: this runner, the regenerator of the docs' tables and the model suite's models
_SKIP = {"common", "plain_c", "results_md", "run_all", "zoo"}


def benchmarks() -> list[str]:
    names = []
    for info in pkgutil.iter_modules(bench.__path__):
        if info.name in _SKIP or info.name.startswith("_") or info.ispkg:
            continue
        names.append(info.name)
    return sorted(names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run the polyc benchmarks")
    parser.add_argument(
        "--only", nargs="*", default=None, help="benchmark module names"
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    args = parser.parse_args(argv)
    names = benchmarks()
    if args.list:
        print("\n".join(names))
        return 0
    chosen = [n for n in names if args.only is None or n in args.only]
    failed = []
    for name in chosen:
        module = importlib.import_module(f"bench.{name}")
        entry = getattr(module, "main", None)
        if entry is None:
            continue
        print(f"== bench.{name}", flush=True)
        start = time.perf_counter()
        try:
            takes_argv = bool(inspect.signature(entry).parameters)
            status = entry([]) if takes_argv else entry()
        except (
            Exception
        ) as err:  # keep going: one broken benchmark should not hide the rest
            print(f"bench.{name} failed: {err!r}", file=sys.stderr)
            failed.append(name)
            continue
        if status not in (None, 0):
            failed.append(name)
        print(f"   ({time.perf_counter() - start:.1f} s)\n", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
