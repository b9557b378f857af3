"""Intermediates that live on chip for the whole kernel (their *home*).

A layer's output that the next layer reads goes to DRAM and comes back: on
datacenter a store, DRAM's write latency, a load and its read latency (150
cycles each way) at every layer boundary, where the model's activations (a few
KiB to a few MiB) would fit in the 32 MiB ``shared`` SRAM above the engines'
level many times over. :func:`assign` gives each intermediate array of the
kernel (role ``temp``: never an input or an output) that fits a home on chip:

- where every engine reaches one SRAM level (edge-npu's and tiny's scratchpad,
  datacenter's ``local``: :func:`resident_level`), there, at most
  :data:`RESIDENT_SHARE` of it, smallest first. There the engines read and
  write the home in place: a layer that reads what an earlier one left, or
  leaves what a later one reads, has no buffer and no copy of it
  (:func:`schedules.accel.resident.resident_arrays`). A layer keeps a buffer,
  copied from or to the home on chip, for an array it makes and uses up, lays
  out otherwise, or reads by a MAC through a window, a stride or an offset
  (:func:`schedules.accel.resident.windowed`: a 3x3 convolution's input), whose
  box may leave the array and is clipped and zero-filled in a buffer. Codegen uses the whole
  array, bound at its home, as the buffer (:func:`polyc.ir.marks.home_buffer`).
  Where an SRAM level sits above that one (datacenter), the home saves an
  on-chip copy rather than a DRAM round trip, and its bytes are taken from the
  layers' tiles for the whole kernel: the choice is greedy, made before the
  search and not by the cost model (when it was added, hf-llama ran 5% slower
  with it, as the model predicted);
- the rest, where an SRAM level sits right above every level an engine reaches
  (:func:`schedules.accel.space.upper_level`: datacenter's ``shared``), there,
  at most :data:`SHARE` of it, in the kernel's array order. Each layer's buffers
  are still copied in and out by DMA, now from and to the home (the level's
  latency and bandwidth, no DRAM bytes), and the cost model charges them so
  (:mod:`schedules.accel.terms`).

None on hw-a (one SRAM per operand).

The array's bytes sit at a fixed offset at the top of the level from the first
write to the last read; the memory planner plans the buffers below them
(:func:`schedules.accel.memplan.below_homes`, keeping the simulator's banks). An
array that does not fit stays in DRAM. Each home is a step of the kernel's
history (:func:`home`), so a replay ends with the same kernel.
"""

from __future__ import annotations

import dataclasses

from accelerator import CONFIGS, load_config
from accelerator.hardware.spec import Spec
from polyc.errors import ArgumentError
from polyc.ir.kernel import Kernel, Role, Step

#: the share of the level the homes may take (the rest holds staged operands)
SHARE = 0.5
#: the share of the engines' own level that resident homes may take (the rest
#: holds the layers' tiles)
RESIDENT_SHARE = 0.25


def resident_level(spec: Spec) -> int | None:
    """The one SRAM level every engine reaches (edge-npu's scratchpad), where an
    intermediate's home is read and written by the engines in place; ``None``
    when the engines reach no common level."""
    from schedules.accel.levels import reached_by_all

    common = [spec.level_index(n) for n in reached_by_all(spec)]
    common = [i for i in common if spec.memory[i].kind == "sram"]
    return max(common) if len(common) == 1 else None


def home(kernel: Kernel, array: str, level: str, offset: int, config) -> Kernel:
    """``kernel`` with intermediate ``array`` held in on-chip ``level`` of
    ``config`` at byte ``offset`` for the whole kernel.

    Raises:
        ArgumentError: for an unknown array, one the caller passes or gets
            (only intermediates have a home), a level that is not SRAM, or an
            offset that leaves the array outside the level or misaligned.
    """
    spec = config if isinstance(config, Spec) else load_config(config)
    arr = kernel.arrays.get(array)
    if arr is None:
        raise ArgumentError(
            f"home: {array!r} is not an array of {kernel.name} because its arrays "
            f"are {', '.join(kernel.arrays)}. Pass one of them."
        )
    if arr.role != Role.TEMP:
        raise ArgumentError(
            f"home: {array} cannot live on chip because it is an {arr.role} of "
            f"{kernel.name}: the caller's data is in DRAM. Give a home only to "
            "intermediates."
        )
    index = spec.level_index(level)
    mem = spec.memory[index]
    nbytes = arr.nbytes()
    if mem.kind != "sram" or offset < 0 or offset + nbytes > mem.capacity_bytes:
        raise ArgumentError(
            f"home: {array} ({nbytes:,} bytes) cannot live in {level} at offset "
            f"{offset} because {level} is {mem.kind} of {mem.capacity_bytes:,} "
            "bytes. Pass an SRAM level and an offset inside it."
        )
    if offset % mem.alignment_bytes:
        raise ArgumentError(
            f"home: offset {offset} of {array} in {level} is misaligned because "
            f"the level's alignment is {mem.alignment_bytes} bytes. Round it up."
        )
    arrays = dict(kernel.arrays)
    arrays[array] = dataclasses.replace(arr, home=index, home_offset=offset)
    name = spec.name if spec.name in CONFIGS else spec.source
    step = Step("home", (array, level, offset), (("config", name),))
    return kernel.replace(arrays=arrays, history=kernel.history + (step,))


def assign(kernel: Kernel, spec: Spec) -> Kernel:
    """``kernel`` with a home for each intermediate that fits (see the module
    docstring); unchanged where the config has no SRAM level above the
    engines' or the sizes are symbolic."""
    from schedules.accel.space import upper_level

    if kernel.params:
        return kernel
    temps = [a for a in kernel.arrays.values() if a.role == Role.TEMP and not a.home]
    resident, upper = resident_level(spec), upper_level(spec)
    if resident is not None:  # the engines' own level: the engines use the home itself
        smallest = sorted(temps, key=lambda a: a.nbytes())  # most boundaries per byte
        kernel, placed = _fill(kernel, spec, resident, RESIDENT_SHARE, smallest)
        temps = [a for a in temps if a.name not in placed]
    if upper is not None:
        kernel, _ = _fill(kernel, spec, upper, SHARE, temps)
    return kernel


def _fill(kernel: Kernel, spec: Spec, index: int, share: float, arrays):
    """``kernel`` with homes at the top of level ``index`` for ``arrays``, in
    their order, while they fit in ``share`` of it; and the names placed."""
    mem = spec.memory[index]
    align = mem.alignment_bytes
    budget = int(mem.capacity_bytes * share) // align * align
    chosen: list[tuple[str, int]] = []
    used = 0
    for arr in arrays:
        size = -(-arr.nbytes() // align) * align
        if used + size <= budget:
            chosen.append((arr.name, size))
            used += size
    top = mem.capacity_bytes // align * align
    for name, size in chosen:
        top -= size
        kernel = home(kernel, name, mem.name, top, spec)
    return kernel, {name for name, _ in chosen}


__all__ = ["assign", "home"]
