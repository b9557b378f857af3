"""polyc.verify: runs compared with the interpreter, and every path that uses it
(``polyc.compile(verify=True)``, ``polyc sweep --check``, ``polyc compile --verify``).

A real mismatch is made by corrupting one element of a real simulated run
(``SimModule.run`` wrapped): the simulator is right on these kernels, and a test must
not depend on a compiler bug staying unfixed.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from codegen.accel.direct import SimModule
from polyc import cli
from polyc.errors import PolycError, VerificationError
from polyc.oracle.verify import check, compare, compare_arrays, tolerance


def _inputs(kernel, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for a in kernel.free_inputs:
        shape = a.concrete_shape({})
        if a.dtype.is_float:
            out[a.name] = rng.uniform(-1, 1, shape).astype(a.dtype.numpy)
        else:
            out[a.name] = rng.integers(-8, 8, shape).astype(a.dtype.numpy)
    return out


@pytest.fixture
def corrupt(monkeypatch):
    """Make every simulated run return ``out[index]`` changed by ``delta``."""

    def install(index, delta=1.0, array="out"):
        run = SimModule.run

        def corrupted(self, spec, inputs, trace_limit=None, functional=True):
            outputs, report = run(self, spec, inputs, trace_limit, functional)
            if functional:  # a timing-only run has no outputs to corrupt
                outputs[array] = outputs[array].copy()
                outputs[array][index] += delta
            return outputs, report

        monkeypatch.setattr(SimModule, "run", corrupted)

    return install


def test_integers_are_exact_and_the_first_difference_is_named():
    kernel = polyc.ops.matmul(6, 5, 4, "int32")
    x = _inputs(kernel)
    want = polyc.interpret(kernel, x)
    assert compare(kernel, x, want).ok
    got = {"out": want["out"].copy()}
    got["out"][2, 3] += 1
    got["out"][4, 0] -= 1
    result = compare(kernel, x, got)
    (arr,) = result.wrong
    assert (arr.count, arr.index, arr.size) == (2, (2, 3), 30)
    assert arr.got == want["out"][2, 3] + 1 and arr.want == want["out"][2, 3]
    assert (arr.rtol, arr.atol, arr.max_abs_error) == (0.0, 0.0, 1.0)
    message = (
        r"verify: output out of matmul differs from the interpreter because "
        rf"out\[2, 3\] = {arr.got} on the accelerator and {arr.want} in the "
        r"interpreter \(2 of 30 elements differ, max relative error .*, integers "
        r"must match exactly\)\. The schedule or the code generated for it is wrong"
    )
    with pytest.raises(VerificationError, match=message) as info:
        check(kernel, x, got)
    assert isinstance(info.value, PolycError)
    assert info.value.verification.wrong[0].index == (2, 3)


def test_float_tolerance_scales_with_the_arrays_largest_value():
    assert tolerance(np.float32) == (1e-4, 1e-5)
    assert tolerance(polyc.dtypes.float16) == (2e-2, 2e-2)
    assert tolerance(np.int8) is None
    ref = np.array([100.0, 1.0, 0.0, -3.0], np.float32)
    # atol = 1e-5 * 100: an element near 0 may be off by 1e-3 (a reassociated sum
    # that cancels), a large one by rtol
    near = ref + np.array([5e-3, 1e-3, 9e-4, 0], np.float32)
    assert compare_arrays("k", {"y": ref}, {"y": near}).ok
    far = ref + np.array([0, 0, 2e-3, 0], np.float32)
    (arr,) = compare_arrays("k", {"y": ref}, {"y": far}).wrong
    assert (arr.count, arr.index) == ((1, (2,)))
    assert arr.atol == pytest.approx(1e-3) and arr.max_rel_error == pytest.approx(
        2e-5, rel=1e-3
    )


def test_nan_and_infinities_must_match_exactly():
    nan, inf = float("nan"), float("inf")
    ref = np.array([nan, inf, -inf, 1.0], np.float32)
    assert compare_arrays("k", {"y": ref}, {"y": ref.copy()}).ok
    for bad, index in (
        ([0.0, inf, -inf, 1.0], 0),  # a number where the reference is NaN
        ([nan, -inf, -inf, 1.0], 1),  # the other infinity
        ([nan, inf, -inf, nan], 3),  # NaN where the reference is a number
        ([nan, inf, -inf, inf], 3),
    ):
        (arr,) = compare_arrays("k", {"y": ref}, {"y": np.float32(bad)}).wrong
        assert arr.index == (index,) and arr.count == 1
        # a wrong NaN is not a small error
        assert arr.max_abs_error == arr.max_rel_error == float("inf")
        assert "max relative error inf" in arr.describe()


def test_missing_or_misshaped_outputs_are_differences():
    ref = {"y": np.zeros((2, 3), np.float32), "z": np.zeros(4, np.int32)}
    result = compare_arrays("k", ref, {"y": np.zeros((3, 2), np.float32)})
    assert [a.name for a in result.wrong] == ["y", "z"]
    assert "y has shape (3, 2) in the run and (2, 3) in the interpreter" in (
        result.message()
    )
    assert "Output(s) z differ too." in result.message()
    assert "the run returned no array z" in result.wrong[1].describe()


def test_compile_verify_passes_real_runs_float32_and_float16():
    for dtype in ("float32", "float16"):
        kernel = polyc.ops.matmul(24, 16, 40, dtype)
        compiled = polyc.compile(kernel, config="tiny", verify=True)
        assert "every run verified against the interpreter" in str(compiled)
        x = _inputs(kernel)
        outputs, _ = compiled.run(x)
        assert compare(compiled.kernel, x, outputs).ok


def test_compile_verify_catches_a_wrong_element(corrupt):
    kernel = polyc.ops.conv2d(input=(1, 4, 6, 6), weight=(4, 1, 3, 3), groups=4)
    compiled = polyc.compile(kernel, config="tiny", verify=True)
    x = _inputs(kernel)
    corrupt((0, 3, 1, 2), 0.5)
    with pytest.raises(
        VerificationError,
        match=r"verify: output out of conv2d differs from the interpreter because "
        r"out\[0, 3, 1, 2\] = \S+ on tiny and \S+ in the interpreter "
        r"\(1 of 64 elements differ, max relative error",
    ):
        compiled.run(x)
    unchecked = polyc.compile(kernel, config="tiny")
    unchecked.run(x)  # without verify nothing is compared


def test_sweep_check_marks_a_wrong_point(corrupt):
    corrupt((1, 2))
    result = polyc.sweep(
        [("matmul:M=4,N=4,K=4", "default", "tiny")],
        jobs=1,
        progress=False,
        check=True,
    )
    (rec,) = result.records
    assert rec["status"] == "wrong" and rec["error_type"] == "VerificationError"
    assert rec["error"].startswith(
        "sweep: output out of matmul differs from the interpreter because out[1, 2] = "
    )
    assert "on tiny and" in rec["error"] and "(1 of 16 elements differ" in rec["error"]
    assert rec["max_abs_error"] == pytest.approx(1.0)


GEMM = """
void gemm(float A[8][6], float B[6][5], float C[8][5]) {
#pragma scop
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 5; j++) {
      C[i][j] = 0;
      for (int k = 0; k < 6; k++)
        C[i][j] += A[i][k] * B[k][j];
    }
#pragma endscop
}
"""


def test_cli_compile_verify(tmp_path, capsys, corrupt):
    src = tmp_path / "gemm.c"
    src.write_text(GEMM)
    assert cli.main(["compile", str(src), "--config", "tiny", "--verify"]) == 0
    assert "outputs match the interpreter: yes" in capsys.readouterr().out
    corrupt((7, 4), array="C")
    assert cli.main(["compile", str(src), "--config", "tiny", "--verify"]) == 2
    captured = capsys.readouterr()
    assert "outputs match the interpreter: NO: C[7, 4] = " in captured.out
    assert (
        "polyc compile: output C of gemm differs from the interpreter because "
        "C[7, 4] = "
    ) in captured.err
    assert "(1 of 40 elements differ" in captured.err
    assert "Traceback" not in captured.err


def test_cli_verify_needs_a_config(tmp_path, capsys):
    src = tmp_path / "gemm.c"
    src.write_text(GEMM)
    assert cli.main(["compile", str(src), "--verify"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "polyc compile: --verify has nothing to check because without --config"
    )
