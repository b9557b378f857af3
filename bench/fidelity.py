"""polyc's timing model against ZigZag, Stream and SCALE-Sim on HW-A (issue 13).

    python -m bench.fidelity [--only polyc zigzag stream scalesim] [--layers ...]
                             [--peers-dir DIR] [--peer-timeout S] [--report]

Every layer of :data:`bench.peers.hwa.LAYERS` runs on polyc (``polyc.compile`` with
``accelerator/hardware/configs/hw-a.toml``, then the full simulation: cycles, the
scheduler's predicted cycles, the MAC array's busy cycles) and on each peer, from
input files written from the one description of HW-A in :mod:`bench.peers.hwa`.
The peers are installed on first use in their own virtual environments under
``--peers-dir`` (default ``~/.cache/polyc/peers``; pinned versions, minutes each,
never by ``make test``). A compute-only section runs every
:data:`~bench.peers.hwa.COMPUTE_CASES` GEMM as one MAC call with its operands
already on chip, on each dataflow, beside SCALE-Sim's stall-free cycles.

Results go to ``bench/results/fidelity.json``; each tool's records stay there, so
``--only polyc`` reruns polyc alone and keeps the peers' cached answers, and
``--report`` only regenerates ``docs/fidelity.md``'s tables from the JSON.
SCALE-Sim's cycle-level walk takes about a millisecond per request line on this
machine; a layer beyond ``--scalesim-max-lines`` (GEMM 1024^3: 1.14 M lines) takes
its compute cycles from the closed form instead, marked as such.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from bench import results_md
from bench.common import RESULTS, machine
from bench.peers import env, scalesim, stream, zigzag
from bench.peers.hwa import COMPUTE_CASES, HWA, LAYERS, Layer, layer
from bench.peers.report import render_compute, render_runtime, render_table

PATH = RESULTS / "fidelity.json"
CONFIG_PATH = (
    Path(__file__).resolve().parents[1] / "accelerator/hardware/configs/hw-a.toml"
)
TOOLS = ("polyc", "zigzag", "stream", "scalesim")
#: SCALE-Sim runs only layers with at most this many request lines (its cycles)
SCALESIM_MAX_LINES = 150_000
DATAFLOWS = {
    "ws": "weight_stationary",
    "os": "output_stationary",
    "is": "input_stationary",
}


# polyc ---------------------------------------------------------------------------------
def kernel(lay: Layer):
    """The layer as an int8 polyc kernel: int8 x int8 accumulated in int32 and,
    when polyc has the op (``polyc.ops.quant``), requantized to int8 outputs as
    HW-A says (else the int32 accumulator is the output: 4 bytes per element)."""
    from polyc import compute as pc
    from polyc.ops import nn

    if lay.is_conv:
        x = pc.placeholder("x", (1, lay.c, lay.h, lay.w), "int8")
        w = pc.placeholder("w", (lay.n, lay.c, lay.fy, lay.fx), "int8")
        acc = nn.conv2d(x, w, None, lay.stride, lay.pad, name="acc")
    else:
        x = pc.placeholder("A", (lay.m, lay.k), "int8")
        w = pc.placeholder("B", (lay.k, lay.n), "int8")
        acc = nn.matmul(x, w, name="acc")
    quant = _quant()
    out = acc if quant is None else quant.requantize(acc, 1.0 / 64, name="out")
    return pc.kernel(lay.name, [out], inputs=[x, w])


def _quant():
    """``polyc.ops.quant`` when this polyc has it (the int8 requantization op)."""
    try:
        from polyc.ops import quant
    except ImportError:
        return None
    return quant


def int8_inputs(kernel) -> dict:
    """Small random integers (-8..7) for each free input of ``kernel``, seeded."""
    rng = np.random.default_rng(0)
    return {
        a.name: rng.integers(-8, 8, a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }


def run_polyc(name: str, config: str = str(CONFIG_PATH)) -> dict:
    """Compile and simulate one layer on HW-A; its record (an ``error`` instead
    when polyc cannot run it on this config)."""
    import polyc

    lay = layer(name)
    k = kernel(lay)
    start = time.perf_counter()
    try:
        compiled = polyc.compile(k, config=config, checks=False)
        compiled_s = time.perf_counter() - start
        _, report = compiled.run(int8_inputs(k))
    except polyc.PolycError as err:
        return {"layer": name, "error": f"{type(err).__name__}: {err}"}
    run_s = time.perf_counter() - start - compiled_s
    engines = {e.name: e.busy for e in report.engines}
    ops = {e.name: e.ops for e in report.engines}
    tiles = [
        {_tile_name(v): size for v, size in lc.candidate.sizes}
        for lc in compiled.choice.layers
        if lc.candidate is not None
    ]
    return {
        "layer": name,
        "requantized": _quant() is not None,
        "cycles": report.cycles,
        "predicted_cycles": round(compiled.choice.predicted_cycles),
        "mac_busy": engines.get("mac_array", 0),
        # MAC calls and output-path (requantization) operations
        "mac_ops": ops.get("mac_array", 0),
        "dma_busy": max(
            (b for e, b in engines.items() if e.startswith("dma")), default=0
        ),
        "dram_bytes": report.dram_bytes,
        "polyc_roofline": report.roofline_cycles,
        "mac_array_macs": report.mac_array_macs,
        "tiles": tiles,
        "fallbacks": list(report.fallbacks),
        "compile_s": round(compiled_s, 2),
        "simulate_s": round(run_s, 2),
        "wall_s": round(compiled_s + run_s, 2),
    }


def _tile_name(var) -> str:
    """A tile variable as the scheduler's explanation names it: a shared band
    position, or a statement's private iterator."""
    if getattr(var, "iterator", None):
        return f"{var.stmt}.{var.iterator}"
    return f"band{getattr(var, 'position', '?')}"


