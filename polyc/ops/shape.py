"""Data movement: transpose/permute, reshape/view/flatten/squeeze/unsqueeze, expand,
slice/select, pad and concat (gathers: :mod:`polyc.ops.gather`).

Every op here is affine: a reshape maps indices with ``//`` and ``%`` by constants,
so it needs fixed sizes wherever dims merge or split (a symbolic dim may lead a merged
group only); pad and concat write regions chosen by affine conditions or index
ranges.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from polyc.errors import ArgumentError, ShapeError
from polyc.ir.affine import Aff
from polyc.lang import compute as pc
from polyc.lang.compute import Tensor
from polyc.ops._common import (
    axis,
    choice,
    fresh,
    same_dtype,
    scalar,
    sequence,
    shape_text,
    squeeze_index,
    tensor,
)


def _names(n: int) -> str:
    return " ".join(f"i{d}" for d in range(n))


def permute(input: Tensor, dims: Sequence[int], name: str | None = None) -> Tensor:
    """``out[ix] = x[...]`` with dim ``d`` of the output being ``dims[d]`` of x."""
    x = tensor("permute", input)
    perm = [
        axis("permute", d, x.ndim, "dims") for d in sequence("permute", dims, "dims")
    ]
    if sorted(perm) != list(range(x.ndim)):
        raise ArgumentError(
            f"permute: dims={tuple(dims)} is not a permutation of the {x.ndim} dims of "
            f"{x.name} because each dim must appear exactly once. Pass a permutation "
            f"of {tuple(range(x.ndim))}."
        )
    shape = tuple(x.shape[p] for p in perm)
    inverse = [perm.index(d) for d in range(x.ndim)]
    return pc.compute(
        fresh("permute", name), shape, lambda *ix: x[tuple(ix[k] for k in inverse)]
    )


def transpose(input: Tensor, dim0: int = -2, dim1: int = -1, name=None) -> Tensor:
    """Swap two dims (the last two by default)."""
    x = tensor("transpose", input)
    a, b = (
        axis("transpose", dim0, x.ndim, "dim0"),
        axis("transpose", dim1, x.ndim, "dim1"),
    )
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(x, perm, name=fresh("transpose", name))


# reshape ----------------------------------------------------------------------------


def _probe(a: Aff) -> int:
    """A size used only to decide which side of a reshape group grows next."""
    return int(a.evaluate({n: 1 << 20 for n in a.names()}))


def _infer(op: str, x: Tensor, shape: Sequence) -> tuple[Aff, ...]:
    """The target shape with one -1 resolved; a ShapeError when counts differ."""
    dims = [d.aff if isinstance(d, pc.Index) else d for d in shape]
    holes = [k for k, d in enumerate(dims) if isinstance(d, int) and d == -1]
    if len(holes) > 1:
        raise ArgumentError(
            f"{op}: shape {tuple(shape)} has {len(holes)} entries -1 because more than "
            "one size is left to infer. Give every size but one."
        )
    for d in dims:
        if not isinstance(d, Aff) and (
            isinstance(d, bool) or not isinstance(d, int) or (d < 1 and d != -1)
        ):
            raise ArgumentError(
                f"{op}: shape entry {d!r} is invalid because sizes are positive ints, "
                "parameters or -1. Fix the shape."
            )
    rest = [Aff.lift(d) for k, d in enumerate(dims) if k not in holes]
    total, known = list(x.shape), list(rest)
    for d in rest:  # cancel equal symbolic sizes on both sides
        if not d.is_constant and d in total:
            total.remove(d)
            known.remove(d)
    t, k = _product(total), _product(known)
    if holes:
        if t is not None and k is not None and _divides(k, t):
            out = [Aff.lift(d) for d in dims]
            out[holes[0]] = t // k.const
            return tuple(out)
        raise ShapeError(
            f"{op}: cannot infer -1 in {tuple(map(str, dims))} for {x.name} "
            f"{shape_text(x.shape)} because its {_product_text(x.shape)} elements are "
            "not a multiple of the other sizes. Fix the target shape."
        )
    if t != k:
        raise ShapeError(
            f"{op}: cannot view {x.name} {shape_text(x.shape)} as "
            f"{shape_text(tuple(map(Aff.lift, dims)))} because the element counts "
            f"differ ({_product_text(x.shape)} vs {_product_text(rest)}). Give a shape "
            "with the same number of elements."
        )
    return tuple(Aff.lift(d) for d in dims)


def _divides(k: Aff, t: Aff) -> bool:
    """True when the constant ``k`` divides every coefficient of the linear ``t``."""
    if not k.is_constant or k.const < 1 or not t.is_linear:
        return False
    return t.const % k.const == 0 and all(c % k.const == 0 for _, c in t.terms)


def _product(dims: Sequence[Aff]) -> Aff | None:
    out = Aff(const=1)
    for d in dims:
        if not out.is_constant and not d.is_constant:
            return None
        out = out * d
    return out


def _product_text(dims: Sequence[Aff]) -> str:
    p = _product(dims)
    return str(p) if p is not None else " * ".join(f"({d})" for d in dims)


def _groups(op: str, src: tuple[Aff, ...], dst: tuple[Aff, ...]):
    """Pair runs of ``src`` dims with runs of ``dst`` dims of equal product."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        if i < len(src) and src[i] == 1 and (j == len(dst) or dst[j] != 1):
            groups.append(([i], []))
            i += 1
            continue
        if j < len(dst) and dst[j] == 1 and (i == len(src) or src[i] != 1):
            groups.append(([], [j]))
            j += 1
            continue
        gi, gj = [i], [j]
        pi, pj = src[i], dst[j]
        i, j = i + 1, j + 1
        while pi != pj:
            grow_src = _probe(pi) < _probe(pj)
            if grow_src and i < len(src):
                pi, i = _times(op, pi, src[i]), i + 1
                gi.append(i - 1)
            elif not grow_src and j < len(dst):
                pj, j = _times(op, pj, dst[j]), j + 1
                gj.append(j - 1)
            else:
                raise ShapeError(
                    f"{op}: cannot map {shape_text(src)} onto {shape_text(dst)} because "
                    "no run of dims has equal sizes on both sides. Check the target "
                    "shape."
                )
        groups.append((gi, gj))
    return groups


