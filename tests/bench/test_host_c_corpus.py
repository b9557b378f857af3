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


#: sizes with full register tiles and partial ones (rows not a multiple of 4,
#: columns of 16) and, for symm, tiles off the diagonal (m > 64)
SMALL = {
    "gemm": {"ni": 23, "nj": 37, "nk": 19},
    "3mm": {"ni": 37, "nj": 45, "nk": 29, "nl": 33, "nm": 21},
    "symm": {"m": 70, "n": 45},
    "doitgen": {"nr": 5, "nq": 7, "np": 37},
    "covariance": {"m": 45, "n": 37},
}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("name", sorted(SMALL))
def test_products_run_as_written_and_rewritten_with_the_same_bits(name, tmp_path):
    # every array's checksum as a hex float: the rewritten products (register
    # tiles, each product in its own band) compute the original's bits
    row = hc.run_kernel(name, tmp_path, 1, SMALL[name], None, 60.0)  # gcc only
    assert row["polyc_same_bits"] is True, row
    # covariance's tiles of the triangle j >= i: register tiles where whole
    rewritten = (tmp_path / f"{name}.polyc.c").read_text()
    assert ("double _pc_acc" in rewritten) == (name != "doitgen")
    text = hc.table({"rows": [row]})
    assert text.splitlines()[2].startswith(f"| {name} | ")


def test_the_table_says_which_builds_failed():
    row = {"kernel": "3mm", "gcc_s": 2.0, "polyc_s": 0.5, "polyc_speedup": 4.0}
    row |= {"polyc_same_bits": True, "polly_error": "CalledProcessError"}
    line = hc.table({"rows": [row]}).splitlines()[2]
    assert line == (
        "| 3mm | 2.000 | 0.500 | failed | failed | 4.00x | - | - | - | yes |"
    )
