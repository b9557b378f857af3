"""``polyc compile``: C in, scheduled C (or an accelerator report) out."""

from __future__ import annotations

import sys
from pathlib import Path


def add_compile_parser(sub) -> None:
    p = sub.add_parser(
        "compile",
        help="rewrite the #pragma scop regions of a C file with scheduled loop nests",
        description=(
            "Replace each '#pragma scop' region of a C file with code generated from "
            "its schedule; the rest of the file is kept byte for byte, so the output "
            "compiles with your own compiler and flags. With --config, compile the "
            "regions for a simulated accelerator instead and print the report."
        ),
    )
    p.add_argument("input", help="C source file")
    p.add_argument("-o", "--output", help="output file (default: standard output)")
    p.add_argument(
        "--schedule",
        help="'auto' (automatic scheduler) or an isl YAML schedule file, one YAML "
        "document per region separated by '---' lines (default: source order)",
    )
    p.add_argument("--config", help="accelerator configuration name (report mode)")
    p.add_argument(
        "-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]"
    )
    p.add_argument(
        "-I", dest="include_dirs", action="append", default=[], metavar="DIR"
    )
    p.add_argument(
        "--print-schedule",
        action="store_true",
        help="print each region's schedule as isl YAML (a starting point for --schedule)",
    )


def run_compile(args) -> int:
    from polyc.errors import PolycError

    try:
        if args.print_schedule:
            return _print_schedules(args)
        if args.config:
            return _accelerator(args)
        return _source_to_source(args)
    except PolycError as err:
        print(f"polyc compile: {err}", file=sys.stderr)
        return 1


def _schedule_arg(args):
    if args.schedule in (None, "auto"):
        return args.schedule
    return Path(args.schedule).read_text()


def _source_to_source(args) -> int:
    from polyc.frontend.c_s2s import compile_c

    result = compile_c(
        Path(args.input),
        schedule=_schedule_arg(args),
        defines=args.defines,
        include_dirs=args.include_dirs,
    )
    if args.output:
        Path(args.output).write_text(result.text)
    else:
        sys.stdout.write(result.text)
    for r in result.regions:
        where = f"{args.input}:{r.lines[0]}-{r.lines[1]}"
        if r.replaced:
            print(
                f"polyc: {where}: region {r.name} rewritten ({r.schedule} schedule)",
                file=sys.stderr,
            )
        else:
            print(f"polyc: {where}: warning: {r.message}", file=sys.stderr)
    return 0


def _print_schedules(args) -> int:
    from polyc.frontend.c import parse_c

    regions = parse_c(
        Path(args.input), defines=args.defines, include_dirs=args.include_dirs
    )
    docs = [f"# region {r.kernel.name}\n{r.kernel.schedule}\n" for r in regions]
    text = "---\n".join(docs)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _accelerator(args) -> int:
    import polyc
    from polyc.errors import ConfigError
    from polyc.frontend.c import parse_c

    compile_fn = getattr(__import__("polyc.api", fromlist=["x"]), "compile", None)
    if compile_fn is None:
        raise ConfigError(
            "compile: --config needs the accelerator target, which this installation "
            "does not have yet (polyc.compile is missing). Run without --config to "
            "rewrite the C source."
        )
    regions = parse_c(
        Path(args.input), defines=args.defines, include_dirs=args.include_dirs
    )
    for r in regions:
        kernel = r.kernel
        if args.schedule == "auto":
            from schedules import auto

            kernel = auto(kernel)
        result = compile_fn(kernel, config=args.config)
        report = getattr(result, "report", result)
        print(f"== region {kernel.name} on {args.config}")
        print(report)
    _ = polyc
    return 0