def _times(op: str, a: Aff, b: Aff) -> Aff:
    if not a.is_constant and not b.is_constant:
        raise ArgumentError(
            f"{op}: merging dims of sizes {a} and {b} is not affine because both are "
            "symbolic. Give all but the leading merged dim a fixed size."
        )
    return a * b


def _strides(op: str, sizes: Sequence[Aff]) -> list[int]:
    """Row-major strides of a group; all but the leading size must be fixed."""
    strides, acc = [], 1
    for s in reversed(sizes[1:]):
        if not s.is_constant:
            raise ArgumentError(
                f"{op}: the size {s} is symbolic inside a merged or split group "
                "because it was declared with a parameter, so the index would not be "
                "affine. Give it a fixed size."
            )
        strides.append(acc)
        acc *= s.const
    strides.append(acc)
    return strides[::-1]


def reshape(input: Tensor, shape: Sequence, name: str | None = None) -> Tensor:
    """The same elements (row-major) in a new shape; one entry may be -1.

    Indices are mapped with ``//`` and ``%`` by constants, so sizes that merge or
    split must be fixed, except the leading size of a merged run.

    Raises:
        ShapeError: when the element counts differ.
        ArgumentError: when the mapping would not be affine.
    """
    op = "reshape"
    x = tensor(op, input)
    dims = (
        (shape,)
        if isinstance(shape, (int, Aff, pc.Index))
        else sequence(op, shape, "shape")
    )
    out_shape = _infer(op, x, dims)
    plan = []
    for gi, gj in _groups(op, x.shape, out_shape):
        src = [x.shape[k] for k in gi]
        dst = [out_shape[k] for k in gj]
        plan.append((gi, gj, _strides(op, src), _strides(op, dst)))

    def body(*ix):
        index = [None] * x.ndim
        for gi, gj, s_src, s_dst in plan:
            lin = 0
            for k, st in zip(gj, s_dst):
                lin = ix[k] * st + lin
            for pos, (k, st) in enumerate(zip(gi, s_src)):
                v = lin // st if st != 1 else lin
                index[k] = v if pos == 0 else v % x.shape[k].const
        return x[tuple(index)]

    return pc.compute(fresh(op, name), out_shape, body)


view = reshape


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1, name=None):
    """Merge dims ``start_dim..end_dim`` into one (``torch.flatten``)."""
    x = tensor("flatten", input)
    if x.ndim == 0:
        return reshape(x, (1,), name=fresh("flatten", name))
    a = axis("flatten", start_dim, x.ndim, "start_dim")
    b = axis("flatten", end_dim, x.ndim, "end_dim")
    if a > b:
        raise ArgumentError(
            f"flatten: start_dim={start_dim} comes after end_dim={end_dim} because "
            f"they normalise to {a} > {b}. Pass start_dim <= end_dim."
        )
    merged = _product(x.shape[a : b + 1])
    if merged is None:
        _times("flatten", *[d for d in x.shape[a : b + 1] if not d.is_constant][:2])
    shape = x.shape[:a] + (merged,) + x.shape[b + 1 :]
    return reshape(x, shape, name=fresh("flatten", name))


