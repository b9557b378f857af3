"""Hardware grids: many descriptions made from one by varying its keys.

``vary(spec, {"mac_array.rows": [16, 32], "mac_array.cols": "rows"})`` returns one
:class:`Spec` per combination of the values (the first key varies slowest), each
built through :func:`~accelerator.hardware.config.from_dict`, the checks every TOML
file goes through. The whole grid is built and checked before it is returned, so a
bad value is refused before any point runs, with the point and the key.

A key is a dotted path into the TOML document: ``clock_ghz``, ``mac_array.rows``,
``mac_array.dtypes.int8.pj_per_mac``, ``dma.channels``, ``area.sram_um2_per_kib``;
a memory level is named by its ``name`` (``memory.sram.capacity_bytes``,
``memory.dram.bytes_per_cycle``) or by its position (``memory[1].banks``). Values
are a list, one value, a range text (:func:`parse_values`) or the name of another
key of the grid (``"rows"``: the value that key has in the same point).

The command line writes a grid as one text (:func:`parse_grid`)::

    edge-npu:mac_array.rows=16,32,64;mac_array.cols=rows;memory.sram.capacity_bytes=262144..4194304*2
"""

from __future__ import annotations

import copy
import itertools
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass

from accelerator.hardware.config import CONFIGS, from_dict, load_config
from accelerator.hardware.spec import FrozenMap, Spec
from polyc.errors import ConfigError, GridError

#: the largest grid vary builds (a typo in a range should not make a million points)
MAX_POINTS = 100_000


@dataclass(frozen=True)
class Ref:
    """A value that is another key's value in the same point (``cols=rows``)."""

    key: str


# Spec <-> TOML document --------------------------------------------------------------


def to_dict(spec: Spec) -> dict:
    """The TOML document (as ``tomllib`` gives it) that describes ``spec``:
    ``from_dict(to_dict(spec))`` equals ``spec`` but for its ``source``."""
    out: dict = {
        "name": spec.name,
        "description": spec.description,
        "clock_ghz": spec.clock_ghz,
    }
    a = spec.mac_array
    mac = _plain(a, skip=("input_levels", "weight_levels"))
    if a.input_levels == a.weight_levels:
        mac["operand_levels"] = list(a.input_levels)
    else:
        mac["input_levels"] = list(a.input_levels)
        mac["weight_levels"] = list(a.weight_levels)
    out["mac_array"] = mac
    out["vector"] = _plain(spec.vector)
    out["scalar"] = _plain(spec.scalar)
    # (the planner's and the search's views of a level, not the hardware's)
    planned = ("bank_bytes", "usable_banks", "usable_part")
    out["memory"] = [_plain(m, skip=planned) for m in spec.memory]
    out["dma"] = _plain(spec.dma)
    if getattr(spec, "area", None) is not None:
        out["area"] = spec.area.to_dict()
    return out


def _plain(value, skip=()):
    if is_dataclass(value):
        return {
            f.name: _plain(getattr(value, f.name))
            for f in fields(value)
            if f.name not in skip and getattr(value, f.name) is not None
        }
    if isinstance(value, (Mapping, FrozenMap)):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


# key paths ---------------------------------------------------------------------------


def _steps(key: str) -> list[str | int]:
    """``"memory.sram.banks"`` -> ``["memory", "sram", "banks"]``;
    ``"memory[1].banks"`` -> ``["memory", 1, "banks"]``."""
    out: list[str | int] = []
    for part in key.split("."):
        m = re.fullmatch(r"([A-Za-z_][\w-]*)(?:\[(\d+)\])?", part)
        if not m:
            raise GridError(
                f"vary: key {key!r} is not a key path because {part!r} is not a "
                "name. Write dotted TOML keys such as mac_array.rows or "
                "memory.sram.capacity_bytes."
            )
        out.append(m.group(1))
        if m.group(2) is not None:
            out.append(int(m.group(2)))
    return out


