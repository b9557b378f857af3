"""What a sweep returns: one record per point, in the order of the points, as JSON,
CSV, a text table and plots.

A record (``result.records[i]``) is plain data: the point (``index``, ``label``,
``op``, ``schedule``, ``config``), its ``status`` (``ok``, ``failed``, ``wrong``),
``error_type``/``error`` when it did not succeed, the full ``report``
(:meth:`accelerator.sim.report.Report.to_dict`), ``compiled`` (``str(compiled)``: how the
kernel was mapped), and ``timing`` (host seconds per phase; the only field that
differs between two runs of the same sweep). ``result.rows()`` flattens records into
the columns of the CSV file.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

#: per point, from the config's area model (accelerator.hardware.area.cost)
COST = (
    "area_mm2",
    "latency_s",
    "energy_j",
    "power_w",
    "edp_js",
    "dynamic_energy_j",
    "leakage_energy_j",
)
#: the leading columns of rows() and the CSV file; energy.* and busy.* follow
COLUMNS = (
    "index",
    "label",
    "op",
    "schedule",
    "config",
    "status",
    "kernel",
    "mode",
    "cycles",
    "roofline_cycles",
    "ratio",
    "bound",
    "engine_bound_cycles",
    "engine_ratio",
    "engine_bound",
    "macs",
    "mac_array_macs",
    "macs_per_cycle",
    "peak_macs_per_cycle",
    "mac_utilization",
    "dram_bytes",
    "min_dram_bytes",
    "intensity",
    "dram_bytes_per_cycle",
    "energy_pj",
    "time_us",
    *COST,
)
_TAIL = ("kernel_s", "schedule_s", "compile_s", "run_s", "max_abs_error")
_ERRORS = ("error_type", "error")


class SweepResult:
    """The records of a sweep (see the module docstring) and their forms."""

    def __init__(self, records: list[dict], meta: dict | None = None):
        self.records = sorted(records, key=lambda r: r["index"])
        self.meta = dict(meta or {})

    # selection -------------------------------------------------------------------
    @property
    def ok(self) -> list[dict]:
        """Records of the points that ran and gave a report."""
        return [r for r in self.records if r["status"] == "ok"]

    @property
    def failed(self) -> list[dict]:
        """Records of the points that failed (or whose outputs were wrong)."""
        return [r for r in self.records if r["status"] != "ok"]

    def where(self, **match) -> SweepResult:
        """The records whose fields equal ``match`` (e.g. ``config="tiny"``)."""
        keep = [r for r in self.records if all(r.get(k) == v for k, v in match.items())]
        return SweepResult(keep, self.meta)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.records)

    def __getitem__(self, i: int) -> dict:
        return self.records[i]

    def __repr__(self) -> str:
        bad = f", {len(self.failed)} failed" if self.failed else ""
        return f"<SweepResult {len(self)} points: {len(self.ok)} ok{bad}>"

    def __str__(self) -> str:
        return self.table()

    # flat rows -------------------------------------------------------------------
    def rows(self) -> list[dict]:
        """One flat dict per point (the CSV columns); missing numbers are None."""
        return [flat_row(r) for r in self.records]

    def columns(self) -> list[str]:
        """Every column of :meth:`rows`, in a stable order."""
        extra: dict[str, None] = {}
        for row in self.rows():
            for key in row:
                if key.startswith(("energy.", "busy.")):
                    extra[key] = None
        energy = [k for k in extra if k.startswith("energy.")]
        busy = [k for k in extra if k.startswith("busy.")]
        return [*COLUMNS, *energy, *busy, *_TAIL, *_ERRORS]

    # files -----------------------------------------------------------------------
    def to_json(self, path: str | Path) -> Path:
        """Write ``{"meta": ..., "records": [...]}``; :meth:`from_json` reads it."""
        path = Path(path)
        payload = {"meta": self.meta, "records": self.records}
        path.write_text(json.dumps(payload, indent=1, default=_plain) + "\n")
        return path

    @classmethod
    def from_json(cls, path: str | Path) -> SweepResult:
        """A result written by :meth:`to_json` (to tabulate or plot again).

        Raises:
            ArgumentError: when the file is missing, unreadable, not JSON, or not
                a sweep result.
        """
        from polyc.errors import ArgumentError

        fix = "Pass a sweep.json written by 'polyc sweep --out' or to_json()."
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, ValueError) as err:
            if isinstance(err, FileNotFoundError):
                why = "it does not exist"
            elif isinstance(err, IsADirectoryError):
                why = "it is a directory"
            elif isinstance(err, OSError):
                why = f"reading it failed ({err.strerror or err})"
            else:
                why = f"it is not JSON ({err})"
            raise ArgumentError(
                f"sweep: cannot load {path} because {why}. {fix}"
            ) from None
        records = data.get("records") if isinstance(data, dict) else None
        bad = not isinstance(records, list) or not all(
            isinstance(r, dict) and isinstance(r.get("index"), int) and "status" in r
            for r in records
        )
        if bad:
            what = (
                f"its top-level keys are {', '.join(map(str, data)) or 'none'}"
                if isinstance(data, dict)
                else f"it holds a JSON {type(data).__name__}"
            )
            raise ArgumentError(
                f"sweep: {path} is not a sweep result because it has no list of "
                f"point records under 'records' ({what}). {fix}"
            )
        meta = data.get("meta")
        return cls(records, meta if isinstance(meta, dict) else None)

    @classmethod
    def from_db(cls, path: str | Path, study: str | None = None) -> SweepResult:
        """The points of ``study`` in a results database (:mod:`polyc.sweep.store`;
        the only study when None), finished or not; the file may be being written.

        Raises:
            StoreError: when the file is not a results database or has no such
                study (or several, and none was named).
        """
        from polyc.studies.sweep.store import load

        records, meta = load(path, study)
        return cls(records, meta)

    @classmethod
    def load(cls, path: str | Path, study: str | None = None) -> SweepResult:
        """:meth:`from_db` for an SQLite file, :meth:`from_json` otherwise."""
        from polyc.studies.sweep.store import is_db

        if is_db(path):
            return cls.from_db(path, study)
        return cls.from_json(path)

    def to_csv(self, path: str | Path) -> Path:
        """Write :meth:`rows` as CSV with a header (empty cells for missing values)."""
        path = Path(path)
        columns = self.columns()
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            for row in self.rows():
                writer.writerow(
                    {k: "" if row.get(k) is None else row[k] for k in columns}
                )
        return path

    # text ------------------------------------------------------------------------
    def table(self) -> str:
        """An aligned text table of every point, then failures and a summary."""
        from polyc.studies.sweep.text import render_table

        return render_table(self.rows(), self.ok, self.failed, self.meta)

    # co-design: Pareto fronts ------------------------------------------------------
    def pareto_points(self, label: str | None = None) -> list[dict]:
        """The points of a front: per config, the sums over every model of the
        study (``label=None``), or model ``label``'s own rows
        (:mod:`polyc.sweep.pareto`)."""
        from polyc.studies.sweep import pareto

        rows = self.rows()
        return pareto.workload(rows) if label is None else pareto.points(rows, label)

    def pareto(self, label: str | None = None) -> list[dict]:
        """The Pareto front of (latency, energy, area), by increasing latency."""
        from polyc.studies.sweep import pareto

        return pareto.front(self.pareto_points(label))

    def pareto_table(self, label: str | None = None) -> str:
        """The front as a text table, with the best point of each objective."""
        from polyc.studies.sweep import pareto

        return pareto.table(self.pareto_points(label), label or "workload")

    def plot_pareto(self, path: str | Path, label: str | None = None) -> Path:
        """The three 2-D projections of (latency, energy, area) with the front
        highlighted and the chosen points labelled."""
        from polyc.studies.sweep import pareto

        return pareto.plot(self.pareto_points(label), Path(path), label or "workload")

    def has_front(self) -> bool:
        """Whether the study has several configs with an area (a front to draw)."""
        return len(self.pareto_points()) > 1

    # plots -----------------------------------------------------------------------
    def plot(self, out_dir: str | Path, formats=("png", "svg")) -> list[Path]:
        """Write every plot (roofline, cycles, utilization, energy; pareto when
        :meth:`has_front`) in each format to ``out_dir``; returns the paths."""
        from polyc.studies.sweep import plot as sweep_plot

        out = sweep_plot.plot_all(self.rows(), Path(out_dir), tuple(formats))
        if self.has_front():
            out += [self.plot_pareto(Path(out_dir) / f"pareto.{f}") for f in formats]
        return out

    def plot_roofline(self, path: str | Path) -> Path:
        """Arithmetic intensity (MACs per DRAM byte moved) against achieved MACs per
        cycle, with each config's roof; the format follows the file suffix."""
        from polyc.studies.sweep import plot as sweep_plot

        return sweep_plot.roofline(self.rows(), Path(path))

    def plot_cycles(self, path: str | Path) -> Path:
        """Simulated cycles per layer and schedule, one bar per config, with the
        roofline bound marked on each bar."""
        from polyc.studies.sweep import plot as sweep_plot

        return sweep_plot.cycles(self.rows(), Path(path))

    def plot_utilization(self, path: str | Path) -> Path:
        """MAC-array utilisation (% of peak) per layer and schedule, per config."""
        from polyc.studies.sweep import plot as sweep_plot

        return sweep_plot.utilization(self.rows(), Path(path))

    def plot_energy(self, path: str | Path) -> Path:
        """Energy per point split by component (MAC array, vector, scalar, each
        memory level), as shares of the total, with the total written beside."""
        from polyc.studies.sweep import plot as sweep_plot

        return sweep_plot.energy(self.rows(), Path(path))


