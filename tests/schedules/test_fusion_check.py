"""A fusion check asks the memory-based dependences before the exact ones
(:func:`schedules.legality.memory_dependences`) and answers as the exact ones
alone would."""

from __future__ import annotations

import islpy as isl
import pytest
import torch

import polyc
from schedules import fusion, legality
from schedules.accel import layers
from schedules.accel.layers import _simple, split, top_children
from tests.support.small_kernels import overwritten
from tests.support.small_kernels import window as _window


def _relations(deps):
    return sorted((kind, array, str(m)) for kind, array, m in deps)


def _items(kernel):
    return [_simple(kernel, c) for c in top_children(kernel)]


def _exact(kernel, bands, d) -> bool:
    """:func:`schedules.fusion.can_fuse` on the exact dependences alone."""
    _, seq_path, _, _, _, _, new = fusion._fusion(kernel, bands, None, d, "fuse")
    return legality.is_legal(kernel, new, seq_path)


def _depthwise():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(4, 8, 1),
        torch.nn.ReLU6(),
        torch.nn.Conv2d(8, 8, 3, padding=1, groups=8),
        torch.nn.ReLU6(),
        torch.nn.Conv2d(8, 4, 1),
    )
    return polyc.from_torch(net.eval(), (torch.randn(1, 4, 8, 8),), name="dw")


@pytest.mark.parametrize(
    "build",
    [
        lambda: overwritten(12, "chain"),
        lambda: _window(True),
        lambda: _window(False),
        _depthwise,
    ],
)
def test_a_fusion_check_answers_as_the_exact_dependences(build):
    kernel = build()
    kernel, _ = layers.per_statement(kernel)
    items = _items(kernel)
    asked = 0
    for start in range(len(items)):
        for end in range(start + 2, min(start + 5, len(items)) + 1):
            run = items[start:end]
            if any(x is None for x in run):
                continue
            bands = [b for _, b in run]
            for d in range(1, min(s.depth for s, _ in run) + 1):
                fresh = build()  # no memoised dependences from the last check
                fresh, _ = layers.per_statement(fresh)
                quick = fusion.can_fuse(fresh, bands, depth=d)
                assert quick == _exact(kernel, bands, d), (bands, d)
                asked += 1
    assert asked


def test_killed_values_are_in_the_memory_based_dependences_only():
    kernel = overwritten(0, "chain")
    exact = _relations(legality.dependences(kernel))
    memory = _relations(legality.memory_dependences(kernel))
    assert set(exact) != set(memory)
    # S0's values never reach S2 (S1 overwrites them): no exact flow S0 -> S2
    flows = [m for kind, _, m in legality.dependences(kernel) if kind == "flow"]
    assert not any(m.get_tuple_name(isl.dim_type.in_) == "S0" for m in flows)
    assert any(
        kind == "flow" and m.get_tuple_name(isl.dim_type.in_) == "S0"
        for kind, _, m in legality.memory_dependences(kernel)
    )


def test_layers_of_a_network_are_the_same_with_the_exact_checks_alone(monkeypatch):
    kernel = _depthwise()
    quick = [(la.name, la.depth) for la in split(kernel)]
    monkeypatch.setattr(fusion, "memory_dependences", lambda k: legality.dependences(k))
    layers._FUSES.clear()
    layers._OWN.clear()
    slow = [(la.name, la.depth) for la in split(_depthwise())]
    assert quick == slow


def _every_pair(kernel):
    """The memory-based dependences as every access meeting every other (the
    check before accesses were paired by array), for comparison."""
    times = legality.statement_times(kernel.program_schedule)
    every = [
        (s.name, a, w, m)
        for s in kernel.statements
        for a, w, m in legality.accesses(kernel, s)
    ]
    out = []
    for s, array, write, m in every:
        for t, array2, write2, m2 in every:
            if array != array2 or not (write or write2):
                continue
            pairs = m.apply_range(m2.reverse()).intersect_params(kernel.context)
            pairs = pairs.intersect(times[s].lex_lt_map(times[t]))
            if not pairs.is_empty():
                kind = "output" if write and write2 else "flow" if write else "anti"
                out.append((kind, array, pairs))
    return out


