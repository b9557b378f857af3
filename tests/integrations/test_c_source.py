"""Source-to-source: rewritten files compile with gcc in place of the original and
compute the same bits; schedules from isl YAML are checked; regions polyc cannot model
are left as they are; the CLI writes the file and prints schedules."""

from __future__ import annotations

import subprocess

import pytest

from polyc import cli
from polyc.errors import IllegalTransformError, ScheduleError
from polyc.integrations.c_source import compile_c

CFLAGS = [
    "-O1",
    "-std=gnu11",
    "-ffp-contract=off",
    "-Wall",
    "-Werror",
    "-Wno-unknown-pragmas",
]

TRANSPOSE_ADD = """#include <stdio.h>
void f(int n, double A[n][n], double B[n][n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      A[i][j] = A[i][j] * 0.5 + B[j][i];
#pragma endscop
}
int main(void) {
  double A[7][7], B[7][7];
  for (int i = 0; i < 7; i++)
    for (int j = 0; j < 7; j++) { A[i][j] = i * 0.25 + j; B[i][j] = j * 0.125 - i; }
  f(7, A, B);
  for (int i = 0; i < 7; i++)
    for (int j = 0; j < 7; j++) printf("%a\\n", A[i][j]);
  return 0;
}
"""

INTERCHANGED = (
    '{ domain: "[n] -> { S0[i, j] : 0 <= i < n and 0 <= j < n }", child: { mark: '
    '"L0(j, i)", child: { schedule: "[n] -> [{ S0[i, j] -> [(j)] }, '
    '{ S0[i, j] -> [(i)] }]" } } }'
)


def run_c(tmp_path, name: str, text: str) -> str:
    src = tmp_path / f"{name}.c"
    src.write_text(text)
    exe = tmp_path / name
    subprocess.run(
        ["gcc", *CFLAGS, str(src), "-lm", "-o", str(exe)],
        check=True,
        capture_output=True,
        text=True,
    )
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def test_rewritten_file_keeps_everything_outside_the_region():
    out = compile_c(TRANSPOSE_ADD).text
    before, _, _ = TRANSPOSE_ADD.partition("#pragma scop")
    _, _, after = TRANSPOSE_ADD.partition("#pragma endscop\n")
    assert out.startswith(before)
    assert out.endswith(after)
    assert "#pragma scop" not in out


def test_interchanged_schedule_from_yaml_runs_bit_for_bit(tmp_path):
    result = compile_c(TRANSPOSE_ADD, schedule=INTERCHANGED)
    assert result.regions[0].schedule == "file"
    body = result.text.split("/* polyc: region f */")[1]
    assert body.index("long j") < body.index("long i")  # j is now the outer loop
    want = run_c(tmp_path, "orig", TRANSPOSE_ADD)
    assert run_c(tmp_path, "new", result.text) == want


def test_illegal_yaml_schedule_is_refused():
    source = TRANSPOSE_ADD.replace("+ B[j][i]", "+ A[i - 1][j + 1]").replace(
        "int i = 0;", "int i = 1;"
    )
    source = source.replace("j < n; j++)\n      A", "j < n - 1; j++)\n      A")
    from polyc.frontends.c.parse import from_c

    (kernel,) = from_c(source)
    yaml = str(kernel.schedule).replace("L0(i, j)", "L0(j, i)")
    yaml = yaml.replace("-> [(i)]", "-> [(TMP)]").replace("-> [(j)]", "-> [(i)]")
    yaml = yaml.replace("-> [(TMP)]", "-> [(j)]")
    with pytest.raises(IllegalTransformError, match=r"would run backwards"):
        compile_c(source, schedule=yaml)


def test_schedule_file_must_have_one_document_per_region():
    with pytest.raises(ScheduleError, match=r"has 2 YAML documents but the file has 1"):
        compile_c(TRANSPOSE_ADD, schedule=INTERCHANGED + "\n---\n" + INTERCHANGED)


def test_unmodellable_region_is_left_as_it_is_and_reported(tmp_path):
    bad = TRANSPOSE_ADD.replace("A[i][j] * 0.5", "A[i][(int)B[i][j] % 7] * 0.5")
    result = compile_c(bad)
    (report,) = result.regions
    assert not report.replaced
    assert "cannot model" in report.message and ":6:" in report.message
    assert result.text == bad


def test_iterator_read_after_the_region_keeps_the_region(tmp_path):
    source = """#include <stdio.h>
void f(int n, double A[n]) {
  int i;
#pragma scop
  for (i = 0; i < n; i++)
    A[i] = 2.0 * A[i];
#pragma endscop
  printf("%d\\n", i);
}
"""
    result = compile_c(source)
    assert not result.regions[0].replaced
    assert "loop iterator i is read after the region" in result.regions[0].message
    assert result.text == source


