"""The ``polyc`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="polyc",
        description="polyc: a polyhedral loop-nest scheduling compiler for ML accelerators",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo", help="compile and run a small multi-op example end to end and report"
    )
    demo.add_argument("--size", type=int, default=64, help="problem size (default 64)")
    from polyc.frontend.c_cli import add_compile_parser

    add_compile_parser(sub)
    from polyc.sweep_cli import add_parsers as add_study_parsers

    add_study_parsers(sub)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        from polyc.demo import run_demo

        return run_demo(size=args.size)
    if args.command == "compile":
        from polyc.frontend.c_cli import run_compile

        return run_compile(args)
    if args.command in ("sweep", "explain"):
        from polyc import sweep_cli

        return getattr(sweep_cli, f"run_{args.command}")(args)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
