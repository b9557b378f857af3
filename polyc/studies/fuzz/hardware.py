"""Random valid hardware descriptions, in the shape of the shipped TOML files.

:func:`random_config` draws a description that :func:`accelerator.hardware.config.from_dict`
accepts: MAC arrays from 2x2 to 64x64 (square or not) of a random dataflow,
double-buffered or not, taking a random subset of int8/float16/float32 at full or
fractional rates; a vector unit of 1 to 64 lanes;
one to three SRAM levels from a few KiB to MiBs, each no larger than the one above
it, with random banks, alignment, bandwidth and latency, the innermost sometimes
split into one SRAM per operand role; DRAM's bandwidth sometimes split between
reads and writes; the requantizer in the array's output path or not; one to eight
DMA channels with one to four dimensions per descriptor. Small levels and odd shapes are drawn
on purpose: they make the scheduler tile, spill, split and fall back.
"""

from __future__ import annotations

import random

from accelerator.hardware.config import from_dict
from accelerator.hardware.spec import DATAFLOWS, Spec

ARRAY_SIDES = (2, 3, 4, 4, 8, 8, 16, 16, 32, 64)
KIB = 1024


#: every dataflow, with and without a double-buffered stationary register
_DATAFLOWS = [
    {"dataflow": d, "double_buffered": b} for d in DATAFLOWS for b in (True, False)
]


def random_config(rng: random.Random, name: str = "fuzz") -> dict:
    """A random hardware description as a dict (see the module docstring)."""
    rows = rng.choice(ARRAY_SIDES)
    cols = rows if rng.random() < 0.6 else rng.choice(ARRAY_SIDES)
    dtypes = {}
    for dt in ("int8", "float16", "float32"):
        if rng.random() < 0.8:
            rate = rng.choice((1.0, 1.0, 2.0, 0.5, 0.25))
            dtypes[dt] = {"macs_per_cycle": rate, "pj_per_mac": 1.0}
    if not dtypes:
        dtypes["float32"] = {"macs_per_cycle": 1.0, "pj_per_mac": 1.0}
    levels = _levels(rng)
    inner = levels[-1]["name"]
    engines = [inner]
    if len(levels) > 2 and rng.random() < 0.2:
        engines = [levels[-2]["name"], inner]  # the engines may also reach the next
    roles = {"operand_levels": engines, "accumulator_levels": engines}
    vector_levels = engines
    if rng.random() < 0.25:  # one SRAM per operand role, as HW-A and the peers have
        roles, vector_levels = _split_roles(rng, levels)
    lanes = rng.choice((1, 2, 4, 8, 16, 64))
    return {
        "name": name,
        "description": "a random point of the fuzzer's hardware space",
        "clock_ghz": 1.0,
        "mac_array": {
            "rows": rows,
            "cols": cols,
            **rng.choice(_DATAFLOWS),
            **roles,
            "requantize": rng.random() < 0.3,
            "dtypes": dtypes,
        },
        "vector": {
            "lanes": lanes,
            "levels": vector_levels,
            "pj_per_op": 0.5,
            "cycles": {
                "add": rng.choice((1, 1, 2)),
                "mul": rng.choice((1, 1, 2)),
                "compare": 1,
                "divide": rng.choice((2, 4, 8)),
                "transcendental": rng.choice((4, 8, 16)),
                "reduce": rng.choice((1, 2, 6)),
            },
        },
        "scalar": {
            "statement_cycles": rng.choice((1, 2)),
            "issue_cycles": rng.choice((0, 1, 2)),
            "queue_depth": rng.choice((1, 2, 4, 16, 64)),
            "pj_per_op": 4.0,
            "cycles": {
                "add": 1,
                "mul": rng.choice((1, 2)),
                "compare": 1,
                "divide": rng.choice((4, 8, 20)),
                "transcendental": rng.choice((10, 20, 40)),
            },
        },
        "memory": levels,
        "dma": {
            "channels": rng.choice((1, 1, 2, 3, 4, 8)),
            "setup_cycles": rng.choice((0, 1, 4, 16, 32)),
            "bytes_per_cycle": rng.choice((1.0, 4.0, 8.0, 16.0, 64.0)),
            "max_dims": rng.choice((1, 2, 3, 4)),
        },
    }


