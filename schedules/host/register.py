"""Register tiles for contractions: a micro-kernel whose accumulators stay in
registers across the reduction loop.

A contraction ``X[f] = X[f] + g(...)`` whose band (after cache tiling) holds a
reduction member ``r`` (``X[f]`` does not move with it), a contiguous innermost
member ``l`` (``X[f]`` moves by one element) and a row member ``p`` (``X[f]``
moves by a row) is register-tiled::

    for p: for r: for l:                for p_t (step MR): for l_t (step NR):
      X[p][l] += A[p][r] * B[r][l]   ->   for r:         # @accumulate(NR, MR, VB)
                                            for l in NR:     # the vector loop
                                              for p in MR:   # unrolled and jammed
                                                X[p][l] += A[p][r] * B[r][l]

Each step is a checked transformation (``tile``, ``permute``, ``split_band``);
:func:`accumulate` then marks the reduction loop with ``@accumulate(NR, MR)``, a
promise the host code generator keeps by holding the ``NR x MR`` elements of ``X``
that the loops below touch in a local array for the whole reduction loop (copied
in before it and out after it), with constant trip counts on full tiles, so that
gcc keeps them in vector registers (the loads and stores of ``X`` leave the
reduction loop). The promise is checked with isl: one statement below the mark,
every access of it to ``X`` is its target, and for fixed enclosing loops the
target is a bijection of the loops below the mark that does not depend on the
marked loop. The arithmetic and its order are unchanged, so results are the same
bit for bit.

Sizes: ``NR`` = 128 bytes of a row (16 doubles, 32 floats) and ``MR`` rows so that
the tile fills :data:`ACCUMULATORS` = 16 SIMD registers of the host's width
(:attr:`~schedules.host.cache_model.Cache.vector`, :func:`rows_of_tile`): 4 rows of
four 256-bit vectors (AVX2), 8 rows of two 512-bit ones (AVX-512). The scheduler
marks ``@accumulate(NR, MR, VB)`` with that width, so that the code generator
holds the accumulators in vectors of it (:mod:`codegen.accumulate`). 4 x 16 was
chosen from a hand experiment (not a benchmark of this repository; one run each,
machine loaded) on PolyBench's gemm at LARGE (1000 x 1100 x 1200 doubles, gcc -O3
-march=native, the micro-kernel written by hand in the scalar form): MR x NR =
4 x 16 and 8 x 16 took 0.10-0.11 s, 4 x 8 0.55 s (gcc does not vectorise it),
4 x 32 0.15 s, the cache-tiled nest without register tiles 0.28 s; in the vector
form on AVX-512 (matmul 1024^3, by hand), 8 x 16 in 512-bit vectors 0.058 s
against 4 x 16 in 256-bit ones 0.071 s. Where packing pays, the tiles' ``B``
panels are then copied into contiguous buffers (:mod:`schedules.host.pack`).
bench.host_c_corpus measures the result.
"""

from __future__ import annotations

import islpy as isl

from polyc.errors import IllegalTransformError, ScheduleError
from polyc.ir import tree
from polyc.ir.kernel import Kernel, access_map
from schedules import stree
from schedules.bands import merge_bands, permute, split_band
from schedules.common import positive_int, step
from schedules.fusion import distribute
from schedules.host.cache_model import Model, _member_row, access_kind
from schedules.host.pack import pack_panels
from schedules.host.parallel import band_at, is_coincident
from schedules.legality import finish
from schedules.tiling import tile

#: rows of the micro-tile (unrolled and jammed) with 256-bit vectors (AVX2); see
#: :func:`rows_of_tile` for other widths
MR = 4
#: SIMD registers the accumulators of a register tile take (half of AVX-512's 32,
#: all of AVX2's 16: gcc keeps the operands of the update in the others or
#: reloads them)
ACCUMULATORS = 16
#: bytes of a row of the micro-tile (the vector loop): four 256-bit vectors
ROW_BYTES = 128
#: the reduction loop's cache block is a multiple of this many values
KC_STEP = 16
MARK = "@accumulate"


def register_tiles(kernel: Kernel, model: Model) -> Kernel:
    """Register-tile every innermost band that is a contraction (see the module
    docstring); a band where a step is refused stays as it is."""
    return each_innermost_band(kernel, model, _register_tile)


