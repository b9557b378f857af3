"""Exact dependences with isl's dataflow analysis (``UnionAccessInfo.compute_flow``).

Dependences are computed once per program on its program-order schedule:

- ``flow`` (read after write, value-based: intervening writes kill),
- ``anti`` (write after read) and ``output`` (write after write), the false
  dependences, with the same kills,
- ``live_in`` (elements read before any write) and ``live_out`` (the last write of
  every element of an output array).

Every relation is also kept tagged by reference so that a violated dependence can be
reported with the array it goes through.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Collection
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import islpy as isl

from polyc.errors import BudgetError
from polyc.ir import tree
from polyc.ir.kernel import Kernel, access_relation, accessed, accesses

END = "_END"
#: the key of a program's :class:`Deps` among its analyses (:attr:`Kernel.deps`)
DEPS = "ir.deps"

#: isl operations one dataflow analysis may take (``POLYC_DEPS_MAX_OPERATIONS``
#: overrides): ResNet-18 (73 statements) needs 1-3 million per analysis; parametric
#: accesses with strides (``Z[2*i + 2*j]`` against ``Z[N - i + k]``) can keep isl
#: busy for hours (found by the slow property run)
MAX_OPERATIONS = int(os.environ.get("POLYC_DEPS_MAX_OPERATIONS", 20_000_000))


@contextmanager
def operation_budget(max_operations: int):
    """Bound the isl operations of the block on the default context; the previous
    bound is restored after it. Past the bound isl raises an error that
    :func:`over_budget` recognises."""
    ctx = isl.DEFAULT_CONTEXT
    saved = ctx.get_max_operations()
    ctx.reset_operations()
    ctx.set_max_operations(max_operations)
    try:
        yield
    finally:
        ctx.set_max_operations(saved)
        ctx.reset_operations()


def over_budget(err: isl.Error) -> bool:
    """Whether isl stopped because it ran past :func:`operation_budget`."""
    return "operations" in str(err)


@dataclass(frozen=True)
class Ref:
    """One access of a statement: its tag, array and whether it writes."""

    tag: str
    stmt: str
    array: str
    is_write: bool


def _tagged(kernel: Kernel, arrays: frozenset[str] | None = None):
    """Tagged read and write maps ``[S[i] -> tag[]] -> A[...]`` (of the accesses to
    ``arrays`` alone when given; their tags are the same as among all)."""
    reads = writes = None
    for s in kernel.statements:
        # the data-dependent reads last, over their whole gathered dimension
        for n, (array, is_write, x) in enumerate(accessed(s)):
            if arrays is not None and array not in arrays:
                continue
            tag = _tag(s.name, is_write, n)
            tag_space = isl.Set(f"{{ {tag}[] }}")
            # [S[i] -> tag[]] -> A[f(i)]: pull the access back through the tag
            unwrap = isl.Map.from_domain_and_range(s.domain, tag_space).domain_map()
            m = access_relation(kernel, s, x)
            piece = isl.UnionMap.from_map(unwrap.apply_range(m))
            if is_write:
                writes = piece if writes is None else writes.union(piece)
            else:
                reads = piece if reads is None else reads.union(piece)
    empty = isl.UnionMap.empty(kernel.context.get_space())
    return reads or empty, writes or empty


def _refs(kernel: Kernel) -> dict[str, Ref]:
    """Every access of the kernel by its tag (in the order of
    :func:`polyc.ir.kernel.accessed`: the write, the reads, the gathers)."""
    refs: dict[str, Ref] = {}
    for s in kernel.statements:
        for n, (array, is_write, _) in enumerate(accessed(s)):
            tag = _tag(s.name, is_write, n)
            refs[tag] = Ref(tag, s.name, array, is_write)
    return refs


def _tag(stmt: str, is_write: bool, n: int) -> str:
    return f"{stmt}__{'w' if is_write else 'r'}{n}"


def _untag(umap: isl.UnionMap) -> isl.UnionMap:
    """Drop reference tags on both sides: ``[S -> t] -> [T -> u]`` to ``S -> T``."""
    if umap.is_empty():
        return umap
    return umap.domain_factor_domain().range_factor_domain()


def _untag_domain(umap: isl.UnionMap) -> isl.UnionMap:
    return umap if umap.is_empty() else umap.domain_factor_domain()


class Deps:
    """The dependences of a program (see module docstring). All relations are isl
    union maps from source instance to sink instance (``S0[i, j] -> S1[i, j, k]``)."""

    def __init__(self, kernel: Kernel, arrays: frozenset[str] | None = None):
        """The dependences of ``kernel`` (through ``arrays`` alone when given:
        a dependence, a kill and a live-in read each go through one array, so
        those through ``arrays`` are the whole program's through them)."""
        self._kernel = kernel
        self._kernel_name = kernel.name
        self._arrays = arrays
        self.refs = _refs(kernel)
        self._empty_set = isl.UnionSet.empty(kernel.context.get_space())
        self._over_budget: dict[str, str] = {}

    @cached_property
    def _accesses(self) -> tuple[isl.UnionMap, isl.UnionMap]:
        return _tagged(self._kernel, self._arrays)

    @property
    def _reads(self) -> isl.UnionMap:
        return self._accesses[0]

    @property
    def _writes(self) -> isl.UnionMap:
        return self._accesses[1]

    def _compute_flow(self, info: isl.UnionAccessInfo, what: str) -> isl.UnionFlow:
        """``info.compute_flow()`` within :data:`MAX_OPERATIONS` isl operations.

        Raises:
            BudgetError: when isl runs past the budget.
        """
        if what in self._over_budget:  # do not spend the budget again
            raise BudgetError(self._over_budget[what])
        try:
            with operation_budget(MAX_OPERATIONS):
                return info.compute_flow()
        except isl.Error as err:
            if not over_budget(err):
                raise
        self._over_budget[what] = (
            f"dependences: isl's {what} analysis of {self._kernel_name} ran past its "
            f"budget of {MAX_OPERATIONS:,} operations because its accesses are hard "
            "for isl to summarise (parametric, strided subscripts). Fix the sizes "
            "(kernel.with_context('N = 64')) or raise POLYC_DEPS_MAX_OPERATIONS."
        )
        raise BudgetError(self._over_budget[what])

    @cached_property
    def _tagged_schedule(self) -> isl.Schedule:
        """The program-order schedule tree of tagged instances ``[S[i] -> tag[]]``.

        The tree form lets isl order instances of different sequence children without
        comparing whole time vectors (faster than the flat map on long programs).
        """
        accesses = self._reads.union(self._writes)
        to_instance = accesses.domain().unwrap().domain_map()
        program = self._kernel.program_schedule
        return program.pullback_union_pw_multi_aff(
            isl.UnionPwMultiAff.from_union_map(to_instance)
        )

    # flow: the only analysis the interpreter's reads and the roofline need -----------
    @cached_property
    def _flow(self):
        info = isl.UnionAccessInfo.from_sink(self._reads)
        info = info.set_must_source(self._writes).set_schedule(self._tagged_schedule)
        return self._compute_flow(info, "flow")

    @cached_property
    def flow_tagged(self) -> isl.UnionMap:
        return self._flow.get_may_dependence()

    @cached_property
    def live_in_accesses(self) -> isl.UnionMap:
        """Tagged reads with no source: ``[S[i] -> tag[]] -> A[...]``."""
        return self._flow.get_may_no_source()

    @cached_property
    def live_in(self) -> isl.UnionSet:
        """Elements read before any write (their values come from the caller)."""
        return self.live_in_accesses.range()

    @cached_property
    def flow(self) -> isl.UnionMap:
        return _untag(self.flow_tagged)

    # false dependences: sinks are writes; an intervening write kills -------------------
    @cached_property
    def _false(self) -> isl.UnionMap:
        info = isl.UnionAccessInfo.from_sink(self._writes)
        info = info.set_must_source(self._writes).set_may_source(self._reads)
        info = info.set_schedule(self._tagged_schedule)
        return self._compute_flow(info, "anti and output").get_may_dependence()

    @cached_property
    def anti_tagged(self) -> isl.UnionMap:
        return _filter_source_tags(self._false, _tag_set(self.refs, is_write=False))

    @cached_property
    def output_tagged(self) -> isl.UnionMap:
        return _filter_source_tags(self._false, _tag_set(self.refs, is_write=True))

    @cached_property
    def anti(self) -> isl.UnionMap:
        return _untag(self.anti_tagged)

    @cached_property
    def output(self) -> isl.UnionMap:
        return _untag(self.output_tagged)

    # live-out ---------------------------------------------------------------------------
    @cached_property
    def live_out(self) -> isl.UnionSet:
        """Elements of output arrays whose final value is visible at the end: every
        element written (its last write is the visible one)."""
        outputs = {a.name for a in self._kernel.outputs}
        out = self._empty_set
        sets: list[isl.Set] = []
        self._writes.range().foreach_set(sets.append)
        for elements in sets:
            if elements.get_tuple_name() in outputs:
                out = out.union(isl.UnionSet.from_set(elements))
        return out.coalesce()

    @cached_property
    def live_out_instances(self) -> isl.UnionSet:
        """Statement instances whose write is the final value of an output element."""
        kernel = self._kernel
        end_reads = None
        for a in kernel.outputs:
            dims = ", ".join(f"x{d}" for d in range(a.ndim))
            piece = isl.UnionMap(
                f"{{ [{END}[] -> {END}__{a.name}[]] -> {a.name}[{dims}] }}"
            )
            end_reads = piece if end_reads is None else end_reads.union(piece)
        if end_reads is None:
            return self._empty_set
        # a leading 0 leaves room for a pseudo statement at time [1, ...]
        sched = _prefixed(tree.flat_map(kernel.program_schedule))
        tagged_sched = _tag_schedule(sched, self._reads.union(self._writes))
        info = isl.UnionAccessInfo.from_sink(end_reads).set_must_source(self._writes)
        end_sched = _end_schedule(end_reads, _width(sched))
        info = info.set_schedule_map(tagged_sched.union(end_sched))
        last = self._compute_flow(info, "live-out").get_may_dependence()
        return _untag_domain(last).domain()

    @cached_property
    def validity(self) -> isl.UnionMap:
        """Every dependence a legal schedule must respect (flow, anti, output)."""
        union = self.flow.union(self.anti).union(self.output)
        try:  # fewer pieces make isl's scheduler cheaper
            return union.coalesce()
        except isl.Error:  # isl's coalescing has failed internally on random
            return union  # programs ("original tableau does not correspond")

    @cached_property
    def false(self) -> isl.UnionMap:
        return self.anti.union(self.output)

    def by_array(self, kind: str) -> dict[str, isl.UnionMap]:
        """``{array: relation}`` for kind ``flow``, ``anti`` or ``output`` (split
        once per kind: the scheduler asks for it per layer it tensorizes)."""
        per = self.__dict__.setdefault("_by_array", {})
        if kind not in per:
            per[kind] = self._split_by_array(kind)
        return dict(per[kind])

    def _split_by_array(self, kind: str) -> dict[str, isl.UnionMap]:
        tagged = getattr(self, f"{kind}_tagged")
        out: dict[str, isl.UnionMap] = {}
        maps: list[isl.Map] = []
        tagged.foreach_map(maps.append)
        for m in maps:
            src_tag = m.domain().unwrap().range().get_tuple_name()
            array = self.refs[src_tag].array
            piece = _untag(isl.UnionMap.from_map(m))
            out[array] = out[array].union(piece) if array in out else piece
        return out

    def is_empty(self) -> bool:
        return self.validity.is_empty()

    def __str__(self) -> str:
        lines = [f"dependences of {self._kernel_name}:"]
        for kind in ("flow", "anti", "output"):
            per = self.by_array(kind)
            if not per:
                lines.append(f"  {kind}: none")
            for array, rel in sorted(per.items()):
                lines.append(f"  {kind} on {array}: {rel.coalesce()}")
        lines.append(f"  live-in: {self.live_in.coalesce()}")
        lines.append(f"  live-out: {self.live_out.coalesce()}")
        return "\n".join(lines)


class _Carried(Deps):
    """The dependences of a program that is an analysed one with its accesses
    to ``arrays`` changed (see :func:`carried`): what the other program knows
    of the rest is its, what goes through ``arrays`` is computed on this
    program's accesses to them alone, and what the other does not know yet is
    computed on the whole of this one, as :class:`Deps` does."""

    def __init__(self, kernel: Kernel, before: Deps, arrays: frozenset[str]):
        super().__init__(kernel)
        self._before = before
        self._changed = arrays
        self._part = Deps(kernel, arrays)

    def _known(self, name: str) -> bool:
        return name in self._before.__dict__

    def _kept(self, tagged: isl.UnionMap) -> isl.UnionMap:
        """The dependences of ``tagged`` (the other program's) whose source
        accesses an array outside ``arrays``."""
        refs = self._before.refs
        kept = {t for t, r in refs.items() if r.array not in self._changed}
        return _filter_source_tags(tagged, kept)

    def _joined(self, name: str) -> isl.UnionMap:
        """Analysis ``name``: the other program's through the arrays kept, and
        the part's through the changed ones."""
        return self._kept(getattr(self._before, name)).union(getattr(self._part, name))

    @cached_property
    def flow_tagged(self) -> isl.UnionMap:
        if not self._known("flow_tagged"):
            return super().flow_tagged
        return self._joined("flow_tagged")

    @cached_property
    def live_in_accesses(self) -> isl.UnionMap:
        if not self._known("live_in_accesses"):
            return super().live_in_accesses
        maps: list[isl.Map] = []
        self._before.live_in_accesses.foreach_map(maps.append)
        out = self._part.live_in_accesses
        for m in maps:
            if m.get_tuple_name(isl.dim_type.out) not in self._changed:
                out = out.union(isl.UnionMap.from_map(m))
        return out

    @cached_property
    def _false(self) -> isl.UnionMap:
        if not self._known("_false"):
            return super()._false
        return self._joined("_false")

    @cached_property
    def live_out_instances(self) -> isl.UnionSet:
        outputs = {a.name for a in self._kernel.outputs}
        if not self._known("live_out_instances") or outputs & self._changed:
            return super().live_out_instances
        return self._before.live_out_instances


def carried(before: Deps, kernel: Kernel, arrays: Collection[str]) -> Deps:
    """The dependences of ``kernel``, a program made from ``before``'s by
    changing its accesses to ``arrays`` alone: statements added that access
    only ``arrays``, accesses renamed from one array of ``arrays`` to another,
    each other access where it was (the same statement, domain and position
    among the statement's accesses), the other statements' instances in the
    same order, and no output among ``arrays``. A dependence, a kill and a
    live-in read each go through one array, so what goes through the other
    arrays is ``before``'s, and what goes through ``arrays`` is computed on
    ``kernel``'s accesses to them alone: the same relations as ``kernel``'s
    own analysis, for a fraction of its work (the scheduler's weights fetched
    ahead, :func:`schedules.accel.prefetch.prefetch`). Analyses ``before`` has
    not made are made on the whole of ``kernel``, when asked."""
    return _Carried(kernel, before, frozenset(arrays))


def _width(sched: isl.UnionMap) -> int:
    maps: list[isl.Map] = []
    sched.foreach_map(maps.append)
    return max((m.dim(isl.dim_type.out) for m in maps), default=0)


def _tag_schedule(sched: isl.UnionMap, accesses: isl.UnionMap) -> isl.UnionMap:
    """Schedule of tagged instances: ``[S[i] -> t[]] -> time(S[i])``."""
    tagged_domain = accesses.domain()
    return tagged_domain.unwrap().domain_map().apply_range(sched)


def _prefixed(sched: isl.UnionMap) -> isl.UnionMap:
    """Prepend a time dimension fixed to 0."""
    maps: list[isl.Map] = []
    sched.foreach_map(maps.append)
    out = isl.UnionMap.empty(sched.get_space())
    for m in maps:
        m = m.insert_dims(isl.dim_type.out, 0, 1).fix_val(isl.dim_type.out, 0, 0)
        out = out.union(isl.UnionMap.from_map(m))
    return out


def _end_schedule(end_reads: isl.UnionMap, width: int) -> isl.UnionMap:
    """The pseudo statement runs after every real instance: time [1, 0, ...]."""
    time = ", ".join(["1"] + ["0"] * (width - 1))
    out = isl.UnionMap.empty(end_reads.get_space())
    sets: list[isl.Set] = []
    end_reads.domain().foreach_set(sets.append)
    for s in sets:
        m = isl.Map.from_domain_and_range(s, isl.Set(f"{{ [{time}] }}"))
        out = out.union(isl.UnionMap.from_map(m))
    return out


def _tag_set(refs: dict[str, Ref], is_write: bool) -> set[str]:
    return {t for t, r in refs.items() if r.is_write == is_write}


def _filter_source_tags(deps: isl.UnionMap, tags: set[str]) -> isl.UnionMap:
    maps: list[isl.Map] = []
    deps.foreach_map(maps.append)
    out = isl.UnionMap.empty(deps.get_space())
    for m in maps:
        if m.domain().unwrap().range().get_tuple_name() in tags:
            out = out.union(isl.UnionMap.from_map(m))
    return out


def compute_deps(kernel: Kernel) -> Deps:
    """The program's dependences, shared with every equal program
    (:func:`by_program`) analysed under the same operation budget."""
    return by_program(kernel, f"deps within {MAX_OPERATIONS}", Deps)


def by_program(kernel: Kernel, name: str, compute: Callable[[Kernel], T]) -> T:
    """``compute(kernel)``, an analysis ``name`` of the program alone, shared with
    every kernel whose :func:`program_text` is the same: a compiler pass that
    rebuilds a program (a scheduler's rewrites, once per hardware point of a
    study) makes a new Kernel whose analyses start empty, and equal text is an
    equal program. The :data:`_KEEP` most recent are kept;
    ``POLYC_SHARED_ANALYSES=0`` computes each kernel's own."""
    if not shared_analyses():
        return compute(kernel)
    key = (name, program_text(kernel))
    if key in _BY_TEXT:
        _BY_TEXT.move_to_end(key)
        return _BY_TEXT[key]
    value = _BY_TEXT[key] = compute(kernel)
    while len(_BY_TEXT) > _KEEP:
        _BY_TEXT.popitem(last=False)
    return value


def shared_analyses() -> bool:
    """Whether analyses are shared across kernels and hardware points
    (:func:`by_program`, :mod:`schedules.accel.models`): unless
    ``$POLYC_SHARED_ANALYSES`` is ``0``."""
    return os.environ.get("POLYC_SHARED_ANALYSES", "1") not in ("0", "off", "no")


#: :func:`by_program`'s analyses by name and program text, the most recent last
_BY_TEXT: OrderedDict[tuple[str, str], object] = OrderedDict()
_KEEP = 64
T = TypeVar("T")


def program_text(kernel: Kernel) -> str:
    """What a program's dependences are a function of, as text (memoised with
    the program): its name (messages), context, program-order schedule, each
    statement's domain and accesses, and its arrays' shapes, types and roles
    (a gather reads a whole dimension; the live-out set is the outputs')."""

    def compute(k: Kernel) -> str:
        parts = [k.name, str(k.context), str(k.program_schedule)]
        for s in k.statements:
            parts.append(f"{s.name} {s.domain}")
            parts += [f"  {'w' if w else 'r'} {m}" for _, w, m in accesses(k, s)]
        parts += [
            f"{a.name} {a.shape} {a.dtype} {a.role.value}" for a in k.arrays.values()
        ]
        return "\n".join(parts)

    return kernel.analysis("ir.program_text", compute)
