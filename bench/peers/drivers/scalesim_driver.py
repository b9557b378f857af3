"""Run SCALE-Sim on one job (JSON on stdin); print the layer's cycles.

Runs inside the SCALE-Sim venv (bench/peers/env.py), so it imports only the
standard library and scalesim. The API is used instead of the CLI because the CLI
ignores ``-s`` and writes every cycle-level trace to disk.
"""

import contextlib
import io
import json
import sys
import time


def main() -> None:
    job = json.load(sys.stdin)
    from scalesim.scale_sim import scalesim

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        sim = scalesim(
            save_disk_space=True,
            verbose=False,
            config=job["config"],
            topology=job["topology"],
            layout=job["layout"],
            input_type_gemm=job["gemm"],
        )
        sim.run_scale(top_path=job["out"])
    wall = time.perf_counter() - start
    layer = sim.runner.single_layer_sim_object_list[0]
    incl_prefetch, total, stall, util, mapping_eff, _ = layer.get_compute_report_items()
    print(
        json.dumps(
            {
                "layer": job["layer"],
                "cycles": int(total),  # compute + stalls ("Total Cycles")
                "stall_cycles": int(stall),
                "compute_cycles": int(total) - int(stall),
                "incl_prefetch": int(incl_prefetch),
                "overall_util_pct": round(float(util), 3),
                "mapping_eff_pct": round(float(mapping_eff), 3),
                # words (bytes: SCALE-Sim's word is 1 byte) moved to and from DRAM
                "dram_reads": int(layer.ifmap_dram_reads + layer.filter_dram_reads),
                "dram_writes": int(layer.ofmap_dram_writes),
                "wall_s": round(wall, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