def each_innermost_band(kernel: Kernel, model: Model, rewrite) -> Kernel:
    """``kernel`` after ``rewrite(kernel, name, model, done)`` of each innermost
    band (:func:`_innermost_bands`), one at a time, the first not yet seen
    after each rewrite; ``rewrite`` adds the bands it makes to ``done`` so
    they are not rewritten again."""
    done: set[str] = set()
    while True:
        todo = [n for n in _innermost_bands(kernel) if n not in done]
        if not todo:
            return kernel
        done.add(todo[0])
        kernel = rewrite(kernel, todo[0], model, done)


def separate_reductions(kernel: Kernel, model: Model) -> tuple[Kernel, set[str]]:
    """Give each reduction nested below a band a band of its own, merged with its
    reduction loop::

        for i: for j:                    for i: for j:
          T[i][j] = 0                      T[i][j] = 0
          for k:                  ->     for i: for j: for k:
            T[i][j] += A[i][k]*B[k][j]       T[i][j] += A[i][k]*B[k][j]

    (``distribute``, then ``merge_bands``, each checked), so that the whole
    contraction is one band that the scheduler can permute and tile, where the
    program order leaves ``k`` innermost and strides through ``B``. A merged band
    below other bands (doitgen's ``p, s`` inside ``r, q``), which the scheduler
    does not tile, gets its contiguous member innermost here (``permute``).
    A refused step keeps the nest as it is. Returns the kernel and the names of
    the merged outermost bands (not flagged permutable: whether they tile is for
    ``tile``'s check)."""
    done: set[str] = set()
    merged: set[str] = set()
    while True:
        root = stree.from_isl(kernel.schedule)
        todo = None
        for _path, node in stree.walk(root):
            nb = stree.named_at(node)
            if nb is None or nb.name in done or nb.attrs:
                continue
            if isinstance(nb.band.child, (stree.Sequence_, stree.Set_)) and any(
                _reduction_band(kernel, kid) for kid in nb.band.child.children
            ):
                todo = nb
                break
        if todo is None:
            return kernel, merged
        done.add(todo.name)
        kids = todo.band.child.children
        out = _try(lambda k=kernel, n=todo.name: distribute(k, n), None)
        if out is None:
            continue
        names = [f"{todo.name}_{k}" for k in range(len(kids))]
        done.update(names)
        for piece, kid in zip(names, kids):
            inner = _reduction_band(kernel, kid)
            if inner is None:
                continue
            joined = _try(lambda k=out, p=piece, i=inner: merge_bands(k, p, i), None)
            if joined is None:
                continue
            out = joined
            outer, nb = band_at(out, piece)
            if not outer:
                merged.add(piece)
                continue
            best = model.innermost(outer, nb.band)
            if best != nb.band.n_member - 1:
                order = [m for q, m in enumerate(nb.members) if q != best]
                order.append(nb.members[best])
                out = _try(lambda k=out, p=piece, o=order: permute(k, p, o), out)
        kernel = out


def _reduction_band(kernel: Kernel, node: stree.Node) -> str | None:
    """The name of the band at the top of ``node`` when each of its loops is an
    iterator of each of the band's statements, every statement accumulates into
    its target, and the target of one of them does not use one of those
    iterators (a reduction loop). Below depth 3 (matrix-vector products) the
    band may hold several statements: bicg's two products share their sweep over
    the matrix, and stay together in the merged band. A band of several members
    is a product already merged with its reduction loop one level down
    (correlation's ``j, k`` below ``i``, whose loop also runs ``corr[i][i] =
    1``), to be merged again with the band above; one that covers its
    statements' whole nest is not."""
    nb = stree.named_at(node)
    if nb is None or nb.attrs:
        return None
    if nb.band.n_member > 1 and nb.band.n_member >= _depth(kernel, nb.band):
        return None  # a whole nest: nothing left above it to merge with
    names = stree.statements(nb.band)
    if not names or (len(names) > 1 and kernel.statement(names[0]).depth != 2):
        return None
    reduces = False
    for name in names:
        stmt = kernel.statement(name)
        if stmt.depth < 2 or not accumulates(stmt):
            return None
        used = {a for aff in stmt.target.index for a in _atoms(aff)}
        for q in range(nb.band.n_member):
            row = _member_row(nb.band.member(q), stmt)
            if row is None or sorted(row) != [0.0] * (len(row) - 1) + [1.0]:
                return None
            reduces = reduces or stmt.iterators[row.index(1.0)] not in used
    return nb.name if reduces else None