def test_user_macros_named_like_the_helpers_survive(tmp_path):
    source = """#include <stdio.h>
#define min(a, b) 42
void f(int n, double A[n][n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i && j < n - 3; j++)
      A[i][j] += 1.0;
#pragma endscop
}
int main(void) {
  double A[9][9] = {{0}};
  f(9, A);
  double s = 0;
  for (int i = 0; i < 9; i++) for (int j = 0; j < 9; j++) s += A[i][j] * (i + 1);
  printf("%a %d\\n", s, min(1, 2));
  return 0;
}
"""
    out = compile_c(source).text
    assert '#pragma push_macro("min")' in out and '#pragma pop_macro("min")' in out
    assert run_c(tmp_path, "new", out) == run_c(tmp_path, "orig", source)


PRIVATE = """#include <stdio.h>
void f(int n, double A[n], double B[n]) {
  double t;
#pragma scop
  for (int i = 0; i < n; i++) {
    t = A[i] * A[i];
    B[i] = t + 1.0;
  }
#pragma endscop
}
int main(void) {
  double A[6], B[6];
  for (int i = 0; i < 6; i++) { A[i] = i * 0.5; B[i] = 0; }
  f(6, A, B);
  for (int i = 0; i < 6; i++) printf("%a\\n", B[i]);
  return 0;
}
"""

DISTRIBUTED = """domain: "[n] -> { S0[i] : 0 <= i < n; S1[i] : 0 <= i < n }"
child:
  sequence:
  - filter: "[n] -> { S0[i] }"
    child:
      schedule: "[n] -> [{ S0[i] -> [(i)] }]"
  - filter: "[n] -> { S1[i] }"
    child:
      schedule: "[n] -> [{ S1[i] -> [(i)] }]"
"""


def test_private_scalar_stays_a_scalar_in_program_order(tmp_path):
    result = compile_c(PRIVATE)
    assert "malloc" not in result.text
    assert run_c(tmp_path, "new", result.text) == run_c(tmp_path, "orig", PRIVATE)


def test_private_scalar_is_expanded_when_the_schedule_needs_it(tmp_path):
    result = compile_c(PRIVATE, schedule=DISTRIBUTED)
    assert "double *t_p = (double *)malloc(sizeof(double[n]));" in result.text
    assert "free(t_p);" in result.text
    assert "#include <stdlib.h>" in result.text
    assert run_c(tmp_path, "new", result.text) == run_c(tmp_path, "orig", PRIVATE)


def test_cli_writes_the_file_and_prints_schedules(tmp_path, capsys):
    src = tmp_path / "k.c"
    src.write_text(TRANSPOSE_ADD)
    out = tmp_path / "k_polyc.c"
    assert cli.main(["compile", str(src), "-o", str(out)]) == 0
    assert "/* polyc: region f */" in out.read_text()
    assert "region f rewritten (original schedule)" in capsys.readouterr().err
    assert cli.main(["compile", str(src), "--print-schedule"]) == 0
    printed = capsys.readouterr().out
    assert 'mark: "L0(i, j)"' in printed
    # block style, as schedules.to_yaml writes (it was isl's one-line flow style)
    assert "\ndomain: " in printed and "\nchild:\n" in printed
    assert "{ domain:" not in printed
    yaml = tmp_path / "s.yaml"
    yaml.write_text(INTERCHANGED)
    assert cli.main(["compile", str(src), "--schedule", str(yaml), "-o", str(out)]) == 0
    assert run_c(tmp_path, "cli", out.read_text()) == run_c(
        tmp_path, "o", TRANSPOSE_ADD
    )


def test_cli_reports_errors_without_a_traceback(tmp_path, capsys):
    src = tmp_path / "k.c"
    src.write_text(TRANSPOSE_ADD)
    yaml = tmp_path / "s.yaml"
    yaml.write_text("{ domain: oops")
    assert cli.main(["compile", str(src), "--schedule", str(yaml)]) == 2
    # schedules.apply_schedule reads the file and names the problem
    assert (
        "polyc compile: apply_schedule: the text is not an isl schedule"
        in capsys.readouterr().err
    )


def test_cli_config_runs_each_region_on_the_simulator(tmp_path, capsys):
    src = tmp_path / "k.c"
    src.write_text(TRANSPOSE_ADD)
    assert cli.main(["compile", str(src), "--config", "tiny", "--param", "n=4"]) == 0
    out = capsys.readouterr().out
    assert "== region f on tiny" in out and "cycles" in out
    assert "outputs match the interpreter: yes" in out
    assert cli.main(["compile", str(src), "--config", "tiny"]) == 2
    assert "needs values for n because --config runs the kernel" in (
        capsys.readouterr().err
    )


