"""``polyc sweep`` (performance studies) and ``polyc explain`` (one op, inspected)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

_OP_HELP = (
    "op specs: NAME:key=value,... with shapes as AxBxC, e.g. "
    "'matmul:M=256,N=256,K=256' or 'conv2d:input=1x64x56x56,weight=64x64x3x3,"
    "padding=1'; prefix LABEL= to name a layer ('res2=conv2d:...'). Arguments are "
    "those of polyc.ops.<NAME> (see polyc/ops/kernels.py)"
)
_SCHEDULE_HELP = (
    "'none' (the kernel as written), 'default' (what polyc.compile chooses), "
    "'energy' or 'edp' (the same scheduler minimising energy or energy x delay), "
    "'auto' (schedules.auto), or an isl YAML schedule file"
)

_SWEEP_EPILOG = """\
examples:
  polyc sweep --ops matmul:M=256,N=256,K=256 relu:input=256x256 \\
              --configs tiny edge-npu --schedule none default --out study/
  polyc sweep --ops gemm=matmul:M=512,N=512,K=512 --configs datacenter \\
              --cluster tcp://scheduler:8786 --out study/
  polyc sweep --from study/sweep.json --out replot/      # table and plots again
  polyc sweep --from study/study.db --out replot/        # also while it runs
  polyc sweep --ops matmul:M=256,N=256,K=256 --out study/ \
              --configs 'edge-npu:mac_array.rows=16,32,64;mac_array.cols=rows' \
              --where 'area_mm2<=60'                     # a hardware grid

--out DIR receives study.db (SQLite, each point committed as it finishes: run the
same command again to resume a study that was stopped), sweep.json (every record,
with full reports), sweep.csv (one row per point), and roofline, cycles,
utilization and energy plots (PNG and SVG); a sweep whose configs differ in area
adds the Pareto plot and table of (latency, energy, area).
Exit status: 0 when every point ran, 1 when some failed (they are listed under the
table and kept in the files), 2 for bad arguments (nothing ran).
"""

_EXPLAIN_EPILOG = """\
examples:
  polyc explain matmul:M=64,N=64,K=64 --config edge-npu
  polyc explain model.py:Net --input-shape 1x3x32x32 --full
  polyc explain kernels.py:gemm --relations
  polyc explain conv2d:input=1x8x16x16,weight=16x8x3x3,padding=1 --config tiny \\
                --schedule none --trace conv.json     # then open it in ui.perfetto.dev