def _depth(kernel: Kernel, band: stree.Band) -> int:
    """The smallest depth of the band's statements."""
    return min(kernel.statement(n).depth for n in stree.statements(band))


def accumulates(stmt) -> bool:
    """Whether ``stmt`` reads its target's element and no other element of it."""
    target = stmt.target
    same = [ld for ld in stmt.reads if ld.array == target.array]
    return bool(same) and all(ld.index == target.index for ld in same)


def has_matrix_tile(kernel: Kernel) -> bool:
    """Whether a band of ``kernel`` holds a matrix product's register tile
    (``@accumulate(NR, MR, ...)`` from :func:`accumulate`, not a row tile's
    ``@accumulate(rows; ...)``)."""
    root = stree.from_isl(kernel.schedule)
    for _, node in stree.walk(root):
        nb = stree.named_at(node)
        if nb is not None and any(
            a.startswith(f"{MARK}(") and ";" not in a for a in nb.attrs
        ):
            return True
    return False


def _contraction(stmt) -> bool:
    """Whether ``stmt`` accumulates into a matrix (or higher) along exactly one
    iterator its target does not use: ``C[i][j] += A[i][k] * B[k][j]`` and the
    products of 2mm and 3mm, not a matrix-vector product nor a convolution (three
    reduction loops). With more than one, the loops before the first one the
    target uses each run a product of their own (doitgen's ``r`` around the
    product into its expanded rows ``sum_x[q][p]``: :mod:`schedules.host.expand`),
    and exactly one must follow it."""
    target = stmt.target
    if len(target.index) < 2 or stmt.depth < 3 or not accumulates(stmt):
        return False
    used = {a for aff in target.index for a in _atoms(aff)}
    if len(set(stmt.iterators) - used) == 1:
        return True
    rows = [q for q, it in enumerate(stmt.iterators) if it in used]
    return bool(rows) and len(set(stmt.iterators[rows[0] :]) - used) == 1


def _atoms(aff) -> set[str]:
    out = set()
    for atom, _c in aff.terms:
        if isinstance(atom, str):
            out.add(atom)
        else:
            out |= {a for a, _ in atom.num.terms if isinstance(a, str)}
    return out


def _try(fn, fallback):
    """``fn()``, or ``fallback`` when a step is refused: by the exact check, or
    because a name it makes is taken or members share a name (``merge_bands``)."""
    try:
        return fn()
    except (IllegalTransformError, ScheduleError):
        return fallback


def _innermost_bands(kernel: Kernel) -> list[str]:
    """The named bands of ``kernel`` with no band below them (and no register
    tile of their own): where a register tile or a row walk may go."""
    root = stree.from_isl(kernel.schedule)
    out = []
    for _, node in stree.walk(root):
        nb = stree.named_at(node)
        if nb is None or any(a.startswith(MARK) for a in nb.attrs):
            continue
        below = [n for _, n in stree.walk(nb.band.child) if isinstance(n, stree.Band)]
        if not below:
            out.append(nb.name)
    return out


def _register_tile(kernel: Kernel, name: str, model: Model, done: set[str]) -> Kernel:
    outer, nb = band_at(kernel, name)
    stmts = stree.statements(nb.band)
    if len(stmts) > 1:
        # the scaling of gemm's C fused into the product's band: apart, the
        # product's band holds one statement
        if not isinstance(nb.band.child, (stree.Sequence_, stree.Set_)):
            return kernel
        if not any(_roles(model, outer, nb, s) for s in stmts):
            return kernel
        return _try(lambda: distribute(kernel, name), kernel)
    roles = _roles(model, outer, nb, stmts[0]) if stmts else None
    if roles is None:
        return kernel
    p, r, c, nr = roles
    members = nb.members
    mr = rows_of_tile(model.cache.vector)
    tiled = _try(
        lambda: tile(
            kernel, name, {members[p]: mr, members[c]: nr}, name=f"{name}_reg"
        ),
        None,
    )
    if tiled is None:
        return kernel
    others = [m for q, m in enumerate(members) if q not in (p, r, c)]
    order = others + [members[r], members[c], members[p]]
    out = _try(lambda: permute(tiled, name, order), None)
    if out is None:
        return kernel
    kband = f"{name}_{members[r]}" if others else name
    micro = f"{kband}_{members[c]}"
    if others:
        out = _try(lambda k=out: split_band(k, name, members[r]), None)
    if out is not None:
        out = _try(lambda k=out: split_band(k, kband, members[c], name=micro), None)
    if out is None:
        return kernel
    done.update((kband, micro, f"{name}_reg"))
    vector = model.cache.vector
    marked = _try(lambda: accumulate(out, kband, vector=vector), None)
    if marked is None:
        return kernel
    if others:  # loops between the tiles and the reduction: no panel to share
        return marked
    reg = f"{name}_reg"
    done.add(f"{reg}_rows")
    return pack_panels(
        marked, reg, model, _extent(marked, kband), _extent(marked, reg), ROW_BYTES
    )


