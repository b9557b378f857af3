"""Modules built at installation (``polyc prebuild``): a build finds a module in
the installed directory before its cache, loads it from there without compiling,
and never writes there; ``polyc prebuild`` puts the simulator's runtime library
there."""

from __future__ import annotations

import pytest

from codegen import build as cbuild
from codegen.accel import direct
from polyc.cli import main

SOURCE = "int seven(void) { return 7; }\n"


def _module():
    return cbuild.build(SOURCE, "int seven(void);", name="shelf", opt=("-O1",))


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    installed, cache = tmp_path / "installed", tmp_path / "cache"
    monkeypatch.setenv("POLYC_INSTALLED_DIR", str(installed))
    monkeypatch.setattr(cbuild, "_loaded", {})
    return installed, cache, monkeypatch


def test_a_module_built_at_installation_is_loaded_from_there(dirs):
    installed, cache, monkeypatch = dirs
    monkeypatch.setenv("POLYC_CACHE_DIR", str(installed))  # as prebuild does
    assert not _module().cached
    monkeypatch.setenv("POLYC_CACHE_DIR", str(cache))  # an empty cache
    monkeypatch.setattr(cbuild, "_loaded", {})  # a later process
    built = _module()
    assert built.cached and built.lib.seven() == 7
    assert built.path.parent == installed
    assert not list(cache.glob("_polyc_shelf_*"))  # nothing compiled into the cache


def test_a_module_not_built_at_installation_is_built_into_the_cache(dirs):
    installed, cache, monkeypatch = dirs
    monkeypatch.setenv("POLYC_CACHE_DIR", str(cache))
    built = _module()
    assert not built.cached and built.path.parent == cache
    assert not installed.exists() or not list(installed.glob("_polyc_shelf_*"))


def test_polyc_prebuild_puts_the_runtime_where_a_compile_finds_it(
    tmp_path, monkeypatch, capsys
):
    # the installed directory is this session's cache, whose runtime (same
    # flags) is built already or now: the command finds or builds it there
    here = cbuild.cache_dir()
    monkeypatch.setenv("POLYC_INSTALLED_DIR", str(here))
    # as a new process runs it: no runtime loaded already (from another cache)
    monkeypatch.setattr(cbuild, "_loaded", {})
    assert main(["prebuild"]) == 0
    out = capsys.readouterr().out
    assert str(here) in out and "runtime library" in out
    monkeypatch.setenv("POLYC_CACHE_DIR", str(tmp_path))  # an empty cache
    monkeypatch.setattr(cbuild, "_loaded", {})
    direct.build_runtime.cache_clear()
    try:
        built = direct.build_runtime()
        assert built.cached and built.path.parent == here
        assert not list(tmp_path.glob("_polyc_runtime_*"))
    finally:
        direct.build_runtime.cache_clear()
