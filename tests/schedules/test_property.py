"""Property: on random small affine programs, every random transformation either
raises IllegalTransformError or keeps the results: the compiled C of the kernel after
every step equals the interpreter on the original (integer data, so exactly).

The suite runs 200 examples; the slow run runs 5000:
``HYPOTHESIS_PROFILE=slow .venv/bin/python -m pytest -n 2 tests/schedules/test_property.py``
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st

import polyc
import schedules as S
from polyc import BudgetError, IllegalTransformError
from polyc import compute as pc
from polyc.lang.program import Program
from schedules import stree
from tests.support.sched import compile_many, inputs_for

EXAMPLES = int(__import__("os").environ.get("SCHED_EXAMPLES", 0)) or max(
    200, settings.default.max_examples
)
OPS = ("add", "sub", "mul", "max")


# random programs ------------------------------------------------------------------
@st.composite
def programs(draw):
    # symbolic sizes in one program of four: isl's dataflow analysis on parametric
    # programs with stride-2 accesses can take seconds (concrete ones take ms)
    symbolic = draw(st.integers(0, 3)) == 0
    n = draw(st.integers(2, 5))
    p = Program("rand")
    N = p.param("N") if symbolic else n
    extent = 6 * (N - 1) + 5  # room for any index (coefficients -2..2, +0..4)
    arrays = {
        "X": p.array("X", (extent, extent), "int32", role="input"),
        "Y": p.array("Y", (extent, extent), "int32", role="inout"),
        "Z": p.array("Z", (extent, extent), "int32", role="inout"),
    }
    budget = draw(st.integers(1, 4))
    while budget > 0:
        if budget >= 1 and draw(st.integers(0, 3)) == 0:
            steps = draw(st.integers(1, 3))
            inner = min(budget, draw(st.integers(1, 2)))
            with p.loop("t", 0, steps):
                for _ in range(inner):
                    _statement(draw, p, arrays, N, outer=["t"], max_depth=2)
            budget -= inner
        else:
            _statement(draw, p, arrays, N, outer=[], max_depth=3)
            budget -= 1
    return p.kernel(), ({"N": n} if symbolic else {})


def _statement(draw, p, arrays, N, outer, max_depth):
    depth = draw(st.integers(1, max_depth))
    names = ["i", "j", "k"][:depth]
    kind = draw(st.sampled_from(["map", "reduction", "stencil"]))
    with _loops(draw, p, names, N) as its:
        moving = its if kind != "reduction" or depth == 1 else its[:-1]
        target_name = draw(st.sampled_from(["Y", "Z"]))
        target_idx = _index(draw, moving, its, N)
        target = arrays[target_name][target_idx]
        if kind == "stencil":
            src = arrays[draw(st.sampled_from(["X", "Y", "Z"]))]
            loads = [
                src[_shifted(target_idx, draw(st.integers(-1, 1)), d)]
                for d in (0, 1, 0)
            ]
        else:
            count = draw(st.integers(1, 3))
            loads = [
                arrays[draw(st.sampled_from(["X", "Y", "Z"]))][
                    _index(draw, its, its, N)
                ]
                for _ in range(count)
            ]
        body = loads[0]
        for ld in loads[1:]:
            body = _combine(draw(st.sampled_from(OPS)), body, ld)
        if kind == "reduction":
            body = target + body
        p.assign(target, body)


class _loops:
    """Nested ``p.loop`` contexts for ``names`` (rectangular, sometimes triangular)."""

    def __init__(self, draw, p, names, N):
        self.draw, self.p, self.names, self.N = draw, p, names, N
        self.stack = []

    def __enter__(self):
        its = []
        for name in self.names:
            hi = self.N
            if its and self.draw(st.integers(0, 4)) == 0:
                hi = its[-1] + 1
            ctx = self.p.loop(name, 0, hi)
            its.append(ctx.__enter__())
            self.stack.append(ctx)
        return its

    def __exit__(self, *exc):
        for ctx in reversed(self.stack):
            ctx.__exit__(*exc)
        return False


def _index(draw, moving, its, N):
    """Two affine indices with coefficients in -2..2 over ``moving``, shifted so they
    stay in ``0 .. 6 (N - 1) + 2`` for iterators in ``0 .. N - 1``."""
    out = []
    for _ in range(2):
        expr = draw(st.integers(0, 2))
        for it in moving:
            c = draw(st.integers(-2, 2))
            if c < 0:
                expr = expr + (-c) * (N - 1)
            if c:
                expr = expr + c * it
        out.append(expr)
    return tuple(out)


def _shifted(idx, delta, dim):
    out = list(idx)
    out[dim] = out[dim] + (delta + 1)  # 0..2 up: never below 0
    return tuple(out)


def _combine(op, a, b):
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    return pc.maximum(a, b)


# random transformation sequences --------------------------------------------------
_names = itertools.count()


def _fresh() -> str:
    return f"B{next(_names)}"


def _candidates(kernel):
    """Every transformation that applies structurally, as ``(label, action)``."""
    root = stree.from_isl(kernel.schedule)
    out = [("auto", ("auto",))]
    for nb in [nb for _, n in stree.walk(root) if (nb := stree.named_at(n))]:
        b, ms = nb.name, nb.members
        out += [("tile", ("tile", b, ms)), ("mark", ("mark", b))]
        out.append(("shift", ("shift", b, ms, nb)))
        if len(ms) >= 2:
            out += [(kind, (kind, b, ms)) for kind in ("permute", "skew", "split")]
        if not any(m.endswith("_o") for m in ms):
            out.append(("strip", ("strip", b, ms)))
        if isinstance(nb.band.child, stree.Sequence_):
            out.append(("distribute", ("distribute", b, len(nb.band.child.children))))
        inner = stree.named_at(nb.band.child)
        if inner is not None and not inner.attrs and not set(inner.members) & set(ms):
            out.append(("merge", ("merge", b, inner.name)))
    for _, n in stree.walk(root):
        if not isinstance(n, stree.Sequence_):
            continue
        tops = [stree.named_at(c) for c in n.children]
        for x, y in itertools.pairwise(tops):
            if x is not None and y is not None:
                out.append(("fuse", ("fuse", (x.name, y.name))))
        labels = []
        for c, top in zip(n.children, tops):
            stmts = stree.statements(c)
            if top is not None:
                labels.append(top.name)
            elif len(stmts) == 1:
                labels.append(stmts[0])
        if len(labels) >= 2:
            out.append(("reorder", ("reorder", labels)))
    return out


def _apply(draw, kernel, action):
    kind = action[0]
    if kind == "tile":
        _, b, ms = action
        chosen = draw(
            st.lists(st.sampled_from(ms), min_size=1, max_size=len(ms), unique=True)
        )
        two = draw(st.integers(0, 4)) == 0 and f"{b}_t2" not in _bands(kernel)
        sizes = {m: ((4, 2) if two else draw(st.integers(2, 4))) for m in chosen}
        return S.tile(kernel, b, sizes, name=_fresh())
    if kind == "mark":
        which = draw(st.sampled_from(["parallel", "vectorize", "unroll"]))
        if which == "unroll":
            return S.unroll(kernel, action[1], draw(st.integers(2, 4)))
        return getattr(S, which)(kernel, action[1])
    if kind == "permute":
        _, b, ms = action
        return S.permute(kernel, b, draw(st.permutations(ms)))
    if kind == "skew":
        _, b, ms = action
        target, other = draw(st.permutations(ms))[:2]
        return S.skew(kernel, b, target, {other: draw(st.sampled_from([-1, 1, 2]))})
    if kind == "split":
        _, b, ms = action
        return S.split_band(kernel, b, draw(st.integers(1, len(ms) - 1)), name=_fresh())
    if kind == "shift":
        _, b, ms, nb = action
        stmt = draw(st.sampled_from([None, *stree.statements(nb.band)]))
        offsets = {draw(st.sampled_from(ms)): draw(st.integers(-2, 2))}
        return S.shift(kernel, b, offsets, statement=stmt)
    if kind == "strip":
        _, b, ms = action
        return S.strip_mine(
            kernel, b, draw(st.sampled_from(ms)), draw(st.integers(2, 3))
        )
    if kind == "distribute":
        _, b, n = action
        return S.distribute(kernel, b, names=[_fresh() for _ in range(n)])
    if kind == "merge":
        return S.merge_bands(kernel, action[1], action[2])
    if kind == "fuse":
        return S.fuse(kernel, list(action[1]), name=_fresh())
    if kind == "reorder":
        return S.reorder(kernel, draw(st.permutations(action[1])))
    return S.auto(  # every parallel loop the model finds is marked (and checked)
        kernel,
        fusion=draw(st.sampled_from(["max", "smart", "none"])),
        params={"N": 8},
        min_parallel_work=0,
    )


def _bands(kernel):
    return stree.band_names(stree.from_isl(kernel.schedule))


@dataclass
class Case:
    """One step to check: the kernel after it and the reference results."""

    kernel: object
    inputs: dict
    params: dict
    reference: dict


def test_random_transformations_keep_results_or_raise():
    """Hypothesis draws programs and sequences; every kernel a step returns is kept,
    and all of them are compiled into one library and run at the end (compiling
    each example alone would cost ~0.2 s of gcc start-up apiece)."""
    cases: dict[str, Case] = {}

    @settings(max_examples=EXAMPLES, deadline=None)
    @given(st.data())
    def explore(data):
        kernel, params = data.draw(programs())
        inputs = inputs_for(kernel, **params)
        reference = polyc.interpret(kernel, _copy(inputs), **params)
        current = kernel
        for _ in range(data.draw(st.integers(1, 4))):
            label, make = data.draw(st.sampled_from(_candidates(current)))
            try:
                current = _apply(data.draw, current, make)
            except IllegalTransformError:
                event(f"{label}: illegal")
                continue
            except BudgetError:  # auto on a program isl finds hard: documented
                event(f"{label}: over budget")
                continue
            event(f"{label}: applied")
            key = (
                str(current.schedule)
                + "; ".join(map(str, kernel.statements))
                + repr(params)
            )
            cases.setdefault(key, Case(current, inputs, params, reference))
        again = S.replay(kernel, current.history)
        assert again.schedule.plain_is_equal(current.schedule)

    explore()
    cases_list = list(cases.values())
    run = compile_many([c.kernel for c in cases_list])
    for n, case in enumerate(cases_list):
        got = run(n, _copy(case.inputs), **case.params)
        for name, ref in case.reference.items():
            if not np.array_equal(got[name], ref):
                raise AssertionError(
                    f"compiled C differs on {name} after {case.kernel.history} with "
                    f"{case.params}:\n{case.kernel.original}\n{case.kernel.loop_nest()}"
                )


def _copy(inputs: dict) -> dict:
    return {k: v.copy() for k, v in inputs.items()}
