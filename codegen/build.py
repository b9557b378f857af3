"""Compile C into a Python extension with cffi, cached on disk by content hash.

The cache is safe under concurrency and corruption: each entry is built in a private
temporary directory and moved into place with an atomic rename, next to a manifest
holding the SHA-256 of the library; an entry whose bytes do not match its manifest
(half-written, truncated, edited) is rebuilt, and two processes building the same
entry at once both succeed (the second rename replaces identical bytes).

The cache lives in ``$POLYC_CACHE_DIR`` (default ``~/.cache/polyc``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from polyc.errors import CodegenError

CC = os.environ.get("CC", "gcc")
#: semantic flags, always on: no FMA contraction keeps float results equal to the
#: interpreter's; signed overflow wraps like numpy's integers
BASE_FLAGS = ("-ffp-contract=off", "-fwrapv", "-fno-strict-aliasing")
#: optimisation flags; ``$POLYC_OPT`` replaces them (the test suite uses -O2, which
#: compiles several times faster and changes no result)
DEFAULT_OPT = "-O3 -march=native"
#: optimisation flags of a kernel compiled for the simulator (``$POLYC_OPT``
#: replaces them too): its hot work is calls into the runtime library, which
#: keeps :data:`DEFAULT_OPT`, and the vector unit's element loops. For ResNet-18
#: (64x64, edge-npu) gcc took 8.2 CPU s at -O3 -march=native and 6.0 at -O1 (12.6
#: and 3.8 with checks compiled out) with the simulation at 0.4 s either way;
#: -Og compiles the kernels of the model suite 2.3x faster than -O1 (a
#: 6,800-line part of hf-mobilenetv2: 1.8 -> 0.8 CPU s) and simulates ResNet-18,
#: hf-bert, hf-llama and hf-mobilenetv2 in the same CPU time
SIM_KERNEL_OPT = "-Og"
#: ... of a kernel with statements on the scalar core (a DRAM-direct layer): its
#: loops are the simulation's own work, which -O0 runs about 30x slower than -O3,
#: -O1 about 7x and -Og 2x slower than -O1 (a 400^3 matmul: 0.25 -> 0.52 s)
SIM_SCALAR_KERNEL_OPT = "-O1"


def opt_flags(default: str = DEFAULT_OPT) -> tuple[str, ...]:
    """The optimisation flags: ``$POLYC_OPT`` when set, else ``default``."""
    return tuple(os.environ.get("POLYC_OPT", default).split())


_LINE_FILE = "polyc_kernel.c"
_loaded: dict[str, object] = {}
#: one lock per module name: a build started in the background
#: (:func:`in_background`) and the same build asked for by the caller compile once
_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def jobs() -> int:
    """How many C compilers run at once: ``$POLYC_JOBS`` when set, else the
    machine's cores."""
    try:
        return max(1, int(os.environ.get("POLYC_JOBS", "")))
    except ValueError:
        return max(1, os.cpu_count() or 1)


def in_background(
    build_fn: Callable[[], object], compilers: int | None = None
) -> Background | None:
    """Run ``build_fn`` (a build) in a daemon thread and return it as a
    :class:`Background` (none with ``POLYC_JOBS=1``: the build runs when it is
    first asked for). The C compiler is a process of its own, so it runs on
    another core while Python goes on (the GIL is free while the thread waits
    for it). ``compilers``: how many C compilers the build runs at once until
    :meth:`Background.hurry` (default :func:`jobs`): fewer leave cores to the
    caller's own work. A failure is dropped here: the caller's own call of the
    same build raises it, where the user asked."""

    if jobs() == 1:  # POLYC_JOBS=1: everything in turn, where it is asked for
        return None
    share = Compilers(jobs() if compilers is None else max(1, compilers))

    def quietly() -> None:
        _thread.compilers = share  # what this thread's builds may run at once
        with contextlib.suppress(Exception):  # the caller's own build reports it
            build_fn()

    thread = threading.Thread(target=quietly, name="polyc-build", daemon=True)
    thread.start()
    return Background(thread, share)


