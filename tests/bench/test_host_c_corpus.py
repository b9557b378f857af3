"""The corpus benchmark's machinery (bench.host_c_corpus): which kernels it can
drive, the drivers it writes, one kernel end to end at small sizes, the table.
No timing is asserted."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from bench import host_c_corpus as hc
from tests.support.paths import CORPUS


def test_every_corpus_kernel_is_driven_or_skipped_with_a_reason():
    names = {p.stem for p in CORPUS.glob("*.c")}
    assert set(hc.LARGE) | set(hc.SKIPPED) == names
    assert not set(hc.LARGE) & set(hc.SKIPPED)
    for name in hc.LARGE:
        params = hc.signature((CORPUS / f"{name}.c").read_text(), name)
        ints = {p for t, p, dims in params if t == "int" and not dims}
        assert ints == set(hc.LARGE[name]), name


def test_a_kernel_whose_sizes_are_macros_is_refused_by_the_signature_reader():
    with pytest.raises(ValueError, match="is not a scalar or VLA"):
        hc.signature((CORPUS / "atax.c").read_text(), "atax")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_every_driver_compiles(tmp_path):
    # bicg's array s, gemver's and gesummv's x were shadowed by the driver's own
    # loop variable and checksum (x, s): their four builds failed
    for name, sizes in hc.LARGE.items():
        drv = tmp_path / f"{name}.c"
        drv.write_text(hc.driver(name, (CORPUS / f"{name}.c").read_text(), sizes))
        cmd = ["gcc", "-fsyntax-only", "-Werror=implicit-function-declaration"]
        proc = subprocess.run([*cmd, str(drv)], capture_output=True, text=True)
        assert proc.returncode == 0, (name, proc.stderr)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_gemm_runs_as_written_and_rewritten_with_the_same_bits(tmp_path):
    sizes = {"ni": 23, "nj": 37, "nk": 19}
    row = hc.run_kernel("gemm", tmp_path, 1, sizes, None, 60.0)  # gcc only: fast
    assert row["polyc_step"] == "isl"
    assert row["polyc_same_bits"] is True
    text = hc.table({"rows": [row]})
    assert text.splitlines()[2].startswith("| gemm | ")


def test_the_table_says_which_builds_failed():
    row = {"kernel": "3mm", "gcc_s": 2.0, "polyc_s": 0.5, "polyc_speedup": 4.0}
    row |= {"polyc_same_bits": True, "polly_error": "CalledProcessError"}
    line = hc.table({"rows": [row]}).splitlines()[2]
    assert line == (
        "| 3mm | 2.000 | 0.500 | failed | failed | 4.00x | - | - | - | yes |"
    )
