"""HW-A and the fidelity layers, described once for every tool.

:data:`HWA` holds the numbers of issue 13's shared hardware description (and the
values it leaves open, chosen once); ``accelerator/hardware/configs/hw-a.toml`` says
the same to polyc (``tests/bench/test_fidelity.py`` checks they agree), and the
writers in :mod:`bench.peers.zigzag`, :mod:`bench.peers.stream` and
:mod:`bench.peers.scalesim` turn it into each peer's input files. A :class:`Layer` is
a GEMM ``C[M, N] = A[M, K] @ B[K, N]`` or a convolution; a convolution's GEMM view is
its im2col form (``M`` output pixels, ``K = C * FY * FX``, ``N`` filters), which is
how SCALE-Sim maps it and what the closed forms below use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: the shipped polyc config of HW-A
CONFIG = "hw-a"


@dataclass(frozen=True)
class Hardware:
    """The numbers every tool is given (see the module docstring)."""

    rows: int = 32  # MAC array rows (the reduction dimension in weight-stationary)
    cols: int = 32  # MAC array columns (output channels in weight-stationary)
    sram_bytes: int = 256 * 1024  # each of the input, weight and output SRAMs
    dram_bytes_per_cycle: int = 32  # one channel shared by reads and writes
    clock_ghz: float = 1.0
    operand_bytes: int = 1  # int8 inputs, weights and final outputs
    psum_bytes: int = 4  # int32 partial sums on chip
    # chosen where HW-A says nothing (the same in every tool)
    latency_cycles: int = 1  # SRAM and DRAM
    in_sram_bytes_per_cycle: int = 32  # input and weight SRAM ports
    out_sram_psums_per_cycle: int = 32  # output SRAM port, int32 partial sums
    # the PEs hold two weights, so the next fold's weights shift in while the
    # current fold streams (TPU v1's double-buffered weight tiles); polyc:
    # [mac_array] double_buffered = true, ZigZag and Stream: a 2-weight register
    weight_reg_words: int = 2
    # placeholder energies in pJ (ZigZag and Stream need them; they do not change
    # latency): per access of one port word
    mac_pj: float = 0.04
    reg_pj: float = 0.01
    psum_reg_pj: float = 0.02
    sram_read_pj: float = 10.0  # per 256-bit word of the input or weight SRAM
    sram_write_pj: float = 12.0
    out_sram_read_pj: float = 40.0  # per 1024-bit word (32 int32 partial sums)
    out_sram_write_pj: float = 48.0
    dram_pj: float = 1000.0  # per 256-bit DRAM word, read or written

    @property
    def macs_per_cycle(self) -> int:
        return self.rows * self.cols


HWA = Hardware()


@dataclass(frozen=True)
class Layer:
    """One layer of the suite: a GEMM (``fy == fx == 0``) or a convolution.

    GEMM: ``m x k`` times ``k x n``. Convolution: ``c`` input channels, ``n``
    filters, an ``h x w`` input, ``fy x fx`` taps, ``stride``, ``pad`` on each side.
    """

    name: str
    what: str
    why: str  # the effect the layer stresses
    m: int = 0
    n: int = 0
    k: int = 0
    c: int = 0
    h: int = 0
    w: int = 0
    fy: int = 0
    fx: int = 0
    stride: int = 1
    pad: int = 0

    @property
    def is_conv(self) -> bool:
        return self.fy > 0

    @property
    def oy(self) -> int:
        return (self.h + 2 * self.pad - self.fy) // self.stride + 1

    @property
    def ox(self) -> int:
        return (self.w + 2 * self.pad - self.fx) // self.stride + 1

    def gemm(self) -> tuple[int, int, int]:
        """``(M, N, K)`` of the layer's GEMM view (im2col for a convolution)."""
        if self.is_conv:
            return self.oy * self.ox, self.n, self.c * self.fy * self.fx
        return self.m, self.n, self.k

    @property
    def macs(self) -> int:
        m, n, k = self.gemm()
        return m * n * k

    def operand_bytes(self, hw: Hardware = HWA) -> dict[str, int]:
        """Bytes of the input, weight and output, each counted once."""
        b = hw.operand_bytes
        if self.is_conv:
            return {
                "input": self.c * self.h * self.w * b,
                "weight": self.n * self.c * self.fy * self.fx * b,
                "output": self.n * self.oy * self.ox * b,
            }
        return {
            "input": self.m * self.k * b,
            "weight": self.k * self.n * b,
            "output": self.m * self.n * b,
        }

    def roofline(self, hw: Hardware = HWA) -> int:
        """HW-A's roofline: ``max(MACs / 1024, (in + w + out bytes) / 32)``."""
        compute = math.ceil(self.macs / hw.macs_per_cycle)
        memory = math.ceil(
            sum(self.operand_bytes(hw).values()) / hw.dram_bytes_per_cycle
        )
        return max(compute, memory)


def conv(name, what, why, c, n, hw_, f, stride=1, pad=0) -> Layer:
    return Layer(
        name, what, why, n=n, c=c, h=hw_, w=hw_, fy=f, fx=f, stride=stride, pad=pad
    )


#: the suite: the issue's three layers, then three that stress other effects
LAYERS: tuple[Layer, ...] = (
    Layer("gemm_256", "GEMM 256^3", "the issue's layer: compute-bound, 8 x 8 x 8 folds",
          m=256, n=256, k=256),
    Layer("gemm_1024", "GEMM 1024^3", "the issue's layer: operands exceed the SRAMs",
          m=1024, n=1024, k=1024),
    conv("conv3x3_56", "conv 3x3 64->64 56x56 s1 p1",
         "the issue's layer: K = 576 (18 row folds), 3,136 pixels", 64, 64, 56, 3, 1, 1),
    conv("conv1x1_28", "conv 1x1 256->128 28x28",
         "pointwise: a GEMM whose input is the largest operand", 256, 128, 28, 1),
    Layer("gemm_decode", "GEMM 16x512x512 (decode-like)",
          "skinny M = 16: per-fold fill and weight loads dominate, DRAM-bound",
          m=16, n=512, k=512),
    conv("conv3x3_c3", "conv 3x3 3->32 112x112 s1 p1",
         "first layer: K = 27 < 32 rows (a partial fold), output-bound DRAM",
         3, 32, 112, 3, 1, 1),
)  # fmt: skip

#: compute-only cases: operands already on chip, one GEMM each (M, N, K)
COMPUTE_CASES: tuple[tuple[str, int, int, int], ...] = (
    ("gemm_256", 256, 256, 256),
    ("conv3x3_56 (im2col)", 3136, 64, 576),
    ("partial 100x40x50", 100, 40, 50),
    ("gemm_decode", 16, 512, 512),
    ("conv3x3_c3 (im2col)", 12544, 32, 27),
)


def layer(name: str) -> Layer:
    """The suite's layer called ``name`` (KeyError when there is none)."""
    for lay in LAYERS:
        if lay.name == name:
            return lay
    raise KeyError(name)