@pytest.mark.parametrize("build", [lambda: overwritten(0, "chain"), _depthwise])
def test_memory_dependences_pair_accesses_by_array_in_the_programs_order(build):
    kernel, _ = layers.per_statement(build())
    got = legality.memory_dependences(kernel)
    want = _every_pair(kernel)
    assert [(k, a) for k, a, _ in got] == [(k, a) for k, a, _ in want]
    assert all(m.is_equal(n) for (_, _, m), (_, _, n) in zip(got, want))


def test_a_small_programs_fusion_checks_are_kept_by_the_parts_text(monkeypatch):
    """A part of a small program in its program order is checked once per
    text, as a large program's part is: another program with the same parts
    (a depthwise layer split on its own, then in its network) asks nothing
    again, and splits alike. The old code kept none of them."""
    monkeypatch.setattr(layers, "_FUSES", {})
    monkeypatch.setattr(layers, "_OWN", {})
    kernel, _ = layers.per_statement(_window(False))
    first = [(la.name, la.depth) for la in split(kernel)]
    assert layers._FUSES
    asked = []
    fuses = layers._fuses
    monkeypatch.setattr(layers, "_fuses", lambda *a: asked.append(a) or fuses(*a))
    again, _ = layers.per_statement(_window(False))
    assert [(la.name, la.depth) for la in split(again)] == first
    assert not asked


def test_a_parts_memory_dependences_are_its_programs_between_its_statements():
    """Once the program's memory-based dependences are known, a part of it (one
    layer, :func:`layers.sub_kernel`) takes those between its statements
    instead of composing its own accesses again; they are the same pairs, and
    the legality checks answer as on the part's own (tenth round)."""
    kernel, _ = layers.per_statement(_depthwise())
    items = _items(kernel)
    whole = legality.memory_dependences(kernel)
    part = layers.sub_kernel(kernel, range(len(items)))
    got = legality.memory_dependences(part)
    assert got and all(any(m is n for _, _, n in whole) for _, _, m in got)
    own = legality.memory_dependences(part.replace(part_of=None))
    for kind, array, m in own:
        mine = [n for k, a, n in got if (k, a) == (kind, array)]
        same = [n for n in mine if n.get_space() == m.get_space()]
        assert len(same) == 1 and same[0].is_equal(m)
    assert len(got) == len(own)
    bands = [b for _, b in items[:3]]
    for d in (1, 2):
        _, seq_path, _, _, _, _, new = fusion._fusion(part, bands, None, d, "fuse")
        assert legality.is_legal(part, new, seq_path) == _exact(kernel, bands, d)


def _prepared_network():
    """A strided convolution and four depthwise blocks (1x1 and 3x3 depthwise
    convolutions, each with its ReLU6), prepared as the accelerator scheduler
    prepares a program (biases deferred, pads inlined, homes assigned): 24
    statements whose fusion groups ask checks of parts of five."""
    from accelerator import load_config
    from schedules.accel import bias, gather, homes, inline, pads

    torch.manual_seed(0)
    mods = [torch.nn.Conv2d(8, 8, 3, stride=2, padding=1), torch.nn.ReLU6()]
    mods += [torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.ReLU6()]
    for _ in range(3):
        mods += [torch.nn.Conv2d(8, 8, 1), torch.nn.ReLU6()]
        mods += [torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.ReLU6()]
    net = torch.nn.Sequential(*mods).eval()
    kernel = polyc.from_torch(net, (torch.randn(1, 8, 16, 16),), name="net")
    spec = load_config("edge-npu")
    kernel = pads.inline_pads(inline.inline_all(bias.defer_all(kernel, spec)))
    kernel = homes.assign(pads.align_pads(kernel), spec)
    kernel, _ = layers.per_statement(kernel)
    return gather.mark_all(kernel)[0]


