"""Headless Chromium for the report's browser tests: load a page, return the DOM
after its scripts ran (``--dump-dom``), or take a screenshot.

Debian's ``chromium`` package (``make chromium`` installs it). The tests skip,
saying so, only when no Chromium binary is on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: a guard against a hung browser, not a measurement: loading takes about a second
GUARD_SECONDS = 180


def chromium() -> str:
    """The Chromium binary; skips the calling test when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "chromium is not installed, so the report cannot be loaded in a real "
        "browser: run `make chromium` (apt-get install chromium) as root"
    )


def _flags() -> list[str]:
    return [
        "--headless",
        "--no-sandbox",  # root in a container
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
    ]


def load(page: Path, fragment: str = "") -> tuple[str, str]:
    """``(dom, console)``: the DOM after the page's scripts ran, and the browser's
    log (console messages appear there as ``CONSOLE`` lines)."""
    url = page.resolve().as_uri() + fragment
    done = subprocess.run(
        [chromium(), *_flags(), "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def screenshot(page: Path, out: Path, size: str = "1300,2400") -> Path:
    """A PNG of the page rendered at ``size`` (width,height)."""
    url = page.resolve().as_uri()
    done = subprocess.run(
        [chromium(), *_flags(), f"--window-size={size}", f"--screenshot={out}", url],
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
    )
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    return out


def console_errors(console: str) -> list[str]:
    """The console lines of uncaught errors (JavaScript exceptions)."""
    return [
        line
        for line in console.splitlines()
        if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)
    ]


def keep(shot: Path, name: str) -> None:
    """Copy the screenshot ``shot`` to ``$POLYC_SCREENSHOTS/name`` when that
    variable names a directory (how the docs' screenshots are taken)."""
    where = os.environ.get("POLYC_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(where) / name)
