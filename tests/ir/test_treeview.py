"""The compact schedule-tree view (polyc.ir.treeview) and where people see it:
print(kernel), print(compiled), polyc explain."""

from __future__ import annotations

import pytest

import polyc
import schedules
from polyc.cli import main
from polyc.ir.treeview import tree_nodes, tree_text

CONV = "conv2d:input=1x8x16x16,weight=16x8x3x3,padding=1"


@pytest.fixture(scope="module")
def conv():
    kernel = polyc.ops.conv2d((1, 8, 16, 16), (16, 8, 3, 3), padding=1)
    return kernel, polyc.compile(kernel, config="tiny")


def test_a_placed_conv_reads_in_one_short_line_per_node(conv):
    _, compiled = conv
    text = tree_text(compiled.kernel.schedule)
    lines = text.splitlines()
    assert len(lines) < 30, text
    assert lines[0] == "domain S0(n, o, h, w); S1(n, o, h, w, rc, rh, rw)"
    assert "  band L0(n_t, o_t)  tiles o=8" in lines
    assert any(
        line.strip().startswith("S0, S1: band L0_h_t(h_t, w_t)  tiles h=4 w=4")
        for line in lines
    )
    assert any(
        line.strip() == "buffer input_l1_0: input[1x8x6x6] in l1, 3 slots, copy in"
        for line in lines
    )
    tensorize = [line for line in lines if "tensorize S1" in line]
    assert len(tensorize) == 1 and tensorize[0].endswith("[mac_array]")
    assert "(calls pc_mac_S1)" in tensorize[0]
    assert any(line.strip() == "band S0(n, o, h, w)  [vector]" for line in lines)
    assert any(line.strip() == "pc_in_input_l1_0  [dma]" for line in lines)
    # none of the code generator's fields, no isl maps, no long lines
    assert "|" not in text and "lo=" not in text and "{ [" not in text
    assert max(len(line) for line in lines) < 100
    # the scalar loops of the tensorized statement are not shown
    assert "band S1(" not in text


def test_nodes_carry_statements_and_paths_back_into_the_tree(conv):
    from polyc.ir import tree

    _, compiled = conv
    sched = compiled.kernel.schedule
    nodes = tree_nodes(sched)
    band = next(n for n in nodes if n.text.startswith("band L0("))
    assert {"S0", "S1"} <= band.stmts
    assert tree.at(sched, band.path).get_type().name == "band"
    mac = next(n for n in nodes if n.kind == "tensorize")
    assert mac.stmts == {"S1"} and mac.engine == "mac_array"


def test_host_schedule_shows_tiles_and_attribute_marks():
    k = polyc.ops.matmul(64, 64, 64)
    k = schedules.tile(k, "S1", [16, 8, 4])
    k = schedules.parallel(k, "S1_t")
    text = tree_text(k.schedule)
    line = next(line for line in text.splitlines() if "band S1_t(" in line)
    assert "tiles i=16 j=8 k=4" in line and "@parallel" in line, text
    # nothing runs on an engine before placement
    assert "[" not in text.replace("band", "")


def test_placed_loop_nest_shows_the_mac_call_not_the_loops_it_replaced(conv):
    _, compiled = conv
    nest = compiled.kernel.loop_nest()
    assert "pc_mac_S1(0, o_t, h_t, w_t)" in nest
    # before: the S1 loops printed under the call as if they ran too
    assert "# S1" not in nest and "for rc in" not in nest
    assert "pc_vector(S0)" in nest


def test_printed_kernel_has_the_tree_and_a_short_history(conv):
    kernel, compiled = conv
    text = str(compiled.kernel)
    assert "schedule tree:\n  domain S0(n, o, h, w)" in text
    history = text.split("history:\n", 1)[1]
    # the history held the whole isl YAML as one escaped string
    assert "\\n" not in history and "domain:" not in history
    assert "apply_schedule(<schedule tree: " in history
    # printing is only printing: the recorded step replays
    again = schedules.replay(kernel, compiled.kernel.history)
    assert tree_text(again.schedule) == tree_text(compiled.kernel.schedule)


def test_printed_compiled_shows_the_tree(conv):
    _, compiled = conv
    text = str(compiled)
    assert "  schedule tree:\n    domain S0(n, o, h, w)" in text
    assert "[mac_array]" in text


def test_explain_default_is_the_compact_view(capsys):
    assert main(["explain", CONV, "--config", "tiny"]) == 0
    text = capsys.readouterr().out
    tree = text.split("== schedule tree ==\n", 1)[1].split("\n\n", 1)[0]
    assert 10 < len(tree.splitlines()) < 30, tree
    assert "== run ==" in text and "cycles (predicted" in text
    # raw isl only on request
    assert "| array=" not in text and "schedule:" not in text
    assert "== kernel ==" not in text
    assert main(["explain", CONV, "--config", "tiny", "--relations", "--no-run"]) == 0
    full = capsys.readouterr().out
    assert "== schedule tree (isl YAML) ==" in full and "| array=" in full
    assert "== kernel ==" in full


def test_a_zero_init_folded_into_the_mac_calls_prints_no_loops():
    compiled = polyc.compile(polyc.ops.matmul(64, 64, 64), config="edge-npu")
    nest = compiled.kernel.loop_nest()
    # the C has no loops for it: the next MAC calls overwrite instead of adding
    assert "/* S0: folded */" in compiled.c_source
    # before: the loop nest printed S0's loops as if they ran
    assert "# band S0: S0 folded into pc_mac_S1" in nest
    assert "# S0" not in nest and "= 0.0" not in nest
    tree = tree_text(compiled.kernel.schedule)
    assert "band S0(i, j)  [mac_array: folded into pc_mac_S1]" in tree
