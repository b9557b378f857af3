"""The measured tables of the docs are what the committed JSON renders
(``python -m bench.results_md --check``), and the marker rewrite they use.

No benchmark runs here: the check renders ``bench/results/*.json`` with each
benchmark's own rendering function and compares with ``docs/``.
"""

from __future__ import annotations

import inspect
import shutil

import pytest

from bench import fuzz, results_md, run_all
from bench.common import (
    RESULTS,
    SectionError,
    begin_marker,
    read_section,
    replace_section,
)

DOC = (
    f"intro\n\n{begin_marker('t')}\n| a |\n|---|\n| 1 |\n<!-- end table -->\n\nprose\n"
)


def test_docs_tables_are_what_the_committed_json_renders():
    assert results_md.check() == []
    assert results_md.main(["--check"]) == 0


def test_check_names_the_section_that_differs(tmp_path, capsys):
    docs = tmp_path / "docs"
    shutil.copytree(results_md.DOCS, docs)
    text = (docs / "results.md").read_text()
    # one cell of the roofline table, edited by hand (whatever the last run measured)
    row = next(ln for ln in text.splitlines() if ln.startswith("| tiny | gemm_256 | "))
    cell = "| ".join(row.split("| ")[:4])  # "| tiny | gemm_256 | <cycles> "
    edited = text.replace(cell, "| tiny | gemm_256 | 1 ")
    assert edited != text
    (docs / "results.md").write_text(edited)
    problems = results_md.check(docs=docs)
    assert len(problems) == 1
    assert problems[0].startswith("docs/results.md: table roofline is not what")
    assert cell in problems[0]
    assert results_md.regenerate(docs=docs, quiet=True) == ["roofline"]
    assert (docs / "results.md").read_text() == text
    assert results_md.check(docs=docs) == []


def test_check_reports_a_removed_section(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(results_md.DOCS, docs)
    text = (docs / "results.md").read_text()
    (docs / "results.md").write_text(text.replace(begin_marker("study"), ""))
    (problem,) = results_md.check(docs=docs)
    assert "table study" in problem and "is not in it" in problem


def test_replace_section_rewrites_only_the_body():
    new = replace_section(DOC, "t", "| a |\n|---|\n| 2 |\n")
    assert new == (
        f"intro\n\n{begin_marker('t')}\n\n| a |\n|---|\n| 2 |\n\n<!-- end table -->"
        "\n\nprose\n"
    )
    assert read_section(new, "t") == "| a |\n|---|\n| 2 |"
    assert replace_section(new, "t", read_section(new, "t")) == new


def test_a_section_without_its_end_marker_is_an_error():
    unclosed = DOC.replace("<!-- end table -->\n", "")
    with pytest.raises(
        SectionError,
        match=r"rewrite x.md: table section 't' is not closed because no "
        r"<!-- end table --> follows its <!-- table: t --> \(line 3\)",
    ):
        replace_section(unclosed, "t", "| b |", where="x.md")
    # the end marker of a later section does not close this one
    later = unclosed + f"{begin_marker('u')}\n| u |\n<!-- end table -->\n"
    with pytest.raises(SectionError, match="'t' is not closed"):
        read_section(later, "t")


def test_a_missing_or_repeated_begin_marker_is_an_error():
    with pytest.raises(SectionError, match=r"no table section 'v' because the line"):
        replace_section(DOC, "v", "| b |")
    with pytest.raises(SectionError, match=r"'t' is ambiguous because .* 2 times"):
        replace_section(DOC + DOC, "t", "| b |")


def test_a_missing_json_is_an_error(tmp_path):
    section = results_md.SECTIONS[0]
    with pytest.raises(SectionError, match=r"bench/results/.* does not exist\. Run"):
        section.body(results=tmp_path)


def test_a_quick_run_rewrites_no_section():
    assert results_md.regenerate_for(RESULTS / "sim_overhead_quick.json") == []


def test_fuzz_totals_use_the_same_markers():
    read_section(fuzz.DOC.read_text(), fuzz.SECTION)


def test_run_all_runs_only_benchmarks():
    names = run_all.benchmarks()
    assert "results_md" not in names and "common" not in names
    assert {"roofline", "host_c", "sched", "study"} <= set(names)


@pytest.mark.parametrize("name", run_all.benchmarks())
def test_every_benchmark_main_returns_an_exit_status(name):
    # run_all counts any other return value as a failure: bench.sched's main
    # returned its report dict, so `make bench` listed it as failed
    module = __import__(f"bench.{name}", fromlist=["main"])
    assert inspect.signature(module.main).return_annotation == "int"


def test_a_fuzz_run_into_another_record_leaves_the_docs(tmp_path, monkeypatch):
    """``--record`` elsewhere (a trial on a branch) must not rewrite docs/fuzz.md
    from that record: it is the repository's totals."""
    import shutil

    written = []
    monkeypatch.setattr(fuzz, "write_table", written.append)
    other = tmp_path / "trial.jsonl"
    shutil.copy(fuzz.RECORD, other)
    assert fuzz.main(["--report", "--record", str(other)]) == 0
    assert written == []
    assert fuzz.main(["--report"]) == 0
    assert len(written) == 1
