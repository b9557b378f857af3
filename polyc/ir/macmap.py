"""Whether a MAC mapping is realisable: the one predicate that the accelerator
scheduler's search and the code generator share.

A tensorized statement ``C[f] += A[g] * B[h]`` runs each tile as ``pc_mac`` calls
over strided 2-D views of its three buffers. Each MAC dimension (M: in C and A,
N: in C and B, K: in A and B) is one iterator or several fused into one index,
outermost first. A view steps by one element stride per index, so a group is
realisable when, in the two operands that use it:

- every iterator moves whole elements of the buffer (in a polyphase dimension of
  factor ``f`` it moves by multiples of ``f`` and stays in one phase);
- the inner iterator moves (a non-zero stride: ``unit``);
- each other iterator moves ``ratio`` times the inner one, with one ``ratio`` in
  both operands (a pitch: output rows padded to the input row's pitch);
- the fused index never folds onto itself: M and N may run over padding (the
  output's unused elements), so each ratio is at least the span of the
  iterators inside it; K may not (a padded K adds products), so each ratio is
  exactly that span and the iterators inside it cover the same range in every
  tile;
- the padding M and N run over in the output is the output's own row padding:
  between the dimensions of two fused iterators (in the buffer's layout) no
  dimension of the output box has more than one element, else the rows of the
  gap are other outputs, which the call would overwrite.

M has one too, several output rows of a convolution per call over a compact
output: a group of two iterators (an output row over its columns) whose inner
one is whole in every tile may step the output by exactly the inner one's span
while it steps A by A's own row pitch. A's view then splits its row index ``m``
into ``m // span`` steps of that pitch and ``m % span`` steps of the inner
stride (``pc_view`` ``rspan`` / ``rps``), and the call runs over no padding: a
4x4 output tile is 16 rows of the array, not the 22 of a pitch of 6.

K has one exception, the im2col read of a convolution's input: the outermost
iterator of a fused K (a filter row ``rh`` over ``(rw, rc)``) may step A by its
own pitch (the input row's) while it steps B by exactly the span of the
iterators inside it. A's view then splits its column index ``k`` into
``k // span`` steps of that pitch and ``k % span`` steps of the inner stride
(``pc_view`` ``span`` / ``ps``): each call reads a ``rh x rw x rc`` window of the
input, the elements the loops over the taps would read, in the same order.

The call may exchange its operands (the ``@tensorize`` mark's ``exchange``): it
then computes ``C^T = B^T A^T``, B in the array's A port and A in its B port,
every view transposed. The roles above stay those of the contraction (M in C
and A, N in C and B), and so do the exceptions: the im2col and row-pitch splits
are A's, whichever port it sits in (``pc_view`` splits a B operand's rows by its
``span`` and its columns by its ``rspan``), so a mapping is realisable exchanged
exactly when it is plain, and :func:`check` does not ask which.

Both sides call :func:`check` with the numbers they know: the search with the
buffers its cost model predicts for a candidate's tile sizes
(:meth:`schedules.accel.model.LayerModel.mac_mapping`), the scheduler's build and
the code generator with the ``@buffer`` and ``@tensorize`` marks the placement
wrote (:func:`from_marks`). This module sits with the mark grammar
(:mod:`polyc.ir.marks`) because both ``schedules`` and ``codegen`` may import
the IR-level modules of ``polyc`` while ``codegen`` may not import ``schedules``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

from polyc.ir import marks as pm
from polyc.ir import tree
from polyc.ir.affine import Aff

#: the operands each MAC dimension moves through: output ``c``, operands ``a``, ``b``
USERS = {"m": ("c", "a"), "n": ("c", "b"), "k": ("a", "b")}
ROLES = ("m", "n", "k")


@dataclass(frozen=True)
class Operand:
    """One access of the contraction through its buffer: the access's index per
    array dimension, the buffer's element stride per array dimension and its
    polyphase factor per dimension (``()`` when stored plainly)."""

    buffer: str
    index: tuple[Aff, ...]
    strides: tuple[int, ...]
    phases: tuple[int, ...] = ()
    box: tuple[int, ...] = ()  # the buffer's box extent per dimension (unpadded)

    def phase(self, d: int) -> int:
        return self.phases[d] if self.phases else 1


@dataclass(frozen=True)
class Dimension:
    """A realisable MAC dimension: per iterator of the group its stride over the
    inner one's (``ratios``), and per operand the element stride of the inner
    iterator (``unit``, the view's stride)."""

    group: tuple[str, ...]
    ratios: tuple[int, ...]
    unit: tuple[tuple[str, int], ...]
    # K and M: per operand read with two strides, (span, pitch): the fused index
    # k is at (k // span) * pitch + (k % span) * unit (see the module docstring)
    split: tuple[tuple[str, int, int], ...] = ()

    def stride(self, key: str) -> int:
        return dict(self.unit).get(key, 0)

    def split_of(self, key: str) -> tuple[int, int] | None:
        """``(span, pitch)`` of the operand ``key`` read with two strides."""
        return next(((sp, p) for k, sp, p in self.split if k == key), None)


@dataclass(frozen=True)
class Refusal:
    """Why a mapping is not realisable: ``what`` is refused ``because`` of a
    witness, and the ``fix`` that helps."""

    what: str
    because: str
    fix: str

    def message(self, op: str) -> str:
        return f"{op}: {self.what} because {self.because}. {self.fix}"


def check(
    stmt: str,
    groups: Mapping[str, tuple[str, ...]],
    operands: Mapping[str, Operand],
    extents: Mapping[str, int],
    exact: Mapping[str, bool],
) -> dict[str, Dimension] | Refusal:
    """The MAC dimensions of statement ``stmt`` when its mapping is realisable,
    else the :class:`Refusal` that says why (see the module docstring).

    Args:
        stmt: the statement's name (for the messages).
        groups: the iterators of each role ``"m"``, ``"n"``, ``"k"``, outermost
            first (empty: the dimension is 1).
        operands: ``"c"`` (the output), ``"a"`` and ``"b"`` through their buffers.
        extents: the largest extent of each iterator in one tile.
        exact: per iterator, whether it has that extent in every tile.
    """
    dims = {}
    for role in ROLES:
        group = tuple(groups.get(role, ()))
        out = _dimension(stmt, role, group, operands, extents, exact)
        if isinstance(out, Refusal):
            return out
        dims[role] = out
    return dims


def _coefficient(stmt: str, op: Operand, it: str) -> int | Refusal:
    """Element stride of ``it`` in ``op``'s buffer (phase-aware)."""
    out = 0
    for d, (st, a) in enumerate(zip(op.strides, op.index)):
        q, r = divmod(a.coefficient(it), op.phase(d))
        if r:
            return Refusal(
                f"{it} of {stmt} cannot run inside one MAC call over {op.buffer}",
                f"it moves {a.coefficient(it)} elements along dimension {d}, which "
                f"is stored in {op.phase(d)} phases",
                f"Loop over {it} around the call or place the array without phases.",
            )
        out += st * q
    return out


def _dimension(stmt, role, group, operands, extents, exact):
    if not group:
        return Dimension((), (), ())
    users = USERS[role]
    coef: dict[tuple[str, str], int] = {}
    for key in users:
        for it in group:
            c = _coefficient(stmt, operands[key], it)
            if isinstance(c, Refusal):
                return c
            coef[key, it] = c
    inner = group[-1]
    still = [k for k in users if coef[k, inner] == 0]
    if still:
        names = " and ".join(operands[k].buffer for k in still)
        return Refusal(
            f"MAC dimension {role} of {stmt} ({inner}) does not move through {names}",
            "its buffer stride is 0",
            "Pick an iterator of that role.",
        )
    if role == "k" and len(group) > 1:
        split = _k_split(stmt, group, operands, extents, exact, coef)
        if split is not None:
            return split
    if role == "m" and len(group) == 2:
        split = _m_split(group, operands, extents, exact, coef)
        if split is not None:
            return split
    ratios = []
    for it in group:
        per = {k: divmod(coef[k, it], coef[k, inner]) for k in users}
        if any(r for _, r in per.values()) or len({q for q, _ in per.values()}) > 1:
            return _fuse_refusal(stmt, role, group, it, operands, users, coef)
        ratios.append(next(iter(per.values()))[0])
    span = 1
    for pos in reversed(range(len(group))):
        it, q = group[pos], ratios[pos]
        if it != inner:
            below = group[pos + 1]
            if role == "k" and not (q == span and exact[below]):
                return _fuse_refusal(stmt, role, group, it, operands, users, coef)
            if role != "k" and q < span:
                return _fuse_refusal(stmt, role, group, it, operands, users, coef)
        span += (extents[it] - 1) * q
    if role != "k" and len(group) > 1:
        gap = _gap_refusal(stmt, role, group, operands["c"], ratios, extents)
        if gap is not None:
            return gap
    unit = tuple((k, coef[k, inner]) for k in users)
    return Dimension(group, tuple(ratios), unit)


def _k_split(stmt, group, operands, extents, exact, coef):
    """K read by A with two strides (see the module docstring): the iterators
    inside the outer one fuse as a K of their own, whole in every tile, the outer
    one steps B by exactly their span and A by another pitch. None when that is
    not the case (the group then fuses by one ratio or not at all), the
    :class:`Refusal` of the inner iterators when they do not fuse."""
    outer, below, inner = group[0], group[1], group[-1]
    rest = _dimension(stmt, "k", group[1:], operands, extents, exact)
    if isinstance(rest, Refusal) and len(group) > 2:
        # what fails inside fails the whole group too: say which iterator
        what = f"iterators {', '.join(group)} of {stmt} cannot fuse into MAC "
        return Refusal(what + "dimension k", rest.because, rest.fix)
    if isinstance(rest, Refusal) or rest.split or not exact[below]:
        return None  # one split only: A's view has one pitch
    span = 1 + sum((extents[it] - 1) * q for it, q in zip(rest.group, rest.ratios))
    if coef["b", outer] != span * coef["b", inner]:
        return None
    if coef["a", outer] == span * coef["a", inner]:
        return None  # one pitch in both: the plain fusion
    unit = tuple((k, coef[k, inner]) for k in USERS["k"])
    split = (("a", span, coef["a", outer]),)
    return Dimension(group, (span, *rest.ratios), unit, split)


def _m_split(group, operands, extents, exact, coef):
    """M read by A with two strides (see the module docstring): the output is
    compact, its outer row stepping exactly the span of the inner iterator, whole
    in every tile, while A steps it by its own row pitch. None when that is not
    the case (the group then fuses by one ratio, over a padded output, or not at
    all)."""
    outer, inner = group
    if not exact[inner]:
        return None
    ratio = {}
    for key in USERS["m"]:
        q, r = divmod(coef[key, outer], coef[key, inner])
        if r or q <= 0:
            return None
        ratio[key] = q
    span = extents[inner]
    if ratio["c"] != span or ratio["a"] == span or ratio["a"] < span:
        return None
    c = operands["c"]
    if _gap_refusal("", "m", group, c, (span, 1), extents) is not None:
        return None
    unit = tuple((k, coef[k, inner]) for k in USERS["m"])
    split = (("a", span, coef["a", outer]),)
    return Dimension(group, (span, 1), unit, split)


def _gap_refusal(stmt, role, group, c: Operand, ratios, extents) -> Refusal | None:
    """A fused M or N group whose rows would run over other elements of the
    output box (not its padding): a dimension of the box between two of its
    iterators, or a gap between rows (a pitch) while the rows do not cover their
    dimension of the box (the rest is a halo that another statement reads)."""
    if not c.box:
        return None
    dims = []
    for it in group:
        ds = [d for d, a in enumerate(c.index) if a.coefficient(it)]
        if len(ds) != 1:
            return Refusal(
                f"iterators {', '.join(group)} of {stmt} cannot fuse into MAC "
                f"dimension {role}",
                f"{it} indexes {len(ds)} dimensions of the output {c.buffer}",
                f"Tensorize with {role}=({group[-1]!r},) and loop over the others.",
            )
        dims.append(ds[0])
    for (outer, d_o), (below, d_i) in zip(
        zip(group, dims), zip(group[1:], dims[1:]), strict=False
    ):
        # the layout order, outermost last: by stride, and where strides tie (a
        # dimension of one element in between) the longer box outside
        lo, hi = (c.strides[d_i], c.box[d_i]), (c.strides[d_o], c.box[d_o])
        for e, (st, n) in enumerate(zip(c.strides, c.box)):
            if e not in (d_o, d_i) and lo < (st, n) < hi and n > 1:
                return Refusal(
                    f"iterators {', '.join(group)} of {stmt} cannot fuse into MAC "
                    f"dimension {role}",
                    f"between {outer} and {below} the output {c.buffer} has dimension "
                    f"{e} of {n} elements, so the rows the call runs over between them "
                    "are other outputs, which it would overwrite",
                    f"Tensorize with {role}=({group[-1]!r},) and loop over the "
                    f"others, or tile dimension {e} to one element.",
                )
    span = 1
    for pos in reversed(range(1, len(group))):
        it, d = group[pos], dims[pos]
        span += (extents[it] - 1) * ratios[pos]
        rows = extents[it] * abs(c.index[d].coefficient(it))
        # an outer iterator of one point (a batch of one) never steps to a pitch
        steps = any(extents[o] > 1 for o in group[:pos])
        if steps and ratios[pos - 1] > span and rows < c.box[d]:
            return Refusal(
                f"iterators {', '.join(group)} of {stmt} cannot fuse into MAC "
                f"dimension {role}",
                f"{it} covers {rows} of the {c.box[d]} elements of the output "
                f"{c.buffer}'s dimension {d} and {group[pos - 1]} skips to the next "
                "pitch, so the call would write its padding rows over the rest (a "
                "halo that another statement reads)",
                f"Tensorize with {role}=({group[-1]!r},) and loop over the others.",
            )
    return None


def _fuse_refusal(stmt, role, group, it, operands, users, coef) -> Refusal:
    inner = group[-1]
    moves = " and ".join(
        f"{coef[k, it]} in {operands[k].buffer} (where {inner} moves {coef[k, inner]})"
        for k in users
    )
    need = "equal to" if role == "k" else "at least"
    return Refusal(
        f"iterators {', '.join(group)} of {stmt} cannot fuse into MAC dimension {role}",
        f"the buffer strides of {it} are not one pitch times the inner iterator's "
        f"in every access (or would overlap): {it} moves {moves}, and the pitch "
        f"must be one integer {need} the span of the iterators inside it",
        f"Tensorize with {role}=({inner!r},) and loop over the others, or place the "
        "buffers with matching row pitches.",
    )


# the mapping as placed: the marks of a schedule tree ------------------------------


def tile_extents(tm: pm.TensorizeMark, iterators) -> tuple[dict, dict]:
    """``(extents, exact)`` of every iterator of a tensorized statement from its
    ``@tensorize`` mark: the largest extent in one tile, and whether every tile
    has it."""
    lo, hi = pm.pw_multi_aff(tm.lo), pm.pw_multi_aff(tm.hi)
    extents, exact = {}, {}
    for d, it in enumerate(iterators):
        size = hi.get_at(d).sub(lo.get_at(d)).add_constant_val(isl.Val(1))
        top, bottom = size.max_val().to_python(), size.min_val().to_python()
        extents[it], exact[it] = int(top), top == bottom
    return extents, exact


def loads(stmt, tm: pm.TensorizeMark) -> dict:
    """The output and the two operand loads of a tensorized statement."""
    return {"c": stmt.target, "a": stmt.reads[tm.a], "b": stmt.reads[tm.b]}


def from_marks(
    stmt, tm: pm.TensorizeMark, buffers: Mapping[str, pm.BufferMark]
) -> dict[str, Dimension] | Refusal:
    """:func:`check` on a placed statement: ``buffers`` maps each array of the
    statement to the buffer its accesses use at the MAC call."""
    ops = {}
    for key, ld in loads(stmt, tm).items():
        b = buffers.get(ld.array)
        if b is None:
            return Refusal(
                f"{stmt.name} runs on the MAC array but {ld.array} has no buffer "
                "around it",
                "it was not placed",
                "Place A, B and the output of a tensorized statement in the MAC "
                "array's levels.",
            )
        ops[key] = Operand(b.name, ld.index, b.strides, b.phases, tuple(b.extent))
    extents, exact = tile_extents(tm, stmt.iterators)
    groups = {"m": tm.m, "n": tm.n, "k": tm.k}
    return check(stmt.name, groups, ops, extents, exact)


def placed(kernel, stmts=None) -> dict[str, tuple[pm.TensorizeMark, dict]]:
    """Per tensorized statement of ``kernel``'s schedule, its ``@tensorize`` mark
    and the buffer of each array active at its MAC call (the innermost
    ``@buffer`` of that array above the ``pc_mac_<stmt>`` leaf). With ``stmts``
    (names), at least those statements: the children of the root sequence that
    run none of them are not walked (a statement's marks, buffers and MAC call
    are all below the child that runs it)."""
    marks: dict[str, pm.TensorizeMark] = {}
    active_at: dict[str, dict] = {}
    T = isl.schedule_node_type

    def visit(node, active, reach):
        t = node.get_type()
        if t in tree.REACH_TYPES:
            reach = tree.Reach(reach, node)
        if t == T.mark:
            name = node.mark_get_id().get_name()
            kind = pm.kind(name)
            if kind == "buffer":
                b = pm.BufferMark.parse(name)
                active = {**active, b.array: b}
            elif kind == "tensorize":
                tm = pm.TensorizeMark.parse(name)
                marks[tm.stmt] = tm
        if t == T.leaf:
            names = reach.names() if reach is not None else None
            if names is None:
                names = tree.tuple_names(node.get_universe_domain())
            for n in names:
                if n.startswith(pm.MAC):
                    active_at[n[len(pm.MAC) :]] = active
        for i in range(node.n_children()):
            visit(node.child(i), active, reach)

    root = kernel.schedule.get_root()
    homes = {a.name: pm.home_buffer(a) for a in kernel.arrays.values() if a.home}
    skip = tree.unrelated_children(root, stmts) if stmts is not None else set()
    if skip:
        seq = root.child(0)
        reach = tree.Reach(None, root)
        for i in range(seq.n_children()):
            if i not in skip:
                visit(seq.child(i), homes, reach)
    else:
        visit(root, homes, None)
    return {s: (tm, active_at.get(s, {})) for s, tm in marks.items()}


def refusals(kernel, stmts=None) -> list[tuple[str, Refusal]]:
    """The tensorized statements of ``kernel`` (those named in ``stmts``, or all)
    whose placed mapping is not realisable, with the reason."""
    out = []
    for name, (tm, bufs) in placed(kernel, stmts).items():
        if stmts is not None and name not in stmts:
            continue
        got = from_marks(kernel.statement(name), tm, bufs)
        if isinstance(got, Refusal):
            out.append((name, got))
    return out
