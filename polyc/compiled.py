"""A kernel compiled for the simulated accelerator (what ``polyc.compile`` returns)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from polyc.errors import ArgumentError
from polyc.ir import tree
from polyc.ir.kernel import Kernel
from polyc.stages import Debug


class Compiled:
    """A kernel compiled for one hardware description.

    ``run(**inputs)`` simulates it and returns ``(outputs, report)``; ``print``
    shows the config, how each statement is mapped, and the last run's cost. With
    ``verify`` set, every run is checked against the interpreter.
    """

    def __init__(
        self,
        kernel: Kernel,
        spec,
        module,
        trace_limit: int,
        choice=None,
        verify: bool = False,
        debug: Debug | None = None,
        stage_seconds: dict[str, float] | None = None,
    ):
        self._kernel = kernel  # or a function that loads it (a reused compile)
        self.verify = bool(verify)
        self.spec = spec
        self.module = module
        self.trace_limit = trace_limit
        self.choice = choice  # the accelerator scheduler's explanation, if it ran
        self.last_report = None
        self.debug = debug if debug is not None else Debug()  # POLYC_DEBUG at compile
        #: wall seconds by compile stage (see :mod:`polyc.stages`), runs included
        self.stage_seconds: dict[str, float] = dict(stage_seconds or {})

    @property
    def name(self) -> str:
        """The kernel's name (without loading a reused compile's scheduled kernel)."""
        return self.module.kernel.name

    @property
    def kernel(self) -> Kernel:
        """The scheduled kernel (loaded on first use for a reused compile)."""
        if not isinstance(self._kernel, Kernel):
            self._kernel = self._kernel()
        return self._kernel

    @property
    def c_source(self) -> str:
        return self.module.c_source

    @property
    def mode(self) -> str:
        return self.module.mode

    def run(
        self,
        inputs: Mapping[str, object] | None = None,
        *,
        functional: bool = True,
        **kwargs,
    ):
        """Simulate on the config: returns ``(outputs: {name: array}, report)``.

        ``functional=False`` runs timing-only: the same generated program and
        timing model with no data moved or computed, so the report's cycles,
        bytes and energy are exactly those of the functional run, at a fraction
        of its cost; outputs are ``{}`` and missing inputs are taken as zeros.
        (An input named ``functional`` goes in ``inputs``.)

        Raises:
            InputError: for missing, unknown or mis-shaped inputs.
            SimulationError: when the run stops on a violation.
            VerificationError: with ``verify`` on, when an output differs from the
                interpreter's (naming the array, the element and both values).
            ArgumentError: ``functional=False`` on a compile made with ``verify``.
        """
        from polyc import stages

        return stages.run(self, {**(inputs or {}), **kwargs}, functional)

    def __call__(self, inputs: Mapping[str, object] | None = None, **kwargs):
        """The outputs alone (like a host module)."""
        return self.run(inputs, **kwargs)[0]

    def __str__(self) -> str:
        k = self.kernel
        placed = self.mode != "DRAM-direct"
        lines = [
            f"polyc.compile: {k.name} for {self.spec}",
            f"  mode: {self.mode}"
            + (
                " (no placement: every statement runs on the scalar core, reading "
                "and writing DRAM)"
                if not placed
                else " (buffers on chip, DMA, engines from the schedule's marks)"
            ),
            f"  checks: {'on' if self.module.checks else 'compiled out'}; "
            f"{len(self.c_source.splitlines())} lines of C"
            + ("; every run verified against the interpreter" if self.verify else ""),
        ]
        notes = self.fallbacks()
        if notes:
            lines.append(f"  fallbacks ({len(notes)}):")
            lines.extend(f"    {n}" for n in notes)
        if placed:
            lines.extend(self._layers())
            lines.extend(self._buffers())
        from polyc.ir.treeview import tree_text

        lines.append("  schedule tree:")
        lines.extend(f"    {line}" for line in tree_text(k.schedule, 60).splitlines())
        lines.append("  statements:")
        r = self.last_report
        per = {s.name: s for s in r.statements} if r else {}
        engines = _engines(k) if placed else {}
        for s in k.statements:
            cost = per.get(s.name)
            where = engines.get(s.name)
            if where is None:
                where = (
                    f"scalar, {cost.cycles_per_instance} cycles x {cost.instances:,}"
                    if cost
                    else "scalar"
                )
            lines.append(f"    {s.name}: {s.target} = {s.body}   [{where}]")
        if r is None:
            lines.append("  not run yet: compiled.run(**inputs) simulates it")
        else:
            predicted = ""
            if self.choice is not None and self.choice.predicted_cycles:
                p = self.choice.predicted_cycles
                predicted = f" (predicted {p:,.0f}: {p / r.cycles:.2f}x the simulation)"
            lines.append(
                f"  last run: {r.cycles:,} cycles{predicted}, roofline "
                f"{r.roofline_cycles:,} ({r.roofline.bound}-bound), ratio "
                f"{r.ratio:,.2f}x, engine bound {r.engine_bound_cycles:,} "
                f"({r.engine_bound.bound}-bound), ratio {r.engine_ratio:,.2f}x, "
                f"DRAM {r.dram_bytes:,} B, energy "
                f"{r.energy_pj / 1e6:,.3f} uJ"
            )
        return "\n".join(lines)

    def report_html(self, path=None, report=None) -> str:
        """The run (default: the last) as one self-contained HTML page, written
        to ``path`` when given (see :mod:`polyc.studies.report.html`); returns
        the text.

        Raises:
            ArgumentError: when there is no run to report on.
        """
        from polyc.studies.report.html import report_html

        return report_html(self, report, path)

    def write_trace(self, path, report=None):
        """Write the run's (default: the last) Chrome trace-event JSON to
        ``path`` with its events named by the model's layers (the rows of
        ``model_report``; each event keeps its statement or copy label as the
        argument ``label``); returns the path.

        Raises:
            ArgumentError: when there is no run to write.
        """
        from polyc.studies.report.timeline import write_trace

        report = report if report is not None else self.last_report
        if report is None:
            raise ArgumentError(
                "write_trace: there is no run to write because compiled.run() was "
                "not called. Run it first, or pass its report."
            )
        return write_trace(self, report, path)

    def fallbacks(self) -> list[str]:
        """Every place where the scheduler did less than the hardware allows, with
        the reason and the fix: layers that run DRAM-direct, layers fused less
        than the program allows, statements left on the scalar core."""
        choice = self.choice
        if choice is None:
            return []
        out = [f"whole kernel: {choice.note}"] if choice.note else []
        for lc in choice.layers:
            name = lc.layer.name
            if lc.candidate is None and lc.extra_cycles:
                continue  # a gather's or a prefetch's DMA: what the hardware allows
            if lc.candidate is None:
                out.append(
                    f"{name}: DRAM-direct on the scalar core because {lc.note}. "
                    f"{_fix(lc.note)}"
                )
                continue
            if lc.split_from:
                out.append(
                    f"{name}: fused less than the program allows, because "
                    f"{lc.split_from}"
                )
            st = lc.candidate.structure
            for stmt in lc.layer.stmts:
                if st.engine_of(stmt.name) == "scalar":
                    out.append(
                        f"{name}: {stmt.name} runs on the scalar core because its "
                        "instances depend on each other inside a tile (neither the "
                        "MAC array nor the vector unit can run it)"
                    )
                elif (dt := self._unsupported_mac_dtype(stmt)) is not None:
                    have = ", ".join(self.spec.mac_array.dtypes)
                    out.append(
                        f"{name}: {stmt.name} is a {dt} contraction but runs on the "
                        f"vector unit because the MAC array of {self.spec.name} "
                        f"lists no {dt} rate. Use a config whose [mac_array.dtypes] "
                        f"has {dt}, or cast the operands to one it has ({have})"
                    )
        return out

    def _unsupported_mac_dtype(self, stmt) -> str | None:
        """The operand dtype of contraction ``stmt`` when the MAC array lacks it."""
        from schedules.accel.tensorize import contraction

        found = contraction(stmt)
        if found is None or self.spec.mac_array.peak_macs_per_cycle(found.operand):
            return None
        return found.operand

    def _layers(self) -> list[str]:
        """The scheduler's choice per layer: tiles, loop order, predicted cost."""
        if self.choice is None:
            return ["  schedule: given by hand (schedule=...)"]
        out = [f"  layers (the accelerator scheduler's choice for {self.spec.name}):"]
        for lc in self.choice.layers:
            cand = lc.candidate
            head = f"    {lc.layer.name}: "
            if cand is None and lc.extra_cycles:  # a gather's or a prefetch's DMA
                out.append(head + f"{lc.note}; predicted {lc.extra_cycles:,.0f} cycles")
                continue
            if cand is None:
                out.append(
                    head + "DRAM-direct (see fallbacks); predicted "
                    f"{lc.direct_cycles:,.0f} cycles"
                )
                continue
            first = lc.layer.stmts[0]
            tiles = [f"{var.label(lc.layer)}={size}" for var, size in cand.sizes]
            st = cand.structure
            order = ", ".join(first.iterators[p] for p in st.order) or "-"
            busy = ", ".join(f"{e} {v:,.0f}" for e, v in cand.engines)
            if lc.split_from:
                head += "(fused less: see fallbacks) "
            out.append(
                head + f"tiles {' '.join(tiles) or '(whole)'}; tile loops {order}; "
                f"streamed operands in {st.stream_slots} slots; predicted "
                f"{cand.cycles:,.0f} cycles ({busy}); {lc.tried} candidates fit"
            )
            if cand.staged:
                from schedules.accel.space import upper_level

                top = self.spec.memory[upper_level(self.spec)].name
                out.append(
                    f"      staged whole in {top} (read from DRAM once, tiles "
                    f"copied from there): {', '.join(cand.staged)}"
                )
            if st.ahead:
                loop = first.iterators[st.order[-1]]
                out.append(
                    f"      software pipelined: {', '.join(st.ahead)} issued one "
                    f"tile of {loop} ahead of the rest (when {loop} is tiled)"
                )
            if lc.note:  # why the layer is grouped as it is (an attention's choice)
                out.append(f"      {lc.note}")
            names = {s.name for s in lc.layer.stmts}
            for note in getattr(self.choice, "shared", ()):  # split across engines
                if set(note.split(" ", 1)[0].split("+")) <= names:
                    out.append(f"      {note}")
            if lc.formula:
                out.append(f"      {lc.formula}")
        return out

    def _buffers(self) -> list[str]:
        from polyc.ir import marks as pm

        bufs, allocs = [], {}
        for text in tree.marks(self.kernel.schedule):
            kind = pm.kind(text)
            if kind == "buffer":
                bufs.append(pm.BufferMark.parse(text))
            elif kind == "scope":
                for a in pm.ScopeMark.parse(text).allocations:
                    allocs[a.name] = a
        if not bufs:
            return []
        out = ["  buffers per level:"]
        for level in sorted({b.level_index for b in bufs}):
            mine = [b for b in bufs if b.level_index == level]
            cap = self.spec.memory[level].capacity_bytes
            out.append(f"    {mine[0].level} ({cap:,} B):")
            for b in mine:
                a = allocs.get(b.name)
                where = f" at {a.offset:,}" if a else ""
                shape = "x".join(map(str, b.extent))
                copies = "+".join(
                    w for w, on in (("in", b.copy_in), ("out", b.copy_out)) if on
                )
                out.append(
                    f"      {b.name}: {b.array}[{shape}], {b.slots} x "
                    f"{b.slot_bytes:,} B{where}, copy {copies or 'none'}"
                )
        return out

    def __repr__(self) -> str:
        return f"<Compiled {self.name} for {self.spec.name} ({self.mode})>"


