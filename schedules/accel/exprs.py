"""The sympy expressions of the accelerator cost model
(:mod:`schedules.accel.model`), built once: the models of a layer's structures
ask for the same few thousand (trips, spans of accesses, MAC timings), and
sympy takes longer to build and simplify them than the grid takes to evaluate
them. Each helper is a function of its arguments alone, so one built for one
structure (or layer) serves every other.
"""

from __future__ import annotations

import functools

import sympy as sp

from accelerator.hardware import dataflow


def max_of(a, b):
    """``sympy.Max`` left as written: its simplification (a search for the
    arguments' order) costs more than the whole grid's evaluation, and
    :func:`numeric` takes the maximum at every candidate anyway."""
    return sp.Max(a, b, evaluate=False)


def unevaluated(fn, *args):
    """``fn(*args)`` (``sp.ceiling``, ``sp.Max``, ``sp.Min``) left as written unless
    every argument is a number: sympy's simplification of a symbolic one asks its
    assumptions about the arguments' signs and order, which took a third of
    building a model, and :func:`numeric` gives the same values either way."""
    args = [sp.sympify(a) for a in args]
    if all(a.is_Number for a in args):
        return fn(*args)
    return fn(*args, evaluate=False)


@functools.lru_cache(maxsize=65536)
def trips(extent: int, size: sp.Expr) -> sp.Expr:
    """``ceiling(extent / size)``: the models of one layer's structures ask for the
    same few thousand times, and sympy's ceiling is slow to build."""
    return unevaluated(sp.ceiling, sp.Integer(extent) / size)


@functools.lru_cache(maxsize=4096)
def timing(array, m, n, k, rate):
    """:func:`accelerator.hardware.dataflow.mac_timing` of a call ``m x n x k`` (sympy expressions) at ``rate``:
    the structures of one layer that map a statement alike (its loops in
    another order, its neighbours on other engines) ask for the same."""
    return dataflow.mac_timing(array, m, n, k, rate, sp.ceiling, max_of)


@functools.lru_cache(maxsize=65536)
def largest(extents: tuple) -> sp.Expr:
    """``sympy.Max`` of ``extents``: a buffer's extent over its accesses, the same
    for many structures of a layer (and slow to simplify)."""
    return sp.Max(*extents)


@functools.lru_cache(maxsize=65536)
def span(terms: tuple) -> sp.Expr:
    """``1 + sum(coef * (size - 1))`` over ``terms`` (pairs, in order): the extent
    of an access along one dimension, the same few for every structure of a
    layer."""
    e = sp.Integer(1)
    for coef, size in terms:
        e += coef * (size - 1)
    return e


@functools.lru_cache(maxsize=4096)
def mac_bytes(array, m, n, k, esz: int, asz: int) -> tuple:
    """:func:`accelerator.hardware.dataflow.mac_bytes` of a call ``m x n x k``
    (sympy expressions), the same for the structures that map it alike."""
    return dataflow.mac_bytes(array, m, n, k, esz, asz, sp.ceiling)
