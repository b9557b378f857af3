"""The accelerator search's results, reused across layers, compiles and processes.

A layer's search (:func:`schedules.accel.search.search`) is a function of its
statements (domains, bodies, accesses), its arrays (shape, dtype, whether what it
writes is stored), the engines each statement may use, the hardware description
but for its name, energies and area (:func:`accelerator.hardware.spec.schedule_view`:
the search ranks by cycles; the objective re-ranks its result with energies, after
the cache), and the scheduler's code -- and of nothing else, names included: the search breaks
its ties by position, never by name. So its *signature* is that text with every
statement, array and iterator name replaced by a canonical one in order of first
appearance (``_S0``, ``_A0``, ``_I0``), and the result is stored with canonical
names: the second convolution of a ResNet stage, the next layer of a transformer,
or the same model compiled again finds the first one's candidates and gets them
back under its own names.

Results live in memory per process and on disk, one JSON file per signature under
``$POLYC_CACHE_DIR/search`` (default ``~/.cache/polyc/search``; the build cache's
root). The scheduler's code is part of the signature (a digest of the sources the
search reads), so an edited cost model never reads an old result. A file is written
to a temporary name and renamed into place: a crash or ``kill -9`` leaves the old file
or none, concurrent writers write the same bytes, and a file that does not parse is
ignored and rewritten. ``POLYC_SEARCH_CACHE=0`` turns the cache off (every layer is
searched); :data:`STATS` counts what it did in this process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import json
import os
import pickle
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import islpy as isl

from accelerator.hardware.spec import Spec, schedule_view
from polyc.ir.kernel import Kernel
from schedules.accel import search as _search
from schedules.accel import space
from schedules.accel.layers import Layer
from schedules.accel.layertext import layer_text, renamer
from schedules.accel.structure import Structure
from schedules.accel.tilevars import PrivateTile, SharedTile

#: bumped when the stored form changes
FORMAT = 1
#: what this process did: ``memory`` and ``disk`` hits, ``searched`` layers,
#: ``uncached`` layers (names the signature cannot rename), ``written`` files
STATS: Counter = Counter()
_MEMORY: dict[str, list] = {}
#: the sources whose code decides a search's result (their digest is in the key)
_SOURCES = ("schedules/accel", "schedules", "polyc/ir", "accelerator/hardware")


@dataclasses.dataclass(frozen=True)
class Signature:
    """A layer's canonical text, its digest, and the canonical name of each name."""

    text: str
    digest: str
    names: dict[str, str]  # actual -> canonical
    domains: tuple[str, ...]  # each statement's domain under canonical names

    def matches(self, domains) -> bool:
        """Whether stored canonical ``domains`` are the same sets as this layer's
        (isl prints one set in several ways, so they are compared as sets)."""
        if len(domains) != len(self.domains):
            return False
        return all(
            isl.Set(a).is_equal(isl.Set(b)) for a, b in zip(domains, self.domains)
        )

    @property
    def inverse(self) -> dict[str, str]:
        return {c: a for a, c in self.names.items()}


def enabled() -> bool:
    return os.environ.get("POLYC_SEARCH_CACHE", "1") not in ("0", "off", "no")


def search(
    kernel: Kernel,
    layer: Layer,
    spec: Spec,
    stage: bool = True,
    keep: int = 8,
    found: list[_search.Candidate] | None = None,
) -> list[_search.Candidate]:
    """:func:`schedules.accel.search.search`, from the cache when a layer of the
    same signature was searched before (in this process or, with the same code and
    hardware, any earlier one). ``found``: the layer's search, already run (by
    :func:`search_layers`' workers), used where the search would run."""

    def run() -> list[_search.Candidate]:
        if found is not None:
            return list(found)
        return _search.search(kernel, layer, spec, keep=keep, stage=stage)

    sig = signature(kernel, layer, spec, stage, keep) if enabled() else None
    if sig is None:
        STATS["uncached"] += 1
        return run()
    stored = _known(sig)
    if stored is None:
        entries = _read(sig)
        stored = _lookup(sig, entries)
        if stored is not None:
            STATS["disk"] += 1
        else:
            STATS["searched"] += 1
            stored = _search.renamed(tuple(run()), sig.names)
            entries = [*(entries or []), (sig.domains, stored)]
            _write(sig, entries)
        _MEMORY[sig.digest] = entries
    else:
        STATS["memory"] += 1
    return list(_search.renamed(stored, sig.inverse))


