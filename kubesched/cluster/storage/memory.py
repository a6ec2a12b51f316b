"""In-memory ``Storage`` with etcd-like revisions and a bounded watch history.

- One global revision counter: every write bumps it, and the object's ``metadata.resourceVersion`` is the revision of
  its last write (etcd's mod_revision), so clients can order and resume on any resource.
- Stored objects are never mutated after they are stored: writers build a new dict. That lets reads, lists and watch
  fan-out share one dict and one cached serialisation (``Stored.data``) among any number of readers.
- Each collection keeps the last ``history_size`` change events. A watch from revision N replays the events after N;
  once history older than N has been dropped the watch gets ``410 Expired``, as from kube-apiserver's watch cache.
- Everything here is synchronous and runs on the server's event loop, so a write, its history entry and its fan-out
  to watchers happen atomically with respect to other requests.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import gc
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from kubesched.cluster import errors
from kubesched.cluster.storage.interface import (
    ADDED,
    CONTINUE_EXPIRED,
    DELETED,
    LIST_EXPIRED,
    MODIFIED,
    Key,
    Obj,
    Predicate,
    Stored,
    object_key,
    with_rv,
)

DEFAULT_HISTORY_SIZE = 100_000
WATCHER_BUFFER_LIMIT = 200_000  # events a slow watcher may lag behind before it is cut off with 410


@dataclass(slots=True)
class Event:
    type: str
    rv: int
    new: Stored  # for DELETED: the last state, re-versioned at the deletion revision
    old: Stored | None  # previous state for MODIFIED/DELETED (selector transitions need it)
    _old_at_rv: Stored | None = field(default=None, repr=False, compare=False)

    def old_at_rv(self) -> Stored:
        """The previous state re-versioned at this event's revision: what a watcher whose selector the object
        stops matching receives as DELETED (kube-apiserver's cacher sends the old content, not the new)."""
        if self._old_at_rv is None:
            assert self.old is not None
            self._old_at_rv = Stored(with_rv(self.old.obj, self.rv), self.rv, self.old.key)
            self._old_at_rv.retire()  # lives on in the history only
        return self._old_at_rv


class Watcher:
    """A subscriber to one collection (implements ``Watch``). The store pushes matching events; the HTTP layer
    drains them."""

    __slots__ = (
        "_waiter",
        "buffer",
        "closed",
        "collection",
        "expired_message",
        "namespace",
        "predicate",
    )

    def __init__(self, collection: Collection, namespace: str | None, predicate: Predicate | None) -> None:
        self.collection = collection
        self.namespace = namespace
        self.predicate = predicate
        self.buffer: deque[tuple[str, Stored]] = deque()
        # The future the HTTP layer is waiting on, if any (a bare future, not an Event under wait_for: that
        # costs a task and a timer per wake-up, once per write on the pods collection).
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.expired_message: str | None = None

    @property
    def pending(self) -> int:
        return len(self.buffer)

    def _matches(self, st: Stored | None) -> bool:
        if st is None:
            return False
        if self.namespace is not None and st.key[0] != self.namespace:
            return False
        return self.predicate is None or self.predicate(st.obj)

    def offer(self, ev: Event) -> None:
        """Translate a store event into what this watcher sees (selector transitions as ADDED/DELETED)."""
        if self.closed:
            return
        if ev.type == ADDED:
            if self._matches(ev.new):
                self._push(ADDED, ev.new)
        elif ev.type == DELETED:
            if self._matches(ev.old if ev.old is not None else ev.new):
                self._push(DELETED, ev.new)
        else:
            now = self._matches(ev.new)
            before = self._matches(ev.old)
            if now and before:
                self._push(MODIFIED, ev.new)
            elif now:
                self._push(ADDED, ev.new)
            elif before:
                self._push(DELETED, ev.old_at_rv())

    def _push(self, etype: str, st: Stored) -> None:
        self.buffer.append((etype, st))
        if len(self.buffer) > WATCHER_BUFFER_LIMIT:
            # A consumer this far behind would hold the history hostage; cut it off as the apiserver does.
            self.expire("watcher fell too far behind; please re-list")
            return
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def expire(self, message: str) -> None:
        self.expired_message = message
        self.buffer.clear()
        self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.collection.watchers.discard(self)
            self._wake()

    async def wait(self, timeout: float | None) -> bool:
        """Wait until events are buffered or the watcher is closed; False on timeout."""
        if self.buffer or self.closed:
            return True
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _time_out, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if self._waiter is waiter:
                self._waiter = None
        return bool(self.buffer) or self.closed

    def drain(self) -> list[tuple[str, Stored]]:
        items = list(self.buffer)
        self.buffer.clear()
        return items


def _time_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@dataclass
class Collection:
    """Objects of one storage key (e.g. all pods), their recent change history and their watchers."""

    name: str
    history_size: int = DEFAULT_HISTORY_SIZE
    objects: dict[Key, Stored] = field(default_factory=dict)
    history: deque[Event] = field(default_factory=deque)
    # Revision of the newest event dropped from history: watches from below it can no longer be served.
    compacted: int = 0
    watchers: set[Watcher] = field(default_factory=set)
    # Objects per namespace, so namespaced lists do not scan every object.
    by_namespace: dict[str, dict[Key, Stored]] = field(default_factory=dict)

    def record(self, ev: Event) -> None:
        self.history.append(ev)
        while len(self.history) > self.history_size:
            dropped = self.history.popleft()
            self.compacted = dropped.rv
        for w in list(self.watchers):
            w.offer(ev)

    def put(self, st: Stored) -> None:
        self.objects[st.key] = st
        self.by_namespace.setdefault(st.key[0], {})[st.key] = st

    def pop(self, key: Key) -> Stored | None:
        st = self.objects.pop(key, None)
        if st is not None:
            ns_objs = self.by_namespace.get(key[0])
            if ns_objs is not None:
                ns_objs.pop(key, None)
                if not ns_objs:
                    del self.by_namespace[key[0]]
        return st

    def iter_objects(self, namespace: str | None) -> Iterable[Stored]:
        if namespace is None:
            return self.objects.values()
        return self.by_namespace.get(namespace, {}).values()

    def events_since(self, rv: int) -> Iterator[Event]:
        """Events with revision > rv, oldest first (the caller has checked ``rv >= compacted``)."""
        if not self.history or self.history[-1].rv <= rv:
            return iter(())
        # History is ordered by revision: walk back from the newest end (indexing into the middle of a deque
        # costs O(n) per access, so iterate instead).
        newer: list[Event] = []
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            newer.append(ev)
        newer.reverse()
        return iter(newer)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside, and what was allocated inside is left out of later passes
    (``gc.freeze``): for loading stored objects, many long-lived containers and no garbage. JSON objects hold
    no cycles, so reference counting still frees them once they are replaced."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def clock_revision() -> int:
    """A starting revision above any an earlier server on this machine issued: microseconds since the epoch.

    An earlier server started at a smaller clock reading and would have had to write more than one object per
    microsecond on average to pass it. It stays below 2**53, so JavaScript clients read it exactly too.
    """
    return time.time_ns() // 1000


def _conflict(resource: str, key: Key, why: str) -> errors.ApiError:
    # Storage knows collections, not API resources: name the collection as upstream's storage errors name keys.
    group, _, plural = resource.rpartition("/")
    return errors.conflict(plural, key[1], why, "" if group == "core" else group)


class MemoryStorage:
    """All collections of the server and the global revision counter (implements ``Storage``).

    ``start_revision`` is where the revision counter starts (etcd starts at 1; the first write gets 2). A server that
    starts above every revision an earlier server issued (``clock_revision``, or a durable backend's recovered
    revision) also treats history before it as compacted: a client resuming a watch or a list from an earlier
    server's resourceVersion gets ``410 Expired`` and relists, instead of silently missing what changed.

    Subclasses make writes durable by overriding ``_persist_put`` / ``_persist_delete`` / ``_persist_drop``: they
    run after the preconditions are checked and before anything in memory changes, so a write that cannot be
    made durable fails without effect (the revision is not taken either).
    """

    def __init__(self, history_size: int = DEFAULT_HISTORY_SIZE, start_revision: int = 1) -> None:
        self.revision = start_revision
        self.history_size = history_size
        # Watches and lists from before this revision cannot be served (what an earlier server issued).
        self.floor = start_revision if start_revision > 1 else 0
        self._collections: dict[str, Collection] = {}
        self._revision_waiters: builtins.list[tuple[int, asyncio.Future[None]]] = []

    def collection(self, storage_key: str) -> Collection:
        col = self._collections.get(storage_key)
        if col is None:
            col = self._collections[storage_key] = Collection(storage_key, self.history_size)
            col.compacted = self.floor
        return col

    def collections(self) -> dict[str, Collection]:
        """The collections by storage key (read-only use: recovery checks, tools)."""
        return self._collections

    # -- durability hooks (no-ops in memory) -----------------------------------------------------------------

    def _persist_put(self, storage_key: str, st: Stored) -> None:
        """Make ``st`` (a created or updated object at revision ``st.rv``) durable before it is committed."""

    def _persist_delete(self, storage_key: str, key: Key, rv: int) -> None:
        """Make the deletion of ``key`` at revision ``rv`` durable before it is committed."""

    def _persist_drop(self, storage_key: str) -> None:
        """Forget a whole collection durably."""

    def drop_collection(self, storage_key: str) -> None:
        self._persist_drop(storage_key)
        col = self._collections.pop(storage_key, None)
        if col is not None:
            for w in list(col.watchers):
                w.close()

    # -- reads ---------------------------------------------------------------------------------------------

    def get(self, storage_key: str, key: Key) -> Stored | None:
        return self.collection(storage_key).objects.get(key)

    def list(
        self, storage_key: str, namespace: str | None = None, predicate: Predicate | None = None
    ) -> tuple[builtins.list[Stored], int]:
        """Current objects sorted by key (as etcd returns them) and the revision the list was taken at."""
        col = self.collection(storage_key)
        items = [st for st in col.iter_objects(namespace) if predicate is None or predicate(st.obj)]
        items.sort(key=lambda st: st.key)
        return items, self.revision

    def list_at(
        self,
        storage_key: str,
        rv: int,
        namespace: str | None = None,
        predicate: Predicate | None = None,
        *,
        continuing: bool = False,
    ) -> builtins.list[Stored]:
        """The collection as it was at revision ``rv``, rebuilt by undoing newer history.

        410 Expired once history no longer reaches back to ``rv``, worded as upstream words it for an exact list
        or, with ``continuing``, for a continue token.
        """
        col = self.collection(storage_key)
        if rv < col.compacted:
            raise errors.expired(CONTINUE_EXPIRED if continuing else LIST_EXPIRED)
        state: dict[Key, Stored] = {k: st for k, st in col.objects.items()}
        for ev in reversed(list(col.events_since(rv))):
            if ev.type == ADDED:
                state.pop(ev.new.key, None)
            elif ev.old is not None:
                state[ev.old.key] = ev.old
        items = [
            st
            for st in state.values()
            if (namespace is None or st.key[0] == namespace) and (predicate is None or predicate(st.obj))
        ]
        items.sort(key=lambda st: st.key)
        return items

    def scan(self, storage_key: str, namespace: str | None = None) -> builtins.list[Stored]:
        """Current objects in insertion order, unsorted (a snapshot: callers delete while they walk it)."""
        col = self._collections.get(storage_key)
        return [] if col is None else list(col.iter_objects(namespace))

    def holds_namespace(self, namespace: str) -> bool:
        """Whether any collection still has an object in ``namespace``."""
        return any(namespace in col.by_namespace for col in self._collections.values())

    # -- writes --------------------------------------------------------------------------------------------

    def create(self, storage_key: str, obj: Obj) -> Stored:
        """Store a new object; 409 AlreadyExists if its key is taken."""
        col = self.collection(storage_key)
        key = object_key(obj)
        if key in col.objects:
            group, _, plural = storage_key.rpartition("/")
            raise errors.already_exists(plural, key[1], "" if group == "core" else group)
        rv = self.revision + 1
        st = Stored(with_rv(obj, rv), rv, key)
        self._persist_put(storage_key, st)
        self.revision = rv
        col.put(st)
        col.record(Event(ADDED, rv, st, None))
        self._notify_revision()
        return st

    def update(self, storage_key: str, obj: Obj, old: Stored) -> Stored:
        """Replace ``old`` with ``obj``; 409 Conflict unless ``old`` is still the current version."""
        col = self.collection(storage_key)
        if col.objects.get(old.key) is not old:
            raise _conflict(storage_key, old.key, errors.OPTIMISTIC_LOCK)
        rv = self.revision + 1
        st = Stored(with_rv(obj, rv), rv, old.key)
        self._persist_put(storage_key, st)
        self.revision = rv
        col.put(st)
        col.record(Event(MODIFIED, rv, st, old))
        old.retire()
        self._notify_revision()
        return st

    def delete(self, storage_key: str, old: Stored) -> Stored:
        """Remove ``old``; 409 Conflict unless it is still the current version."""
        col = self.collection(storage_key)
        if col.objects.get(old.key) is not old:
            raise _conflict(storage_key, old.key, errors.OPTIMISTIC_LOCK)
        rv = self.revision + 1
        self._persist_delete(storage_key, old.key, rv)
        self.revision = rv
        col.pop(old.key)
        # The DELETED event carries the last state at the deletion revision, as kube-apiserver sends it.
        st = Stored(with_rv(old.obj, rv), rv, old.key)
        col.record(Event(DELETED, rv, st, old))
        old.retire()
        st.retire()
        self._notify_revision()
        return st

    # -- watch ---------------------------------------------------------------------------------------------

    def watch(
        self,
        storage_key: str,
        *,
        namespace: str | None,
        predicate: Predicate | None,
        since: int | None,
    ) -> tuple[Watcher, builtins.list[tuple[str, Stored]]]:
        """Subscribe and return the events to send first.

        ``since=None`` means "current state, then changes": one ADDED per matching object. Otherwise the events
        after revision ``since`` are replayed from history (410 Expired if it no longer reaches back that far).
        """
        col = self.collection(storage_key)
        w = Watcher(col, namespace, predicate)
        if since is None:
            initial = [
                (ADDED, st)
                for st in sorted(col.iter_objects(namespace), key=lambda s: s.key)
                if predicate is None or predicate(st.obj)
            ]
        else:
            if since < col.compacted:
                # As the watch cache words it: the requested revision, then the oldest one still servable.
                raise errors.expired(f"too old resource version: {since} ({col.compacted})")
            probe = Watcher(col, namespace, predicate)
            for ev in col.events_since(since):
                probe.offer(ev)
            initial = list(probe.buffer)
        col.watchers.add(w)
        return w, initial

    def close_watchers(self) -> None:
        for col in list(self._collections.values()):
            for w in list(col.watchers):
                w.close()

    def close(self) -> None:
        """End every watch and release what the backend holds (nothing more in memory)."""
        self.close_watchers()

    # -- waiting for a revision (reads with a too-large resourceVersion) -------------------------------------

    async def wait_for_revision(self, rv: int, timeout: float) -> bool:
        if self.revision >= rv:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._revision_waiters.append((rv, fut))
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._revision_waiters = [(r, f) for r, f in self._revision_waiters if f is not fut]

    def _notify_revision(self) -> None:
        if self._revision_waiters:
            for r, f in self._revision_waiters:
                if r <= self.revision and not f.done():
                    f.set_result(None)
