"""The op-coverage table in docs/torch-ops.md is the registry's, not stale."""

from __future__ import annotations

from polyc.frontends.torch import coverage
from polyc.frontends.torch.lowerings import LOWERINGS
from tests.support.paths import ROOT


def test_committed_table_is_current():
    path = ROOT / "docs" / "torch-ops.md"
    text = path.read_text()
    assert text == coverage.render(text), (
        "docs/torch-ops.md is out of date: run "
        "python -m polyc.frontends.torch.coverage --write docs/torch-ops.md"
    )


def test_every_aten_lowering_is_a_row_in_a_known_family():
    rows = coverage.rows()
    assert {packet for _, packet, _, _ in rows} == {
        p for p in LOWERINGS if p.startswith("aten.")
    }
    assert {family for family, *_ in rows} <= set(coverage.FAMILIES.values())
