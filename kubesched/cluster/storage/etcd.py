"""``Storage`` in a real etcd, laid out as kube-apiserver lays it out; the in-memory store is its watch cache.

- Keys are ``<prefix>/<resource>/<namespace>/<name>`` (``<prefix>/<resource>/<name>`` for cluster-scoped
  objects), ``<prefix>`` = ``/registry`` as kube-apiserver's ``--etcd-prefix``. Built-in resources are keyed by
  their plural alone, with upstream's historical names where they differ (``etcd_resource``): nodes under
  ``minions``, services under ``services/specs``, endpoints under ``services/endpoints``; CustomResourceDefinitions
  under ``apiextensions.k8s.io/customresourcedefinitions`` and custom resources under ``<group>/<plural>``.
- Values are the objects' JSON (kube-apiserver writes protobuf for built-in kinds; JSON keeps the store readable
  with ``etcdctl`` and is what it writes for custom resources). ``metadata.resourceVersion`` is the key's
  ``mod_revision``, set when the value is read, as upstream does.
- Writes are etcd transactions with upstream's preconditions: create = "create_revision == 0" (else 409
  AlreadyExists), update and delete = "mod_revision == the version read" (else 409 Conflict).
- One etcd watch over the whole prefix feeds the cache, in revision order, from a thread: writes of this server
  and of any other API server over the same etcd reach the cache (and so every watcher) the same way. A write
  returns once the watch has delivered its revision, so a client reads its own writes and the cache's history
  stays in etcd's order. Watch resumption and lists at older revisions are served from the cache's history;
  after a restart it starts at the revision read from etcd (older resumptions get 410 and clients relist).
- The etcd is reached through its v3 JSON gateway (``/v3/kv/range``, ``/v3/kv/txn``, ``/v3/watch``) over
  kept-alive loopback HTTP connections: the ``Storage`` protocol is synchronous, so a write blocks the event loop
  for one transaction (~1 ms against a local etcd, most of it etcd's fsync).
- Every five minutes the store compacts etcd to the revision it had five minutes earlier, as kube-apiserver's
  ``--etcd-compaction-interval``; a watch that etcd has compacted past makes the cache reload and end its watches
  with 410, so clients relist.
- With no ``--etcd-servers`` the cluster starts its own etcd on loopback under ``<data-dir>/etcd``
  (``LocalEtcd``), which dies with it.
"""

from __future__ import annotations

import base64
import builtins
import ctypes
import http.client
import json
import logging
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from kubesched.cluster import errors
from kubesched.cluster.storage.interface import (
    ADDED,
    DELETED,
    MODIFIED,
    Key,
    Obj,
    Predicate,
    Stored,
    object_key,
    with_rv,
)
from kubesched.cluster.storage.memory import DEFAULT_HISTORY_SIZE, Event, MemoryStorage, paused_gc

log = logging.getLogger("kubesched.cluster.etcd")

DEFAULT_PREFIX = "/registry"
COMPACTION_INTERVAL = 300.0  # seconds, kube-apiserver's --etcd-compaction-interval default
WRITE_VISIBLE_TIMEOUT = 30.0  # how long a write waits for etcd's watch to deliver it
REQUEST_TIMEOUT = 30.0

# Built-in resources whose etcd key upstream does not name by their plural (k8s.io/kubernetes pkg/registry).
_UPSTREAM_NAMES = {"/nodes": "minions", "/services": "services/specs", "/endpoints": "services/endpoints"}
# Built-in groups keyed as <group>/<plural> (their registries pass the group in the resource prefix).
_GROUP_PREFIXED = frozenset({"apiextensions.k8s.io", "apiregistration.k8s.io"})


class EtcdUnavailable(Exception):
    """etcd could not be started or reached (a one-line reason)."""


