"""Which structures the accelerator search must model and check, and which cannot
change what it returns.

:func:`schedules.accel.search.search` keeps the ``keep`` best candidates of all
its structures, sorted first by their cycles rounded to tie classes of ``TIE``
of the best cycles, and (in its first pass) re-searches the two best structures
in every order of their tile loops. A structure all of whose candidates take at
least ``lowest`` cycles cannot change either once ``keep`` candidates found
take at most ``C`` cycles with ``lowest > C + TIE x best`` (the best so far:
the final best is no larger, so each of its candidates rounds to a later tie
class than those ``keep``, whatever comes later: ``round(b) - round(a) >= b -
a - 1 > 0``), and two structures (by their key, the order of their tile loops
aside) have a candidate below ``lowest``.

:func:`searched` takes the structures by a lower bound of their cycles (the busier
of the MAC array and the vector unit: every prediction is at least that,
:func:`schedules.accel.terms.overlap`), skips those that cannot change the
result, models the others (``lowest``: their fewest cycles that fit), and
checks the MAC mappings of those that still can, by ``lowest`` (each before
any structure whose bound is larger). The candidates come back in the
structures' order, as if every structure had been checked.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Ranked:
    """A structure's points that fit, ranked, before their MAC mappings are
    checked: ``lowest`` is the fewest cycles among them (every candidate the
    structure can give takes at least that many)."""

    structure: object
    model: object
    mesh: np.ndarray | None
    est: object
    order: np.ndarray
    lowest: float


def searched(
    structures: list,
    keep: int,
    known: list,
    bound: Callable[[object], float],
    rank: Callable[[object], Ranked],
    choose: Callable[[Ranked, int], list],
    tie: float,
    tops: bool = True,
) -> list:
    """The candidates ``choose`` gives each structure ``rank`` ranks, in the
    structures' order, skipping those that cannot change the search's result
    (see the module docstring; with ``tops``, its two best structures too).
    ``bound``: a lower bound of a structure's cycles; ``known``: the candidates
    found before."""
    out: dict[int, list] = {}
    cycles = sorted(c.cycles for c in known)
    keys: dict[object, float] = {}  # structure without order -> fewest cycles
    for c in known:
        _note(keys, c)
    waiting: list[tuple[float, int, Ranked]] = []  # modelled, by their fewest cycles

    def check(upto: float | None) -> None:
        # the modelled structures that may give fewer cycles than ``upto`` (all
        # when None), fewest first: the bar is as low as it gets before the rest
        while waiting and (upto is None or waiting[0][0] <= upto):
            lowest, i, r = heapq.heappop(waiting)
            if beyond(lowest, cycles, keys, keep, tie, tops):
                continue
            got = out[i] = choose(r, keep)
            for c in got:
                bisect.insort(cycles, c.cycles)
                _note(keys, c)

    bounds = [bound(st) for st in structures]
    for i in sorted(range(len(structures)), key=lambda i: bounds[i]):
        check(bounds[i])
        if beyond(bounds[i], cycles, keys, keep, tie, tops):
            continue
        r = rank(structures[i])
        if r.order.size:
            heapq.heappush(waiting, (r.lowest, i, r))
    check(None)
    return [c for i in range(len(structures)) for c in out.get(i, ())]


def beyond(lowest, cycles: list, keys: dict, keep: int, tie: float, tops: bool):
    """Whether candidates of ``lowest`` cycles or more cannot be among the search's
    ``keep`` best (given the sorted ``cycles`` found) nor, with ``tops``, make
    a structure one of its two best (``keys``: the fewest cycles per
    structure)."""
    if len(cycles) < keep or not cycles[0] > 0 or (tops and len(keys) < 2):
        return False
    if not lowest > cycles[keep - 1] + tie * cycles[0]:
        return False
    return not tops or lowest > sorted(keys.values())[1]


def _note(keys: dict, cand) -> None:
    key = replace(cand.structure, order=())
    keys[key] = min(keys.get(key, math.inf), cand.cycles)
