"""Per-layer cost of an imported model on the simulated accelerator.

A statement made by the torch frontend carries its layer (the ``nn.Module`` path)
in its origin. In a DRAM-direct run the simulator's per-statement costs (cycles,
bytes per memory level, energy: :class:`accelerator.sim.report.StatementUse`) add up
per layer; in a placed run the engine operations of the trace are divided among the
layers (:mod:`accelerator.sim.attribution`), and layers that the accelerator scheduler
fused into one unit (``fc1 + gelu``) are one row, since their work interleaves on
the engines. Each row also gets its own roofline bound: its statements as a kernel
of their own, whose inputs are what it reads from other rows (or the model's inputs
and weights) and whose outputs are what other rows read. The summary compares the
model's simulated cycles with the sum of those bounds (each row alone at its bound)
and with the whole model's roofline::

    kernel = polyc.from_torch(model.eval(), (x,))
    compiled = polyc.compile(kernel, config="edge-npu")
    outputs, report = compiled.run(arg0=x.numpy())
    print(model_report(compiled, report))

What is not attributed to a layer (engine work past the trace limit, say) shows as
an "other" row, so the rows always add up to the run's totals.
"""

from __future__ import annotations

from dataclasses import dataclass

from polyc.frontends.torch.source import layer_of
from polyc.ir.kernel import Kernel, Role

OTHER = "(other)"


@dataclass(frozen=True)
class LayerCost:
    """One layer's share of a run."""

    name: str
    statements: tuple[str, ...]
    cycles: int
    dram_bytes: int
    energy_pj: float
    macs: int
    roofline_cycles: int
    peak_macs_per_cycle: float
    compute_cycles: float = 0.0
    #: the layer's engine bound in cycles (accelerator.hardware.bound): its work on
    #: every engine that can run it, each at its best rate, and DRAM
    engine_bound: int = 0

    @property
    def utilization(self) -> float:
        """Useful MACs over what the MAC array could do in the layer's cycles: its
        roofline compute cycles (each dtype at its own peak) over its cycles."""
        if not self.cycles:
            return 0.0
        return self.compute_cycles / self.cycles

    @property
    def ratio(self) -> float | None:
        """Cycles over the layer's roofline bound."""
        return self.cycles / self.roofline_cycles if self.roofline_cycles else None

    @property
    def engine_ratio(self) -> float | None:
        """Cycles over the layer's engine bound: what the scheduler is judged by."""
        return self.cycles / self.engine_bound if self.engine_bound else None


