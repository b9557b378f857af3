"""The intermediate representation: arrays, statements and the immutable Kernel.

A :class:`Kernel` holds arrays (name, shape, dtype, role), statements (isl domain,
write target, body expression whose loads are the reads), parameters with a context,
and one ``isl.Schedule`` tree that is the only source of loop order. A transformation
returns a new Kernel of the same program, which shares the program's analyses
(dependences are computed once, on the program order, and cached in the kernel's
one analysis cache, :meth:`Kernel.analysis`).
"""

from __future__ import annotations

import dataclasses
import enum
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, TypeVar

import islpy as isl
import numpy as np

from polyc.errors import AffineError, DefinitionError, InputError
from polyc.ir import tree
from polyc.ir.affine import Aff
from polyc.ir.dtypes import DType
from polyc.ir.expr import (
    REDUCTION_OPS,
    Binary,
    Expr,
    Gather,
    Load,
    gathers,
    loads,
    render,
    same,
)


class Role(str, enum.Enum):
    """What an array is to the kernel's caller."""

    INPUT = "input"
    OUTPUT = "output"
    INOUT = "inout"  # read and written in place (C frontend, in-place updates)
    TEMP = "temp"  # intermediate: allocated by the kernel, never returned

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Array:
    """A multi-dimensional array; each extent is an Aff over parameters."""

    name: str
    shape: tuple[Aff, ...]
    dtype: DType
    role: Role = Role.TEMP
    #: the memory level that holds the array (0: DRAM) and its byte offset
    #: there: an intermediate may live on chip for the whole kernel
    #: (``schedules.accel.homes``)
    home: int = 0
    home_offset: int = 0

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def concrete_shape(self, params: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(int(d.evaluate(params)) for d in self.shape)

    def nbytes(self, params: Mapping[str, int] | None = None) -> int:
        return int(np.prod(self.concrete_shape(params or {}))) * self.dtype.itemsize

    def __str__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        where = f" at level {self.home} + {self.home_offset}" if self.home else ""
        return f"{self.name}: {self.dtype}[{dims}] {self.role}{where}"


@dataclass(frozen=True, eq=False)
class Statement:
    """``target = body`` for every point of ``domain``.

    ``domain`` is an isl set named after the statement whose dimensions are
    ``iterators``. The reads are the :class:`Load` nodes of ``body`` (affine); the
    data-dependent reads are its :class:`Gather` nodes (``gathers``), whose access
    relations cover a whole dimension (:func:`gather_access_map`). ``origin`` says
    where the statement came from (an op, a source line) for error messages.
    """

    name: str
    iterators: tuple[str, ...]
    domain: isl.Set
    target: Load
    body: Expr
    origin: str = ""

    @cached_property
    def reads(self) -> tuple[Load, ...]:
        """Distinct reads in evaluation order."""
        out: list[Load] = []
        for ld in loads(self.body):
            if not any(ld.array == o.array and ld.index == o.index for o in out):
                out.append(ld)
        return tuple(out)

    @cached_property
    def gathers(self) -> tuple[Gather, ...]:
        """Distinct data-dependent reads (:class:`Gather`) in evaluation order."""
        out: list[Gather] = []
        for g in gathers(self.body):
            if not any(same(g, o) for o in out):
                out.append(g)
        return tuple(out)

    @property
    def data_dependent(self) -> bool:
        """Whether some read's index is data (a gather)."""
        return bool(self.gathers)

    @cached_property
    def reduction(self) -> str | None:
        """The op when the statement is ``T = T op rest`` (a reduction update)."""
        b = self.body
        if isinstance(b, Binary) and b.op in REDUCTION_OPS:
            for acc, rest in ((b.a, b.b), (b.b, b.a)):
                if same(acc, self.target) and not any(
                    ld.array == self.target.array for ld in loads(rest)
                ):
                    return b.op
        return None

    @property
    def depth(self) -> int:
        return len(self.iterators)

    def instance(self, values: Sequence[int]) -> str:
        """Readable instance, e.g. ``S0[i=3, j=0]``."""
        pairs = ", ".join(f"{n}={v}" for n, v in zip(self.iterators, values))
        return f"{self.name}[{pairs}]"

    def __str__(self) -> str:
        return f"{self.name}: {self.target} = {self.body}"


@dataclass(frozen=True)
class Step:
    """One recorded transformation: ``schedules.<name>(kernel, *args, **kwargs)``."""

    name: str
    args: tuple = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        parts = [_short_arg(a) for a in self.args]
        parts += [f"{k}={_short_arg(v)}" for k, v in self.kwargs]
        return f"{self.name}({', '.join(parts)})"


def _short_arg(value: Any) -> str:
    """``repr(value)``, except that a schedule tree's isl YAML text (a long string
    of several lines, what ``apply_schedule`` records) reads as a summary: the
    step replays with the whole text, and the printed kernel shows the tree."""
    if isinstance(value, str) and "\n" in value and len(value) > 80:
        bands = re.findall(r'mark: "([A-Za-z_]\w*)\(', value)
        shown = ", ".join(bands[:4]) + (", ..." if len(bands) > 4 else "")
        return f"<schedule tree: {value.count(chr(10))} lines of isl YAML" + (
            f"; bands {shown}>" if bands else ">"
        )
    return repr(value)


#: what names an analysis: ``"schedules.dependences"``, or a name and the arguments
#: the value depends on, ``("accel.may_leave", ("S0", "S1"))``
AnalysisKey = str | tuple

T = TypeVar("T")


class _Analyses:
    """The analyses of one program (arrays, statements, parameters, context and
    program order), by key. Only :meth:`Kernel.analysis` fills it, with a value
    computed from the kernel that asks."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[AnalysisKey, Any] = {}

    def __contains__(self, key: AnalysisKey) -> bool:
        return key in self._values

    def get(self, key: AnalysisKey, compute: Callable[[], T]) -> T:
        if key not in self._values:
            self._values[key] = compute()
        return self._values[key]


@dataclass(frozen=True, eq=False)
class Kernel:
    """An immutable polyhedral program.

    Build kernels with :mod:`polyc.compute` or :mod:`polyc.ops` (or the frontends);
    :meth:`Kernel.create` validates a hand-built one. Transformations in
    :mod:`schedules` return new Kernels via :meth:`with_schedule`; :meth:`replace`
    copies a kernel with changed fields.

    Analyses (the dependences, and whatever a pass memoises with :meth:`analysis`)
    belong to the program: :meth:`with_schedule`, :meth:`with_data` and
    :attr:`original` keep the program and so its analyses; :meth:`replace` and
    :meth:`with_context` make a new program whose analyses start empty. An analysis
    that depends on the schedule puts the schedule in its key.

    Attributes:
        program_schedule: the program order, which the dependences are computed on
            (the schedule the kernel was built with unless given).
        part_of: for a kernel made of some statements of another (one layer of a
            network), that kernel: the dependences between the statements are the
            whole program's (with the kills of the statements left out).
    """

    name: str
    arrays: Mapping[str, Array]
    statements: tuple[Statement, ...]
    params: tuple[str, ...]
    context: isl.Set
    schedule: isl.Schedule
    history: tuple[Step, ...] = ()
    data: Mapping[str, np.ndarray] = field(default_factory=dict)
    program_schedule: isl.Schedule | None = None
    part_of: Kernel | None = None
    _analyses: _Analyses = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # frozen: the fields are set once, here, to their read-only forms
        setattr_ = object.__setattr__
        setattr_(self, "arrays", MappingProxyType(dict(self.arrays)))
        setattr_(self, "statements", tuple(self.statements))
        setattr_(self, "params", tuple(self.params))
        setattr_(self, "history", tuple(self.history))
        setattr_(self, "data", MappingProxyType(dict(self.data or {})))
        if self.program_schedule is None:
            setattr_(self, "program_schedule", self.schedule)
        setattr_(self, "_analyses", _Analyses())

    # construction -------------------------------------------------------------
    @classmethod
    def create(
        cls,
        name: str,
        arrays: Iterable[Array],
        statements: Sequence[Statement],
        params: Sequence[str] = (),
        context: isl.Set | str | None = None,
        schedule: isl.Schedule | None = None,
        data: Mapping[str, np.ndarray] | None = None,
    ) -> Kernel:
        """Validate and build a Kernel; ``schedule`` defaults to program order.

        Raises:
            DefinitionError: on duplicate names, unknown arrays, or an access that
                can fall outside its array (with a witness instance).
        """
        arrays = {a.name: a for a in arrays}
        params = tuple(params)
        ctx = context_set(params, context)
        if schedule is None:
            schedule = tree.initial_schedule(
                [(s.name, s.domain, s.iterators) for s in statements]
            )
        kernel = cls(name, arrays, statements, params, ctx, schedule, data=data)
        kernel._validate()
        return kernel

    def replace(self, **changes: Any) -> Kernel:
        """A new kernel with the given fields changed (as ``dataclasses.replace``,
        which does the same) and no analyses: it is a new program. Fields not given
        are kept, ``program_schedule`` too: pass ``program_schedule=None`` with new
        statements so that their schedule becomes the program order. Not validated:
        changes to statements or arrays are the caller's to check (see
        :meth:`create`).

        Raises:
            TypeError: for a name that is not a field of Kernel.
        """
        return dataclasses.replace(self, **changes)

    def _same_program(self, **changes: Any) -> Kernel:
        """The same program with another schedule, history or data; it keeps the
        program's analyses."""
        out = dataclasses.replace(self, **changes)
        object.__setattr__(out, "_analyses", self._analyses)
        return out

    def with_schedule(self, schedule: isl.Schedule, step: Step | None = None) -> Kernel:
        """The same program under a new schedule (no legality check: see schedules)."""
        history = self.history + ((step,) if step else ())
        return self._same_program(schedule=schedule, history=history)

    def with_context(self, context: isl.Set | str) -> Kernel:
        """The same kernel with extra parameter assumptions (e.g. ``N % 32 = 0``)."""
        ctx = self.context.intersect(context_set(self.params, context))
        # under other assumptions a part is a program of its own
        return self.replace(context=ctx, part_of=None)

    def specialize(self, **values: int) -> Kernel:
        """The same program with size parameters fixed (``kernel.specialize(N=64)``):
        placement and the accelerator scheduler need concrete sizes. See
        :func:`polyc.ir.specialize.specialize`."""
        from polyc.ir.specialize import specialize

        return specialize(self, values)

    def with_data(self, data: Mapping[str, np.ndarray]) -> Kernel:
        """Bind constant input arrays (weights); they are no longer passed by callers."""
        merged = dict(self.data)
        for key, value in data.items():
            arr = self.arrays.get(key)
            if arr is None or arr.role != Role.INPUT:
                raise InputError(
                    f"bind: {key!r} is not an input array of kernel {self.name!r} "
                    f"because its inputs are {', '.join(a.name for a in self.inputs)}."
                    " Bind one of those."
                )
            merged[key] = np.ascontiguousarray(value, dtype=arr.dtype.numpy)
        return self._same_program(data=merged)

    @property
    def original(self) -> Kernel:
        """This program under its program-order schedule, with no history."""
        return self._same_program(schedule=self.program_schedule, history=())

    def __reduce__(self):
        stmts = [
            (s.name, s.iterators, str(s.domain), s.target, s.body, s.origin)
            for s in self.statements
        ]
        return (
            _rebuild,
            (
                self.name,
                dict(self.arrays),
                stmts,
                self.params,
                str(self.context),
                str(self.schedule),
                str(self.program_schedule),
                self.history,
                dict(self.data),
                self.part_of,
            ),
        )

    # queries ------------------------------------------------------------------
    def statement(self, name: str) -> Statement:
        for s in self.statements:
            if s.name == name:
                return s
        raise DefinitionError(
            f"kernel: no statement named {name!r} because the statements are "
            f"{', '.join(s.name for s in self.statements)}."
        )

    @property
    def inputs(self) -> list[Array]:
        return [a for a in self.arrays.values() if a.role in (Role.INPUT, Role.INOUT)]

    @property
    def outputs(self) -> list[Array]:
        return [a for a in self.arrays.values() if a.role in (Role.OUTPUT, Role.INOUT)]

    @property
    def free_inputs(self) -> list[Array]:
        """Inputs the caller passes (bound data excluded)."""
        return [a for a in self.inputs if a.name not in self.data]

    @property
    def domain(self) -> isl.UnionSet:
        return self.schedule.get_domain()

    @property
    def deps(self):
        """Exact dependences (:class:`polyc.ir.deps.Deps`), computed once per program."""
        from polyc.ir.deps import DEPS, compute_deps

        return self.analysis(DEPS, compute_deps)

    def analysis(self, key: AnalysisKey, compute: Callable[[Kernel], T]) -> T:
        """``compute(self)``, memoised under ``key`` among the kernels of this
        program (see the class docstring): the one cache a Kernel has.

        Raises:
            TypeError: when ``key`` is not a name or a tuple that starts with one.
        """
        name = key[0] if isinstance(key, tuple) and key else key
        if not isinstance(name, str):
            raise TypeError(
                f"Kernel.analysis: key {key!r} does not start with a name. Key an "
                "analysis by its name and the arguments it depends on."
            )
        return self._analyses.get(key, lambda: compute(self))

    def has_analysis(self, key: AnalysisKey) -> bool:
        """Whether :meth:`analysis` computed ``key`` for this program already."""
        return key in self._analyses

    def param_values(
        self, arrays: Mapping[str, np.ndarray], given: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """Parameter values read off the shapes of ``arrays`` (plus ``given``).

        Raises:
            InputError: when a parameter cannot be determined or two arrays disagree.
        """
        values = dict(given or {})
        for a in self.arrays.values():
            arr = arrays.get(a.name)
            if arr is None:
                arr = self.data.get(a.name)
            if arr is None or np.ndim(arr) != a.ndim:
                continue
            for dim, extent in zip(a.shape, np.shape(arr)):
                if dim.is_linear and len(dim.terms) == 1 and dim.terms[0][1] == 1:
                    p = dim.terms[0][0]
                    want = int(extent) - dim.const
                    if p in values and values[p] != want:
                        raise InputError(
                            f"inputs: parameter {p} is {values[p]} from one array but "
                            f"{want} from {a.name} because their shapes disagree. Pass "
                            "arrays whose shapes agree."
                        )
                    values[p] = want
        missing = [p for p in self.params if p not in values]
        if missing:
            raise InputError(
                f"inputs: no value for parameter(s) {', '.join(missing)} because no "
                "input array's shape determines them. Pass them as keyword arguments, "
                f"e.g. {missing[0]}=..."
            )
        return {p: values[p] for p in self.params}

    def loop_nest(self, params: Mapping[str, int] | None = None) -> str:
        """The schedule as readable pseudo-code."""
        from polyc.ir.printing import loop_nest_text

        return loop_nest_text(self, params)

    def __str__(self) -> str:
        from polyc.ir.printing import kernel_text

        return kernel_text(self)

    def __repr__(self) -> str:
        return (
            f"<Kernel {self.name}: {len(self.statements)} statements, "
            f"{len(self.arrays)} arrays, {len(self.history)} transformations>"
        )

    # validation ---------------------------------------------------------------
    def _validate(self) -> None:
        names = [s.name for s in self.statements]
        if len(set(names)) != len(names):
            raise DefinitionError(f"kernel: statement names repeat: {names}.")
        for s in self.statements:
            if s.domain.get_tuple_name() != s.name:
                raise DefinitionError(
                    f"kernel: statement {s.name} has a domain named "
                    f"{s.domain.get_tuple_name()!r}. Name the domain after the statement."
                )
            for ld in (s.target, *s.reads):
                arr = self.arrays.get(ld.array)
                if arr is None:
                    raise DefinitionError(
                        f"kernel: statement {s.name} accesses {ld.array!r} because "
                        f"{s.origin or 'its body'} uses it, but no array has that name."
                        " Declare the array."
                    )
                if len(ld.index) != arr.ndim:
                    raise DefinitionError(
                        f"kernel: {s.name} indexes {arr.name} with {len(ld.index)} "
                        f"indices but {arr.name} has {arr.ndim} dimensions."
                    )
            for g in s.gathers:
                arr = self.arrays.get(g.array)
                if arr is None or len(g.index) != arr.ndim:
                    raise DefinitionError(
                        f"kernel: statement {s.name} gathers from {g.array!r} with "
                        f"{len(g.index)} indices because {s.origin or 'its body'} "
                        "reads it, but no array of that name and rank exists. "
                        "Declare the array."
                    )
            if self.arrays[s.target.array].role == Role.INPUT:
                raise DefinitionError(
                    f"kernel: statement {s.name} writes {s.target.array}, which is an "
                    "input. Make it an output or inout array."
                )
        self._check_bounds()

    def _check_bounds(self) -> None:
        for s in self.statements:
            for ld in (s.target, *s.reads):
                arr = self.arrays[ld.array]
                acc = access_map(s, ld, self.params).intersect_params(self.context)
                inside = array_extent(arr, self.params).intersect_params(self.context)
                outside = acc.range().subtract(inside)
                if not outside.is_empty():
                    wit = acc.intersect_range(outside).domain()
                    point = wit.sample_point()
                    where = f"instance {s.instance(point_values(point, s.depth))}"
                    raise DefinitionError(
                        f"kernel: {s.name} ({s.origin or str(s)}) accesses "
                        f"{arr.name}[{', '.join(map(str, ld.index))}] outside "
                        f"{arr.name}'s shape ({', '.join(map(str, arr.shape))}) because "
                        f"{where} touches an element past the edge. Restrict the "
                        "statement's domain or enlarge the array."
                    )
            for g in s.gathers:  # the data-dependent component is checked at run time
                arr = self.arrays[g.array]
                acc = gather_access_map(s, g, arr, self.params)
                inside = array_extent(arr, self.params).intersect_params(self.context)
                outside = acc.intersect_params(self.context).range().subtract(inside)
                if not outside.is_empty():
                    raise DefinitionError(
                        f"kernel: {s.name} ({s.origin or str(s)}) gathers "
                        f"{render(g)} outside {arr.name}'s shape "
                        f"({', '.join(map(str, arr.shape))}) because an affine index "
                        "passes the edge. Restrict the statement's domain."
                    )


def point_values(point: isl.Point, n: int) -> list[int]:
    """The first ``n`` set coordinates of an isl point as Python ints."""
    return [
        int(point.get_coordinate_val(isl.dim_type.set, d).to_python()) for d in range(n)
    ]


def _rebuild(
    name, arrays, stmts, params, context, schedule, program, history, data, part_of
):
    statements = [
        Statement(n, its, isl.Set(dom), tgt, body, origin)
        for n, its, dom, tgt, body, origin in stmts
    ]
    return Kernel(
        name,
        arrays,
        statements,
        params,
        isl.Set(context),
        isl.Schedule(schedule),
        history,
        data,
        isl.Schedule(program),
        part_of,
    )


def context_set(params: Sequence[str], context: isl.Set | str | None) -> isl.Set:
    """The parameter context over ``params``: universe for None, an isl set as is,
    or constraint text (``"N >= 1 and N % 32 = 0"``, or a whole isl set)."""
    head = f"[{', '.join(params)}] -> " if params else ""
    if context is None:
        return isl.Set(f"{head}{{ : }}")
    if isinstance(context, str):
        text = context.strip()
        if not text.startswith("[") and not text.startswith("{"):
            text = f"{head}{{ : {text} }}"
        elif text.startswith("{"):
            text = head + text
        try:
            return isl.Set(text)
        except isl.Error as err:
            raise DefinitionError(
                f"context: {context!r} is not a valid isl set because isl says: {err}. "
                "Write constraints such as 'N >= 1 and N % 32 = 0'."
            ) from None
    return context


def params_head(params: Sequence[str]) -> str:
    return f"[{', '.join(params)}] -> " if params else ""


def access_map(stmt: Statement, ld: Load, params: Sequence[str]) -> isl.Map:
    """``{ S[i] -> A[f(i)] }`` restricted to the statement's domain (memoised
    with the statement: the schedulers ask for the same accesses of every
    program they check, and isl reads the text each time)."""
    per = _ACCESSES.get(stmt)
    if per is None:
        per = _ACCESSES[stmt] = {}
    key = (ld.array, ld.index, tuple(params))
    found = per.get(key)
    if found is None:
        found = per[key] = _access_map(stmt, ld, params)
    return found


#: :func:`access_map` by statement, then (array, index, parameters)
_ACCESSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _access_map(stmt: Statement, ld: Load, params: Sequence[str]) -> isl.Map:
    idx = ", ".join(a.to_isl() for a in ld.index)
    its = ", ".join(stmt.iterators)
    text = f"{params_head(params)}{{ {stmt.name}[{its}] -> {ld.array}[{idx}] }}"
    try:
        m = isl.Map(text)
    except isl.Error as err:  # pragma: no cover - Aff guarantees affinity
        raise AffineError(f"access: {text} is not affine ({err}).") from None
    return m.intersect_domain(stmt.domain)


def gather_access_map(
    stmt: Statement, g: Gather, arr: Array, params: Sequence[str]
) -> isl.Map:
    """The over-approximated access relation of a data-dependent read:
    ``{ S[i] -> A[f0(i), x, f2(i)] : 0 <= x < extent }`` (``x`` in the gathered
    dimension ranges over the array's whole extent there), restricted to the
    statement's domain. Dependences and legality use it, so a transformation is
    allowed only if it is legal whatever rows the indices pick."""
    key = ("gather", g.array, g.index, g.dim, tuple(params))
    per = _ACCESSES.get(stmt)
    if per is None:
        per = _ACCESSES[stmt] = {}
    found = per.get(key)
    if found is None:
        outs = [f"g{d}" for d in range(len(g.index))]
        cons = [f"g{d} = {a.to_isl()}" for d, a in g.affine()]
        cons.append(f"0 <= g{g.dim} < {arr.shape[g.dim].to_isl()}")
        its = ", ".join(stmt.iterators)
        text = (
            f"{params_head(params)}{{ {stmt.name}[{its}] -> "
            f"{g.array}[{', '.join(outs)}] : {' and '.join(cons)} }}"
        )
        found = per[key] = isl.Map(text).intersect_domain(stmt.domain)
    return found


def accessed(stmt: Statement) -> list[tuple[str, bool, Load | Gather]]:
    """Every access of ``stmt`` as ``(array, is_write, load)``, in the order of
    :func:`accesses`: the write, the affine reads, then the data-dependent
    reads."""
    out = [(stmt.target.array, True, stmt.target)]
    out += [(ld.array, False, ld) for ld in stmt.reads]
    out += [(g.array, False, g) for g in stmt.gathers]
    return out


def access_relation(kernel: Kernel, stmt: Statement, access: Load | Gather) -> isl.Map:
    """The relation of one of :func:`accessed`'s accesses (a data-dependent
    read's over-approximated)."""
    if isinstance(access, Gather):
        return gather_access_map(
            stmt, access, kernel.arrays[access.array], kernel.params
        )
    return access_map(stmt, access, kernel.params)


def accesses(kernel: Kernel, stmt: Statement) -> list[tuple[str, bool, isl.Map]]:
    """Every access of ``stmt`` as ``(array, is_write, relation)``: the write, the
    affine reads, then the data-dependent reads (over-approximated)."""
    return [
        (array, is_write, access_relation(kernel, stmt, x))
        for array, is_write, x in accessed(stmt)
    ]


def array_extent(arr: Array, params: Sequence[str]) -> isl.Set:
    """``{ A[x0, x1] : 0 <= x0 < d0 and 0 <= x1 < d1 }`` (memoised by the
    array's name and shape: the accelerator search asks for each array of a
    layer once per program it searches, and isl reads the text each time)."""
    key = (arr.name, arr.shape, tuple(params))
    found = _EXTENTS.get(key)
    if found is None:
        if len(_EXTENTS) >= 4096:
            _EXTENTS.clear()
        found = _EXTENTS[key] = _array_extent(arr, params)
    return found


#: :func:`array_extent` by (name, shape, parameters)
_EXTENTS: dict[tuple, isl.Set] = {}


def _array_extent(arr: Array, params: Sequence[str]) -> isl.Set:
    dims = [f"x{d}" for d in range(arr.ndim)]
    cons = " and ".join(
        f"0 <= {x} < {extent.to_isl()}" for x, extent in zip(dims, arr.shape)
    )
    body = f"{arr.name}[{', '.join(dims)}]" + (f" : {cons}" if cons else "")
    return isl.Set(f"{params_head(params)}{{ {body} }}")


def make_domain(
    name: str,
    iterators: Sequence[str],
    bounds: Sequence[tuple[Aff, Aff]],
    params: Sequence[str],
    conditions: Sequence[str] = (),
) -> isl.Set:
    """``{ name[i..] : lo_d <= i_d < hi_d and conditions }``."""
    cons = [
        f"{lo.to_isl()} <= {it} < {hi.to_isl()}"
        for it, (lo, hi) in zip(iterators, bounds)
    ]
    cons += list(conditions)
    body = f"{name}[{', '.join(iterators)}]" + (
        f" : {' and '.join(cons)}" if cons else ""
    )
    return isl.Set(f"{params_head(params)}{{ {body} }}")


__all__ = [
    "Array",
    "Kernel",
    "Role",
    "Statement",
    "Step",
    "access_map",
    "accesses",
    "array_extent",
    "gather_access_map",
    "make_domain",
]
