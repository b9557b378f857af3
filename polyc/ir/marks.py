"""The text form of placement and engine-mapping marks (the schedule-tree contract
between ``schedules`` placement/tensorization and the accelerator code generator).

Placement (``schedules.place``) and engine mapping (``schedules.accel.tensorize``,
``schedules.map_vector``) record their decisions as attribute marks in the
schedule tree, so that a printed schedule shows them and the code generator needs
nothing else. A mark reads ``@kind summary | key=value | key=value ...``: the
summary is for people (the loop-nest printer shows only it), the fields after
``|`` are for the code generator. Values are plain words, comma-separated integers
or isl text (piecewise affine functions of the placement point's prefix
``[p0, p1, ...]``).

Marks:

- ``@buffer``: one on-chip buffer of an array at a placement point (above the
  extension node that holds its copy statements ``pc_in_<name>`` and
  ``pc_out_<name>``).
- ``@scope``: the buffers allocated for a subtree (a layer) with their offsets.
- ``@tensorize``: a contraction run on the MAC array (above an extension that holds
  the statement ``pc_mac_<stmt>``).
- ``@vector``: element-wise or reduction statements run on the vector unit (or,
  with ``unit=mac``, in the MAC array's output path: a fused requantization).
- ``@gather``: the band's one statement gathers rows through an indirect DMA
  (its form: :func:`polyc.ir.gathers.form`).
- ``@prefetch``: the band's one statement copies a weight into its home on
  chip ahead of its reader, as DMA chunks each issued before a given layer
  (:mod:`polyc.ir.prefetches`, :mod:`schedules.accel.prefetch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from polyc.errors import CodegenError

IN = "pc_in_"
OUT = "pc_out_"
MAC = "pc_mac_"
#: the name of a level's zero block (the source of halo zero-fills): ``pc_zero_<level>``
ZERO = "pc_zero_"


def summary(mark: str) -> str:
    """The part of a mark people read (what the loop-nest printer shows)."""
    return mark.split(" | ", 1)[0]


def kind(mark: str) -> str | None:
    """``buffer``, ``scope``, ``tensorize``, ``vector``, ``gather``, ``prefetch``
    or None."""
    for k in ("buffer", "scope", "tensorize", "vector", "gather", "prefetch"):
        if mark.startswith(f"@{k}"):
            return k
    return None


def _fields(mark: str) -> dict[str, str]:
    parts = mark.split(" | ")[1:]
    out = {}
    for p in parts:
        key, _, value = p.partition("=")
        out[key.strip()] = value.strip()
    return out


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _words(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


@dataclass(frozen=True)
class BufferMark:
    """An on-chip buffer of ``array`` at a placement point.

    ``extent`` is the box size per array dimension, ``strides`` the element
    stride of each array dimension inside one slot, ``slot`` the elements between
    slots. ``lo``/``hi`` bound the buffer's box per tile and ``wlo``/``whi`` the
    box written back (isl text over the prefix). ``clamp``: the box may leave the
    array, so copies are clipped to it and the rest is zero-filled. ``phases``
    (empty, or one factor per array dimension) stores a dimension polyphase: the
    element at box offset ``r`` of a dimension with factor ``f > 1`` sits at
    ``(r % f) * pstrides[d] + (r / f) * strides[d]`` (the rows of one parity
    together, so a stride-2 access becomes a stride-1 one).
    """

    name: str
    array: str
    level: str
    level_index: int
    elem_bytes: int
    slots: int
    extent: tuple[int, ...]
    strides: tuple[int, ...]
    slot: int
    copy_in: bool
    copy_out: bool
    clamp: bool
    lo: str
    hi: str
    wlo: str = ""
    whi: str = ""
    chunks: int = 1  # DMA calls per copy, so that several channels share it
    phases: tuple[int, ...] = ()  # polyphase factor per dimension (1: plain)
    pstrides: tuple[int, ...] = ()  # element stride between phases per dimension

    def phase(self, d: int) -> int:
        """The polyphase factor of dimension ``d`` (1 when it is stored plainly)."""
        return self.phases[d] if self.phases else 1

    @property
    def slot_bytes(self) -> int:
        return self.slot * self.elem_bytes

    @property
    def bytes(self) -> int:
        return self.slots * self.slot_bytes

    def text(self) -> str:
        shape = "x".join(str(e) for e in self.extent) or "1"
        copies = "+".join(
            w for w, on in (("in", self.copy_in), ("out", self.copy_out)) if on
        )
        head = (
            f"@buffer {self.name}: {self.array}[{shape}] in {self.level}, "
            f"{self.slots} slot{'s' if self.slots > 1 else ''}, "
            f"copy {copies or 'none'}"
        )
        split = [str(d) for d, f in enumerate(self.phases) if f > 1]
        if split:
            head += f", polyphase dim {','.join(split)}"
        fields = [
            f"array={self.array}",
            f"level={self.level}",
            f"index={self.level_index}",
            f"elem={self.elem_bytes}",
            f"slots={self.slots}",
            f"extent={','.join(map(str, self.extent))}",
            f"strides={','.join(map(str, self.strides))}",
            f"slot={self.slot}",
            f"in={int(self.copy_in)}",
            f"out={int(self.copy_out)}",
            f"clamp={int(self.clamp)}",
            f"lo={self.lo}",
            f"hi={self.hi}",
            f"wlo={self.wlo}",
            f"whi={self.whi}",
            f"chunks={self.chunks}",
        ]
        if any(f > 1 for f in self.phases):
            fields.append(f"phases={','.join(map(str, self.phases))}")
            fields.append(f"pstrides={','.join(map(str, self.pstrides))}")
        return " | ".join([head, *fields])

    @classmethod
    def parse(cls, mark: str) -> BufferMark:
        f = _fields(mark)
        name = summary(mark).split()[1].rstrip(":")
        return cls(
            name=name,
            array=f["array"],
            level=f["level"],
            level_index=int(f["index"]),
            elem_bytes=int(f["elem"]),
            slots=int(f["slots"]),
            extent=_ints(f["extent"]),
            strides=_ints(f["strides"]),
            slot=int(f["slot"]),
            copy_in=f["in"] == "1",
            copy_out=f["out"] == "1",
            clamp=f["clamp"] == "1",
            lo=f["lo"],
            hi=f["hi"],
            wlo=f.get("wlo", ""),
            whi=f.get("whi", ""),
            chunks=int(f.get("chunks", "1")),
            phases=_ints(f.get("phases", "")),
            pstrides=_ints(f.get("pstrides", "")),
        )


@dataclass(frozen=True)
class Allocation:
    """Where the memory planner put one buffer: level, byte offset, bytes."""

    name: str
    level_index: int
    offset: int
    bytes: int


def home_buffer(arr) -> BufferMark:
    """The buffer that stands for intermediate ``arr`` at its home on chip
    (``schedules.accel.homes``): the whole array, row-major, one slot, never
    copied; the engines use it where no buffer of the array is active."""
    shape = tuple(int(d) for d in arr.concrete_shape({}))
    strides, step = [], 1
    for d in reversed(shape):
        strides.insert(0, step)
        step *= d
    return BufferMark(
        name=f"{arr.name}_home",
        array=arr.name,
        level=f"level{arr.home}",
        level_index=arr.home,
        elem_bytes=arr.dtype.itemsize,
        slots=1,
        extent=shape,
        strides=tuple(strides),
        slot=step,
        copy_in=False,
        copy_out=False,
        clamp=False,
        lo="",
        hi="",
    )


@dataclass(frozen=True)
class ScopeMark:
    """The buffers allocated while a subtree runs."""

    allocations: tuple[Allocation, ...]

    def text(self) -> str:
        names = ", ".join(a.name for a in self.allocations)
        fields = [
            f"{a.name}={a.level_index}:{a.offset}:{a.bytes}" for a in self.allocations
        ]
        return " | ".join([f"@scope {names}", *fields])

    @classmethod
    def parse(cls, mark: str) -> ScopeMark:
        out = []
        for key, value in _fields(mark).items():
            level, offset, size = (int(x) for x in value.split(":"))
            out.append(Allocation(key, level, offset, size))
        return cls(tuple(out))


#: MAC array modes of the runtime (polyc_rt.h) by (operand dtype, accumulator dtype)
MAC_MODES = {
    ("int8", "int32"): 0,
    ("float16", "float16"): 1,
    ("float16", "float32"): 2,
    ("float32", "float32"): 3,
    ("bfloat16", "float32"): 4,
}


@dataclass(frozen=True)
class TensorizeMark:
    """A contraction ``C[f] += A[g] * B[h]`` run as MAC-array tiles.

    ``m``, ``n``, ``k`` are the iterators of each MAC dimension (several fuse into
    one index, outermost first); the other iterators of the statement run as C
    loops around the call (``loops``). ``a``/``b`` are the positions of the two
    operand loads in the statement's reads. ``lo``/``hi`` bound every iterator per
    tile (isl text over the prefix, in the statement's iterator order).

    ``exchange``: the call runs the transposed product ``C^T = B^T A^T``, B in
    the array's A port (streamed by a weight-stationary array) and A in its B
    port (held in the PEs): ``m``, ``n``, ``k`` keep naming the roles of A, B and
    C, and the call is ``n x m x k`` (see :mod:`polyc.ir.macmap`).
    """

    stmt: str
    mode: int
    a: int
    b: int
    m: tuple[str, ...]
    n: tuple[str, ...]
    k: tuple[str, ...]
    loops: tuple[str, ...]
    lo: str
    hi: str
    init: str = ""  # a zero init folded into the first call (accumulate=0)
    exchange: bool = False  # the operands exchanged in the array's ports

    @property
    def ports(self) -> tuple[int, int]:
        """The positions in the statement's reads of the loads in the array's A
        and B ports (``(b, a)`` when the operands are exchanged)."""
        return (self.b, self.a) if self.exchange else (self.a, self.b)

    def text(self) -> str:
        head = (
            f"@tensorize(matmul) {self.stmt}: m={'*'.join(self.m)} "
            f"n={'*'.join(self.n)} k={'*'.join(self.k)}"
        )
        if self.loops:
            head += f" loops={','.join(self.loops)}"
        if self.init:
            head += f" init={self.init}"
        if self.exchange:
            head += " exchanged"
        fields = [
            f"stmt={self.stmt}",
            f"mode={self.mode}",
            f"a={self.a}",
            f"b={self.b}",
            f"m={','.join(self.m)}",
            f"n={','.join(self.n)}",
            f"k={','.join(self.k)}",
            f"loops={','.join(self.loops)}",
            f"lo={self.lo}",
            f"hi={self.hi}",
            f"init={self.init}",
        ]
        if self.exchange:  # absent when not: the marks of other schedules unchanged
            fields.append("exchange=1")
        return " | ".join([head, *fields])

    @classmethod
    def parse(cls, mark: str) -> TensorizeMark:
        f = _fields(mark)
        return cls(
            stmt=f["stmt"],
            mode=int(f["mode"]),
            a=int(f["a"]),
            b=int(f["b"]),
            m=_words(f["m"]),
            n=_words(f["n"]),
            k=_words(f["k"]),
            loops=_words(f["loops"]),
            lo=f["lo"],
            hi=f["hi"],
            init=f.get("init", ""),
            exchange=f.get("exchange", "0") == "1",
        )


@dataclass(frozen=True)
class VectorMark:
    """Statements whose instances in a tile run as one vector-unit operation.

    ``unit="mac"``: they run instead in the MAC array's output path (an int8
    requantization fused into the array, ``[mac_array] requantize = true``): the
    same element-wise work, charged to the MAC array rather than the vector unit.
    """

    stmts: tuple[str, ...] = field(default=())
    unit: str = "vector"

    def text(self) -> str:
        text = f"@vector {', '.join(self.stmts)}"
        return text if self.unit == "vector" else f"{text} | unit={self.unit}"

    @classmethod
    def parse(cls, mark: str) -> VectorMark:
        rest = summary(mark)[len("@vector") :]
        unit = _fields(mark).get("unit", "vector")
        return cls(tuple(s.strip() for s in rest.split(",") if s.strip()), unit)


def pw_multi_aff(text: str) -> isl.PwMultiAff:
    """Read isl text of a mark field (each text once: isl objects are values, and
    placement and codegen read the same marks again and again).

    Raises:
        CodegenError: on text isl cannot read (a hand-edited mark).
    """
    got = _READ.get(text)
    if got is None:
        got = _READ[text] = _read_pw_multi_aff(text)
        if len(_READ) > 4096:  # a long process: forget the oldest
            del _READ[next(iter(_READ))]
    return got


_READ: dict[str, isl.PwMultiAff] = {}


def _read_pw_multi_aff(text: str) -> isl.PwMultiAff:
    try:
        return isl.PwMultiAff(text)
    except isl.Error:
        raise CodegenError(
            f"codegen: mark field {text!r} is not isl text of a piecewise affine "
            "function because isl cannot read it. Re-run the placement instead of "
            "editing its marks."
        ) from None
