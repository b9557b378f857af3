"""The compile stages (polyc/stages.py) and ``POLYC_DEBUG``: each stage prints what it
produced, to stderr, under a header naming it; an unknown name is refused at compile."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import polyc
from accelerator.sim import abi
from polyc import reuse, stages
from polyc.cli import main
from polyc.errors import StageError
from polyc.ops import kernels
from polyc.stages import REUSED
from tests.test_cli import SYMBOLIC

HEADER = re.compile(r"^--- polyc (\w+): (\w+) ---$", re.M)
UNKNOWN = (
    r"compile: POLYC_DEBUG names an unknown stage 'sched' because the stages are "
    r"frontend, deps, schedule, tensorize, place, codegen, build, run\. Set "
    r"POLYC_DEBUG to a comma-separated list of them, or to all or time\."
)


def gemm():
    return kernels.matmul(8, 8, 8, dtype="float16")


def compile_and_run(monkeypatch, debug: str | None):
    if debug is None:
        monkeypatch.delenv("POLYC_DEBUG", raising=False)
    else:
        monkeypatch.setenv("POLYC_DEBUG", debug)
    kernel = gemm()
    compiled = polyc.compile(kernel, config="tiny")
    rng = np.random.default_rng(0)
    x = {
        a.name: rng.standard_normal(a.concrete_shape({})).astype(a.dtype.numpy)
        for a in kernel.free_inputs
    }
    compiled.run(**x)
    return compiled


def sections(err: str) -> dict[str, str]:
    """The text under each stage header (a header's text ends at the next one)."""
    heads = list(HEADER.finditer(err))
    out = {}
    for h, nxt in zip(heads, [*heads[1:], None]):
        out[h.group(1)] = err[h.end() : nxt.start() if nxt else len(err)]
    return out


def test_the_stages_read_top_to_bottom():
    assert stages.STAGES == (
        "frontend",
        "deps",
        "schedule",
        "tensorize",
        "place",
        "codegen",
        "build",
        "run",
    )


def test_all_prints_every_stage_in_order_with_what_it_produced(monkeypatch, capsys):
    compiled = compile_and_run(monkeypatch, "all")
    err = capsys.readouterr().err
    assert [h.groups() for h in HEADER.finditer(err)] == [
        (s, "matmul") for s in stages.STAGES
    ]
    got = sections(err)
    # the Kernel after frontend, schedule, tensorize, place: its printed form
    assert got["frontend"].lstrip().startswith("kernel matmul\n")
    assert "loop nest:" in got["frontend"] and "history:" not in got["frontend"]
    assert "dependences of matmul" in got["deps"]
    assert "apply_schedule(" in got["schedule"]
    assert "tensorize(" not in got["schedule"] and "@buffer" not in got["schedule"]
    assert "tensorize('S1'" in got["tensorize"] and "place(" not in got["tensorize"]
    assert "@buffer A_l1_0" in got["place"]
    assert got["place"].strip() == str(compiled.kernel)
    # the C after codegen, without the runtime header it starts with
    header = abi.header()
    assert got["codegen"].strip() == (
        f"/* polyc_rt.h ({header.count(chr(10))} lines) */\n"
        + compiled.c_source[len(header) :].strip()
    )
    built = compiled.module.built
    assert got["build"].strip() == (
        f"{built.path} ({'cache hit' if built.cached else 'compiled'}); mode placed; "
        "checks on"
    )
    assert got["run"].strip() == str(compiled.last_report)


def test_one_stage_prints_alone_and_time_prints_durations(
    monkeypatch, capsys, tmp_path
):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))  # no earlier compile
    monkeypatch.setattr(reuse, "_MEMORY", {})
    compile_and_run(monkeypatch, "codegen")
    err = capsys.readouterr().err
    assert [h.group(1) for h in HEADER.finditer(err)] == ["codegen"]
    assert "took" not in err and "void polyc_matmul(" in err
    monkeypatch.setattr(reuse, "_MEMORY", {})
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / "other"))
    compile_and_run(monkeypatch, "time")
    err = capsys.readouterr().err
    assert not HEADER.search(err)
    timed = re.findall(r"^--- polyc (\w+): matmul took \d+\.\d{3} s ---$", err, re.M)
    assert timed == ["schedule", "codegen", "build", "run"]
    # the same program again: scheduling and codegen are an earlier compile's
    compile_and_run(monkeypatch, "time")
    err = capsys.readouterr().err
    reused = re.findall(
        r"^--- polyc (\w+): matmul took [\d.]+ s \((.*)\) ---$", err, re.M
    )
    assert reused == [("schedule", REUSED), ("codegen", REUSED)]


