"""Co-design studies: hardware grids from the command line and Python, area and
power per point."""

from __future__ import annotations

import pytest

import polyc
from polyc.cli import main

MM = "matmul:M=8,N=8,K=8"


def test_bad_grid_on_the_command_line_exits_2_before_running(capsys):
    code = main(
        [
            "sweep",
            "--ops",
            MM,
            "--configs",
            "tiny:mac_array.rows=4,8;dma.channels=2,64",
            "--jobs",
            "1",
        ]
    )
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith(
        "polyc: vary: tiny grid point 1 (rows=4,channels=64) is not a valid "
        "hardware description: key dma.channels is 64 because it must be a "
        "positive integer of at most 32."
    )
    assert "Traceback" not in captured.err
    assert "polyc sweep:" not in captured.err  # no point ran
    assert main(["sweep", "--ops", MM, "--configs", "tiny:dma.chanels=1"]) == 2
    assert "key dma.chanels is unknown" in capsys.readouterr().err


def test_grid_sweep_records_area_power_and_edp():
    points = polyc.sweep.grid(
        {"mm": MM},
        ["default"],
        ["tiny:mac_array.rows=2,4;mac_array.cols=rows"],
        where="area_mm2<=10",
    )
    assert [p.config.name for p in points] == ["tiny[rows=2]", "tiny[rows=4]"]
    result = polyc.sweep(points, jobs=1, progress=False)
    rows = result.rows()
    assert [r["status"] for r in rows] == ["ok", "ok"]
    for row in rows:
        assert row["latency_s"] == pytest.approx(row["cycles"] * 1e-9)
        assert row["energy_j"] == pytest.approx(
            row["energy_pj"] * 1e-12 + row["leakage_energy_j"]
        )
        assert row["edp_js"] == pytest.approx(row["energy_j"] * row["latency_s"])
        assert row["power_w"] == pytest.approx(row["energy_j"] / row["latency_s"])
    # a quarter of the PEs: less area, and more cycles on the smaller array
    assert rows[0]["area_mm2"] < rows[1]["area_mm2"]
    assert rows[0]["cycles"] > rows[1]["cycles"]