def _levels(rng: random.Random) -> list[dict]:
    dram = {
        "name": "dram",
        "kind": "dram",
        "capacity_bytes": 1 << 30,
        "bytes_per_cycle": rng.choice((2.0, 8.0, 16.0, 32.0, 151.7)),
        "latency_cycles": rng.choice((0, 20, 100)),
        "banks": 1,
        "alignment_bytes": 1,
        "read_pj_per_byte": 100.0,
        "write_pj_per_byte": 100.0,
    }
    if rng.random() < 0.25:  # a read/write split of the DRAM's bandwidth
        bw = dram["bytes_per_cycle"]
        dram["read_bytes_per_cycle"] = bw * rng.choice((0.25, 0.5, 0.75, 1.0))
        dram["write_bytes_per_cycle"] = bw * rng.choice((0.25, 0.5, 0.75, 1.0))
    n = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    # innermost first: a few KiB to a few MiB, each outer level 2-64x larger
    sizes = [rng.choice((2, 3, 4, 6, 8, 16, 48, 64, 256, 1024, 4096)) * KIB]
    for _ in range(n - 1):  # at most 64 MiB: DRAM (1 GiB) stays the largest level
        sizes.append(min(sizes[-1] * rng.choice((2, 4, 8, 64)), 64 << 20))
    out = [dram]
    for i, size in enumerate(reversed(sizes)):
        align = rng.choice((1, 4, 16, 64))
        banks = rng.choice([b for b in (1, 2, 4, 8, 32) if size % b == 0])
        out.append(
            {
                "name": f"l{i + 1}" if i + 1 < n else "local",
                "kind": "sram",
                "capacity_bytes": size,
                "bytes_per_cycle": rng.choice((4.0, 16.0, 64.0, 256.0)),
                "latency_cycles": rng.choice((1, 2, 20)),
                "banks": banks,
                "alignment_bytes": align,
                "read_pj_per_byte": 2.0,
                "write_pj_per_byte": 2.0,
            }
        )
    return out


def _split_roles(rng: random.Random, levels: list[dict]) -> tuple[dict, list[str]]:
    """Replace the innermost SRAM by one per operand role (inputs, weights,
    accumulators), each a random share of its size; the vector unit reaches the
    accumulators' SRAM and, sometimes, the inputs' (else its results that feed the
    array go through DRAM)."""
    local = levels.pop()
    names = ("inbuf", "wbuf", "outbuf")
    for name in names:
        size = max(local["capacity_bytes"] // rng.choice((1, 2, 4)), 2 * KIB)
        banks = rng.choice([b for b in (1, 2, 4) if size % b == 0])
        levels.append({**local, "name": name, "capacity_bytes": size, "banks": banks})
    roles = {
        "input_levels": ["inbuf"],
        "weight_levels": ["wbuf"],
        "accumulator_levels": ["outbuf"],
    }
    vector = ["outbuf", "inbuf"] if rng.random() < 0.6 else ["outbuf"]
    return roles, vector


def spec_of(hardware: str | dict) -> Spec:
    """The Spec of a case's hardware: a shipped name or a description dict."""
    if isinstance(hardware, str):
        from accelerator import load_config

        return load_config(hardware)
    return from_dict(hardware, source=f"<fuzz {hardware.get('name', '?')}>")


def describe(hardware: str | dict) -> str:
    """A short label: the shipped name, or the array, levels and channels."""
    if isinstance(hardware, str):
        return hardware
    a = hardware["mac_array"]
    mem = "/".join(_kib(m["capacity_bytes"]) for m in hardware["memory"][1:])
    return f"{a['rows']}x{a['cols']} {mem} {hardware['dma']['channels']}ch"


def _kib(n: int) -> str:
    return f"{n // (1 << 20)}M" if n >= 1 << 20 else f"{n // KIB}K"