def unsqueeze(input: Tensor, dim: int, name: str | None = None) -> Tensor:
    """Insert a size-1 dim at ``dim``."""
    x = tensor("unsqueeze", input)
    d = axis("unsqueeze", dim, x.ndim + 1)
    shape = x.shape[:d] + (Aff(const=1),) + x.shape[d:]
    return reshape(x, shape, name=fresh("unsqueeze", name))


def squeeze(input: Tensor, dim=None, name: str | None = None) -> Tensor:
    """Drop size-1 dims (all of them, or those in ``dim`` that have size 1)."""
    x = tensor("squeeze", input)
    dims = (
        range(x.ndim)
        if dim is None
        else dim
        if isinstance(dim, (tuple, list))
        else (dim,)
    )
    drop = {axis("squeeze", d, x.ndim) for d in dims}
    shape = tuple(s for k, s in enumerate(x.shape) if not (k in drop and s == 1))
    return reshape(x, shape, name=fresh("squeeze", name))


def expand(input: Tensor, shape: Sequence, name: str | None = None) -> Tensor:
    """Broadcast ``x`` to ``shape`` (-1 keeps a size), copying elements."""
    x = tensor("expand", input)
    shape = sequence("expand", shape, "shape")
    lead = len(shape) - x.ndim
    out = []
    for k, s in enumerate(shape):
        if isinstance(s, int) and s == -1 and k >= lead:
            out.append(x.shape[k - lead])
        else:
            out.append(s.aff if isinstance(s, pc.Index) else Aff.lift(s))
    out = tuple(out)
    for k in range(x.ndim):
        if lead < 0 or (x.shape[k] != 1 and x.shape[k] != out[lead + k]):
            raise ShapeError(
                f"expand: {x.name} {shape_text(x.shape)} cannot expand to "
                f"{shape_text(out)} because only size-1 dims can grow. Pass a shape "
                "that keeps the other sizes."
            )
    return pc.compute(
        fresh("expand", name), out, lambda *ix: x[squeeze_index(x.shape, out, ix)]
    )


broadcast_to = expand