class Compilers:
    """How many C compilers the builds of a background thread run at once: a
    count the caller may raise (:meth:`widen`) while they run."""

    def __init__(self, count: int):
        self._count = count
        self._running = 0
        self._changed = threading.Condition()

    def widen(self, count: int) -> None:
        """Let ``count`` compilers run at once from now on."""
        with self._changed:
            self._count = max(self._count, count)
            self._changed.notify_all()

    @contextlib.contextmanager
    def turn(self):
        """Wait until one more compiler may run, and hold its place."""
        with self._changed:
            self._changed.wait_for(lambda: self._running < self._count)
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()


@dataclass(frozen=True)
class Background:
    """A build running in a daemon thread (:func:`in_background`)."""

    thread: threading.Thread
    compilers: Compilers

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def hurry(self) -> None:
        """Let it run :func:`jobs` compilers at once from now on (the caller is
        about to wait for it)."""
        self.compilers.widen(jobs())


#: per thread: the :class:`Compilers` of a background build (none elsewhere: a
#: build asked for by the caller runs :func:`jobs` compilers at once)
_thread = threading.local()


def _turn(share: Compilers | None):
    return contextlib.nullcontext() if share is None else share.turn()


def _lock(modname: str) -> threading.Lock:
    with _locks_lock:
        return _locks.setdefault(modname, threading.Lock())


@dataclass(frozen=True)
class Built:
    """A loaded module: ``ffi`` and ``lib`` from cffi, and where it came from."""

    ffi: object
    lib: object
    path: Path
    cached: bool


#: where ``polyc prebuild`` puts modules built once at installation (the
#: simulator's runtime library): looked in, never written, by :func:`build`
INSTALLED_DIR = Path(__file__).resolve().parent / "installed"


def installed_dir() -> Path:
    """The directory of modules built at installation: ``$POLYC_INSTALLED_DIR``
    when set, else :data:`INSTALLED_DIR` (in the package, ignored by git)."""
    return Path(os.environ.get("POLYC_INSTALLED_DIR") or INSTALLED_DIR)


