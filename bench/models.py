"""The model suite: whole models on the simulated accelerators, per model and layer.

    python -m bench.models [--quick] [--models a,b] [--configs c,d] [--dtypes f,g]

Each model of :mod:`bench.zoo` (``transformers`` model classes from small configs
and the repository's own networks, random weights, nothing downloaded) is imported
with ``polyc.from_torch`` once per dtype and compiled with ``polyc.compile`` on each
config from one empty build cache (the simulator's runtime library is built first
and timed on its own, so each model's build stage is its own C), then run once on
its example inputs. Per model, dtype and config the JSON holds the simulated
cycles and the cost model's prediction of them (the scheduler's
``predicted_cycles``), the whole model's roofline and engine bound and the sums of its layers'
(:mod:`accelerator.hardware.bound`), DRAM bytes against the minimum, per-engine
utilisation, energy and the compile seconds by stage (frontend, schedule, codegen,
build; ``Compiled.stage_seconds``), and the same per layer (``model_report``'s rows).
A model that fails to import, compile or run is recorded with its error text and the
suite goes on.

Writes ``bench/results/models.json`` (``models_quick.json`` with ``--quick``, or
``--out``) and regenerates its tables in docs/results.md. ``--quick`` runs the small
subset of :mod:`bench.zoo` on edge-npu in float32 (a few minutes); ``--models``,
``--configs`` and ``--dtypes`` narrow or widen any run. ``int8`` runs only the
models built in int8 (PT2E-quantized, :func:`bench.zoo.int8`); ``python -m
bench.int8`` runs just those beside their float16 runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

from bench import results_md, zoo
from bench.common import RESULTS, geomean, machine
from bench.compile_time import fresh_cache

CONFIGS = ("edge-npu", "datacenter", "hw-a")
#: int8: the models of bench.zoo built in int8 (PT2E-quantized), the others skip it
DTYPES = ("float32", "float16", "int8")
QUICK_CONFIGS = ("edge-npu",)
QUICK_DTYPES = ("float32",)
#: trace events kept per run: enough that every layer's engine work is attributed
#: on the suite's models (the default keeps 65,536)
TRACE_LIMIT = 1 << 20
#: the longest error text kept in the JSON
ERROR_CHARS = 1500
#: compute engines, by the trace events' kind (per-layer utilisation)
COMPUTE = ("mac", "vector", "scalar")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    quick = args.quick
    names = _list(args.models) or [m.name for m in zoo.MODELS if m.quick or not quick]
    configs = _list(args.configs) or list(QUICK_CONFIGS if quick else CONFIGS)
    dtypes = _list(args.dtypes) or list(QUICK_DTYPES if quick else DTYPES)
    try:
        models = [zoo.model(n) for n in names]
    except KeyError as err:
        print(f"bench.models: {err.args[0]}")
        return 2
    path = Path(args.out) if args.out else RESULTS / f"models{'_quick' * quick}.json"
    previous = _read(path) if args.update else None
    payload = {
        "quick": quick,
        "models": names,
        "configs": configs,
        "dtypes": dtypes,
        "once_s": {},
        "runs": [],
    }
    with fresh_cache():
        payload["once_s"] = _once(models)
        for m in models:
            for dtype in (d for d in dtypes if d in m.dtypes):
                payload["runs"].extend(measure(m, dtype, configs, args.verify))
                # after every model, so a suite stopped midway keeps its runs
                _write(path, merged(previous, payload))
    payload = merged(previous, payload)
    _write(path, payload)
    print(table(payload))
    print()
    print(summary(payload))
    print(f"wrote {path}")
    if path.parent.resolve() == RESULTS.resolve():
        results_md.regenerate_for(path)
    return 0


def _once(models: list[zoo.Model]) -> dict[str, float]:
    """What a process pays once, before its first model, timed apart so that no
    model's frontend or build is charged for it: importing torch (and
    ``transformers`` when a model needs it), torch's first export, and building
    the simulator's runtime library (then cached)."""
    seconds = {}
    start = time.perf_counter()
    import torch

    from polyc.frontends.torch.export import export

    seconds["import_torch"] = time.perf_counter() - start
    if any(m.source == "transformers" for m in models):
        start = time.perf_counter()
        zoo.transformers_module()
        seconds["import_transformers"] = time.perf_counter() - start
    start = time.perf_counter()
    export(torch.nn.Linear(2, 2).eval(), (torch.randn(1, 2),))
    seconds["export_warm_up"] = time.perf_counter() - start
    from codegen.accel.direct import build_runtime

    start = time.perf_counter()
    build_runtime()
    seconds["runtime_build"] = time.perf_counter() - start
    return seconds


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the small subset")
    p.add_argument("--models", help=f"comma-separated, of: {', '.join(zoo.names())}")
    p.add_argument("--configs", help=f"comma-separated (default {','.join(CONFIGS)})")
    p.add_argument("--dtypes", help=f"comma-separated (default {','.join(DTYPES)})")
    p.add_argument("--verify", action="store_true", help="check each run (slower)")
    p.add_argument("--out", help="write the JSON here instead of bench/results/")
    p.add_argument(
        "--update",
        action="store_true",
        help="keep the JSON's other runs: replace only the models x dtypes x "
        "configs run now",
    )
    return p


