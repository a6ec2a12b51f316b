"""Durable ``Storage``: the in-memory store as the read and watch cache, an SQLite file underneath.

As k3s keeps a cluster in SQLite through kine: one file, transactional, nothing to install. Every write is
committed to the file before it reaches memory (and so before the request is acknowledged or any watcher sees
it); at start the objects and the revision counter are read back.

- The file holds the *current* objects, not a change log: ``objects(resource, namespace, name, rv, value)``,
  one upsert or delete per write, so it never needs compaction and its size is that of the live state. The
  change history for watch resumption lives in memory, as before; after a restart it starts at the recovered
  revision, and older resumptions get ``410 Expired`` (clients relist), as after an etcd compaction.
- ``meta.revision`` keeps the revision of the newest deletion, so the counter never goes backwards when the
  newest write was a delete (otherwise the recovered revision is the largest ``rv`` of the objects).
- WAL journal. ``synchronous=NORMAL`` (the default) makes a commit a write into the WAL file: it survives the
  process being killed (SIGKILL) at any point, and a power loss may lose the last commits but never the file's
  consistency. ``synchronous=FULL`` adds an fsync per commit (survives power loss; several times slower).
- Checkpoints (the WAL copied into the database file) run once a second in a thread of their own, so a write
  never pays for one (SQLite's automatic checkpoint runs inside the commit that crosses 1,000 pages).
- One writer: an exclusive ``flock`` on ``<file>.lock`` keeps a second server off the same file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import IO, Literal

from kubesched.cluster import errors
from kubesched.cluster.storage.interface import Key, Stored
from kubesched.cluster.storage.memory import DEFAULT_HISTORY_SIZE, MemoryStorage, paused_gc

Synchronous = Literal["normal", "full"]
CHECKPOINT_INTERVAL = 1.0  # seconds between WAL checkpoints
log = logging.getLogger("kubesched.cluster.sqlite")

# A rowid table with a unique key, not WITHOUT ROWID: objects are kilobytes, and SQLite's clustered-key tables
# suit small rows (measured here: an upsert of a 1.5 KiB pod ~80 µs against ~135 µs).
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS objects ("
    " id INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    " rv INTEGER NOT NULL, value BLOB NOT NULL, UNIQUE (resource, namespace, name))",
    "CREATE TABLE IF NOT EXISTS meta (id INTEGER PRIMARY KEY CHECK (id = 1), revision INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO meta (id, revision) VALUES (1, 1)",
)
_UPSERT = (
    "INSERT INTO objects (resource, namespace, name, rv, value) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (resource, namespace, name) DO UPDATE SET rv = excluded.rv, value = excluded.value"
)
_DELETE = "DELETE FROM objects WHERE resource = ? AND namespace = ? AND name = ?"
_SET_REVISION = "UPDATE meta SET revision = ? WHERE id = 1"


class StorageInUse(Exception):
    """Another process holds the storage file."""


class SqliteStorage(MemoryStorage):
    """``MemoryStorage`` whose writes are committed to an SQLite file first (implements ``Storage``)."""

    def __init__(
        self,
        path: Path,
        history_size: int = DEFAULT_HISTORY_SIZE,
        synchronous: Synchronous = "normal",
    ) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock_file: IO[bytes] | None = _lock(path.with_name(path.name + ".lock"))
        try:
            # isolation_level=None: autocommit, each statement its own transaction unless BEGIN says otherwise.
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            for stmt in _SCHEMA:
                self._db.execute(stmt)
            objects, revision = _recover(self._db)
            # Checkpoints (copying the WAL into the file) run in a thread of their own, not in a write.
            self._db.execute("PRAGMA wal_autocheckpoint=0")
        except sqlite3.Error as e:
            self._release()
            raise StorageInUse(f"cannot open {path}: {e}") from e
        super().__init__(history_size, start_revision=revision)
        for resource, st in objects:
            self.collection(resource).put(st)
        self.recovered = len(objects)
        self._stop_checkpoints = threading.Event()
        self._checkpointer = threading.Thread(target=self._checkpoints, name="sqlite-checkpoint", daemon=True)
        self._checkpointer.start()

    def _checkpoints(self) -> None:
        """Copy committed WAL frames into the database file every second, without blocking writers (PASSIVE);
        the sqlite3 module releases the GIL meanwhile, so the event loop keeps serving."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            while not self._stop_checkpoints.wait(CHECKPOINT_INTERVAL):
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error as e:  # busy or I/O: the next round tries again
                    log.debug("sqlite checkpoint: %s", e)
        finally:
            db.close()

    # -- durability ------------------------------------------------------------------------------------------

    def _persist_put(self, storage_key: str, st: Stored) -> None:
        try:
            self._db.execute(_UPSERT, (storage_key, st.key[0], st.key[1], st.rv, st.data))
        except sqlite3.Error as e:
            raise errors.internal(f"storage: cannot write {storage_key} {st.key[1]}: {e}") from e

    def _persist_delete(self, storage_key: str, key: Key, rv: int) -> None:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(_DELETE, (storage_key, key[0], key[1]))
                db.execute(_SET_REVISION, (rv,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise errors.internal(f"storage: cannot delete {storage_key} {key[1]}: {e}") from e

    def _persist_drop(self, storage_key: str) -> None:
        try:
            self._db.execute("DELETE FROM objects WHERE resource = ?", (storage_key,))
        except sqlite3.Error as e:
            raise errors.internal(f"storage: cannot drop {storage_key}: {e}") from e

    # -- lifecycle -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file (a clean shutdown checkpoints the WAL into it) and release the lock."""
        super().close()
        self._stop_checkpoints.set()
        self._checkpointer.join(30)
        try:
            self._db.close()
        finally:
            self._release()

    def _release(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing drops the flock
            self._lock_file = None


def _lock(path: Path) -> IO[bytes]:
    f = open(path, "a+b")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().decode(errors="replace").strip() or "another process"
        f.close()
        raise StorageInUse(f"{path.with_suffix('')} is in use by {holder}") from None
    f.truncate(0)
    f.write(f"pid {os.getpid()}".encode())
    f.flush()
    return f


def _recover(db: sqlite3.Connection) -> tuple[list[tuple[str, Stored]], int]:
    """The stored objects and the revision to continue from (never below any revision already issued)."""
    (revision,) = db.execute("SELECT revision FROM meta WHERE id = 1").fetchone()
    objects: list[tuple[str, Stored]] = []
    # Decoding tens of thousands of objects allocates millions of containers and no garbage: without the
    # collector's passes over them, recovery of 50,000 pods takes a fifth of the time.
    with paused_gc():
        for resource, namespace, name, rv, value in db.execute(
            "SELECT resource, namespace, name, rv, value FROM objects ORDER BY resource, namespace, name"
        ):
            objects.append((resource, Stored.loaded(bytes(value), rv, (namespace, name))))
            if rv > revision:
                revision = rv
    return objects, int(revision)
