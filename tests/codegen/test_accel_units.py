"""A large simulator kernel's C in several translation units (codegen/accel/units.py):
the module built from the parts runs to the same outputs and the same report as the
one-unit module, and the splitter declines what it cannot split safely."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import polyc
from codegen import build as cbuild
from codegen.accel import units


def _net():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1)
    ).eval()
    x = torch.randn(1, 4, 8, 8)
    return polyc.from_torch(model, (x,)), x.numpy()


def _compiled(monkeypatch, tmp_path, jobs: str):
    monkeypatch.setenv("POLYC_JOBS", jobs)
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path / jobs))
    monkeypatch.setenv("POLYC_COMPILE_CACHE", "0")
    kernel, x = _net()
    compiled = polyc.compile(kernel, config="edge-npu")
    return compiled, compiled.run(arg0=x)


def test_a_kernel_in_parts_runs_as_the_kernel_in_one_unit(monkeypatch, tmp_path):
    monkeypatch.setattr(units, "MIN_LINES", 50)  # split even this small kernel
    one, (out_one, rep_one) = _compiled(monkeypatch, tmp_path, "1")
    two, (out_two, rep_two) = _compiled(monkeypatch, tmp_path, "2")
    assert one.c_source == two.c_source  # the C the user reads is the same
    objects = list((tmp_path / "2" / "objects").glob("*.o"))
    assert len(objects) == 2  # the main unit (with the first part) and the second
    for name in out_one:
        np.testing.assert_array_equal(out_one[name], out_two[name])
    assert rep_one.cycles == rep_two.cycles
    assert rep_one.dram_bytes == rep_two.dram_bytes


def test_the_parts_read_the_variables_through_the_frame():
    text = _kernel_text()
    main, files = units.split(text, "polyc_k", 2)
    assert "struct pc_frame" in files[units.FRAME]
    part = files["pc_part_1.c"]
    assert "(pc_F->acc)" in part
    assert '"acc"' in part  # a string literal keeps its text
    assert "static void pc_part_0" in main  # the first part stays in the main unit
    assert "pc_part_1(_pc_ctx, pc_F);" in main


def test_a_part_runs_its_pieces_in_order(monkeypatch):
    """Each part calls its pieces (functions of about PIECE_LINES lines each,
    never inlined) in order; a part with a declaration at its top level, which
    a later piece could use, stays one function."""
    monkeypatch.setattr(units, "PIECE_LINES", 1)
    main, files = units.split(_kernel_text(), "polyc_k", 2)
    part = files["pc_part_1.c"]
    calls = [line.strip() for line in part.splitlines() if "pc_part_1_" in line]
    pieces = [c for c in calls if c.startswith("static __attribute__((noinline))")]
    assert len(pieces) >= 2
    assert [c for c in calls if c.endswith(";")] == [
        f"pc_part_1_{j}(_pc_ctx, pc_F);" for j in range(len(pieces))
    ]
    assert "static __attribute__((noinline)) void pc_part_0_0" in main
    declared = _kernel_text().replace(
        "  for (long i", "  long later = 1;\n  for (long i", 1
    )
    _, files = units.split(declared, "polyc_k", 2)
    assert "pc_part_1_1" not in files["pc_part_1.c"]


def test_an_else_stays_with_its_if():
    lines = ["  if (a)", "  {", "    x = 1;", "  }", "  else", "  {", "  }", "  y = 2;"]
    assert units._items(lines) == [lines[:7], lines[7:]]


def test_the_splitter_declines_a_name_a_header_macro_uses():
    text = _kernel_text().replace("#define TWICE(x)", "#define TWICE(x) acc +")
    assert units.split(text, "polyc_k", 2) is None


def test_the_splitter_declines_a_small_kernel_or_one_part():
    text = _kernel_text()
    assert units.split(text, "polyc_k", 1) is None
    monkey = units.MIN_LINES
    try:
        units.MIN_LINES = 10_000
        assert units.split(text, "polyc_k", 2) is None
    finally:
        units.MIN_LINES = monkey


def _kernel_text() -> str:
    body = "\n".join(f'  acc = acc + {i}; pc_note(_pc_ctx, "acc");' for i in range(4))
    return (
        "#define TWICE(x) ((x) * 2)\n"
        "void polyc_k(pc_ctx *_pc_ctx, void * _pc_a)\n{\n"
        "  float (*restrict a)[4] = (float (*)[4])_pc_a;\n"
        "  int64_t acc = 0, other = 1;\n"
        f"{body}\n"
        "  for (long i = 0; i <= 3; i += 1)\n  {\n    a[0][i] = acc;\n  }\n"
        "}\n"
    ) + "\n" * units.MIN_LINES


@pytest.fixture(autouse=True)
def _fresh_loaded(monkeypatch):
    monkeypatch.setattr(cbuild, "_loaded", {})
