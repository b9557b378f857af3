"""The layer models' estimates kept for later hardware points, within a byte budget.

:meth:`schedules.accel.model.LayerModel.evaluate` returns a layer's predicted
cycles, bytes and footprints at every candidate tile size of a structure (an
:class:`~schedules.accel.estimate.Estimate`: some twenty numpy arrays over the
grid), a function of the hardware's
:func:`~accelerator.hardware.spec.evaluation_view`; the points of a study that
differ only in SRAM capacity share it (:mod:`schedules.accel.models`). Each is
kept in its model's memo, and all of them together here, by view, within
:data:`BUDGET` bytes (:func:`kept` says which go first); a later point that
asks for one not kept evaluates again, to the same values. A full-size model
makes this matter: one compile of ResNet-50 at 224x224 evaluates 7.6 million
candidates, 0.86 GB of estimates per evaluation view, and a process that kept
them all grew by that much at every new DRAM bandwidth of a study (the example
study's ResNet-18 and encoder make 13 MB).

An estimate's key holds its grid by a digest of the grid's values (BLAKE2b,
256 bits), not the values themselves, which took a quarter as much memory
again.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from collections.abc import Callable

import numpy as np

#: bytes of estimates kept per process (a ResNet-50 compile at 224x224 makes
#: about 1.1 GB per evaluation view; the example study's two models 13 MB)
BUDGET = 1 << 30
#: ``kept``, ``reused``, ``unkept`` (the budget was full of the same view's)
#: and ``dropped`` (with their view) estimates in this process
STATS: Counter = Counter()
#: view -> {(id of a model's memo, key): (the memo, the estimate's bytes)}, the
#: views least recently used first
_KEPT: OrderedDict = OrderedDict()
_USED = [0]


def grid_digest(args: list[np.ndarray]) -> bytes:
    """A digest of a grid (one float array per tile symbol, equal lengths)."""
    h = hashlib.blake2b(digest_size=32)
    for a in args:
        h.update(np.ascontiguousarray(a, dtype=float).tobytes())
        h.update(b"|")
    return h.digest()


def kept(memo: dict, key: tuple, view: int, build: Callable[[], object]):
    """``memo[key]``, an estimate for the evaluation view numbered ``view``,
    built with ``build()`` when new (its arrays made read-only: every caller
    gets the same object) and kept within :data:`BUDGET`: to make room, the
    estimates of the other views go, least recently used view first and all of
    a view at once; when this view's own fill the budget the new one is not
    kept. (Dropping the oldest estimates instead kept nothing a study's next
    point could use: a compile asks for its estimates in the order the last one
    made them, so each new one pushed out the next one asked for.)"""
    entry = (id(memo), key)
    if key in memo:
        STATS["reused"] += 1
        if view in _KEPT:
            _KEPT.move_to_end(view)
        return memo[key]
    est = build()
    size = _read_only(est)
    mine = _KEPT.setdefault(view, {})
    _KEPT.move_to_end(view)
    while _USED[0] + size > BUDGET and len(_KEPT) > 1:
        for (_, k), (owner, nbytes) in _KEPT.pop(next(iter(_KEPT))).items():
            owner.pop(k, None)
            _USED[0] -= nbytes
            STATS["dropped"] += 1
    if _USED[0] + size > BUDGET:
        STATS["unkept"] += 1
        return est
    memo[key] = est
    mine[entry] = (memo, size)
    _USED[0] += size
    STATS["kept"] += 1
    return est


def used() -> int:
    """Bytes of estimates kept now."""
    return _USED[0]


def clear() -> None:
    """Forget every estimate kept (tests)."""
    for entries in _KEPT.values():
        for (_, k), (owner, _) in entries.items():
            owner.pop(k, None)
    _KEPT.clear()
    _USED[0] = 0


def _read_only(est) -> int:
    """Make ``est``'s arrays read-only (the memo gives it to every caller: one
    that changed it in place would change the others') and return their
    bytes."""
    size = 0
    seen: set[int] = set()
    for value in vars(est).values():
        for a in value.values() if isinstance(value, dict) else (value,):
            if isinstance(a, np.ndarray):
                a.flags.writeable = False
                if id(a) not in seen:
                    seen.add(id(a))
                    size += a.nbytes
    return size