def _parent(doc: dict, key: str, base: str) -> tuple[dict, str]:
    """The table holding ``key``'s last name in ``doc``, and that name.

    Raises:
        GridError: when a table on the way does not exist.
    """
    steps = _steps(key)
    node: object = doc
    for i, step in enumerate(steps[:-1]):
        where = ".".join(str(s) for s in steps[:i]) or "the top level"
        if isinstance(node, list):
            if isinstance(step, str):
                named = [
                    m for m in node if isinstance(m, dict) and m.get("name") == step
                ]
                if not named:
                    names = [m.get("name") for m in node if isinstance(m, dict)]
                    raise GridError(
                        f"vary: key {key} names no memory level of {base} because "
                        f"its levels are {', '.join(map(str, names))}. Use one of "
                        f"those names, e.g. memory.{names[-1]}.capacity_bytes."
                    )
                node = named[0]
            elif step < len(node):
                node = node[step]
            else:
                raise GridError(
                    f"vary: key {key} names memory level {step} of {base} because "
                    f"it has {len(node)} levels. Use an index below {len(node)}."
                )
            continue
        if not isinstance(node, dict) or step not in node:
            have = ", ".join(sorted(node)) if isinstance(node, dict) else "nothing"
            raise GridError(
                f"vary: key {key} is not in {base} because {where} has no table "
                f"{step!r} (it has {have}). Spell the key as in the TOML file."
            )
        node = node[step]
    last = steps[-1]
    if isinstance(node, list) or not isinstance(last, str):
        raise GridError(
            f"vary: key {key} ends on a list because the last name must be a key of "
            "a table. Name one level's key, e.g. memory.sram.capacity_bytes."
        )
    if not isinstance(node, dict):
        raise GridError(
            f"vary: key {key} is not in {base} because its parent is a value, not "
            "a table. Spell the key as in the TOML file."
        )
    return node, last


def get_key(spec: Spec, key: str):
    """The value of ``key`` (a path as in :func:`vary`) in ``spec``, or None.

    Raises:
        GridError: when the key's tables do not exist.
    """
    table, last = _parent(to_dict(spec), key, spec.name)
    return table.get(last)


# values ------------------------------------------------------------------------------


def parse_values(text: str) -> list:
    """The values of one key written as text.

    ``16,32,64`` (a list); ``262144..4194304*2`` (from 262144, times 2, up to
    4194304); ``8..64+8`` (from 8 in steps of 8 up to 64); ``1..4`` (steps of 1);
    words and ``true``/``false`` as themselves (``weight_stationary,
    output_stationary``). Items of a list may be ranges.

    Raises:
        GridError: for an empty list or a range that is empty or never ends.
    """
    out: list = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise GridError(
                f"vary: values {text!r} hold an empty item because of a stray comma. "
                "Write values as 16,32,64."
            )
        m = re.fullmatch(r"(.+?)\.\.(.+?)(?:([*+])(.+))?", item)
        if m and all(_number(g) is not None for g in m.group(1, 2)):
            out += _range(item, *m.groups())
        else:
            out.append(_scalar(item))
    return out


def _number(text: str | None):
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _scalar(text: str):
    if text in ("true", "false"):
        return text == "true"
    number = _number(text)
    return text if number is None else number


def _range(item, lo, hi, op, step) -> list:
    a, b = _number(lo), _number(hi)
    s = 1 if op is None else _number(step)
    fix = "Write a range as LOW..HIGH*FACTOR or LOW..HIGH+STEP (LOW <= HIGH)."
    if s is None or a > b:
        raise GridError(
            f"vary: range {item!r} is empty because its start is past its end or "
            f"its step is not a number. {fix}"
        )
    grows = (op == "*" and s > 1 and a > 0) or (op != "*" and s > 0)
    if not grows:
        raise GridError(
            f"vary: range {item!r} never ends because its "
            f"{'factor' if op == '*' else 'step'} is {s}. {fix}"
        )
    out, v = [], a
    while v <= b * (1 + 1e-12):
        out.append(v)
        v = v * s if op == "*" else v + s
        if len(out) > MAX_POINTS:
            break
    return out