def test_stage_seconds_are_kept_without_printing(monkeypatch, capsys):
    """A benchmark reads each stage's seconds from the compiled object, with
    nothing on stderr (the values are whatever the machine took)."""
    compiled = compile_and_run(monkeypatch, None)
    assert capsys.readouterr().err == ""
    seconds = compiled.stage_seconds
    assert list(seconds) == ["schedule", "codegen", "build", "run"]
    assert all(isinstance(s, float) and s >= 0 for s in seconds.values())


def test_no_debug_prints_nothing_and_debug_changes_no_result(monkeypatch, capsys):
    plain = compile_and_run(monkeypatch, None)
    assert capsys.readouterr().err == ""
    shown = compile_and_run(monkeypatch, " place , deps ")
    assert [h.group(1) for h in HEADER.finditer(capsys.readouterr().err)] == [
        "deps",
        "place",
    ]
    assert shown.c_source == plain.c_source
    assert shown.last_report.cycles == plain.last_report.cycles


def test_an_unknown_stage_is_refused_at_compile(monkeypatch):
    monkeypatch.setenv("POLYC_DEBUG", "codegen,sched")
    with pytest.raises(StageError, match=UNKNOWN):
        polyc.compile(gemm(), config="tiny")


def test_the_cli_exits_2_on_an_unknown_stage(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("n.c").write_text(SYMBOLIC)
    monkeypatch.setenv("POLYC_DEBUG", "sched")
    assert main(["compile", "n.c", "--config", "tiny", "--param", "n=16"]) == 2
    assert re.search(UNKNOWN, capsys.readouterr().err)


def test_a_dram_direct_compile_shows_the_kernel_as_given(monkeypatch, capsys):
    # schedule=kernel: no history, so every scheduling stage shows the kernel
    monkeypatch.setenv("POLYC_DEBUG", "schedule,tensorize,place")
    kernel = gemm()
    polyc.compile(kernel, config="tiny", schedule=kernel)
    got = sections(capsys.readouterr().err)
    assert list(got) == ["schedule", "tensorize", "place"]
    assert {text.strip() for text in got.values()} == {str(kernel)}


def test_the_runtime_library_builds_once_the_layers_are_searched(tmp_path, monkeypatch):
    # the search's workers take every core; applying the choice and codegen
    # run on one, and the runtime library's gcc on the others then
    import functools
    import itertools

    import torch
    from torch import nn

    from codegen import build as cbuild
    from codegen.accel import direct
    from schedules.accel import cache, scheduler

    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYC_SEARCH_CACHE", "0")
    monkeypatch.setenv("POLYC_JOBS", "2")
    order = []

    def logged(name, fn):
        def run(*args, **kwargs):
            order.append(name)
            return fn(*args, **kwargs)

        return run

    real = direct.build_runtime
    # as in a new process: the runtime library not loaded yet
    monkeypatch.setattr(direct, "build_runtime", functools.cache(lambda: real()))
    monkeypatch.setattr(
        cbuild, "in_background", logged("runtime", cbuild.in_background)
    )
    monkeypatch.setattr(cache, "in_workers", logged("workers", cache.in_workers))
    monkeypatch.setattr(
        scheduler, "_build_first", logged("apply", scheduler._build_first)
    )
    torch.manual_seed(0)
    layers = []
    for a, b in itertools.pairwise((32, 32, 48, 16)):  # three distinct searches
        layers += [nn.Linear(a, b), nn.ReLU()]
    kernel = polyc.from_torch(nn.Sequential(*layers).eval(), (torch.randn(8, 32),))
    compiled = polyc.compile(kernel, config="edge-npu")
    assert "workers" in order and order.count("runtime") == 1
    assert order.index("runtime") > max(
        i for i, n in enumerate(order) if n == "workers"
    )
    assert order.index("runtime") < order.index("apply")
    x = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
    out, _ = compiled.run(arg0=x)
    with torch.no_grad():
        want = nn.Sequential(*layers).eval()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(next(iter(out.values())), want, rtol=1e-4, atol=1e-4)
