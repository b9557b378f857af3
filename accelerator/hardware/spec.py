"""The hardware model: a frozen, hashable description of one accelerator.

:func:`accelerator.hardware.config.load_config` builds a :class:`Spec` from a TOML file; the
runtime (``accelerator.sim.simulator.fill_spec``) and the roofline read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from polyc.errors import ConfigError

#: op classes of the vector unit and the scalar core (see ``polyc.ir.expr.ops_count``)
OP_CLASSES = ("add", "mul", "compare", "divide", "transcendental")
#: the vector unit also has a cost per reduction step
VECTOR_CLASSES = (*OP_CLASSES, "reduce")
#: element types the MAC array may support, and what each accumulates in
MAC_DTYPES = {
    "int8": "int32",
    "float16": "float16",
    "float32": "float32",
    "bfloat16": "float32",
}
MEMORY_KINDS = ("dram", "sram")
#: what the MAC array holds in its PEs while the other operands stream through
#: (see :mod:`accelerator.hardware.dataflow`); a config that omits it gets the first
DATAFLOWS = ("weight_stationary", "output_stationary", "input_stationary")


class FrozenMap(Mapping):
    """An immutable, hashable, picklable mapping (specs go into sets, caches and
    process pools)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping):
        object.__setattr__(self, "_items", dict(items))

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self) -> Iterator:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __eq__(self, other) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __setattr__(self, name, value):
        raise AttributeError("FrozenMap is immutable")

    def __reduce__(self):
        return (FrozenMap, (self._items,))

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"


@dataclass(frozen=True)
class MacDType:
    """One element type of the MAC array: its rate per PE and its energy."""

    macs_per_cycle: float
    pj_per_mac: float


@dataclass(frozen=True)
class MacArray:
    """The MAC array, a systolic array of ``rows x cols`` PEs. One call computes
    ``C[m, n] (+)= A[m, k] @ B[k, n]``: it reads A (the *input* operand) from one
    of ``input_levels``, B (the *weight* operand) from one of ``weight_levels``,
    and reads and writes C (the accumulator) in one of ``accumulator_levels``.

    ``dataflow`` names the operand the PEs hold (one of :data:`DATAFLOWS`);
    ``double_buffered`` says the PEs have a second register for it, so the next
    fold's stationary operand loads (or the last fold's outputs drain) while the
    current fold streams. The timing follows from these alone
    (:func:`accelerator.hardware.dataflow.mac_timing`)."""

    rows: int
    cols: int
    input_levels: tuple[str, ...]
    weight_levels: tuple[str, ...]
    accumulator_levels: tuple[str, ...]
    dtypes: Mapping[str, MacDType]
    #: the output path requantizes int32 accumulators to int8 (polyc.ir.requant)
    requantize: bool = False
    dataflow: str = DATAFLOWS[0]
    double_buffered: bool = True

    @property
    def operand_levels(self) -> tuple[str, ...]:
        """Levels the array reads some operand from (input or weight)."""
        return tuple(dict.fromkeys((*self.input_levels, *self.weight_levels)))

    def role_levels(self, role: str) -> tuple[str, ...]:
        """The levels of operand ``role``: ``"a"`` (input), ``"b"`` (weight) or
        ``"c"`` (accumulator)."""
        return {
            "a": self.input_levels,
            "b": self.weight_levels,
            "c": self.accumulator_levels,
        }[role]

    def peak_macs_per_cycle(self, dtype: str) -> float:
        """MACs per cycle of the whole array for ``dtype`` (0 when unsupported)."""
        d = self.dtypes.get(dtype)
        return self.rows * self.cols * d.macs_per_cycle if d else 0.0


@dataclass(frozen=True)
class VectorUnit:
    lanes: int
    levels: tuple[str, ...]
    pj_per_op: float
    cycles: Mapping[str, int]


@dataclass(frozen=True)
class ScalarCore:
    statement_cycles: int
    issue_cycles: int
    queue_depth: int
    pj_per_op: float
    cycles: Mapping[str, int]