def parse_grid(text: str) -> tuple[str, dict[str, object]]:
    """``"edge-npu:mac_array.rows=16,32;mac_array.cols=rows"`` ->
    ``("edge-npu", {"mac_array.rows": [16, 32], "mac_array.cols": Ref("rows")})``.
    A value that is one word naming another key of the grid is a :class:`Ref`.

    Raises:
        GridError: for text that is not ``CONFIG:key=values;...``.
    """
    base, sep, rest = text.partition(":")
    fix = (
        "Write CONFIG:key=values;key=values, e.g. "
        "edge-npu:mac_array.rows=16,32;mac_array.cols=rows."
    )
    if not sep or not base or not rest.strip():
        raise GridError(f"vary: grid {text!r} has no keys because it has no ':'. {fix}")
    axes: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in rest.split(";"))):
        key, eq, values = part.partition("=")
        key, values = key.strip(), values.strip()
        if not eq or not key or not values:
            raise GridError(
                f"vary: grid {text!r} has the item {part!r} because it is not "
                f"key=values. {fix}"
            )
        if key in axes:
            raise GridError(
                f"vary: grid {text!r} gives key {key} twice because keys are "
                f"unique. Merge the values into one list. {fix}"
            )
        axes[key] = values
    keys = list(axes)
    for key, values in axes.items():
        target = _ref_target(values, keys, key)
        axes[key] = Ref(target) if target else parse_values(values)
    return base.strip(), axes


