"""The README's examples run, and print what the README says they print.

Each ```python block followed by a plain ``` block is run in a fresh interpreter
and the plain block's lines (but ``...``) must appear in its output, in order. The
C example is written to a file and each ``$ polyc ...`` line of the block after it
is run the same way. Cycle counts are deterministic, so a change in what the
scheduler chooses shows up here as a README that is no longer true.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, re.S)


def _examples(lang: str) -> list[tuple[str, str]]:
    """(code, shown output) for each ``lang`` block directly followed by a plain one."""
    pairs = []
    for (a, code), (b, shown) in itertools.pairwise(BLOCKS):
        if a == lang and b == "":
            pairs.append((code, shown))
    return pairs


def _assert_shows(output: str, shown: str, what: str) -> None:
    lines = [ln.rstrip() for ln in output.splitlines()]
    at = 0
    for want in shown.splitlines():
        want = want.rstrip()
        if not want or want.strip() == "...":
            continue
        try:
            at = lines.index(want, at) + 1
        except ValueError:
            pytest.fail(f"{what}: the README shows {want!r}, the run did not print it")


def _run(argv: list[str], cwd) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


PYTHON = _examples("python")


def test_readme_has_its_examples():
    assert len(PYTHON) == 2 and len(_examples("c")) == 1


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_example(index, tmp_path):
    code, shown = PYTHON[index]
    script = tmp_path / "example.py"
    script.write_text(code)
    _assert_shows(_run([sys.executable, str(script)], tmp_path), shown, "example")


def test_c_example(tmp_path):
    ((source, shown),) = _examples("c")
    (tmp_path / "gemm.c").write_text(source)
    command, expected = None, []
    runs = []
    for line in shown.splitlines():
        if line.startswith("$ "):
            if command:
                runs.append((command, expected))
            command, expected = line[2:].split("#")[0].split(), []
        else:
            expected.append(line)
    runs.append((command, expected))
    for command, expected in runs:
        assert command[0] == "polyc"
        argv = [sys.executable, "-m", "polyc.cli", *command[1:]]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        _assert_shows(done.stdout + done.stderr, "\n".join(expected), " ".join(command))
