"""The C-source benchmark's BLAS column (bench.host_c): the numpy program it writes
computes what the C file computes (its checksum), and the table renders it. No
timing is asserted."""

from __future__ import annotations

from bench import host_c


def test_the_blas_program_computes_the_c_files_checksum(tmp_path):
    # doitgen: the smallest of the products (0.5 GFLOP), the C built plainly
    exe = tmp_path / "doitgen"
    host_c._compile(["gcc"], host_c.SOURCES / "doitgen.c", exe, 1)
    _, want = host_c._run(exe)
    _, got = host_c._run(host_c._blas_script("doitgen", tmp_path, 1))
    # BLAS sums in its own order: close, not the same bits
    assert abs(got - want) <= 1e-10 * abs(want)


def test_every_blas_program_names_arrays_its_c_file_defines(tmp_path):
    for name, (_init, _call, out) in host_c.BLAS.items():
        text = (host_c.SOURCES / f"{name}.c").read_text()
        assert f"{out}[" in text, name
        script = host_c._blas_script(name, tmp_path, 1)
        compile(script.read_text(), str(script), "exec")


def test_blas_table_lists_the_products_with_their_ratios():
    rows = [
        {
            "kernel": "matmul",
            "blas_s": 0.1,
            "polyc_s": 0.15,
            "polyc_fma_s": 0.11,
            "polyc_fma_checksum_rel_diff": 0.0,
            "blas_checksum_rel_diff": 1e-14,
        },
        {"kernel": "jacobi_2d", "polyc_s": 0.3},  # no BLAS column: left out
    ]
    text = host_c.blas_table(rows)
    assert "| matmul 1024^3 | 0.1000 | 0.1500 | 1.50x | 0.1100 | 1.10x |" in text
    assert "jacobi" not in text
