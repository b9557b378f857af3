"""The roofline bound of a kernel on a config.

The lower bound on cycles is the larger of the compute bound (multiply-accumulates
over the MAC array's peak for their dtype) and the memory bound (the DRAM bytes no
schedule can avoid, over the DRAM bandwidth). Unavoidable bytes are the live-in
elements of the kernel's inputs (read at least once) plus its live-out elements
(written at least once), from the exact dataflow (``kernel.deps``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

from accelerator.hardware.spec import Spec
from polyc.ir.expr import Binary, Cast, Expr, Load, same
from polyc.ir.kernel import Kernel, Role, Statement

#: sets with at most this many points in their bounding box are counted by isl
_ENUMERATE = 1 << 20


@dataclass(frozen=True)
class Roofline:
    """The bound and how it was obtained."""

    macs: int
    compute_cycles: float
    min_dram_bytes: int
    dram_bytes_per_cycle: float
    peak_macs_per_cycle: float

    @property
    def memory_cycles(self) -> float:
        return self.min_dram_bytes / self.dram_bytes_per_cycle

    @property
    def cycles(self) -> int:
        """The bound in whole cycles (at least 1)."""
        return max(1, math.ceil(max(self.compute_cycles, self.memory_cycles)))

    @property
    def bound(self) -> str:
        return "compute" if self.compute_cycles >= self.memory_cycles else "memory"


def roofline(kernel: Kernel, spec: Spec, params: Mapping[str, int]) -> Roofline:
    """The roofline of ``kernel`` with parameter values ``params`` on ``spec``."""
    macs, min_bytes = work(kernel, params)
    compute = sum(n / peak_macs(spec, dt) for dt, n in macs.items())
    peaks = [peak_macs(spec, dt) for dt in macs] or [peak_macs(spec, "float32")]
    return Roofline(
        macs=sum(macs.values()),
        compute_cycles=compute,
        min_dram_bytes=min_bytes,
        dram_bytes_per_cycle=spec.dram.bytes_per_cycle,
        peak_macs_per_cycle=min(peaks),
    )


def work(kernel: Kernel, params: Mapping[str, int]) -> tuple[dict[str, int], int]:
    """``({operand dtype: MACs}, unavoidable DRAM bytes)``; memoised per program."""
    key = "accelerator.work:" + repr(sorted(params.items()))

    def compute(k: Kernel):
        macs: dict[str, int] = {}
        for stmt in k.statements:
            dtype = mac_dtype(stmt)
            if dtype is not None:
                n = count_points(_fix(stmt.domain, params))
                macs[dtype] = macs.get(dtype, 0) + n
        return macs, min_dram_bytes(k, params)

    return kernel.analysis(key, compute)


def peak_macs(spec: Spec, dtype: str) -> float:
    """MACs per cycle for ``dtype``: the MAC array's peak, or the vector unit's
    (one multiply and one add per lane) when the array does not take the dtype."""
    peak = spec.mac_array.peak_macs_per_cycle(dtype)
    if peak:
        return peak
    c = spec.vector.cycles
    return spec.vector.lanes / (c["mul"] + c["add"])


def mac_dtype(stmt: Statement) -> str | None:
    """The operand dtype when ``stmt`` is a multiply-accumulate ``T += x * y``."""
    if stmt.reduction != "add":
        return None
    body = stmt.body
    assert isinstance(body, Binary)
    rest = body.b if same(body.a, stmt.target) else body.a
    rest = _uncast(rest)
    if not (isinstance(rest, Binary) and rest.op == "mul"):
        return None
    operands = [_uncast(rest.a), _uncast(rest.b)]
    loads = [x for x in operands if isinstance(x, Load)]
    dt = min((x.dtype for x in loads), key=lambda d: d.itemsize, default=rest.dtype)
    return dt.name


def macs_per_instance(stmt: Statement) -> int:
    return 1 if mac_dtype(stmt) else 0


def _uncast(e: Expr) -> Expr:
    while isinstance(e, Cast):
        e = e.x
    return e


def min_dram_bytes(kernel: Kernel, params: Mapping[str, int]) -> int:
    """Bytes of live-in input elements plus live-out output elements."""
    return sum(dram_bytes(kernel, params))


def dram_bytes(kernel: Kernel, params: Mapping[str, int]) -> tuple[int, int]:
    """``(bytes read, bytes written)`` no schedule avoids: the live-in elements of
    the arrays DRAM holds at the start, the live-out elements of the outputs.
    An intermediate with a home on chip (a layer's, ``schedules.accel.homes``)
    is in neither: it never goes to DRAM. An array only gathers read (a
    data-dependent index: which rows is data) counts the elements they look up,
    at most the array: the bound assumes distinct indices, as a gather DMA
    charges them."""
    deps = kernel.deps
    arrays = kernel.arrays
    gathered = _gathered(kernel, params)
    reads_from_dram = {
        a.name
        for a in arrays.values()
        if a.role in (Role.INPUT, Role.INOUT) or a.name in kernel.data
    }
    totals = []
    for uset, keep in ((deps.live_in, reads_from_dram), (deps.live_out, None)):
        total = 0
        sets: list[isl.Set] = []
        uset.foreach_set(sets.append)
        for s in sets:
            name = s.get_tuple_name()
            if name not in arrays or (keep is not None and name not in keep):
                continue
            if arrays[name].home:
                continue
            if keep is not None and name in gathered:
                total += min(gathered[name], arrays[name].nbytes(params))
                continue
            total += count_points(_fix(s, params)) * arrays[name].dtype.itemsize
        totals.append(total)
    return totals[0], totals[1]


def _gathered(kernel: Kernel, params: Mapping[str, int]) -> dict[str, int]:
    """Bytes the gathers look up, per array that only gathers read."""
    affine = {ld.array for s in kernel.statements for ld in (s.target, *s.reads)}
    out: dict[str, int] = {}
    for s in kernel.statements:
        for g in s.gathers:
            if g.array in affine:
                continue
            n = count_points(_fix(s.domain.intersect_params(kernel.context), params))
            out[g.array] = out.get(g.array, 0) + n * g.dtype.itemsize
    return out


def _fix(s: isl.Set, params: Mapping[str, int]) -> isl.Set:
    """``s`` with every parameter fixed to its value and then dropped."""
    n = s.dim(isl.dim_type.param)
    for i in range(n):
        name = s.get_dim_name(isl.dim_type.param, i)
        s = s.fix_val(
            isl.dim_type.param, i, isl.Val.int_from_si(s.get_ctx(), params[name])
        )
    return s.project_out(isl.dim_type.param, 0, n)


def count_points(s: isl.Set) -> int:
    """The number of integer points of a bounded, parameter-free set.

    Boxes are counted by their extents and small sets by isl; a large set is split
    into groups of dimensions that share no constraint (counted apart and
    multiplied: the (h, kh) and (w, kw) pairs of a padded convolution), or else
    sliced along its first unfixed dimension. Counts are remembered by the set's
    text (equal text, equal set): the scheduler, the bounds and the objective
    count the same statement domains at every compile of a program, and a study
    compiles one program for many hardware points.
    """
    key = str(s)
    n = _COUNTS.get(key)
    if n is None:
        n = _count(s)
        if len(_COUNTS) >= _COUNTS_KEPT:
            _COUNTS.clear()
        _COUNTS[key] = n
    return n


#: :func:`count_points` by the set's text, and how many it keeps
_COUNTS: dict[str, int] = {}
_COUNTS_KEPT = 1 << 14


def _count(s: isl.Set) -> int:
    s = s.coalesce()
    if s.is_empty():
        return 0
    n = s.dim(isl.dim_type.set)
    if n == 0:
        return 1
    lo = [s.dim_min_val(d).to_python() for d in range(n)]
    hi = [s.dim_max_val(d).to_python() for d in range(n)]
    volume = math.prod(h - lo_ + 1 for lo_, h in zip(lo, hi))
    if s.is_box():
        return volume
    if volume <= _ENUMERATE:
        return s.count_val().to_python()
    groups = _independent_groups(s)
    if len(groups) > 1:
        return math.prod(count_points(_project_onto(s, g)) for g in groups)
    d = next(d for d in range(n) if lo[d] < hi[d])
    ctx = s.get_ctx()
    return sum(
        count_points(s.fix_val(isl.dim_type.set, d, isl.Val.int_from_si(ctx, v)))
        for v in range(lo[d], hi[d] + 1)
    )


def _independent_groups(s: isl.Set) -> list[list[int]]:
    """Dimensions grouped so that no constraint spans two groups ([] if unknown)."""
    bsets = s.get_basic_sets()
    n = s.dim(isl.dim_type.set)
    if len(bsets) != 1 or bsets[0].dim(isl.dim_type.div):
        return [list(range(n))]
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for c in bsets[0].get_constraints():
        dims = [d for d in range(n) if c.involves_dims(isl.dim_type.set, d, 1)]
        for d in dims[1:]:
            parent[find(d)] = find(dims[0])
    groups: dict[int, list[int]] = {}
    for d in range(n):
        groups.setdefault(find(d), []).append(d)
    return list(groups.values())


def _project_onto(s: isl.Set, dims: list[int]) -> isl.Set:
    for d in reversed(range(s.dim(isl.dim_type.set))):
        if d not in dims:
            s = s.project_out(isl.dim_type.set, d, 1)
    return s
