"""``polyc report`` (one HTML page, and optionally a timeline image and a trace named
by layer) and ``polyc diff`` (two schedules of one kernel side by side)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

_TARGET_HELP = (
    "an op spec (matmul:M=64,N=64,K=64; see polyc explain --help), a model file "
    "model.py:ClassName (with --input-shape), an exported program.pt2, or a Python "
    "file defining a Kernel (kernels.py, kernels.py:name)"
)

_REPORT_EPILOG = """\
examples:
  polyc report conv2d:input=1x8x16x16,weight=16x8x3x3,padding=1 --config tiny \\
               -o conv.html --timeline conv.svg
  polyc report model.py:Net --input-shape 1x3x64x64 --config edge-npu -o net.html

The page is one file (inline CSS, JavaScript and SVG; nothing is fetched): the
collapsible schedule tree linked to the loop nest and the C, the memory map per
level with its peak, DRAM traffic per tensor, the engine timeline named by layer,
per-layer cycles against both bounds and the prediction, and the roofline.
Exit status: 0, or 2 with the error on stderr.
"""

_DIFF_EPILOG = """\
examples:
  polyc diff none default --kernel matmul:M=64,N=64,K=64 --config tiny
  polyc diff a.yaml b.yaml --kernel kernels.py:gemm --config edge-npu

Lines only on the left are marked <, only on the right >, changed |; figures
that differ are marked * with the ratio right / left. Exit status: 0, or 2.
"""


def add_parsers(sub) -> None:
    """Add the ``report`` and ``diff`` subcommands to ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    r = sub.add_parser(
        "report",
        help="one self-contained HTML page of a compiled kernel or model's run",
        description=textwrap.fill(
            "Compile and simulate a kernel or model once and write the inspection "
            "page (see the examples); optionally a Gantt image of the engines and "
            "a Perfetto trace whose events are named by layer.",
            80,
        ),
        epilog=_REPORT_EPILOG,
        formatter_class=fmt,
    )
    r.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    _common(r)
    r.add_argument(
        "-o", "--out", required=True, metavar="HTML", help="the page to write"
    )
    r.add_argument(
        "--timeline", metavar="IMAGE", help="also write a Gantt chart (.png or .svg)"
    )
    r.add_argument(
        "--trace", metavar="JSON", help="also write the trace (Perfetto), by layer"
    )
    r.add_argument(
        "--schedule",
        default="default",
        metavar="S",
        help="default, none, auto or an isl YAML file (default: default)",
    )

    d = sub.add_parser(
        "diff",
        help="two schedules of one kernel side by side: trees, loop nests, cycles",
        description=textwrap.fill(
            "Compile and simulate one kernel under two schedules and print them "
            "side by side: figures (simulated and predicted cycles, DRAM bytes, "
            "energy, ratios to both bounds), the compact trees and the loop nests, "
            "with the differences marked.",
            80,
        ),
        epilog=_DIFF_EPILOG,
        formatter_class=fmt,
    )
    d.add_argument("a", metavar="A", help="default, none, auto or an isl YAML file")
    d.add_argument("b", metavar="B", help="the same, for the right side")
    d.add_argument("--kernel", required=True, metavar="TARGET", help=_TARGET_HELP)
    _common(d)
    d.add_argument(
        "--width", type=int, default=64, help="characters per side (default 64)"
    )


def _common(p) -> None:
    p.add_argument(
        "--config",
        default="edge-npu",
        metavar="NAME",
        help="hardware config name or TOML path (default: edge-npu)",
    )
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="AxBxC",
        help="an input shape of a model target, once per positional input",
    )
    p.add_argument(
        "--inputs", choices=["random", "zeros"], default="random", help="input data"
    )


def run_report(args) -> int:
    """``polyc report``: 0, or 2 with the error message."""
    from polyc.errors import PolycError

    try:
        for flag, path in (
            ("-o", args.out),
            ("--timeline", args.timeline),
            ("--trace", args.trace),
        ):
            if path:
                _check_dir(path, flag)
        text = write_report(
            args.target,
            args.out,
            config=args.config,
            schedule=args.schedule,
            inputs=args.inputs,
            input_shapes=args.input_shape,
            timeline=args.timeline,
            trace=args.trace,
        )
    except PolycError as err:
        print(f"polyc: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0


def write_report(
    target,
    out,
    *,
    config="edge-npu",
    schedule="default",
    inputs="random",
    input_shapes=(),
    timeline=None,
    trace=None,
    trace_limit: int = 1 << 20,
) -> str:
    """Compile and run ``target``, write its page to ``out`` (and the timeline
    image and trace when given); returns what was written, one line per file.

    Raises:
        PolycError: what loading, compiling or running raises.
    """
    import zlib

    import polyc
    from accelerator import load_config
    from polyc.studies.explain import target as load
    from polyc.studies.report.html import report_html
    from polyc.studies.report.timeline import save_timeline, write_trace
    from polyc.studies.sweep.spec import schedule_choice
    from polyc.studies.sweep.task import make_inputs

    label, kernel = load(target, input_shapes)
    choice = schedule_choice(schedule)
    hw = load_config(config)
    if timeline:
        _check_image(timeline)
    compiled = polyc.compile(
        kernel, config=hw, schedule=choice.apply(kernel), trace_limit=trace_limit
    )
    data = make_inputs(kernel, inputs, seed=zlib.crc32(label.encode()))
    _, report = compiled.run(data)
    page = report_html(compiled, report, out, title=f"{label} on {hw.name}")
    lines = [
        f"polyc report: {label} on {hw.name}: {report.cycles:,} cycles; wrote {out} "
        f"({len(page.encode()):,} bytes)"
    ]
    if timeline:
        lines.append(f"wrote {save_timeline(compiled, report, timeline)}")
    if trace:
        lines.append(f"wrote {write_trace(compiled, report, trace)} (events by layer)")
    return "\n".join(lines)


def _check_image(path) -> None:
    from polyc.errors import ArgumentError

    if Path(path).suffix.lower() not in (".png", ".svg"):
        raise ArgumentError(
            f"report: --timeline {path} is not an image name because only .png "
            "and .svg are written. Name the file .png or .svg."
        )


def _check_dir(path, flag: str) -> None:
    from polyc.errors import ArgumentError

    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise ArgumentError(
            f"report: {flag} {path} cannot be written because the directory "
            f"{parent} does not exist. Create it or write elsewhere."
        )


def run_diff(args) -> int:
    """``polyc diff``: 0, or 2 with the error message."""
    from polyc.errors import PolycError
    from polyc.studies.report.diff import diff_schedules

    try:
        d = diff_schedules(
            args.kernel,
            args.a,
            args.b,
            config=args.config,
            inputs=args.inputs,
            input_shapes=args.input_shape,
        )
    except PolycError as err:
        print(f"polyc: {err}", file=sys.stderr)
        return 2
    print(d.text(args.width))
    return 0