def _fix(note: str) -> str:
    """The fix a user can make for a layer's DRAM-direct reason."""
    if "fits" in note:
        return (
            "Give the config a larger on-chip level, or schedule the layer by hand "
            "(polyc.compile(kernel, config, schedule=...))."
        )
    return "Schedule it by hand (polyc.compile(kernel, config, schedule=...))."


def _engines(kernel: Kernel) -> dict[str, str]:
    """How the schedule's marks map statements to engines."""
    from polyc.ir import marks as pm

    out = {}
    for text in tree.marks(kernel.schedule):
        kind = pm.kind(text)
        if kind == "tensorize":
            t = pm.TensorizeMark.parse(text)
            groups = " ".join(
                f"{r}={'*'.join(g) or '1'}" for r, g in zip("mnk", (t.m, t.n, t.k))
            )
            out[t.stmt] = (
                f"MAC array: {groups}"
                + (f", loops {','.join(t.loops)}" if t.loops else "")
                + (", operands exchanged (C^T = B^T A^T)" if t.exchange else "")
            )
            if t.init:
                out[t.init] = f"folded into the first MAC calls of {t.stmt}"
        elif kind == "gather":  # "@gather S3"
            out[text.split()[1]] = "DMA: indirect (gather), one call per run of rows"
        elif kind == "prefetch":  # "@prefetch PF0"
            out[text.split()[1]] = "DMA: the weight into its home in chunks, ahead"
        elif kind == "vector":
            vm = pm.VectorMark.parse(text)
            for s in vm.stmts:
                out[s] = (
                    "MAC array output path: requantized after the last K step"
                    if vm.unit == "mac"
                    else "vector unit, one operation per tile"
                )
    return out


