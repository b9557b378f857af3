"""The host cache cost model the automatic scheduler uses to size tiles and order
the loops inside a tile.

Model (stated, not measured):

- *Footprint of a tile.* Inside one tile the loops of enclosing bands are fixed, each
  tiled member ``m`` spans ``T_m`` consecutive values, untiled members of the band
  and loops below it span their whole extent. Each statement iterator then spans
  ``sum |c| * span(member)`` over the band rows that determine it (solved exactly
  with least squares on the member coefficients; skewed bands included), or its whole
  extent when the band does not determine it. An access ``A[f(x)]`` touches a box of
  ``sum |a_d| * span(x) + 1`` elements along each dimension ``d`` (clipped to the
  array); accesses that differ only by constants (a stencil) share one box widened by
  the spread of their constants; distinct boxes add up. Bytes = elements x itemsize.
- *Capacity.* A tile's footprint must fit in half of the per-core L2 cache (read
  from ``/sys/devices/system/cpu/cpu0/cache``, 512 KiB when unknown), leaving the
  other half to the rest of the working set and to conflict misses.
- *Whether to tile.* Only when one iteration of the band's outer loop touches more
  than the tile budget: otherwise what the next iteration reuses is still in cache
  (a row-wise softmax, a small matrix).
- *Sizes.* The same power of two ``s`` (8 to 256) for every member whose extent is
  at least ``2 s``; the largest ``s`` that fits wins. The innermost point loop (the
  one the C compiler vectorises) is left whole when its extent is at most
  ``WHOLE_INNER`` (256) and a tile still fits: cutting a short contiguous row
  into tiles gives short vector loops with a partial remainder tile (measured on
  conv2d 3x3 64->64 56x56: ``w`` whole runs about 2x faster than ``w`` tiled by
  16), while one such row is only a few cache lines.
- *Time tiling.* A band none of whose members is dependence-free (a skewed stencil)
  is tiled only when one iteration of its outer loop touches more than half of the
  last-level cache, or when no schedule with parallel loops exists: otherwise the
  data already stays in cache between iterations, and a schedule that keeps the
  space loops parallel and vectorisable (isl's outer-coincidence option) is faster.
- *Innermost point loop.* The member whose unit step makes the most accesses
  contiguous (last index moves by one, others fixed: +2) or invariant (+1) and the
  fewest strided (-4: a new cache line per iteration costs more than a lost SIMD
  lane), preferring members that carry no dependence (+3, so that the C compiler
  can vectorise it).
- *Parallel loops.* A loop is marked parallel only where one entry of it (one
  fork/join) runs at least ``MIN_PARALLEL_WORK`` = 2**24 statement instances
  (about 17 ms at ~1 ns per instance). A fork/join costs microseconds on idle
  cores, but on a loaded machine the join waits for a descheduled thread: the
  Jacobi-2D run with its space loops parallel inside the 100-step time loop paid
  (1665 - 185) ms / 200 forks = 7.4 ms per fork. At 2**24 instances the second
  core saves about as much as one such wait costs, so a fork wins on idle cores
  and breaks even under that load; loops below that (one time step of a stencil,
  a cache-resident softmax) stay sequential, and the outermost parallel loop,
  entered once, is the one marked.

Problem sizes that are symbolic take the values in ``params`` (default 1024 each).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import islpy as isl
import numpy as np

from polyc.ir.kernel import Kernel
from schedules import stree

SIZES = (256, 128, 64, 32, 16, 8)
#: statement instances one entry of a parallel loop (one OpenMP fork/join) must run
#: (2**24, about 17 ms at ~1 ns per instance; see the module docstring)
MIN_PARALLEL_WORK = 1 << 24
#: the innermost point loop is kept whole up to this extent (see the docstring)
WHOLE_INNER = 256
DEFAULT_PARAM = 1024


@dataclass(frozen=True)
class Cache:
    """Per-core data cache capacities in bytes, and the bytes of one SIMD register
    the C compiler targets (16 for SSE, 32 for AVX2, 64 for AVX-512): the width of
    the register tiles' vectors (:mod:`schedules.host.register`)."""

    l1: int = 32 * 1024
    l2: int = 512 * 1024
    l3: int = 8 * 1024 * 1024
    vector: int = 32

    @property
    def tile_budget(self) -> int:
        return self.l2 // 2


