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
        "--param",
        dest="params",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a parameter's value for --config runs (macros have theirs already)",
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
    """Compile each region for the simulated accelerator, run it on deterministic
    random inputs, check it against the interpreter and print the report."""
    import numpy as np

    import polyc
    from polyc.errors import ArgumentError
    from polyc.frontend.c import parse_c
    from polyc.frontend.c_s2s import _schedule

    given = {}
    for item in args.params:
        name, _, value = item.partition("=")
        if not value.lstrip("-").isdigit():
            raise ArgumentError(
                f"compile: --param {item!r} is not NAME=INTEGER because its value is "
                f"{value!r}. Write e.g. --param n=64."
            )
        given[name] = int(value)
    regions = parse_c(
        Path(args.input), defines=args.defines, include_dirs=args.include_dirs
    )
    rng = np.random.default_rng(0)
    for r in regions:
        kernel = _schedule(r.kernel, args.schedule, r.param_values)
        values = {**r.param_values, **given}
        missing = [p for p in kernel.params if p not in values]
        if missing:
            raise ArgumentError(
                f"compile: region {kernel.name} needs values for {', '.join(missing)} "
                "because --config runs the kernel. Pass --param "
                f"{missing[0]}=VALUE for each."
            )
        values = {p: values[p] for p in kernel.params}
        inputs = {}
        for a in kernel.free_inputs:
            shape = a.concrete_shape(values)
            data = rng.random(shape) if a.dtype.is_float else rng.integers(0, 8, shape)
            inputs[a.name] = np.asarray(data).astype(a.dtype.numpy)
        compiled = polyc.compile(kernel, config=args.config)
        outputs, report = compiled.run(inputs, **values)
        want = polyc.interpret(r.kernel, inputs, **values)
        same = all(np.allclose(outputs[k], want[k], rtol=1e-5, atol=1e-6) for k in want)
        print(f"== region {kernel.name} on {args.config}")
        print(compiled)
        print(report)
        print(f"outputs match the interpreter: {'yes' if same else 'NO'}")
    return 0
