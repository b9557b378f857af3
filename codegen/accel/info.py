"""What the placed emitter reads off a schedule tree before it emits anything.

Placement and engine mapping leave marks (:mod:`polyc.ir.marks`); this module
walks the isl tree once and collects: every buffer with the buffer of the same
array it nests in (its copies' other end), the buffers each statement's accesses
go to, which engine runs each statement, and how isl text of the marks turns into
C expressions of a copy's or MAC call's arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from codegen.accel import names
from polyc.errors import CodegenError
from polyc.ir import loops
from polyc.ir import marks as pm
from polyc.ir.kernel import Kernel

T = isl.schedule_node_type


@dataclass
class Placed:
    """Placement facts of one kernel's schedule."""

    buffers: dict[str, pm.BufferMark] = field(default_factory=dict)
    parent: dict[str, str | None] = field(default_factory=dict)  # buffer -> outer one
    active: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # stmt -> arr -> buf
    engine: dict[str, str] = field(default_factory=dict)  # stmt -> mac/vector/scalar
    tensorize: dict[str, pm.TensorizeMark] = field(default_factory=dict)
    scopes: list[pm.ScopeMark] = field(default_factory=list)
    folded: dict[str, str] = field(default_factory=dict)  # zero init -> its MAC stmt
    mac_output: set[str] = field(default_factory=set)  # @vector | unit=mac stmts
    # the buffers that stand for arrays at their home: the whole array, bound
    # on chip, used wherever no buffer of the array is active
    homes: set[str] = field(default_factory=set)
    # statements run as indirect DMA (``@gather``)
    gathers: set[str] = field(default_factory=set)
    # weights copied to their home ahead, as DMA chunks (``@prefetch``)
    prefetches: set[str] = field(default_factory=set)

    @property
    def any(self) -> bool:
        return bool(
            set(self.buffers) - self.homes
            or self.tensorize
            or self.gathers
            or self.prefetches
        )


def collect(kernel: Kernel) -> Placed:
    """Walk the schedule tree of ``kernel`` (see the module docstring)."""
    info = Placed()
    own = {s.name for s in kernel.statements}

    def visit(node: isl.ScheduleNode, active: dict[str, str], engine: str | None):
        t = node.get_type()
        if t == T.mark:
            name = node.mark_get_id().get_name()
            kind = pm.kind(name)
            if kind == "buffer":
                b = pm.BufferMark.parse(name)
                info.buffers[b.name] = b
                parent = active.get(b.array)
                # a buffer of an array with a home copies from the array itself
                # (bound at its home)
                info.parent[b.name] = None if parent in info.homes else parent
                active = {**active, b.array: b.name}
            elif kind == "scope":
                info.scopes.append(pm.ScopeMark.parse(name))
            elif kind == "tensorize":
                tm = pm.TensorizeMark.parse(name)
                info.tensorize[tm.stmt] = tm
            elif kind == "gather":  # the band's statements: an indirect DMA
                info.gathers.update(_statements(node))
            elif kind == "prefetch":  # the band's copy: one DMA to its home
                info.prefetches.update(_statements(node))
            elif kind == "vector":
                vm = pm.VectorMark.parse(name)
                for s in vm.stmts:
                    info.engine[s] = "vector"
                    if vm.unit == "mac":
                        info.mac_output.add(s)
        if t == T.leaf:
            names: list[str] = []
            node.get_universe_domain().foreach_set(
                lambda s: names.append(s.get_tuple_name())
            )
            for n in names:
                if n in own or n.startswith(pm.MAC):
                    info.active[n] = dict(active)
        for i in range(node.n_children()):
            visit(node.child(i), active, engine)

    homes = {}
    for a in kernel.arrays.values():
        if a.home:  # an intermediate on chip (schedules.accel.homes)
            b = pm.home_buffer(a)
            info.buffers[b.name] = b
            homes[a.name] = b.name
    info.homes = set(homes.values())
    visit(kernel.schedule.get_root(), homes, None)
    for s, tm in info.tensorize.items():
        info.engine[s] = "mac"
        if tm.init:
            info.engine[tm.init] = "folded"
            info.folded[tm.init] = s
    for s in info.gathers | info.prefetches:
        info.engine[s] = "dma"
    for s in own:
        info.engine.setdefault(s, "scalar")
    return info


def _statements(node: isl.ScheduleNode) -> list[str]:
    """The statements of the subtree under ``node``."""
    names: list[str] = []
    node.get_universe_domain().foreach_set(lambda s: names.append(s.get_tuple_name()))
    return names


def pw_to_c(pa: isl.PwAff, args: list[str]) -> str:
    """C text of a piecewise affine function of ``[p0, p1, ...]`` evaluated at the C
    expressions ``args`` (bound to ``pc_a0, pc_a1, ...`` by the caller)."""
    n = pa.dim(isl.dim_type.in_)
    if n != len(args):
        raise CodegenError(
            f"codegen: a mark function takes {n} values but the call passes "
            f"{len(args)} because the schedule changed after placement. Place again."
        )
    first = pa.dim(isl.dim_type.param)
    moved = pa.move_dims(isl.dim_type.param, first, isl.dim_type.in_, 0, n)
    for i in range(n):
        moved = moved.set_dim_id(isl.dim_type.param, first + i, isl.Id(names.arg(i)))
    ctx = isl.Set.universe(moved.get_domain_space())
    build = isl.AstBuild.from_context(ctx)
    return loops.to_c(loops.expr_from_isl(build.expr_from_pw_aff(moved)))


def functions(text: str) -> list[isl.PwAff]:
    """The members of a mark's isl function text."""
    mpa = pm.pw_multi_aff(text)
    return [mpa.get_at(d) for d in range(mpa.dim(isl.dim_type.out))]


def max_extent(lo: isl.PwAff, hi: isl.PwAff) -> int:
    size = hi.sub(lo).add_constant_val(isl.Val(1))
    return int(size.max_val().to_python())


def constant_extent(lo: isl.PwAff, hi: isl.PwAff) -> bool:
    size = hi.sub(lo).add_constant_val(isl.Val(1))
    return size.max_val().to_python() == size.min_val().to_python()
