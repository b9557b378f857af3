"""A kernel compiled for the simulated accelerator (what ``polyc.compile`` returns)."""

from __future__ import annotations

from collections.abc import Mapping

from polyc.errors import ArgumentError
from polyc.ir import Kernel


class Compiled:
    """A kernel compiled for one hardware description.

    ``run(**inputs)`` simulates it and returns ``(outputs, report)``; ``print``
    shows the config, how each statement is mapped, and the last run's cost.
    """

    def __init__(self, kernel: Kernel, spec, module, trace_limit: int, choice=None):
        self.kernel = kernel
        self.spec = spec
        self.module = module
        self.trace_limit = trace_limit
        self.choice = choice  # the accelerator scheduler's explanation, if it ran
        self.last_report = None

    @property
    def c_source(self) -> str:
        return self.module.c_source

    @property
    def mode(self) -> str:
        return self.module.mode

    def run(self, inputs: Mapping[str, object] | None = None, **kwargs):
        """Simulate on the config: returns ``(outputs: {name: array}, report)``.

        Raises:
            InputError: for missing, unknown or mis-shaped inputs.
            SimulationError: when the run stops on a violation.
        """
        outputs, report = self.module.run(
            self.spec, {**(inputs or {}), **kwargs}, self.trace_limit
        )
        self.last_report = report
        return outputs, report

    def __call__(self, inputs: Mapping[str, object] | None = None, **kwargs):
        """The outputs alone (like a host module)."""
        return self.run(inputs, **kwargs)[0]

    def __str__(self) -> str:
        k = self.kernel
        lines = [
            f"polyc.compile: {k.name} for {self.spec}",
            f"  mode: {self.mode}"
            + (
                " (no placement: every statement runs on the scalar core, reading "
                "and writing DRAM)"
                if self.mode == "DRAM-direct"
                else ""
            ),
            f"  checks: {'on' if self.module.checks else 'compiled out'}; "
            f"{len(self.c_source.splitlines())} lines of C",
            "  statements:",
        ]
        r = self.last_report
        per = {s.name: s for s in r.statements} if r else {}
        for s in k.statements:
            cost = per.get(s.name)
            where = (
                f"scalar, {cost.cycles_per_instance} cycles x {cost.instances:,}"
                if cost
                else "scalar"
            )
            lines.append(f"    {s.name}: {s.target} = {s.body}   [{where}]")
        if r is None:
            lines.append("  not run yet: compiled.run(**inputs) simulates it")
        else:
            lines.append(
                f"  last run: {r.cycles:,} cycles, roofline {r.roofline_cycles:,} "
                f"({r.roofline.bound}-bound), ratio {r.ratio:,.2f}x, "
                f"DRAM {r.dram_bytes:,} B, energy {r.energy_pj / 1e6:,.3f} uJ"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Compiled {self.kernel.name} for {self.spec.name} ({self.mode})>"


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
    return out + [str(a) for a in kernel.arrays.values()]
