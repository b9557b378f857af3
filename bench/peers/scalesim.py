"""HW-A and the layers as SCALE-Sim 3.0.0 inputs, and SCALE-Sim's compute formula.

SCALE-Sim is cycle-level for the systolic array: it builds, fold by fold, the
matrices of the SRAM requests each cycle (``scalesim/compute/systolic_compute_*.py``)
and walks them, adding a stall whenever the double-buffered SRAMs' DRAM prefetch
(``scalesim/memory/double_buffered_scratchpad_mem.py``) falls behind. Without stalls
its cycles are the closed forms of :func:`compute_cycles` (checked against every run
the benchmark makes). DRAM has no shared channel in SCALE-Sim: each operand has its
own backing bandwidth in words (bytes) per cycle; the input and filter ones come from
``[layout] *SRAMBankBandwidth`` and ``Bandwidth`` feeds only the output, so HW-A's 32
B/cycle is split by hand as :data:`SPLIT` (11 + 11 + 10).
"""

from __future__ import annotations

import math
from pathlib import Path

from bench.peers.hwa import HWA, Hardware, Layer

#: HW-A's one 32 B/cycle channel split into SCALE-Sim's three per-operand ports
SPLIT = {"ifmap": 11, "filter": 11, "ofmap": 10}
DATAFLOWS = ("ws", "os", "is")


def compute_cycles(dataflow: str, m: int, n: int, k: int, rows: int, cols: int) -> int:
    """SCALE-Sim's stall-free cycles for an ``m x k`` by ``k x n`` GEMM.

    SCALE-Sim maps (``topology_utils.calc_spatio_temporal_params``) ws: K on rows,
    N on columns, M streamed; os: M on rows, N on columns, K streamed; is: K on rows,
    M on columns, N streamed. Every fold of the array over its two spatial sizes
    pays its whole fill and drain, with no overlap between folds (a partial fold is
    padded to the full array): ``2R + C + T - 2`` request lines per fold for ws and
    is (R lines to load the stationary operand, T streamed, C - 1 to drain, R - 1
    of skew), ``R + C + T - 2`` for os; its reported cycles are the last line's
    0-based index, hence the ``- 1``.

    Raises:
        ValueError: an unknown dataflow.
    """
    r, c = rows, cols
    if dataflow == "ws":
        return math.ceil(k / r) * math.ceil(n / c) * (2 * r + c + m - 2) - 1
    if dataflow == "os":
        return math.ceil(m / r) * math.ceil(n / c) * (r + c + k - 2) - 1
    if dataflow == "is":
        return math.ceil(k / r) * math.ceil(m / c) * (2 * r + c + n - 2) - 1
    raise ValueError(f"compute_cycles: unknown dataflow {dataflow!r}")


def config(
    dataflow: str = "ws", bandwidth: dict[str, int] | None = None, hw: Hardware = HWA
) -> str:
    """A SCALE-Sim config: compute only (``CALC``: the interface bandwidth is
    whatever avoids every stall) when ``bandwidth`` is None, else ``USER`` with the
    given per-operand DRAM words per cycle. The ``[layout]`` and ``[sparsity]``
    sections are required by 3.0.0 even when unused."""
    bw = bandwidth or {"ifmap": 10, "filter": 10, "ofmap": 10}
    kb = hw.sram_bytes // 1024
    mode = "CALC" if bandwidth is None else "USER"
    return f"""[general]
run_name = hwa_{dataflow}_{mode.lower()}

[architecture_presets]
ArrayHeight: {hw.rows}
ArrayWidth: {hw.cols}
IfmapSramSzkB: {kb}
FilterSramSzkB: {kb}
OfmapSramSzkB: {kb}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: {bw["ofmap"]}
Dataflow: {dataflow}
MemoryBanks: 1
ReadRequestBuffer: 512
WriteRequestBuffer: 512

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bw["ifmap"]}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bw["filter"]}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""


def topology(lay: Layer) -> tuple[str, bool]:
    """The topology CSV of one layer and whether it is a GEMM topology. Rows end
    with a comma (SCALE-Sim drops the last field); a convolution has no padding
    field, so the padded input size is given."""
    if not lay.is_conv:
        return f"Layer, M, N, K,\n{lay.name}, {lay.m}, {lay.n}, {lay.k},\n", True
    head = "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, "
    head += "Channels, Num Filter, Strides,\n"
    h, w = lay.h + 2 * lay.pad, lay.w + 2 * lay.pad
    row = f"{lay.name}, {h}, {w}, {lay.fy}, {lay.fx}, {lay.c}, {lay.n}, {lay.stride},\n"
    return head + row, False


def gemm_layer(name: str, m: int, n: int, k: int) -> Layer:
    return Layer(name, f"{m}x{n}x{k}", "compute-only case", m=m, n=n, k=k)


def write_inputs(
    lay: Layer, folder: Path, dataflow: str, bandwidth: dict | None = None
) -> dict:
    """Write the config, topology and (empty) layout under ``folder``; the job."""
    folder.mkdir(parents=True, exist_ok=True)
    mode = "calc" if bandwidth is None else "user"
    cfg = folder / f"hwa_{dataflow}_{mode}.cfg"
    cfg.write_text(config(dataflow, bandwidth))
    text, is_gemm = topology(lay)
    topo = folder / f"{lay.name}.csv"
    topo.write_text(text)
    # SCALE-Sim opens a layout file even with custom layouts off
    layout = folder / "layout_empty.csv"
    layout.write_text("Layer name, IFMAP Height Intraline Factor,\n")
    out = folder / "out" / f"{lay.name}_{dataflow}_{mode}"
    out.parent.mkdir(exist_ok=True)  # SCALE-Sim makes only the last folder
    return {
        "layer": lay.name,
        "config": str(cfg),
        "topology": str(topo),
        "layout": str(layout),
        "gemm": is_gemm,
        "out": str(out),
    }
