"""Linearised indexing: ``A[i * n + j]`` on a one-dimensional array, read as ``A[i][j]``.

Code that allocates a matrix as one block indexes it by hand (Pluto#19). With ``n`` a
parameter, ``i * n + j`` is not affine, but it is the address of element ``(i, j)`` of
an ``[?][n]`` array whenever ``0 <= j < n``. When every access of a one-dimensional
array splits that way with the same strides (``i * n * m + j * m + k`` gives
``[?][n][m]``), the array is modelled with those dimensions; each access then checks,
on its statement's domain, that its inner subscripts stay inside their stride (else
two different index tuples could name one element and the dependences would be wrong).
"""

from __future__ import annotations

from pycparser import c_ast

from polyc.frontends.c.types import int_literal
from polyc.ir.affine import Aff

Poly = dict  # monomial (sorted tuple of names) -> integer coefficient


def polynomial(node, names: set[str], known: dict[str, int]) -> Poly | None:
    """``node`` as a polynomial over ``names`` (macros in ``known`` are numbers), or
    None when it is not one (a division, a call, a data read...)."""
    if isinstance(node, c_ast.Constant) and "int" in node.type:
        return {(): int_literal(node.value)[0]}
    if isinstance(node, c_ast.ID):
        if node.name in names:
            return {(node.name,): 1}
        if node.name in known:
            return {(): known[node.name]}
        return None
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
        p = polynomial(node.expr, names, known)
        if p is None or node.op == "+":
            return p
        return {m: -c for m, c in p.items()}
    if isinstance(node, c_ast.Cast):
        return polynomial(node.expr, names, known)
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*"):
        a = polynomial(node.left, names, known)
        b = polynomial(node.right, names, known)
        if a is None or b is None:
            return None
        if node.op == "*":
            out: Poly = {}
            for ma, ca in a.items():
                for mb, cb in b.items():
                    m = tuple(sorted(ma + mb))
                    out[m] = out.get(m, 0) + ca * cb
            return {m: c for m, c in out.items() if c}
        sign = 1 if node.op == "+" else -1
        out = dict(a)
        for m, c in b.items():
            out[m] = out.get(m, 0) + sign * c
        return {m: c for m, c in out.items() if c}
    return None


def split(poly: Poly, params: list[str]) -> tuple[list[Aff], list[str]] | None:
    """Affine components and strides with ``poly = (..(e0 * s1 + e1) * s2 ..) + ek``,
    or None. Tries strides in parameter order, innermost last."""
    if _affine(poly):
        return [_to_aff(poly)], []
    for s in params:
        inner = {m: c for m, c in poly.items() if s not in m}
        outer = {_drop(m, s): c for m, c in poly.items() if s in m}
        if not outer or not _affine(inner) or any(s in m for m in outer):
            continue
        rest = split(outer, params)
        if rest is not None:
            comps, strides = rest
            return comps + [_to_aff(inner)], strides + [s]
    return None


def strides_of(polys: list[Poly], params: list[str]) -> list[str] | None:
    """The strides every access splits by, when one non-empty list fits them all."""
    candidates = []
    for p in polys:
        parts = split(p, params)
        if parts is None:
            return None
        candidates.append(parts[1])
    longest = max(candidates, key=len, default=[])
    if not longest:
        return None
    for c in candidates:
        if c != longest[len(longest) - len(c) :]:
            return None
    return longest


def components(poly: Poly, strides: list[str], params: list[str]) -> list[Aff] | None:
    """The index tuple of an access for an array linearised by ``strides``."""
    comps, own = split(poly, params)
    if own != strides[len(strides) - len(own) :]:
        return None
    return [Aff(const=0)] * (len(strides) + 1 - len(comps)) + comps


def _drop(monomial: tuple, name: str) -> tuple:
    out = list(monomial)
    out.remove(name)
    return tuple(out)


def _affine(poly: Poly) -> bool:
    return all(len(m) <= 1 for m in poly)


def _to_aff(poly: Poly) -> Aff:
    terms = {m[0]: c for m, c in poly.items() if len(m) == 1}
    return Aff(terms, poly.get((), 0))
