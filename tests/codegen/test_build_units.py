"""codegen/build.py's translation units and background builds: a module of several
C files compiles each into an object file cached by content (a unit another module
shares is compiled once), with several compilers at once or one, to the same
behaviour; a build started in the background and the same build asked for meanwhile
compile once."""

from __future__ import annotations

import pytest

from codegen import build as cbuild

HEADER = "int twice(int x);\nint plus_one(int x);\n"
TWICE = '#include "shared.h"\nint twice(int x) { return 2 * x; }\n'


def _files(plus: int) -> dict[str, str]:
    one = f'#include "shared.h"\nint plus_one(int x) {{ return x + {plus}; }}\n'
    return {"shared.h": HEADER, "twice.c": TWICE, "plus.c": one}


def _module(plus: int):
    source = '#include "shared.h"\nint both(int x) { return plus_one(twice(x)); }\n'
    return cbuild.build(
        source, "int both(int x);", name="units", files=_files(plus), opt=("-O1",)
    )


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cbuild, "_loaded", {})
    return tmp_path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_module_of_several_units_runs_the_same_with_one_compiler_or_two(
    fresh, monkeypatch, jobs
):
    monkeypatch.setenv("POLYC_JOBS", jobs)
    built = _module(plus=1)
    assert not built.cached
    assert built.lib.both(20) == 41
    # the wrapper, twice.c and plus.c: one object each
    assert len(list((fresh / "objects").glob("*.o"))) == 3


def test_a_unit_two_modules_share_compiles_once(fresh):
    _module(plus=1)
    objects = {p.name: p.stat().st_mtime_ns for p in (fresh / "objects").glob("*.o")}
    other = _module(plus=5)  # plus.c and the wrapper differ, twice.c does not
    assert other.lib.both(20) == 45
    now = {p.name: p.stat().st_mtime_ns for p in (fresh / "objects").glob("*.o")}
    assert len(now) == len(objects) + 2
    kept = [name for name in objects if now.get(name) == objects[name]]
    assert len(kept) == len(objects)  # twice.c's object was not written again


def test_a_build_in_the_background_and_the_same_build_compile_once(fresh, monkeypatch):
    monkeypatch.setenv("POLYC_JOBS", "2")
    thread = cbuild.in_background(lambda: _module(plus=2))
    assert thread is not None
    built = _module(plus=2)  # waits for the background build, or runs first
    thread.join()
    assert built.lib.both(1) == 4
    assert len(list(fresh.glob("_polyc_units_*.json"))) == 1
    assert len(cbuild._loaded) == 2  # the compiler's id and the one module


def test_no_background_build_with_one_job(fresh, monkeypatch):
    monkeypatch.setenv("POLYC_JOBS", "1")
    assert cbuild.in_background(lambda: _module(plus=3)) is None
    assert not list(fresh.glob("_polyc_units_*"))


def test_a_failed_background_build_is_reported_by_the_build_asked_for(fresh):
    bad = {"shared.h": HEADER, "twice.c": "int twice(int x) { return y; }\n"}

    def broken():
        return cbuild.build("int z;", "", name="broken", files=bad)

    thread = cbuild.in_background(broken)
    if thread is not None:
        thread.join()  # dropped there
    with pytest.raises(cbuild.CodegenError, match="build: the C compiler failed"):
        broken()


def _counting(monkeypatch, first=None):
    """``cbuild._run`` recording how many compilers run at once (``peak``) and
    what ran in order (``log``): each of the first two compiles (``-c``) waits
    for the other (a barrier that gives up after a second), so two that may
    run at once do; ``first``: an event the first compile waits for."""
    import contextlib
    import threading

    real = cbuild._run
    lock = threading.Lock()
    state = {"running": 0, "peak": 0, "log": []}
    meet = threading.Barrier(2, timeout=1.0)

    def counted(cmd, source):
        unit = "-c" in cmd
        with lock:
            state["log"].append("compile" if unit else "link")
            if unit and first is not None and state["log"].count("compile") == 1:
                wait = first
            else:
                wait = None
            state["running"] += 1
            state["peak"] = max(state["peak"], state["running"])
        try:
            if wait is not None:
                wait.wait(timeout=10)
            if unit:
                with contextlib.suppress(threading.BrokenBarrierError):
                    meet.wait()
            real(cmd, source)
        finally:
            with lock:
                state["running"] -= 1

    monkeypatch.setattr(cbuild, "_run", counted)
    return state


def test_a_build_in_the_background_runs_the_compilers_it_is_given(fresh, monkeypatch):
    # one compiler at a time leaves the other cores to the caller's own work
    # (polyc/stages.py: the runtime library while the choice is applied)
    monkeypatch.setenv("POLYC_JOBS", "2")
    state = _counting(monkeypatch)
    job = cbuild.in_background(lambda: _module(plus=7), compilers=1)
    job.join()
    assert state["log"].count("compile") == 3 and state["peak"] == 1
    assert _module(plus=7).lib.both(1) == 9  # built, and found


def test_a_build_in_the_background_hurried_runs_every_compiler(fresh, monkeypatch):
    import threading

    monkeypatch.setenv("POLYC_JOBS", "2")
    hurried = threading.Event()
    state = _counting(monkeypatch, first=hurried)
    job = cbuild.in_background(lambda: _module(plus=8), compilers=1)
    job.hurry()  # the caller waits for it next: the second compiler starts
    hurried.set()
    job.join()
    assert state["peak"] == 2
    assert _module(plus=8).lib.both(1) == 10


def test_a_module_compiles_its_units_before_what_it_links_against_is_built(
    fresh, monkeypatch
):
    # a kernel compiles while the runtime library it links against builds in
    # the background (codegen/accel/direct.py): ``requires`` runs before the link
    monkeypatch.setenv("POLYC_JOBS", "2")
    state = _counting(monkeypatch)

    def requires():
        state["log"].append("requires")

    source = '#include "shared.h"\nint both(int x) { return plus_one(twice(x)); }\n'

    def module():
        return cbuild.build(
            source,
            "int both(int x);",
            name="units",
            files=_files(4),
            opt=("-O1",),
            requires=requires,
        )

    assert module().lib.both(1) == 6
    assert state["log"] == ["compile"] * 3 + ["requires", "link"]
    monkeypatch.setattr(cbuild, "_loaded", {})  # a later process: from the cache
    state["log"].clear()
    assert module().cached
    assert state["log"] == ["requires"]  # before it loads
