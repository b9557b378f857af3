"""polyc.from_mlir: the affine subset to Kernels, round trips through the
exporter and mlir-opt's own passes, and the errors outside the subset."""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from codegen.mlir import tools
from tests.support import mlircheck as mc

#: kernels whose re-export differs in text (the numbers are equal): MLIR
#: simplifies an affine.apply to a constant, and isl regenerates a guarded loop
#: nest from the imported domains in another equivalent shape
REWRITTEN = {"adaptive_avg_pool2d", "pad"}


def _kernels(step: int = 1) -> dict[str, polyc.Kernel]:
    kernels = {n: mc.OPS[n]() for n in sorted(mc.OPS)[::step]}
    kernels |= {f"c_{n}": mc.specialized(n) for n in mc.CORPUS[::step]}
    return kernels


def _round_trip(kernels):
    unstable, wrong = set(), {}
    for name, k in kernels.items():
        text = polyc.to_mlir(k)
        back = polyc.from_mlir(text)
        if polyc.to_mlir(back) != text:
            unstable.add(name)
        diff = mc.imported_equal(k, back)
        if diff:
            wrong[name] = diff
    return unstable, wrong


def test_export_import_export_is_stable_on_a_subset():
    kernels = _kernels(step=4)
    unstable, wrong = _round_trip(kernels)
    assert wrong == {}
    assert unstable <= REWRITTEN
    assert len(kernels) >= 25


@pytest.mark.slow
def test_export_import_export_is_stable_on_every_op_and_corpus_kernel():
    unstable, wrong = _round_trip(_kernels())
    assert wrong == {}
    assert unstable == REWRITTEN


def _normalized_equal(kernels):
    wrong = {}
    for name, k in kernels.items():
        text = tools.opt(polyc.to_mlir(k), "--affine-loop-normalize", "--canonicalize")
        wrong[name] = mc.imported_equal(k, polyc.from_mlir(text))
    return {n: w for n, w in wrong.items() if w}


def test_mlir_opt_normalized_and_canonicalized_imports_compute_the_same():
    assert _normalized_equal(_kernels(step=5)) == {}


@pytest.mark.slow
def test_mlir_opt_normalized_every_kernel_computes_the_same():
    assert _normalized_equal(_kernels()) == {}


HAND = """
#set = affine_set<(d0)[s0] : (d0 - 1 >= 0, s0 - d0 - 2 >= 0)>
func.func @smooth(%N: index, %x: memref<?xf32>, %y: memref<?xf32>) {
  %t = memref.alloc() : memref<16xf32>
  %half = arith.constant 0.5 : f32
  affine.for %i = 0 to %N {
    affine.if #set(%i)[%N] {
      %a = affine.load %x[%i - 1] : memref<?xf32>
      %b = affine.load %x[%i + 1] : memref<?xf32>
      %s = arith.addf %a, %b : f32
      %m = arith.mulf %s, %half : f32
      affine.store %m, %t[%i floordiv 2] : memref<16xf32>
    } else {
      %a = affine.load %x[%i] : memref<?xf32>
      affine.store %a, %t[%i floordiv 2] : memref<16xf32>
    }
    %v = affine.load %t[%i floordiv 2] : memref<16xf32>
    %j = affine.apply affine_map<(d0)[s0] -> (s0 - 1 - d0)>(%i)[%N]
    %c = arith.index_cast %j : index to i64
    %f = arith.sitofp %c : i64 to f32
    %r = arith.addf %v, %f : f32
    affine.store %r, %y[symbol(%N) - 1 - %i] : memref<?xf32>
  }
  return
}
"""


def test_hand_written_affine_program_imports_with_exact_accesses():
    k = polyc.from_mlir(HAND)
    assert k.name == "smooth" and k.params == ("N",)
    assert k.arrays["t"].role == polyc.Role.TEMP
    assert k.arrays["x"].role == polyc.Role.INPUT
    assert k.arrays["y"].role == polyc.Role.OUTPUT
    assert [str(d) for d in k.arrays["x"].shape] == ["N"]
    stores = [str(s.target) for s in k.statements]
    assert stores == ["t[(i) // 2]", "t[(i) // 2]", "y[N - i - 1]"]
    x = np.arange(10, dtype=np.float32) ** 2
    got = polyc.interpret(k, {"x": x})["y"]
    t = np.where(
        (np.arange(10) >= 1) & (np.arange(10) <= 8),
        0.5 * (np.roll(x, 1) + np.roll(x, -1)),
        x,
    )
    want = np.zeros(10, np.float32)
    for i in range(10):
        want[9 - i] = t[i] + (9 - i)  # the last store to t[i // 2] is i's
    np.testing.assert_array_equal(got, want)


def test_from_mlir_reads_a_file(tmp_path):
    path = tmp_path / "smooth.mlir"
    path.write_text(HAND)
    assert polyc.from_mlir(str(path)).name == "smooth"
    assert (
        polyc.from_mlir(path)
        .statements[0]
        .origin.startswith(f"{path}:12:7: affine.store to t")
    )


