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
    p.add_argument(
        "--fusion",
        help="with --schedule auto: isl's fusion strategy, 'max', 'smart' (the "
        "default) or 'none'",
    )
    p.add_argument(
        "--max-operations",
        metavar="N",
        help="with --schedule auto: isl's operation budget for each call of its "
        "scheduler; a region that runs past it is left as it is (default: none, "
        "and auto falls back to simpler schedulers instead)",
    )
    p.add_argument(
        "--max-seconds",
        metavar="S",
        help="with --schedule auto: CPU seconds for each call of isl's scheduler; "
        "a region that runs past it is left as it is (default: 2 s per step of "
        "the fallback chain, which then moves on)",
    )
    p.add_argument(
        "--cache",
        metavar="l1=SIZE,l2=SIZE,l3=SIZE",
        help="with --schedule auto: the cache capacities the cost model tiles and "
        "chooses for, e.g. l2=2M (default: this machine's, from "
        "/sys/devices/system/cpu/cpu0/cache), and vector=BYTES, the SIMD register "
        "the products' register tiles use (default: from /proc/cpuinfo)",
    )
    p.add_argument(
        "--wavefront",
        action="store_true",
        default=None,
        help="with --schedule auto: run time-tiled stencils' tiles in parallel "
        "wavefronts (OpenMP); faster on several threads, slower on one",
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
        "--verify",
        action="store_true",
        help="with --config: fail when a region's outputs differ from the "
        "interpreter's, naming the array, the element and both values",
    )
    p.add_argument(
        "--emit",
        choices=("c", "mlir"),
        help="what to write: 'c' (the rewritten C file, the default for C input) or "
        "'mlir' (each region's kernel as affine-dialect MLIR: as written, scheduled "
        "with --schedule, or placed with --config; docs/mlir.md). An input ending "
        "in .mlir is an affine MLIR program (polyc.from_mlir)",
    )
    p.add_argument(
        "--print-schedule",
        action="store_true",
        help="print each region's schedule as isl YAML (a starting point for --schedule)",
    )


def run_compile(args) -> int:
    from polyc.errors import PolycError

    try:
        mlir_in = args.input.endswith(".mlir")
        if not mlir_in:
            _check_input(args.input)
        _verify_needs_config(args)
        _auto_options(args)
        if args.print_schedule:
            return _print_schedules(args)
        if args.emit == "mlir" or (mlir_in and not args.config):
            return _emit_mlir(args)
        if args.config:
            return _accelerator(args)
        return _source_to_source(args)
    except PolycError as err:
        text = str(err)
        print(
            f"polyc {text}"
            if text.startswith("compile:")
            else f"polyc compile: {text}",
            file=sys.stderr,
        )
        return 2


def _check_input(name: str) -> None:
    """Refuse an input that holds nothing to compile, before any work (the
    frontend refuses a missing file, a directory or an unreadable one)."""
    from polyc.errors import FrontendError
    from polyc.frontends.c.preprocess import find_regions, read_source

    filename, text = read_source(Path(name))
    if not text.strip():
        raise FrontendError(
            f"compile: {name} has no loop nest to compile because the file is empty. "
            "Pass the C file that holds the '#pragma scop' region."
        )
    if not find_regions(filename, text):
        raise FrontendError(
            f"compile: found no #pragma scop regions in {name} because the file has "
            "none. Mark each loop nest to compile with '#pragma scop' before it and "
            "'#pragma endscop' after it."
        )


def _verify_needs_config(args) -> None:
    from polyc.errors import ArgumentError

    if args.verify and not args.config:
        raise ArgumentError(
            "compile: --verify has nothing to check because without --config the "
            "regions are rewritten, not run. Add --config NAME (e.g. --config tiny)."
        )