def flat_row(record: dict) -> dict:
    """The flat form of one record (see :data:`COLUMNS`)."""
    rep = record.get("report") or {}
    roof = rep.get("roofline") or {}
    cycles = rep.get("cycles")
    macs = rep.get("macs")
    dram = rep.get("dram_bytes")
    row = {k: record.get(k) for k in ("index", "label", "op", "schedule", "config")}
    row.update(
        status=record["status"],
        kernel=record.get("kernel"),
        mode=rep.get("mode"),
        cycles=cycles,
        roofline_cycles=rep.get("roofline_cycles"),
        ratio=rep.get("ratio"),
        bound=roof.get("bound"),
        engine_bound_cycles=rep.get("engine_bound_cycles"),
        engine_ratio=rep.get("engine_ratio"),
        engine_bound=(rep.get("engine_bound") or {}).get("bound"),
        macs=macs,
        mac_array_macs=rep.get("mac_array_macs"),
        macs_per_cycle=macs / cycles if macs is not None and cycles else None,
        peak_macs_per_cycle=roof.get("peak_macs_per_cycle"),
        mac_utilization=rep.get("mac_utilization"),
        dram_bytes=dram,
        min_dram_bytes=rep.get("min_dram_bytes"),
        intensity=macs / dram if macs is not None and dram else None,
        dram_bytes_per_cycle=record.get("dram_bytes_per_cycle"),
        energy_pj=rep.get("energy_pj"),
        time_us=rep.get("time_us"),
    )
    row.update({k: (record.get("cost") or {}).get(k) for k in COST})
    for name, pj in (rep.get("energy") or {}).items():
        row[f"energy.{name}"] = pj
    for name, use in (rep.get("engines") or {}).items():
        row[f"busy.{name}"] = use["busy"]
    timing = record.get("timing") or {}
    for key in _TAIL[:-1]:
        row[key] = timing.get(key)
    row["max_abs_error"] = record.get("max_abs_error")
    row["error_type"] = record.get("error_type")
    row["error"] = record.get("error")
    return row


def _plain(value):
    """JSON for numpy scalars and other stray values in user-provided records."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)
