"""Shared test configuration: golden files, hypothesis profiles, helpers."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from tests.support.paths import GOLDEN

# correctness tests do not need -O3's compile time; results are the same (no FMA
# contraction, wrapping integers). Benchmarks use the default -O3 -march=native.
os.environ.setdefault("POLYC_OPT", "-O2")
# the suite runs in two workers already: each compile searches and builds in turn
# (tests/schedules/accel/test_parallel_search.py and tests/codegen/test_*units.py
# run the parallel paths with POLYC_JOBS=2)
os.environ.setdefault("POLYC_JOBS", "1")

settings.register_profile(  # the suite: the same examples on every run
    "ci",
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "slow",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files under tests/golden instead of comparing",
    )


@pytest.fixture
def golden(request):
    """``golden(name, text)``: compare ``text`` with tests/golden/<name>."""
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update or not path.exists():
            if not update:
                pytest.fail(
                    f"golden file {path} is missing; run pytest --update-golden"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert text == path.read_text(), (
            f"output differs from golden {path}; if the change is intended, "
            "run pytest --update-golden"
        )

    return check


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def pinned_host_cache(monkeypatch):
    """The host C scheduler's cache model as on the machine its decisions were
    measured on (48 KiB L1d, 2 MiB L2 per core, 105 MiB L3, AVX-512), whatever
    this machine is: on an AMD EPYC with 32 KiB, 1 MiB and AVX2 the model
    keeps syrk's and gramschmidt's reduction loop innermost, which the tests
    of those decisions do not expect. The C still runs here (gcc splits the
    512-bit vectors), so the bit-for-bit checks hold."""
    from schedules.host import cache_model

    pinned = cache_model.Cache(48 * 1024, 2 * 1024 * 1024, 105 * 1024 * 1024, 64)
    monkeypatch.setattr(cache_model, "host_cache", lambda: pinned)
    return pinned
