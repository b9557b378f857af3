"""Run ZigZag on one job (JSON on stdin); print the layer's latency breakdown.

Runs inside the ZigZag venv (bench/peers/env.py), so it imports only the standard
library and zigzag. The job names the accelerator, mapping and workload files
(bench/peers/zigzag.py writes them), the dump folder and LOMA's ``lpf_limit``.
"""

import json
import logging
import sys
import time


def leaves(entries):
    """The cost model evaluations of a ZigZag result: the list nests
    ``(cme, extra)`` pairs whose extra may be a list of the same."""
    for cme, extra in entries:
        yield cme
        if isinstance(extra, list):
            yield from leaves(extra)


def main() -> None:
    job = json.load(sys.stdin)
    # ZigZag logs at INFO to the root logger; stdout carries only the result
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # "opts": several of ZigZag's objectives in one process (one result each,
    # under "runs"); else "opt" (default latency)
    if "opts" in job:
        runs = {opt: run(dict(job, opt=opt)) for opt in job["opts"]}
        print(json.dumps({"layer": job["layer"], "runs": runs}))
    else:
        print(json.dumps(run(job)))


def run(job) -> dict:
    from zigzag.api import get_hardware_performance_zigzag

    start = time.perf_counter()
    energy, latency, cmes = get_hardware_performance_zigzag(
        job["workload"],
        job["accelerator"],
        job["mapping"],
        opt=job.get("opt", "latency"),
        dump_folder=job["dump"] + (f"-{job['opt']}" if "opt" in job else ""),
        lpf_limit=job["lpf_limit"],
        loma_show_progress_bar=False,
    )
    wall = time.perf_counter() - start
    layers = [c for c in leaves(cmes) if hasattr(c, "layer")]
    cme = layers[-1]
    result = {
        "layer": job["layer"],
        "cycles": round(latency),
        "wall_s": round(wall, 2),
        "energy_pj": float(energy),
        "breakdown": {
            "ideal_cycle": int(cme.ideal_cycle),
            "ideal_temporal_cycle": int(cme.ideal_temporal_cycle),
            "stall_slack_comb": int(cme.stall_slack_comb),
            "data_onloading_cycle": int(cme.data_onloading_cycle),
            "data_offloading_cycle": int(cme.data_offloading_cycle),
            "systolic_drain_cycle": int(cme.systolic_drain_cycle),
            "mac_spatial_utilization": round(float(cme.mac_spatial_utilization), 4),
        },
        "spatial_mapping": str(cme.spatial_mapping),
        "temporal_mapping": " | ".join(str(cme.temporal_mapping).split("\n"))[:800],
    }
    return result


if __name__ == "__main__":
    main()
