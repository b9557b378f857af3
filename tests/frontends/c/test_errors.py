"""One test per FrontendError of the C frontend: the message names the construct,
why it cannot be modelled, and its file, line and column (columns are those of the
original line, before gcc collapsed blanks and expanded macros)."""

from __future__ import annotations

import re

import pytest

import polyc
from polyc.errors import FrontendError

CASES = {
    "subscript": (
        """void f(int n, double A[n], int idx[n], double B[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    B[i] = A[idx[i]];
#pragma endscop
}""",
        "4:14",
        "cannot model 'idx[i]'",
        "a value read from an array (data-dependent)",
    ),
    "bound": (
        """void f(int n, double A[n][n], int len[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < len[i]; j++)
      A[i][j] = 0;
#pragma endscop
}""",
        "4:25",
        "cannot model 'len[i]'",
        "a value read from an array (data-dependent)",
    ),
    "product": (
        """void f(int n, double A[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      A[i * j] = 1;
#pragma endscop
}""",
        "5:9",
        "cannot model 'i * j'",
        "a product of two variables",
    ),
    "pointer": (
        """void f(int n, double *p) {
#pragma scop
  for (int i = 0; i < n; i++)
    *p++ = 0.0;
#pragma endscop
}""",
        "4:6",
        "cannot model '*(p++)'",
        "an assignment through a pointer",
    ),
    "call": (
        """double g(double);
void f(int n, double A[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
      A[i] = g(A[i]);
#pragma endscop
}""",
        "5:14",
        "cannot model 'g(A[i])'",
        "a call to g, which may have side effects",
    ),
    "break": (
        """void f(int n, double A[n]) {
#pragma scop
  for (int i = 0; i < n; i++) {
    if (i > 3) break;
    A[i] = 0;
  }
#pragma endscop
}""",
        "4:16",
        "cannot model 'break;'",
        "a break",
    ),
    "goto": (
        """void f(int n, double A[n]) {
#pragma scop
  for (int i = 0; i < n; i++) {
    A[i] = 0;
    goto out;
  }
#pragma endscop
out:;
}""",
        "5:5",
        "cannot model 'goto out;'",
        "a goto",
    ),
    "itwrite": (
        """void f(int n, double A[n]) {
#pragma scop
  for (int i = 0; i < n; i++) {
    A[i] = 0;
    i += 2;
  }
#pragma endscop
}""",
        "5:5",
        "cannot model 'i += 2'",
        "an assignment to the loop iterator i inside its loop",
    ),
    "nonmono": (
        """void f(int n, double A[n]) {
#pragma scop
  for (int i = 0; i != 5 && i < n; i++)
    A[i] = 0;
  for (int i = 0; i < n && i % 2 == 0; i++)
    A[i] = 1;
#pragma endscop
}""",
        "3:19",
        "cannot model '(i != 5) && (i < n)'",
        "a loop condition that holds again after it first fails",
    ),
    "dataif": (
        """double g(double);
void f(int n, double A[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    if (g(A[i]) > 0.0)
      A[i] = 0;
#pragma endscop
}""",
        "5:9",
        "cannot model 'g(A[i])'",
        "a call to g, which may have side effects",
    ),
    "oob": (
        """void f(void) {
  double A[10];
#pragma scop
  for (int i = 0; i <= 10; i++)
    A[i] = 1.0;
#pragma endscop
}""",
        "5:5",
        "cannot model 'A[i] = 1.0;'",
        "an access A[i] outside A's extent (10) for every value of the parameters",
    ),
    "while": (
        """void f(int n, double A[n]) {
  int i = 0;
#pragma scop
  while (i < n) A[i] = 0;
#pragma endscop
}""",
        "4:3",
        "cannot model 'while (i < n) A[i] = 0;'",
        "a while loop",
    ),
    "bitwise": (
        """void f(int n, int A[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    A[i] = A[i] << 2;
#pragma endscop
}""",
        "4:12",
        "cannot model 'A[i] << 2'",
        "the operator '<<'",
    ),
    "scalarbound": (
        """void f(int n, double A[n]) {
  int m;
#pragma scop
  m = n / 2;
  for (int i = 0; i < m; i++)
    A[i] = 0;
#pragma endscop
}""",
        "5:23",
        "cannot model 'm'",
        "the variable m, which the region writes (data-dependent)",
    ),
    "unsigned": (
        """void f(int n, unsigned A[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    A[i] = 1;
#pragma endscop
}""",
        "4:5",
        "cannot model 'A[i]'",
        "data of type 'unsigned'",
    ),
    "spaced": (
        """#define W 4
void f(int n, double A[n], int B[n]) {
#pragma scop
  for (int i = 0; i < n; i++)
    A[i]   =   W  *  A[B[i]];
#pragma endscop
}""",
        "5:24",
        "cannot model 'B[i]'",
        "a value read from an array (data-dependent)",
    ),
    "linear": (
        """void f(int n, double *A) {
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= n; j++)
      A[i * n + j] = 0;
#pragma endscop
}""",
        "5:9",
        "cannot model '(i * n) + j'",
        "a linearised subscript whose part j may leave [0, n)",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unmodellable_construct_is_reported_at_its_line_and_column(case):
    source, loc, what, why = CASES[case]
    pattern = re.escape(
        f"<source>:{loc}: from_c: {what} in the SCoP of f because it is {why}"
    )
    with pytest.raises(FrontendError, match=pattern):
        polyc.from_c(source)


def test_parse_error_points_at_the_token():
    source = "void f(int n, double A[n]) {\n  A[0] = = 1;\n}\n"
    with pytest.raises(
        FrontendError,
        match=r"^<source>:2:10: from_c: the C source does not parse because pycparser says 'Invalid expression'",
    ):
        polyc.from_c(source)


def test_unclosed_region():
    source = "void f(int n, double A[n]) {\n#pragma scop\n  A[0] = 1;\n}\n"
    with pytest.raises(
        FrontendError,
        match=r"^<source>:2:1: c frontend: the region opened here is never closed because no '#pragma endscop' follows it",
    ):
        polyc.from_c(source)


def test_endscop_without_scop():
    source = "void f(double A[1]) {\n  A[0] = 1;\n#pragma endscop\n}\n"
    with pytest.raises(
        FrontendError,
        match=r"^<source>:3:1: c frontend: '#pragma endscop' closes no region because no '#pragma scop' precedes it",
    ):
        polyc.from_c(source)


def test_region_split_across_blocks():
    source = (
        "void f(int n, double A[n]) {\n  {\n#pragma scop\n    A[0] = 1;\n  }\n"
        "#pragma endscop\n}\n"
    )
    with pytest.raises(
        FrontendError,
        match=r"^<source>:3:1: from_c: the region opened here has no '#pragma endscop' in the same block",
    ):
        polyc.from_c(source)


def test_no_region():
    with pytest.raises(
        FrontendError,
        match=r"found no #pragma scop regions because the source has none",
    ):
        polyc.from_c("void f(double A[1]) { A[0] = 1; }\n")


def test_missing_header_is_a_preprocessing_error():
    source = '#include "no_such_header.h"\nvoid f(double A[1]) {\n#pragma scop\n  A[0] = 1;\n#pragma endscop\n}\n'
    with pytest.raises(
        FrontendError,
        match=r"preprocessing failed because gcc -E says: .*no_such_header.h",
    ):
        polyc.from_c(source)


def test_error_in_a_file_names_the_file(tmp_path):
    path = tmp_path / "k.c"
    path.write_text(
        "void f(int n, double A[n]) {\n#pragma scop\n  for (int i = 0; i < n; i++)\n    A[i * i] = 0;\n#pragma endscop\n}\n"
    )
    with pytest.raises(
        FrontendError, match=re.escape(f"{path}:4:7: from_c: cannot model 'i * i'")
    ):
        polyc.from_c(path)


def test_missing_header_names_the_directory_to_pass():
    source = '/* k */\n#include "no_such_header.h"\nvoid f(double A[1]) {\n#pragma scop\n  A[0] = 1;\n#pragma endscop\n}\n'
    with pytest.raises(
        FrontendError,
        match=r"Pass the directory that holds no_such_header\.h \(-I DIR, "
        r"include_dirs=\[DIR\]\)\.",
    ):
        polyc.from_c(source)


@pytest.mark.parametrize("name", ["/nonexistent/file.c", "gemm.c", "kernels/gemm"])
def test_a_string_that_reads_as_a_path_must_exist(name):
    """A one-line string without ';' or '{' that ends in .c/.h or holds a path
    separator is a path, not one line of C."""
    with pytest.raises(
        FrontendError,
        match=re.escape(f"{name}: c frontend: cannot read the C file because it does ")
        + r"not exist.*Check the path, or pass the C source itself",
    ):
        polyc.from_c(name)


def test_a_missing_path_object(tmp_path):
    path = tmp_path / "nope.c"
    with pytest.raises(
        FrontendError,
        match=re.escape(f"{path}: c frontend: cannot read the C file because it ")
        + r"does not exist\. Check the path\.$",
    ):
        polyc.from_c(path)


def test_a_directory_is_not_a_c_file(tmp_path):
    with pytest.raises(FrontendError, match=r"because it is a directory\. Pass the"):
        polyc.from_c(str(tmp_path))


def test_a_file_that_is_not_text(tmp_path):
    path = tmp_path / "k.c"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(FrontendError, match=r"because it is not UTF-8 text"):
        polyc.from_c(path)


def test_a_string_path_to_an_existing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.c").write_text(
        "void f(double A[4]) {\n#pragma scop\n  for (int i = 0; i < 4; i++)\n"
        "    A[i] = 0;\n#pragma endscop\n}\n"
    )
    (kernel,) = polyc.from_c("k.c")
    assert kernel.name == "f"
    # one line of C that mentions a path is still source, not a file name
    with pytest.raises(FrontendError, match=r"^<source>: from_c: found no #pragma"):
        polyc.from_c('const char *p = "a/b.c";')
