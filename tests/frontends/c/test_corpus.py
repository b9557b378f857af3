"""The C corpus (PolyBench/C 4.2.1 classes, our own kernels): each is parsed,
interpreted, rewritten source-to-source, and the original and rewritten C are run
side by side.

Each file is also rewritten with the automatic schedule (tiled, fused, parallel loops under OpenMP) and must match bit for bit too.

Tolerances: the rewritten C computes the same operations in the same order as the
original (program-order schedule), so it must match bit for bit. The interpreter
(numpy) matches bit for bit too, except where a kernel calls exp/log/pow/tanh/erf/
sin/cos, whose numpy and libm implementations may differ in the last ulp: there
rtol=1e-12 (float64) / 1e-5 (float32). sqrt is correctly rounded in both.
"""

from __future__ import annotations

import numpy as np
import pytest

import polyc
from tests.support.cfront_corpus import (
    corpus_files,
    corpus_results,
    interpret_inputs,
    run_name,
)

NAMES = [run_name(p) for p in corpus_files()]
_INEXACT = {"exp", "log", "pow", "tanh", "erf", "sin", "cos"}


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return corpus_results(tmp_path_factory.getbasetemp().parent)


def _outputs(runs, name):
    return {k[1]: v for k, v in runs[name].items() if k[0] == "out"}


@pytest.mark.parametrize("name", NAMES)
def test_rewritten_c_matches_original_bit_for_bit(corpus, name):
    original = _outputs(corpus["original_runs"], name)
    rewritten = _outputs(corpus["rewritten_runs"], name)
    assert original, f"{name} dumps no outputs"
    assert original.keys() == rewritten.keys()
    for array, values in original.items():
        assert values.tobytes() == rewritten[array].tobytes(), array


@pytest.mark.parametrize("name", NAMES)
def test_interpreter_matches_original_c(corpus, name):
    (kernel,) = corpus["kernels"][name]
    dumps = corpus["original_runs"][name]
    inputs, params = interpret_inputs(kernel, dumps, corpus["known"][name])
    got = polyc.interpret(kernel, inputs, **params)
    outs = _outputs(corpus["original_runs"], name)
    assert set(outs) <= set(got), f"{set(outs) - set(got)} are not kernel outputs"
    inexact = any(
        getattr(n, "op", "") in _INEXACT
        for s in kernel.statements
        for n in s.body.walk()
    )
    for array, want in outs.items():
        have = got[array].reshape(-1)
        want = want[: have.size]
        if inexact:
            rtol = 1e-5 if want.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(have, want, rtol=rtol, err_msg=array)
        else:
            assert have.tobytes() == want.astype(have.dtype).tobytes(), array


@pytest.mark.parametrize("name", NAMES)
def test_auto_scheduled_c_matches_original_bit_for_bit(corpus, name):
    """The automatic schedule keeps every dependence, reductions included, so the
    rewritten C computes each value in the original order: equal bits."""
    original = _outputs(corpus["original_runs"], name)
    scheduled = _outputs(corpus["auto_runs"], name)
    assert original.keys() == scheduled.keys()
    for array, values in original.items():
        assert values.tobytes() == scheduled[array].tobytes(), array
