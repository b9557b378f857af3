"""The peers' virtual environments: found or installed, with pinned versions.

Each peer lives in ``<peers dir>/venv-<name>`` (default ``~/.cache/polyc/peers``,
outside the package; ``python -m bench.fidelity --peers-dir DIR`` picks another).
:func:`ensure` creates the venv with an interpreter new enough for the peer and
installs its pins with the venv's own pip, unless the venv already holds exactly
those versions. Only the benchmark calls it; no test does (it needs the network
and minutes). A driver (``bench/peers/drivers/<name>.py``) then runs inside the
venv: it reads one JSON job on stdin and prints one JSON result on stdout.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DIR = Path.home() / ".cache" / "polyc" / "peers"
DRIVERS = Path(__file__).parent / "drivers"


class PeerError(RuntimeError):
    """A peer could not be installed or its run failed (the message says which)."""


@dataclass(frozen=True)
class PeerEnv:
    """How to install one peer: its distribution pins and the Python it needs."""

    name: str
    pins: tuple[str, ...]  # "dist==version", installed with pip
    python: tuple[int, int]  # the oldest interpreter the pinned release accepts

    def venv(self, peers_dir: Path) -> Path:
        return Path(peers_dir) / f"venv-{self.name}"

    def interpreter(self, peers_dir: Path) -> Path:
        return self.venv(peers_dir) / "bin" / "python"


# six: zigzag-dse 3.9.1 imports it (zigzag/parser/upgraded_validator.py) without
# declaring it. stream-dse must be pinned: on Python 3.11 pip would quietly pick
# 0.0.8 (2022, another API). Stream 2.1.1 itself pins zigzag-dse==3.9.1, so both
# price a layer with the same per-core model.
ZIGZAG = PeerEnv("zigzag", ("zigzag-dse==3.9.1", "six==1.17.0"), (3, 11))
STREAM = PeerEnv("stream", ("stream-dse==2.1.1", "six==1.17.0"), (3, 12))
SCALESIM = PeerEnv("scalesim", ("scalesim==3.0.0", "numpy==2.3.5"), (3, 10))
PEERS = {p.name: p for p in (ZIGZAG, STREAM, SCALESIM)}


def _version_of(python: str) -> tuple[int, int] | None:
    """The (major, minor) of an interpreter, or None when it does not run (pyenv
    shims of versions that are not active fail this way)."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


def find_python(minimum: tuple[int, int]) -> str:
    """An interpreter of at least ``minimum``: this one, one on PATH, or a pyenv
    build (by path, since a shim of an inactive version does not run).

    Raises:
        PeerError: no interpreter that new runs on this machine.
    """
    names = [sys.executable]
    names += [shutil.which(f"python3.{v}") or "" for v in range(minimum[1], 16)]
    root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    names += sorted(glob.glob(f"{root}/versions/3.*/bin/python"))
    for python in filter(None, names):
        version = _version_of(python)
        if version is not None and version >= minimum:
            return python
    want = ".".join(map(str, minimum))
    raise PeerError(
        f"install peer: no Python >= {want} because none of {len(names)} "
        f"interpreters tried runs at that version. Install Python {want} "
        "(pyenv install) and rerun."
    )


def installed(env: PeerEnv, peers_dir: Path) -> dict[str, str]:
    """Distribution -> version of the pins present in the peer's venv ({} when the
    venv is missing or broken)."""
    python = env.interpreter(peers_dir)
    if not python.exists():
        return {}
    dists = [p.split("==")[0] for p in env.pins]
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for d in sys.argv[1:]:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    run = subprocess.run(
        [str(python), "-c", code, *dists], capture_output=True, text=True
    )
    return json.loads(run.stdout) if run.returncode == 0 else {}


def ensure(env: PeerEnv, peers_dir: Path, log=print) -> Path:
    """The peer's interpreter, after installing its pins when they are missing.

    Raises:
        PeerError: no suitable Python, or ``venv``/``pip`` failed (with pip's tail).
    """
    want = dict(p.split("==") for p in env.pins)
    if installed(env, peers_dir) == want:
        return env.interpreter(peers_dir)
    venv = env.venv(peers_dir)
    if not env.interpreter(peers_dir).exists():
        python = find_python(env.python)
        log(f"peer {env.name}: creating {venv} with {python}")
        venv.parent.mkdir(parents=True, exist_ok=True)
        _run([python, "-m", "venv", str(venv)], f"create the venv of {env.name}")
    log(f"peer {env.name}: pip install {' '.join(env.pins)} (takes minutes)")
    start = time.perf_counter()
    pip = [str(env.interpreter(peers_dir)), "-m", "pip", "install", "-q"]
    _run([*pip, "--disable-pip-version-check", *env.pins], f"install {env.name}")
    log(f"peer {env.name}: installed in {time.perf_counter() - start:.0f} s")
    got = installed(env, peers_dir)
    if got != want:
        raise PeerError(
            f"install peer {env.name}: the venv holds {got} because pip resolved "
            f"other versions than {want}. Remove {venv} and rerun."
        )
    return env.interpreter(peers_dir)


def _run(cmd: list[str], what: str) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-8:])
        raise PeerError(f"{what}: {cmd[0]} exited {out.returncode} because:\n{tail}")


def run_driver(
    env: PeerEnv, peers_dir: Path, job: dict, timeout: float | None = None
) -> dict:
    """Run the peer's driver on ``job`` in its venv; its JSON result, with
    ``wall_s`` (the driver's own measure of the tool's run) as the driver reports.

    Raises:
        PeerError: the driver failed or timed out (with the tail of its stderr).
    """
    python = env.interpreter(peers_dir)
    driver = DRIVERS / f"{env.name}_driver.py"
    try:
        out = subprocess.run(
            [str(python), str(driver)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise PeerError(
            f"run {env.name} on {job.get('layer')}: no result because it ran "
            f"longer than {timeout:.0f} s. Give it more time (--peer-timeout)."
        ) from None
    if out.returncode != 0:
        tail = "\n".join(out.stderr.strip().splitlines()[-12:])
        raise PeerError(
            f"run {env.name} on {job.get('layer')}: the driver exited "
            f"{out.returncode} because:\n{tail}"
        )
    return json.loads(out.stdout.strip().splitlines()[-1])