def slice(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1, name=None):
    """``x[..., start:end:step, ...]`` along ``dim`` (Python slice rules, step > 0)."""
    op = "slice"
    x = tensor(op, input)
    d = axis(op, dim, x.ndim)
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ArgumentError(
            f"{op}: step={step!r} is invalid because steps must be positive ints. "
            "Pass step >= 1."
        )
    for value, what in ((start, "start"), (end, "end")):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int)
        ):
            raise ArgumentError(
                f"{op}: {what}={value!r} is not an index because slice bounds are ints "
                "or None. Pass an int."
            )
    size = x.shape[d]
    if size.is_constant:
        lo, hi, _ = builtins.slice(start, end, step).indices(size.const)
        count = max(0, -(-(hi - lo) // step))
        out = Aff(const=count)
    elif start in (None, 0) and end is None:
        lo, out = 0, (size - 1) // step + 1
    else:
        raise ArgumentError(
            f"{op}: dim {d} of {x.name} is the symbolic size {size} because it was "
            "declared with a parameter, so only a full slice is affine here. Give it "
            "a fixed size."
        )
    if out == 0:
        raise ShapeError(
            f"{op}: the slice [{start}:{end}:{step}] of dim {d} ({size}) is empty "
            "because polyc tensors have sizes >= 1. Select at least one element."
        )
    shape = x.shape[:d] + (out,) + x.shape[d + 1 :]

    def body(*ix):
        return x[tuple(ix[:d]) + (ix[d] * step + lo,) + tuple(ix[d + 1 :])]

    return pc.compute(fresh(op, name), shape, body)


def select(input: Tensor, dim: int, index: int, name: str | None = None) -> Tensor:
    """``x`` at ``index`` along ``dim``, with that dim removed (``torch.select``)."""
    x = tensor("select", input)
    d = axis("select", dim, x.ndim)
    size = x.shape[d]
    if (
        isinstance(index, bool)
        or not isinstance(index, int)
        or (size.is_constant and not -size.const <= index < size.const)
    ):
        raise ArgumentError(
            f"select: index={index!r} is out of range because dim {d} of {x.name} has "
            f"size {size}. Pass an index in [-{size}, {size})."
        )
    if index < 0:
        index = index + size.const
    shape = x.shape[:d] + x.shape[d + 1 :]
    return pc.compute(
        fresh("select", name),
        shape,
        lambda *ix: x[tuple(ix[:d]) + (index,) + tuple(ix[d:])],
    )


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value=0, name=None):
    """Pad with ``value`` (``F.pad``): ``pad`` is ``(left, right)`` pairs from the
    last dim backwards; negative amounts crop.

    Two statements write disjoint regions: the copy where the source index is inside
    ``x`` and the fill elsewhere (no element is written twice).

    Raises:
        ArgumentError: an odd-length or too long ``pad``, or a mode other than
            ``"constant"``.
        ShapeError: when cropping leaves an empty dim.
    """
    op = "pad"
    x = tensor(op, input)
    choice(op, mode, ("constant",), "mode")
    amounts = sequence(op, pad, "pad")
    if (
        len(amounts) % 2
        or len(amounts) // 2 > x.ndim
        or not all(isinstance(a, int) and not isinstance(a, bool) for a in amounts)
    ):
        raise ArgumentError(
            f"{op}: pad={tuple(pad)!r} is invalid because it must hold (left, right) "
            f"int pairs for at most the {x.ndim} dims of {x.name}, last dim first. "
            "Pass e.g. pad=(1, 1) for the last dim."
        )
    before = [0] * x.ndim
    after = [0] * x.ndim
    for k in range(len(amounts) // 2):
        before[x.ndim - 1 - k] = amounts[2 * k]
        after[x.ndim - 1 - k] = amounts[2 * k + 1]
    shape = tuple(x.shape[d] + before[d] + after[d] for d in range(x.ndim))
    for d, s in enumerate(shape):
        if s.is_constant and s.const < 1:
            raise ShapeError(
                f"{op}: dim {d} of {x.name} ({x.shape[d]}) would become {s.const} "
                f"because pad removes {-before[d] - after[d]} elements. Crop less."
            )
    out = pc.tensor(fresh(op, name), shape, x.dtype)
    fill = scalar(op, value, x)
    ix = pc.indices(_names(x.ndim))
    inside = None
    for d in range(x.ndim):
        if before[d] > 0 or after[d] > 0:
            cond = (ix[d] >= before[d]) & (ix[d] < x.shape[d] + before[d])
            inside = cond if inside is None else inside & cond
    source = tuple(v - b for v, b in zip(ix, before))
    out.set(ix, x[source], where=inside)
    if inside is not None:
        out.set(ix, fill, where=~inside)
    return out


def concat(tensors: Sequence[Tensor], dim: int = 0, name: str | None = None):
    """Join tensors along ``dim`` (``torch.cat``); other dims and dtypes must agree.

    Each operand is one statement writing its own range of the output.

    Raises:
        ShapeError: ranks or sizes that differ outside ``dim``.
        DTypeError: dtypes that differ.
    """
    op = "concat"
    parts = [tensor(op, t, f"tensors[{n}]") for n, t in enumerate(tensors)]
    if not parts:
        raise ArgumentError(
            f"{op}: tensors is empty because no operand was given. Pass at least one "
            "tensor."
        )
    first = parts[0]
    d = axis(op, dim, first.ndim)
    for t in parts[1:]:
        same_dtype(op, first, t)
        bad = t.ndim != first.ndim or any(
            a != b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != d
        )
        if bad:
            raise ShapeError(
                f"{op}: {t.name} {shape_text(t.shape)} does not fit {first.name} "
                f"{shape_text(first.shape)} because all dims but dim {d} must agree. "
                "Reshape the operands so that only the concatenated dim differs."
            )
    total = Aff(const=0)
    for t in parts:
        total = total + t.shape[d]
    shape = first.shape[:d] + (total,) + first.shape[d + 1 :]
    out = pc.tensor(fresh(op, name), shape, first.dtype)
    offset = Aff(const=0)
    for t in parts:
        ix = list(pc.indices(_names(first.ndim)))
        ix[d] = pc.index(f"i{d}", t.shape[d])
        lhs = tuple(ix[:d]) + (ix[d] + offset,) + tuple(ix[d + 1 :])
        out.set(lhs, t[tuple(ix)])
        offset = offset + t.shape[d]
    return out


cat = concat