@dataclass(frozen=True)
class MemoryLevel:
    name: str
    kind: str
    capacity_bytes: int
    bytes_per_cycle: float
    latency_cycles: int
    banks: int
    alignment_bytes: int
    read_pj_per_byte: float
    write_pj_per_byte: float
    # DRAM only: caps on all reads (writes) in flight together, where the memory
    # has a read/write split; None: only bytes_per_cycle caps them
    read_bytes_per_cycle: float | None = None
    write_bytes_per_cycle: float | None = None
    # the bytes of one bank where they are not capacity / banks: a level cut
    # short for the memory planner (below intermediates' homes) keeps the
    # simulator's banks, its last one partly
    bank_bytes: int = 0
    # the banks a layer's buffers may take, where fewer than ``banks`` (0: all):
    # the search's view of a layer that plans below the home of a weight
    # fetched ahead (schedules.accel.search.banked); the banks' bound reads it
    usable_banks: int = 0
    # ... and a part of one more, at least a quarter of it, below the layer's
    # end: room for a double buffer's slot, which the DMA fills while a MAC
    # call streams the whole banks (the banks' bound reads it for the DMA)
    usable_part: bool = False

    @property
    def bank_size(self) -> int:
        """The bytes of one bank (banks are block-partitioned, bank ``i`` from
        byte ``i * bank_size``)."""
        return self.bank_bytes or self.capacity_bytes // self.banks


@dataclass(frozen=True)
class DMA:
    channels: int
    setup_cycles: int
    bytes_per_cycle: float
    max_dims: int


#: the keys of a config's ``[area]`` table (see :mod:`accelerator.hardware.area`)
AREA_KEYS = (
    "node_nm",
    "pe_overhead",
    "vector_lane_um2",
    "scalar_core_um2",
    "sram_um2_per_kib",
    "sram_bank_um2",
    "sram_port_factor",
    "dma_channel_um2",
    "dram_phy_um2_per_gbps",
    "leakage_mw_per_mm2",
)


@dataclass(frozen=True)
class AreaModel:
    """Silicon area per component and leakage per area (the ``[area]`` table).

    ``mac_um2`` gives, per MAC dtype, the area of one MAC unit (multiplier and
    accumulating adder) that does one MAC a cycle; ``pe_overhead`` multiplies the
    arithmetic into a whole PE (operand registers, pipeline, wiring) and the
    vector lanes likewise. SRAM costs ``sram_um2_per_kib`` per KiB of one-port
    cells, ``sram_port_factor`` more per extra port (``sram_ports``, one by
    default) and ``sram_bank_um2`` per bank (decoders, sense amplifiers). DMA costs
    per channel; the DRAM interface (PHY and controller) per GB/s of bandwidth.
    Leakage is proportional to area. See :mod:`accelerator.hardware.area`."""

    node_nm: float
    mac_um2: Mapping[str, float]
    pe_overhead: float
    vector_lane_um2: float
    scalar_core_um2: float
    sram_um2_per_kib: float
    sram_bank_um2: float
    sram_port_factor: float
    dma_channel_um2: float
    dram_phy_um2_per_gbps: float
    leakage_mw_per_mm2: float
    sram_ports: Mapping[str, int] = FrozenMap({})

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in AREA_KEYS}
        out["mac_um2"] = dict(self.mac_um2)
        if self.sram_ports:
            out["sram_ports"] = dict(self.sram_ports)
        return out


@dataclass(frozen=True)
class Spec:
    """A validated hardware description (immutable; compare by value)."""

    name: str
    description: str
    source: str
    clock_ghz: float
    mac_array: MacArray
    vector: VectorUnit
    scalar: ScalarCore
    memory: tuple[MemoryLevel, ...]
    dma: DMA
    #: the area and leakage model (None for a description without ``[area]``)
    area: AreaModel | None = None

    @property
    def dram(self) -> MemoryLevel:
        return self.memory[0]

    @property
    def sram_levels(self) -> tuple[MemoryLevel, ...]:
        """On-chip levels, outermost first."""
        return self.memory[1:]

    def level(self, name: str) -> MemoryLevel:
        """The memory level called ``name``.

        Raises:
            ConfigError: when the spec has no such level.
        """
        for m in self.memory:
            if m.name == name:
                return m
        raise ConfigError(
            f"spec {self.name}: no memory level {name!r} because its levels are "
            f"{', '.join(m.name for m in self.memory)}. Use one of those."
        )

    def level_index(self, name: str) -> int:
        return self.memory.index(self.level(name))

    def __str__(self) -> str:
        a = self.mac_array
        mem = ", ".join(
            f"{m.name} {_size(m.capacity_bytes)} @ {m.bytes_per_cycle:g} B/cycle"
            for m in self.memory
        )
        return (
            f"{self.name}: {a.rows}x{a.cols} MAC array "
            f"({'/'.join(a.dtypes)}), {self.vector.lanes}-lane vector unit, "
            f"{mem}, {self.dma.channels} DMA channels, {self.clock_ghz:g} GHz"
        )


