"""Whole compiles, reused (polyc/reuse.py): a second ``polyc.compile`` of the same
program for the same hardware skips scheduling and codegen, in this process or a
later one, and gives what the first gave -- the same C, the same choice, the same
explanation -- with the caller's own weights; anything that differs is a miss, and
a torn file is a miss, never an error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import polyc
from polyc import reuse
from polyc.ir import tree
from schedules.accel import cache
from tests.support.depthwise import depthwise_pair


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """Empty caches (compiles and searches, on disk and in memory)."""
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "1")
    monkeypatch.setattr(reuse, "_MEMORY", {})
    monkeypatch.setattr(cache, "_MEMORY", {})
    reuse.STATS.clear()
    return tmp_path / "compiles"


def _model(seed: int):
    """A small conv net whose weights are bound to the kernel as data."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 6 * 6, 10),
    ).eval()
    return model, torch.randn(1, 4, 6, 6)


def _kernel(seed: int):
    model, x = _model(seed)
    return polyc.from_torch(model, (x,)), model, x


def test_a_second_compile_reuses_the_first_and_gives_the_same(fresh):
    kernel, _, x = _kernel(0)
    first = polyc.compile(kernel, config="edge-npu")
    text = str(first)
    assert reuse.STATS["stored"] == 1 and not reuse.STATS["memory"]
    second = polyc.compile(kernel, config="edge-npu")
    assert reuse.STATS["memory"] == 1
    assert second.c_source == first.c_source
    assert str(second) == text  # the choice and the buffers, rebuilt
    assert second.choice.predicted_cycles == first.choice.predicted_cycles
    # the scheduled kernel, loaded on first use: the same tree (isl may print
    # its sets in other words), the same marks
    assert tree.marks(second.kernel.schedule) == tree.marks(first.kernel.schedule)
    assert second.kernel.domain.is_equal(first.kernel.domain)
    assert second.kernel.history == first.kernel.history
    (want,) = first(arg0=x.numpy()).values()
    (got,) = second(arg0=x.numpy()).values()
    np.testing.assert_array_equal(got, want)


def test_a_later_process_with_other_weights_reuses_the_compile_and_runs_them(fresh):
    kernel, _, x = _kernel(0)
    polyc.compile(kernel, config="tiny")
    reuse._MEMORY.clear()  # as a new process finds it
    other, model, _ = _kernel(1)  # built again: new objects, other weights
    compiled = polyc.compile(other, config="tiny")
    assert reuse.STATS["disk"] == 1
    (got,) = compiled(arg0=x.numpy()).values()
    assert not isinstance(compiled._kernel, polyc.Kernel)  # a run never parses it
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_other_hardware_other_checks_or_another_program_is_a_miss(fresh):
    kernel, _, _ = _kernel(0)
    polyc.compile(kernel, config="tiny")
    polyc.compile(kernel, config="edge-npu")
    polyc.compile(kernel, config="tiny", checks=False)
    polyc.compile(_bigger(), config="tiny")
    assert reuse.STATS["stored"] == 4 and not reuse.STATS["memory"]


def _bigger():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU()).eval()
    return polyc.from_torch(model, (torch.randn(1, 4, 8, 8),))


def test_a_torn_file_is_a_miss_and_is_rewritten(fresh):
    kernel, _, _ = _kernel(0)
    first = polyc.compile(kernel, config="tiny")
    (path,) = fresh.glob("*.pickle")
    path.write_bytes(path.read_bytes()[:100])  # killed mid-write, by hand
    (fresh / ".leftover.tmp").write_bytes(b"a writer killed before its rename")
    reuse._MEMORY.clear()
    again = polyc.compile(kernel, config="tiny")
    assert reuse.STATS["unreadable"] == 1 and reuse.STATS["stored"] == 2
    assert again.c_source == first.c_source
    reuse._MEMORY.clear()
    polyc.compile(kernel, config="tiny")
    assert reuse.STATS["disk"] == 1


def test_the_cache_can_be_turned_off(fresh, monkeypatch):
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    kernel, _, _ = _kernel(0)
    polyc.compile(kernel, config="tiny")
    polyc.compile(kernel, config="tiny")
    assert not reuse.STATS and not fresh.exists()


def test_a_knob_that_changes_the_choice_is_in_the_key(fresh, monkeypatch):
    """Was: ``POLYC_PREFETCH_MARGIN`` (whether weights are fetched ahead) was
    not in the key, so a compile with it set came from the cache of one
    without it."""
    kernel, _, _ = _kernel(0)
    polyc.compile(kernel, config="tiny")
    monkeypatch.setenv("POLYC_PREFETCH_MARGIN", "10")
    polyc.compile(kernel, config="tiny")
    assert reuse.STATS["stored"] == 2 and not reuse.STATS["memory"]
    polyc.compile(kernel, config="tiny")
    assert reuse.STATS["memory"] == 1


def test_a_hand_schedule_is_compiled_as_given(fresh):
    kernel, _, _ = _kernel(0)
    polyc.compile(kernel, config="tiny", schedule=kernel)  # DRAM-direct
    assert not reuse.STATS


def test_a_model_with_a_layer_split_across_engines_is_reused(fresh):
    """Was: a depthwise layer split across the vector unit and the MAC array
    (schedules.accel.share) has statements the program lacks (``S3_1``), so
    rebuilding the choice around the program's statements failed, the stored
    compile counted as unreadable, and hf-mobilenetv2 compiled again in full
    (18.6 s, not under 1 s)."""
    kernel, x = depthwise_pair()
    first = polyc.compile(kernel, config="edge-npu")
    assert first.choice.shared  # a layer was split: the case
    second = polyc.compile(kernel, config="edge-npu")
    assert reuse.STATS["memory"] == 1 and not reuse.STATS["unreadable"]
    assert second.c_source == first.c_source
    assert str(second) == str(first)
    assert second.choice.predicted_cycles == first.choice.predicted_cycles
    out, report = second.run(arg0=x.numpy())
    again, first_report = first.run(arg0=x.numpy())
    assert report.cycles == first_report.cycles
    for name, value in again.items():
        np.testing.assert_array_equal(out[name], value)
