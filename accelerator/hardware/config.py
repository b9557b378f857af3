"""Hardware descriptions: TOML files loaded into a frozen, validated :class:`Spec`.

A description names the compute engines (a 2-D MAC array, a vector unit, the scalar
control core), the memory levels from DRAM inwards, the DMA engine and the energy of
each operation. ``load_config("edge-npu")`` reads a shipped file from
``accelerator/hardware/configs``; ``load_config(path)`` reads any file. Anything malformed
raises :class:`~polyc.errors.ConfigError` naming the file, the key and what was
expected, so a typo never turns into a silently wrong simulation; every problem of a
file is in that one error, one line per problem.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import tomllib

from accelerator.hardware.spec import (
    AREA_KEYS,
    DATAFLOWS,
    DMA,
    MAC_DTYPES,
    MEMORY_KINDS,
    OP_CLASSES,
    VECTOR_CLASSES,
    AreaModel,
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
#: the runtime models at most this many banks per SRAM level (PC_MAX_BANKS)
MAX_BANKS = 32
#: the runtime's limits on levels (PC_MAX_LEVELS), DMA channels (PC_MAX_CHANNELS)
#: and the dimensions of one DMA descriptor (PC_MAX_DIMS); this room may not import
#: the simulator, so tests/accelerator/test_runtime_abi.py checks they agree
MAX_LEVELS = 8
MAX_CHANNELS = 32
MAX_DIMS = 8


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
            not positive, an on-chip level larger than DRAM).
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

    Every problem of the description is reported at once: one ConfigError whose
    message has one line per problem, each naming its key.

    Raises:
        ConfigError: as :func:`load_config`.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"load_config: {source}: the description is a {type(data).__name__} "
            "because it was not parsed from TOML. Pass the dict tomllib.load returns."
        )
    r = _Reader(source, order=[*data, *TOP_KEYS])
    top = r.table(data, "", required=TOP_KEYS, allowed=("area",))
    before = len(r.problems)
    levels = r.array(top, "memory")
    memory = tuple(_memory(r, m, f"memory[{i}]") for i, m in enumerate(levels or ()))
    if levels is not None:
        _check_levels(r, memory)
    # engines name levels; against a broken level list that check would only echo it
    names = [m.name for m in memory] if len(r.problems) == before else None
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
        area=_area(r, r.sub(top, "area"), names),
    )
    _check_area(r, spec)
    r.raise_problems()
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

# Each builder below returns None for a table that is absent or not a table (the
# problem is already recorded), and reads every key it can, so that one pass finds
# every problem of the file; the values of a failed read are None.


def _mac_array(r: _Reader, t: dict | None, levels: list[str] | None) -> MacArray | None:
    if isinstance(t, Mapping) and "fill_drain_cycles" in t:
        # the old fixed cost per call: say why it went rather than "unknown key"
        t = {k: v for k, v in t.items() if k != "fill_drain_cycles"}
        r.fail(
            "mac_array.fill_drain_cycles",
            "is no longer read",
            "the array's fill, skew and drain follow from rows, cols and "
            "mac_array.dataflow, so the key must go",
        )
    t = r.table(
        t,
        "mac_array",
        required=(
            "rows",
            "cols",
            "accumulator_levels",
            "dtypes",
        ),
        allowed=(*OPERAND_KEYS, "requantize", "dataflow", "double_buffered"),
    )
    if t is None:
        return None
    input_levels, weight_levels = _operand_levels(r, t, levels)
    dataflow = t.get("dataflow", DATAFLOWS[0])
    if dataflow not in DATAFLOWS:
        dataflow = r.fail(
            "mac_array.dataflow",
            f"is {dataflow!r}",
            "it must be one of " + ", ".join(repr(d) for d in DATAFLOWS),
        )
    double = t.get("double_buffered", True)
    if not isinstance(double, bool):
        double = r.fail(
            "mac_array.double_buffered", f"is {double!r}", "it must be true or false"
        )
    dts = r.table(
        r.sub(t, "dtypes", "mac_array"), "mac_array.dtypes", allowed=tuple(MAC_DTYPES)
    )
    if dts is not None and not dts:
        r.fail(
            "mac_array.dtypes",
            "is empty",
            "it must give at least one of " + ", ".join(MAC_DTYPES),
        )
    dtypes = {}
    for name in MAC_DTYPES:
        if dts and name in dts:
            where = f"mac_array.dtypes.{name}"
            d = r.table(dts[name], where, required=("macs_per_cycle", "pj_per_mac"))
            if d is not None:
                dtypes[name] = MacDType(
                    r.number(d, "macs_per_cycle", where),
                    r.number(d, "pj_per_mac", where, zero_ok=True),
                )
    return MacArray(
        rows=r.integer(t, "rows", "mac_array"),
        cols=r.integer(t, "cols", "mac_array"),
        input_levels=input_levels,
        weight_levels=weight_levels,
        accumulator_levels=r.levels(t, "accumulator_levels", "mac_array", levels),
        dtypes=FrozenMap(dtypes),
        requantize=r.boolean(t, "requantize", "mac_array"),
        dataflow=dataflow,
        double_buffered=double,
    )


#: where the MAC array reads A and B: ``operand_levels`` is shorthand for both
OPERAND_KEYS = ("operand_levels", "input_levels", "weight_levels")


def _operand_levels(r: _Reader, t: dict, levels: list[str] | None):
    """``(input_levels, weight_levels)`` of a ``[mac_array]`` table: both from
    ``operand_levels``, or each from its own key (never both spellings)."""
    if "operand_levels" in t:
        split = [k for k in OPERAND_KEYS[1:] if k in t]
        if split:
            r.fail(
                "mac_array.operand_levels",
                f"is given together with {' and '.join(split)}",
                "operand_levels is shorthand for input_levels = weight_levels; "
                "give either it or both of input_levels and weight_levels",
            )
            return None, None
        both = r.levels(t, "operand_levels", "mac_array", levels)
        return both, both
    out = []
    for key in OPERAND_KEYS[1:]:
        if key not in t:
            r.fail(
                f"mac_array.{key}",
                "is missing",
                "a [mac_array] without operand_levels must give it",
            )
        out.append(r.levels(t, key, "mac_array", levels))
    return tuple(out)


def _vector(r: _Reader, t: dict | None, levels: list[str] | None) -> VectorUnit | None:
    t = r.table(t, "vector", required=("lanes", "levels", "pj_per_op", "cycles"))
    if t is None:
        return None
    return VectorUnit(
        lanes=r.integer(t, "lanes", "vector"),
        levels=r.levels(t, "levels", "vector", levels),
        pj_per_op=r.number(t, "pj_per_op", "vector", zero_ok=True),
        cycles=r.cycles(r.sub(t, "cycles", "vector"), "vector.cycles", VECTOR_CLASSES),
    )


def _scalar(r: _Reader, t: dict | None) -> ScalarCore | None:
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
    if t is None:
        return None
    return ScalarCore(
        statement_cycles=r.integer(t, "statement_cycles", "scalar", zero_ok=True),
        issue_cycles=r.integer(t, "issue_cycles", "scalar", zero_ok=True),
        queue_depth=r.integer(t, "queue_depth", "scalar", most=MAX_QUEUE),
        pj_per_op=r.number(t, "pj_per_op", "scalar", zero_ok=True),
        cycles=r.cycles(r.sub(t, "cycles", "scalar"), "scalar.cycles", OP_CLASSES),
    )


def _memory(r: _Reader, t: object, where: str) -> MemoryLevel | None:
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
    split = ("read_bytes_per_cycle", "write_bytes_per_cycle")
    t = r.table(t, where, required=keys, allowed=split)
    if t is None:
        return None
    kind = r.string(t, "kind", where)
    if kind is not None and kind not in MEMORY_KINDS:
        kind = r.fail(f"{where}.kind", f"is {kind!r}", "it must be 'dram' or 'sram'")
    for k in split:
        if k in t and kind == "sram":
            r.fail(
                f"{where}.{k}",
                "is given for an SRAM level",
                "only the DRAM level has a read/write split",
            )
    level = MemoryLevel(
        name=r.string(t, "name", where),
        kind=kind,
        capacity_bytes=r.integer(t, "capacity_bytes", where),
        bytes_per_cycle=r.number(t, "bytes_per_cycle", where),
        latency_cycles=r.integer(t, "latency_cycles", where, zero_ok=True),
        banks=r.integer(t, "banks", where, most=MAX_BANKS),
        alignment_bytes=r.integer(t, "alignment_bytes", where),
        read_pj_per_byte=r.number(t, "read_pj_per_byte", where, zero_ok=True),
        write_pj_per_byte=r.number(t, "write_pj_per_byte", where, zero_ok=True),
        read_bytes_per_cycle=r.number(t, "read_bytes_per_cycle", where),
        write_bytes_per_cycle=r.number(t, "write_bytes_per_cycle", where),
    )
    capacity, banks = level.capacity_bytes, level.banks
    if capacity is not None and banks is not None and capacity % banks:
        r.fail(
            f"{where}.banks",
            f"is {banks}, which does not divide capacity_bytes = {capacity}",
            "banks must split the level into equal banks",
        )
    return level


def _check_levels(r: _Reader, memory: tuple[MemoryLevel | None, ...]) -> None:
    if not memory:
        r.fail("memory", "is empty", "it must list DRAM first, then SRAM levels")
        return
    kinds = [m.kind if m else None for m in memory]
    misordered = None not in kinds and (
        kinds[0] != "dram" or any(k == "dram" for k in kinds[1:])
    )
    if misordered:
        r.fail(
            "memory[0].kind",
            f"lists kinds {kinds}",
            "exactly one DRAM level must come first, then the SRAM levels",
        )
    if len(memory) < 2:
        r.fail("memory", "has no SRAM level", "it must list at least one SRAM level")
    if len(memory) > MAX_LEVELS:
        r.fail(
            "memory",
            f"lists {len(memory)} levels",
            f"the simulator models at most {MAX_LEVELS} (DRAM included)",
        )
    seen: set[str] = set()
    for i, m in enumerate(memory):
        if m is None:
            continue
        if m.name is not None and m.name in seen:
            r.fail(f"memory[{i}].name", f"repeats {m.name!r}", "level names are unique")
        seen.add(m.name)
        # on-chip levels may be siblings (one SRAM per operand role), so each is
        # compared with DRAM only, not with the SRAM listed before it
        up = memory[0] if i and not misordered else None
        if up is None or m.capacity_bytes is None or up.capacity_bytes is None:
            continue
        if m.capacity_bytes > up.capacity_bytes:
            r.fail(
                f"memory[{i}].capacity_bytes",
                f"is {m.capacity_bytes}, larger than DRAM "
                f"({up.name}: {up.capacity_bytes} bytes)",
                "an on-chip level must be no larger than DRAM",
            )


def _dma(r: _Reader, t: dict | None) -> DMA | None:
    t = r.table(
        t, "dma", required=("channels", "setup_cycles", "bytes_per_cycle", "max_dims")
    )
    if t is None:
        return None
    return DMA(
        channels=r.integer(t, "channels", "dma", most=MAX_CHANNELS),
        setup_cycles=r.integer(t, "setup_cycles", "dma", zero_ok=True),
        bytes_per_cycle=r.number(t, "bytes_per_cycle", "dma"),
        max_dims=r.integer(t, "max_dims", "dma", most=MAX_DIMS),
    )


def _area(r: _Reader, t: dict | None, levels: list[str] | None) -> AreaModel | None:
    t = r.table(t, "area", required=(*AREA_KEYS, "mac_um2"), allowed=("sram_ports",))
    if t is None:
        return None
    macs = r.table(
        r.sub(t, "mac_um2", "area"), "area.mac_um2", allowed=tuple(MAC_DTYPES)
    )
    ports = r.sub(t, "sram_ports", "area") or {}
    for name in ports:
        if levels is not None and name not in levels[1:]:
            r.fail(
                f"area.sram_ports.{name}",
                "names no SRAM level",
                f"the SRAM levels are {', '.join(levels[1:])}",
            )
    return AreaModel(
        **{k: r.number(t, k, "area", zero_ok=k != "node_nm") for k in AREA_KEYS},
        # 0: the dtype runs on another dtype's units, whose area that one counts
        mac_um2=FrozenMap(
            {d: r.number(macs, d, "area.mac_um2", zero_ok=True) for d in (macs or {})}
        ),
        sram_ports=FrozenMap(
            {n: r.integer(ports, n, "area.sram_ports") for n in ports}
        ),
    )


def _check_area(r: _Reader, spec: Spec) -> None:
    """Every dtype of the MAC array needs its MAC area."""
    if spec.area is None or spec.mac_array is None or spec.mac_array.dtypes is None:
        return
    for name in spec.mac_array.dtypes:
        if name not in spec.area.mac_um2:
            r.fail(
                f"area.mac_um2.{name}",
                "is missing",
                f"the MAC array supports {name}, so its MAC area must be given",
            )


class _Reader:
    """Typed access to a parsed TOML document. A failed read records a problem
    naming file and key and yields None; :meth:`raise_problems` reports them all."""

    def __init__(self, source: str, order=()):
        self.source = source
        self.problems: list[tuple[str, str]] = []  # (key, "key K is X because Y")
        self._order = {k: i for i, k in reversed(list(enumerate(order)))}

    def fail(self, key: str, what: str, expected: str) -> None:
        self.problems.append((key, f"key {key} {what} because {expected}"))
        return None

    def raise_problems(self) -> None:
        """Raise one ConfigError listing every recorded problem (if any)."""
        if not self.problems:
            return
        file = Path(self.source).name
        if len(self.problems) == 1:
            key, text = self.problems[0]
            fix = (
                f"Add {key} to {file}."
                if text.endswith("must give it")
                else f"Fix {key} in {file}."
            )
            raise ConfigError(f"load_config: {self.source}: {text}. {fix}")
        # in the order of the file's tables, as a reader goes through it
        problems = sorted(
            self.problems,
            key=lambda p: self._order.get(p[0].split(".")[0].split("[")[0], -1),
        )
        lines = "\n".join(f"  {text}" for _, text in problems)
        keys = ", ".join(dict.fromkeys(k for k, _ in problems))
        raise ConfigError(
            f"load_config: {self.source}: {len(self.problems)} problems because "
            f"the description breaks these rules (one per line). Fix {keys} in "
            f"{file}:\n{lines}"
        )

    def _key(self, where: str, key: str) -> str:
        return f"{where}.{key}" if where else key

    def table(
        self,
        t: object,
        where: str,
        required: tuple[str, ...] = (),
        allowed: tuple[str, ...] = (),
    ) -> dict | None:
        if t is None:  # absent or already refused
            return None
        if not isinstance(t, Mapping):
            return self.fail(where, f"is {t!r}", "it must be a table")
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
                self.fail(
                    self._key(where, k),
                    "is missing",
                    "every hardware description must give it",
                )
        return dict(t)

    def sub(self, t: dict, key: str, where: str = "") -> dict | None:
        """A sub-table whose keys the caller checks (None when absent or bad)."""
        v = t.get(key)
        if v is None:
            return None
        if not isinstance(v, Mapping):
            return self.fail(self._key(where, key), f"is {v!r}", "it must be a table")
        return dict(v)

    def array(self, t: dict, key: str) -> list | None:
        v = t.get(key)
        if v is None:
            return None
        if not isinstance(v, list):
            return self.fail(
                key, f"is {v!r}", "it must be an array of tables ([[memory]])"
            )
        return v

    def string(self, t: dict, key: str, where: str = "") -> str | None:
        if key not in t:
            return None
        v = t[key]
        if not isinstance(v, str) or not v:
            return self.fail(
                self._key(where, key), f"is {v!r}", "it must be a non-empty string"
            )
        return v

    def integer(
        self, t: dict, key: str, where: str = "", zero_ok=False, most: int = 0
    ) -> int | None:
        if key not in t:
            return None
        v = t[key]
        low = 0 if zero_ok else 1
        bad = isinstance(v, bool) or not isinstance(v, int) or v < low
        if bad or (most and v > most):
            what = "a non-negative integer" if zero_ok else "a positive integer"
            if most:
                what += f" of at most {most}"
            return self.fail(self._key(where, key), f"is {v!r}", f"it must be {what}")
        return v

    def boolean(self, t: dict, key: str, where: str = "") -> bool:
        """An optional switch (false when absent)."""
        v = t.get(key, False)
        if not isinstance(v, bool):
            self.fail(self._key(where, key), f"is {v!r}", "it must be true or false")
            return False
        return v

    def number(self, t: dict, key: str, where: str = "", zero_ok=False) -> float | None:
        if key not in t:
            return None
        v = t[key]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok or not (v >= 0 if zero_ok else v > 0) or v != v or v == float("inf"):
            what = "a non-negative number" if zero_ok else "a positive number"
            return self.fail(self._key(where, key), f"is {v!r}", f"it must be {what}")
        return float(v)

    def levels(
        self, t: dict, key: str, where: str, names: list[str] | None
    ) -> tuple | None:
        if key not in t:
            return None
        v = t[key]
        full = self._key(where, key)
        if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
            return self.fail(
                full, f"is {v!r}", "it must be a non-empty list of level names"
            )
        ok = True
        for x in v if names is not None else ():
            if x not in names:
                ok = self.fail(
                    full, f"names {x!r}", f"the memory levels are {', '.join(names)}"
                )
            elif x == names[0]:
                ok = self.fail(
                    full, f"names {x!r}", "compute engines cannot work on DRAM"
                )
        return tuple(v) if ok else None

    def cycles(self, t: dict | None, where: str, classes: tuple[str, ...]) -> Mapping:
        t = self.table(t, where, required=classes)
        if t is None:
            return None
        return FrozenMap({c: self.integer(t, c, where) for c in classes})
