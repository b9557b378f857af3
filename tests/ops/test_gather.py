"""Gathers (embedding, index_select, gather): a data-dependent read in the IR,
run by the interpreter, host C and the simulator's indirect DMA; checked indices
in every backend; the legality check treats the read as the whole dimension."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import polyc
import schedules as S
from polyc import compute as pc
from polyc.errors import (
    AffineError,
    DefinitionError,
    DTypeError,
    IllegalTransformError,
    IndexRangeError,
    ScheduleError,
    ShapeError,
    SimulationError,
)
from polyc.ir.expr import Gather
from polyc.ops import nn
from tests.support.opcheck import Batch


def test_embedding_index_select_and_gather_equal_torch(rng):
    b = Batch("gathers", rng)
    idx = b.randint("idx", (3, 5), 0, 11, "int64")
    idx32 = b.randint("idx32", (4,), 0, 11, "int32")
    table = b.randn("table", (11, 6))
    table8 = b.randint("table8", (11, 3), -128, 128)
    x = b.randn("x", (4, 11, 3))
    j = b.randint("j", (4, 2, 3), 0, 11, "int64")
    t, x_ = torch.from_numpy(b["table"]), torch.from_numpy(b["x"])
    b.check(nn.embedding(idx, table), b["table"][b["idx"]])
    b.check(nn.embedding(idx32, table8), b["table8"][b["idx32"]])
    sel = torch.from_numpy(b["idx32"]).long()
    b.check(nn.index_select(x, 1, idx32), torch.index_select(x_, 1, sel))
    b.check(nn.index_select(table, 0, idx32), torch.index_select(t, 0, sel))
    b.check(nn.gather(x, 1, j), torch.gather(x_, 1, torch.from_numpy(b["j"])))
    kernel = b.run()
    # every lookup reads its table through a Gather, never a one-hot reduction
    assert all(s.reduction is None for s in kernel.statements)
    assert sum(bool(s.gathers) for s in kernel.statements) == 5
    printed = str(kernel)
    assert "table[{idx[" in printed, printed  # braces mark the data index


def _lookup(tokens=16, rows=256, dim=64):
    idx = pc.placeholder("idx", (tokens,), "int64")
    table = pc.placeholder("table", (rows, dim))
    return pc.kernel("lookup", [nn.embedding(idx, table, name="emb")])


def test_embedding_on_the_accelerator_is_an_indirect_dma_of_the_rows_only(rng):
    """DRAM bytes: the indices and the rows looked up (read), the rows (written
    to the output), not the table; no MACs. The one-hot contraction read the
    whole table (256 x 64 x 4 bytes) and ran 16 x 256 x 64 MACs."""
    tokens, rows, dim = 16, 256, 64
    compiled = polyc.compile(_lookup(tokens, rows, dim), config="edge-npu", verify=True)
    again = polyc.compile(_lookup(tokens, rows, dim), config="edge-npu", verify=True)
    for c in (compiled, again):  # the second one comes from the compile cache
        assert "indirect DMA: 16 rows of 256 bytes" in str(c), str(c)
        assert "fallbacks" not in str(c)
    feeds = {
        "idx": rng.integers(0, rows, tokens).astype(np.int64),
        "table": rng.standard_normal((rows, dim)).astype(np.float32),
    }
    got, report = compiled.run(**feeds)
    np.testing.assert_array_equal(got["emb"], feeds["table"][feeds["idx"]])
    row_bytes = dim * 4
    dram = next(level for level in report.levels if level.name == "dram")
    assert dram.bytes_read == tokens * row_bytes + tokens * 8
    assert dram.bytes_written == tokens * row_bytes
    assert report.dma_descriptors == 1 + tokens
    assert report.macs == 0
    # the cost model predicts the simulator: one call, 17 descriptors of 16
    # cycles, 16 x (8 + 256) bytes at 16 B/cycle, two DRAM latencies of 100
    assert compiled.choice.predicted_cycles == 17 * 16 + 16 * 264 / 16 + 200
    assert abs(report.cycles - compiled.choice.predicted_cycles) <= 16


@pytest.mark.parametrize("backend", ["interpret", "host", "accelerator"])
def test_an_index_out_of_range_raises_in_every_backend(rng, backend):
    """PyTorch raises on such an index; no backend reads another row (the
    host used to read outside the table, the simulator the next array)."""
    kernel = _lookup(4, 8, 4)
    feeds = {
        "idx": np.array([1, 8, 2, 0], np.int64),
        "table": rng.standard_normal((8, 4)).astype(np.float32),
    }
    if backend == "interpret":
        with pytest.raises(IndexRangeError, match=r"reads index 8 .* outside 0\.\.7"):
            polyc.interpret(kernel, feeds)
    elif backend == "host":
        with pytest.raises(IndexRangeError, match=r"read index 8, outside 0\.\.7"):
            polyc.build(kernel)(**feeds)
        feeds["idx"][1] = -1
        with pytest.raises(IndexRangeError, match=r"read index -1, outside"):
            polyc.build(kernel)(**feeds)
    else:
        for config in ("tiny", "edge-npu"):
            compiled = polyc.compile(kernel, config=config)
            with pytest.raises(SimulationError, match=r"reads index 8 .* 0\.\.7"):
                compiled.run(**feeds)


def test_a_gather_the_dma_cannot_run_is_checked_on_the_scalar_core(rng):
    """Negative indices wrap (x[idx] in PyTorch): the index is an expression,
    not an element, so the gather runs on the scalar core, its indices still
    checked by the runtime."""
    x = pc.placeholder("x", (6, 3))
    idx = pc.placeholder("idx", (4,), "int64")
    out = pc.compute(
        "out", (4, 3), lambda i, j: x[pc.select(idx[i] < 0, idx[i] + 6, idx[i]), j]
    )
    kernel = pc.kernel("wrap", [out])
    feeds = {
        "x": rng.standard_normal((6, 3)).astype(np.float32),
        "idx": np.array([0, -1, 5, -6], np.int64),
    }
    compiled = polyc.compile(kernel, config="tiny", verify=True)
    assert "no indirect DMA because its index is not an element" in str(compiled)
    got, _ = compiled.run(**feeds)
    np.testing.assert_array_equal(got["out"], feeds["x"][feeds["idx"]])
    feeds["idx"][0] = 9
    with pytest.raises(SimulationError, match=r"reads index 9, outside 0\.\.5"):
        compiled.run(**feeds)


def _write_then_gather():
    """S0 writes every row of t; S1 gathers rows of t by idx."""
    x = pc.placeholder("x", (8, 4))
    idx = pc.placeholder("idx", (8,), "int64")
    t = pc.compute("t", (8, 4), lambda i, j: x[i, j] * 2.0)
    out = pc.compute("out", (8, 4), lambda i, j: t[idx[i], j])
    return pc.kernel("wg", [out])


def test_dependences_over_approximate_the_gathered_dimension():
    kernel = _write_then_gather()
    s1 = kernel.statements[1]
    assert isinstance(s1.body, Gather) and s1.data_dependent
    flow = kernel.deps.flow
    # every S0 row may flow into every S1 instance (same column): 8 x 8 x 4
    assert flow.is_equal(
        polyc.ir.deps.isl.UnionMap(
            "{ S0[i, j] -> S1[i2, j] : 0 <= i < 8 and 0 <= i2 < 8 and 0 <= j < 4 }"
        )
    ), flow


def test_fusing_a_gather_with_the_writer_of_its_table_is_refused():
    """Fused on i, S1[i] would read a row S0 writes at a later i: illegal for
    some indices, so refused; with an affine read t[i, j] it is legal."""
    kernel = _write_then_gather()
    bands = [n for n in polyc.ir.tree.band_names(kernel.schedule)]
    with pytest.raises(IllegalTransformError, match="dependence"):
        S.fuse(kernel, bands)
    x = pc.placeholder("x", (8, 4))
    t = pc.compute("t", (8, 4), lambda i, j: x[i, j] * 2.0)
    out = pc.compute("out", (8, 4), lambda i, j: t[i, j])
    affine = pc.kernel("wa", [out])
    S.fuse(affine, list(polyc.ir.tree.band_names(affine.schedule)))


def test_a_computed_table_is_gathered_after_it_is_written(rng):
    """The table is an intermediate (a copy the scheduler would inline, then a
    product): the gather reads it once written, on every config."""
    x = pc.placeholder("x", (8, 4))
    idx = pc.placeholder("idx", (6,), "int64")
    copy = pc.compute("copy", (8, 4), lambda i, j: x[i, j])
    t = pc.compute("t", (8, 4), lambda i, j: copy[i, j] * 2.0)
    out = pc.compute("out", (6, 4), lambda i, j: t[idx[i], j] + copy[idx[i], j])
    kernel = pc.kernel("computed", [out])
    feeds = {
        "x": rng.standard_normal((8, 4)).astype(np.float32),
        "idx": rng.integers(0, 8, 6).astype(np.int64),
    }
    want = 3.0 * feeds["x"][feeds["idx"]]
    np.testing.assert_allclose(polyc.interpret(kernel, feeds)["out"], want, 1e-6)
    for config in ("tiny", "edge-npu", "datacenter"):
        got, _ = polyc.compile(kernel, config=config, verify=True).run(**feeds)
        np.testing.assert_allclose(got["out"], want, 1e-6)


def test_gather_dma_refuses_a_band_without_the_form():
    kernel = _write_then_gather()
    with pytest.raises(ScheduleError, match="cannot run as an indirect DMA"):
        S.gather_dma(kernel, "S0")
    marked = S.gather_dma(kernel, "S1")
    assert S.replay(kernel, marked.history).schedule.plain_is_equal(marked.schedule)


def test_two_data_dependent_indices_are_refused():
    x = pc.placeholder("x", (4, 4))
    i = pc.placeholder("i", (3,), "int64")
    with pytest.raises(AffineError, match="gathers along one dimension at a time"):
        pc.compute("o", (3,), lambda a: x[i[a], i[a]])


def test_shape_errors_name_the_fix():
    x = pc.placeholder("x", (4, 5))
    i2 = pc.placeholder("i2", (2, 2), "int64")
    with pytest.raises(ShapeError, match="index_select takes a 1-D index"):
        nn.index_select(x, 0, i2)
    with pytest.raises(ShapeError, match="Give the index the input's rank"):
        nn.gather(x, 0, pc.placeholder("i1", (3,), "int64"))
    with pytest.raises(ShapeError, match="Shrink the index"):
        nn.gather(x, 0, pc.placeholder("i3", (2, 6), "int64"))
    with pytest.raises(DTypeError, match="accepts int32, int64"):
        nn.embedding(pc.placeholder("f", (3,)), x)


def test_an_affine_component_past_the_edge_is_refused_at_definition():
    x = pc.placeholder("x", (4, 5))
    idx = pc.placeholder("idx", (3,), "int64")
    out = pc.compute("out", (3, 5), lambda i, j: x[idx[i], j + 1])
    with pytest.raises(DefinitionError, match=r"gathers x\[\{idx\[i\]\}, j \+ 1\]"):
        pc.kernel("edge", [out])


@pytest.mark.parametrize("first", [(), ({"op": "linear", "out": 8, "bias": True},)])
def test_a_gather_of_many_calls_is_predicted_over_the_channels_it_runs_on(first):
    """Sixteen calls of ten one-byte rows on datacenter: the runtime gives each
    the least busy of the channels it may take (``pc__pick_channel``), and the
    model put them all on one, 5,955 cycles predicted for 1,724 simulated
    (fuzz seed 963, case 464, shrunk; after a linear layer the gather reads
    its output)."""
    from polyc.studies import fuzz
    from polyc.studies.fuzz.build import through_compute

    pick = {"op": "pick", "n": 10, "seed": 25879}
    program = fuzz.Program("mlp", "int8", (2, 8, 1), (*first, pick))
    kernel, inputs = through_compute(program, 963)
    compiled = polyc.compile(kernel, config="datacenter")
    out, report = compiled.run(**inputs)
    for name, want in polyc.interpret(kernel, inputs).items():
        np.testing.assert_array_equal(out[name], want)
    assert any("in 16 calls" in lc.note for lc in compiled.choice.layers)
    ratio = compiled.choice.predicted_cycles / report.cycles
    assert 0.95 < ratio < 1.05, (compiled.choice.predicted_cycles, report.cycles)