def test_a_large_programs_part_left_alone_is_not_built_again(monkeypatch):
    """A program split again (a network after a depthwise split,
    :mod:`schedules.accel.share`) answers the fusion checks of the parts it
    kept (a part of at most a quarter of the program, each child the same
    statement, band and domain) without building the part and printing its
    tree again (layers._alike): the same layers. The old code built every
    part of the new program (thirteenth round: 1,162 checks of
    hf-mobilenetv2 float16, about 1.3 ms each)."""
    monkeypatch.setattr(layers, "_FUSES", {})
    monkeypatch.setattr(layers, "_OWN", {})
    kernel = _prepared_network()
    n = len(kernel.statements)
    built = []
    sub_kernel = layers.sub_kernel
    monkeypatch.setattr(
        layers,
        "sub_kernel",
        lambda k, positions: built.append(tuple(positions)) or sub_kernel(k, positions),
    )
    first = [(la.name, la.depth) for la in split(kernel)]
    large = [p for p in built if layers.PART_SHARE * len(p) <= n]
    assert large  # checks on parts of a large program were made
    built.clear()
    again = kernel.replace(name="net_again")  # a new program, the same statements
    assert [(la.name, la.depth) for la in split(again)] == first
    assert not [p for p in built if layers.PART_SHARE * len(p) <= n]


def test_a_program_split_again_asks_isl_nothing_of_the_statements_it_kept(
    monkeypatch,
):
    """Splitting a rewritten program (a network after a depthwise split,
    :mod:`schedules.accel.share`) reads which children are plain bands and
    which fusions run backwards from the statements it kept, not from isl
    again (tenth round: hf-mobilenetv2 split its network again after each of
    its eight splits; thirteenth round: whether the accesses align, too)."""
    kernel, _ = layers.per_statement(_window(True))
    first = [(la.name, la.depth) for la in split(kernel)]
    asked = []
    for name in ("_identity", "_backwards", "_aligned"):
        real = getattr(layers, name)
        monkeypatch.setattr(
            layers, name, lambda *a, real=real: asked.append(a) or real(*a)
        )
    again = kernel.replace(name="window_again")  # a new program, the same statements
    assert [(la.name, la.depth) for la in split(again)] == first
    assert not asked


def test_a_fusion_over_one_batch_image_asks_no_dependences(monkeypatch):
    """A fusion whose shared iterators run over one point each (the batch of
    one image) keeps every instance's order, so it is legal without isl
    (:func:`layers._one_point`): a network split again after a depthwise split
    asked it of the split layer and the layer before, a new part each time
    (fourteenth round: 31 checks of about 50 ms in hf-mobilenetv2 float16).
    Each such answer is the exact check's, and the layers are those the
    checks give."""
    from accelerator import load_config
    from schedules.accel import share
    from schedules.accel.split import split_layer

    monkeypatch.setattr(layers, "_FUSES", {})
    monkeypatch.setattr(layers, "_OWN", {})
    kernel = _prepared_network()
    spec = load_config("edge-npu")
    found = [share._candidate(kernel, la, spec) for la in share._pieces(kernel)]
    _, stmts, its, _ = [f for f in found if f][1]
    asked, points = [], []
    fuses, one_point = layers._fuses, layers._one_point
    monkeypatch.setattr(layers, "_fuses", lambda *a: asked.append(a) or fuses(*a))

    def seen(k, group, stmt, d):
        answer = one_point(k, group, stmt, d)
        if answer:
            item = next(i for i in _items_at(k) if i[0] is stmt)
            points.append((k, [*group, item], d))
        return answer

    monkeypatch.setattr(layers, "_one_point", seen)
    split_kernel = split_layer(kernel, stmts, its, 4, 8)
    got = [(la.name, la.depth) for la in split(split_kernel)]
    assert points  # the split layer and the one before, over n = 0
    for k, items, d in points:
        part = layers.sub_kernel(k, [pos for _, _, pos in items])
        assert _exact(part, [band for _, band, _ in items], d)
    # the exact checks alone give the same layers
    monkeypatch.setattr(layers, "_one_point", lambda *a: False)
    again = split_layer(kernel, stmts, its, 4, 8)
    assert [(la.name, la.depth) for la in split(again)] == got
    assert any(d == 1 for _, _, d in asked)  # asked of isl, the old way


def _items_at(kernel):
    """``(statement, band, position)`` per top-level child, as split has them."""
    return [(*item, pos) for pos, item in enumerate(_items(kernel)) if item]