def _known(sig: Signature) -> tuple | None:
    return _lookup(sig, _MEMORY.get(sig.digest))


def search_layers(
    kernel: Kernel,
    layers: list[Layer],
    spec: Spec,
    stage: bool = True,
    keep: int = 8,
    meanwhile: Callable[[], object] | None = None,
) -> list[list[_search.Candidate]]:
    """:func:`search` of each layer, the same result in the same order; the
    distinct layers that neither cache knows are searched at once in worker
    processes (:func:`jobs` of them, forked: they share the
    kernel and its analyses), when there are two or more. ``meanwhile`` is
    called while they work (the caller's next step, on a core of its own)."""
    pairs = [(kernel, layer) for layer in layers]
    return _search_pairs(pairs, spec, stage, keep, meanwhile)


def _search_pairs(pairs, spec, stage=True, keep=8, meanwhile=None):
    """:func:`search_layers` of ``pairs`` ``(kernel, layer)``: layers of one
    program or of several."""
    sigs = [
        signature(kernel, la, spec, stage, keep) if enabled() else None
        for kernel, la in pairs
    ]
    todo: dict[object, int] = {}  # one layer per distinct search, by its key
    for i, sig in enumerate(sigs):
        if sig is None:
            todo[("layer", i)] = i
        elif _known(sig) is None and _lookup(sig, _read(sig)) is None:
            todo.setdefault((sig.digest, sig.domains), i)
    found: dict[int, list] = {}
    if len(todo) >= 2 and jobs() > 1:
        found = _in_workers(pairs, list(todo.values()), spec, stage, keep, meanwhile)
    out = []
    for i, ((kernel, layer), sig) in enumerate(zip(pairs, sigs)):
        key = ("layer", i) if sig is None else (sig.digest, sig.domains)
        # a repeated layer finds its first one's result in memory, renamed
        mine = found.get(i) if todo.get(key) == i else None
        out.append(search(kernel, layer, spec, stage, keep, found=mine))
    return out


def memo_key(layer: Layer) -> tuple:
    """A layer's key in a planner's memo of searches (:func:`search_into`):
    its statements' names and its depth, for layers of programs that name
    the same statements alike."""
    return tuple(s.name for s in layer.stmts), layer.depth


def search_into(
    memo: dict,
    programs: list[tuple[Kernel, list[Layer]]],
    spec: Spec,
    stage: bool = True,
    meanwhile: Callable[[], object] | None = None,
) -> None:
    """The layers of each ``(kernel, layers)`` of ``programs`` (not opaque)
    that ``memo`` (by :func:`memo_key`) does not hold yet, searched and put in
    it, the first of each key in the order given: at once, in worker
    processes where there are several (:func:`search_layers`), where a
    planner comparing variants of a program (:mod:`schedules.accel.attention`,
    :mod:`schedules.accel.mlp`) would search them one after the other, and
    the variants' layers in one go (one set of workers, whose last searches
    overlap the next variant's first). ``meanwhile`` is called once: while
    the workers search, or after the searches where no worker runs them."""
    new: dict = {}
    for kernel, layers in programs:
        for layer in layers:
            if not layer.opaque and memo_key(layer) not in memo:
                new.setdefault(memo_key(layer), (kernel, layer))
    meanwhile = once(meanwhile)
    memo.update(zip(new, _search_pairs(list(new.values()), spec, stage, 8, meanwhile)))
    meanwhile()


def once(fn: Callable[[], object] | None) -> Callable[[], None]:
    """``fn`` run at the first call alone (``None``: nothing): a ``meanwhile``
    that the caller runs itself where no worker ran it."""
    done = [fn is None]

    def run() -> None:
        if not done[0]:
            done[0] = True
            fn()

    return run


def jobs() -> int:
    """How many worker processes search at once: ``$POLYC_JOBS`` when set, else
    the machine's cores (the variable :func:`codegen.build.jobs` reads too)."""
    try:
        return max(1, int(os.environ.get("POLYC_JOBS", "")))
    except ValueError:
        return max(1, os.cpu_count() or 1)


