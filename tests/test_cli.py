"""Every misuse of the ``polyc`` command line ends in one paragraph on stderr, in the
house format, and exit status 2: never a traceback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from polyc.cli import main

KERNEL = """\
/* scale: a loop nest whose system includes are not on the first line */
#include <stdio.h>
#include <unistd.h>

void scale(double A[8][8]) {
#pragma scop
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++)
      A[i][j] = A[i][j] * 2.0;
#pragma endscop
}
"""

SYMBOLIC = """\
void scale(int n, double A[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    A[i] = A[i] * 2.0;
#pragma endscop
}
"""


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A directory of inputs, good and bad, as the working directory."""
    monkeypatch.chdir(tmp_path)
    Path("k.c").write_text(KERNEL)
    Path("n.c").write_text(SYMBOLIC)
    Path("empty.c").write_text("")
    Path("noscop.c").write_text("#include <stdio.h>\nint main(void) { return 0; }\n")
    Path("dir.c").mkdir()
    Path("notsweep.json").write_text(json.dumps({"a": 1}))
    Path("broken.json").write_text("{ not json")
    return tmp_path


# argv, then a pattern the message must match (after the "polyc ...:" prefix)
CASES = {
    "missing C file": (
        ["compile", "nonexistent.c"],
        r"nonexistent\.c: c frontend: cannot read the C file because it does not "
        r"exist in .*\. Check the path\.",
    ),
    "directory as the C file": (
        ["compile", "dir.c"],
        r"dir\.c: c frontend: cannot read the C file because it is a directory\. "
        r"Pass the path of a \.c file\.",
    ),
    "empty C file": (
        ["compile", "empty.c"],
        r"empty\.c has no loop nest to compile because the file is empty\.",
    ),
    "no scop region": (
        ["compile", "noscop.c"],
        r"found no #pragma scop regions in noscop\.c because the file has none\. "
        r"Mark each loop nest",
    ),
    "no scop region, accelerator": (
        ["compile", "noscop.c", "--config", "tiny"],
        r"found no #pragma scop regions in noscop\.c",
    ),
    "missing schedule file": (
        ["compile", "k.c", "--schedule", "nonexistent.yaml"],
        r"cannot read the schedule file nonexistent\.yaml because it does not exist\. "
        r"Pass 'auto' or an isl YAML file",
    ),
    "directory as the schedule": (
        ["compile", "k.c", "--schedule", "."],
        r"cannot read the schedule file \. because it is a directory\.",
    ),
    "missing schedule file, accelerator": (
        ["compile", "k.c", "--config", "tiny", "--schedule", "nonexistent.yaml"],
        r"cannot read the schedule file nonexistent\.yaml because it does not exist",
    ),
    "unknown config": (
        ["compile", "k.c", "--config", "nosuch"],
        r"load_config: no hardware description 'nosuch' because it is neither a "
        r"shipped config",
    ),
    "param without '='": (
        ["compile", "n.c", "--config", "tiny", "--param", "n"],
        r"--param 'n' is not NAME=INTEGER because it has no '='\. Write e\.g\. "
        r"--param n=64\.",
    ),
    "param not an integer": (
        ["compile", "n.c", "--config", "tiny", "--param", "n=abc"],
        r"--param 'n=abc' is not NAME=INTEGER because its value 'abc' is not an "
        r"integer\. Write e\.g\. --param n=64\.",
    ),
    "param without a name": (
        ["compile", "n.c", "--config", "tiny", "--param", "=3"],
        r"--param '=3' is not NAME=INTEGER because '' is not a C identifier\.",
    ),
    "output in a missing directory": (
        ["compile", "k.c", "-o", "nowhere/out.c"],
        r"cannot write nowhere/out\.c because its directory does not exist\. Pass -o",
    ),
    "explain: missing argument": (
        ["explain", "matmul:M=64,N=64"],
        r"op spec: op 'matmul:M=64,N=64' is missing K because polyc\.ops\.matmul "
        r"needs M, N, K\. Add K=VALUE\.",
    ),
    "explain: unknown argument": (
        ["explain", "matmul:M=64,N=64,K=64,Q=3"],
        r"op spec: op 'matmul:M=64,N=64,K=64,Q=3' has the unknown argument Q because "
        r"polyc\.ops\.matmul takes M, N, K, dtype\. Remove Q\.",
    ),
    "explain: unknown argument of a one-tensor op": (
        ["explain", "relu:input=4x4,slope=3"],
        r"has the unknown argument slope because polyc\.ops\.relu takes input, dtype",
    ),
    "explain: near-miss argument": (
        ["explain", "conv2d:input=1x4x8x8,weight=4x4x3x3,paddin=1"],
        r"has the unknown argument paddin because .*\. Did you mean padding\?",
    ),
    "explain: too many positional arguments": (
        ["explain", "matmul:8,8,8,float32,5"],
        r"op 'matmul:8,8,8,float32,5' does not fit polyc\.ops\.matmul.* because too "
        r"many positional arguments\.",
    ),
    "explain: word for a size": (
        ["explain", "matmul:M=abc,N=64,K=64"],
        r"explain: op 'matmul:M=abc,N=64,K=64' gives M the word 'abc' because M must "
        r"be an integer such as 64 .*Write M=64\.",
    ),
    "explain: word for a shape": (
        ["explain", "conv2d:input=abc,weight=8x3x3x3"],
        r"gives input the word 'abc' because input must be a shape such as 1x8x16x16",
    ),
    "explain: empty value": (
        ["explain", "matmul:M=,N=8,K=8"],
        r"op spec: op text 'matmul:M=,N=8,K=8' has the argument 'M=' with no value",
    ),
    "explain: unknown op": (
        ["explain", "matmull:M=8,N=8,K=8"],
        r"op spec: unknown op 'matmull' because .*Did you mean 'matmul'\?",
    ),
    "explain: unknown config": (
        ["explain", "matmul:M=8,N=8,K=8", "--config", "nosuch"],
        r"load_config: no hardware description 'nosuch'",
    ),
    "explain: trace in a missing directory": (
        ["explain", "relu:input=4x4", "--config", "tiny", "--trace", "no/t.json"],
        r"explain: cannot write --trace no/t\.json because its directory no does not "
        r"exist\.",
    ),
    "explain: negative size": (
        ["explain", "matmul:M=-8,N=8,K=8", "--config", "tiny"],
        r"shape: extent -8 of A dim 0 is not positive because sizes start at 1\.",
    ),
    "sweep: missing result file": (
        ["sweep", "--from", "nonexistent.json"],
        r"sweep: cannot load nonexistent\.json because it does not exist\. Pass a "
        r"sweep\.json written by 'polyc sweep --out'",
    ),
    "sweep: not a sweep result": (
        ["sweep", "--from", "notsweep.json"],
        r"sweep: notsweep\.json is not a sweep result because it has no list of point "
        r"records under 'records' \(its top-level keys are a\)\.",
    ),
    "sweep: not JSON": (
        ["sweep", "--from", "broken.json"],
        r"sweep: cannot load broken\.json because it is not JSON \(",
    ),
    "sweep: directory as the result": (
        ["sweep", "--from", "."],
        r"sweep: cannot load \. because it is a directory\.",
    ),
    "sweep: missing argument": (
        ["sweep", "--ops", "matmul:M=8", "--configs", "tiny", "--jobs", "1"],
        r"op 'matmul:M=8' is missing N, K because .* Add N=VALUE,K=VALUE\.",
    ),
    "sweep: out is a file": (
        ["sweep", "--from", "notsweep.json", "--out", "k.c"],
        r"sweep: cannot write the results to k\.c because it is a file, not a "
        r"directory\.",
    ),
    "sweep: no workers": (
        ["sweep", "--ops", "relu:input=4x4", "--configs", "tiny", "--jobs", "0"],
        r"sweep: jobs=0 is not a number of processes because it is not a positive int",
    ),
    "compile: negative --max-seconds": (
        ["compile", "k.c", "--schedule", "auto", "--max-seconds", "-1"],
        r"compile: --max-seconds '-1' is not a budget because it is not a "
        r"non-negative number of seconds\.",
    ),
    "compile: --max-operations not a number": (
        ["compile", "k.c", "--schedule", "auto", "--max-operations", "lots"],
        r"compile: --max-operations 'lots' is not a budget because it is not a "
        r"non-negative integer\.",
    ),
    "compile: unknown --fusion": (
        ["compile", "k.c", "--schedule", "auto", "--fusion", "all"],
        r"compile: --fusion 'all' is not a fusion strategy because the strategies "
        r"are max, smart and none\.",
    ),
    "compile: --cache of an unknown level": (
        ["compile", "k.c", "--schedule", "auto", "--cache", "l2=2M,l4=1G"],
        r"compile: --cache 'l4=1G' is not a cache size because a size reads "
        r"LEVEL=BYTES with LEVEL l1, l2 or l3",
    ),
    "compile: --cache without --schedule auto": (
        ["compile", "k.c", "--cache", "l2=2M"],
        r"compile: --cache has no effect because it tunes the automatic scheduler",
    ),
    "compile: --fusion without --schedule auto": (
        ["compile", "k.c", "--fusion", "max"],
        r"compile: --fusion has no effect because it tunes the automatic scheduler",
    ),
    "demo: size 0 (the safety net in main)": (
        ["demo", "--size", "0"],
        r"polyc demo: shape: extent 0 of .* is not positive because sizes start at 1",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_misuse_is_one_paragraph_and_exit_2(name, files, capsys):
    argv, pattern = CASES[name]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert re.search(pattern, err), err
    assert len(err.splitlines()) == 1, err  # one paragraph, one line
    assert re.match(r"polyc( \w+)?: ", err), err
    assert " because " in err and err.endswith((".", "?")), err


def test_every_message_names_its_operation(files, capsys):
    """The house format starts with the operation: no "compile: compile:" echo."""
    for argv in (["compile", "k.c", "--schedule", "x.yaml"], ["compile", "empty.c"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("polyc compile: ") and "compile: compile:" not in err


def test_argparse_misuse_returns_2(files, capsys):
    assert main(["compile", "k.c", "--config", "tiny", "--param"]) == 2
    assert "argument --param: expected one argument" in capsys.readouterr().err
    assert main(["explain"]) == 2
    assert "the following arguments are required: OP" in capsys.readouterr().err
    assert main(["nosuchcommand"]) == 2
    assert "invalid choice: 'nosuchcommand'" in capsys.readouterr().err


def test_good_runs_still_exit_0(files, capsys):
    """The file of finding 6 (system includes after line 1) compiles, both ways."""
    assert main(["compile", "k.c", "-o", "out.c"]) == 0
    assert "/* polyc: region scale */" in Path("out.c").read_text()
    assert main(["compile", "n.c", "--config", "tiny", "--param", "n=16"]) == 0
    assert "outputs match the interpreter: yes" in capsys.readouterr().out


def test_the_installed_command_exits_2_without_a_traceback(files):
    polyc = Path(sys.executable).with_name("polyc")
    for argv in (["compile", "nonexistent.c"], ["explain", "matmul:M=64,N=64"]):
        proc = subprocess.run(
            [str(polyc), *argv], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("polyc"), proc.stderr


TWO_REGIONS = """\
void f(int n, double A[n], double B[n][n], double C[n][n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    A[i] = A[i] + 1.0;
#pragma endscop
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++)
        C[i][j] += B[i][k] * B[k][j] + C[i][j] * 0.5;
#pragma endscop
}
"""


def test_a_region_past_its_budget_is_left_as_written(files, capsys):
    # 1,000 isl operations schedule the one-statement copy but not the product
    Path("two.c").write_text(TWO_REGIONS)
    argv = ["compile", "two.c", "--schedule", "auto", "--max-operations", "1000"]
    assert main([*argv, "-o", "out.c"]) == 0
    err = capsys.readouterr().err
    assert "two.c:3-6: region f_1 rewritten (auto schedule: isl)" in err
    assert re.search(
        r"two\.c:7-12: warning: two\.c:7: compile: region f_2 left as it is because "
        r"its automatic schedule failed: auto: isl's scheduler ran past its budget "
        r"of 1000 operations",
        err,
    ), err
    out = Path("out.c").read_text()
    assert "/* polyc: region f_1 */" in out and "/* polyc: region f_2 */" not in out
    assert "C[i][j] += B[i][k] * B[k][j] + C[i][j] * 0.5;" in out


def test_auto_reports_the_step_that_won_and_takes_the_flags(files, capsys):
    Path("two.c").write_text(TWO_REGIONS)
    argv = ["compile", "two.c", "--schedule", "auto", "--fusion", "none"]
    assert main([*argv, "--max-seconds", "30", "-o", "out.c"]) == 0
    err = capsys.readouterr().err
    assert err.count("(auto schedule: ") == 2, err
    assert "/* polyc: region f_2 */" in Path("out.c").read_text()