def same_program(kernel: Kernel, schedule: Kernel) -> None:
    """Refuse a ``schedule`` kernel that is not ``kernel``'s program.

    Raises:
        ArgumentError: naming what differs.
    """
    if not isinstance(schedule, Kernel):
        raise ArgumentError(
            f"compile: schedule is a {type(schedule).__name__} because it was passed "
            "as is. Pass a Kernel obtained by transforming the kernel (e.g. "
            "schedules.tile(kernel, ...))."
        )
    mine, theirs = _program(kernel), _program(schedule)
    if mine != theirs:
        diff = next(
            (f"{b} vs {a}" for a, b in zip(mine, theirs) if a != b),
            f"{len(theirs)} vs {len(mine)} statements and arrays",
        )
        raise ArgumentError(
            f"compile: schedule is kernel {schedule.name!r}, not a schedule of "
            f"{kernel.name!r}, because their statements differ ({diff}). Pass a "
            "transformed version of the same kernel."
        )


def _program(kernel: Kernel) -> list[str]:
    """Statements with their domains, and arrays, as text."""
    out = [f"{s}; {s.domain}" for s in kernel.original.statements]
    # where an array lives (its home on chip) is the schedule's choice
    return out + [
        str(replace(a, home=0, home_offset=0)) for a in kernel.arrays.values()
    ]
