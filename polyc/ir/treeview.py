"""The compact schedule-tree view: one line per node, for people.

isl's YAML form of a placed schedule repeats every statement's domain in every band
and carries the code generator's fields in its marks (a 3x3 convolution prints 60
lines of 1,000 characters). This view reads the same tree and writes one short line
per node::

    domain S0(n, o, h, w); S1(n, o, h, w, rc, rh, rw)
    scope pc_zero_l1 (16 B)
    band L0(n_t, o_t, h_t, w_t)  tiles o/8 h/4 w/4
      buffer bias_l1_0: bias[8] in l1, 3 slots, copy in
      sequence
        pc_in_bias_l1_0  [dma]
        ...
        tensorize S1 on the MAC array: m=h*w n=o k=rw*rc loops=n,rh  [mac_array]

- a band: its name and members (the band mark above it), the tile size of each
  member that is a tile loop (``o/8``: the member is ``floor(o/8)``), the
  attribute marks between the name and the band (``@parallel``, ``@unroll(4)``)
  and ``permutable``/``coincident`` flags;
- a filter: the statements it keeps; one whose subtree is empty is a leaf and
  shows where it runs (``[dma]``, ``[scalar]``...);
- ``@buffer``: array, level, shape, slots and copies (the mark's summary; the isl
  maps after ``|`` are the code generator's);
- ``@tensorize``: the contraction and its MAC-array mapping, on one line: the
  statement's scalar loops below it are what the ``pc_mac`` call replaced, so they
  are not shown;
- ``@vector``: the statements the vector unit runs, one operation per tile.

:func:`tree_nodes` gives the nodes as records (the HTML report draws them);
:func:`tree_text` the text. Neither changes the schedule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import islpy as isl

from polyc.ir import marks as pm
from polyc.ir import tree

T = isl.schedule_node_type

#: engines by leaf: the runtime's names (accelerator.sim.report EngineUse.name)
DMA, MAC, VECTOR, SCALAR = "dma", "mac_array", "vector", "scalar"

_FLOOR = re.compile(r"^floor\(\((\w+)\)/(\d+)\)$")


@dataclass(frozen=True)
class TreeNode:
    """One line of the view: ``depth`` in the tree, its ``kind`` (``band``,
    ``filter``, ``buffer``, ...), the ``text``, the statements below it
    (``stmts``, copy and MAC statements included) and its ``path`` from the root
    (child indices, as :func:`polyc.ir.tree.at` takes)."""

    depth: int
    kind: str
    text: str
    stmts: frozenset[str]
    path: tuple[int, ...]
    engine: str = ""


def tree_text(schedule: isl.Schedule, limit: int = 0) -> str:
    """The compact view of ``schedule`` (see the module docstring); with ``limit``,
    at most that many lines (and a last line saying how many were left out)."""
    nodes = tree_nodes(schedule)
    lines = [
        "  " * n.depth + n.text + (f"  [{n.engine}]" if n.engine else "") for n in nodes
    ]
    if limit and len(lines) > limit:
        rest = len(lines) - limit + 1
        lines = lines[: limit - 1] + [f"... {rest} more nodes"]
    return "\n".join(lines)


def tree_nodes(schedule: isl.Schedule) -> list[TreeNode]:
    """The nodes of the compact view, in pre-order (see the module docstring)."""
    texts = tree.marks(schedule)
    placed = any(pm.kind(m) for m in texts)
    folded = {
        t.init: f"{MAC}: folded into {pm.MAC}{t.stmt}"
        for t in (pm.TensorizeMark.parse(m) for m in texts if pm.kind(m) == "tensorize")
        if t.init
    }
    out: list[TreeNode] = []
    _visit(schedule.get_root(), 0, (), out, placed, "")
    if folded:  # an init folded into the MAC calls does not run on its own
        out = [
            replace(n, engine=folded[next(iter(n.stmts))])
            if n.engine == SCALAR
            and len(n.stmts) == 1
            and next(iter(n.stmts)) in folded
            else n
            for n in out
        ]
    return out


def _visit(node, depth: int, path, out: list[TreeNode], placed: bool, engine: str):
    """Append ``node``'s line and its subtree's; marks fold into the band below."""
    kind = node.get_type()
    if kind == T.mark:
        _mark(node, depth, path, out, placed, engine)
        return
    if kind == T.band:
        _band(node, depth, path, out, placed, engine, "", ())
        return
    if kind == T.leaf:
        return
    stmts = (
        tree.tuple_names(node.filter_get_filter()) if kind == T.filter else _stmts(node)
    )
    if kind == T.domain:
        text = "domain " + _statement_list(node.domain_get_domain())
    elif kind == T.filter:
        text = _names(stmts)
        child = node.child(0)
        if child.get_type() == T.leaf:
            out.append(
                TreeNode(
                    depth, "leaf", text, stmts, path, _engine(stmts, placed, engine)
                )
            )
            return
    elif kind == T.extension:
        added = tree.tuple_names(node.extension_get_extension().range())
        text = f"extension {_names(added)}"
    elif kind in (T.sequence, T.set):
        text = "sequence" if kind == T.sequence else "set"
    elif kind == T.context:
        text = f"context {node.context_get_context()}"
    elif kind == T.guard:
        text = f"guard {node.guard_get_guard()}"
    else:
        text = str(kind).rsplit(".", 1)[-1]
    if kind == T.filter:  # "S0, S1: <its child's line>": one line for the two
        below: list[TreeNode] = []
        _visit(node.child(0), depth, path + (0,), below, placed, engine)
        if below and below[0].depth == depth:
            below[0] = replace(below[0], text=f"{text}: {below[0].text}")
            out.extend(below)
            return
        out.append(TreeNode(depth, "filter", text, stmts, path))
        out.extend(replace(n, depth=n.depth + 1) for n in below)
        return
    out.append(TreeNode(depth, _kind_name(kind), text, stmts, path))
    # an extension (the copy statements it adds) wraps one subtree, as a mark does
    step = 0 if kind == T.extension else 1
    for i in range(node.n_children()):
        _visit(node.child(i), depth + step, path + (i,), out, placed, engine)


def _kind_name(kind) -> str:
    return {
        T.domain: "domain",
        T.filter: "filter",
        T.extension: "extension",
        T.sequence: "sequence",
        T.set: "set",
        T.context: "context",
        T.guard: "guard",
    }.get(kind, "node")


def _mark(node, depth, path, out, placed, engine) -> None:
    text = tree.mark_name(node) or ""
    child = node.child(0)
    parsed = tree.parse_band_mark(text)
    if parsed is not None:
        attrs = []
        below, below_path = child, path + (0,)
        while below.get_type() == T.mark and tree.is_attribute(
            tree.mark_name(below) or ""
        ):
            if pm.kind(tree.mark_name(below)):  # a placement mark: a line of its own
                break
            attrs.append(tree.mark_name(below))
            below, below_path = below.child(0), below_path + (0,)
        if below.get_type() == T.band:
            _band(below, depth, below_path, out, placed, engine, text, tuple(attrs))
            return
    kind = pm.kind(text)
    stmts = _stmts(node)
    if kind == "tensorize":
        t = pm.TensorizeMark.parse(text)
        line = f"tensorize {pm.summary(text)[len('@tensorize(matmul) ') :]}"
        line += f"  (calls {pm.MAC}{t.stmt})"
        out.append(TreeNode(depth, "tensorize", line, stmts, path, MAC))
        return  # the scalar loops below are what the MAC call replaced
    if kind == "vector":
        vm = pm.VectorMark.parse(text)
        unit = MAC if vm.unit == "mac" else VECTOR
        line = f"vector {', '.join(vm.stmts)}" + (
            " (in the MAC array's output path)" if unit == MAC else ""
        )
        out.append(TreeNode(depth, "vector", line, stmts, path))
        _visit(child, depth + 1, path + (0,), out, placed, unit)
        return
    if kind == "buffer":
        line = "buffer " + pm.summary(text)[len("@buffer ") :]
    elif kind == "scope":
        line = _scope_text(text)
    else:
        line = f"mark {pm.summary(text)}"
    out.append(TreeNode(depth, kind or "mark", line, stmts, path))
    # a buffer, scope or other mark wraps one subtree: no level of its own
    _visit(child, depth, path + (0,), out, placed, engine)


def _scope_text(text: str) -> str:
    scope = pm.ScopeMark.parse(text)
    total = sum(a.bytes for a in scope.allocations)
    names = ", ".join(a.name for a in scope.allocations)
    return f"scope {names} ({total:,} B)"


def _band(node, depth, path, out, placed, engine, mark: str, attrs) -> None:
    parsed = tree.parse_band_mark(mark) if mark else None
    n = node.band_n_member()
    if parsed is not None:
        name, members = parsed
    else:
        name, members = "", tuple(f"c{i}" for i in range(n))
    exprs = _member_exprs(node)
    tiles = []
    for m, e in zip(members, exprs):
        hit = _FLOOR.match(e) if e else None
        if hit:
            tiles.append(f"{hit.group(1)}={hit.group(2)}")
        elif e is not None and e != m and not e.lstrip("-").isdigit():
            tiles.append(f"{m}={e}")
    text = f"band {name}({', '.join(members[:n])})" if name else f"band ({n} members)"
    if tiles:
        text += "  tiles " + " ".join(tiles)
    flags = list(attrs)
    if n > 1 and node.band_get_permutable():
        flags.append("permutable")
    coincident = [
        m for i, m in enumerate(members[:n]) if node.band_member_get_coincident(i)
    ]
    if coincident:
        flags.append(f"coincident {','.join(coincident)}")
    if flags:
        text += "  " + " ".join(flags)
    stmts = _stmts(node)
    child = node.child(0)
    leaf = child.get_type() == T.leaf
    out.append(
        TreeNode(
            depth,
            "band",
            text,
            stmts,
            path,
            _engine(stmts, placed, engine) if leaf else "",
        )
    )
    if not leaf:
        _visit(child, depth + 1, path + (0,), out, placed, engine)


def _member_exprs(node) -> list[str | None]:
    """Each member's expression when every statement has the same one (isl text,
    ``floor((o)/8)``), else None."""
    mupa = node.band_get_partial_schedule()
    out: list[str | None] = []
    for i in range(mupa.dim(isl.dim_type.set)):
        texts: set[str] = set()

        def piece(_set, aff, texts=texts):
            text = str(aff)
            hit = re.search(r"-> \[\((.*)\)\] }$", text)
            texts.add(hit.group(1) if hit else text)

        mupa.get_union_pw_aff(i).foreach_pw_aff(lambda pa: pa.foreach_piece(piece))
        out.append(texts.pop() if len(texts) == 1 else None)
    return out


def _stmts(node) -> frozenset[str]:
    """The statements (copies and MAC calls included) that reach ``node``."""
    try:
        return tree.tuple_names(node.get_domain())
    except isl.Error:  # pragma: no cover - every node of a schedule has a domain
        return frozenset()


def _engine(stmts: frozenset[str], placed: bool, engine: str) -> str:
    if engine:
        return engine
    if stmts and all(s.startswith((pm.IN, pm.OUT, pm.ZERO)) for s in stmts):
        return DMA
    if any(s.startswith(pm.MAC) for s in stmts):
        return MAC
    return SCALAR if placed else ""


def _names(stmts, most: int = 6) -> str:
    names = sorted(stmts, key=_natural)
    if len(names) > most:
        return ", ".join(names[:most]) + f", ... ({len(names)} statements)"
    return ", ".join(names)


def _natural(name: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _statement_list(domain: isl.UnionSet, most: int = 6) -> str:
    parts: list[tuple[str, str]] = []

    def one(s: isl.Set) -> None:
        names = [
            s.get_dim_name(isl.dim_type.set, i) or f"i{i}"
            for i in range(s.dim(isl.dim_type.set))
        ]
        parts.append((s.get_tuple_name(), f"{s.get_tuple_name()}({', '.join(names)})"))

    domain.foreach_set(one)
    parts.sort(key=lambda p: _natural(p[0]))
    texts = [p[1] for p in parts]
    if len(texts) > most:
        return "; ".join(texts[:most]) + f"; ... ({len(texts)} statements)"
    return "; ".join(texts)
