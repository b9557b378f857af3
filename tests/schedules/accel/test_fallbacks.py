"""No silent cliffs (issue 11, finding 3): a C loop nest with its init inside the
loops is scheduled like the compute API's, symbolic sizes are fixed from the
command line, a fused group that fits nothing is split instead of running
DRAM-direct, and whatever still falls back says which layer, why and the fix."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from polyc import compute as pc
from polyc.cli import main
from polyc.errors import ArgumentError

GEMM = """
#define N 48
void gemm(float A[N][N], float B[N][N], float C[N][N]) {
#pragma scop
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      C[i][j] = 0;
      for (int k = 0; k < N; k++)
        C[i][j] += A[i][k] * B[k][j];
    }
#pragma endscop
}
"""


def test_textbook_c_gemm_is_placed_not_dram_direct():
    """Literal sizes, ``C[i][j] = 0`` inside the j loop: one loop chain of two
    statements, which ran DRAM-direct at 6,723x the roofline on edge-npu."""
    src = (
        GEMM.replace("#define N 48\n", "").replace("[N]", "[48]").replace("< N", "< 48")
    )
    (kernel,) = polyc.from_c(src)
    compiled = polyc.compile(kernel, config="edge-npu")
    rng = np.random.default_rng(0)
    a, b = (rng.random((48, 48)).astype(np.float32) for _ in range(2))
    out, report = compiled.run(A=a, B=b)
    np.testing.assert_allclose(out["C"], a @ b, rtol=1e-5)
    assert compiled.mode == "placed" and report.ratio < 2.0, str(compiled)
    assert compiled.fallbacks() == []


def test_define_sizes_are_fixed_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "gemm.c"
    path.write_text(GEMM)
    assert main(["compile", str(path), "--config", "edge-npu"]) == 0
    out = capsys.readouterr().out
    assert "mode: placed" in out and "match the interpreter: yes" in out


def test_symbolic_sizes_say_how_to_fix_them():
    n = pc.param("N")
    a = pc.placeholder("A", (n, 8))
    b = pc.placeholder("B", (8, 8))
    k = pc.reduce_axis(8, "k")
    c = pc.compute("C", (n, 8), lambda i, j: pc.sum(a[i, k] * b[k, j], k))
    kernel = pc.kernel("mm", [c])
    compiled = polyc.compile(kernel, config="tiny")
    (note,) = compiled.fallbacks()
    assert "sizes are symbolic (N)" in note
    assert "kernel.specialize(N=...)" in note and "--param N=VALUE" in note
    assert "fallbacks (1):" in str(compiled)
    fixed = polyc.compile(kernel.specialize(N=12), config="tiny")
    assert fixed.mode == "placed" and fixed.fallbacks() == []


def test_specialize_keeps_the_program_and_its_schedule():
    import schedules

    n = pc.param("N")
    a = pc.placeholder("A", (n, n))
    out = pc.compute("B", (n, n), lambda i, j: a[j, i] * 2.0)
    kernel = pc.kernel("t", [out])
    tiled = schedules.tile(kernel, "S0", {"i": 4})
    fixed = tiled.specialize(N=10)
    assert fixed.params == () and fixed.arrays["B"].concrete_shape({}) == (10, 10)
    x = np.arange(100, dtype=np.float32).reshape(10, 10)
    np.testing.assert_array_equal(polyc.interpret(fixed, {"A": x})["B"], x.T * 2)
    assert "S0_t" in schedules.to_yaml(fixed)  # the tile loops are still there
    replayed = schedules.replay(fixed.original, fixed.history).schedule
    assert replayed.get_map().is_equal(fixed.schedule.get_map())


def test_specialize_refuses_bad_values():
    n = pc.param("N")
    a = pc.placeholder("A", (n,))
    kernel = pc.kernel("k", [pc.compute("B", (n,), lambda i: a[i] + 1.0)])
    with pytest.raises(ArgumentError, match="'M' is not a parameter of kernel k"):
        kernel.specialize(M=3)
    with pytest.raises(ArgumentError, match="N='3' is not an integer"):
        kernel.specialize(N="3")
    with pytest.raises(ArgumentError, match="N=0 is outside kernel k's context"):
        kernel.specialize(N=0)


def _two_blocks(channels: int, size: int):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.c2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)

        def forward(self, x):
            return torch.relu(x + self.c2(torch.relu(self.c1(x))))

    torch.manual_seed(0)
    model = nn.Sequential(Block(channels), Block(channels)).eval()
    return model, torch.randn(1, channels, size, size)


def test_a_fused_group_that_does_not_fit_is_split():
    """Two ResNet basic blocks without biases: the zero inits chain every conv into
    one fused group whose buffers do not fit; it ran DRAM-direct (407x the
    roofline on tiny here, 6,733x on edge-npu at 64 channels, 16x16)."""
    import torch

    model, x = _two_blocks(8, 8)
    kernel = polyc.from_torch(model, (x,))
    compiled = polyc.compile(kernel, config="tiny")
    (arg,) = [a.name for a in kernel.free_inputs]
    (got,) = compiled.run(**{arg: x.numpy()})[0].values()
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-5)
    report = compiled.last_report
    assert report.ratio < 2.0, str(compiled)
    # the fusion search (schedules/accel/groups.py) cuts the group before the
    # fallback has to: what is left fits, and no layer runs DRAM-direct
    notes = compiled.fallbacks()
    assert all("fused less than the program allows" in n for n in notes)
    assert len(compiled.choice.layers) > 1
    assert all(lc.candidate is not None for lc in compiled.choice.layers)


JACOBI = """
void jacobi(int T, float A[20], float B[20]) {
#pragma scop
  for (int t = 0; t < 4; t++) {
    for (int i = 1; i < 19; i++)
      B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3;
    for (int i = 1; i < 19; i++)
      A[i] = B[i];
  }
#pragma endscop
}
"""


def test_a_loop_chain_that_must_stay_whole_says_why():
    """A time loop around two statements cannot become one loop nest per
    statement: that layer runs DRAM-direct, and the fallback names the dependence
    and the fix."""
    (kernel,) = polyc.from_c(JACOBI)
    compiled = polyc.compile(kernel, config="tiny")
    (note,) = compiled.fallbacks()
    assert note.startswith("S0+S1: DRAM-direct on the scalar core because its loop")
    assert "one loop nest per statement would break a dependence" in note
    assert "Schedule it by hand" in note
    rng = np.random.default_rng(1)
    a, b = rng.random(20).astype(np.float32), rng.random(20).astype(np.float32)
    out, report = compiled.run(A=a.copy(), B=b.copy())
    assert report.fallbacks == (note,) and report.to_dict()["fallbacks"] == [note]
    assert f"fallbacks (1):\n    {note}" in str(report)
    want = polyc.interpret(kernel, {"A": a.copy(), "B": b.copy()})
    np.testing.assert_array_equal(out["A"], want["A"])


def test_a_softmax_whose_rows_do_not_fit_is_split_and_says_why():
    """The fallback split itself (the fusion search cuts contraction groups before
    it can): a softmax over rows of 8,192 floats on tiny's 16 KiB L1 fits no tiling
    fused, so its groups are cut, the run still matches the interpreter, and each
    layer says what it was cut from."""
    from polyc import compute as pc
    from polyc.ops import nn

    a = pc.placeholder("a", (2, 8192))
    kernel = pc.kernel("sm", outputs=[nn.softmax(a, -1, name="s")])
    compiled = polyc.compile(kernel, config="tiny", verify=True)
    compiled.run(a=np.random.default_rng(0).standard_normal((2, 8192), "float32"))
    assert len(compiled.choice.layers) > 2
    notes = compiled.fallbacks()
    assert notes and all(
        "fused less than the program allows, because" in n
        and "no tiling of its 3 fused statements fits l1" in n
        for n in notes
    )


def test_a_dram_direct_layer_is_predicted_as_the_runtime_charges_it():
    """A layer with no candidate runs on the scalar core against DRAM; the
    program's prediction charged it nothing (0 cycles for 3,960 simulated).
    Each instance costs the statement's and its operations' cycles, the slowest
    read latency and its bytes at each level's rate, as ``pc_stmt`` charges."""
    (kernel,) = polyc.from_c(JACOBI)
    compiled = polyc.compile(kernel, config="tiny")
    (lc,) = [lc for lc in compiled.choice.layers if lc.candidate is None]
    rng = np.random.default_rng(1)
    a, b = rng.random(20).astype(np.float32), rng.random(20).astype(np.float32)
    _, report = compiled.run(A=a, B=b)
    assert lc.direct_cycles == report.cycles
    assert compiled.choice.predicted_cycles == report.cycles
    shown = f"DRAM-direct (see fallbacks); predicted {report.cycles:,} cycles"
    assert any(shown in line for line in compiled._layers())
