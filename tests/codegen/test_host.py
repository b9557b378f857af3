"""Host C: results equal the interpreter; compiler failures and the cache behave."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import polyc
from codegen import build as cbuild
from codegen.host import generate
from polyc.ir.expr import Opaque
from polyc.ir.kernel import Statement
from polyc.ops import polybench as ex


def test_compiled_kernels_equal_the_interpreter(rng):
    cases = [
        (
            ex.matmul(7, m=9, k=5),
            {"A": rng.random((9, 5), np.float32), "B": rng.random((5, 7), np.float32)},
            {},
        ),
        (
            ex.jacobi2d(None, None, "float64"),
            {"A": rng.random((9, 9)), "B": rng.random((9, 9))},
            {"T": 3},
        ),
        (ex.lu_right_looking(), {"A": rng.random((7, 7)) + 7 * np.eye(7)}, {}),
        (ex.seidel2d(None, None, "float64"), {"A": rng.random((6, 6))}, {"T": 2}),
        (ex.producer_stencil(16), {"A": rng.random(16, np.float32)}, {}),
    ]
    for kern, inputs, params in cases:
        want = polyc.interpret(kern, inputs, **params)
        got = polyc.build(kern)(inputs, **params)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=kern.name)


def test_generated_c_reads_like_the_loop_nest():
    text = generate(ex.matmul(3, m=4, k=5)).text
    assert "float (*restrict C)[3] = (float (*)[3])_pc_C;" in text
    assert "C[i][j] = (C[i][j] + (A[i][k] * B[k][j]));" in text
    assert "for (long k = 0; k <= 4; k += 1)" in text


def test_input_shape_is_checked_before_any_c_runs():
    mod = polyc.build(ex.matmul(3, m=4, k=5))
    with pytest.raises(polyc.InputError, match="input A has shape"):
        mod(A=np.zeros((3, 3), np.float32), B=np.zeros((5, 3), np.float32))


def test_compiler_failure_quotes_the_generated_line():
    kern = ex.producer_stencil(16)
    s = kern.statements[0]
    broken = Statement(
        s.name,
        s.iterators,
        s.domain,
        s.target,
        Opaque("undeclared_thing", s.body.dtype),
    )
    bad = polyc.Kernel.create(
        kern.name + "_bad", kern.arrays.values(), [broken, kern.statements[1]]
    )
    with pytest.raises(
        polyc.CodegenError,
        match=r"rejected generated line \d+ `B\[i\] = undeclared_thing;` because .*undeclared",
    ):
        polyc.build(bad)


def test_corrupted_cache_entry_is_rebuilt(tmp_path, monkeypatch, rng):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cbuild, "_loaded", {})
    kern = ex.producer_stencil(12)
    first = polyc.build(kern)
    assert not first.cached
    # a half-written entry (a new file: the loaded module's mapping must stay valid)
    half = first.path.with_name("half.tmp")
    half.write_bytes(first.path.read_bytes()[:4096])
    os.replace(half, first.path)
    monkeypatch.setattr(cbuild, "_loaded", {})
    again = polyc.build(kern)
    assert not again.cached  # detected by its manifest, rebuilt
    a = rng.random(12, np.float32)
    np.testing.assert_array_equal(again(A=a)["C"], polyc.interpret(kern, {"A": a})["C"])
    monkeypatch.setattr(cbuild, "_loaded", {})
    assert polyc.build(kern).cached


def test_garbage_manifest_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cbuild, "_loaded", {})
    kern = ex.producer_stencil(11)
    polyc.build(kern)
    for manifest in tmp_path.glob("*.json"):
        manifest.write_text("{not json")
    monkeypatch.setattr(cbuild, "_loaded", {})
    assert not polyc.build(kern).cached


_RACE = textwrap.dedent(
    """
    import numpy as np, polyc
    from polyc.ops import polybench as ex
    kern = ex.matmul(11, m=13, k=7)
    a = np.ones((13, 7), np.float32); b = np.ones((7, 11), np.float32)
    out = polyc.build(kern)(A=a, B=b)["C"]
    assert (out == 7).all()
    print("ok")
    """
)


def test_two_processes_building_the_same_kernel_both_succeed(tmp_path):
    env = dict(os.environ, POLYC_CACHE_DIR=str(tmp_path), PYTHONPATH=os.getcwd())
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACE],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and out.strip() == "ok", err
    assert len(list(tmp_path.glob("_polyc_matmul_*.so"))) == 1
    assert not list(tmp_path.glob(".*"))  # no temporary directories left behind


def test_import_polyc_is_fast():
    # fast because lazy: no third-party package (islpy, numpy, torch, ...) is
    # imported, which a loaded machine cannot change (a wall-time bound could fail)
    code = (
        "import sys; before = set(sys.modules); import polyc; "
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} "
        "- set(sys.stdlib_module_names)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "['polyc']"
    mods = subprocess.run(
        [
            sys.executable,
            "-c",
            "import polyc, sys; print('torch' in sys.modules, 'sympy' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert mods.stdout.split() == ["False", "False"]
