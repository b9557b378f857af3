"""Shrink a failing fuzz case to a minimal one that fails the same way.

Greedy and deterministic, as test-case reducers are: each pass tries one kind of
simplification (drop a layer; the compute API instead of torch; float32; smaller
input dims; plainer layer parameters; a shipped config or a plainer random one)
and keeps it when the case still fails with the same status and error type.
Passes repeat until none helps or the run budget is spent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from polyc.studies.fuzz.grammar import InvalidProgram, Program, cost, shapes
from polyc.studies.fuzz.runner import Case, run_case

#: smaller values tried for a size, largest saving first
_LADDER = (1, 2, 3, 4, 5, 7, 8, 11, 13, 16)


def shrink(
    case: Case,
    max_runs: int = 150,
    log: Callable[[str], None] | None = None,
    timeout: float | None = 300.0,
    run: Callable[[Case, float | None], dict] = run_case,
) -> tuple[Case, dict]:
    """The smallest case found that fails like ``case``, and its record (``case``
    itself when it passes). ``run`` runs one case (the shrinker's tests pass a
    stand-in; everyone else the default, :func:`~polyc.studies.fuzz.runner.run_case`)."""
    record = run(case, timeout)
    if record["status"] == "ok":
        return case, record
    want = (record["status"], record["error_type"])
    runs = 1
    changed = True
    while changed and runs < max_runs:
        changed = False
        for candidate in _candidates(case):
            if runs >= max_runs:
                break
            runs += 1
            r = run(candidate, timeout)
            if (r["status"], r["error_type"]) == want:
                case, record, changed = candidate, r, True
                if log:
                    log(f"shrink: {len(case.program.layers)} layers, {case.config}")
                break
    return case, record


def _candidates(case: Case) -> Iterator[Case]:
    """Simpler neighbours of ``case``, most promising first (all valid)."""
    p = case.program
    for i in reversed(range(len(p.layers))):
        q = _drop(p, i)
        if q is not None:
            yield dataclasses.replace(case, program=q)
    if case.frontend == "torch":
        yield dataclasses.replace(case, frontend="compute")
    if p.dtype != "float32" and case.frontend == "compute":
        q = _valid(dataclasses.replace(p, dtype="float32"))
        if q is not None:
            yield dataclasses.replace(case, program=q)
    for q in _smaller_inputs(p):
        yield dataclasses.replace(case, program=q)
    for q in _plainer_layers(p):
        yield dataclasses.replace(case, program=q)
    yield from _plainer_hardware(case)


def _valid(p: Program) -> Program | None:
    try:
        shapes(p)
        cost(p)
    except InvalidProgram:
        return None
    return p if p.layers else None


def _drop(p: Program, i: int) -> Program | None:
    """``p`` without layer ``i``; references to its output go to its input."""
    layers = []
    for n, layer in enumerate(p.layers):
        if n == i:
            continue
        layer = dict(layer)
        if "other" in layer:
            j = layer["other"]
            layer["other"] = j - 1 if j > i else j
        layers.append(layer)
    return _valid(dataclasses.replace(p, layers=tuple(layers)))


def _smaller_inputs(p: Program) -> Iterator[Program]:
    for d, n in enumerate(p.input):
        for m in _LADDER:
            if m >= n:
                break
            shape = tuple(m if e == d else x for e, x in enumerate(p.input))
            q = _valid(dataclasses.replace(p, input=shape))
            if q is not None:
                yield q
                break


#: plainer values per layer parameter, tried in order
_PLAIN = {
    "out": lambda v: [m for m in _LADDER if m < v][:3],
    "k": lambda v: [tuple(1 for _ in v)] if any(x > 1 for x in v) else [],
    "s": lambda v: [tuple(1 for _ in v)] if any(x > 1 for x in v) else [],
    "d": lambda v: [tuple(1 for _ in v)] if any(x > 1 for x in v) else [],
    "pad": lambda v: [tuple(0 for _ in v)] if any(v) else [],
    "g": lambda v: [1] if v > 1 else [],
    "dk": lambda v: [m for m in _LADDER if m < v][:2],
    "bias": lambda v: [False] if v else [],
    "rev": lambda v: [False] if v else [],
    "p": lambda v: [0] if v else [],
}


def _plainer_layers(p: Program) -> Iterator[Program]:
    for i, layer in enumerate(p.layers):
        for key, plainer in _PLAIN.items():
            if key not in layer:
                continue
            for value in plainer(layer[key]):
                new = dict(layer, **{key: value})
                layers = (*p.layers[:i], new, *p.layers[i + 1 :])
                q = _valid(dataclasses.replace(p, layers=layers))
                if q is not None:
                    yield q
                    break


def _plainer_hardware(case: Case) -> Iterator[Case]:
    hw = case.hardware
    if not isinstance(hw, str):
        for name in ("tiny", "edge-npu", "datacenter"):
            yield dataclasses.replace(case, hardware=name)
        for simpler in _simpler_configs(hw):
            yield dataclasses.replace(case, hardware=simpler)


def _simpler_configs(hw: dict) -> Iterator[dict]:
    """One field of a random description at a time made plainer."""
    mem = hw["memory"]
    if len(mem) > 2:  # keep DRAM and the innermost level only
        inner = dict(mem[-1])
        engines = [inner["name"]]
        yield _with(hw, memory=[mem[0], inner], engines=engines)
    dma = hw["dma"]
    if dma["channels"] > 1:
        yield _with(hw, dma=dict(dma, channels=1))
    if dma["max_dims"] < 4:
        yield _with(hw, dma=dict(dma, max_dims=4))
    a = hw["mac_array"]
    if a["rows"] != a["cols"]:
        side = min(a["rows"], a["cols"])
        yield _with(hw, mac_array=dict(a, rows=side, cols=side))
    if a.get("dataflow") or "double_buffered" in a:  # the default array
        plain = {k: v for k, v in a.items() if k not in ("dataflow", "double_buffered")}
        yield _with(hw, mac_array=plain)
    if hw["scalar"]["queue_depth"] < 16:
        yield _with(hw, scalar=dict(hw["scalar"], queue_depth=16))


def _with(hw: dict, engines=None, **parts) -> dict:
    out = {**hw, **parts}
    if engines is not None:
        out["mac_array"] = dict(
            out["mac_array"], operand_levels=engines, accumulator_levels=engines
        )
        out["vector"] = dict(out["vector"], levels=engines)
    return out
