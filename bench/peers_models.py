"""Whole models on HW-A: polyc against Stream, layer by layer and layer-fused (issue 14).

    python -m bench.peers_models [--only polyc stream] [--models ...]
                                 [--peers-dir DIR] [--peer-timeout S] [--report]

Each model of :data:`bench.peers.graph.GRAPHS` (a ResNet basic block with a 1x1
projection, and a single-head transformer block) runs on polyc (one int8 Kernel,
``polyc.compile`` on ``hw-a.toml``, the full simulation) and on Stream 2.1.1 twice:
``per-layer`` (its ``fusion_cut_points = "per-layer"``: one fusion group per layer,
each layer's output back in DRAM before the next starts) and ``auto`` (the fusion
groups and the fused tiling its mapping generator derives: layers cut into tiles
along a streamed axis, the intermediates kept on chip). Stream is installed and
called as in :mod:`bench.fidelity`.

Writes ``bench/results/peers_models.json`` and regenerates the table of
``docs/fidelity.md``'s section "Whole models: polyc against Stream's layer fusion"
(``--report`` only regenerates it).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from bench import results_md
from bench.common import RESULTS, machine
from bench.fidelity import CONFIG_PATH, int8_inputs
from bench.peers import env, graph, stream
from bench.peers.hwa import HWA

PATH = RESULTS / "peers_models.json"
TOOLS = ("polyc", "stream")
#: polyc on HW-A, and on HW-A with the vector unit Stream assumes
POLYC_RUNS = ("polyc", "polyc_stream_vector")


def stream_vector_spec():
    """HW-A for polyc with the vector work priced as Stream prices it: Stream's
    HW-A core is only the 32 x 32 array, onto whose 1,024 PEs it maps an
    element-wise or softmax operator at one operation per PE per cycle, where
    hw-a.toml assumes a 32-lane vector unit (exp 16 cycles, divide 8)."""
    import tomllib

    from accelerator.hardware.config import from_dict

    with open(CONFIG_PATH, "rb") as f:
        data = tomllib.load(f)
    data["name"] = "hw-a-stream-vector"
    data["vector"]["lanes"] = HWA.macs_per_cycle
    data["vector"]["cycles"] = {op: 1 for op in data["vector"]["cycles"]}
    return from_dict(data)


def run_polyc(g: graph.Graph, config=None) -> dict:
    """Compile and simulate the model on HW-A (or ``config``, a Spec); its record
    (``error`` when polyc cannot run it)."""
    import polyc
    from accelerator.sim.attribution import attribute
    from polyc.studies.tensor_dram import dram_by_tensor

    kernel = graph.polyc_kernel(g)
    start = time.perf_counter()
    try:
        config = config or str(CONFIG_PATH)
        compiled = polyc.compile(kernel, config=config, checks=False)
        compiled_s = time.perf_counter() - start
        _, report = compiled.run(int8_inputs(kernel))
    except polyc.PolycError as err:
        return {"model": g.name, "error": f"{type(err).__name__}: {err}"}
    run_s = time.perf_counter() - start - compiled_s
    busy = {e.name: e.busy for e in report.engines}
    tensors = dram_by_tensor(compiled, report)
    layers = [_layer(lc) for lc in compiled.choice.layers]
    shares = attribute(
        report, {"+".join(lay["writes"]): lay["statements"] for lay in layers}
    )
    for lay in layers:
        share = shares.shares["+".join(lay["writes"])]
        lay["simulated_cycles"] = share.cycles
        lay["dram_bytes"] = share.dram_bytes
    return {
        "model": g.name,
        "cycles": report.cycles,
        "predicted_cycles": round(compiled.choice.predicted_cycles),
        "busy": busy,
        "dram_bytes": report.dram_bytes,
        "dram_by_tensor": dict(tensors.largest(32)),
        "layers": layers,
        "attribution_complete": shares.complete,
        "fallbacks": list(report.fallbacks),
        "compile_s": round(compiled_s, 2),
        "simulate_s": round(run_s, 2),
    }


def _layer(lc) -> dict:
    """One of polyc's scheduled layers: its statements (a fused group when more
    than one contraction), its tile sizes and the scheduler's note."""
    stmts = lc.layer.stmts
    writes = list(dict.fromkeys(s.target.array for s in stmts))
    out = {"statements": [s.name for s in stmts], "writes": writes, "note": lc.note}
    if lc.candidate is not None:
        out["predicted_cycles"] = round(lc.candidate.cycles)
        out["tiles"] = {str(v): size for v, size in lc.candidate.sizes}
    return out


