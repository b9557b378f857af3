"""Hardware descriptions: shipped configs load; every malformed file is refused."""

from __future__ import annotations

import copy
import re

import pytest
import tomllib

import accelerator
from accelerator.hardware.config import CONFIG_DIR, from_dict, load_config
from polyc.errors import ConfigError


def tiny() -> dict:
    with open(CONFIG_DIR / "tiny.toml", "rb") as f:
        return tomllib.load(f)


@pytest.mark.parametrize("name", accelerator.CONFIGS)
def test_shipped_config_loads(name):
    spec = load_config(name)
    assert spec.name == name
    assert spec.memory[0].kind == "dram"
    assert all(m.kind == "sram" for m in spec.sram_levels)
    caps = [m.capacity_bytes for m in spec.memory]
    assert caps == sorted(caps, reverse=True)
    assert load_config(name) is spec  # cached
    assert name in str(spec)


def test_shipped_configs_cover_the_issue():
    assert {"tiny", "edge-npu", "datacenter"} <= set(accelerator.CONFIGS)
    edge, dc = load_config("edge-npu"), load_config("datacenter")
    assert (edge.mac_array.rows, edge.mac_array.cols) == (16, 16)
    assert {"int8", "float16"} <= set(edge.mac_array.dtypes)
    assert edge.sram_levels[0].capacity_bytes == 1 << 20
    assert (dc.mac_array.rows, dc.mac_array.cols) == (64, 64)
    assert sum(m.capacity_bytes for m in dc.sram_levels) >= 16 << 20
    assert len(dc.sram_levels) == 2  # multi-level tiling has something to do


@pytest.mark.parametrize("name", accelerator.CONFIGS)
def test_every_number_states_its_source(name):
    """Every line that sets a number carries a comment with its source/rationale."""
    text = (CONFIG_DIR / f"{name}.toml").read_text()
    number = re.compile(r"^\s*[\w.]+\s*=\s*[-+]?\d")
    for line in text.splitlines():
        if number.match(line):
            assert "#" in line and len(line.split("#", 1)[1].strip()) > 8, line


