"""Study results in SQLite: every finished point committed as it lands.

A database holds any number of studies, each a name and its points; a point is
stored once per study, under its index and a key that digests what it is (the op,
the schedule, the whole hardware description, the input mode, ``check``). The file
is in WAL mode, so it can be read while a study writes it and several studies (in
several processes) can write it at once; each commit is one point, so a study
killed at any moment (``kill -9``) loses only the points that were running, and
:meth:`Store.resume` hands the finished ones back so that the study runs only the
rest. Records are stored as JSON, the same records as ``sweep.json``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import sqlite3
import time
from pathlib import Path

from polyc.errors import StoreError

#: the first bytes of every SQLite 3 database file
MAGIC = b"SQLite format 3\x00"
#: how long a writer waits for another's lock (s): commits are one row, so waits
#: are short, but a loaded machine can hold a writer back for a while
BUSY_TIMEOUT_S = 120.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS studies (
    name TEXT PRIMARY KEY,
    created REAL NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS points (
    study TEXT NOT NULL REFERENCES studies(name),
    idx INTEGER NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    label TEXT,
    op TEXT,
    schedule TEXT,
    config TEXT,
    record TEXT NOT NULL,
    PRIMARY KEY (study, idx)
);
"""


def is_db(path: str | Path) -> bool:
    """Whether ``path`` is an SQLite database file."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def point_key(task) -> str:
    """A digest of what a point is: its op, schedule, hardware (every number of
    the description, not the file it came from), input mode and ``check``."""
    spec = dataclasses.replace(task.spec, source="")
    inputs = task.inputs if isinstance(task.inputs, str) else "function"
    op = _stable(task.op.factory, task.op.key)
    schedule = _stable(task.schedule.function, task.schedule.key)
    text = json.dumps([op, schedule, repr(spec), inputs, task.check, task.label])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _stable(fn, key: str) -> str:
    """A function's identity across processes: its name and source text (its
    pickle, ``key``, differs between a script run as ``__main__`` and the same
    file imported), or ``key`` when it has no source or is no function."""
    if fn is None:
        return key
    inner = getattr(fn, "func", fn)  # functools.partial
    try:
        source = inspect.getsource(inner)
    except (OSError, TypeError):
        return key
    name = getattr(inner, "__qualname__", type(fn).__name__)
    extra = repr((getattr(fn, "args", ()), getattr(fn, "keywords", {})))
    return f"fn:{name}:{hashlib.sha256((source + extra).encode()).hexdigest()[:16]}"


def _open(path: Path) -> sqlite3.Connection:
    """A connection to the results database at ``path`` in WAL mode with its
    tables made (closed again when that fails)."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
    except sqlite3.Error:
        db.close()
        raise
    return db


