"""The cost model's DMA time per layer against the simulated busiest channel.

    python -m bench.dma_channels [--models a,b] [--config edge-npu] [--out f.json]

Each model of :mod:`bench.zoo` is compiled for the config and run once; the
trace's events go to the scheduler's layers as :mod:`accelerator.sim.attribution`
divides them (a copy-in to the compute it feeds, a copy-out to the compute before
it). Per layer it prints the predicted cycles and DMA time (the candidate's
``dma`` engine: :func:`schedules.accel.terms.channel_time` and DRAM) beside the
simulated cycles, each channel's busy cycles and the loads' and stores' channel
cycles. The model's DMA time excludes the first tile's loads and the last tile's
stores (charged apart, as the fill and the drain) and the simulated channels do
not, so a ratio a little under 1 is no miss. Writes JSON only with ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from accelerator.sim.attribution import _owners, _timeline
from bench import zoo
from bench.models import TRACE_LIMIT

#: a layer's predicted DMA time within this fraction of its busiest channel
CLOSE = 0.15


def layer_dma(choice, report) -> list[dict]:
    """One row per placed layer of ``choice`` (a scheduler's Choice) from the
    trace of ``report``: predicted cycles and DMA, simulated cycles, busy cycles
    per DMA channel, loads' and stores' channel cycles."""
    layers = choice.layers
    group_of = {s.name: i for i, lc in enumerate(layers) for s in lc.layer.stmts}
    owner = _owners(report.events, group_of)
    cycles = _timeline(report.events, owner, len(layers), report.cycles)
    rows = []
    for i, lc in enumerate(layers):
        if lc.candidate is None:
            continue
        channels: dict[str, int] = {}
        loads = stores = 0
        for e, g in zip(report.events, owner):
            if g != i or e.kind != "dma":
                continue
            channels[e.engine] = channels.get(e.engine, 0) + e.end - e.start
            if e.label.endswith(" out"):
                stores += e.end - e.start
            else:
                loads += e.end - e.start
        engines = dict(lc.candidate.engines)
        rows.append(
            {
                "layer": lc.layer.name,
                "predicted": float(lc.candidate.cycles),
                "predicted_dma": float(engines.get("dma", 0.0)),
                "simulated": int(cycles[i]),
                "channels": channels,
                "busiest": max(channels.values(), default=0),
                "loads": loads,
                "stores": stores,
            }
        )
    return rows


def summary(rows: list[dict]) -> dict:
    """How close the predicted DMA is to the busiest channel over ``rows`` with
    DMA work: the layers within :data:`CLOSE`, and the mean of |pred / sim - 1|."""
    pairs = [(r["predicted_dma"], r["busiest"]) for r in rows if r["busiest"]]
    if not pairs:
        return {"layers": 0, "close": 0, "mean_error": 0.0}
    err = np.array([abs(p / s - 1) for p, s in pairs])
    return {
        "layers": len(pairs),
        "close": int(np.sum(err < CLOSE)),
        "mean_error": float(err.mean()),
    }


def measure(name: str, config: str) -> dict:
    """Compile and run model ``name`` of :mod:`bench.zoo` on ``config``."""
    import polyc

    module, inputs = zoo.model(name).build("float32")
    kernel = polyc.from_torch(module, inputs)
    feeds = {f"arg{n}": x.numpy() for n, x in enumerate(inputs)}
    compiled = polyc.compile(kernel, config=config, trace_limit=TRACE_LIMIT)
    _, report = compiled.run(**feeds)
    rows = layer_dma(compiled.choice, report)
    return {
        "model": name,
        "config": config,
        "cycles": report.cycles,
        "predicted": compiled.choice.predicted_cycles,
        "complete": report.events_dropped == 0,
        "summary": summary(rows),
        "layers": rows,
    }


def render(result: dict) -> str:
    s = result["summary"]
    lines = [
        f"{result['model']} on {result['config']}: simulated {result['cycles']:,}, "
        f"predicted {result['predicted']:,.0f}; DMA within {CLOSE:.0%} of the "
        f"busiest channel in {s['close']} of {s['layers']} layers (mean error "
        f"{s['mean_error']:.3f})"
    ]
    for r in result["layers"]:
        busy = " ".join(f"{k}={v:,}" for k, v in sorted(r["channels"].items()))
        lines.append(
            f"  {r['layer'][:40]:40s} cycles {r['predicted']:9,.0f} / "
            f"{r['simulated']:9,}  DMA {r['predicted_dma']:8,.0f} / "
            f"{r['busiest']:8,} ({busy}; loads {r['loads']:,}, "
            f"stores {r['stores']:,})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="hf-mobilenetv2")
    p.add_argument("--config", default="edge-npu")
    p.add_argument("--out", help="write the rows as JSON here")
    args = p.parse_args(argv)
    results = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        results.append(measure(name, args.config))
        print(render(results[-1]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
