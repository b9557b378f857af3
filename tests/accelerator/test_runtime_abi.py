"""The C runtime as ordinary translation units, and its ABI from one source.

Each ``.c`` of ``accelerator/sim/runtime`` compiles on its own with the real
compiler (warnings are errors), the objects link with no undefined symbol, the
library exports the API and none of the internal ``pc__`` functions, and a change
to any runtime file changes the build's cache key (and so rebuilds). The numbers
:mod:`accelerator.sim.abi` parses from ``polyc_rt.h`` are the ones the compiled
runtime sees, and the copies other rooms keep (the IR's MAC modes, the config
loader's queue bound) agree with them.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest

from accelerator.hardware import config
from accelerator.hardware.spec import (
    DATAFLOWS,
    MAC_DTYPES,
    OP_CLASSES,
    VECTOR_CLASSES,
)
from accelerator.sim import abi
from accelerator.sim.attribution import COMPUTE
from accelerator.sim.simulator import Simulator
from codegen import build as cbuild
from codegen.accel.direct import build_runtime
from polyc.ir.marks import MAC_MODES as IR_MAC_MODES

CC = cbuild.CC
WARNINGS = ("-Wall", "-Wextra", "-Wmissing-prototypes", "-Werror")
C_FILES = sorted(f for f in abi.files() if f.endswith(".c"))
HEADERS = sorted(f for f in abi.files() if f.endswith(".h"))


def _cc(*args: str) -> None:
    proc = subprocess.run([CC, *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# translation units ------------------------------------------------------------------


def test_the_runtime_has_several_c_files_and_an_internal_header():
    assert len(C_FILES) >= 3 and "rt_internal.h" in HEADERS


@pytest.mark.parametrize("name", C_FILES)
def test_each_c_file_compiles_on_its_own(name, tmp_path):
    # -Wmissing-prototypes: every function another file may call is declared in a
    # header, so no file relies on being pasted after another
    _cc("-c", *WARNINGS, str(abi.RUNTIME_DIR / name), "-o", str(tmp_path / "x.o"))


@pytest.mark.parametrize("name", HEADERS)
def test_each_header_compiles_on_its_own(name, tmp_path):
    unit = tmp_path / "unit.c"
    unit.write_text(f'#include "{name}"\n')
    _cc("-c", *WARNINGS, f"-I{abi.RUNTIME_DIR}", str(unit), "-o", str(tmp_path / "x.o"))


@pytest.fixture(scope="module")
def separate_library(tmp_path_factory) -> Path:
    """The runtime's files compiled one by one and linked, refusing undefined
    symbols (an internal function declared but defined nowhere)."""
    out = tmp_path_factory.mktemp("rt")
    objects = []
    for name in C_FILES:
        obj = out / f"{name}.o"
        _cc("-c", "-fPIC", *WARNINGS, str(abi.RUNTIME_DIR / name), "-o", str(obj))
        objects.append(str(obj))
    lib = out / "librt.so"
    _cc("-shared", "-Wl,-z,defs", *objects, "-o", str(lib), "-lm")
    return lib


def test_the_library_exports_the_api_and_no_internal_function(separate_library):
    lib = ctypes.CDLL(str(separate_library))
    api = ("pc_create", "pc_dma", "pc_mac", "pc_vec_binary", "pc_scalar", "pc_finish")
    assert all(hasattr(lib, f) for f in api)
    internal = ("pc__fail", "pc__trace", "pc__issue", "pc__complete")
    assert not any(hasattr(lib, f) for f in (*internal, "pc__block_range"))


# the build cache key ---------------------------------------------------------------


def _runtime_key(files: dict[str, str]) -> str:
    source = f'#include "{abi.HEADER}"\n'
    flags = cbuild.opt_flags() + cbuild.BASE_FLAGS
    return cbuild.module_name("runtime", source, abi.cdef(), flags, (), files)


@pytest.mark.parametrize("name", sorted(abi.files()))
def test_a_changed_runtime_file_changes_the_cache_key(name):
    files = dict(abi.files())
    before = _runtime_key(files)
    files[name] += "\n/* edited */\n"
    assert _runtime_key(files) != before


def test_a_changed_c_file_is_rebuilt_and_its_code_runs(tmp_path, monkeypatch):
    """Not only the key: the edited file is compiled into the new module."""
    original = build_runtime()  # from the usual cache, before it moves
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYC_OPT", "-O0")  # compiles fastest; same semantics
    files = dict(abi.files())
    old = "int64_t pc_now(pc_ctx *ctx) { return ctx->scalar_time; }"
    assert old in files["rt_core.c"]
    files["rt_core.c"] = files["rt_core.c"].replace(
        old, "int64_t pc_now(pc_ctx *ctx) { return ctx->scalar_time + 1000; }"
    )
    source = f'#include "{abi.HEADER}"\n'
    edited = cbuild.build(source, abi.cdef(), name="runtime", files=files)
    assert not edited.cached and edited.path.name != original.path.name
    assert Simulator(edited, config.load_config("tiny")).now == 1000
    assert Simulator(original, config.load_config("tiny")).now == 0


# the ABI ---------------------------------------------------------------------------


def test_the_parsed_constants_are_what_the_compiled_runtime_sees():
    lib = build_runtime().lib
    assert len(abi.defines()) > 50
    for name, value in abi.defines().items():
        assert getattr(lib, name) == value, name


def test_the_tables_cover_the_hardware_words():
    assert set(abi.CLASS_INDEX) == set(VECTOR_CLASSES)
    assert sorted(abi.CLASS_INDEX.values()) == list(range(len(VECTOR_CLASSES)))
    assert abi.CLASS_INDEX["reduce"] == len(OP_CLASSES)  # after the scalar classes
    assert set(abi.MAC_TYPES) == set(MAC_DTYPES)
    assert set(abi.DATAFLOWS) == set(DATAFLOWS)
    for dtype, acc in MAC_DTYPES.items():
        assert (dtype, acc) in abi.MAC_MODES
    assert set(abi.VEC_DTYPES) == {"float32", "float16", "int32", "int8"}
    assert {"add", "max", "exp", "relu", "copy", "sum", "rmax"} <= set(abi.VEC_OPS)


def test_the_event_kinds_python_reads_exist():
    # trace.py and attribution.py compare events' kinds with these words
    assert {"dma", "wait", *COMPUTE} <= set(abi.EVENT_KINDS)


def test_the_engine_slots_name_every_engine():
    spec = config.load_config("edge-npu")
    names = abi.engine_names(spec)
    assert len(names) == abi.ENGINE_DMA + spec.dma.channels
    assert names[abi.ENGINE_MAC] == "mac_array" and names[abi.ENGINE_DMA] == "dma0"


def test_the_copies_of_other_rooms_agree_with_the_header():
    # the IR and the config loader may not import the simulator (tests/test_layout)
    assert IR_MAC_MODES == abi.MAC_MODES
    assert config.MAX_QUEUE == abi.MAX_QUEUE
    assert abi.defines()["PC_MAX_BANKS"] == config.MAX_BANKS
    assert config.MAX_LEVELS == abi.MAX_LEVELS
    assert config.MAX_CHANNELS == abi.MAX_CHANNELS
    assert abi.defines()["PC_MAX_DIMS"] == config.MAX_DIMS