def _in_workers(pairs, indices, spec, stage, keep, meanwhile=None) -> dict[int, list]:
    """``{index: candidates}`` of the ``(kernel, layer)`` pairs at ``indices``,
    searched in forked worker processes; a layer whose worker failed is
    missing (the caller's own search of it raises, or not, as it would have)."""

    def task(n: int) -> list:
        kernel, layer = pairs[indices[n]]
        return _search.search(kernel, layer, spec, keep=keep, stage=stage)

    done = in_workers(task, len(indices), meanwhile)
    return {indices[n]: found for n, found in done.items()}


#: what a forked worker runs: ``task(n)`` for each ``n`` it is given
_TASK: Callable[[int], object] | None = None


def in_workers(
    task: Callable[[int], object], count: int, meanwhile: Callable | None = None
) -> dict[int, object]:
    """``{n: task(n)}`` for ``n`` below ``count``, run in :func:`jobs` forked
    worker processes (they share the caller's objects through fork; a result
    comes back pickled). ``meanwhile`` is called while they work. A task that
    raised is missing (the caller runs it itself, and so meets its error); all
    are where no worker can start (in a pool's worker, or without fork)."""
    with workers(task, count) as running:
        if meanwhile is not None:
            meanwhile()
        got = {n: running.get(n) for n in range(count)}
    return {n: r[0] for n, r in got.items() if r is not None}


@contextlib.contextmanager
def workers(task: Callable[[int], object], count: int):
    """:func:`jobs` forked worker processes running ``task(n)`` for each ``n``
    below ``count``, in that order, while the block runs: it gets a
    :class:`Running` whose ``get(n)`` waits for ``task(n)`` (the caller may
    use each result as it comes, its own work beside the workers'). Tasks not
    asked for are dropped when the block ends."""
    import multiprocessing

    global _TASK
    if multiprocessing.current_process().daemon:
        yield Running(None)  # a pool's worker may not have children: in turn
        return
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform: run in turn
        yield Running(None)
        return
    _TASK = task
    # the workers inherit the caller's whole heap (torch, the program, its
    # analyses): frozen, their collector never walks it, which copied every
    # page of it into each worker (about 0.4 CPU s of ResNet-18's 2.5 in its
    # two workers); the caller's collector walks it again once they are forked
    # (unless the caller froze it: :func:`frozen_heap`)
    was = _FROZEN[0] > 0
    gc.freeze()
    try:
        with context.Pool(min(jobs(), count)) as pool:
            _thaw(was)
            yield Running([pool.apply_async(_work, (n,)) for n in range(count)])
    finally:
        _thaw(was)
        _TASK = None


class Running:
    """The tasks of :func:`workers`, in worker processes (none when no worker
    could start: each result is then missing, and the caller runs the task)."""

    def __init__(self, pending):
        self._pending = pending
        self._got: dict[int, tuple | None] = {}

    def get(self, n: int) -> tuple | None:
        """``(task(n),)``, once its worker is done; None when it raised or no
        worker runs it."""
        if n not in self._got:
            done = None if self._pending is None else self._pending[n].get()
            self._got[n] = None if done is None else pickle.loads(done)
        return self._got[n]

    def ready(self, n: int) -> bool:
        """Whether :meth:`get` of ``n`` returns at once."""
        return self._pending is None or self._pending[n].ready()


def _thaw(frozen: bool) -> None:
    """The heap as the caller had it: thawed, or frozen again (what was made
    since too) when it was frozen."""
    gc.unfreeze()
    if frozen:
        gc.freeze()


@contextlib.contextmanager
def frozen_heap():
    """The objects alive on entry frozen (``gc.freeze``) until exit, unless
    the heap is frozen already: a compile's collections then never walk the
    caller's heap (torch and its model, hundreds of thousands of objects,
    none of them the compile's garbage), which a full collection walked in
    hf-mobilenetv2's schedule stage."""
    if _FROZEN[0] or gc.get_freeze_count() > 0:
        yield
        return
    gc.freeze()
    _FROZEN[0] += 1
    try:
        yield
    finally:
        _FROZEN[0] -= 1
        gc.unfreeze()


#: how many :func:`frozen_heap` blocks froze the heap (0 or 1): what
#: :func:`in_workers` restores after its fork, without counting the frozen
#: objects (``gc.get_freeze_count`` walks them all: 40 ms of a network's
#: 460,000, at every search in workers)
_FROZEN = [0]


def _work(n: int) -> bytes | None:
    try:
        return pickle.dumps((_TASK(n),))
    except Exception:  # the caller's own run of the task reports it
        return None