class Store:
    """One study in a results database (created when missing).

    Raises:
        StoreError: when the file is not an SQLite database or cannot be opened.
    """

    def __init__(self, path: str | Path, study: str = "sweep"):
        self.path = Path(path)
        self.study = study
        exists = self.path.exists()
        if exists and self.path.stat().st_size and not is_db(self.path):
            raise StoreError(
                f"sweep: cannot use {self.path} as a results database because it "
                "is not an SQLite file. Pass a new path or a study .db written by "
                "polyc sweep."
            )
        # a process that makes the database or switches it to WAL while
        # another opens it can get "database is locked" at once, without
        # SQLite's busy handler waiting (two studies started together on a new
        # file: seen in CI), so the opening is tried again until the timeout
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        pause = 0.01
        while True:
            try:
                self.db = _open(self.path)
                break
            except sqlite3.OperationalError as err:
                busy = "locked" in str(err) or "busy" in str(err)
                if not busy or time.monotonic() + pause > deadline:
                    raise self._cannot_open(err) from None
                time.sleep(pause)
                pause = min(2 * pause, 0.5)
            except sqlite3.Error as err:
                raise self._cannot_open(err) from None

    def _cannot_open(self, err: sqlite3.Error) -> StoreError:
        return StoreError(
            f"sweep: cannot open the results database {self.path} because "
            f"SQLite says '{err}'. Pass a path in a directory you can write to."
        )

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def resume(self, tasks) -> dict[int, dict]:
        """Register the study and return the records of ``tasks`` it already holds
        (by index), to be skipped.

        Raises:
            StoreError: when the study holds a different point at an index (the
                same name used for another study).
        """
        self.db.execute(
            "INSERT OR IGNORE INTO studies (name, created) VALUES (?, ?)",
            (self.study, time.time()),
        )
        held = {
            idx: (key, record)
            for idx, key, record in self.db.execute(
                "SELECT idx, key, record FROM points WHERE study = ?", (self.study,)
            )
        }
        done = {}
        for task in tasks:
            if task.index not in held:
                continue
            key, record = held[task.index]
            if key != point_key(task):
                raise StoreError(
                    f"sweep: study {self.study!r} in {self.path} holds another "
                    f"point at index {task.index} because it was written by a "
                    f"different study (this one's point {task.index} is "
                    f"{task.label} on {task.spec.name}). Pass another study name "
                    "(study=, --study) or another database."
                )
            done[task.index] = json.loads(record)
        return done

    def add(self, task, record: dict) -> None:
        """Commit one finished point (a point already held is left as it is)."""
        self.db.execute(
            "INSERT OR IGNORE INTO points (study, idx, key, status, label, op, "
            "schedule, config, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.study,
                record["index"],
                point_key(task),
                record["status"],
                record.get("label"),
                record.get("op"),
                record.get("schedule"),
                record.get("config"),
                json.dumps(record, default=_plain),
            ),
        )

    def meta(self) -> dict:
        """The study's meta as last written (``{}`` before its first run ends)."""
        row = self.db.execute(
            "SELECT meta FROM studies WHERE name = ?", (self.study,)
        ).fetchone()
        return json.loads(row[0]) if row else {}

    def set_meta(self, meta: dict) -> None:
        self.db.execute(
            "UPDATE studies SET meta = ? WHERE name = ?",
            (json.dumps(meta, default=_plain), self.study),
        )


def studies(path: str | Path) -> list[str]:
    """The names of the studies in a results database, oldest first."""
    with _reader(path) as db:
        return [n for (n,) in db.execute("SELECT name FROM studies ORDER BY created")]


def load(path: str | Path, study: str | None = None) -> tuple[list[dict], dict]:
    """``(records, meta)`` of one study of a results database (the only one when
    ``study`` is None). Opens the file read-only: a study may be writing it.

    Raises:
        StoreError: when the file is not a results database, or ``study`` is not
            in it, or None while it holds several.
    """
    names = studies(path)
    if study is None:
        if len(names) != 1:
            raise StoreError(
                f"sweep: {path} holds {len(names)} studies "
                f"({', '.join(names) or 'none'}) because several studies may share "
                "one database. Name one with --study (study=)."
            )
        study = names[0]
    if study not in names:
        raise StoreError(
            f"sweep: {path} has no study {study!r} because its studies are "
            f"{', '.join(names) or 'none'}. Name one of those."
        )
    with _reader(path) as db:
        rows = db.execute(
            "SELECT record FROM points WHERE study = ? ORDER BY idx", (study,)
        ).fetchall()
        (meta,) = db.execute(
            "SELECT meta FROM studies WHERE name = ?", (study,)
        ).fetchone()
    meta = json.loads(meta)
    meta.setdefault("study", study)
    return [json.loads(r) for (r,) in rows], meta


class _reader:
    def __init__(self, path):
        self.path = Path(path)

    def __enter__(self) -> sqlite3.Connection:
        if not is_db(self.path):
            raise StoreError(
                f"sweep: cannot load {self.path} because it is not an SQLite "
                "database. Pass a study .db written by polyc sweep --db or --out."
            )
        try:
            self.db = sqlite3.connect(
                f"{self.path.resolve().as_uri()}?mode=ro",
                uri=True,
                timeout=BUSY_TIMEOUT_S,
            )
            self.db.execute("SELECT name FROM studies LIMIT 1")
        except sqlite3.Error as err:
            raise StoreError(
                f"sweep: cannot read {self.path} because SQLite says '{err}'. Pass "
                "a study .db written by polyc sweep --db or --out."
            ) from None
        return self.db

    def __exit__(self, *exc) -> None:
        self.db.close()


def _plain(value):
    if hasattr(value, "item"):
        return value.item()
    return str(value)
