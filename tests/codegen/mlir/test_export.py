"""Export to affine-dialect MLIR, verified by mlir-opt and run through the real
lowering (mlir-opt, mlir-translate, clang), against the interpreter.

The fast test builds a representative subset (a third of the ops, a third of the C
corpus, scheduled kernels) as one module; the slow one builds every op of the
library and every corpus kernel (the count docs/mlir.md reports).
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
import schedules
from codegen.mlir import tools
from codegen.mlir.export import generate
from polyc.errors import CodegenError
from polyc.ir.expr import Opaque
from polyc.ops import polybench
from tests.support import mlircheck as mc


def test_every_library_op_has_an_example():
    covered = set(mc.OPS) | set(mc.REFUSED)
    assert set(mc.LIBRARY) <= covered, set(mc.LIBRARY) - covered


@pytest.mark.parametrize("name", sorted(mc.REFUSED))
def test_a_gather_is_refused_with_the_statement_and_the_fix(name):
    kernel = mc.REFUSED[name]()
    with pytest.raises(CodegenError, match=r"reads through a data-dependent index"):
        polyc.to_mlir(kernel)


def _tiled_parallel():
    k = polybench.matmul(None)
    t = schedules.tile(k, "S1", {"i": 4, "j": 3, "k": 5})
    return schedules.parallel(t, "S1_t")


def test_subset_of_ops_and_corpus_runs_equal_to_the_interpreter():
    ops = sorted(mc.OPS)[::3]
    corpus = mc.CORPUS[::3]
    kernels = {n: mc.OPS[n]() for n in ops}
    kernels |= {f"c_{n}": mc.corpus_kernel(n) for n in corpus}
    kernels["tiled_parallel_matmul"] = _tiled_parallel()
    kernels["auto_seidel"] = schedules.auto(polybench.seidel2d(8))
    results = mc.check(kernels)
    assert {n: r for n, r in results.items() if r} == {}
    assert len(results) >= 35


@pytest.mark.slow
def test_every_op_and_corpus_kernel_runs_equal_to_the_interpreter():
    kernels = {n: f() for n, f in mc.OPS.items()}
    kernels |= {f"c_{n}": mc.corpus_kernel(n) for n in mc.CORPUS}
    for n in mc.CORPUS:
        k = kernels[f"c_{n}"]
        kernels[f"auto_{n}"] = schedules.auto(k, params=mc.param_values(k))
    results = mc.check(kernels)
    assert {n: r for n, r in results.items() if r} == {}


def test_tiled_parallel_schedule_has_min_floordiv_and_affine_parallel():
    text = polyc.to_mlir(_tiled_parallel())
    assert "affine.parallel (%i_t) = (0) to (((symbol(%N) - 1) floordiv 4) + 1)" in text
    assert "to min affine_map<(d0)[s0] -> (s0, 4*d0 + 4)>(%i_t)[%N]" in text
    assert "%N: index, %A: memref<?x?xf32>" in text
    tools.verify(text)


def test_guards_become_affine_if_and_pass_mlir_opt():
    # the C corpus's triangular and guarded kernels
    text = polyc.to_mlir(mc.corpus_kernel("nussinov"))
    assert "affine.if affine_set<" in text
    tools.verify(text)


def test_float_constants_are_the_interpreters_values():
    k = polyc.ops.mul((3,), 0.1)
    text = polyc.to_mlir(k)
    # 0.1 is not a float32: the float32 value, not a decimal MLIR would round
    # through double
    assert "arith.constant 0.10000000149011612 : f32" in text
    module = mc.check({"mul": k})
    assert module == {"mul": None}


def test_opaque_body_is_refused():
    k = polyc.ops.relu((3,))
    s = k.statements[0]
    bad = k.replace(
        statements=(
            type(s)(s.name, s.iterators, s.domain, s.target, Opaque("foo()"), s.origin),
        )
    )
    with pytest.raises(polyc.CodegenError, match="has no MLIR form because it is a"):
        generate(bad)


def test_mlir_opt_refusal_is_a_codegen_error_quoting_the_tool():
    with pytest.raises(polyc.CodegenError, match="mlir-opt failed because mlir-opt"):
        tools.verify(
            "func.func @f() { affine.for %i = 0 to 3 { } return }\n"
            "func.func @f() { return }"
        )


def test_memref_descriptor_views_the_array():
    from codegen.mlir.host import descriptor

    a = np.zeros((3, 4), np.float32)
    d = descriptor(a)
    assert list(d.sizes) == [3, 4] and list(d.strides) == [4, 1]
    assert d.aligned == a.ctypes.data


def test_to_mlir_of_something_else_is_an_argument_error():
    with pytest.raises(polyc.ArgumentError, match="to_mlir: got a str because"):
        polyc.to_mlir("matmul")


def test_a_missing_tool_says_how_to_install_it():
    with pytest.raises(polyc.CodegenError, match="apt-get install -y mlir-19-tools"):
        tools.tool("mlir-no-such-tool")