def test_load_by_path_and_spec(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text((CONFIG_DIR / "tiny.toml").read_text())
    spec = load_config(path)
    assert spec.mac_array == load_config("tiny").mac_array
    assert load_config(spec) is spec
    assert spec.level("l1").capacity_bytes == 16384
    assert spec.mac_array.peak_macs_per_cycle("float32") == 16
    assert spec.mac_array.peak_macs_per_cycle("float64") == 0


def test_spec_is_hashable_and_pickles():
    import pickle

    spec = load_config("edge-npu")
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and hash(again) == hash(spec)
    assert len({spec, again, load_config("tiny")}) == 2


def test_spec_is_frozen():
    spec = load_config("tiny")
    with pytest.raises(AttributeError):
        spec.clock_ghz = 2.0
    with pytest.raises(TypeError):
        spec.vector.cycles["add"] = 3


def _broken(edit) -> dict:
    data = copy.deepcopy(tiny())
    edit(data)
    return data


CASES = [
    # (edit, key named in the message, expectation in the message)
    (lambda d: d["mac_array"].pop("rows"), "mac_array.rows", "is missing"),
    (lambda d: d["dma"].update(chanels=2), "dma.chanels", "is unknown"),
    (lambda d: d.update(extra=1), "extra", "is unknown"),
    (lambda d: d["mac_array"].update(rows="4"), "mac_array.rows", "positive integer"),
    (lambda d: d["mac_array"].update(rows=4.0), "mac_array.rows", "positive integer"),
    (lambda d: d["vector"].update(lanes=True), "vector.lanes", "positive integer"),
    (lambda d: d["dma"].update(channels=0), "dma.channels", "positive integer"),
    (lambda d: d["scalar"].update(queue_depth=65), "scalar.queue_depth", "at most 64"),
    (
        lambda d: d["memory"][1].update(capacity_bytes=-16),
        "memory[1].capacity_bytes",
        "positive integer",
    ),
    (
        lambda d: d["memory"][0].update(bytes_per_cycle=0),
        "memory[0].bytes_per_cycle",
        "positive number",
    ),
    (lambda d: d.update(clock_ghz="fast"), "clock_ghz", "positive number"),
    (
        lambda d: d["scalar"].update(pj_per_op=-1.0),
        "scalar.pj_per_op",
        "non-negative number",
    ),
    (
        lambda d: d["memory"][1].update(capacity_bytes=1 << 30),
        "memory[1].capacity_bytes",
        "an on-chip level must be no larger than DRAM",
    ),
    (
        lambda d: d["memory"][1].update(kind="flash"),
        "memory[1].kind",
        "'dram' or 'sram'",
    ),
    (lambda d: d["memory"].reverse(), "memory[0].kind", "DRAM level must come first"),
    (lambda d: d["memory"].pop(), "memory", "at least one SRAM level"),
    (lambda d: d["memory"][1].update(banks=3), "memory[1].banks", "equal banks"),
    (
        lambda d: d["memory"][1].update(banks=64),
        "memory[1].banks",
        "it must be a positive integer of at most 32",
    ),
    (
        lambda d: d["mac_array"].update(operand_levels=["l2"]),
        "mac_array.operand_levels",
        "the memory levels are dram, l1",
    ),
    # per-operand levels: operand_levels is shorthand, never mixed with its parts
    (
        lambda d: d["mac_array"].update(input_levels=["l1"]),
        "mac_array.operand_levels",
        "shorthand for input_levels = weight_levels",
    ),
    (
        lambda d: d["mac_array"].update(
            input_levels=d["mac_array"].pop("operand_levels")
        ),
        "mac_array.weight_levels",
        "is missing because a [mac_array] without operand_levels must give it",
    ),
    (
        lambda d: (
            d["mac_array"].update(
                input_levels=["l1"], weight_levels=["wbuf"], operand_levels=None
            )
            or d["mac_array"].pop("operand_levels")
        ),
        "mac_array.weight_levels",
        "the memory levels are dram, l1",
    ),
    (
        lambda d: d["mac_array"].update(
            input_levels=["dram"], weight_levels=d["mac_array"].pop("operand_levels")
        ),
        "mac_array.input_levels",
        "cannot work on DRAM",
    ),
    (
        lambda d: d["vector"].update(levels=["dram"]),
        "vector.levels",
        "cannot work on DRAM",
    ),
    (
        lambda d: d["mac_array"]["dtypes"].update(int4={}),
        "mac_array.dtypes.int4",
        "is unknown",
    ),
    (lambda d: d["mac_array"]["dtypes"].clear(), "mac_array.dtypes", "at least one"),
    (
        lambda d: d["vector"]["cycles"].pop("divide"),
        "vector.cycles.divide",
        "is missing",
    ),
    (lambda d: d["scalar"].update(cycles=3), "scalar.cycles", "must be a table"),
    (lambda d: d["memory"][1].update(name="dram"), "memory[1].name", "unique"),
    # the runtime's limits (an unchecked ninth level was an IndexError inside the
    # simulator, a 33rd channel a message blaming an unvalidated spec)
    (lambda d: d["dma"].update(channels=33), "dma.channels", "at most 32"),
    (lambda d: d["dma"].update(max_dims=9), "dma.max_dims", "at most 8"),
    (
        lambda d: d["memory"].extend(
            {**d["memory"][1], "name": f"l{i}"} for i in range(2, 10)
        ),
        "memory",
        "at most 8 (DRAM included)",
    ),
]


@pytest.mark.parametrize("edit,key,expect", CASES)
def test_config_error_names_file_key_and_expectation(edit, key, expect):
    with pytest.raises(ConfigError) as info:
        from_dict(_broken(edit), source="/cfg/broken.toml")
    msg = str(info.value)
    assert msg.startswith("load_config: /cfg/broken.toml: key ")
    assert f"key {key} " in msg
    assert expect in msg
    assert "broken.toml." in msg  # the fix names the file


def test_config_error_from_a_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(
        (CONFIG_DIR / "tiny.toml").read_text().replace("rows = 4", "rows = 0")
    )
    with pytest.raises(ConfigError, match=r"bad.toml: key mac_array.rows is 0 because"):
        load_config(path)


def test_config_error_bad_toml(tmp_path):
    path = tmp_path / "syntax.toml"
    path.write_text("name = \n")
    with pytest.raises(ConfigError, match=r"syntax.toml is not valid TOML because"):
        load_config(path)


def test_config_error_unknown_name():
    with pytest.raises(
        ConfigError, match=r"no hardware description 'edge' because it is neither"
    ):
        load_config("edge")


def test_spec_level_error():
    with pytest.raises(ConfigError, match=r"no memory level 'l9' because its levels"):
        load_config("tiny").level("l9")


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    """A missing key no longer hides a type error further down (issue 11, #8)."""
    text = (CONFIG_DIR / "tiny.toml").read_text()
    text = text.replace("clock_ghz = 1.0", 'clock_ghz = "fast"')
    text = text.replace("rows = 4  #", "#")  # mac_array.rows missing
    text = text.replace("channels = 2", "chanels = 2")
    text = text.replace("banks = 4", "banks = 3")
    path = tmp_path / "many.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    head, *lines = msg.splitlines()
    assert head.startswith(f"load_config: {path}: 5 problems because ")
    assert head.endswith(
        "Fix clock_ghz, mac_array.rows, memory[1].banks, dma.chanels, dma.channels "
        "in many.toml:"
    ), head
    # in the file's order, each naming its key
    assert [line.split(" because ")[0].strip() for line in lines] == [
        "key clock_ghz is 'fast'",
        "key mac_array.rows is missing",
        "key memory[1].banks is 3, which does not divide capacity_bytes = 16384",
        "key dma.chanels is unknown",
        "key dma.channels is missing",
    ]
    assert all(line.startswith("  key ") for line in lines)


def test_problems_of_one_level_do_not_echo_elsewhere():
    """Engines name memory levels; a broken level list is reported once, not again
    as every engine naming a level that is not there."""
    data = _broken(lambda d: d["memory"][1].pop("name"))
    with pytest.raises(ConfigError) as info:
        from_dict(data, source="/cfg/b.toml")
    assert str(info.value) == (
        "load_config: /cfg/b.toml: key memory[1].name is missing because every "
        "hardware description must give it. Add memory[1].name to b.toml."
    )


def test_every_single_problem_is_reported_alone():
    """Each case of CASES is one problem: one line, none echoed."""
    for edit, key, _ in CASES:
        with pytest.raises(ConfigError) as info:
            from_dict(_broken(edit), source="/cfg/broken.toml")
        assert "\n" not in str(info.value), (key, str(info.value))


def test_a_description_that_is_not_a_table():
    with pytest.raises(ConfigError, match=r"the description is a list because"):
        from_dict([1, 2], source="/cfg/x.toml")
