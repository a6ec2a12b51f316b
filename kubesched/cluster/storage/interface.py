"""What the API layer needs from object storage (upstream ``k8s.io/apiserver/pkg/storage.Interface``).

``ClusterApi`` and the HTTP layer use storage only through ``Storage``, so a durable backend (etcd-like, or
sqlite with a write-ahead log) can replace the in-memory one (``memory.py``) without touching them.

The contract, as etcd3 storage and kube-apiserver's watch cache give it:

- One global revision: every write bumps it, and the written object's ``metadata.resourceVersion`` is that
  revision (etcd's mod_revision). ``revision`` is the newest one.
- A *resource* is a storage key naming one collection (``ResourceType.storage_key``, e.g. ``"/pods"``); objects
  in it are keyed by ``(namespace or "", name)``.
- Lists come sorted by key, as etcd ranges do; ``list_at`` serves the collection as it was at an older revision
  (consistent pagination with ``continue`` tokens), 410 Expired once that revision has been compacted.
- Writes carry a precondition: ``update`` and ``delete`` take the ``Stored`` version the caller read and fail with
  409 Conflict if the object has changed since; ``create`` fails with 409 AlreadyExists on a taken key.
- ``watch`` replays the changes after a revision (410 Expired beyond the kept history) and then streams new ones,
  with selector transitions (an object that stops matching is DELETED for that watcher).
- ``Stored`` versions are immutable and cache their JSON, so lists and watch fan-out are byte joins.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, Protocol

import orjson

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)
Predicate = Callable[[Obj], bool]  # label and field selectors, applied by the storage to lists and watches

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"

# 410 messages for reads at a compacted revision (upstream's etcd3 storage wording).
LIST_EXPIRED = "The resourceVersion for the provided list is too old."
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)


class Stored:
    """One stored version of an object, with its serialised form computed once on first use.

    A version that is no longer current (kept only by the watch history) is *retired*: it keeps just its bytes and
    decodes a fresh dict when ``obj`` is read. At 5,000 nodes the history holds ~100,000 lease versions; as nested
    dicts they would make every full garbage collection walk them all (pauses approaching a second), as bytes the
    collector ignores them and they take a fraction of the memory.
    """

    __slots__ = ("_data", "_obj", "key", "rv")

    def __init__(self, obj: Obj, rv: int, key: Key) -> None:
        self._obj: Obj | None = obj
        self.rv = rv
        self.key = key
        self._data: bytes | None = None

    @property
    def obj(self) -> Obj:
        if self._obj is None:
            assert self._data is not None
            return orjson.loads(self._data)
        return self._obj

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = dumps_compact(self._obj)
        return self._data

    @classmethod
    def loaded(cls, data: bytes, rv: int, key: Key) -> Stored:
        """A version read back from durable storage: its bytes are already the serialised form."""
        st = cls(orjson.loads(data), rv, key)
        st._data = data
        return st

    def retire(self) -> None:
        """Keep only the serialised form (see the class docstring)."""
        if self._data is None:
            self._data = dumps_compact(self._obj)
        self._obj = None


def dumps_compact(obj: Obj | None) -> bytes:
    # orjson hands back its whole output buffer (at least 4 KiB, far more for large objects) however short the
    # JSON; a copy the exact size keeps cached serialisations from costing several times their length.
    return memoryview(orjson.dumps(obj)).tobytes()


def with_rv(obj: Obj, rv: int) -> Obj:
    """A shallow copy of ``obj`` whose metadata.resourceVersion is ``rv`` (the input is not touched)."""
    meta = dict(obj.get("metadata") or {})
    meta["resourceVersion"] = str(rv)
    out = dict(obj)
    out["metadata"] = meta
    return out


def object_key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Watch(Protocol):
    """One subscriber's stream of ``(event type, Stored)``, drained by the HTTP layer."""

    closed: bool
    # Set when the storage cut the watch off (a consumer too far behind): the stream ends with a 410 ERROR.
    expired_message: str | None

    @property
    def pending(self) -> int:
        """Events buffered and not yet drained."""
        ...

    async def wait(self, timeout: float | None) -> bool:
        """Until events are buffered or the watch is closed; False on timeout."""
        ...

    def drain(self) -> list[tuple[str, Stored]]: ...

    def close(self) -> None: ...


class Storage(Protocol):
    """Object storage with etcd semantics (see the module docstring). Synchronous: a write, its revision and its
    fan-out to watchers happen atomically with respect to other requests on the event loop."""

    @property
    def revision(self) -> int:
        """The newest revision (what a list taken now is consistent at)."""
        ...

    # -- reads --------------------------------------------------------------------------------------------------

    def get(self, resource: str, key: Key) -> Stored | None: ...

    def list(
        self, resource: str, namespace: str | None = None, predicate: Predicate | None = None
    ) -> tuple[builtins.list[Stored], int]:
        """Current objects (of ``namespace`` if given, matching ``predicate`` if given) sorted by key, and the
        revision the list is consistent at."""
        ...

    def list_at(
        self,
        resource: str,
        rv: int,
        namespace: str | None = None,
        predicate: Predicate | None = None,
        *,
        continuing: bool = False,
    ) -> builtins.list[Stored]:
        """The collection as it was at revision ``rv``, sorted by key. 410 Expired (``LIST_EXPIRED``, or
        ``CONTINUE_EXPIRED`` with ``continuing``) once ``rv`` has been compacted."""
        ...

    def scan(self, resource: str, namespace: str | None = None) -> builtins.list[Stored]:
        """Current objects in no particular order: for internal sweeps (garbage collection, namespace deletion)
        that need neither a revision nor sorting."""
        ...

    def holds_namespace(self, namespace: str) -> bool:
        """Whether any resource still has an object in ``namespace``."""
        ...

    # -- writes -------------------------------------------------------------------------------------------------

    def create(self, resource: str, obj: Obj) -> Stored:
        """Store a new object at the next revision; 409 AlreadyExists if its key is taken."""
        ...

    def update(self, resource: str, obj: Obj, expected: Stored) -> Stored:
        """Replace ``expected`` by ``obj`` at the next revision; 409 Conflict unless ``expected`` is still the
        current version (the optimistic-concurrency precondition)."""
        ...

    def delete(self, resource: str, expected: Stored) -> Stored:
        """Remove ``expected`` (409 Conflict if it is no longer current); returns the last state at the deletion
        revision, as DELETED events carry it."""
        ...

    def drop_collection(self, resource: str) -> None:
        """Forget a whole resource and end its watches (a deleted CustomResourceDefinition)."""
        ...

    # -- watch --------------------------------------------------------------------------------------------------

    def watch(
        self, resource: str, *, namespace: str | None, predicate: Predicate | None, since: int | None
    ) -> tuple[Watch, builtins.list[tuple[str, Stored]]]:
        """Subscribe; returns the watch and the events to send first.

        ``since=None``: one ADDED per current matching object. Otherwise the changes after revision ``since``
        (410 Expired, worded ``too old resource version: <since> (<oldest>)``, if history no longer reaches it).
        """
        ...

    async def wait_for_revision(self, rv: int, timeout: float) -> bool:
        """Until ``revision >= rv`` (a read with a resourceVersion from the future); False on timeout."""
        ...

    def close_watchers(self) -> None:
        """End every watch (server shutdown)."""
        ...

    def close(self) -> None:
        """End every watch and release what the backend holds (its file, its etcd connections)."""
        ...