def _auto_options(args) -> dict:
    """``schedules.auto``'s keyword arguments from --fusion, --max-operations,
    --max-seconds and --cache (checked: ArgumentError for a misuse)."""
    from polyc.errors import ArgumentError

    given = [
        flag
        for flag, value in (
            ("--fusion", args.fusion),
            ("--max-operations", args.max_operations),
            ("--max-seconds", args.max_seconds),
            ("--cache", args.cache),
            ("--wavefront", args.wavefront),
        )
        if value is not None
    ]
    if given and args.schedule != "auto":
        raise ArgumentError(
            f"compile: {given[0]} has no effect because it tunes the automatic "
            "scheduler and the regions are not scheduled automatically. Add "
            "--schedule auto."
        )
    fusion = args.fusion or "smart"
    if fusion not in ("max", "smart", "none"):
        raise ArgumentError(
            f"compile: --fusion {fusion!r} is not a fusion strategy because the "
            "strategies are max, smart and none. Pass one of those."
        )
    out: dict = {
        "fusion": fusion,
        "max_operations": None,
        "max_seconds": None,
        "cache": None,
        "wavefront": bool(args.wavefront),
    }
    if args.cache is not None:
        from schedules.host.cache_model import parse_cache

        out["cache"] = parse_cache(args.cache, what="compile: --cache")
    if args.max_operations is not None:
        text = args.max_operations.strip()
        if not text.isdigit():
            raise ArgumentError(
                f"compile: --max-operations {args.max_operations!r} is not a budget "
                "because it is not a non-negative integer. Write e.g. "
                "--max-operations 5000000, or leave it out."
            )
        out["max_operations"] = int(text)
    if args.max_seconds is not None:
        try:
            seconds = float(args.max_seconds)
        except ValueError:
            seconds = -1.0
        if not (seconds >= 0 and seconds != float("inf")):
            raise ArgumentError(
                f"compile: --max-seconds {args.max_seconds!r} is not a budget "
                "because it is not a non-negative number of seconds. Write e.g. "
                "--max-seconds 10, or leave it out."
            )
        out["max_seconds"] = seconds
    return out


def _schedule_arg(args):
    from polyc.errors import ArgumentError

    if args.schedule in (None, "auto"):
        return args.schedule
    path = Path(args.schedule)
    if path.is_dir():
        why = "it is a directory"
    elif not path.is_file():
        why = "it does not exist"
    else:
        try:
            return path.read_text()
        except (OSError, UnicodeDecodeError) as err:
            why = _reason(err)
    raise ArgumentError(
        f"compile: cannot read the schedule file {args.schedule} because {why}. Pass "
        "'auto' or an isl YAML file (--print-schedule writes one to start from)."
    )


def _write(name: str, text: str) -> None:
    from polyc.errors import ArgumentError

    try:
        Path(name).write_text(text)
    except OSError as err:
        raise ArgumentError(
            f"compile: cannot write {name} because {_reason(err)}. Pass -o a path "
            "in an existing, writable directory."
        ) from None


def _reason(err: Exception) -> str:
    """Why a read or write failed, in words that follow "because"."""
    if isinstance(err, FileNotFoundError):
        return "its directory does not exist"
    if isinstance(err, IsADirectoryError):
        return "it is a directory"
    if isinstance(err, PermissionError):
        return "permission is denied"
    return f"the system reports '{getattr(err, 'strerror', None) or err}'"


def _source_to_source(args) -> int:
    from polyc.integrations.c_source import compile_c

    result = compile_c(
        Path(args.input),
        schedule=_schedule_arg(args),
        defines=args.defines,
        include_dirs=args.include_dirs,
        **_auto_options(args),
    )
    if args.output:
        _write(args.output, result.text)
    else:
        sys.stdout.write(result.text)
    for r in result.regions:
        where = f"{args.input}:{r.lines[0]}-{r.lines[1]}"
        if r.replaced:
            how = f"{r.schedule} schedule" + (f": {r.step}" if r.step else "")
            print(
                f"polyc: {where}: region {r.name} rewritten ({how})",
                file=sys.stderr,
            )
        else:
            print(f"polyc: {where}: warning: {r.message}", file=sys.stderr)
    return 0


def _print_schedules(args) -> int:
    from schedules.apply import to_yaml

    regions = _regions(args)
    # block style, as schedules.to_yaml writes and polyc explain shows
    docs = [f"# region {r.kernel.name}\n{to_yaml(r.kernel)}\n" for r in regions]
    return _output(args, "---\n".join(docs))