LINEARISED = """#include <stdio.h>
#include <stdlib.h>
void mm(int n, int m, int p, const double *A, const double *B, double *C) {
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      C[i * m + j] = 0.0;
      for (int k = 0; k < p; k++)
        C[i * m + j] += A[i * p + k] * B[k * m + j];
    }
#pragma endscop
}
int main(void) {
  int n = 5, m = 4, p = 3;
  double *A = malloc(sizeof(double) * n * p), *B = malloc(sizeof(double) * p * m), *C = malloc(sizeof(double) * n * m);
  for (int i = 0; i < n * p; i++) A[i] = i * 0.5;
  for (int i = 0; i < p * m; i++) B[i] = i - 2.25;
  mm(n, m, p, A, B, C);
  for (int i = 0; i < n * m; i++) printf("%a\\n", C[i]);
  return 0;
}
"""


def test_linearised_indexing_is_modelled_and_written_back(tmp_path):
    """Pluto#19: a matrix in one block, indexed i * m + j with m a parameter."""
    from polyc.frontends.c.parse import from_c

    (kernel,) = from_c(LINEARISED)
    assert [str(d) for d in kernel.arrays["C"].shape] == ["n", "m"]
    assert [str(d) for d in kernel.arrays["A"].shape] == ["n", "p"]
    out = compile_c(LINEARISED).text
    assert "C[((i) * m + (j))]" in out
    assert run_c(tmp_path, "new", out) == run_c(tmp_path, "orig", LINEARISED)


DATA_IF = """#include <stdio.h>
#include <math.h>
void f(int n, double A[n], double B[n], int cnt[n]) {
#pragma scop
  for (int i = 0; i < n; i++) {
    if (A[i] > 0.5) {
      A[i] = 0.0;
      B[i] = A[i] + 1.0;
      if (B[i] > 0.0 && i % 2 == 0)
        cnt[i] += 3;
      else
        cnt[i] -= 1;
    } else {
      for (int j = 0; j < i; j++)
        B[i] += sqrt(A[j]);
    }
  }
#pragma endscop
}
int main(void) {
  double A[9], B[9]; int cnt[9];
  for (int i = 0; i < 9; i++) { A[i] = (i * 7 % 10) / 10.0; B[i] = i; cnt[i] = i; }
  f(9, A, B, cnt);
  for (int i = 0; i < 9; i++) printf("%a %a %d\\n", A[i], B[i], cnt[i]);
  return 0;
}
"""


def test_conditions_on_data_are_if_converted(tmp_path):
    """if (A[i] > 0.5) ...: the condition is computed once into a private flag and
    each assignment under it keeps its old value where the flag is false."""
    from polyc.frontends.c.parse import from_c

    (kernel,) = from_c(DATA_IF)
    assert "polyc_c0" in kernel.arrays and str(kernel.statements[1].body) == (
        "select(polyc_c0[i], 0.0, A[i])"
    )
    want = run_c(tmp_path, "orig", DATA_IF)
    assert run_c(tmp_path, "new", compile_c(DATA_IF).text) == want
    auto = compile_c(DATA_IF, schedule="auto").text
    assert run_c(tmp_path, "auto", auto.replace("#pragma omp", "// omp")) == want


TWO_REGIONS = """#include <stdio.h>
void f(int n, int T, double A[n][n], double B[n]) {
  for (int t = 0; t < T; t++) {
#pragma scop
    for (int i = t; i < n; i++)
      B[i] = B[i] + A[t][i];
#pragma endscop
    B[0] += 1.0;
#pragma scop
    for (int i = 1; i < n; i++)
      for (int j = 0; j < i; j++)
        A[i][j] = A[i][j] * 0.5 + B[j];
#pragma endscop
  }
}
int main(void) {
  double A[6][6], B[6];
  for (int i = 0; i < 6; i++) { B[i] = i; for (int j = 0; j < 6; j++) A[i][j] = i - j * 0.5; }
  f(6, 3, A, B);
  for (int i = 0; i < 6; i++) { printf("%a\\n", B[i]); for (int j = 0; j < 6; j++) printf("%a\\n", A[i][j]); }
  return 0;
}
"""


def test_two_regions_inside_a_loop_of_the_function(tmp_path):
    """The enclosing loop's iterator t is a parameter of both regions."""
    result = compile_c(TWO_REGIONS, schedule="auto")
    assert [r.name for r in result.regions] == ["f_1", "f_2"]
    assert "t" in result.regions[0].kernel.params  # for (int i = t; ...)
    want = run_c(tmp_path, "orig", TWO_REGIONS)
    rewritten = result.text.replace("#pragma omp", "// omp")
    assert run_c(tmp_path, "new", rewritten) == want
