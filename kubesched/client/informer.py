"""A local mirror of one kind of object, kept current by a watch (client-go's reflector + informer, in one).

Initial state comes from a streaming list (WatchList: a watch that first replays every object and then sends
a bookmark annotated ``k8s.io/initial-events-end``), or from a paginated LIST when the server refuses that.
The watch then resumes from the last resourceVersion after every clean close; a 410 Expired, a failed watch
or a "very short" watch leads (after a backoff) to a relist whose differences reach the handlers as
add/update/delete, so handlers converge whatever was missed.

Handlers are plain functions called in event order, on the event loop, right after the store changed.
Objects are shared, not copied: treat them as immutable.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from kubesched.client.rest import ApiError, WatchStream

log = logging.getLogger(__name__)

INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end"
# A watch that ends this fast without a single event is treated as a failure (client-go's "very short watch").
VERY_SHORT_WATCH_SECONDS = 1.0

Obj = dict[str, Any]
AddHandler = Callable[[Obj], None]
UpdateHandler = Callable[[Obj, Obj], None]
DeleteHandler = Callable[[Obj], None]


class InformerClient(Protocol):
    """What an informer needs from :class:`~kubesched.client.rest.ApiClient`."""

    async def list_all(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = ...,
        label_selector: str | None = ...,
        field_selector: str | None = ...,
        page_size: int = ...,
        resource_version: str | None = ...,
        resource_version_match: str | None = ...,
    ) -> dict[str, Any]: ...

    def watch(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = ...,
        label_selector: str | None = ...,
        field_selector: str | None = ...,
        resource_version: str | None = ...,
        resource_version_match: str | None = ...,
        allow_watch_bookmarks: bool = ...,
        send_initial_events: bool | None = ...,
        timeout_seconds: int | None = ...,
    ) -> WatchStream: ...


class DeletedFinalStateUnknown(dict[str, Any]):
    """Passed to ``on_delete`` for an object found gone at a relist: its delete event was missed, so this is
    the last state the informer saw (a copy of it, so that ``isinstance`` can tell the two cases apart)."""

    __slots__ = ("key",)

    def __init__(self, key: str, obj: Obj) -> None:
        super().__init__(obj)
        self.key = key


def object_key(obj: Obj) -> str:
    """client-go's MetaNamespaceKeyFunc: ``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else meta["name"]


@dataclass(frozen=True, slots=True)
class _Handler:
    on_add: AddHandler | None
    on_update: UpdateHandler | None
    on_delete: DeleteHandler | None


class Backoff:
    """Exponential backoff with jitter that starts over after a calm period (client-go's reflector:
    0.8 s doubling to 30 s, jitter 1.0, reset after 2 min without failures)."""

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        reset_after: float = 120.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.initial, self.cap, self.reset_after = initial, cap, reset_after
        self.factor, self.jitter = factor, jitter
        self._clock = clock
        self._delay = 0.0
        self._last: float | None = None

    def next(self) -> float:
        now = self._clock()
        if self._last is None or now - self._last > self.reset_after:
            self._delay = self.initial
        else:
            self._delay = min(self._delay * self.factor, self.cap)
        self._last = now
        return self._delay * (1.0 + random.random() * self.jitter)


class _WatchListUnsupported(Exception):
    """The server answered a WatchList request with something other than the streaming-list protocol."""


class _VeryShortWatch(Exception):
    pass