Exit status: 0, or 2 with the error on stderr (a bad argument, or an op that does
not compile or run).
"""


def _wrap(text: str) -> str:
    return textwrap.fill(text, 80)


def add_parsers(sub) -> None:
    """Add the ``sweep`` and ``explain`` subcommands to ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "sweep",
        help="compile and simulate ops x schedules x configs; table, CSV, JSON, plots",
        description=_wrap(
            "Run a performance study: every combination of --ops, --schedule and "
            "--configs is compiled and simulated, in a local process pool or on a "
            "Dask cluster, and reported as a table (cycles against the roofline, "
            "MAC utilisation, DRAM traffic, energy). A point that fails is "
            "recorded with its error; the others go on."
        ),
        epilog=_SWEEP_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("--ops", "--op", nargs="+", metavar="OP", help=_OP_HELP)
    p.add_argument(
        "--configs",
        "--config",
        nargs="+",
        default=["edge-npu"],
        metavar="NAME",
        help="hardware configs: shipped names (tiny, edge-npu, datacenter) or TOML "
        "paths (default: edge-npu), or grids 'CONFIG:key=values;key=values', e.g. "
        "'edge-npu:mac_array.rows=16,32,64;mac_array.cols=rows;"
        "memory.sram.capacity_bytes=262144..4194304*2' (see docs/sweep.md)",
    )
    p.add_argument(
        "--where",
        metavar="EXPR",
        help="keep only the grid points where every comparison holds, e.g. "
        "'area_mm2<=30,sram_bytes<=4194304' (config keys, area_mm2, sram_bytes)",
    )
    p.add_argument(
        "--schedule",
        "--schedules",
        nargs="+",
        default=["default"],
        metavar="S",
        help=f"schedules to compare: {_SCHEDULE_HELP} (default: default)",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--jobs",
        "-j",
        type=int,
        metavar="N",
        help="local worker processes (default: every core; 1 runs in this process)",
    )
    where.add_argument(
        "--cluster",
        metavar="ADDR",
        help="run on a Dask distributed scheduler instead, e.g. tcp://host:8786 "
        "(workers need polyc installed; start them with --nthreads 1)",
    )
    p.add_argument("--out", metavar="DIR", help="write JSON, CSV and plots here")
    p.add_argument(
        "--formats",
        nargs="+",
        default=["png", "svg"],
        choices=["png", "svg"],
        help="plot formats (default: png svg)",
    )
    p.add_argument(
        "--inputs",
        choices=["random", "zeros"],
        default="random",
        help="input data (the cost does not depend on it; default: random)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="also compare every point's outputs with the reference interpreter",
    )
    p.add_argument(
        "--functional",
        action="store_true",
        help="simulate every point functionally (default: timing-only, the same "
        "cycles, bytes and energy without moving data)",
    )
    p.add_argument(
        "--functional-sample",
        type=int,
        default=None,
        metavar="N",
        help="points of a timing-only study that also run functionally, their "
        "reports compared (default: 4)",
    )
    p.add_argument(
        "--no-progress", action="store_true", help="do not show progress on stderr"
    )
    p.add_argument(
        "--from",
        dest="load",
        metavar="FILE",
        help="do not run: load a sweep.json or study .db written before, print it "
        "and --out it",
    )
    p.add_argument(
        "--db",
        metavar="PATH",
        help="SQLite results file: each point is committed as it finishes, and a "
        "study run again resumes, running only the points it lacks (default: "
        "OUT/study.db with --out)",
    )
    p.add_argument(
        "--study",
        default=None,
        metavar="NAME",
        help="the study's name in the database (several may share one file; "
        "default: sweep)",
    )

    e = sub.add_parser(
        "explain",
        help="show one op's kernel, schedule tree, dependences, mapping and report",
        description=_wrap(
            "Inspect one op (or a model.py:Class, a .pt2 program, a kernels.py) "
            "on one hardware config: the compiled schedule tree in a compact view "
            "(one line per node: bands with tiles, buffers, engines) and after one "
            "simulated run its cycles against the prediction and both bounds. "
            "--full adds the kernel, loop nest, dependences, mapping and the "
            "report's tables; --relations the raw isl."
        ),
        epilog=_EXPLAIN_EPILOG,
        formatter_class=fmt,
    )
    e.add_argument("op", metavar="OP", help=_OP_HELP)
    e.add_argument(
        "--config",
        default="edge-npu",
        metavar="NAME",
        help="hardware config name or TOML path (default: edge-npu)",
    )
    e.add_argument(
        "--schedule", default="default", metavar="S", help=f"{_SCHEDULE_HELP}"
    )
    e.add_argument(
        "--trace",
        metavar="PATH",
        help="write the run's trace as Chrome trace-event JSON (opens in Perfetto)",
    )
    e.add_argument(
        "--no-run", action="store_true", help="stop after compiling (no simulation)"
    )
    e.add_argument(
        "--relations",
        action="store_true",
        help="also print the raw isl: the schedule tree's YAML and the exact "
        "dependence relations (long for convolutions); implies --full",
    )
    e.add_argument(
        "--full",
        action="store_true",
        help="also print the kernel, loop nest, history, dependences, mapping and "
        "the report's tables (the default is the compact tree and a run summary)",
    )
    e.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="AxBxC",
        help="an input shape of a model file target (model.py:ClassName), once per "
        "positional input",
    )
    e.add_argument(
        "--inputs", choices=["random", "zeros"], default="random", help="input data"
    )