def compute_only_polyc(m: int, n: int, k: int, dataflow: str, overlap: bool) -> dict:
    """MAC-array cycles of one ``m x n x k`` int8 MAC call whose operands are
    already on chip, on HW-A with ``dataflow``, the stationary register double
    buffered (``overlap``, as HW-A ships) or not: the simulator's busy cycles (SRAMs
    enlarged to hold the operands: capacity does not enter the MAC timing)."""
    import tomllib

    from accelerator.hardware.config import from_dict
    from accelerator.hardware.spec import MacArray
    from accelerator.sim.simulator import Simulator
    from codegen.accel.direct import build_runtime

    with open(CONFIG_PATH, "rb") as f:
        data = tomllib.load(f)
    fields = MacArray.__dataclass_fields__
    if "dataflow" in fields:
        data["mac_array"]["dataflow"] = DATAFLOWS[dataflow]
    if "double_buffered" in fields:
        data["mac_array"]["double_buffered"] = overlap
    for mem in data["memory"][1:]:
        mem["capacity_bytes"] = 1 << 26
    spec = from_dict(data)
    sim = Simulator(build_runtime(), spec)
    a_level, b_level, c_level = _levels(spec)
    a = sim.alloc(a_level, 0, m * k, "A")
    b = sim.alloc(b_level, m * k if b_level == a_level else 0, k * n, "B")
    c = sim.alloc(c_level, 0, 4 * m * n, "C")
    sim.mac(m, n, k, (a, 0, k, 1), (b, 0, n, 1), (c, 0, n, 1), dtype="int8")
    report = sim.finish()
    return {
        "cycles": report.engine("mac_array").busy,
        "total": report.cycles,
        "dataflow_modelled": "dataflow" in fields,
    }


def _levels(spec) -> tuple[str, str, str]:
    """The levels the array reads A and B from and accumulates C in."""
    a = spec.mac_array
    inputs = getattr(a, "input_levels", None) or a.operand_levels
    weights = getattr(a, "weight_levels", None) or a.operand_levels
    return inputs[0], weights[-1], a.accumulator_levels[0]


# peers ---------------------------------------------------------------------------------
def run_peer(tool: str, lay: Layer, peers_dir: Path, timeout: float | None) -> dict:
    """One peer on one layer; its record (``error`` when it failed)."""
    folder = peers_dir / "inputs" / tool
    start = time.perf_counter()
    try:
        if tool == "zigzag":
            out = env.run_driver(
                env.ZIGZAG, peers_dir, zigzag.write_inputs(lay, folder), timeout
            )
        elif tool == "stream":
            out = env.run_driver(
                env.STREAM, peers_dir, stream.write_inputs(lay, folder), timeout
            )
        else:
            out = run_scalesim(lay, folder, peers_dir, timeout)
    except env.PeerError as err:
        return {"layer": lay.name, "error": str(err)}
    out["process_s"] = round(time.perf_counter() - start, 2)
    return out


