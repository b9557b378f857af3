"""Hardware descriptions: TOML files loaded into a frozen, validated :class:`Spec`.

A description names the compute engines (a 2-D MAC array, a vector unit, the scalar
control core), the memory levels from DRAM inwards, the DMA engine and the energy of
each operation. ``load_config("edge-npu")`` reads a shipped file from
``accelerator/configs``; ``load_config(path)`` reads any file. Anything malformed
raises :class:`~polyc.errors.ConfigError` naming the file, the key and what was
expected, so a typo never turns into a silently wrong simulation.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import tomllib

from accelerator.spec import (
    DMA,
    MAC_DTYPES,
    MEMORY_KINDS,
    OP_CLASSES,
    VECTOR_CLASSES,
    FrozenMap,
    MacArray,
    MacDType,
    MemoryLevel,
    ScalarCore,
    Spec,
    VectorUnit,
)
from polyc.errors import ConfigError

CONFIG_DIR = Path(__file__).parent / "configs"
#: the runtime keeps at most this many queued commands per engine (PC_MAX_QUEUE)
MAX_QUEUE = 64


def _shipped() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in CONFIG_DIR.glob("*.toml")))


#: names of the shipped hardware descriptions
CONFIGS = _shipped()


# loading ---------------------------------------------------------------------------


def load_config(name_or_path: str | Path | Spec) -> Spec:
    """Load a hardware description: a shipped name (see ``CONFIGS``) or a TOML path.

    Raises:
        ConfigError: for an unknown name, an unreadable file, bad TOML, or a
            malformed description (missing, unknown or mistyped key, a size that is
            not positive, a memory level larger than the one above it).
    """
    if isinstance(name_or_path, Spec):
        return name_or_path
    text = str(name_or_path)
    if text in CONFIGS:
        path = CONFIG_DIR / f"{text}.toml"
    else:
        path = Path(text)
        if not path.is_file():
            raise ConfigError(
                f"load_config: no hardware description {text!r} because it is neither "
                f"a shipped config ({', '.join(CONFIGS)}) nor an existing file. Pass "
                "one of those names or the path of a TOML file."
            )
    stat = path.stat()
    return _load_file(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _load_file(path: str, mtime_ns: int, size: int) -> Spec:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(
            f"load_config: {path} is not valid TOML because {err}. Fix the syntax."
        ) from None
    return from_dict(data, source=path)


def from_dict(data: Mapping, source: str = "<dict>") -> Spec:
    """Validate an already-parsed description (``tomllib`` output) into a Spec.

    Raises:
        ConfigError: as :func:`load_config`.
    """
    r = _Reader(source)
    top = r.table(data, "", required=TOP_KEYS)
    memory = tuple(
        _memory(r, m, f"memory[{i}]") for i, m in enumerate(r.array(top, "memory"))
    )
    _check_levels(r, memory)
    names = [m.name for m in memory]
    spec = Spec(
        name=r.string(top, "name"),
        description=r.string(top, "description"),
        source=source,
        clock_ghz=r.number(top, "clock_ghz"),
        mac_array=_mac_array(r, r.sub(top, "mac_array"), names),
        vector=_vector(r, r.sub(top, "vector"), names),
        scalar=_scalar(r, r.sub(top, "scalar")),
        memory=memory,
        dma=_dma(r, r.sub(top, "dma")),
    )
    return spec


TOP_KEYS = (
    "name",
    "description",
    "clock_ghz",
    "mac_array",
    "vector",
    "scalar",
    "memory",
    "dma",
)


def _mac_array(r: _Reader, t: dict, levels: list[str]) -> MacArray:
    t = r.table(
        t,
        "mac_array",
        required=(
            "rows",
            "cols",
            "fill_drain_cycles",
            "operand_levels",
            "accumulator_levels",
            "dtypes",
        ),
    )
    dts = r.table(
        r.sub(t, "dtypes", "mac_array"), "mac_array.dtypes", allowed=tuple(MAC_DTYPES)
    )
    if not dts:
        r.fail(
            "mac_array.dtypes",
            "is empty",
            "it must give at least one of " + ", ".join(MAC_DTYPES),
        )
    dtypes = {}
    for name in MAC_DTYPES:
        if name in dts:
            where = f"mac_array.dtypes.{name}"
            d = r.table(dts[name], where, required=("macs_per_cycle", "pj_per_mac"))
            dtypes[name] = MacDType(
                r.number(d, "macs_per_cycle", where),
                r.number(d, "pj_per_mac", where, zero_ok=True),
            )
    return MacArray(
        rows=r.integer(t, "rows", "mac_array"),
        cols=r.integer(t, "cols", "mac_array"),
        fill_drain_cycles=r.integer(t, "fill_drain_cycles", "mac_array", zero_ok=True),
        operand_levels=r.levels(t, "operand_levels", "mac_array", levels),
        accumulator_levels=r.levels(t, "accumulator_levels", "mac_array", levels),
        dtypes=FrozenMap(dtypes),
    )


def _vector(r: _Reader, t: dict, levels: list[str]) -> VectorUnit:
    t = r.table(t, "vector", required=("lanes", "levels", "pj_per_op", "cycles"))
    return VectorUnit(
        lanes=r.integer(t, "lanes", "vector"),
        levels=r.levels(t, "levels", "vector", levels),
        pj_per_op=r.number(t, "pj_per_op", "vector", zero_ok=True),
        cycles=r.cycles(r.sub(t, "cycles", "vector"), "vector.cycles", VECTOR_CLASSES),
    )


def _scalar(r: _Reader, t: dict) -> ScalarCore:
    t = r.table(
        t,
        "scalar",
        required=(
            "statement_cycles",
            "issue_cycles",
            "queue_depth",
            "pj_per_op",
            "cycles",
        ),
    )
    return ScalarCore(
        statement_cycles=r.integer(t, "statement_cycles", "scalar", zero_ok=True),
        issue_cycles=r.integer(t, "issue_cycles", "scalar", zero_ok=True),
        queue_depth=r.integer(t, "queue_depth", "scalar", most=MAX_QUEUE),
        pj_per_op=r.number(t, "pj_per_op", "scalar", zero_ok=True),
        cycles=r.cycles(r.sub(t, "cycles", "scalar"), "scalar.cycles", OP_CLASSES),
    )


def _memory(r: _Reader, t: object, where: str) -> MemoryLevel:
    keys = (
        "name",
        "kind",
        "capacity_bytes",
        "bytes_per_cycle",
        "latency_cycles",
        "banks",
        "alignment_bytes",
        "read_pj_per_byte",
        "write_pj_per_byte",
    )
    t = r.table(t, where, required=keys)
    kind = r.string(t, "kind", where)
    if kind not in MEMORY_KINDS:
        r.fail(f"{where}.kind", f"is {kind!r}", "it must be 'dram' or 'sram'")
    level = MemoryLevel(
        name=r.string(t, "name", where),
        kind=kind,
        capacity_bytes=r.integer(t, "capacity_bytes", where),
        bytes_per_cycle=r.number(t, "bytes_per_cycle", where),
        latency_cycles=r.integer(t, "latency_cycles", where, zero_ok=True),
        banks=r.integer(t, "banks", where),
        alignment_bytes=r.integer(t, "alignment_bytes", where),
        read_pj_per_byte=r.number(t, "read_pj_per_byte", where, zero_ok=True),
        write_pj_per_byte=r.number(t, "write_pj_per_byte", where, zero_ok=True),
    )
    if level.capacity_bytes % level.banks:
        r.fail(
            f"{where}.banks",
            f"is {level.banks}, which does not divide capacity_bytes = "
            f"{level.capacity_bytes}",
            "banks must split the level into equal banks",
        )
    return level


def _check_levels(r: _Reader, memory: tuple[MemoryLevel, ...]) -> None:
    if not memory:
        r.fail("memory", "is empty", "it must list DRAM first, then SRAM levels")
    if memory[0].kind != "dram" or any(m.kind == "dram" for m in memory[1:]):
        r.fail(
            "memory[0].kind",
            f"lists kinds {[m.kind for m in memory]}",
            "exactly one DRAM level must come first, then the SRAM levels",
        )
    if len(memory) < 2:
        r.fail("memory", "has no SRAM level", "it must list at least one SRAM level")
    seen: set[str] = set()
    for i, m in enumerate(memory):
        if m.name in seen:
            r.fail(f"memory[{i}].name", f"repeats {m.name!r}", "level names are unique")
        seen.add(m.name)
        if i and m.capacity_bytes > memory[i - 1].capacity_bytes:
            up = memory[i - 1]
            r.fail(
                f"memory[{i}].capacity_bytes",
                f"is {m.capacity_bytes}, larger than the level above it "
                f"({up.name}: {up.capacity_bytes} bytes)",
                "each level must be no larger than the one listed before it",
            )


def _dma(r: _Reader, t: dict) -> DMA:
    t = r.table(
        t, "dma", required=("channels", "setup_cycles", "bytes_per_cycle", "max_dims")
    )
    return DMA(
        channels=r.integer(t, "channels", "dma"),
        setup_cycles=r.integer(t, "setup_cycles", "dma", zero_ok=True),
        bytes_per_cycle=r.number(t, "bytes_per_cycle", "dma"),
        max_dims=r.integer(t, "max_dims", "dma"),
    )


class _Reader:
    """Typed access to a parsed TOML document; every failure names file and key."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, what: str, expected: str):
        raise ConfigError(
            f"load_config: {self.source}: key {key} {what} because {expected}. "
            f"Fix {key} in {Path(self.source).name}."
        )

    def _key(self, where: str, key: str) -> str:
        return f"{where}.{key}" if where else key

    def table(
        self,
        t: object,
        where: str,
        required: tuple[str, ...] = (),
        allowed: tuple[str, ...] = (),
    ) -> dict:
        if not isinstance(t, Mapping):
            self.fail(where, f"is {t!r}", "it must be a table")
        known = set(required) | set(allowed)
        for k in t:
            if k not in known:
                self.fail(
                    self._key(where, k),
                    "is unknown",
                    f"{where or 'the top level'} takes only {', '.join(sorted(known))}",
                )
        for k in required:
            if k not in t:
                raise ConfigError(
                    f"load_config: {self.source}: key {self._key(where, k)} is missing "
                    f"because every hardware description must give it. Add "
                    f"{self._key(where, k)} to {Path(self.source).name}."
                )
        return dict(t)

    def sub(self, t: dict, key: str, where: str = "") -> dict:
        """A sub-table whose keys the caller checks."""
        v = t[key]
        if not isinstance(v, Mapping):
            self.fail(self._key(where, key), f"is {v!r}", "it must be a table")
        return dict(v)

    def array(self, t: dict, key: str) -> list:
        v = t[key]
        if not isinstance(v, list):
            self.fail(key, f"is {v!r}", "it must be an array of tables ([[memory]])")
        return v

    def string(self, t: dict, key: str, where: str = "") -> str:
        v = t[key]
        if not isinstance(v, str) or not v:
            self.fail(
                self._key(where, key), f"is {v!r}", "it must be a non-empty string"
            )
        return v

    def integer(
        self, t: dict, key: str, where: str = "", zero_ok=False, most: int = 0
    ) -> int:
        v = t[key]
        low = 0 if zero_ok else 1
        bad = isinstance(v, bool) or not isinstance(v, int) or v < low
        if bad or (most and v > most):
            what = "a non-negative integer" if zero_ok else "a positive integer"
            if most:
                what += f" of at most {most}"
            self.fail(self._key(where, key), f"is {v!r}", f"it must be {what}")
        return v

    def number(self, t: dict, key: str, where: str = "", zero_ok=False) -> float:
        v = t[key]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok or not (v >= 0 if zero_ok else v > 0) or v != v or v == float("inf"):
            what = "a non-negative number" if zero_ok else "a positive number"
            self.fail(self._key(where, key), f"is {v!r}", f"it must be {what}")
        return float(v)

    def levels(self, t: dict, key: str, where: str, names: list[str]) -> tuple:
        v = t[key]
        full = self._key(where, key)
        if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
            self.fail(full, f"is {v!r}", "it must be a non-empty list of level names")
        for x in v:
            if x not in names:
                self.fail(
                    full, f"names {x!r}", f"the memory levels are {', '.join(names)}"
                )
            if x == names[0]:
                self.fail(full, f"names {x!r}", "compute engines cannot work on DRAM")
        return tuple(v)

    def cycles(self, t: dict, where: str, classes: tuple[str, ...]) -> Mapping:
        t = self.table(t, where, required=classes)
        return FrozenMap({c: self.integer(t, c, where) for c in classes})
