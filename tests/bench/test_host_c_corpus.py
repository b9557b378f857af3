"""The corpus benchmark's machinery (bench.host_c_corpus): which kernels it can
drive, the drivers it writes, one kernel end to end at small sizes, the table.
No timing is asserted."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from bench import host_c_corpus as hc
from tests.support.paths import CORPUS


def test_every_corpus_kernel_is_driven_with_its_sizes_named():
    names = {p.stem for p in CORPUS.glob("*.c")}
    assert set(hc.LARGE) == names
    assert set(hc.DATASET) <= set(hc.MEDIUM) <= names
    for name in hc.LARGE:
        text = (CORPUS / f"{name}.c").read_text()
        params = hc.signature(text, name)
        ints = {p for t, p, dims in params if t == "int" and not dims}
        macros = {m for m in set(hc.LARGE[name]) if f"#define {m} " in text}
        # every size is an int parameter or a macro of the file, and each of
        # those is a size
        assert ints | macros == set(hc.LARGE[name]), name


def test_a_pointer_parameter_of_unknown_extent_is_refused_by_the_signature_reader():
    text = "void kernel_k(double *x, int n)\n{\n}\n"
    with pytest.raises(ValueError, match="is a pointer of no extent"):
        hc.signature(text, "k")


def test_macros_pointers_and_globals_are_set_at_the_benchmark_sizes():
    # atax: macro sizes and pointer parameters; seidel-2d: a static global array;
    # trisolv: a fixed row length of 12 that must follow n
    atax = hc.driver("atax", (CORPUS / "atax.c").read_text(), {"NX": 19, "NY": 21})
    assert "#define NX 19" in atax and "long tmp_n = (long)(NX);" in atax
    text = (CORPUS / "seidel_2d.c").read_text()
    prepared = hc.prepare("seidel_2d", text, {"N": 33, "tsteps": 2})
    assert "#define N 33" in prepared and "\ndouble A[N][N];" in prepared
    assert "\nvoid kernel_seidel_2d(int tsteps)" in prepared
    assert "extern double A[N][N];" in hc.driver(
        "seidel_2d", text, {"N": 33, "tsteps": 2}
    )
    trisolv = hc.prepare("trisolv", (CORPUS / "trisolv.c").read_text(), {"n": 40})
    assert "double (*L)[40]" in trisolv


def test_the_default_run_names_its_dataset_per_kernel():
    assert hc.dataset("gemm", "LARGE") == ("LARGE", hc.LARGE["gemm"])
    fw = "floyd_warshall"
    assert hc.dataset(fw, "LARGE") == ("MEDIUM", {"n": 500})
    assert hc.dataset(fw, "LARGE-ALL") == ("LARGE", {"n": 2800})
    row = {"kernel": fw, "dataset": "MEDIUM", "gcc_s": 1.0}
    assert hc.table({"rows": [row]}).splitlines()[2].startswith(f"| {fw} (MEDIUM) |")


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_every_driver_compiles_with_its_kernel(tmp_path):
    # bicg's array s, gemver's and gesummv's x were shadowed by the driver's own
    # loop variable and checksum (x, s): their four builds failed. The seven files
    # with macro sizes or global arrays could not be driven at all
    for name in hc.LARGE:
        text = (CORPUS / f"{name}.c").read_text()
        _, sizes = hc.dataset(name, "LARGE")
        drv, src = tmp_path / f"{name}_driver.c", tmp_path / f"{name}.c"
        drv.write_text(hc.driver(name, text, sizes))
        src.write_text(hc.prepare(name, text, sizes))
        cmd = ["gcc", "-w", "-Werror=implicit-function-declaration", f"-I{CORPUS}"]
        exe = tmp_path / name
        proc = subprocess.run(
            [*cmd, str(src), str(drv), "-o", str(exe), "-lm"],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, (name, proc.stderr)


#: sizes with full register tiles and partial ones (rows not a multiple of 4 or
#: 8, columns of 16) and, for symm, tiles off the diagonal (m > 64)
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
    # (vector accumulators or a scalar array, both named _pc_acc); doitgen's
    # product into its rows expanded along q (sum_x) too
    rewritten = (tmp_path / f"{name}.polyc.c").read_text()
    assert re.search(r" _pc_acc\d+\[", rewritten)
    text = hc.table({"rows": [row]})
    assert text.splitlines()[2].startswith(f"| {name} | ")


def test_the_table_says_which_builds_failed():
    row = {"kernel": "3mm", "gcc_s": 2.0, "polyc_s": 0.5, "polyc_speedup": 4.0}
    row |= {"polyc_same_bits": True, "polly_error": "CalledProcessError"}
    line = hc.table({"rows": [row]}).splitlines()[2]
    assert line == (
        "| 3mm | 2.000 | 0.500 | failed | failed | 4.00x | - | - | - | yes |"
    )


def test_multi_thread_runs_get_a_table_of_their_own():
    row = {"kernel": "jacobi_2d", "gcc_s": 2.0, "polyc_s": 1.0, "polyc_speedup": 2.0}
    row |= {"polyc_same_bits": True, "threads": 2, "polyc_mt_s": 0.5}
    row |= {"polyc_mt_speedup": 4.0, "polyc_mt_same_bits": True}
    lines = hc.table({"rows": [row]}).splitlines()
    assert lines[2].startswith("| jacobi_2d | 2.000 | 1.000 | failed |")
    assert lines[-1] == "| jacobi_2d | 2 | 1.000 | 0.500 | 4.00x | 2.00x | yes |"
    assert "wavefronts" in lines[-3]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_stencil_in_wavefronts_on_two_threads_gives_the_same_bits(tmp_path):
    # jacobi-2d's time tiles in wavefronts, two OpenMP threads: a stencil reorders
    # no sum, so the bits are gcc's
    sizes = {"tsteps": 6, "n": 90}
    row = hc.run_kernel("jacobi_2d", tmp_path, 1, sizes, None, 60.0, threads=2)
    assert row["polyc_step"] == row["polyc_mt_step"] == "time-tiles"
    assert row["polyc_same_bits"] is True and row["polyc_mt_same_bits"] is True
    text = (tmp_path / "jacobi_2d.polyc_mt.c").read_text()
    assert "omp parallel for" in text
    assert "omp parallel" not in (tmp_path / "jacobi_2d.polyc.c").read_text()
