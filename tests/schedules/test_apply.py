"""Schedules as YAML text and union maps, and replaying histories."""

from __future__ import annotations

import islpy as isl

import schedules as S
from polyc.ops import polybench as ex
from tests.support.sched import assert_same, jacobi_time_tiled


def test_yaml_round_trip_keeps_names_and_marks():
    k = S.parallel(S.tile(ex.matmul(None), "S1", [8, 8, 8]), "S1_t")
    text = S.to_yaml(k)
    assert 'mark: "S1_t(i_t, j_t, k_t)"' in text and 'mark: "@parallel"' in text
    again = S.apply_schedule(k.original, text)
    assert again.schedule.plain_is_equal(k.schedule)
    assert again.history[-1].name == "apply_schedule"
    # the flow style that str(schedule) prints loads too
    assert S.apply_schedule(k.original, str(k.schedule)).schedule.plain_is_equal(
        k.schedule
    )


def test_edited_yaml_file_loads(tmp_path):
    k = ex.matmul(6, "int32")
    path = tmp_path / "s.yaml"
    path.write_text(
        S.to_yaml(k)
        .replace("S1(i, j, k)", "S1(i, k, j)")
        # swap the last two members of S1's band
        .replace(
            "{ S1[i, j, k] -> [(j)] }, { S1[i, j, k] -> [(k)] }",
            "{ S1[i, j, k] -> [(k)] }, { S1[i, j, k] -> [(j)] }",
        )
    )
    loaded = S.apply_schedule(k, path.read_text())
    assert "S1(i, k, j)" in str(loaded.schedule)
    assert_same(k, loaded)


def test_union_map_schedule_becomes_one_named_band():
    k = ex.matmul(5, "int32")
    umap = isl.UnionMap("{ S0[i, j] -> [j, i, 0, 0]; S1[i, j, k] -> [j, i, 1, k] }")
    t = S.apply_schedule(k, umap)
    assert "T(c0, c1, c2, c3)" in str(t.schedule)
    assert_same(k, t)
    again = S.replay(k, t.history)
    assert again.schedule.plain_is_equal(t.schedule)


def test_unnamed_bands_get_names():
    k = ex.producer_consumer(None, "int32")
    text = f"""domain: "{k.domain}"
child:
  schedule: "[N] -> [{{ S0[i, j] -> [(i)]; S1[i, j] -> [(i)] }}, {{ S0[i, j] -> [(j)]; S1[i, j] -> [(j)] }}]"
  child:
    sequence:
    - filter: "[N] -> {{ S0[i, j] }}"
    - filter: "[N] -> {{ S1[i, j] }}"
"""
    t = S.apply_schedule(k, text)
    assert 'mark: "S0_S1(i, j)"' in S.to_yaml(t)
    assert_same(k, t, N=4)


def test_replay_of_long_history_reproduces_the_schedule():
    _, t = jacobi_time_tiled(None, None)
    t = S.parallel(
        S.split_band(S.skew(t, "L0_t", "t_t", {"i_t": 1}), "L0_t", 1), "L0_t_i_t"
    )
    again = S.replay(t.original, t.history)
    assert again.schedule.plain_is_equal(t.schedule)
    assert [str(s) for s in again.history] == [str(s) for s in t.history]
