"""One layer's best hardware point per objective, polyc's against ZigZag's.

    python -m bench.codesign_zigzag [--peers-dir DIR] [--lpf-limit N]

The layer: a ResNet 3x3 convolution (64 -> 64 channels, 28x28, stride 1, pad 1;
int8, int32 partial sums, int8 outputs). The space: HW-A (``hw-a``, the
hardware both tools already describe alike, :mod:`bench.peers.hwa`) with its
array 16x16 or 32x32 and its DRAM 16 or 32 B/cycle (4 points; the three SRAMs
stay 256 KiB each, energies per byte stay HW-A's). Per point and per objective
(cycles, energy, EDP): polyc compiles the layer with that objective and simulates
it (timing-only: the same cycles and energy); ZigZag 3.9.1 (its own venv,
:mod:`bench.peers.env`) searches its mapping with that objective (``latency``,
``energy``, ``EDP``). Each tool's best point per objective is the one its own
numbers rank first.

Energies are dynamic (polyc's leakage is set to 0: ZigZag has none), with the
same pJ per byte in both: ZigZag's per-word figures are HW-A's per-byte ones times
the port word (its DRAM word is the DRAM's bytes per cycle), and its PE
registers cost 0 (polyc charges no PE register). Writes
``bench/results/codesign_zigzag.json`` and the table in docs/codesign.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from bench import results_md
from bench.common import RESULTS, machine
from bench.peers import env, zigzag
from bench.peers.hwa import HWA, Hardware, conv

PATH = RESULTS / "codesign_zigzag.json"
#: the layer: ResNet-18's stage-2 3x3 convolution (ImageNet sizes)
LAYER = conv(
    "conv3x3_28",
    "conv 3x3 64->64 28x28 s1 p1",
    "ResNet-18 stage 2's 3x3 convolution",
    64,
    64,
    28,
    3,
    1,
    1,
)
ARRAYS = (16, 32)
DRAM = (16, 32)
#: polyc's objective word, ZigZag's
OBJECTIVES = {"cycles": "latency", "energy": "energy", "edp": "EDP"}


def points() -> list[dict]:
    return [{"array": a, "dram": d} for a in ARRAYS for d in DRAM]


def label(p: dict) -> str:
    return f"{p['array']}x{p['array']}, DRAM {p['dram']} B/cycle"


def polyc_spec(p: dict):
    """hw-a at point ``p``, without leakage."""
    import accelerator

    [spec] = accelerator.vary(
        "hw-a",
        {
            "mac_array.rows": [p["array"]],
            "mac_array.cols": [p["array"]],
            "memory.dram.bytes_per_cycle": [p["dram"]],
            "area.leakage_mw_per_mm2": [0.0],
        },
    )
    return spec


def zigzag_hardware(p: dict) -> Hardware:
    """HW-A for ZigZag at point ``p``: the same pJ per byte (the DRAM word is
    the DRAM's bytes per cycle), PE registers free."""
    return dataclasses.replace(
        HWA,
        rows=p["array"],
        cols=p["array"],
        dram_bytes_per_cycle=p["dram"],
        dram_pj=HWA.dram_pj * p["dram"] / HWA.dram_bytes_per_cycle,
        reg_pj=0.0,
        psum_reg_pj=0.0,
    )


def run_polyc(p: dict, objective: str) -> dict:
    import polyc
    from bench.fidelity import kernel

    k = kernel(LAYER)
    start = time.perf_counter()
    compiled = polyc.compile(k, config=polyc_spec(p), checks=False, objective=objective)
    _, report = compiled.run(functional=False)
    return {
        "cycles": report.cycles,
        "energy_pj": report.energy_pj,
        "dram_bytes": report.dram_bytes,
        "mac_busy": report.engine("mac_array").busy,
        "wall_s": round(time.perf_counter() - start, 2),
    }


def run_zigzag(p: dict, peers_dir: Path, lpf: int, timeout) -> dict:
    """ZigZag on the layer at point ``p``, once per objective, in one process."""
    hw = zigzag_hardware(p)
    folder = peers_dir / "inputs" / "codesign" / f"a{p['array']}_d{p['dram']}"
    job = zigzag.write_inputs(LAYER, folder, hw)
    job.update(lpf_limit=lpf, opts=list(OBJECTIVES.values()))
    out = env.run_driver(env.ZIGZAG, peers_dir, job, timeout)
    return {
        ours: {k: out["runs"][theirs][k] for k in ("cycles", "energy_pj", "wall_s")}
        | {"temporal_mapping": out["runs"][theirs]["temporal_mapping"]}
        for ours, theirs in OBJECTIVES.items()
    }


def best(rows: list[dict], tool: str, objective: str) -> dict:
    """The row whose ``tool`` run for ``objective`` ranks first by it."""

    def value(row):
        r = row[tool][objective]
        if objective == "cycles":
            return r["cycles"]
        if objective == "energy":
            return r["energy_pj"]
        return r["energy_pj"] * r["cycles"]

    return min(rows, key=value)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peers-dir", type=Path, default=env.DEFAULT_DIR)
    p.add_argument("--lpf-limit", type=int, default=6, help="ZigZag's LOMA limit")
    p.add_argument("--timeout", type=float, default=1800.0)
    args = p.parse_args(argv)
    env.ensure(env.ZIGZAG, args.peers_dir)
    rows = []
    for point in points():
        row = {"point": point, "label": label(point)}
        row["polyc"] = {obj: run_polyc(point, obj) for obj in OBJECTIVES}
        row["zigzag"] = run_zigzag(point, args.peers_dir, args.lpf_limit, args.timeout)
        rows.append(row)
        print(f"{row['label']}: polyc {row['polyc']['cycles']['cycles']:,} cycles, "
              f"zigzag {row['zigzag']['cycles']['cycles']:,}", flush=True)  # fmt: skip
    payload = {
        "machine": machine(),
        "layer": dataclasses.asdict(LAYER),
        "lpf_limit": args.lpf_limit,
        "zigzag": dict(env.installed(env.ZIGZAG, args.peers_dir)),
        "rows": rows,
    }
    import json

    PATH.write_text(json.dumps(payload, indent=1) + "\n")
    print(table(payload))
    results_md.regenerate_for(PATH)
    return 0


def table(payload: dict) -> str:
    """Per objective: each tool's best point, with both tools' numbers there."""
    rows = payload["rows"]
    lines = [
        "| objective | tool | best point | its cycles (polyc / ZigZag) "
        "| its energy uJ (polyc / ZigZag) | same point |",
        "|---|---|---|---|---|---|",
    ]
    for obj in OBJECTIVES:
        picks = {tool: best(rows, tool, obj) for tool in ("polyc", "zigzag")}
        same = picks["polyc"] is picks["zigzag"]
        for tool, row in picks.items():
            ours, theirs = row["polyc"][obj], row["zigzag"][obj]
            lines.append(
                f"| {obj} | {'polyc' if tool == 'polyc' else 'ZigZag'} | "
                f"{row['label']} | {ours['cycles']:,} / {theirs['cycles']:,} | "
                f"{ours['energy_pj'] / 1e6:.2f} / {theirs['energy_pj'] / 1e6:.2f} | "
                f"{'yes' if same else 'no'} |"
            )
    lines += [
        "",
        "| point | polyc cycles | ZigZag cycles | polyc energy uJ | ZigZag energy uJ "
        "| polyc DRAM bytes |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        ours, theirs = row["polyc"]["cycles"], row["zigzag"]["cycles"]
        lines.append(
            f"| {row['label']} | {ours['cycles']:,} | {theirs['cycles']:,} | "
            f"{ours['energy_pj'] / 1e6:.2f} | {theirs['energy_pj'] / 1e6:.2f} | "
            f"{ours['dram_bytes']:,} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
