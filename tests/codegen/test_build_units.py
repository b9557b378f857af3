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