@dataclass(frozen=True)
class ModelReport:
    """Per-layer and total cost of one simulated run of an imported model."""

    kernel: str
    config: str
    mode: str
    layers: tuple[LayerCost, ...]
    report: object  # accelerator.sim.report.Report
    #: DRAM bytes per array (polyc.studies.tensor_dram), for a placed run
    tensors: object = None

    @property
    def cycles(self) -> int:
        return self.report.cycles

    @property
    def total(self) -> LayerCost:
        """The run as one row: the report's cycles, DRAM bytes and energy, the
        rows' MACs and compute cycles (the whole kernel's: the rows partition its
        statements), the sum of the rows' bounds."""
        r = self.report
        return LayerCost(
            "total",
            (),
            r.cycles,
            r.dram_bytes,
            r.energy_pj,
            sum(c.macs for c in self.layers),
            self.roofline_sum,
            self.layers[0].peak_macs_per_cycle if self.layers else 1.0,
            sum(c.compute_cycles for c in self.layers),
            self.engine_bound_sum,
        )

    @property
    def roofline_sum(self) -> int:
        """The sum of the layers' roofline bounds (each layer alone at its bound)."""
        return sum(layer.roofline_cycles for layer in self.layers)

    @property
    def engine_bound_sum(self) -> int:
        """The sum of the layers' engine bounds (each layer alone at its bound)."""
        return sum(layer.engine_bound for layer in self.layers)

    def layer(self, name: str) -> LayerCost:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def summary(self) -> str:
        r = self.report
        n = len(self.layers) - (self.layers[-1].name == OTHER)
        text = (
            f"summary: {r.cycles:,} simulated cycles = "
            f"{r.cycles / max(1, self.engine_bound_sum):,.2f}x the sum of the {n} "
            f"layers' engine bounds ({self.engine_bound_sum:,}), "
            f"{r.cycles / max(1, self.roofline_sum):,.2f}x the sum of their "
            f"roofline bounds ({self.roofline_sum:,}); the whole model's engine "
            f"bound is {r.engine_bound_cycles or 0:,}"
        )
        if r.engine_ratio is not None:
            text += f" ({r.engine_ratio:,.2f}x)"
        return text + f", its roofline {r.roofline_cycles:,} ({r.ratio:,.2f}x)"

    def to_dict(self) -> dict:
        return {
            "kernel": self.kernel,
            "config": self.config,
            "mode": self.mode,
            "cycles": self.cycles,
            "roofline_sum": self.roofline_sum,
            "roofline": self.report.roofline_cycles,
            "engine_bound_sum": self.engine_bound_sum,
            "engine_bound": self.report.engine_bound_cycles,
            "dram_bytes": self.report.dram_bytes,
            "energy_pj": self.report.energy_pj,
            "macs": self.total.macs,
            "mac_array_macs": self.report.mac_array_macs,
            "utilization": self.total.utilization,
            "tensors": self.tensors.to_dict() if self.tensors is not None else None,
            "layers": [
                {
                    "name": c.name,
                    "statements": list(c.statements),
                    "cycles": c.cycles,
                    "dram_bytes": c.dram_bytes,
                    "energy_pj": c.energy_pj,
                    "macs": c.macs,
                    "compute_cycles": c.compute_cycles,
                    "utilization": c.utilization,
                    "roofline_cycles": c.roofline_cycles,
                    "engine_bound": c.engine_bound,
                    "engine_ratio": c.engine_ratio,
                }
                for c in self.layers
            ],
        }

    def __str__(self) -> str:
        from codegen.accel.direct import MODE_DRAM_DIRECT

        r = self.report
        head = (
            f"polyc model report: {self.kernel} on {self.config}, {self.mode}, "
            f"{len(self.layers)} layers"
        )
        cols = (
            f"  {'layer':<40} {'cycles':>16} {'share':>7} {'MAC util':>9} "
            f"{'DRAM bytes':>14} {'energy uJ':>11} {'roofline':>12} {'x roof':>8} "
            f"{'engine bnd':>12} {'x engine':>9}"
        )
        rows = [head, cols]
        for c in self.layers:
            rows.append(_row(c.name, c, r.cycles))
        rows.append(_row("total", self.total, r.cycles))
        rows.append("  " + self.summary())
        if self.tensors is not None:
            rows.extend(self.tensors.lines())
        if r.events_dropped and self.mode != MODE_DRAM_DIRECT:
            rows.append(
                f"  note: the run's trace kept {len(r.events):,} events and dropped "
                f"{r.events_dropped:,}, so the engine work after them shows as "
                f"{OTHER}; compile with a larger trace_limit to attribute all of it"
            )
        return "\n".join(rows)