def blocking(model: Model, outer, nb: stree.Named) -> dict[int, int] | None:
    """Cache blocks for a band that :func:`register_tiles` will make into
    micro-kernels (one contraction: :func:`_roles`), from the host's caches as
    GotoBLAS and BLIS size them: ``{member position: size}``, or None when the
    band is not such a product or the caches are too small for the rule.

    - ``KC`` (the reduction loop): the rows of a packed ``KC x NR`` panel of
      ``B`` (:mod:`schedules.host.pack`) that fill the L1, where every register
      tile of its column reuses it (a multiple of :data:`KC_STEP`);
    - ``MC`` (the rows): the ``MC x KC`` block of ``A`` that the column's tiles
      read in turn fills half the L2 (a multiple of the tile's rows);
    - ``NC`` (the contiguous columns): the ``KC x NC`` rows of ``B`` that a block
      of rows sweeps fill half the L3 (a multiple of ``NR``).

    A member whose extent is at most its block is not tiled; when the rows are
    not longer than ``MC``, None (the footprint model's tiles keep a tile loop of
    rows, which the parallel marks take). Measured by hand
    on matmul 1024^3 in doubles (this host: 48 KiB L1, 2 MiB L2; CPU time, best
    of 3 in turns at load 7): the footprint model's 128^3 tiles 0.057 s, KC = 384
    with MC = 128 0.052-0.056 s, KC = MC = 256 0.054 s, KC = 128 with MC = 256
    0.057 s (numpy's BLAS, one thread, with FMA: 0.033 s).
    """
    found = [
        (name, roles)
        for name in stree.statements(nb.band)
        if (roles := _roles(model, outer, nb, name)) is not None
    ]
    if len(found) != 1:  # (an initialisation of the target may share the band)
        return None
    name, (p, r, c, nr) = found[0]
    stmt = model.kernel.statement(name)
    item = model.kernel.arrays[stmt.target.array].dtype.itemsize
    mr = rows_of_tile(model.cache.vector)
    kc = model.cache.l1 // ROW_BYTES // KC_STEP * KC_STEP
    if kc < KC_STEP:
        return None
    mc = model.cache.l2 // 2 // (kc * item) // mr * mr
    nc = model.cache.l3 // 2 // (kc * item) // nr * nr
    if mc < mr or nc < nr:
        return None
    dom = stree.domain(nb.band)
    if model.extent(nb.band.member(p), dom) <= mc:
        return None  # no block of rows: no tile loop to run in parallel either
    sizes = {}
    for q, size in ((p, mc), (r, kc), (c, nc)):
        if model.extent(nb.band.member(q), dom) > size:
            sizes[q] = size
    return sizes


def _extent(kernel: Kernel, band: str) -> int | None:
    """The most values the first loop of band ``band`` takes for fixed enclosing
    loops, None when that is not a constant (:func:`_sizes`)."""
    try:
        return _sizes(kernel, band)[0]
    except ScheduleError:
        return None


