"""The C runtime's interface as Python sees it, read from one source: ``polyc_rt.h``.

The header is the source of truth, because the C code uses its names directly (a
``switch`` over ``PC_OP_*``, tables indexed by ``PC_ENG_*``) and cffi reads the
same text: every number Python passes to the runtime or reads back (MAC modes,
vector dtypes and ops, op class indices, engine slots, trace event kinds, array
sizes) is parsed here from the header's ``#define`` lines, once, at import. Python
only names them: the dtype and op class words of :mod:`accelerator.hardware.spec`
for the header's short spellings (``F16`` is ``float16``, ``CMP`` is ``compare``).
Struct layouts are never copied: cffi lays out ``pc_spec``, ``pc_stats`` and
``pc_event`` from the header's declarations (``ffi.offsetof``).

This module also lists the runtime's files (the header, the internal header and the
C files, each an ordinary translation unit) for the build (``codegen.accel.direct``).
``tests/accelerator/test_runtime_abi.py`` checks the tables against the compiled
runtime and against the copies other rooms keep (the IR's MAC modes, the config
loader's queue bound).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from types import MappingProxyType

from accelerator.hardware.spec import Spec

RUNTIME_DIR = Path(__file__).parent / "runtime"
HEADER = "polyc_rt.h"
_CDEF_BEGIN, _CDEF_END = "/* CDEF BEGIN */", "/* CDEF END */"
_DEFINE = re.compile(r"^#define\s+(PC_\w+)\s+(0[xX][0-9a-fA-F]+|\d+)\s*(?:/\*.*)?$")

#: the header's short dtype spellings
_DTYPES = {
    "I8": "int8",
    "I32": "int32",
    "F16": "float16",
    "F32": "float32",
    "BF16": "bfloat16",
}
#: the header's op class names (``PC_ADD`` ..), with the vector unit's reduction step
_CLASSES = {
    "ADD": "add",
    "MUL": "mul",
    "CMP": "compare",
    "DIV": "divide",
    "TRANS": "transcendental",
    "RED": "reduce",
}


@functools.cache
def header() -> str:
    """The text of ``polyc_rt.h`` (generated kernels paste it at their top)."""
    return (RUNTIME_DIR / HEADER).read_text()


@functools.cache
def cdef() -> str:
    """The runtime declarations cffi needs (the CDEF part of the header)."""
    text = header()
    begin = text.index(_CDEF_BEGIN) + len(_CDEF_BEGIN)
    return text[begin : text.index(_CDEF_END)]


@functools.cache
def files() -> dict[str, str]:
    """Every runtime file (``*.h`` and ``*.c``), name -> text, sorted by name: the
    build compiles each ``.c`` on its own, and hashes all of them into its key."""
    paths = sorted([*RUNTIME_DIR.glob("*.h"), *RUNTIME_DIR.glob("*.c")])
    return {p.name: p.read_text() for p in paths}


@functools.cache
def defines() -> MappingProxyType:
    """The integer ``#define PC_*`` constants of the header's CDEF part."""
    out = {}
    for line in cdef().splitlines():
        m = _DEFINE.match(line.strip())
        if m:
            out[m.group(1)] = int(m.group(2), 0)
    return MappingProxyType(out)


def _group(prefix: str) -> dict[str, int]:
    """``PC_<prefix><NAME>`` constants as ``{NAME: value}``."""
    return {
        name.removeprefix(prefix): value
        for name, value in defines().items()
        if name.startswith(prefix)
    }


def _sequence(prefix: str) -> tuple[str, ...]:
    """Lower-case names of the constants ``PC_<prefix>*``, in value order 0, 1, ..."""
    group = _group(prefix)
    names = sorted(group, key=group.__getitem__)
    assert [group[n] for n in names] == list(range(len(names))), prefix
    return tuple(n.lower() for n in names)


def _mac_modes() -> dict[tuple[str, str], int]:
    out = {}
    for name, value in _group("PC_").items():
        operand, _, acc = name.partition("_")
        if operand in _DTYPES and acc in _DTYPES:
            out[(_DTYPES[operand], _DTYPES[acc])] = value
    return out


#: array bounds of the runtime's structs
MAX_LEVELS = defines()["PC_MAX_LEVELS"]
MAX_CHANNELS = defines()["PC_MAX_CHANNELS"]
MAX_QUEUE = defines()["PC_MAX_QUEUE"]
#: bytes of a name in the runtime's structs (``pc_level.name``, ``pc_event.label``)
NAME_BYTES = defines()["PC_NAME"]
#: MAC modes of the runtime (``PC_I8_I32`` ..), by (operand dtype, accumulator dtype)
MAC_MODES = _mac_modes()
#: element types of the MAC array (``PC_MAC_*``: the index into ``pc_spec.mac_rate``)
MAC_TYPES = {name.lower(): v for name, v in _group("PC_MAC_").items()}
#: MAC array dataflows (``PC_DF_*``: ``pc_spec.dataflow``), by config name
DATAFLOWS = {name.lower(): v for name, v in _group("PC_DF_").items()}
#: vector primitive dtypes (``PC_F32`` ..)
VEC_DTYPES = {_DTYPES[n]: v for n, v in _group("PC_").items() if n in _DTYPES}
#: vector primitive ops (``PC_OP_*``)
VEC_OPS = {name.lower(): v for name, v in _group("PC_OP_").items()}
#: op class index in ``pc_spec`` tables (``PC_ADD`` ..), with the vector unit's
#: "reduce"
CLASS_INDEX = {_CLASSES[n]: v for n, v in _group("PC_").items() if n in _CLASSES}
#: engine slots: the scalar core, the MAC array, the vector unit, then the DMA channels
ENGINE_SCALAR = defines()["PC_ENG_SCALAR"]
ENGINE_MAC = defines()["PC_ENG_MAC"]
ENGINE_VECTOR = defines()["PC_ENG_VECTOR"]
ENGINE_DMA = defines()["PC_ENG_DMA"]
#: trace event kinds by ``pc_event.kind`` (``PC_EV_*``)
EVENT_KINDS = _sequence("PC_EV_")


def engine_names(spec: Spec) -> list[str]:
    """The name of each engine slot of a context on ``spec`` (``pc_stats.busy``)."""
    fixed = {
        ENGINE_SCALAR: "scalar",
        ENGINE_MAC: "mac_array",
        ENGINE_VECTOR: "vector",
    }
    return [fixed[i] for i in range(ENGINE_DMA)] + [
        f"dma{c}" for c in range(spec.dma.channels)
    ]