def etcd_resource(storage_key: str) -> str:
    """The resource part of the etcd key for a storage key (``"/pods"`` → ``pods``, ``"/nodes"`` → ``minions``,
    ``"example.com/widgets"`` → ``example.com/widgets``)."""
    special = _UPSTREAM_NAMES.get(storage_key)
    if special is not None:
        return special
    group, _, plural = storage_key.rpartition("/")
    if group in ("", "core"):
        return plural
    if group in _GROUP_PREFIXED or not (group.endswith(".k8s.io") or "." not in group):
        return f"{group}/{plural}"
    return plural


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key after every key starting with ``prefix`` (etcd's range_end for a prefix)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


class EtcdClient:
    """Blocking calls to etcd's v3 JSON gateway over one kept-alive HTTP connection (not thread-safe: one per
    thread)."""

    def __init__(self, url: str, timeout: float = REQUEST_TIMEOUT) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise EtcdUnavailable(f"etcd URL {url!r}: only http://host:port is supported")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or 2379
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self._conn

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = orjson.dumps(body)
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request("POST", path, data, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                payload = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self.close()
                # A kept-alive connection the server closed: retry once on a new one. Only idempotent-safe because
                # a request that never reached etcd had no effect; a failure after sending is reported.
                if attempt == 2 or not isinstance(e, (http.client.RemoteDisconnected, BrokenPipeError)):
                    raise EtcdUnavailable(f"etcd at {self.url}: {e}") from e
                continue
            out: dict[str, Any] = orjson.loads(payload) if payload else {}
            if resp.status != 200:
                raise EtcdError(resp.status, str(out.get("error") or out.get("message") or payload[:200]))
            return out
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the calls the store makes ------------------------------------------------------------------------------

    def range_prefix(self, prefix: bytes, *, page: int = 5000) -> tuple[builtins.list[dict[str, Any]], int]:
        """All keys under ``prefix`` at one revision (paged), and that revision."""
        kvs: builtins.list[dict[str, Any]] = []
        start, end = prefix, _prefix_end(prefix)
        revision = 0
        while True:
            body: dict[str, Any] = {"key": _b64(start), "range_end": _b64(end), "limit": str(page)}
            if revision:
                body["revision"] = str(revision)
            out = self.post("/v3/kv/range", body)
            if not revision:
                revision = int(out["header"]["revision"])
            got = out.get("kvs") or []
            kvs.extend(got)
            if not out.get("more") or not got:
                return kvs, revision
            start = _unb64(got[-1]["key"]) + b"\0"

    def revision(self) -> int:
        out = self.post("/v3/kv/range", {"key": _b64(b"\0")})
        return int(out["header"]["revision"])

    def compact(self, revision: int) -> None:
        self.post("/v3/kv/compaction", {"revision": str(revision)})


class EtcdError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"etcd answered {status}: {message}")
        self.status = status
        self.message = message


class EtcdStorage(MemoryStorage):
    """``MemoryStorage`` as the read and watch cache of an etcd (implements ``Storage``; see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        history_size: int = DEFAULT_HISTORY_SIZE,
        storage_keys: Iterable[str] = (),
        prefix: str = DEFAULT_PREFIX,
        local: LocalEtcd | None = None,
    ) -> None:
        self.url = url
        self.prefix = prefix.rstrip("/") + "/"
        self._prefix_b = self.prefix.encode()
        self._local = local
        self._client = EtcdClient(url)
        # etcd resource part -> storage key, for the keys read back (at start and from the watch).
        self._resources: dict[str, str] = {}
        self._etcd_resources: dict[str, str] = {}
        for sk in storage_keys:
            self._resource_of(sk)
        try:
            with paused_gc():
                kvs, revision = self._client.range_prefix(self._prefix_b)
        except (EtcdUnavailable, EtcdError) as e:
            self._client.close()
            raise EtcdUnavailable(str(e)) from e
        super().__init__(history_size, start_revision=revision)
        self._loaded = revision
        self.recovered = self._load(kvs)
        # What the watch thread has received and not yet applied, and the newest revision it has seen.
        self._inbox: deque[tuple[int, str, Key, bytes | None]] = deque()
        self._seen = revision
        self._cond = threading.Condition()
        self._closing = threading.Event()
        self._watch_failure: str | None = None
        self._reload_needed = False
        self._loop: Any = None  # the asyncio loop to wake for writes of other servers, once known
        self._wake_scheduled = False
        # Told (storage key, event type, new object, old object) of each write another server made, once it is
        # in the cache: what ClusterApi's observers learn from this server's own writes.
        self.on_foreign_change: Callable[[str, str, Obj | None, Obj | None], None] | None = None
        self._thread = threading.Thread(target=self._watch_loop, name="etcd-watch", daemon=True)
        self._thread.start()

    @classmethod
    def open(
        cls,
        data_dir: Path,
        servers: Iterable[str],
        *,
        history_size: int = DEFAULT_HISTORY_SIZE,
        storage_keys: Iterable[str] = (),
    ) -> EtcdStorage:
        """Over the given etcd, or a local one started under ``<data_dir>/etcd`` when none is given."""
        urls = list(servers)
        local = None
        if not urls:
            local = LocalEtcd(data_dir / "etcd")
            urls = [local.start()]
        try:
            return cls(urls[0], history_size=history_size, storage_keys=storage_keys, local=local)
        except BaseException:
            if local is not None:
                local.stop()
            raise

    def _load(self, kvs: builtins.list[dict[str, Any]]) -> int:
        """Put what a range read into the cache; how many objects."""
        n = 0
        with paused_gc():
            for kv in kvs:
                parsed = self._parse_key(_unb64(kv["key"]))
                if parsed is None:
                    continue
                rv = int(kv["mod_revision"])
                obj = with_rv(orjson.loads(_unb64(kv["value"])), rv)
                self.collection(parsed[0]).put(Stored(obj, rv, parsed[1]))
                n += 1
        return n

    # -- keys ---------------------------------------------------------------------------------------------------

    def _resource_of(self, storage_key: str) -> str:
        res = self._etcd_resources.get(storage_key)
        if res is None:
            res = self._etcd_resources[storage_key] = etcd_resource(storage_key)
            self._resources.setdefault(res, storage_key)
        return res

    def _etcd_key(self, storage_key: str, key: Key) -> bytes:
        res = self._resource_of(storage_key)
        if key[0]:
            return f"{self.prefix}{res}/{key[0]}/{key[1]}".encode()
        return f"{self.prefix}{res}/{key[1]}".encode()

    def _parse_key(self, raw: bytes) -> tuple[str, Key] | None:
        rest = raw[len(self._prefix_b) :].decode(errors="replace").split("/")
        # Two-part resource names first (services/specs, <group>/<plural>), then one-part.
        for width in (2, 1):
            if len(rest) < width + 1:
                continue
            sk = self._resources.get("/".join(rest[:width]))
            if sk is None and width == 2 and "." in rest[0]:
                sk = self._resources.setdefault("/".join(rest[:2]), f"{rest[0]}/{rest[1]}")
            if sk is None:
                continue
            tail = rest[width:]
            if len(tail) == 1:
                return sk, ("", tail[0])
            if len(tail) == 2:
                return sk, (tail[0], tail[1])
        log.debug("etcd key %r is not one of ours; ignored", raw)
        return None

    # -- reads: apply what the watch delivered first ---------------------------------------------------------

    def get(self, storage_key: str, key: Key) -> Stored | None:
        if self._inbox or self._reload_needed:
            self._apply_inbox()
        return super().get(storage_key, key)

    def list(
        self, storage_key: str, namespace: str | None = None, predicate: Predicate | None = None
    ) -> tuple[builtins.list[Stored], int]:
        if self._inbox or self._reload_needed:
            self._apply_inbox()
        return super().list(storage_key, namespace, predicate)

    def list_at(
        self,
        storage_key: str,
        rv: int,
        namespace: str | None = None,
        predicate: Predicate | None = None,
        *,
        continuing: bool = False,
    ) -> builtins.list[Stored]:
        if self._inbox or self._reload_needed:
            self._apply_inbox()
        return super().list_at(storage_key, rv, namespace, predicate, continuing=continuing)

    def holds_namespace(self, namespace: str) -> bool:
        if self._inbox or self._reload_needed:
            self._apply_inbox()
        return super().holds_namespace(namespace)

    def scan(self, storage_key: str, namespace: str | None = None) -> builtins.list[Stored]:
        if self._inbox or self._reload_needed:
            self._apply_inbox()
        return super().scan(storage_key, namespace)

    def watch(
        self, storage_key: str, *, namespace: str | None, predicate: Predicate | None, since: int | None
    ) -> tuple[Any, builtins.list[tuple[str, Stored]]]:
        self._remember_loop()
        if self._inbox or self._reload_needed:
            self._apply_inbox()
        return super().watch(storage_key, namespace=namespace, predicate=predicate, since=since)

    async def wait_for_revision(self, rv: int, timeout: float) -> bool:
        self._remember_loop()
        if self._inbox or self._reload_needed:
            self._apply_inbox()
        return await super().wait_for_revision(rv, timeout)

    def attach_loop(self, loop: Any) -> None:
        """The event loop the cache lives on: writes of other servers are applied there as they arrive (without
        it, on this server's next read or write)."""
        self._loop = loop
        if self._inbox or self._reload_needed:
            self._wake()

    def _remember_loop(self) -> None:
        if self._loop is None:
            import asyncio

            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                pass

    # -- writes: an etcd transaction, then wait for the watch to bring it back -------------------------------

    def create(self, storage_key: str, obj: Obj) -> Stored:
        key = object_key(obj)
        ek = _b64(self._etcd_key(storage_key, key))
        value = orjson.dumps(obj)
        out = self._txn(
            {
                "compare": [{"key": ek, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
                "success": [{"request_put": {"key": ek, "value": _b64(value)}}],
            }
        )
        if not out.get("succeeded"):
            group, _, plural = storage_key.rpartition("/")
            raise errors.already_exists(plural, key[1], "" if group == "core" else group)
        return self._await_own(int(out["header"]["revision"]), storage_key, key, obj)

    def update(self, storage_key: str, obj: Obj, expected: Stored) -> Stored:
        ek = _b64(self._etcd_key(storage_key, expected.key))
        value = orjson.dumps(obj)
        out = self._txn(
            {
                "compare": [
                    {"key": ek, "target": "MOD", "result": "EQUAL", "mod_revision": str(expected.rv)}
                ],
                "success": [{"request_put": {"key": ek, "value": _b64(value)}}],
            }
        )
        if not out.get("succeeded"):
            self._conflict(storage_key, expected.key)
        return self._await_own(int(out["header"]["revision"]), storage_key, expected.key, obj)

    def delete(self, storage_key: str, expected: Stored) -> Stored:
        ek = _b64(self._etcd_key(storage_key, expected.key))
        out = self._txn(
            {
                "compare": [
                    {"key": ek, "target": "MOD", "result": "EQUAL", "mod_revision": str(expected.rv)}
                ],
                "success": [{"request_delete_range": {"key": ek}}],
            }
        )
        if not out.get("succeeded"):
            self._conflict(storage_key, expected.key)
        rv = int(out["header"]["revision"])
        self._wait_seen(rv)
        self._apply_inbox(own_rv=rv)
        return Stored(with_rv(expected.obj, rv), rv, expected.key)

    def drop_collection(self, storage_key: str) -> None:
        start = f"{self.prefix}{self._resource_of(storage_key)}/".encode()
        try:
            out = self._client.post(
                "/v3/kv/deleterange", {"key": _b64(start), "range_end": _b64(_prefix_end(start))}
            )
        except (EtcdUnavailable, EtcdError) as e:
            raise errors.internal(f"storage: {e}") from e
        rv = int(out["header"]["revision"])
        self._wait_seen(rv)
        self._apply_inbox(own_rv=rv)
        super().drop_collection(storage_key)

    def _txn(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._client.post("/v3/kv/txn", body)
        except (EtcdUnavailable, EtcdError) as e:
            raise errors.internal(f"storage: {e}") from e

    def _conflict(self, storage_key: str, key: Key) -> None:
        # Another server's write may not have reached the cache yet: bring it in, so the caller's retry reads it.
        self._apply_inbox()
        group, _, plural = storage_key.rpartition("/")
        raise errors.conflict(plural, key[1], errors.OPTIMISTIC_LOCK, "" if group == "core" else group)

    def _wait_seen(self, rv: int) -> None:
        with self._cond:
            if not self._cond.wait_for(
                lambda: self._seen >= rv or self._watch_failure is not None, WRITE_VISIBLE_TIMEOUT
            ):
                raise errors.internal(f"storage: etcd's watch did not deliver revision {rv} in time")
            if self._seen < rv:
                raise errors.internal(f"storage: etcd watch failed: {self._watch_failure}")

    def _await_own(self, rv: int, storage_key: str, key: Key, obj: Obj) -> Stored:
        """Wait for the watch to deliver ``rv``; apply everything up to it, this write with the caller's dict
        (no decode)."""
        self._wait_seen(rv)
        own = self._apply_inbox(own_rv=rv, own_obj=obj)
        if own is None:  # already applied (cannot happen in order) or dropped meanwhile
            st = super().get(storage_key, key)
            return st if st is not None and st.rv == rv else Stored(with_rv(obj, rv), rv, key)
        return own

    # -- applying etcd's events to the cache (event loop thread) -------------------------------------------

    def _apply_inbox(self, own_rv: int = 0, own_obj: Obj | None = None) -> Stored | None:
        """Apply what the watch delivered, in order. The events of revision ``own_rv`` are this server's write
        (its new state ``own_obj``, no decode); the others are told to ``on_foreign_change`` once all are in."""
        if self._reload_needed:
            self._reload()
        applied_own: Stored | None = None
        foreign: builtins.list[tuple[str, str, Obj | None, Obj | None]] = []
        tell = self.on_foreign_change is not None
        inbox = self._inbox
        while inbox:
            rv, sk, key, value = inbox.popleft()
            if rv <= self._loaded:  # already in what was read at start or reload
                continue
            if rv == own_rv:
                st = self._apply(rv, sk, key, value, own_obj)
                if own_obj is not None:
                    applied_own = st
                continue
            before = self.collection(sk).objects.get(key) if tell else None
            old_obj = before.obj if before is not None else None  # read before _apply retires it
            st = self._apply(rv, sk, key, value, None)
            if tell and st is not None:
                etype = DELETED if value is None else MODIFIED if before is not None else ADDED
                foreign.append((sk, etype, None if value is None else st.obj, old_obj))
        if foreign and self.on_foreign_change is not None:
            for change in foreign:
                try:
                    self.on_foreign_change(*change)
                except Exception:
                    log.exception("handling another server's write to %s", change[0])
        return applied_own

    def _apply(self, rv: int, sk: str, key: Key, value: bytes | None, obj: Obj | None) -> Stored | None:
        col = self.collection(sk)
        old = col.objects.get(key)
        self.revision = rv
        st: Stored | None
        if value is None:
            if old is None:
                self._notify_revision()
                return None
            col.pop(key)
            st = Stored(with_rv(old.obj, rv), rv, key)
            col.record(Event(DELETED, rv, st, old))
            old.retire()
            st.retire()
        else:
            st = Stored(with_rv(obj if obj is not None else orjson.loads(value), rv), rv, key)
            col.put(st)
            if old is None:
                col.record(Event(ADDED, rv, st, None))
            else:
                col.record(Event(MODIFIED, rv, st, old))
                old.retire()
        self._notify_revision()
        return st

    def _reload(self) -> None:
        """etcd compacted past our watch: read everything again and end every watch with 410 (clients relist)."""
        self._reload_needed = False
        kvs, revision = self._client.range_prefix(self._prefix_b)
        for col in list(self.collections().values()):
            for w in list(col.watchers):
                w.expire(f"too old resource version: {self.revision} ({revision})")
            col.objects.clear()
            col.by_namespace.clear()
            col.history.clear()
            col.compacted = revision
        self.floor = revision
        self._loaded = revision
        self._load(kvs)
        self.revision = max(self.revision, revision)
        with self._cond:
            self._inbox.clear()
            self._seen = max(self._seen, revision)
        self._watch_from = revision + 1

    # -- the watch thread ----------------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        self._watch_from = self._seen + 1
        compactor = EtcdClient(self.url)
        marks: deque[tuple[float, int]] = deque()  # (time, revision) for compaction
        next_compaction = time.monotonic() + COMPACTION_INTERVAL
        backoff = 0.1
        while not self._closing.is_set():
            conn = http.client.HTTPConnection(self._client.host, self._client.port, timeout=None)
            self._watch_conn = conn
            try:
                body = {
                    "create_request": {
                        "key": _b64(self._prefix_b),
                        "range_end": _b64(_prefix_end(self._prefix_b)),
                        "start_revision": str(self._watch_from),
                        "progress_notify": True,
                    }
                }
                conn.request("POST", "/v3/watch", orjson.dumps(body), {"Content-Type": "application/json"})
                resp = conn.getresponse()
                if resp.status != 200:
                    raise EtcdError(resp.status, resp.read()[:200].decode(errors="replace"))
                backoff = 0.1
                for line in resp:
                    if self._closing.is_set():
                        return
                    if not line.strip():
                        continue
                    result = orjson.loads(line).get("result") or {}
                    if result.get("compact_revision") and result.get("canceled"):
                        log.warning("etcd compacted past revision %s; reloading the cache", self._watch_from)
                        self._reload_needed = True
                        self._wake()
                        break
                    self._receive(result)
                    now = time.monotonic()
                    if not marks or now - marks[-1][0] > 10:
                        marks.append((now, self._seen))
                    if now >= next_compaction:
                        next_compaction = now + COMPACTION_INTERVAL
                        self._compact(compactor, marks, now)
            except (OSError, http.client.HTTPException, EtcdError, ValueError) as e:
                if self._closing.is_set():
                    return
                log.warning("etcd watch: %s; watching again from revision %d", e, self._watch_from)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                conn.close()
            if self._reload_needed:
                # Wait until the loop thread has reloaded (it sets _watch_from), then watch from there.
                while self._reload_needed and not self._closing.is_set():
                    time.sleep(0.05)
        compactor.close()

    def _receive(self, result: dict[str, Any]) -> None:
        got: builtins.list[tuple[int, str, Key, bytes | None]] = []
        newest = 0
        for ev in result.get("events") or ():
            kv = ev["kv"]
            rv = int(kv["mod_revision"])
            newest = max(newest, rv)
            parsed = self._parse_key(_unb64(kv["key"]))
            if parsed is None:
                continue
            value = None if ev.get("type") == "DELETE" else _unb64(kv.get("value", ""))
            got.append((rv, parsed[0], parsed[1], value))
        if not got and not newest:
            # A progress notification or the creation answer: everything up to the header's revision is here.
            header_rev = int((result.get("header") or {}).get("revision") or 0)
            if result.get("created") or header_rev <= self._seen:
                return
            newest = header_rev
        with self._cond:
            self._inbox.extend(got)
            if newest > self._seen:
                self._seen = newest
                self._watch_from = newest + 1
            self._cond.notify_all()
        if got:
            self._wake()

    def _wake(self) -> None:
        """Have the event loop apply what arrived (writes of other servers reach watchers without a request)."""
        loop = self._loop
        if loop is None or self._wake_scheduled:
            return
        self._wake_scheduled = True
        try:
            loop.call_soon_threadsafe(self._woken)
        except RuntimeError:  # the loop is closed
            self._wake_scheduled = False

    def _woken(self) -> None:
        self._wake_scheduled = False
        if self._inbox or self._reload_needed:
            self._apply_inbox()

    def _compact(self, client: EtcdClient, marks: deque[tuple[float, int]], now: float) -> None:
        target = 0
        while marks and now - marks[0][0] >= COMPACTION_INTERVAL:
            target = marks.popleft()[1]
        if target > 1:
            try:
                client.compact(target)
                log.info("etcd compacted to revision %d", target)
            except (EtcdUnavailable, EtcdError) as e:
                if "compacted" not in str(e):
                    log.warning("etcd compaction to %d: %s", target, e)

    # -- lifecycle -------------------------------------------------------------------------------------------

    def close(self) -> None:
        super().close()
        self._closing.set()
        conn = getattr(self, "_watch_conn", None)
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)
        self._client.close()
        if self._local is not None:
            self._local.stop()
            self._local = None


# -- a local etcd for `cluster up --storage etcd` ----------------------------------------------------------------

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # The etcd of a killed server must not live on holding the data dir (Linux; elsewhere a no-op).
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


class LocalEtcd:
    """An etcd process on loopback with its data under ``dir`` (ports kept in ``dir/ports.json`` for restarts)."""

    def __init__(self, dir: Path, binary: str | None = None) -> None:
        self.dir = dir
        self.binary = binary or shutil.which("etcd") or ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 60.0) -> str:
        if not self.binary:
            raise EtcdUnavailable(
                "etcd not found on PATH (Debian: apt-get install etcd-server; or pass --etcd-servers URL)"
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        ports_file = self.dir / "ports.json"
        try:
            ports = json.loads(ports_file.read_text())
            client, peer = int(ports["client"]), int(ports["peer"])
        except (OSError, ValueError, KeyError, TypeError):
            client, peer = _free_port(), _free_port()
            ports_file.write_text(json.dumps({"client": client, "peer": peer}))
        self.url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        # The etcd of a server killed a moment ago may still be shutting down on these ports: wait for it.
        deadline = time.monotonic() + timeout
        while _listening(client) and time.monotonic() < deadline:
            time.sleep(0.1)
        cmd = [
            self.binary,
            "--name",
            "kubesched",
            "--data-dir",
            str(self.dir / "data"),
            "--listen-client-urls",
            self.url,
            "--advertise-client-urls",
            self.url,
            "--listen-peer-urls",
            peer_url,
            "--initial-advertise-peer-urls",
            peer_url,
            "--initial-cluster",
            f"kubesched={peer_url}",
            "--listen-metrics-urls",
            "",
        ]
        log_file = open(self.dir / "etcd.log", "ab")
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
        finally:
            log_file.close()
        deadline = time.monotonic() + timeout
        probe = EtcdClient(self.url, timeout=2.0)
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise EtcdUnavailable(f"etcd exited with {self.proc.returncode}: {self._log_tail()}")
                try:
                    probe.revision()
                    return self.url
                except (EtcdUnavailable, EtcdError):
                    time.sleep(0.1)
        finally:
            probe.close()
        self.stop()
        raise EtcdUnavailable(f"etcd did not answer on {self.url} within {timeout:g}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            lines = (self.dir / "etcd.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