def run_scalesim(lay: Layer, folder: Path, peers_dir: Path, timeout) -> dict:
    """SCALE-Sim ws with HW-A's DRAM split over its three ports; beyond
    :data:`SCALESIM_MAX_LINES` only the closed form of its compute cycles."""
    m, n, k = lay.gemm()
    formula = scalesim.compute_cycles("ws", m, n, k, HWA.rows, HWA.cols)
    if formula > SCALESIM_MAX_LINES:
        return {"layer": lay.name, "compute_cycles": formula, "source": "formula"}
    job = scalesim.write_inputs(lay, folder, "ws", scalesim.SPLIT)
    out = env.run_driver(env.SCALESIM, peers_dir, job, timeout)
    out["source"] = "run"
    out["formula_cycles"] = formula
    return out


def compute_only(peers_dir: Path | None, timeout) -> list[dict]:
    """The compute-only cases: polyc's MAC-array cycles and SCALE-Sim's, per dataflow
    (SCALE-Sim runs when ``peers_dir`` is given and the case is small)."""
    rows = []
    for case, m, n, k in COMPUTE_CASES:
        row = {"case": case, "m": m, "n": n, "k": k}
        for df in DATAFLOWS:
            formula = scalesim.compute_cycles(df, m, n, k, HWA.rows, HWA.cols)
            entry = {
                "polyc": compute_only_polyc(m, n, k, df, overlap=True),
                "polyc_no_overlap": compute_only_polyc(m, n, k, df, overlap=False),
                "scalesim_formula": formula,
            }
            if peers_dir is not None and formula <= 40_000:
                lay = scalesim.gemm_layer(f"co_{m}x{n}x{k}", m, n, k)
                job = scalesim.write_inputs(lay, peers_dir / "inputs" / "scalesim", df)
                try:
                    got = env.run_driver(env.SCALESIM, peers_dir, job, timeout)
                    entry["scalesim_run"] = got["compute_cycles"]
                except env.PeerError as err:
                    entry["scalesim_error"] = str(err)
            row[df] = entry
        rows.append(row)
    return rows


# the benchmark -------------------------------------------------------------------------
def load() -> dict:
    return json.loads(PATH.read_text()) if PATH.exists() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=TOOLS, default=list(TOOLS))
    parser.add_argument("--layers", nargs="*", default=[lay.name for lay in LAYERS])
    parser.add_argument("--peers-dir", type=Path, default=env.DEFAULT_DIR)
    parser.add_argument("--peer-timeout", type=float, default=1800.0)
    parser.add_argument("--report", action="store_true", help="only rewrite the docs")
    args = parser.parse_args(argv)
    data = load()
    if not args.report:
        data = run(data, args)
        PATH.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {PATH}")
    print(render_table(data), render_runtime(data), render_compute(data), sep="\n\n")
    results_md.regenerate_for(PATH)
    return 0


def run(data: dict, args) -> dict:
    """Run the chosen tools on the chosen layers, over the records in ``data``."""
    data = dict(data)
    data["machine"] = machine()
    data["hardware"] = asdict(HWA)
    data["layers"] = [
        {**asdict(lay), "gemm": lay.gemm(), "macs": lay.macs,
         "bytes": lay.operand_bytes(), "roofline": lay.roofline()}
        for lay in LAYERS
    ]  # fmt: skip
    results = data.setdefault("results", {})
    peers = [t for t in args.only if t != "polyc"]
    for tool in peers:
        env.ensure(env.PEERS[tool], args.peers_dir)
    data.setdefault("versions", {}).update({t: list(env.PEERS[t].pins) for t in peers})
    for tool in args.only:
        records = results.setdefault(tool, {})
        for name in args.layers:
            print(f"{tool} {name} ...", flush=True)
            if tool == "polyc":
                records[name] = run_polyc(name)
            else:
                records[name] = run_peer(
                    tool, layer(name), args.peers_dir, args.peer_timeout
                )
            print(f"   {records[name]}", flush=True)
    if "polyc" in args.only or "scalesim" in args.only:
        peers_dir = args.peers_dir if "scalesim" in args.only else None
        old = {r["case"]: r for r in data.get("compute_only", [])}
        rows = compute_only(peers_dir, args.peer_timeout)
        for r in rows:  # keep SCALE-Sim's earlier runs when it was not rerun
            for df in DATAFLOWS:
                prev = old.get(r["case"], {}).get(df, {})
                if "scalesim_run" in prev and "scalesim_run" not in r[df]:
                    r[df]["scalesim_run"] = prev["scalesim_run"]
        data["compute_only"] = rows
    return data


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