def signature(
    kernel: Kernel, layer: Layer, spec: Spec, stage: bool = True, keep: int = 8
) -> Signature | None:
    """The layer's signature, or ``None`` when its names cannot be renamed safely
    (a name that is also an engine word, or not an identifier)."""
    text = layer_text(kernel, layer, lambda s: space.engines(kernel, s, spec))
    if text is None:
        return None
    lines, names = text
    # what the search reads of the hardware: not its name nor its energies and
    # area (the objective re-ranks the result with those, after the cache)
    lines.append(f"spec {schedule_view(spec)!r}")
    # the room the homes of other arrays leave the layer (its text holds only
    # its own arrays' homes): one layer in two programs whose homes differ
    # searches in different room
    from schedules.accel.search import banked, capacities

    lines.append(f"room {sorted(capacities(kernel, layer, spec).items())}")
    lines.append(
        f"banks {[(m.usable_banks, m.usable_part) for m in banked(kernel, layer, spec).memory]}"
    )
    lines.append(f"stage {stage} keep {keep} format {FORMAT} code {_code_digest()}")
    canonical = "\n".join(lines)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:32]
    domains = tuple(renamer(names)(str(s.domain)) for s in layer.stmts)
    return Signature(canonical, digest, names, domains)


def _lookup(sig: Signature, entries) -> tuple | None:
    """The stored candidates of the entry whose domains are the layer's."""
    for domains, stored in entries or ():
        if sig.matches(domains):
            return stored
    return None


# on disk ---------------------------------------------------------------------------

_CLASSES = {
    c.__name__: c for c in (_search.Candidate, Structure, SharedTile, PrivateTile)
}


def _encode(obj):
    if isinstance(obj, tuple):
        return [_encode(x) for x in obj]
    if dataclasses.is_dataclass(obj):
        out = {"__": type(obj).__name__}
        for f in dataclasses.fields(obj):
            out[f.name] = _encode(getattr(obj, f.name))
        return out
    return obj


def _decode(obj):
    if isinstance(obj, list):
        return tuple(_decode(x) for x in obj)
    if isinstance(obj, dict):
        cls = _CLASSES[obj["__"]]
        return cls(**{k: _decode(v) for k, v in obj.items() if k != "__"})
    return obj


def root(name: str = "search") -> Path:
    """Where the search results live: ``$POLYC_CACHE_DIR/search`` (default
    ``~/.cache/polyc``, the build cache's root); ``name`` picks another folder
    there (polyc/reuse.py keeps its compiles in ``compiles``)."""
    base = os.environ.get("POLYC_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "polyc"
    )
    return Path(base) / name


def _read(sig: Signature) -> list | None:
    """The entries ``(domains, candidates)`` stored under the signature's digest
    (layers whose text is the same and whose domains may differ)."""
    path = root() / f"{sig.digest}.json"
    try:
        data = json.loads(path.read_text())
        if data["format"] != FORMAT or data["signature"] != sig.text:
            return None  # a digest collision: search again
        return [
            (tuple(e["domains"]), tuple(_decode(e["candidates"])))
            for e in data["entries"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(sig: Signature, entries: list) -> None:
    folder = root()
    data = {
        "format": FORMAT,
        "signature": sig.text,
        "entries": [
            {"domains": list(d), "candidates": [_encode(c) for c in cands]}
            for d, cands in entries
        ],
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{sig.digest}.", dir=folder)
        with os.fdopen(fd, "w") as f:
            # dumps, not dump: only a one-shot encoding runs json's C encoder
            f.write(json.dumps(data))
        os.replace(tmp, folder / f"{sig.digest}.json")
        STATS["written"] += 1
    except OSError:
        pass  # a read-only or full cache only costs a search next time


def _code_digest() -> str:
    """A digest of the sources the search's result depends on."""
    return source_digest(_SOURCES, (".py",), recursive=False)


@functools.cache
def source_digest(folders: tuple[str, ...], suffixes: tuple[str, ...], recursive=True):
    """A digest of the files with ``suffixes`` in ``folders`` (relative to the
    repository's top), names and bytes: a cache keyed by it never reads what
    older code wrote."""
    top = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for folder in folders:
        found = (top / folder).rglob("*") if recursive else (top / folder).glob("*")
        for path in sorted(found):
            if path.suffix in suffixes and path.is_file():
                h.update(str(path.relative_to(top)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]