def _fit(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def _row(name: str, c: LayerCost, total: int) -> str:
    share = c.cycles / total if total else 0.0
    ratio = f"{c.ratio:,.1f}x" if c.ratio is not None else "-"
    bound = f"{c.roofline_cycles:,}" if c.roofline_cycles else "-"
    eratio = f"{c.engine_ratio:,.2f}x" if c.engine_ratio is not None else "-"
    ebound = f"{c.engine_bound:,}" if c.engine_bound else "-"
    return (
        f"  {_fit(name, 40):<40} {c.cycles:>16,} {share:>7.1%} {c.utilization:>9.2%} "
        f"{c.dram_bytes:>14,} {c.energy_pj / 1e6:>11,.3f} {bound:>12} {ratio:>8} "
        f"{ebound:>12} {eratio:>9}"
    )


def model_report(compiled, report=None) -> ModelReport:
    """The per-layer report of a run of ``compiled`` (``polyc.compile``'s result).

    ``report`` defaults to the compiled kernel's last run.

    Raises:
        ArgumentError: when there is no run to report on.
    """
    from polyc.errors import ArgumentError

    report = report if report is not None else compiled.last_report
    if report is None:
        raise ArgumentError(
            "model_report: there is no run to report on because compiled.run() was "
            "not called. Run it first, or pass its report."
        )
    import dataclasses

    from codegen.accel.direct import MODE_DRAM_DIRECT
    from polyc.studies.tensor_dram import dram_by_tensor

    units = None
    if compiled.choice is not None:
        units = [[s.name for s in lc.layer.stmts] for lc in compiled.choice.layers]
    out = layer_costs(compiled.kernel, report, compiled.spec, units)
    if report.mode == MODE_DRAM_DIRECT:
        return out
    return dataclasses.replace(out, tensors=dram_by_tensor(compiled, report))


def layer_groups(compiled) -> dict[str, list[str]]:
    """The rows of :func:`model_report`: row name -> its statements, model layers
    fused into one unit joined (``fc1 + gelu``); for a kernel not imported from a
    model, every statement is a row of its own."""
    kernel = compiled.kernel
    if not any(layer_of(s.origin) for s in kernel.statements):
        return {s.name: [s.name] for s in kernel.statements}
    units = None
    if compiled.choice is not None:
        units = [[s.name for s in lc.layer.stmts] for lc in compiled.choice.layers]
    return _merge_fused(_calls(kernel), units or [])


def layer_costs(kernel: Kernel, report, spec, units=None) -> ModelReport:
    """Group the statements' costs of ``report`` by layer (see module docstring).

    ``units`` are the statement lists the accelerator scheduler fused and ran as one
    (``Choice.layers``): model layers that share one are reported as one row
    (``fc1 + gelu``), since their work is interleaved on the engines.
    """
    from accelerator.hardware.bound import engine_bound
    from accelerator.hardware.roofline import roofline
    from accelerator.sim.attribution import attribute
    from codegen.accel.direct import MODE_DRAM_DIRECT

    groups = _merge_fused(_calls(kernel), units or [])
    per = {s.name: s for s in report.statements}
    placed = report.mode != MODE_DRAM_DIRECT
    shares = attribute(report, groups) if placed else None
    layers = []
    for name, stmts in groups.items():
        part = _layer_kernel(kernel, name, stmts)
        bound = roofline(part, spec, {})
        if shares is not None:
            share = shares.shares[name]
            cost = (share.cycles, share.dram_bytes, share.energy_pj)
        else:
            uses = [per[s] for s in stmts if s in per]
            cost = (
                sum(u.cycles for u in uses),
                sum(_dram(u) for u in uses),
                sum(u.energy_pj for u in uses),
            )
        layers.append(
            LayerCost(
                name,
                tuple(stmts),
                *cost,
                bound.macs,
                bound.cycles,
                bound.peak_macs_per_cycle,
                bound.compute_cycles,
                engine_bound(part, spec, {}).cycles,
            )
        )
    other = _unattributed(report, layers)
    if other is not None:
        layers.append(other)
    return ModelReport(kernel.name, report.config, report.mode, tuple(layers), report)


def _calls(kernel: Kernel) -> dict[str, list[str]]:
    """Statements grouped by model layer, one group per call in program order: a
    module called twice (one ``nn.ReLU`` after both convolutions of a residual
    block) gives ``relu`` and ``relu (2)``."""
    groups: dict[str, list[str]] = {}
    calls: dict[str, int] = {}
    previous = None
    for s in kernel.statements:
        layer = layer_of(s.origin) or OTHER
        if layer != previous:
            calls[layer] = calls.get(layer, 0) + 1
            previous = layer
        name = (
            layer
            if calls[layer] == 1 or layer == OTHER
            else f"{layer} ({calls[layer]})"
        )
        groups.setdefault(name, []).append(s.name)
    return groups


def _merge_fused(
    groups: dict[str, list[str]], units: list[list[str]]
) -> dict[str, list[str]]:
    """Join the model layers whose statements share a fused unit (union-find), in
    program order; a joined row is named ``a + b``."""
    parent = {g: g for g in groups}

    def find(g: str) -> str:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    group_of = {s: g for g, stmts in groups.items() for s in stmts}
    for unit in units:
        roots = {find(group_of[s]) for s in unit if s in group_of}
        first, *rest = sorted(roots, key=list(groups).index) or [None]
        for r in rest:
            parent[r] = first
    merged: dict[str, list[str]] = {}
    for g, stmts in groups.items():
        merged.setdefault(find(g), []).extend(stmts)
    names = {r: [g for g in groups if find(g) == r] for r in merged}
    return {_joined(names[r]): stmts for r, stmts in merged.items()}


def _joined(names: list[str]) -> str:
    """``fc1 + gelu``; consecutive layers of one module are written once, in brace
    form: ``layer1.0.{conv2, forward, relu (2)} + avgpool`` (``forward``: the
    module's own code, such as the residual add)."""
    parts: list[str] = []
    run: list[str] = []
    head: list[str] = []
    for name in [*names, ""]:
        path = name.split(" ")[0].split(".") if name else []
        common = _common(head, path) if run else path
        if run and not common:
            parts.append(_braced(run, head))
            run, common = [], path
        run.append(name)
        head = common
    return " + ".join(parts)


def _common(a: list[str], b: list[str]) -> list[str]:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return a[:k]


def _braced(run: list[str], head: list[str]) -> str:
    if len(run) == 1:
        return run[0]
    prefix = ".".join(head)
    rest = [n[len(prefix) + 1 :] if n.startswith(prefix + ".") else n for n in run]
    return (
        prefix + ".{" + ", ".join("forward" if n == prefix else n for n in rest) + "}"
    )


def _dram(use) -> int:
    if not use.bytes_read:
        return 0
    return use.bytes_read[0] + use.bytes_written[0]


def _unattributed(report, layers: list[LayerCost]) -> LayerCost | None:
    """What the run spent outside every layer's statements, when anything."""
    cycles = report.cycles - sum(c.cycles for c in layers)
    dram = report.dram_bytes - sum(c.dram_bytes for c in layers)
    energy = report.energy_pj - sum(c.energy_pj for c in layers)
    if cycles == 0 and dram == 0 and abs(energy) <= 1e-6 * max(1.0, report.energy_pj):
        return None
    peak = layers[0].peak_macs_per_cycle if layers else 1.0
    return LayerCost(OTHER, (), cycles, dram, energy, 0, 0, peak)


def _layer_kernel(kernel: Kernel, name: str, stmts: list[str]) -> Kernel:
    """The layer's statements as a kernel: what it reads from elsewhere are its
    inputs, what is read elsewhere (or returned) are its outputs."""
    from polyc.ir.kernel import Array

    mine = [kernel.statement(s) for s in stmts]
    names = set(stmts)
    written = {s.target.array for s in mine}
    # a gather's table is read too (its index array is among the reads)
    used = {ld.array for s in mine for ld in (s.target, *s.reads, *s.gathers)}
    read_outside = {
        ld.array
        for s in kernel.statements
        if s.name not in names
        for ld in (*s.reads, *s.gathers)
    }
    arrays = []
    for a in (kernel.arrays[n] for n in sorted(used)):
        if a.name not in written:
            role = Role.INPUT
        elif a.name in read_outside or a.role in (Role.OUTPUT, Role.INOUT):
            role = Role.OUTPUT
        else:
            role = Role.TEMP
        # an intermediate's home stays: on chip, it is no layer's DRAM traffic
        arrays.append(Array(a.name, a.shape, a.dtype, role, a.home, a.home_offset))
    label = "".join(ch if ch.isalnum() else "_" for ch in name)
    return Kernel.create(
        f"{kernel.name}_{label}", arrays, mine, kernel.params, kernel.context
    )
