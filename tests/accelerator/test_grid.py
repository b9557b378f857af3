"""Hardware grids (accelerator.vary, grid text): every point goes through the config
checks; a bad grid is refused before anything runs, naming the point and the key."""

from __future__ import annotations

import pytest

import accelerator
from accelerator.hardware.area import MEASURES
from accelerator.hardware.config import from_dict, load_config
from accelerator.hardware.grid import (
    Ref,
    get_key,
    is_grid,
    parse_grid,
    parse_values,
    parse_where,
    to_dict,
)
from polyc.errors import ConfigError, GridError, PolycError

ISSUE_GRID = (
    "edge-npu:mac_array.rows=16,32,64;mac_array.cols=rows;"
    "memory.sram.capacity_bytes=262144..4194304*2"
)


@pytest.mark.parametrize("name", accelerator.CONFIGS)
def test_to_dict_round_trips_every_shipped_config(name):
    spec = load_config(name)
    assert from_dict(to_dict(spec), source=spec.source) == spec


def test_issue_grid_text():
    base, axes = parse_grid(ISSUE_GRID)
    assert base == "edge-npu"
    assert axes == {
        "mac_array.rows": [16, 32, 64],
        "mac_array.cols": Ref("mac_array.rows"),
        "memory.sram.capacity_bytes": [262144, 524288, 1048576, 2097152, 4194304],
    }
    specs = accelerator.vary(base, axes)
    assert len(specs) == 15
    # the first key varies slowest; cols follows rows in every point
    got = [
        (s.mac_array.rows, s.mac_array.cols, s.level("sram").capacity_bytes)
        for s in specs
    ]
    assert got[:2] == [(16, 16, 262144), (16, 16, 524288)]
    assert got[-1] == (64, 64, 4194304)
    assert all(r == c for r, c, _ in got)
    assert specs[0].name == "edge-npu[rows=16,capacity_bytes=262144]"
    # everything else is the base's
    base_spec = load_config("edge-npu")
    assert specs[0].dma == base_spec.dma and specs[0].vector == base_spec.vector


def test_values_text():
    assert parse_values("16,32,64") == [16, 32, 64]
    assert parse_values("8..64+8") == [8, 16, 24, 32, 40, 48, 56, 64]
    assert parse_values("1..3") == [1, 2, 3]
    assert parse_values("0.5..2*2") == [0.5, 1.0, 2.0]
    assert parse_values("1,4..16*2") == [1, 4, 8, 16]
    assert parse_values("weight_stationary,output_stationary") == [
        "weight_stationary",
        "output_stationary",
    ]
    assert parse_values("true,false") == [True, False]


def test_python_vary_with_memory_by_position_dram_and_dataflow():
    specs = accelerator.vary(
        "edge-npu",
        {
            "memory[1].banks": [2, 4],
            "memory.dram.bytes_per_cycle": "8..32*2",
            "mac_array.dataflow": ["weight_stationary", "output_stationary"],
        },
    )
    assert len(specs) == 2 * 3 * 2
    assert {s.dram.bytes_per_cycle for s in specs} == {8.0, 16.0, 32.0}
    assert {s.mac_array.dataflow for s in specs} == {
        "weight_stationary",
        "output_stationary",
    }
    assert get_key(specs[-1], "memory.sram.banks") == 4


def test_where_keeps_points_by_area_and_keys():
    keep = parse_where("area_mm2<=30,mac_array.rows>=16", MEASURES)
    specs = accelerator.vary(
        "edge-npu", {"mac_array.rows": [8, 16, 32, 64]}, where=keep
    )
    assert [s.mac_array.rows for s in specs] == [16]  # 32 and 64 cost more area
    assert accelerator.area(specs[0]).total_mm2 <= 30
    lam = accelerator.vary(
        "tiny", {"dma.channels": [1, 2, 4]}, where=lambda s: s.dma.channels > 1
    )
    assert [s.dma.channels for s in lam] == [2, 4]


@pytest.mark.parametrize(
    "axes, where, message",
    [
        # a point the config checks refuse: named with its values and the key
        (
            {"mac_array.rows": [4, 8], "memory.l1.capacity_bytes": [16384, 1001]},
            None,
            r"tiny grid point 1 \(rows=4,capacity_bytes=1001\) is not a valid "
            r"hardware description: key memory\[1\]\.banks is 4, which does not "
            r"divide capacity_bytes = 1001",
        ),
        (
            {"dma.channels": [2, 64]},
            None,
            r"tiny grid point 1 \(channels=64\) .* key dma\.channels is 64 because "
            r"it must be a positive integer of at most 32",
        ),
        (
            {"mac_array.rowz": [4]},
            None,
            r"grid point 0 \(rowz=4\) .* key mac_array\.rowz is unknown",
        ),
        (
            {"memory.sram.banks": [1]},
            None,
            r"key memory\.sram\.banks names no memory level of tiny because its "
            r"levels are dram, l1",
        ),
        ({"macarray.rows": [4]}, None, r"key macarray\.rows is not in tiny"),
        ({"mac_array.rows": []}, None, r"key mac_array\.rows has no values"),
        ({"mac_array.rows": "8..4*2"}, None, r"range '8\.\.4\*2' is empty"),
        ({"mac_array.rows": "1..8*1"}, None, r"range '1\.\.8\*1' never ends"),
        (
            {"mac_array.cols": "rows"},
            None,
            r"grid point 0 \(cols=rows\) .* key mac_array\.cols is 'rows' because "
            r"it must be a positive integer",
        ),
        ({"mac_array.rows": [4, 8]}, lambda s: False, r"refuses all 2"),
        ({}, None, r"no keys to vary"),
    ],
)
def test_bad_grids_are_refused_naming_point_and_key(axes, where, message):
    with pytest.raises(GridError, match=message) as info:
        accelerator.vary("tiny", axes, where=where)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, PolycError)
    # the error reads "<op>: <what> because <why>. <fix>"
    assert str(info.value).startswith("vary: ")


@pytest.mark.parametrize(
    "text, message",
    [
        ("edge-npu:", r"has no keys"),
        ("edge-npu:mac_array.rows", r"is not key=values"),
        (
            "edge-npu:mac_array.rows=4;mac_array.rows=8",
            r"gives key mac_array.rows twice",
        ),
        ("edge-npu:mac_array.rows=4,,8", r"empty item"),
    ],
)
def test_bad_grid_text(text, message):
    with pytest.raises(GridError, match=message):
        base, axes = parse_grid(text)
        accelerator.vary(base, axes)


def test_where_text_errors():
    with pytest.raises(GridError, match="is not a comparison"):
        parse_where("area_mm2")
    with pytest.raises(GridError, match=r"constraint term 'dma\.chanels'"):
        accelerator.vary(
            "tiny", {"dma.channels": [1]}, where=parse_where("dma.chanels<2")
        )


def test_is_grid_tells_grids_from_names_and_paths():
    assert is_grid(ISSUE_GRID)
    assert is_grid("my/hw.toml:dma.channels=1,2")
    assert not is_grid("edge-npu")
    assert not is_grid("some/dir/hw.toml")
