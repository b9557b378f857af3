"""Rows of a product through a reused temporary (schedules.host.expand): doitgen's
``sum[p]`` is expanded along its row loop ``q`` so that its product is a matrix
product with register tiles, and the rewrite computes the original's bits."""

from __future__ import annotations

import re

import numpy as np

import polyc
from polyc.integrations.c_source import compile_c as rewrite
from schedules.host.cache_model import host_cache
from schedules.host.expand import expand_rows
from schedules.host.register import rows_of_tile
from schedules.host.scheduler import ROW_PRODUCTS, auto_found
from tests.support.cfront_corpus import assert_same_bits, build_and_run
from tests.support.paths import CORPUS
from tests.support.sched import assert_same, inputs_for


def _doitgen(nr: int, nq: int, np_: int) -> str:
    """The corpus's doitgen with its run function at ``nr x nq x np_``."""
    text = (CORPUS / "doitgen.c").read_text()
    text = text.replace(
        "int nr = 5, nq = 4, np = 6;", f"int nr = {nr}, nq = {nq}, np = {np_};"
    )
    return text.replace(
        "double A[5][4][6], C4[6][6], sum[6];",
        f"double A[{nr}][{nq}][{np_}], C4[{np_}][{np_}], sum[{np_}];",
    )


def _kernel(text: str = ""):
    return polyc.from_c(text or _doitgen(5, 4, 6), include_dirs=[CORPUS])[0]


def test_doitgen_rows_are_a_register_tiled_product_with_the_original_bits(tmp_path):
    # 19 rows: two full tiles of 8 (AVX-512) or four of 4 and partial ones; 37
    # columns: two full tiles of 16 and 5; before, the product ran as axpys
    # into the one row sum[p], q after q (step program-order, no register tile)
    text = _doitgen(3, 19, 37)
    out = rewrite(text, schedule="auto", include_dirs=[CORPUS])
    (region,) = out.regions
    assert region.step == ROW_PRODUCTS
    vb = host_cache().vector
    marks = re.findall(r"@accumulate\(\d+, \d+, \d+\)", str(region.kernel.schedule))
    assert marks == [f"@accumulate(16, {rows_of_tile(vb)}, {vb})"]
    # the expanded rows live on the heap, freed at the end of the region; the
    # last row is copied back into sum, which the caller sees
    assert re.search(r"double \(\*sum_x\)\[np\] = .*malloc", out.text)
    assert "free(sum_x);" in out.text
    assert "sum[e1] = sum_x[(nq - 1)][e1];" in out.text
    runs = build_and_run(
        {"original": ({"doitgen": text}, []), "rewritten": ({"doitgen": out.text}, [])},
        tmp_path,
    )
    assert_same_bits(runs, ["doitgen"])


def test_expansion_is_the_same_program():
    k = _kernel()
    x = expand_rows(k)
    assert x is not None
    assert x.arrays["sum_x"].role == polyc.ir.kernel.Role.TEMP
    # sum_x[q][p] in every statement that touched sum[p], and one more that
    # leaves the last row in sum
    targets = [s.target.array for s in x.statements]
    assert targets == ["sum_x", "sum_x", "A", "sum"]
    for sizes in ({"nr": 3, "nq": 5, "np": 7}, {"nr": 1, "nq": 1, "np": 2}):
        inputs = inputs_for(k, **sizes)
        want = polyc.interpret(k, {n: v.copy() for n, v in inputs.items()}, **sizes)
        got = polyc.interpret(x, {n: v.copy() for n, v in inputs.items()}, **sizes)
        for name in ("A", "sum"):
            assert want[name].tobytes() == got[name].tobytes(), name


def test_auto_of_doitgen_equals_the_interpreter_on_the_host_build():
    k = _kernel()
    found = auto_found(k, params={"nr": 16, "nq": 64, "np": 64})
    assert found.step == ROW_PRODUCTS
    assert_same(k, found.kernel, nr=3, nq=21, np=35)
    assert_same(k, found.kernel, nr=2, nq=1, np=17)


def _variant(old: str, new: str) -> str:
    text = _doitgen(5, 4, 6)
    assert old in text
    return text.replace(old, new)


def test_a_temporary_read_before_the_region_writes_it_is_not_expanded():
    # without sum[p] = 0.0 the first row adds to the caller's sum: the value
    # flows in from before the region (and from one q to the next)
    k = _kernel(_variant("        sum[p] = 0.0;\n", ""))
    assert expand_rows(k) is None


def test_a_temporary_whose_values_cross_rows_is_not_expanded():
    # sum is set once: the value of one row flows into the next
    text = _variant(
        "    for (q = 0; q < nq; q++) {\n      for (p = 0; p < np; p++) {\n"
        "        sum[p] = 0.0;\n",
        "    for (q = 0; q < nq; q++) {\n      for (p = 0; p < np; p++) {\n"
        "        if (r == 0 && q == 0) sum[p] = 0.0;\n",
    )
    k = _kernel(text)
    assert expand_rows(k) is None
    found = auto_found(k, params={"nr": 16, "nq": 64, "np": 64})
    assert found.step != ROW_PRODUCTS
    assert_same(k, found.kernel, nr=2, nq=3, np=5)


def test_a_product_without_register_tiles_keeps_its_temporary():
    # 3 columns: narrower than a register tile's row (16 doubles), so the
    # expansion would not pay and auto keeps sum as written
    k = _kernel()
    found = auto_found(k, params={"nr": 16, "nq": 64, "np": 3})
    assert found.step != ROW_PRODUCTS
    assert "sum_x" not in found.kernel.arrays
    np.testing.assert_equal(found.kernel.arrays.keys(), k.arrays.keys())