def cache_dir() -> Path:
    root = os.environ.get("POLYC_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "polyc"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _compiler_id() -> str:
    key = ("compiler", CC)
    if key not in _loaded:
        try:
            out = subprocess.run(
                [CC, "--version"], capture_output=True, text=True, timeout=30
            )
            _loaded[key] = out.stdout.splitlines()[0] if out.stdout else CC
        except (OSError, subprocess.SubprocessError):
            _loaded[key] = CC
    return str(_loaded[key])


def build(
    source: str,
    cdef: str,
    *,
    name: str = "kernel",
    flags: tuple[str, ...] = (),
    link_flags: tuple[str, ...] = (),
    files: Mapping[str, str] | None = None,
    opt: tuple[str, ...] | None = None,
    split: tuple[str, Callable[[str], tuple[str, dict] | None]] | None = None,
    requires: Callable[[], object] | None = None,
) -> Built:
    """Compile ``source`` (C) exposing the declarations ``cdef``; return the module.

    Args:
        source: the C text of the module's main translation unit.
        cdef: the declarations cffi exposes to Python.
        name: a readable part of the module's name.
        flags: extra compiler flags.
        link_flags: extra arguments for the link (libraries, shared objects).
        files: more files, name -> text, written next to the main translation unit:
            headers it (or they) ``#include "..."``, and ``.c`` files compiled as
            translation units of their own and linked into the module. Their
            content is part of the cache key.
        opt: the optimisation flags (default :func:`opt_flags`).
        split: ``(tag, fn)``: only when the module is compiled, ``fn(source)`` gives
            the main unit and more files to compile instead (or ``None``: as it
            is); the key holds ``source`` and ``tag``, so a cached module is found
            without splitting.
        requires: called before the module links or loads: the build of what
            it links against (``link_flags`` naming its :func:`location`), which
            may then run while this module's own units compile.

    Raises:
        CodegenError: when the C compiler fails; the message quotes the offending
            generated line and the compiler's own message.
    """
    files = dict(sorted((files or {}).items()))
    all_flags = _all_flags(flags, opt)
    keyed = {**files, "split": split[0]} if split is not None else files
    modname = module_name(name, source, cdef, all_flags, link_flags, keyed)
    if modname in _loaded:
        mod = _loaded[modname]
        return Built(mod.ffi, mod.lib, Path(mod.__file__), True)
    with _lock(modname):  # a background build of the same module: wait for it
        if modname in _loaded:
            mod = _loaded[modname]
            return Built(mod.ffi, mod.lib, Path(mod.__file__), True)
        return _build_locked(
            modname, source, cdef, all_flags, link_flags, files, split, requires
        )


def _all_flags(flags, opt) -> tuple[str, ...]:
    return (opt_flags() if opt is None else tuple(opt)) + BASE_FLAGS + tuple(flags)


def location(
    source: str,
    cdef: str,
    *,
    name: str = "kernel",
    flags: tuple[str, ...] = (),
    files: Mapping[str, str] | None = None,
) -> Path:
    """Where :func:`build` of these arguments finds its module, or will put it
    (built at installation, else in the cache), without building it: another
    module may name it in its ``link_flags`` while it builds."""
    files = dict(sorted((files or {}).items()))
    modname = module_name(name, source, cdef, _all_flags(flags, None), (), files)
    return _where(modname)[0]


def _where(modname: str) -> tuple[Path, Path]:
    """The module file and manifest of ``modname``: installed (``polyc
    prebuild``) when a sound copy is there, else in the cache."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    shelf = installed_dir()
    path, manifest = shelf / f"{modname}{suffix}", shelf / f"{modname}.json"
    if _verified(path, manifest):
        return path, manifest
    root = cache_dir()
    return root / f"{modname}{suffix}", root / f"{modname}.json"


def _build_locked(
    modname, source, cdef, all_flags, link_flags, files, split=None, requires=None
) -> Built:
    root = cache_dir()
    path, manifest = _where(modname)
    if requires is not None and manifest.is_file():
        requires()  # a module to load: what it links against first
        requires = None
    mod = _load_verified(modname, path, manifest)
    if mod is None and path.parent != root:  # installed, but it did not import
        path, manifest = root / path.name, root / manifest.name
        mod = _load_verified(modname, path, manifest)
    cached = mod is not None
    if mod is None:
        parts = split[1](source) if split is not None else None
        if parts is not None:
            source, more = parts
            files = dict(sorted({**files, **more}.items()))
        _compile(
            modname,
            source,
            cdef,
            all_flags,
            link_flags,
            files,
            path,
            manifest,
            root,
            requires,
        )
        mod = _load_verified(modname, path, manifest)
        if mod is None:
            raise CodegenError(
                f"build: the module {path.name} could not be loaded after compiling it "
                "because its bytes changed on disk. Retry, or clear the cache "
                f"({root})."
            )
    _loaded[modname] = mod
    return Built(mod.ffi, mod.lib, path, cached)


def module_name(
    name: str,
    source: str,
    cdef: str,
    flags: tuple[str, ...],
    link_flags: tuple[str, ...],
    files: Mapping[str, str],
) -> str:
    """The cache key of a module, as its name: a digest of everything that makes its
    bytes (every source text, the flags, the compiler, cffi and Python)."""
    import cffi

    key = [
        source,
        cdef,
        flags,
        link_flags,
        _compiler_id(),
        cffi.__version__,
        sys.implementation.cache_tag,
    ]
    if files:  # only then: the keys of single-file modules stay what they were
        key.append(sorted(files.items()))
    key_text = json.dumps(key)
    digest = hashlib.sha256(key_text.encode()).hexdigest()[:20]
    return f"_polyc_{_safe(name)}_{digest}"


def _verified(path: Path, manifest: Path) -> bool:
    """Whether the module file's bytes match its manifest."""
    try:
        want = json.loads(manifest.read_text())["sha256"]
        data = path.read_bytes()
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return hashlib.sha256(data).hexdigest() == want


def _load_verified(modname: str, path: Path, manifest: Path):
    """Import the cached module when its bytes match its manifest; else None."""
    if not _verified(path, manifest):
        return None
    try:
        loader = importlib.machinery.ExtensionFileLoader(modname, str(path))
        spec = importlib.util.spec_from_file_location(modname, str(path), loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
    except ImportError:
        return None
    return mod


def _compile(
    modname, source, cdef, flags, link_flags, files, path, manifest, root, requires
) -> None:
    import cffi

    share = getattr(_thread, "compilers", None)  # a background build's
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(modname, f'#line 1 "{_LINE_FILE}"\n{source}')
    tmp = Path(tempfile.mkdtemp(prefix=f".{modname}.", dir=root))
    try:
        c_file = tmp / f"{modname}.c"
        with contextlib.redirect_stdout(io.StringIO()):  # cffi prints 'generating'
            ffi.emit_c_code(str(c_file))
        for fname, text in files.items():
            (tmp / fname).write_text(text)
        units = [c_file, *(tmp / f for f in files if f.endswith(".c"))]
        so_file = tmp / path.name
        include = sysconfig.get_paths()["include"]
        compile_flags = [*flags, "-fPIC", f"-I{include}", f"-I{tmp}"]
        if len(units) == 1:  # one process compiles and links
            if requires is not None:
                requires()
            cmd = [CC, *compile_flags, "-shared", str(c_file), "-o", str(so_file)]
            with _turn(share):
                _run([*cmd, *link_flags, "-lm"], source)
        else:  # one compiler per unit, at once, then the link
            headers = {f: t for f, t in files.items() if not f.endswith(".c")}
            key = [list(flags), include, _compiler_id(), sorted(headers.items())]
            with ThreadPoolExecutor(max_workers=min(jobs(), len(units))) as pool:
                objects = list(
                    pool.map(
                        lambda u: _object(u, compile_flags, key, root, source, share),
                        units,
                    )
                )
            if requires is not None:  # built while the units compiled
                requires()
            cmd = [CC, *flags, "-shared", *map(str, objects), "-o", str(so_file)]
            with _turn(share):
                _run([*cmd, *link_flags, "-lm"], source)
        digest = hashlib.sha256(so_file.read_bytes()).hexdigest()
        os.replace(so_file, path)
        man_tmp = tmp / "manifest.json"
        man_tmp.write_text(json.dumps({"sha256": digest, "module": modname}))
        os.replace(man_tmp, manifest)
    except OSError as err:
        raise CodegenError(
            f"build: could not run the C compiler {CC!r} because {err}. Install gcc "
            "or set CC to a C compiler."
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(cmd: list[str], source: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CodegenError(_failure_message(proc.stderr, source, cmd))


def object_path(root: Path, unit_text: str, key: list) -> Path:
    """Where the object file of a translation unit of text ``unit_text`` compiled
    under ``key`` (flags, headers, compiler) is cached: one file per content, so
    a unit that recurs (a layer's code, the runtime's files) compiles once."""
    text = json.dumps([unit_text, key])
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
    return root / "objects" / f"{digest}.o"


def _object(
    unit: Path, compile_flags: list[str], key: list, root: Path, source, share=None
):
    """The object file of ``unit``: from the object cache, else compiled into it
    (written under a temporary name and renamed, like every cache entry), when
    ``share`` (a background build's :class:`Compilers`) lets it."""
    text = unit.read_text()  # cffi's wrapper names its module: never shared
    cached = object_path(root, text, key)
    if cached.is_file():
        return cached
    out = unit.with_suffix(".o")
    with _turn(share):
        _run([CC, *compile_flags, "-c", str(unit), "-o", str(out)], source)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".obj.", dir=cached.parent)
        os.close(fd)
        shutil.copyfile(out, tmp)
        os.replace(tmp, cached)
    except OSError:
        return out  # a read-only or full cache only costs a compile next time
    return cached


def _failure_message(stderr: str, source: str, cmd: list[str]) -> str:
    lines = source.splitlines()
    pattern = re.compile(
        rf"{re.escape(_LINE_FILE)}:(\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(.*)"
    )
    for line in stderr.splitlines():
        m = pattern.search(line)
        if m:
            no = int(m.group(1))
            text = lines[no - 1].strip() if 0 < no <= len(lines) else "?"
            return (
                f"build: the C compiler rejected generated line {no} `{text}` because "
                f"{m.group(2)}. This is a polyc bug unless the kernel contains raw C "
                f"(e.g. from the C frontend): report it with the kernel.\n"
                f"compiler output:\n{stderr.strip()}"
            )
    return (
        f"build: the C compiler failed ({' '.join(cmd[:2])} ...) because:\n"
        f"{stderr.strip() or '(no message)'}\nCheck that gcc and the Python headers are installed."
    )


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)[:32]