def _error(text, match):
    with pytest.raises(polyc.FrontendError, match=match):
        polyc.from_mlir(text)


def test_operation_outside_the_subset_is_refused_with_its_location():
    _error(
        """func.func @f(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %v = memref.load %a[%c0] : memref<4xf32>
  return
}""",
        r"<mlir>:3:8: from_mlir: memref.load is outside the subset polyc imports",
    )


def test_tensor_arguments_ask_for_bufferization():
    _error(
        "func.func @f(%a: tensor<4xf32>) { return }",
        r"<mlir>:1:1: .*neither a memref nor an index because the program was not "
        r"bufferized. Bufferize",
    )


def test_data_dependent_index_is_refused():
    _error(
        """func.func @f(%a: memref<4xi64>, %b: memref<4xf32>) {
  affine.for %i = 0 to 4 {
    %k = affine.load %a[%i] : memref<4xi64>
    %j = arith.index_cast %k : i64 to index
    %v = affine.load %b[%j] : memref<4xf32>
    affine.store %v, %b[%i] : memref<4xf32>
  }
  return
}""",
        r"not valid MLIR because mlir-opt says: <mlir>:5:10: error: 'affine.load' "
        r"op index must be a valid dimension or symbol identifier",
    )


def test_invalid_mlir_quotes_mlir_opt():
    _error(
        "func.func @f(%a: memref<4xf32>) { affine.for %i = 0 to 4 { } }",
        r"not valid MLIR because mlir-opt says: <mlir>:1:",
    )


def test_value_loaded_before_a_store_to_its_array_is_refused():
    _error(
        """func.func @swap(%a: memref<2xf32>) {
  %x = affine.load %a[0] : memref<2xf32>
  %y = affine.load %a[1] : memref<2xf32>
  affine.store %y, %a[0] : memref<2xf32>
  affine.store %x, %a[1] : memref<2xf32>
  return
}""",
        r"<mlir>:5:3: from_mlir: the stored value reads a as it was before an earlier "
        r"store to a",
    )


def test_a_missing_function_is_named():
    _error("func.func @f(%a: memref<2xf32>) { return }", r"function stores nothing")
    with pytest.raises(polyc.FrontendError, match=r"no func\.func @g"):
        polyc.from_mlir("func.func @f() { return }", function="g")


def test_scheduled_kernel_with_affine_parallel_imports_and_computes_the_same():
    import schedules
    from polyc.ops import polybench

    k = schedules.tile(polybench.matmul(None), "S1", {"i": 4, "j": 3})
    k = schedules.parallel(k, "S1_t")
    text = polyc.to_mlir(k)
    assert "affine.parallel" in text
    back = polyc.from_mlir(text)
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((7, 7)).astype(np.float32) for _ in range(2))
    want = polyc.interpret(k.original, {"A": a, "B": b})["C"]
    got = polyc.interpret(back, {"A": a, "B": b, "N": 7})["C"]
    np.testing.assert_array_equal(got, want)


def test_attributes_equal_to_zero_are_read(monkeypatch):
    # regression: a constant 0 and the predicate `eq` (0) are falsy xDSL attributes
    k = polyc.from_mlir(
        """func.func @f(%a: memref<4xi8>, %b: memref<4xi8>) {
  affine.for %i = 0 to 4 {
    %z = arith.constant 0 : i8
    %x = affine.load %a[%i] : memref<4xi8>
    %e = arith.cmpi eq, %x, %z : i8
    %y = arith.select %e, %x, %z : i8
    affine.store %y, %b[%i] : memref<4xi8>
  }
  return
}"""
    )
    assert str(k.statements[0].body) == "select(a[i] == 0, a[i], 0)"


def test_ceildiv_and_mod_subscripts_are_exact():
    k = polyc.from_mlir(
        """func.func @g(%a: memref<10xf32>, %b: memref<10xf32>) {
  affine.for %i = 0 to 10 {
    %j = affine.apply affine_map<(d0) -> (d0 ceildiv 2 + d0 mod 3)>(%i)
    %x = affine.load %a[%j] : memref<10xf32>
    affine.store %x, %b[%i] : memref<10xf32>
  }
  return
}"""
    )
    a = np.arange(10, dtype=np.float32)
    got = polyc.interpret(k, {"a": a})["b"]
    want = np.array([a[-(-i // 2) + i % 3] for i in range(10)], np.float32)
    np.testing.assert_array_equal(got, want)


def test_without_mlir_opt_xdsl_reads_the_generic_form(monkeypatch):
    from polyc.frontends.mlir import parse

    generic = tools.opt(HAND, generic=True)
    monkeypatch.setattr(parse, "mlir_opt", lambda: None)
    k = polyc.from_mlir(generic)
    assert [s.name for s in k.statements] == ["S0", "S1", "S2"]
    with pytest.raises(polyc.FrontendError, match="xDSL cannot parse the text"):
        polyc.from_mlir(HAND)  # its affine.if is custom syntax xDSL lacks
