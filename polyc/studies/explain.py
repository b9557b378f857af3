"""``polyc.explain``: one op on one config, shown the way an engineer inspects it.

By default the text is short: the compiled schedule tree in the compact view
(:mod:`polyc.ir.treeview`: one line per node, buffers, tiles and engines) and, after
a simulated run, three lines: cycles against the prediction and both bounds, DRAM
bytes and energy, each engine's busy share. ``full`` adds the kernel (arrays,
statements, loop nest, history), a summary of the exact dependences (kind, array,
source and sink statements, distance vectors), how the compiled kernel is mapped and
the report's tables; ``relations`` adds the raw isl (the schedule tree's YAML, the
dependence relations). A Perfetto trace of the run, its events named by layer, is
written on request.
"""

from __future__ import annotations

from pathlib import Path

import islpy as isl

from polyc.ir.kernel import Kernel


def explain(
    op: object,
    config="edge-npu",
    schedule: object = "default",
    *,
    run: bool = True,
    trace: str | Path | None = None,
    inputs="random",
    relations: bool = False,
    full: bool = False,
    input_shapes=(),
) -> str:
    """Explain ``op`` compiled for ``config`` with ``schedule``; returns the text.

    Args:
        op: an op spec (``"matmul:M=64,N=64,K=64"``, ``("matmul", {...})``) or a
            Kernel; see :mod:`polyc.sweep.spec`.
        config: a shipped config name, a TOML path or a Spec.
        schedule: ``"default"``, ``"none"``, ``"auto"``, a YAML file, a scheduled
            Kernel or a function ``kernel -> Kernel``.
        run: simulate once and append the report (otherwise stop after compiling).
        trace: write the run's Chrome trace-event JSON (Perfetto) to this path.
        inputs: ``"random"``, ``"zeros"`` or a function ``kernel -> {name: array}``.
        relations: also print the raw isl: the schedule tree's YAML and the exact
            dependence relations (long for convs); implies ``full``.
        input_shapes: the input shapes of a model file target (``model.py:Net``).
        full: also print the kernel (statements, loop nest, history), the
            dependence summary, the compile's mapping and the report's tables.

    Raises:
        PolycError: whatever building, scheduling, compiling or running raises
            (an unknown op is an ``ArgumentError``, a bad config a ``ConfigError``).
    """
    import zlib

    import polyc
    from accelerator import load_config
    from polyc.ir.treeview import tree_text
    from polyc.studies.sweep.spec import schedule_choice
    from polyc.studies.sweep.task import make_inputs

    label, kernel = target(op, input_shapes)
    choice = schedule_choice(schedule)
    hw = load_config(config)
    compiled = polyc.compile(kernel, config=hw, schedule=choice.apply(kernel))
    chosen = compiled.kernel
    parts = [
        f"polyc explain: {label} on {hw.name}, schedule {choice.label}",
        _section("schedule tree", tree_text(chosen.schedule)),
    ]
    if full or relations:
        parts.append(_section("kernel", str(chosen)))
    if relations:
        parts.append(
            _section("schedule tree (isl YAML)", schedule_yaml(chosen.schedule))
        )
    if full or relations:
        parts.append(_section("dependences", dependence_summary(kernel, relations)))
    report = None
    if run:
        data = make_inputs(kernel, inputs, seed=zlib.crc32(label.encode()))
        _, report = compiled.run(data)
    if full or relations:
        parts.append(_section("compiled", str(compiled)))
        if report is not None:
            parts.append(_section("report", str(report)))
    elif report is not None:
        parts.append(_section("run", run_summary(compiled, report)))
    if report is not None and trace is not None:
        from polyc.studies.report.timeline import write_trace

        path = write_trace(compiled, report, trace)
        dropped = (
            f", {report.events_dropped:,} more dropped (raise trace_limit)"
            if report.events_dropped
            else ""
        )
        parts.append(
            f"trace: wrote {path} ({len(report.events):,} events{dropped}, named by "
            "layer); open it in https://ui.perfetto.dev"
        )
    return "\n\n".join(parts)


def target(op, input_shapes=()) -> tuple[str, Kernel]:
    """An op spec, a Kernel, or a model/kernel file (see
    :func:`polyc.studies.report.targets.load_target`), as ``(label, kernel)``."""
    from polyc.studies.report.targets import is_file_target, load_target

    if isinstance(op, Kernel):
        return op.name, op
    if isinstance(op, str) and is_file_target(op):
        return op, load_target(op, input_shapes)
    from polyc.studies.sweep.spec import op_spec

    _, spec = op_spec(op)
    return spec.text, spec.build()