def rows_of_tile(vector: int) -> int:
    """``MR``, the rows of a register tile, for SIMD registers of ``vector``
    bytes: :data:`ACCUMULATORS` registers hold the tile, each row of it
    :data:`ROW_BYTES` bytes (AVX-512: 8 rows of two registers; AVX2: 4 of four),
    between 2 and 8 rows."""
    return max(2, min(8, ACCUMULATORS // max(1, ROW_BYTES // vector)))


def _roles(model: Model, outer, nb: stree.Named, name: str):
    """``(p, r, c, NR)``: the row, reduction and contiguous members of a band whose
    one statement ``name`` accumulates into its target, or None."""
    band = nb.band
    if band.n_member < 3:  # (permutability: the checks of tile and permute)
        return None
    stmt = model.kernel.statement(name)
    target = stmt.target
    if not _contraction(stmt):
        return None
    kinds = []
    for q in range(band.n_member):
        d = model._direction(stmt, outer, band, q)
        kinds.append(
            None if d is None else access_kind(target.index, stmt.iterators, d)
        )
    last = band.n_member - 1
    if kinds[last] != "contiguous" or not is_coincident(band, last):
        return None
    reds = [q for q in range(last) if kinds[q] == "invariant"]
    rows = [q for q in range(last) if kinds[q] == "strided" and is_coincident(band, q)]
    if len(reds) != 1 or not rows:
        return None
    itemsize = model.kernel.arrays[target.array].dtype.itemsize
    nr = ROW_BYTES // itemsize
    dom = stree.domain(band)
    p, r = rows[-1], reds[-1]
    if (
        model.extent(band.member(p), dom) < rows_of_tile(model.cache.vector)
        or model.extent(band.member(last), dom) < nr
    ):
        return None
    return p, r, last, nr


def accumulate(kernel: Kernel, band: str, *, vector: int | None = None) -> Kernel:
    """Hold the accumulators of a reduction loop in registers: mark band ``band``
    (one member, the reduction loop, above one band of two members: the vector
    loop, then the rows) with ``@accumulate(NR, MR)``, ``NR`` and ``MR`` the tile
    sizes of the two loops below; with ``vector`` (bytes of a SIMD register),
    ``@accumulate(NR, MR, vector)``: the accumulators are that many bytes wide
    vectors where the body allows (:func:`codegen.accumulate.vector_plan`). ::

        accumulate(k, "S1")

        for k:                              for k:        # @accumulate(16, 4)
          for j in 16:                        for j in 16:
            for i in 4:            ->           for i in 4:
              C[i][j] += A[i][k]*B[k][j]          acc[i][j] += A[i][k]*B[k][j]
                                            (acc copied from C before k, back after)

    Raises:
        ScheduleError: unknown band, or not one member above a band of two.
        IllegalTransformError: when the elements of the target are not a bijection
            of the two loops below for fixed enclosing loops, or move with the
            marked loop, or the statement reads its target array elsewhere, or
            more than one statement runs below the band.
        ArgumentError: ``vector`` is not a positive integer.
    """
    op = "accumulate"
    root = stree.from_isl(kernel.schedule)
    path, nb = stree.find(root, band, op)
    inner = stree.named_at(nb.band.child)
    if len(nb.members) == 1 and inner is not None and len(inner.members) == 1:
        attr = f"{MARK}({_rows_attr(kernel, band, inner.name)})"
    elif len(nb.members) != 1 or inner is None or len(inner.members) != 2:
        raise ScheduleError(
            f"{op}: band {band!r} is not a reduction loop above a band of two "
            "members because it has members ({', '.join(nb.members)}) and "
            "below it "
            + (f"({', '.join(inner.members)})" if inner else "no band")
            + ". Split the bands first (split_band)."
        )
    else:
        why = _refused(kernel, band, inner.name)
        if why:
            raise IllegalTransformError(
                f"{op}: band {band!r} cannot hold its accumulators in registers "
                f"because {why}. Keep the loop as it is."
            )
        sizes = _sizes(kernel, inner.name)
        if vector is not None:
            positive_int(op, "vector", vector)
            sizes = (*sizes, vector)
        attr = f"{MARK}({', '.join(str(n) for n in sizes)})"
    attrs = tuple(a for a in nb.attrs if not a.startswith(MARK)) + (attr,)
    new_nb = stree.Named(nb.name, nb.members, attrs, nb.band)
    new = stree.replace_at(root, path, lambda _n: new_nb.node())
    return finish(
        kernel,
        new,
        path,
        step(op, band, vector=vector),
        f'band "{band}" cannot be marked',
        "Keep the loop as it is.",
    )


def _sizes(kernel: Kernel, inner: str) -> tuple[int, ...]:
    """The number of values each loop of band ``inner`` takes at most for fixed
    enclosing loops (its tile sizes).

    Raises:
        ScheduleError: when a loop has no such bound (it is not a tile loop).
    """
    node = tree.find_band(kernel.schedule, inner)
    prefix = node.get_prefix_schedule_union_map()
    part = node.band_get_partial_schedule()
    out = []
    for d in range(part.dim(isl.dim_type.set)):
        member = isl.UnionMap.from_union_pw_aff(part.get_at(d))
        rel = prefix.reverse().apply_range(member).intersect_params(kernel.context)
        pairs = rel.reverse().apply_range(rel)  # values sharing enclosing loops
        sets: list[isl.Set] = []
        pairs.deltas().foreach_set(sets.append)
        widths = [s.dim_max_val(0) for s in sets if not s.is_empty()]
        if not widths or not all(w.is_int() for w in widths):
            raise ScheduleError(
                f"accumulate: loop {d} of band {inner!r} has no constant extent for "
                "fixed enclosing loops because it is not a tile loop. Tile it first."
            )
        out.append(max(int(w.to_python()) for w in widths) + 1)
    return tuple(out)


def _refused(kernel: Kernel, band: str, inner: str) -> str | None:
    """Why the accumulators of band ``band`` cannot stay in registers, or None."""
    knode = tree.find_band(kernel.schedule, band)
    stmts = tree.tuple_names(knode.get_domain())
    if len(stmts) != 1:
        return f"{len(stmts)} statements run below it ({', '.join(sorted(stmts))})"
    stmt = kernel.statement(next(iter(stmts)))
    target = stmt.target
    for ld in stmt.reads:
        if ld.array == target.array and ld.index != target.index:
            return f"{stmt.name} reads {target.array} at another element than it writes"
    prefix = knode.get_prefix_schedule_union_map()
    inode = tree.find_band(kernel.schedule, inner)
    micro = inode.band_get_partial_schedule_union_map()
    acc = isl.UnionMap.from_map(access_map(stmt, target, kernel.params))
    where = prefix.range_product(micro)
    what = prefix.range_product(acc)
    rel = where.reverse().apply_range(what).intersect_params(kernel.context)
    if not rel.is_single_valued():
        return (
            f"the element of {target.array} that {stmt.name} writes moves with the "
            f"loop of band {band!r}"
        )
    if not rel.is_injective():
        return (
            f"two iterations of the loops below it write one element of {target.array}"
        )
    return None


def _rows_attr(kernel: Kernel, band: str, inner: str) -> str:
    """``"MR; S1, S2"`` for the mark of a reduction loop ``band`` above one row
    loop ``inner`` (a matrix-vector product's rows): the row loop's size and the
    statements whose targets stay in registers (:func:`_promoted`).

    Raises:
        ScheduleError: when the row loop has no constant extent.
        IllegalTransformError: when no statement can hold its target in registers,
            or another statement below reads or writes a promoted target's array.
    """
    promoted, why = _promoted(kernel, band, inner)
    if why:
        raise IllegalTransformError(
            f"accumulate: band {band!r} cannot hold its accumulators in registers "
            f"because {why}. Keep the loop as it is."
        )
    (mr,) = _sizes(kernel, inner)
    return f"{mr}; {', '.join(promoted)}"


def _promoted(kernel: Kernel, band: str, inner: str) -> tuple[list[str], str | None]:
    """The statements below band ``band`` whose target elements, for fixed enclosing
    loops, are a bijection of the loop of band ``inner`` and do not move with the
    loop of ``band`` (each the only statement that touches its array below the
    mark), and why the mark is refused (None when it is not)."""
    knode = tree.find_band(kernel.schedule, band)
    names = sorted(tree.tuple_names(knode.get_domain()))
    prefix = knode.get_prefix_schedule_union_map()
    micro = tree.find_band(kernel.schedule, inner).band_get_partial_schedule_union_map()
    where = prefix.range_product(micro)
    promoted: list[str] = []
    for name in names:
        stmt = kernel.statement(name)
        target = stmt.target
        if any(
            ld.array == target.array and ld.index != target.index for ld in stmt.reads
        ):
            continue
        acc = isl.UnionMap.from_map(access_map(stmt, target, kernel.params))
        what = prefix.range_product(acc)
        rel = where.reverse().apply_range(what).intersect_params(kernel.context)
        if rel.is_single_valued() and rel.is_injective():
            promoted.append(name)
    if not promoted:
        return [], (
            f"no statement below it ({', '.join(names)}) writes one element per "
            f"iteration of band {inner!r} that stays put along the loop of {band!r}"
        )
    arrays = {kernel.statement(n).target.array: n for n in promoted}
    if len(arrays) < len(promoted):
        return [], "two statements below it accumulate into one array"
    for name in names:
        stmt = kernel.statement(name)
        for ld in (stmt.target, *stmt.reads):
            owner = arrays.get(ld.array)
            if owner is not None and owner != name:
                return [], (
                    f"{name} accesses {ld.array}, which {owner} holds in registers"
                )
    return promoted, None