def _list(text: str | None) -> list[str]:
    return [w.strip() for w in (text or "").split(",") if w.strip()]


def _write(path: Path, payload: dict) -> Path:
    """Write ``payload`` (with the machine) to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def publish(path: Path, payload: dict, text: str, default: Path) -> None:
    """A bench's last step: ``payload`` written to ``path``, its table ``text``
    printed, and the docs' tables regenerated when ``path`` is the bench's
    ``default`` results file."""
    _write(path, payload)
    print(text)
    print(f"wrote {path}")
    if path.resolve() == default.resolve():
        results_md.regenerate_for(path)


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def merged(previous: dict | None, payload: dict) -> dict:
    """``payload`` with the runs of ``previous`` that it does not redo (same
    model, dtype and config): a suite run in parts is one JSON."""
    if previous is None:
        return payload

    def key(r: dict) -> tuple[str, str, str]:
        return r["model"], r["dtype"], r["config"]

    redone = {key(r) for r in payload["runs"]}
    out = dict(payload)
    for field in ("models", "configs", "dtypes"):
        out[field] = [
            *previous[field],
            *(v for v in payload[field] if v not in previous[field]),
        ]
    out["runs"] = [r for r in previous["runs"] if key(r) not in redone]
    out["runs"] += payload["runs"]
    return out


def _error(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    if len(text) > ERROR_CHARS:
        text = text[: ERROR_CHARS - 3] + "..."
    return text


def measure(m: zoo.Model, dtype: str, configs: list[str], verify: bool) -> list[dict]:
    """One row per config for model ``m`` in ``dtype``: imported once, compiled
    and run on each config (an error is recorded in its row, and the rest go on).
    A config is a name, or ``(label, spec)`` for a hardware spec made in Python."""
    import polyc

    base = {"model": m.name, "family": m.family, "source": m.source, "dtype": dtype}
    start = time.perf_counter()
    try:
        module, inputs = m.build(dtype)
        kernel = polyc.from_torch(module, inputs)
    except Exception as err:  # recorded: the suite goes on with the next model
        failed = {**base, "status": "error", "stage": "frontend", "error": _error(err)}
        print(f"{m.name} {dtype}: frontend failed: {failed['error'][:200]}")
        return [{**failed, "config": c} for c in configs]
    frontend_s = time.perf_counter() - start
    from polyc.frontends.torch.bf16 import to_numpy

    feeds = {f"arg{n}": to_numpy(x) for n, x in enumerate(inputs)}
    rows = []
    for config in configs:
        label, config = config if isinstance(config, tuple) else (config, config)
        row = {**base, "config": label, "statements": len(kernel.statements)}
        # compile seconds depend on what else runs on the machine
        row["load_average"] = round(os.getloadavg()[0], 2)
        row.update(_compile_and_run(kernel, config, feeds, frontend_s, verify))
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    head = f"{row['model']} {row['dtype']} on {row['config']}"
    if row["status"] != "ok":
        return f"{head}: {row['stage']} failed: {row['error'][:200]}"
    s = row["seconds"]
    return (
        f"{head}: {row['cycles']:,} cycles, {row['roofline_ratio']:.2f}x roofline, "
        f"compile {row['compile_s']:.1f} s (schedule {s['schedule']:.1f}, build "
        f"{s['build']:.1f})"
    )


def _compile_and_run(kernel, config: str, feeds: dict, frontend_s: float, verify):
    import polyc
    from polyc.studies.model_report import model_report

    stage, compiled = "compile", None
    try:
        compiled = polyc.compile(
            kernel, config=config, trace_limit=TRACE_LIMIT, verify=verify
        )
        stage = "run"
        _, report = compiled.run(**feeds)
        stage = "report"
        mr = model_report(compiled, report)
        out = {"status": "ok", **_costs(kernel, compiled, report, mr)}
    except Exception as err:  # recorded: the suite goes on with the next config
        out = {"status": "error", "stage": stage, "error": _error(err)}
    seconds = {"frontend": frontend_s}
    if compiled is not None:
        seconds.update(compiled.stage_seconds)
    out["seconds"] = seconds
    out["compile_s"] = sum(
        seconds.get(k, 0.0)
        for k in ("frontend", "deps", "schedule", "codegen", "build")
    )
    return out


def _bound(cost) -> float | None:
    """The engine bound of a ``model_report`` row in cycles, when it has one."""
    value = getattr(cost, "engine_bound", None)
    if value is None:
        return None
    return float(getattr(value, "cycles", value))


def _ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def _costs(kernel, compiled, report, mr) -> dict:
    """The run's numbers and its layers' (see the module docstring)."""
    # the layers' statements are the scheduled program's (a layer split across
    # engines has statements the frontend's kernel lacks)
    layers = [_layer(compiled.kernel, compiled.spec, report, c) for c in mr.layers]
    bounds = [lay["engine_bound"] for lay in layers if lay["name"] != "(other)"]
    bound_sum = sum(bounds) if bounds and None not in bounds else None
    # the whole model's bound, like its roofline: intermediates need not touch DRAM
    engine_bound = getattr(report, "engine_bound_cycles", None)
    roof = report.roofline
    choice = compiled.choice
    predicted = choice.predicted_cycles if choice is not None else None
    return {
        "mode": report.mode,
        "cycles": report.cycles,
        # the cost model's cycles for the whole program, against the simulator's
        "predicted": predicted,
        "predicted_ratio": _ratio(predicted, report.cycles),
        "time_us": report.time_us,
        "roofline": report.roofline_cycles,
        "roofline_bound": roof.bound if roof else None,
        "roofline_ratio": report.ratio,
        "roofline_sum": mr.roofline_sum,
        "roofline_sum_ratio": _ratio(report.cycles, mr.roofline_sum),
        "engine_bound": engine_bound,
        "engine_ratio": _ratio(report.cycles, engine_bound),
        "engine_bound_sum": bound_sum,
        "engine_bound_sum_ratio": _ratio(report.cycles, bound_sum),
        "dram_bytes": report.dram_bytes,
        "min_dram_bytes": roof.min_dram_bytes if roof else None,
        "dram_ratio": _ratio(report.dram_bytes, roof.min_dram_bytes if roof else None),
        "energy_pj": report.energy_pj,
        "macs": report.macs,
        "mac_utilization": report.mac_utilization,
        "engines": {e.name: e.utilization for e in report.engines},
        "events_dropped": report.events_dropped,
        "fallbacks": list(report.fallbacks),
        **_tensors(mr),
        "layers": layers,
    }


def _tensors(mr) -> dict:
    """The attention score matrices' DRAM bytes (0: on chip) and the tensors that
    move the most (polyc.studies.tensor_dram), for a placed run."""
    td = mr.tensors
    if td is None:
        return {}
    return {
        "attention_score_dram_bytes": td.score_bytes if td.scores else None,
        "attention_score_tensors": list(td.scores),
        "dram_bytes_largest_tensors": dict(td.largest(12)),
    }


def _layer(kernel, spec, report, cost) -> dict:
    bound = _bound(cost)
    return {
        "name": cost.name,
        "statements": list(cost.statements),
        "cycles": cost.cycles,
        "roofline": cost.roofline_cycles,
        "roofline_ratio": cost.ratio,
        "engine_bound": bound,
        "engine_ratio": _ratio(cost.cycles, bound),
        "dram_bytes": cost.dram_bytes,
        "min_dram_bytes": _min_dram(kernel, cost),
        "energy_pj": cost.energy_pj,
        "macs": cost.macs,
        "mac_utilization": cost.utilization,
        "engines": _engine_use(report, cost),
    }


def _min_dram(kernel, cost) -> int | None:
    """The unavoidable DRAM bytes of the layer alone: what it reads from other
    layers (or the model's inputs and weights) and what others read of it."""
    if not cost.statements:
        return None
    from accelerator.hardware.roofline import min_dram_bytes
    from polyc.studies.model_report import _layer_kernel

    return min_dram_bytes(_layer_kernel(kernel, cost.name, list(cost.statements)), {})


def _engine_use(report, cost) -> dict[str, float]:
    """Busy cycles of each compute engine on the layer's statements over the
    layer's cycles (from the trace; a DRAM-direct run has no trace: its scalar
    work is all the layer's cycles)."""
    if not cost.cycles:
        return {}
    if not report.events:
        return {"scalar": 1.0} if cost.statements else {}
    mine = set(cost.statements)
    busy: dict[str, int] = {}
    for e in report.events:
        if e.kind in COMPUTE and e.label.split(" ")[0] in mine:
            busy[e.engine] = busy.get(e.engine, 0) + (e.end - e.start)
    return {name: b / cost.cycles for name, b in sorted(busy.items())}


# tables --------------------------------------------------------------------------


def _x(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _rows(payload: dict) -> list[dict]:
    order = {n: k for k, n in enumerate(payload["models"])}
    return sorted(
        payload["runs"],
        key=lambda r: (
            order.get(r["model"], 99),
            payload["dtypes"].index(r["dtype"]),
            payload["configs"].index(r["config"]),
        ),
    )


def table(payload: dict) -> str:
    """The docs/results.md table of a ``models.json`` payload: one row per model,
    dtype and config."""
    lines = [
        "| model | dtype | config | cycles | x roofline | x engine bound "
        "| DRAM / min | MAC util | energy uJ | compile s: frontend + schedule + "
        "codegen + build |",
        "|" + "---|" * 10,
    ]
    for r in _rows(payload):
        head = [r["model"], r["dtype"], r["config"]]
        if r["status"] != "ok":
            text = r["error"].splitlines()[0] if r["error"] else ""
            text = text if len(text) <= 90 else text[:87] + "..."
            lines.append(
                "| "
                + " | ".join([*head, f"{r['stage']} failed: {_cell(text)}"])
                + " |"
                + " |" * 6
            )
            continue
        s = r["seconds"]
        split = " + ".join(
            f"{s.get(k, 0.0):.1f}" for k in ("frontend", "schedule", "codegen", "build")
        )
        util = r["mac_utilization"]
        cells = [
            *head,
            f"{r['cycles']:,}",
            _x(r["roofline_ratio"]),
            _x(r["engine_ratio"]),
            _x(r["dram_ratio"]),
            "-" if util is None else f"{util:.0%}",
            f"{r['energy_pj'] / 1e6:,.1f}",
            f"**{r['compile_s']:.1f}** = {split}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def summary(payload: dict) -> str:
    """Per config and dtype: how many models ran, the geomean and worst ratio to
    each bound, and the compile seconds (median and worst). Beside the ratio to
    the model's engine bound, the ratio to the sum of its layers' bounds (each
    layer's alone, its activations read and written through DRAM and its
    engines idle beyond its own work): what is left within the layers; the
    rest of the first is what only work across layers (fusion, overlap) can
    win."""
    lines = [
        "| config | dtype | models ok | geomean x roofline | worst | geomean x "
        "engine bound | worst | geomean x layers' bounds | predicted / simulated: "
        "geomean, farthest | compile s median | worst |",
        "|" + "---|" * 11,
    ]
    for config in payload["configs"]:
        for dtype in payload["dtypes"]:
            runs = [
                r
                for r in payload["runs"]
                if r["config"] == config and r["dtype"] == dtype
            ]
            if not runs:
                continue
            ok = [r for r in runs if r["status"] == "ok"]
            roof = [r["roofline_ratio"] for r in ok if r["roofline_ratio"]]
            eng = [r["engine_ratio"] for r in ok if r["engine_ratio"]]
            per = [r.get("engine_bound_sum_ratio") for r in ok]
            pred = [r.get("predicted_ratio") for r in ok]
            secs = sorted(r["compile_s"] for r in ok)
            cells = [
                config,
                dtype,
                f"{len(ok)} of {len(runs)}",
                _x(geomean(roof)) if roof else "-",
                _worst(ok, "roofline_ratio"),
                _x(geomean(eng)) if len(eng) == len(ok) and eng else "-",
                _worst(ok, "engine_ratio") if len(eng) == len(ok) else "-",
                _x(geomean(per)) if per and all(per) else "-",
                _prediction(ok) if pred and all(pred) else "-",
                f"{secs[len(secs) // 2]:.1f}" if secs else "-",
                _worst(ok, "compile_s", fmt="{:.1f}"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _prediction(runs: list[dict]) -> str:
    """The geomean of predicted over simulated cycles and the run farthest from
    1 either way."""
    ratios = [r["predicted_ratio"] for r in runs]
    far = max(runs, key=lambda r: abs(math.log(r["predicted_ratio"])))
    return f"{geomean(ratios):.2f}, {far['predicted_ratio']:.2f} ({far['model']})"


def _worst(runs: list[dict], key: str, fmt: str = "{:.2f}") -> str:
    have = [r for r in runs if r.get(key) is not None]
    if not have:
        return "-"
    r = max(have, key=lambda r: r[key])
    return f"{fmt.format(r[key])} ({r['model']})"


if __name__ == "__main__":
    raise SystemExit(main())