def run_stream(g: graph.Graph, fusion: str, peers_dir: Path, timeout) -> dict:
    folder = peers_dir / "inputs" / "stream-models"
    start = time.perf_counter()
    try:
        job = stream.write_graph_inputs(g, folder, fusion)
        out = env.run_driver(env.STREAM, peers_dir, job, timeout)
    except env.PeerError as err:
        return {"model": g.name, "fusion": fusion, "error": str(err)}
    out["process_s"] = round(time.perf_counter() - start, 2)
    return out


# the table -------------------------------------------------------------------------
def _num(v) -> str:
    return f"{v:,}" if isinstance(v, int) else "-"


def render(data: dict) -> str:
    """The per-model table: roofline, polyc, Stream per layer and fused, ratios."""
    head = (
        "| model | MACs | roofline | polyc simulated | polyc, Stream's vector cost "
        "| Stream layer by layer | Stream layer-fused | polyc / Stream fused "
        "| Stream fused / per layer |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    results = data.get("results", {})
    for m in data.get("models", []):
        name = m["name"]
        p = results.get("polyc", {}).get(name, {}).get("cycles")
        wide = results.get("polyc_stream_vector", {}).get(name, {}).get("cycles")
        s = results.get("stream", {}).get(name, {})
        lbl = s.get("per-layer", {}).get("cycles")
        fused = s.get("auto", {}).get("cycles")
        ratio = f"{p / fused:.2f}" if p and fused else "-"
        gain = f"{fused / lbl:.2f}" if fused and lbl else "-"
        rows.append(
            f"| {name} ({m['what']}) | {m['macs']:,} | {m['roofline']:,} | {_num(p)} "
            f"| {_num(wide)} | {_num(lbl)} | {_num(fused)} | {ratio} | {gain} |"
        )
    return "\n".join(rows)


def render_groups(data: dict) -> str:
    """Where the cycles go: Stream's groups (tiles x per tile - overlaps + fill)
    and polyc's engines and DRAM bytes."""
    rows = [
        "| model | tool | groups: layers (cycles = tiles x per tile - overlaps "
        "+ fill) | DRAM bytes |",
        "|---|---|---|---|",
    ]
    results = data.get("results", {})
    for m in data.get("models", []):
        name = m["name"]
        p = results.get("polyc", {}).get(name, {})
        if "cycles" in p:
            b = p.get("busy", {})
            dma = max((v for k, v in b.items() if k.startswith("dma")), default=0)
            layers = "; ".join(_polyc_layer(name, lay) for lay in p.get("layers", []))
            rows.append(
                f"| {name} | polyc | {layers} (MAC busy {b.get('mac_array', 0):,}, "
                f"vector {b.get('vector', 0):,}, busiest DMA {dma:,}) "
                f"| {_num(p.get('dram_bytes'))} |"
            )
        for fusion in stream.FUSIONS:
            s = results.get("stream", {}).get(name, {}).get(fusion, {})
            if "groups" in s:
                groups = "; ".join(_group(gr) for gr in s["groups"])
                dram = [gr["dram"]["bytes"] for gr in s["groups"] if "dram" in gr]
                moved = _num(sum(dram)) if len(dram) == len(s["groups"]) else "-"
                rows.append(f"| {name} | Stream {fusion} | {groups} | {moved} |")
        rows.append(f"| {name} | minimum (in + weights + out) | - | {m['bytes']:,} |")
    return "\n".join(rows)


def _polyc_layer(model: str, lay: dict) -> str:
    """One of polyc's scheduled layers: the graph's nodes it computes, its
    simulated cycles (its share of the run) and its predicted cycles."""
    writes = set(lay.get("writes", ()))
    try:
        nodes = graph.graph(model).nodes
    except KeyError:
        nodes = ()
    names = [n.name for n in nodes if n.out in writes or f"{n.name}_acc" in writes]
    label = "+".join(names) or "+".join(lay.get("writes", ()))
    return (
        f"{label} {_num(lay.get('simulated_cycles'))} "
        f"(predicted {_num(lay.get('predicted_cycles'))})"
    )


def _group(gr: dict) -> str:
    lat = gr.get("latency", {})
    total, per = lat.get("total"), lat.get("per_iteration")
    overlap, fill = lat.get("overlap_between_iterations"), lat.get("fill")
    layers = "+".join(gr["layers"])
    dims = gr.get("dims", {})
    tiled = [t for t in gr.get("tiling") or () if t["tile"] < dims.get(t["dim"], 0)]
    if tiled:  # Stream names global dimensions z<n>; their sizes say which
        cuts = ", ".join(f"{dims[t['dim']]} in {t['tile']}" for t in tiled)
        layers = f"{layers} (tiled: {cuts})"
    if None in (total, per, overlap, fill) or per == overlap:
        return f"{layers} {_num(total)}"
    tiles = round((total - fill - overlap) / (per - overlap))
    return (
        f"{layers} {total:,} = {tiles} x {per:,} - {tiles - 1} x {overlap:,} + {fill:,}"
    )


# the benchmark ---------------------------------------------------------------------
def load() -> dict:
    return json.loads(PATH.read_text()) if PATH.exists() else {}


def run(data: dict, args) -> dict:
    data = dict(data)
    data["machine"] = machine()
    data["hardware"] = asdict(HWA)
    chosen = [graph.graph(n) for n in args.models]
    data["models"] = [_model(g) for g in graph.GRAPHS]
    results = data.setdefault("results", {})
    if "stream" in args.only:
        env.ensure(env.STREAM, args.peers_dir)
        data.setdefault("versions", {})["stream"] = list(env.STREAM.pins)
    for g in chosen:
        if "polyc" in args.only:
            print(f"polyc {g.name} ...", flush=True)
            results.setdefault("polyc", {})[g.name] = run_polyc(g)
            print(f"polyc {g.name} (Stream's vector cost) ...", flush=True)
            wide = run_polyc(g, stream_vector_spec())
            results.setdefault("polyc_stream_vector", {})[g.name] = wide
        if "stream" in args.only:
            for fusion in stream.FUSIONS:
                print(f"stream {g.name} {fusion} ...", flush=True)
                rec = run_stream(g, fusion, args.peers_dir, args.peer_timeout)
                results.setdefault("stream", {}).setdefault(g.name, {})[fusion] = rec
        PATH.write_text(json.dumps(data, indent=1) + "\n")
    return data


def _model(g: graph.Graph) -> dict:
    macs = graph.macs(g)
    moved = graph.minimum_bytes(g)
    roofline = max(
        -(-macs // HWA.macs_per_cycle), -(-moved // HWA.dram_bytes_per_cycle)
    )
    return {
        "name": g.name,
        "what": g.what,
        "layers": [n.name for n in g.nodes],
        "notes": list(g.notes),
        "macs": macs,
        "bytes": moved,
        "roofline": roofline,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=TOOLS, default=list(TOOLS))
    parser.add_argument("--models", nargs="*", default=[g.name for g in graph.GRAPHS])
    parser.add_argument("--peers-dir", type=Path, default=env.DEFAULT_DIR)
    parser.add_argument("--peer-timeout", type=float, default=1800.0)
    parser.add_argument("--report", action="store_true", help="only rewrite the docs")
    args = parser.parse_args(argv)
    data = load()
    if not args.report:
        data = run(data, args)
        PATH.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {PATH}")
    print(render(data), render_groups(data), sep="\n\n")
    results_md.regenerate_for(PATH)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
