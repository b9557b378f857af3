"""The indirect-DMA form of a gather statement: the one predicate the accelerator
scheduler (which marks the statement ``@gather``) and the code generator (which
emits ``pc_gather`` for it) share.

A statement ``out[i0, .., in-1] = table[.., {idx[..]}, ..]`` whose body is exactly a
:class:`~polyc.ir.expr.Gather` moves whole rows: the trailing iterators that index
the table's and the output's innermost dimensions in full (and that the index does
not use) make one contiguous *row*; one outer iterator (``run``) walks the rows one
DMA call gathers (its indices ``idx_stride`` elements apart, its output rows
``dst_stride`` apart); the other outer iterators are loops around the calls. The
form refuses (returns the reason) what an indirect DMA cannot do; such a gather
runs on the scalar core, its indices checked one by one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import islpy as isl

from polyc.ir.affine import Aff, var
from polyc.ir.expr import Gather, Load
from polyc.ir.kernel import Kernel, Statement


@dataclass(frozen=True)
class GatherForm:
    """How one statement gathers rows (see the module docstring); offsets are
    in elements, functions of the ``loops`` iterators."""

    stmt: str
    table: str
    index: str  # the array the indices are read from
    target: str
    loops: tuple[tuple[str, int, int], ...]  # (iterator, lo, hi) around the calls
    run: str  # the iterator one call walks
    rows: int  # indices (rows) per call
    row_elems: int  # elements per row (contiguous in table and target)
    table_rows: int  # the extent of the gathered dimension
    src_off: Aff  # table offset of row 0 at the loops' point
    src_stride: int  # elements between consecutive table rows (per index unit)
    idx_off: Aff
    idx_stride: int
    dst_off: Aff
    dst_stride: int
    elem: int  # bytes per element
    idx_elem: int  # bytes per index

    @property
    def calls(self) -> int:
        n = 1
        for _, lo, hi in self.loops:
            n *= hi - lo + 1
        return n

    @property
    def row_bytes(self) -> int:
        return self.row_elems * self.elem


def _box(stmt: Statement) -> dict[str, tuple[int, int]] | None:
    """Constant bounds per iterator when the domain is exactly their box."""
    dom = stmt.domain
    if dom.dim(isl.dim_type.param) and not dom.is_params():
        dom = dom.project_out(isl.dim_type.param, 0, dom.dim(isl.dim_type.param))
    out: dict[str, tuple[int, int]] = {}
    for d, it in enumerate(stmt.iterators):
        lo, hi = dom.dim_min(d), dom.dim_max(d)
        if not (lo.is_cst() and hi.is_cst()):
            return None
        out[it] = (_int(lo), _int(hi))
    text = " and ".join(f"{lo} <= {it} <= {hi}" for it, (lo, hi) in out.items())
    box = isl.Set(f"{{ {stmt.name}[{', '.join(stmt.iterators)}] : {text} }}")
    return out if box.is_subset(dom) and dom.is_subset(box) else None


def _int(pw: isl.PwAff) -> int:
    vals: list[int] = []
    pw.foreach_piece(lambda _s, a: vals.append(int(a.get_constant_val().to_python())))
    return vals[0]


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, s = [], 1
    for e in reversed(shape):
        out.append(s)
        s *= e
    return out[::-1]


def _flat(index, shape: tuple[int, ...]) -> Aff:
    flat = Aff(const=0)
    for a, s in zip(index, _strides(shape)):
        flat = flat + a * s
    return flat


def form(kernel: Kernel, stmt: Statement) -> GatherForm | str:
    """The statement's indirect-DMA form, or why it has none."""
    g = stmt.body
    if kernel.params:
        return "its sizes are symbolic"
    if not isinstance(g, Gather) or g.dtype != stmt.target.dtype:
        return "its value is not a gathered element alone"
    by = g.by
    if not isinstance(by, Load) or by.dtype.name not in ("int32", "int64"):
        return "its index is not an element of an int32 or int64 array"
    box = _box(stmt)
    its = stmt.iterators
    if box is None:
        return "its domain is not a box of constant bounds"
    if tuple(stmt.target.index) != tuple(var(i) for i in its):
        return "it does not write its output at its iterators, in order"
    arrays = kernel.arrays
    table, idx, out = arrays[g.array], arrays[by.array], arrays[stmt.target.array]
    tshape, ishape = table.concrete_shape({}), idx.concrete_shape({})
    oshape = out.concrete_shape({})
    if table.dtype.itemsize not in (1, 2, 4, 8):
        return "its elements are not 1, 2, 4 or 8 bytes"
    used_by = set().union(set(), *(a.names() for a in by.index))
    # the row: the longest run of trailing iterators that index the table's and
    # the output's innermost dims in full, which the index does not use
    k = 0
    while k < min(len(its), len(tshape) - g.dim - 1):
        it = its[len(its) - 1 - k]
        tdim = len(tshape) - 1 - k
        lo, hi = box[it]
        full = lo == 0 and hi + 1 == tshape[tdim] == oshape[len(its) - 1 - k]
        if g.index[tdim] != var(it) or it in used_by or not full:
            break
        k += 1
    outer = its[: len(its) - k]
    if not outer:
        return "it gathers one row only"
    fixed = [a for d, a in g.affine() if d < len(tshape) - k]
    run = next(
        (
            it
            for it in reversed(outer)
            if not any(it in a.names() for a in fixed) and it in used_by
        ),
        None,
    )
    if run is None:
        return "no loop walks the indices while the table's other indices stay put"
    lo_run = box[run][0]
    at_lo = {run: Aff(const=lo_run)}
    zero_rows = {it: Aff(const=0) for it in its[len(its) - k :]}
    table_index = [
        Aff(const=0) if a is None else a.substitute({**at_lo, **zero_rows})
        for a in g.index
    ]
    tstrides = _strides(tshape)
    idx_index = list(by.index)
    if not all(a.is_linear for a in idx_index):
        return "its index array is read with a floor division"
    idx_stride = sum(
        a.coefficient(run) * st for a, st in zip(idx_index, _strides(ishape))
    )
    row_elems = 1
    for e in tshape[len(tshape) - k :]:
        row_elems *= e
    ostrides = _strides(oshape)
    found = GatherForm(
        stmt=stmt.name,
        table=g.array,
        index=by.array,
        target=stmt.target.array,
        loops=tuple((it, *box[it]) for it in outer if it != run),
        run=run,
        rows=box[run][1] - lo_run + 1,
        row_elems=row_elems,
        table_rows=tshape[g.dim],
        src_off=_flat(table_index, tshape),
        src_stride=tstrides[g.dim],
        idx_off=_flat([a.substitute(at_lo) for a in idx_index], ishape),
        idx_stride=int(idx_stride),
        dst_off=_flat([var(i).substitute({**at_lo, **zero_rows}) for i in its], oshape),
        dst_stride=ostrides[its.index(run)],
        elem=table.dtype.itemsize,
        idx_elem=idx.dtype.itemsize,
    )
    return _merged(found)


def _merged(f: GatherForm) -> GatherForm:
    """The loop just outside the run folded into it while the rows stay evenly
    spaced (an embedding's batch and sequence: one call for all tokens)."""
    while f.loops:
        it, lo, hi = f.loops[-1]
        if not (
            f.src_off.coefficient(it) == 0
            and f.idx_off.coefficient(it) == f.rows * f.idx_stride
            and f.dst_off.coefficient(it) == f.rows * f.dst_stride
        ):
            break
        at = {it: Aff(const=lo)}
        f = dataclasses.replace(
            f,
            loops=f.loops[:-1],
            run=it,
            rows=f.rows * (hi - lo + 1),
            idx_off=f.idx_off.substitute(at),
            dst_off=f.dst_off.substitute(at),
        )
    return f


def forms(kernel: Kernel) -> dict[str, GatherForm]:
    """The statements of ``kernel`` that gather in the indirect-DMA form."""
    out = {}
    for s in kernel.statements:
        if s.gathers:
            f = form(kernel, s)
            if isinstance(f, GatherForm):
                out[s.name] = f
    return out


__all__ = ["GatherForm", "form", "forms"]