def _ref_target(value: str, keys: list[str], me: str) -> str | None:
    """The key of the grid that ``value`` names (itself or a dotted suffix)."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][\w.\[\]-]*", value):
        return None
    hits = [k for k in keys if k != me and (k == value or k.endswith("." + value))]
    return hits[0] if len(hits) == 1 else None


# the grid ----------------------------------------------------------------------------


def vary(
    spec: Spec | str,
    axes: Mapping[str, object],
    where: Callable[[Spec], bool] | None = None,
) -> list[Spec]:
    """Every combination of ``axes``' values applied to ``spec``, checked.

    Args:
        spec: the base description (a Spec, a shipped name or a TOML path).
        axes: ``{key: values}``; values are a list, one number or word, a range
            text such as ``"262144..4194304*2"``, or the name of another key
            (``"rows"``: the same value as that key in each point).
        where: keep only the points for which ``where(spec)`` is true (e.g. an
            area budget: ``lambda s: accelerator.area(s).total_mm2 <= 4``).

    Each point is named ``BASE[key=value,...]`` with each key shortened to the
    last names that tell it apart from the others.

    Raises:
        GridError: for an unknown key, a bad value text or reference, a grid with
            no point left, or a point that is not a valid description (the point,
            its values and the key are named).
    """
    base = load_config(spec)
    if not axes:
        raise GridError(
            f"vary: no keys to vary in {base.name} because axes is empty. Pass "
            "{key: values}, e.g. {'mac_array.rows': [16, 32]}."
        )
    doc = to_dict(base)
    keys = list(axes)
    values: dict[str, list] = {}
    refs: dict[str, str] = {}
    for key in keys:
        _parent(doc, key, base.name)  # the key must exist before anything is built
        raw = axes[key]
        target = raw.key if isinstance(raw, Ref) else _ref_target(raw, keys, key)
        if target is not None:
            if target not in axes:
                raise GridError(
                    f"vary: key {key} refers to {target} because its value names "
                    "a key, but the grid does not vary it. Vary that key too."
                )
            refs[key] = target
            continue
        values[key] = _as_list(key, raw)
    for key, target in refs.items():
        if target in refs:
            raise GridError(
                f"vary: key {key} refers to {target}, which refers to "
                f"{refs[target]} because references chain. Refer to a key with "
                "its own values."
            )
    count = math.prod(len(v) for v in values.values())
    if count > MAX_POINTS:
        raise GridError(
            f"vary: the grid over {base.name} has {count} points because "
            f"{' x '.join(str(len(v)) for v in values.values())} values multiply. "
            f"Narrow the ranges to fewer than {MAX_POINTS} points."
        )
    short = _short_names([k for k in keys if k not in refs])
    out = []
    for i, combo in enumerate(itertools.product(*values.values())):
        chosen = dict(zip(values, combo))
        chosen.update({k: chosen[t] for k, t in refs.items()})
        label = ",".join(
            f"{short[k]}={_text(v)}" for k, v in chosen.items() if k not in refs
        )
        out.append(_point(base, doc, chosen, i, label))
    if where is not None:
        out = [s for s in out if where(s)]
        if not out:
            raise GridError(
                f"vary: no point of the {base.name} grid is kept because where= "
                f"refuses all {count}. Loosen the constraint or widen the grid."
            )
    return out


def _as_list(key: str, raw) -> list:
    if isinstance(raw, str):
        vals = parse_values(raw)
    elif isinstance(raw, Iterable) and not isinstance(raw, (bytes, Mapping)):
        vals = list(raw)
    else:
        vals = [raw]
    if not vals:
        raise GridError(
            f"vary: key {key} has no values because its list is empty. Give at "
            "least one value."
        )
    return vals


def _point(base: Spec, doc: dict, chosen: dict, index: int, label: str) -> Spec:
    data = copy.deepcopy(doc)
    name = f"{base.name}[{label}]"
    data["name"] = name
    for key, value in chosen.items():
        table, last = _parent(data, key, base.name)
        table[last] = value
    source = f"{base.name} grid point {index} ({label})"
    try:
        return from_dict(data, source=source)
    except ConfigError as err:
        detail = str(err).removeprefix(f"load_config: {source}: ")
        detail = re.split(r"\. (?:Fix|Add) [^\n]*$", detail, maxsplit=1)[0]
        raise GridError(
            f"vary: {source} is not a valid hardware description: "
            f"{detail}. Drop or change the values that make it (or pass where= / "
            "--where to skip such points)."
        ) from None


def _short_names(keys: list[str]) -> dict[str, str]:
    """Each key shortened to its last dotted names that no other key ends with."""
    out = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            tail = ".".join(parts[-n:])
            if not any(
                k != key and (k == tail or k.endswith("." + tail)) for k in keys
            ):
                out[key] = tail
                break
        else:
            out[key] = key
    return out


def _text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).lower() if isinstance(value, bool) else str(value)


# constraints as text -----------------------------------------------------------------

_OPS = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}


def parse_where(text: str, measures: Mapping[str, Callable[[Spec], float]] = {}):
    """A constraint ``where(spec) -> bool`` from text such as
    ``"area_mm2<=4,mac_array.rows>=mac_array.cols"``: comma-separated comparisons
    (all must hold) of numbers, config keys and ``measures`` (names of functions of
    the spec, e.g. ``area_mm2``).

    Raises:
        GridError: for text that is not such comparisons.
    """
    tests = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"(.+?)\s*(<=|>=|==|!=|<|>)\s*(.+)", part)
        if not m:
            raise GridError(
                f"vary: constraint {part!r} is not a comparison because it has no "
                "<, <=, >, >=, == or !=. Write e.g. area_mm2<=4."
            )
        lhs, op, rhs = m.groups()
        tests.append((_term(lhs, measures), _OPS[op], _term(rhs, measures)))
    if not tests:
        raise GridError(
            f"vary: constraint {text!r} is empty because it holds no comparison. "
            "Write e.g. area_mm2<=4."
        )

    def where(spec: Spec) -> bool:
        return all(op(a(spec), b(spec)) for a, op, b in tests)

    where.text = text
    return where


def _term(text: str, measures) -> Callable[[Spec], float]:
    text = text.strip()
    number = _number(text)
    if number is not None:
        return lambda spec: number
    if text in measures:
        return measures[text]
    _steps(text)  # a malformed name fails here, an unknown key at the first spec

    def value(spec: Spec):
        got = get_key(spec, text)
        if got is None:
            raise GridError(
                f"vary: constraint term {text!r} is not a key of {spec.name} "
                f"because it has no value there. Use a config key or one of "
                f"{', '.join(measures) or 'the measures'}."
            )
        return got

    return value


def is_grid(text: str) -> bool:
    """Whether a ``--configs`` item is a grid (``CONFIG:key=values``) rather than
    a config name or a path."""
    base, sep, rest = text.partition(":")
    return bool(sep) and "=" in rest and (base in CONFIGS or base.endswith(".toml"))
