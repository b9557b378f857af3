"""The C frontend on a machine where polyc never ran: nothing it needs comes from
an earlier run, and nothing it writes lands at a predictable path in a shared
temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import polyc
from polyc.frontends.c.parse import parse_c

# finding 6 of issue 11: a comment first, so the system includes are on lines 2-3
KERNEL = """\
/* scale.c: PolyBench-style includes, none on the first line */
#include <stdio.h>
#include <unistd.h>
#include <sys/resource.h>

void scale(double A[8][8]) {
#pragma scop
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++)
      A[i][j] = A[i][j] * 2.0;
#pragma endscop
}
"""

RUN = textwrap.dedent(
    """\
    import sys
    import polyc
    from polyc.integrations.c_source import compile_c
    (kernel,) = polyc.from_c(sys.argv[1])
    print(kernel.name, sorted(kernel.arrays))
    print(len(compile_c(sys.argv[1]).regions))
    """
)


def _fresh_env(tmp_path: Path) -> dict[str, str]:
    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    cache.mkdir()
    tmp.mkdir()
    return {**os.environ, "POLYC_CACHE_DIR": str(cache), "TMPDIR": str(tmp)}


def test_system_includes_after_the_first_line_on_a_fresh_machine(tmp_path):
    """A new process with an empty cache and an empty temp directory, so that no
    stand-in header made by an earlier run (or test) can hide the bug."""
    src = tmp_path / "scale.c"
    src.write_text(KERNEL)
    env = _fresh_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(src)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["scale ['A']", "1"]
    # the stand-in headers lived in a private directory that is gone again
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_the_command_line_on_a_fresh_machine(tmp_path):
    src = tmp_path / "scale.c"
    src.write_text(KERNEL)
    polyc_cmd = Path(sys.executable).with_name("polyc")
    proc = subprocess.run(
        [str(polyc_cmd), "compile", str(src)],
        capture_output=True,
        text=True,
        env=_fresh_env(tmp_path),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "region scale rewritten" in proc.stderr
    assert "#include <unistd.h>" in proc.stdout  # the user's own lines are kept


def test_system_includes_of_the_users_own_headers(tmp_path):
    """A header next to the file (or in an include directory) that includes an
    unknown system header gets its stand-in too."""
    (tmp_path / "util.h").write_text(
        "#ifndef UTIL_H\n#define UTIL_H\n#include <sys/mman.h>\n"
        '#include "sub/more.h"\n#endif\n'
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.h").write_text("#include <sched.h>\n#define N 8\n")
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "lib.h").write_text("#include <pthread.h>\n")
    src = tmp_path / "k.c"
    src.write_text(
        '#include "util.h"\n#include <lib.h>\n'
        "void f(double A[N]) {\n#pragma scop\n  for (int i = 0; i < N; i++)\n"
        "    A[i] = 0;\n#pragma endscop\n}\n"
    )
    (region,) = parse_c(src, include_dirs=[inc])
    assert region.param_values == {"N": 8}  # the macro of sub/more.h


def test_source_text_with_a_late_system_include():
    """C source text (not a file) is preprocessed the same way."""
    text = KERNEL.replace("scale", "text")
    (kernel,) = polyc.from_c(text)
    assert kernel.name == "text"


def test_no_fixed_path_in_the_shared_temp_directory():
    """Audit: the tree names no fixed path under the system temp directory; every
    temporary file polyc makes comes from mkdtemp/TemporaryDirectory (private,
    unpredictable) or lives under the user's cache."""
    from tests.support.paths import ROOT as root

    offenders = []
    for folder in ("polyc", "codegen", "schedules", "accelerator", "bench", "examples"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text()
            for bad in ("gettempdir(", '"/tmp', "'/tmp"):
                if bad in text:
                    offenders.append(f"{path.relative_to(root)}: {bad}")
    assert offenders == []