class Informer:
    """Mirror of ``api_version``/``plural`` (optionally one namespace, filtered by selectors).

    ``store`` maps :func:`object_key` to the latest object; read it freely, never write it.
    """

    def __init__(
        self,
        client: InformerClient,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        use_watch_list: bool = True,
        page_size: int = 500,
        min_watch_timeout: float = 300.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.client = client
        self.api_version = api_version
        self.plural = plural
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.use_watch_list = use_watch_list
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.backoff = backoff or Backoff()
        self.store: dict[str, Obj] = {}
        self._handlers: tuple[_Handler, ...] = ()
        self._resource_version = ""
        # The last RV was refused (410 or too large): the next list must be a quorum read.
        self._rv_unavailable = False
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- public surface ----

    @property
    def resource_version(self) -> str:
        """The resourceVersion the store reflects (advanced by every event and bookmark)."""
        return self._resource_version

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        return self.store.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> list[Obj]:
        return list(self.store.values())

    def add_handler(
        self,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        """Register callbacks. Added to a running informer, ``on_add`` first sees every object already stored."""
        handler = _Handler(on_add, on_update, on_delete)
        self._handlers = (*self._handlers, handler)
        if on_add is not None:
            for obj in list(self.store.values()):
                _call(on_add, obj)

    def start(self) -> None:
        """Start listing and watching in a background task (call from the event loop)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self.run(), name=f"informer {self.api_version}/{self.plural}"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    async def has_synced(self, timeout: float | None = None) -> bool:
        """Wait until the first full list reached the store and the handlers. False on timeout or if the
        informer stopped first."""
        if self._synced.is_set():
            return True
        waiter = asyncio.ensure_future(self._synced.wait())
        watched: set[asyncio.Future[Any]] = {waiter}
        if self._task is not None:
            watched.add(self._task)
        try:
            await asyncio.wait(watched, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        return self._synced.is_set()

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            try:
                await self._list_and_watch()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("informer %s: %s: %s", self._describe(), type(e).__name__, e)
            await asyncio.sleep(self.backoff.next())

    # ---- list and watch ----

    def _describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.api_version}/{self.plural}{where}"

    def _watch_timeout(self) -> int:
        # client-go spreads re-watches over [min, 2*min) so that watchers do not reconnect in lockstep.
        return int(self.min_watch_timeout * (1.0 + random.random()))

    def _stream(self, **options: Any) -> WatchStream:
        return self.client.watch(
            self.api_version,
            self.plural,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout(),
            **options,
        )

    async def _list_and_watch(self) -> None:
        """One round: initial state, then watch until a relist is needed (return) or an error (raise)."""
        stream: WatchStream | None = None
        if self.use_watch_list:
            try:
                stream = await self._watch_list()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if isinstance(e, _WatchListUnsupported) or (
                    isinstance(e, ApiError) and 400 <= e.status < 500 and e.status not in (410, 429)
                ):
                    self.use_watch_list = False  # the server does not do streaming lists; stop asking
                if isinstance(e, ApiError) and e.is_resource_version_too_large():
                    self._rv_unavailable = True
                log.info("informer %s: streaming list failed (%s); falling back to LIST", self._describe(), e)
        if stream is None:
            await self._list()
        await self._watch(stream)

    async def _watch_list(self) -> WatchStream:
        """Streaming list: collect the replayed objects until the initial-events-end bookmark, then replace
        the store. Returns the open stream, which carries on with live events."""
        rv = "" if self._rv_unavailable else self._resource_version
        stream = self._stream(
            resource_version=rv or None, resource_version_match="NotOlderThan", send_initial_events=True
        )
        fresh: dict[str, Obj] = {}
        try:
            with _cyclic_gc_paused():
                async for event_type, obj in stream:
                    if event_type == "BOOKMARK":
                        meta = obj.get("metadata") or {}
                        if (meta.get("annotations") or {}).get(INITIAL_EVENTS_END_ANNOTATION) != "true":
                            raise _WatchListUnsupported("bookmark without initial-events-end")
                        self._replace(fresh, meta.get("resourceVersion") or "")
                        return stream
                    if event_type == "DELETED":
                        fresh.pop(object_key(obj), None)
                    else:
                        fresh[object_key(obj)] = obj
            raise _WatchListUnsupported("stream ended before the initial-events-end bookmark")
        except BaseException:
            await stream.aclose()
            raise

    async def _list(self) -> None:
        # client-go: first list at RV "0" (any, from the watch cache), relists at the last RV, and a quorum
        # read (RV "") when that RV is no longer available.
        if self._rv_unavailable:
            rv = ""
        else:
            rv = self._resource_version or "0"
        with _cyclic_gc_paused():
            try:
                result = await self._list_all(rv)
            except ApiError as e:
                if not (e.is_expired() or e.is_resource_version_too_large()):
                    raise
                self._rv_unavailable = True
                result = await self._list_all("")
            self._apply_list(result)

    def _apply_list(self, result: dict[str, Any]) -> None:
        items: list[Obj] = result.get("items") or []
        kind = result.get("kind") or ""
        if kind.endswith("List") and items:
            # List items carry no kind/apiVersion; fill them so objects look the same as watched ones.
            item_kind = kind[: -len("List")]
            api_version = result.get("apiVersion") or self.api_version
            for item in items:
                if "kind" not in item:
                    item["kind"] = item_kind
                    item["apiVersion"] = api_version
        fresh = {object_key(item): item for item in items}
        self._replace(fresh, (result.get("metadata") or {}).get("resourceVersion") or "")

    async def _list_all(self, rv: str) -> dict[str, Any]:
        return await self.client.list_all(
            self.api_version,
            self.plural,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            page_size=self.page_size,
            resource_version=rv or None,
        )

    async def _watch(self, stream: WatchStream | None) -> None:
        """Follow changes, re-watching from the last RV after clean closes. Returns when a relist is needed."""
        while True:
            if stream is None:
                stream = self._stream(resource_version=self._resource_version or None)
                try:
                    await stream.open()
                except ApiError as e:
                    if e.is_expired():
                        return
                    if not e.is_too_many_requests():
                        raise
                    stream = None
                    await asyncio.sleep(self.backoff.next())
                    continue
                except (aiohttp.ClientConnectionError, OSError) as e:
                    # client-go retries the watch (without relisting) when the server is unreachable.
                    log.info("informer %s: watch failed to connect (%s); retrying", self._describe(), e)
                    stream = None
                    await asyncio.sleep(self.backoff.next())
                    continue
            started = time.monotonic()
            count = 0
            try:
                async for event_type, obj in stream:
                    count += 1
                    self._apply(event_type, obj)
            except ApiError as e:
                if e.is_expired():
                    log.info("informer %s: %s; relisting", self._describe(), e.message)
                    return
                raise
            except aiohttp.ClientError as e:  # broken or silent connection: resume where we were
                log.info("informer %s: watch stream broke (%s); re-watching", self._describe(), e)
            finally:
                await stream.aclose()
            stream = None
            if count == 0 and time.monotonic() - started < VERY_SHORT_WATCH_SECONDS:
                raise _VeryShortWatch("very short watch: ended within a second without a single event")

    # ---- store updates and dispatch ----

    def _apply(self, event_type: str, obj: Obj) -> None:
        if event_type == "ADDED" or event_type == "MODIFIED":
            key = object_key(obj)
            old = self.store.get(key)
            self.store[key] = obj
            if old is None:
                for h in self._handlers:
                    if h.on_add is not None:
                        _call(h.on_add, obj)
            else:
                for h in self._handlers:
                    if h.on_update is not None:
                        _call(h.on_update, old, obj)
        elif event_type == "DELETED":
            self.store.pop(object_key(obj), None)
            for h in self._handlers:
                if h.on_delete is not None:
                    _call(h.on_delete, obj)
        elif event_type != "BOOKMARK":
            log.warning("informer %s: ignoring watch event of type %r", self._describe(), event_type)
            return
        rv = obj.get("metadata", {}).get("resourceVersion")
        if rv:
            self._resource_version = rv

    def _replace(self, fresh: dict[str, Obj], resource_version: str) -> None:
        """Make the store equal ``fresh``, telling handlers about what changed since the last state
        (client-go's Replace: updates/adds first, then deletions of what vanished)."""
        store = self.store
        handlers = self._handlers
        for key, obj in fresh.items():
            old = store.get(key)
            store[key] = obj
            if old is None:
                for h in handlers:
                    if h.on_add is not None:
                        _call(h.on_add, obj)
            elif old is not obj and _rv(old) != _rv(obj):
                for h in handlers:
                    if h.on_update is not None:
                        _call(h.on_update, old, obj)
        vanished = [key for key in store if key not in fresh]
        for key in vanished:
            last = store.pop(key)
            tombstone = DeletedFinalStateUnknown(key, last)
            for h in handlers:
                if h.on_delete is not None:
                    _call(h.on_delete, tombstone)
        self._resource_version = resource_version
        self._rv_unavailable = False
        self._synced.set()


def _rv(obj: Obj) -> str | None:
    return obj.get("metadata", {}).get("resourceVersion")


def _call(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("informer handler %r failed", fn)


_gc_pause_depth = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Keep the cyclic GC off while an initial state is built. Each full collection walks every live
    object: with 60k pods (~1M containers) arriving, CPython runs ~8 of them, 0.25 s each, which is most of
    the sync time. Nested and concurrent informers share one pause.

    When the last pause ends, what was built meanwhile is frozen (``gc.freeze``) before the collector is
    back: the stores are long-lived trees, and left in the young generation they would all be walked by the
    very next collection (50,000 pods and 5,000 nodes: ~1M objects, 3.5 s on a loaded two-core machine,
    for 125 objects of garbage) and again by the scheduler's collection before it starts. The few cycles
    that became garbage during the sync stay frozen; reference counting still frees everything else."""
    global _gc_pause_depth, _gc_was_enabled
    if _gc_pause_depth == 0:
        _gc_was_enabled = gc.isenabled()
        gc.disable()
    _gc_pause_depth += 1
    try:
        yield
    finally:
        _gc_pause_depth -= 1
        if _gc_pause_depth == 0:
            gc.freeze()
            if _gc_was_enabled:
                gc.enable()


def freeze_gc() -> None:
    """Collect once, then move every live object out of the cyclic GC's reach (``gc.freeze``).

    Call after the caches have synced: later full collections then skip the tens of thousands of cached
    objects instead of pausing the process for a quarter second or more each time. Objects stay freed by
    reference counting when the informer drops them.
    """
    gc.collect()
    gc.freeze()


async def wait_for_cache_sync(*informers: Informer, timeout: float | None = None) -> bool:
    """True once every informer has synced; False if any has not within ``timeout`` seconds."""
    results = await asyncio.gather(*(i.has_synced(timeout) for i in informers))
    return all(results)