def run_summary(compiled, report) -> str:
    """Three lines: cycles against prediction and both bounds, DRAM bytes and
    energy, and each engine's busy share."""
    r = report
    lines = [f"  {r.cycles:,} cycles"]
    choice = compiled.choice
    if choice is not None and choice.predicted_cycles:
        lines[0] += f" (predicted {choice.predicted_cycles:,.0f})"
    if r.roofline is not None:
        lines[0] += (
            f"; roofline {r.roofline_cycles:,} ({r.roofline.bound}-bound, "
            f"{r.ratio:,.2f}x)"
        )
    if r.engine_bound is not None:
        lines[0] += f"; engine bound {r.engine_bound_cycles:,} ({r.engine_ratio:,.2f}x)"
    unavoidable = (
        f" (unavoidable {r.roofline.min_dram_bytes:,})"
        if r.roofline is not None
        else ""
    )
    lines.append(
        f"  DRAM {r.dram_bytes:,} B{unavoidable}; energy {r.energy_pj / 1e6:,.3f} uJ; "
        f"{len(r.events):,} trace events"
    )
    busy = ", ".join(f"{e.name} {e.utilization:.0%}" for e in r.engines)
    lines.append(f"  busy: {busy}")
    return "\n".join(lines)


def _section(title: str, body: str) -> str:
    return f"== {title} ==\n{body.rstrip()}"


def schedule_yaml(schedule: isl.Schedule) -> str:
    """The schedule tree in isl's block-style YAML (what schedule files hold)."""
    printer = isl.Printer.to_str(schedule.get_ctx())
    printer = printer.set_yaml_style(isl.yaml_style.BLOCK)
    return printer.print_schedule(schedule).get_str()


def dependence_summary(kernel: Kernel, relations: bool = False) -> str:
    """One line per dependence (kind, array, source -> sink statement, and within a
    statement its distance vector), the live-in and live-out arrays; with
    ``relations``, the exact isl relations after them."""
    deps = kernel.deps
    iterators = {s.name: tuple(s.iterators) for s in kernel.statements}
    lines = []
    for kind in ("flow", "anti", "output"):
        for array, rel in sorted(deps.by_array(kind).items()):
            maps: list[isl.Map] = []
            rel.foreach_map(maps.append)
            for m in sorted(maps, key=_pair):
                src, dst = _pair(m)
                lines.append(
                    f"  {kind:<7} {array:<10} {src} -> {dst}{_distance(m, iterators)}"
                )
    if not lines:
        lines.append("  none: every statement instance is independent")
    live_in = sorted(_names(deps.live_in))
    live_out = sorted(_names(deps.live_out))
    lines.append(f"  live-in: {', '.join(live_in) or '(none)'}")
    lines.append(f"  live-out: {', '.join(live_out) or '(none)'}")
    if relations:
        lines += ["", str(deps)]
    return "\n".join(lines)


def _pair(m: isl.Map) -> tuple[str, str]:
    return (
        m.get_tuple_name(isl.dim_type.in_) or "",
        m.get_tuple_name(isl.dim_type.out) or "",
    )


def _distance(m: isl.Map, iterators: dict[str, tuple[str, ...]]) -> str:
    """``"  distance (0, 0, *) over (i, j, k)"`` when source and sink are one
    statement: each component's constant value, or ``*`` where it varies (the loops
    that carry the dependence); ``""`` between two statements."""
    src, dst = _pair(m)
    n = m.dim(isl.dim_type.in_)
    if src != dst or n != m.dim(isl.dim_type.out):
        return ""
    deltas = m.deltas()
    values = []
    for i in range(n):
        one = deltas.project_out(isl.dim_type.set, i + 1, n - i - 1)
        one = one.project_out(isl.dim_type.set, 0, i)
        if one.is_singleton():
            point = one.sample_point()
            values.append(
                str(point.get_coordinate_val(isl.dim_type.set, 0).to_python())
            )
        else:
            values.append("*")
    names = iterators.get(src)
    over = f" over ({', '.join(names)})" if names and len(names) == n else ""
    return f"  distance ({', '.join(values)}){over}"


def _names(uset: isl.UnionSet) -> set[str]:
    out: set[str] = set()
    uset.foreach_set(lambda s: out.add(s.get_tuple_name()))
    return out