def schedule_view(spec: Spec) -> Spec:
    """``spec`` without what no schedule search reads: its name, description and
    source, every energy figure (pJ per MAC, per vector and scalar op, per byte
    read and written at each level) and the area model (with its leakage).

    The accelerator search (:mod:`schedules.accel.search`) ranks a layer's
    candidates by predicted cycles alone; energies and leakage enter only
    afterwards, when :mod:`schedules.accel.objective` re-ranks the kept candidates
    for ``energy`` or ``edp``. So two specs with the same view give a layer the
    same search result (its cache key, :mod:`schedules.accel.cache`), whatever the
    objective; with ``energy`` or ``edp`` the final choice may still differ."""
    a = spec.mac_array
    dtypes = FrozenMap({k: replace(d, pj_per_mac=0.0) for k, d in a.dtypes.items()})
    return replace(
        spec,
        name="",
        description="",
        source="",
        mac_array=replace(a, dtypes=dtypes),
        vector=replace(spec.vector, pj_per_op=0.0),
        scalar=replace(spec.scalar, pj_per_op=0.0),
        memory=tuple(
            replace(m, read_pj_per_byte=0.0, write_pj_per_byte=0.0) for m in spec.memory
        ),
        area=None,
    )


def evaluation_view(spec: Spec) -> Spec:
    """:func:`schedule_view` without the SRAM levels' capacities: what a layer's
    cost model reads to predict a candidate's cycles, bytes and footprint
    (capacities only decide, afterwards, which candidates fit)."""
    view = schedule_view(spec)
    sram = [
        replace(m, capacity_bytes=0) if m.kind == "sram" else m for m in view.memory
    ]
    return replace(view, memory=tuple(sram))


def model_view(spec: Spec) -> Spec:
    """:func:`evaluation_view` without DRAM's bandwidths: what a layer's cost
    model (:class:`schedules.accel.model.LayerModel`) builds its expressions
    from, bandwidths entering only their numeric evaluation. Points of a grid
    that differ only in SRAM capacity and DRAM bandwidth share one model's
    expressions (:mod:`schedules.accel.models`)."""
    view = evaluation_view(spec)
    rates = {"bytes_per_cycle": 0.0}
    rates.update(read_bytes_per_cycle=None, write_bytes_per_cycle=None)
    dram = [replace(m, **rates) if m.kind == "dram" else m for m in view.memory]
    return replace(view, memory=tuple(dram))


def view_id(spec: Spec, view: Callable[[Spec], Spec]) -> int:
    """A number per distinct ``view(spec)`` (a view such as :func:`model_view`),
    remembered per Spec object: a Spec hashes field by field, and the search
    asks for every structure it models."""
    known = _VIEW_IDS.get((id(spec), view))
    if known is None or known[0] is not spec:
        ids = _VIEWS.setdefault(view, {})
        known = (spec, ids.setdefault(view(spec), len(ids)))
        _VIEW_IDS[(id(spec), view)] = known
        if len(_VIEW_IDS) > 256:
            del _VIEW_IDS[next(iter(_VIEW_IDS))]
    return known[1]


#: (Spec object id, view) -> (the Spec, its view's number); per view, its numbers
_VIEW_IDS: dict[tuple, tuple[Spec, int]] = {}
_VIEWS: dict[Callable, dict[Spec, int]] = {}


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"