def run_sweep(args) -> int:
    """``polyc sweep``: 0 when every point ran, 1 when some failed, 2 on bad input."""
    from polyc.errors import PolycError

    if not args.load and not args.ops:
        print("polyc sweep: give --ops (or --from a sweep.json)", file=sys.stderr)
        return 2
    try:
        if args.out:
            _make_out(Path(args.out))
        if args.load:
            from polyc.studies.sweep.result import SweepResult

            result = SweepResult.load(args.load, args.study)
        else:
            import polyc

            for op in args.ops:
                check_op_text(op, "sweep")
            points = polyc.sweep.grid(
                args.ops, args.schedule, args.configs, where=args.where
            )
            result = polyc.sweep(
                points,
                inputs=args.inputs,
                jobs=args.jobs,
                cluster=args.cluster,
                progress=not args.no_progress,
                check=args.check,
                timing_only=not args.functional,
                functional_sample=polyc.sweep.FUNCTIONAL_SAMPLE
                if args.functional_sample is None
                else args.functional_sample,
                db=args.db or (Path(args.out) / "study.db" if args.out else None),
                study=args.study or "sweep",
            )
        print(result.table())
        if result.has_front():
            print("\n" + result.pareto_table())
        if args.out:
            written = _write_out(result, Path(args.out), args.formats)
            print(f"\nwrote {', '.join(str(p) for p in written)}")
    except PolycError as err:
        print(f"polyc: {err}", file=sys.stderr)
        return 2
    return 1 if result.failed else 0


def _write_out(result, out: Path, formats) -> list[Path]:
    try:
        _make_out(out)
        written = [result.to_json(out / "sweep.json"), result.to_csv(out / "sweep.csv")]
        return written + result.plot(out, formats=formats)
    except OSError as err:
        raise _out_error(out, err) from None


def _make_out(out: Path) -> None:
    """Create ``--out`` (before the sweep runs, so that a bad path costs nothing)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _out_error(out, err) from None


def _out_error(out: Path, err: OSError):
    from polyc.errors import ArgumentError

    name = err.filename if err.filename and str(err.filename) != str(out) else None
    what = f"{out} ({name})" if name else str(out)
    if isinstance(err, FileExistsError) or (out.exists() and not out.is_dir()):
        why = "it is a file, not a directory"
    elif isinstance(err, PermissionError):
        why = "permission is denied"
    else:
        why = f"the system reports '{err.strerror or err}'"
    return ArgumentError(
        f"sweep: cannot write the results to {what} because {why}. Pass --out a "
        "directory you can write to."
    )


def check_op_text(text: str, command: str) -> None:
    """Refuse, before any work, an op spec the command line cannot run: an unknown
    op or argument (see :func:`polyc.sweep.spec.op_spec`), or a size given as a
    word, which would make a symbolic size that random inputs cannot fill.

    Raises:
        ArgumentError: naming the op text and the argument.
    """
    from polyc.errors import ArgumentError
    from polyc.studies.sweep.spec import op_signature, op_spec, parse_op

    op_spec(text)
    _, name, args, kwargs = parse_op(text)
    sig = op_signature(name)
    try:
        bound = sig.bind_partial(*args, **kwargs).arguments
    except TypeError:  # op_spec let it through: the op itself takes **kwargs
        return
    for key, value in bound.items():
        param = sig.parameters[key]
        if param.default is param.empty and isinstance(value, str):
            shape = "Sequence" in str(param.annotation)
            want = "a shape such as 1x8x16x16" if shape else "an integer such as 64"
            raise ArgumentError(
                f"{command}: op {text!r} gives {key} the word {value!r} because "
                f"{key} must be {want} (a word would be a symbolic size, which "
                f"{command} cannot fill with inputs). Write {key}="
                f"{'1x8x16x16' if shape else '64'}."
            )


def run_explain(args) -> int:
    """``polyc explain``: 0, or 2 with the error message (bad arguments, or an op
    that fails to compile or run)."""
    from polyc.errors import PolycError
    from polyc.studies.explain import explain
    from polyc.studies.report.targets import is_file_target

    try:
        if not is_file_target(args.op):
            check_op_text(args.op, "explain")
        if args.trace:
            _check_writable(args.trace, "--trace")
        text = explain(
            args.op,
            args.config,
            args.schedule,
            run=not args.no_run,
            trace=args.trace,
            inputs=args.inputs,
            relations=args.relations,
            full=args.full,
            input_shapes=args.input_shape,
        )
    except PolycError as err:
        print(f"polyc: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0


def _check_writable(name: str, flag: str) -> None:
    """Refuse an output path whose directory does not exist (before the run)."""
    from polyc.errors import ArgumentError

    path = Path(name)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        why = "it is a directory"
    elif not parent.is_dir():
        why = f"its directory {parent} does not exist"
    else:
        return
    raise ArgumentError(
        f"explain: cannot write {flag} {name} because {why}. Pass a file path in "
        "an existing directory."
    )
