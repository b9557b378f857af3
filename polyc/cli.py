"""The ``polyc`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Run the ``polyc`` command line on ``argv`` (default: ``sys.argv[1:]``).

    Returns the exit status: 0 on success, 1 when a sweep ran but some points
    failed, 2 for a misuse or any polyc error (its message on stderr, no traceback).
    """
    parser = argparse.ArgumentParser(
        prog="polyc",
        description="polyc: a polyhedral loop-nest scheduling compiler for ML accelerators",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo", help="compile and run a small multi-op example end to end and report"
    )
    demo.add_argument("--size", type=int, default=64, help="problem size (default 64)")
    sub.add_parser(
        "prebuild",
        help="build the simulator's runtime library into the installation once "
        "(make does), so that no compile pays for it",
    )
    from polyc.integrations.c_source.cli import add_compile_parser

    add_compile_parser(sub)
    from polyc.studies.sweep.cli import add_parsers as add_study_parsers

    add_study_parsers(sub)
    from polyc.studies.fuzz.cli import add_parser as add_fuzz_parser

    add_fuzz_parser(sub)
    from polyc.studies.report.cli import add_parsers as add_report_parsers

    add_report_parsers(sub)
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # argparse has printed the usage and the error
        return stop.code if isinstance(stop.code, int) else 2
    if args.command is None:
        parser.print_help()
        return 0
    from polyc.errors import PolycError

    try:
        return _run(args)
    except PolycError as err:  # a safety net: each command reports its own errors
        print(f"polyc {args.command}: {err}", file=sys.stderr)
        return 2


def _run(args) -> int:
    if args.command == "demo":
        from polyc.demo import run_demo

        return run_demo(size=args.size)
    if args.command == "prebuild":
        return _prebuild()
    if args.command == "compile":
        from polyc.integrations.c_source.cli import run_compile

        return run_compile(args)
    if args.command == "fuzz":
        from polyc.studies.fuzz.cli import run as run_fuzz

        return run_fuzz(args)
    if args.command in ("report", "diff"):
        from polyc.studies.report import cli as report_cli

        return getattr(report_cli, f"run_{args.command}")(args)
    if args.command in ("sweep", "explain"):
        from polyc.studies.sweep import cli as sweep_cli

        return getattr(sweep_cli, f"run_{args.command}")(args)
    return 2


def _prebuild() -> int:
    import time

    from codegen.accel.direct import prebuild

    start = time.perf_counter()
    built = prebuild()
    how = "found" if built.cached else f"built in {time.perf_counter() - start:.1f} s"
    print(f"polyc prebuild: the simulator's runtime library, {how}: {built.path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
