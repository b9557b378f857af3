"""Two schedules of one kernel side by side: the compact trees, the loop nests, and
predicted and simulated cycles, DRAM bytes and energy, differences marked::

    d = diff_schedules("matmul:M=64,N=64,K=64", "none", "default", config="tiny")
    print(d.text())

A schedule is what ``polyc explain --schedule`` takes: ``none`` (the kernel as
written), ``default`` (what ``polyc.compile`` chooses), ``auto`` (schedules.auto),
an isl YAML file (``schedules.to_yaml`` writes one), a scheduled Kernel or a
function ``kernel -> Kernel``. Both run on the same inputs.

In the text, a line of one side that the other lacks is marked ``<`` (only on
the left) or ``>`` (only on the right), a changed line ``|``; a figure that
differs is marked ``*`` with the ratio right / left.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Side:
    """One schedule's compile and run."""

    label: str
    compiled: object
    report: object
    tree: tuple[str, ...]
    nest: tuple[str, ...]

    @property
    def predicted(self) -> float | None:
        choice = self.compiled.choice
        return choice.predicted_cycles if choice is not None else None

    def figures(self) -> dict[str, float | None]:
        r = self.report
        return {
            "simulated cycles": r.cycles,
            "predicted cycles": self.predicted,
            "DRAM bytes": r.dram_bytes,
            "energy uJ": r.energy_pj / 1e6,
            "x roofline": r.ratio,
            "x engine bound": r.engine_ratio,
        }


@dataclass(frozen=True)
class ScheduleDiff:
    kernel: str
    config: str
    left: Side
    right: Side

    def figures(self) -> list[tuple[str, float | None, float | None, bool]]:
        """``(name, left, right, differs)`` per figure."""
        a, b = self.left.figures(), self.right.figures()
        return [(k, a[k], b[k], _differs(a[k], b[k])) for k in a]

    def text(self, width: int = 64) -> str:
        """The side-by-side text (see the module docstring)."""
        head = (
            f"polyc diff: {self.kernel} on {self.config}: "
            f"{self.left.label} (left) vs {self.right.label} (right)"
        )
        parts = [head, "", "== figures =="]
        for name, a, b, differs in self.figures():
            ratio = f"  {b / a:.3g}x" if differs and a and b is not None else ""
            parts.append(
                f"{'*' if differs else ' '} {name:<18} {_fmt(a):>16} {_fmt(b):>16}"
                f"{ratio}"
            )
        parts += ["", "== schedule tree =="]
        parts += side_by_side(self.left.tree, self.right.tree, width)
        parts += ["", "== loop nest =="]
        parts += side_by_side(self.left.nest, self.right.nest, width)
        return "\n".join(parts)


def _differs(a, b) -> bool:
    if a is None or b is None:
        return a is not b
    return abs(a - b) > 1e-9 * max(abs(a), abs(b), 1.0)


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value < 1000:
        return f"{value:,.3f}"
    return f"{value:,.0f}"


def side_by_side(a, b, width: int = 64) -> list[str]:
    """Lines of ``a`` and ``b`` aligned by difflib, with a marker column:
    blank (same), ``|`` (changed), ``<`` (left only), ``>`` (right only)."""
    out = []
    matcher = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        left, right = list(a[i1:i2]), list(b[j1:j2])
        n = max(len(left), len(right))
        for k in range(n):
            x = left[k] if k < len(left) else ""
            y = right[k] if k < len(right) else ""
            if op == "equal":
                mark = " "
            elif x and y:
                mark = "|"
            else:
                mark = "<" if x else ">"
            out.append(f"{_cut(x, width):<{width}} {mark} {_cut(y, width)}")
    return out


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def diff_schedules(
    op, a, b, config="tiny", *, inputs="random", input_shapes=(), trace_limit=None
) -> ScheduleDiff:
    """Compile and run ``op`` under schedules ``a`` and ``b`` (see the module
    docstring) on ``config``; returns the :class:`ScheduleDiff`.

    Raises:
        PolycError: what loading the op, either schedule, compiling or running
            raises (a schedule file that does not fit the kernel: ScheduleError).
    """
    import zlib

    from accelerator import load_config
    from polyc.studies.explain import target
    from polyc.studies.sweep.task import make_inputs

    label, kernel = target(op, input_shapes)
    hw = load_config(config)
    data = make_inputs(kernel, inputs, seed=zlib.crc32(label.encode()))
    left = _side(kernel, a, hw, data, trace_limit)
    right = _side(kernel, b, hw, data, trace_limit)
    return ScheduleDiff(label, hw.name, left, right)


def _side(kernel, schedule, hw, data, trace_limit) -> Side:
    import polyc
    from polyc.ir.treeview import tree_text
    from polyc.studies.sweep.spec import schedule_choice

    choice = schedule_choice(schedule)
    options = {} if trace_limit is None else {"trace_limit": trace_limit}
    compiled = polyc.compile(
        kernel, config=hw, schedule=choice.apply(kernel), **options
    )
    _, report = compiled.run(data)
    chosen = compiled.kernel
    return Side(
        choice.label,
        compiled,
        report,
        tuple(tree_text(chosen.schedule).splitlines()),
        tuple(chosen.loop_nest().splitlines()),
    )