@lru_cache(maxsize=1)
def host_cache() -> Cache:
    """The host's L1d, L2 and L3 sizes from sysfs and its widest SIMD register
    from ``/proc/cpuinfo`` (defaults when unreadable)."""
    found: dict[int, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for d in sorted(base.glob("index*")):
        try:
            level = int((d / "level").read_text())
            kind = (d / "type").read_text().strip()
            size = _bytes((d / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and level in (1, 2, 3):
            found[level] = size
    return Cache(
        found.get(1, Cache.l1),
        found.get(2, Cache.l2),
        found.get(3, Cache.l3),
        host_vector_bytes(),
    )


def host_vector_bytes(cpuinfo: str | None = None) -> int:
    """Bytes of the host's widest SIMD register from the flags of ``cpuinfo``
    (default: ``/proc/cpuinfo``): 64 with AVX-512F, 32 with AVX, else 16 on
    x86, and :attr:`Cache.vector` where the flags are unreadable."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return Cache.vector
    m = re.search(r"^flags\s*:(.*)$", cpuinfo, re.M)
    if m is None:
        return Cache.vector
    flags = set(m.group(1).split())
    if "avx512f" in flags:
        return 64
    return 32 if "avx" in flags else 16


def parse_cache(text: str, base: Cache | None = None, what: str = "cache") -> Cache:
    """A :class:`Cache` from ``"l1=48K,l2=2M,l3=32M,vector=64"`` (any of them;
    the others from ``base``, default this host's, :func:`host_cache`);
    ``what`` names the argument in the error.

    Raises:
        ArgumentError: a part that is not ``l1``, ``l2`` or ``l3`` ``=`` a
            positive size in bytes with an optional K, M or G.
    """
    from polyc.errors import ArgumentError

    sizes = dict(vars(base or host_cache()))
    for part in text.split(","):
        key, _, value = part.strip().partition("=")
        key, value = key.strip().lower(), value.strip().upper()
        ok = key in ("l1", "l2", "l3", "vector") and re.fullmatch(
            r"[1-9][0-9]*[KMG]?", value
        )
        if not ok:
            raise ArgumentError(
                f"{what} {part.strip()!r} is not a cache size because a size reads "
                "LEVEL=BYTES with LEVEL l1, l2 or l3 (or vector, the bytes of a "
                "SIMD register) and BYTES a positive number with an optional K, M "
                "or G. Write e.g. l2=2M,l3=32M."
            )
        sizes[key] = _bytes(value)
    return Cache(**sizes)


def _bytes(text: str) -> int:
    units = {"K": 1024, "M": 1024 * 1024, "G": 1024**3}
    if text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


class Model:
    """The cost model for one kernel at concrete problem sizes."""

    def __init__(
        self,
        kernel: Kernel,
        params: Mapping[str, int] | None,
        cache: Cache | None,
        min_parallel_work: int = MIN_PARALLEL_WORK,
    ):
        self.kernel = kernel
        self.min_parallel_work = min_parallel_work
        self.cache = cache or host_cache()
        values = {p: DEFAULT_PARAM for p in kernel.params}
        values.update(params or {})
        self.values = values
        head = f"[{', '.join(kernel.params)}] -> " if kernel.params else ""
        fix = " and ".join(f"{p} = {values[p]}" for p in kernel.params) or "1 = 1"
        self.fixed = isl.Set(f"{head}{{ : {fix} }}")

    def pays_to_fork(self, work_per_fork: float) -> bool:
        """Whether a parallel loop whose one entry runs ``work_per_fork`` statement
        instances is worth a fork/join (``>= min_parallel_work``)."""
        return work_per_fork >= self.min_parallel_work

    # extents -------------------------------------------------------------------
    def extent(self, upa: isl.UnionPwAff, dom: isl.UnionSet) -> int:
        """Number of values a schedule member takes over ``dom``."""
        upa = upa.intersect_domain(dom).intersect_params(self.fixed)
        if upa.domain().is_empty():
            return 0
        hi, lo = upa.max_val(), upa.min_val()
        if not (hi.is_int() and lo.is_int()):
            return DEFAULT_PARAM
        return int(hi.to_python()) - int(lo.to_python()) + 1

    def iterator_extents(self, stmt) -> list[int]:
        dom = stmt.domain.intersect_params(self.fixed)
        out = []
        for d in range(stmt.depth):
            if dom.is_empty():
                out.append(1)
                continue
            hi = dom.dim_max_val(d) if hasattr(dom, "dim_max_val") else None
            lo = dom.dim_min_val(d) if hasattr(dom, "dim_min_val") else None
            if hi is None or lo is None or not (hi.is_int() and lo.is_int()):
                out.append(DEFAULT_PARAM)
            else:
                out.append(int(hi.to_python()) - int(lo.to_python()) + 1)
        return out

    # footprint -----------------------------------------------------------------
    def footprint(
        self,
        outer: list[stree.Band],
        band: stree.Band,
        spans: Mapping[int, int],
    ) -> int:
        """Bytes touched by one tile: ``spans`` maps member positions to the number
        of values they take in a tile (members left out run their whole extent)."""
        dom = stree.domain(band)
        member_span = [
            spans.get(p, self.extent(band.member(p), dom)) for p in range(band.n_member)
        ]
        boxes: dict[tuple, list] = {}
        for name in stree.statements(band):
            stmt = self.kernel.statement(name)
            rows, row_spans = self._rows(stmt, outer, band, member_span)
            it_span = self._iterator_spans(stmt, rows, row_spans)
            for ld in (stmt.target, *stmt.reads):
                coefs, const = _index_matrix(ld.index, stmt.iterators)
                key = (ld.array, coefs.tobytes(), coefs.shape)
                ext = np.abs(coefs) @ it_span if coefs.size else np.zeros(0)
                boxes.setdefault(key, []).append((ext, const))
        total = 0
        for (array, _, _), items in boxes.items():
            arr = self.kernel.arrays[array]
            shape = arr.concrete_shape(self.values)
            consts = np.array([c for _, c in items])
            spread = consts.max(axis=0) - consts.min(axis=0) if consts.size else 0
            ext = items[0][0] + spread + 1
            elems = float(np.prod(np.minimum(ext, shape))) if len(shape) else 1.0
            total += int(elems) * arr.dtype.itemsize
        return total

    def _rows(self, stmt, outer, band, member_span):
        rows, spans = [], []
        for b in outer:
            for p in range(b.n_member):
                r = _member_row(b.member(p), stmt)
                if r is not None:
                    rows.append(r)
                    spans.append(0.0)
        for p in range(band.n_member):
            r = _member_row(band.member(p), stmt)
            if r is not None:
                rows.append(r)
                spans.append(max(member_span[p] - 1, 0))
        return rows, spans

    def _iterator_spans(self, stmt, rows, row_spans) -> np.ndarray:
        full = np.array([e - 1 for e in self.iterator_extents(stmt)], dtype=float)
        if not rows or stmt.depth == 0:
            return full
        R = np.array(rows, dtype=float)
        out = full.copy()
        for i in range(stmt.depth):
            e = np.zeros(stmt.depth)
            e[i] = 1.0
            c, *_ = np.linalg.lstsq(R.T, e, rcond=None)
            if np.allclose(R.T @ c, e, atol=1e-9):
                out[i] = min(full[i], float(np.abs(c) @ np.array(row_spans)))
        return out

    # choices ---------------------------------------------------------------------
    def tile_sizes(
        self, outer: list[stree.Band], band: stree.Band, inner: int | None = None
    ) -> dict[int, int] | None:
        """``{member position: size}`` by the model, or None when tiling does not pay
        (fewer than two members long enough). ``inner``, the member that will run
        innermost, is kept whole when it is short (see the module docstring)."""
        dom = stree.domain(band)
        extents = [self.extent(band.member(p), dom) for p in range(band.n_member)]
        if inner is not None and extents[inner] <= WHOLE_INNER:
            found = self._fitting(outer, band, extents, inner)
            if found is not None:
                return found
        return self._fitting(outer, band, extents, None)

    def _fitting(self, outer, band, extents, whole: int | None) -> dict | None:
        budget = self.cache.tile_budget
        n_tileable = band.n_member - (whole is not None)
        for s in SIZES:
            tiled = {p: s for p, e in enumerate(extents) if e >= 2 * s and p != whole}
            if not tiled or len(tiled) < min(2, n_tileable):
                continue
            if self.footprint(outer, band, tiled) <= budget:
                return tiled
        return None

    def iteration_fits(self, outer: list[stree.Band], band: stree.Band) -> bool:
        """Whether one iteration of the band's outer loop touches at most the tile
        budget (then its data is reused from cache without tiling)."""
        return self.footprint(outer, band, {0: 1}) <= self.cache.tile_budget

    def streams_past_llc(self, outer: list[stree.Band], band: stree.Band) -> bool:
        """Whether one iteration of the band's outer loop touches more than half of
        the last-level cache."""
        return self.footprint(outer, band, {0: 1}) > self.cache.l3 // 2

    def innermost(self, outer: list[stree.Band], band: stree.Band) -> int:
        """The member position to run innermost inside a tile."""
        best, best_score = band.n_member - 1, None
        for p in range(band.n_member):
            score = 3 if (p < len(band.coincident) and band.coincident[p]) else 0
            for name in stree.statements(band):
                stmt = self.kernel.statement(name)
                step = self._direction(stmt, outer, band, p)
                if step is None:
                    continue
                for ld in (stmt.target, *stmt.reads):
                    score += _access_score(ld.index, stmt.iterators, step)
            if best_score is None or score > best_score:
                best, best_score = p, score
        return best

    def _direction(self, stmt, outer, band, p) -> np.ndarray | None:
        """Change of the statement's iterators when member ``p`` steps by one."""
        rows, target = [], None
        for b in outer:
            for q in range(b.n_member):
                r = _member_row(b.member(q), stmt)
                if r is not None:
                    rows.append(r)
        for q in range(band.n_member):
            r = _member_row(band.member(q), stmt)
            if r is not None:
                if q == p:
                    target = len(rows)
                rows.append(r)
        if target is None or not rows:
            return None
        R = np.array(rows, dtype=float)
        rhs = np.zeros(len(rows))
        rhs[target] = 1.0
        x, *_ = np.linalg.lstsq(R, rhs, rcond=None)
        if not np.allclose(R @ x, rhs, atol=1e-9):
            return None
        return x


def _member_row(upa: isl.UnionPwAff, stmt) -> list[float] | None:
    """Iterator coefficients of a schedule member for one statement (first piece)."""
    pieces: list[isl.PwAff] = []
    upa.foreach_pw_aff(pieces.append)
    for pa in pieces:
        if pa.get_domain_space().get_tuple_name(isl.dim_type.set) != stmt.name:
            continue
        affs = [aff for _, aff in pa.get_pieces()]
        if not affs:
            return None
        aff = affs[0]
        den = float(aff.get_denominator_val().to_python())
        return [
            float(aff.get_coefficient_val(isl.dim_type.in_, d).to_python()) / den
            for d in range(aff.dim(isl.dim_type.in_))
        ]
    return None


def _index_matrix(index, iterators) -> tuple[np.ndarray, np.ndarray]:
    """Coefficient matrix (dims x iterators) and constants of an access."""
    pos = {n: i for i, n in enumerate(iterators)}
    coefs = np.zeros((len(index), len(iterators)))
    consts = np.zeros(len(index))
    for d, aff in enumerate(index):
        consts[d] = aff.const
        for atom, c in aff.terms:
            if isinstance(atom, str):
                if atom in pos:
                    coefs[d, pos[atom]] += c
            else:  # floor(num / den): its iterators move 1/den as fast
                for inner, ic in atom.num.terms:
                    if isinstance(inner, str) and inner in pos:
                        coefs[d, pos[inner]] += c * ic / atom.den
    return coefs, consts


def _access_score(index, iterators, step: np.ndarray) -> int:
    coefs, _ = _index_matrix(index, iterators)
    if coefs.size == 0:
        return 1
    delta = coefs @ step
    if np.allclose(delta, 0):
        return 1
    if np.allclose(delta[:-1], 0) and np.isclose(abs(delta[-1]), 1):
        return 2
    return -4


def access_kind(index, iterators, step: np.ndarray) -> str:
    """How an access moves when the statement's iterators change by ``step`` (one
    step of its innermost loop): ``"invariant"``, ``"contiguous"`` (the last index
    moves by one, the others stay) or ``"strided"``."""
    score = _access_score(index, iterators, step)
    return {1: "invariant", 2: "contiguous"}.get(score, "strided")