def _output(args, text: str) -> int:
    """Write ``text`` to ``-o`` or standard output."""
    if args.output:
        _write(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def _accelerator(args) -> int:
    """Compile each region for the simulated accelerator, run it on deterministic
    random inputs, check it against the interpreter and print the report."""
    import numpy as np

    import polyc
    from accelerator import load_config
    from polyc.errors import ArgumentError
    from polyc.integrations.c_source import apply_region_schedule, schedule_documents
    from polyc.oracle.verify import compare

    given = _params(args.params)
    load_config(args.config)  # a bad name fails before any work
    regions = _regions(args)
    docs = schedule_documents(_schedule_arg(args), len(regions))
    rng = np.random.default_rng(0)
    options = _auto_options(args)
    for r, doc in zip(regions, docs, strict=True):
        kernel = apply_region_schedule(r.kernel, doc, r.param_values, options)
        values = {**r.param_values, **given}
        missing = [p for p in kernel.params if p not in values]
        if missing:
            raise ArgumentError(
                f"compile: region {kernel.name} needs values for {', '.join(missing)} "
                "because --config runs the kernel. Pass --param "
                f"{missing[0]}=VALUE for each."
            )
        values = {p: values[p] for p in kernel.params}
        # placement needs concrete sizes: the macros' values and --param fix them
        kernel = kernel.specialize(**values)
        inputs = {}
        for a in kernel.free_inputs:
            shape = a.concrete_shape({})
            data = rng.random(shape) if a.dtype.is_float else rng.integers(0, 8, shape)
            inputs[a.name] = np.asarray(data).astype(a.dtype.numpy)
        compiled = polyc.compile(kernel, config=args.config)
        outputs, report = compiled.run(inputs)
        # the oracle is the region as written, before scheduling and specialising
        result = compare(r.kernel, inputs, outputs, values)
        print(f"== region {kernel.name} on {args.config}")
        print(compiled)
        print(report)
        run = f"on {args.config}"
        verdict = "yes" if result.ok else f"NO: {result.wrong[0].describe(run)}"
        print(f"outputs match the interpreter: {verdict}")
        if args.verify:
            result.raise_if_wrong("compile", run)
    return 0


def _regions(args) -> list:
    """The input's regions: the C file's ``#pragma scop`` regions, or the one
    function of an MLIR file (its parameters have no known values)."""
    from types import SimpleNamespace

    if args.input.endswith(".mlir"):
        import polyc

        kernel = polyc.from_mlir(Path(args.input))
        return [SimpleNamespace(kernel=kernel, param_values={})]
    from polyc.frontends.c.parse import parse_c

    return parse_c(
        Path(args.input), defines=args.defines, include_dirs=args.include_dirs
    )


def _emit_mlir(args) -> int:
    """Each region's kernel as MLIR: scheduled with --schedule, placed for
    --config (its sizes fixed by the macros and --param)."""
    import polyc
    from polyc.errors import ArgumentError
    from polyc.integrations.c_source import apply_region_schedule, schedule_documents

    if args.config:
        from accelerator import load_config

        load_config(args.config)  # a bad name fails before any work
    given = _params(args.params)
    regions = _regions(args)
    docs = schedule_documents(_schedule_arg(args), len(regions))
    texts = []
    options = _auto_options(args)
    for r, doc in zip(regions, docs, strict=True):
        kernel = apply_region_schedule(r.kernel, doc, r.param_values, options)
        if args.config:
            values = {**r.param_values, **given}
            missing = [p for p in kernel.params if p not in values]
            if missing:
                raise ArgumentError(
                    f"compile: region {kernel.name} needs values for "
                    f"{', '.join(missing)} because placement needs concrete sizes. "
                    f"Pass --param {missing[0]}=VALUE for each."
                )
            kernel = kernel.specialize(**{p: values[p] for p in kernel.params})
            kernel = polyc.compile(kernel, config=args.config).kernel
        texts.append(polyc.to_mlir(kernel))
    return _output(args, "".join(texts))


def _params(items: list[str]) -> dict[str, int]:
    """``--param NAME=INTEGER`` values."""
    import re

    from polyc.errors import ArgumentError

    given = {}
    for item in items:
        name, eq, value = (p.strip() for p in item.partition("="))
        if not eq or not re.fullmatch(r"[A-Za-z_]\w*", name):
            why = "it has no '='" if not eq else f"{name!r} is not a C identifier"
            raise ArgumentError(
                f"compile: --param {item!r} is not NAME=INTEGER because {why}. Write "
                "e.g. --param n=64."
            )
        if not re.fullmatch(r"-?\d+", value):
            raise ArgumentError(
                f"compile: --param {item!r} is not NAME=INTEGER because its value "
                f"{value!r} is not an integer. Write e.g. --param {name}=64."
            )
        given[name] = int(value)
    return given
