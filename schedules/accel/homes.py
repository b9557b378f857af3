"""Intermediates that live on chip for the whole kernel (their *home*).

A layer's output that the next layer reads goes to DRAM and comes back: on
datacenter a store, DRAM's write latency, a load and its read latency (150
cycles each way) at every layer boundary, where the model's activations (a few
KiB to a few MiB) would fit in the 32 MiB ``shared`` SRAM above the engines'
level many times over. :func:`assign` gives each intermediate array of the
kernel (role ``temp``: never an input or an output) that fits a home in that
level, the SRAM level right above every level an engine reaches
(:func:`schedules.accel.search.upper_level`; none on edge-npu, whose engines
work in its only SRAM, or on hw-a, one SRAM per operand): the array's bytes sit
there, at a fixed offset, from the first write to the last read. Each layer's
buffers are still copied in and out by DMA, now from and to the home (the
level's latency and bandwidth, no DRAM bytes), and the cost model charges them
so (:mod:`schedules.accel.terms`).

The homes take the top of the level, at most :data:`SHARE` of it, in the
kernel's array order; the memory planner plans the buffers below them
(:func:`schedules.accel.memplan.below_homes`). An array that does not fit stays in DRAM. Each home is a
step of the kernel's history (:func:`home`), so a replay ends with the same
kernel.
"""

from __future__ import annotations

import dataclasses

from accelerator import CONFIGS, load_config
from accelerator.hardware.spec import Spec
from polyc.errors import ArgumentError
from polyc.ir.kernel import Kernel, Role, Step

#: the share of the level the homes may take (the rest holds staged operands)
SHARE = 0.5


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
    from schedules.accel.search import upper_level

    index = upper_level(spec)
    if index is None or kernel.params:
        return kernel
    mem = spec.memory[index]
    align = mem.alignment_bytes
    budget = int(mem.capacity_bytes * SHARE) // align * align
    chosen: list[tuple[str, int]] = []
    used = 0
    for arr in kernel.arrays.values():
        if arr.role != Role.TEMP or arr.home:
            continue
        size = -(-arr.nbytes() // align) * align
        if used + size <= budget:
            chosen.append((arr.name, size))
            used += size
    top = mem.capacity_bytes // align * align
    for name, size in chosen:
        top -= size
        kernel = home(kernel, name, mem.name, top, spec)
    return kernel


__all__ = ["assign", "home"]
