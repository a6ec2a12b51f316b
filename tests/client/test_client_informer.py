"""Informer against a stateful fake collection: WatchList sync, LIST fallback, re-watch, relist on 410."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from client_fakes import FakeCollection, FakeServer, Recorder, eventually, json_response, status, watch_line

from kubesched.client import ApiClient, DeletedFinalStateUnknown, Informer, object_key, wait_for_cache_sync
from kubesched.client.informer import Backoff


@pytest.fixture
async def client(server: FakeServer) -> AsyncIterator[ApiClient]:
    async with ApiClient(server.url) as c:
        yield c


def make_informer(client: ApiClient, **kwargs: object) -> Informer:
    # Tiny backoff so that relists in tests happen within milliseconds.
    return Informer(client, "v1", "configmaps", backoff=Backoff(initial=0.001, cap=0.01), **kwargs)  # type: ignore[arg-type]


async def test_watch_list_initial_sync_then_live_events(
    server: FakeServer, collection: FakeCollection, client: ApiClient
) -> None:
    collection.put("a", {"v": "1"})
    collection.put("b", namespace="other")
    informer = make_informer(client)
    rec = Recorder()
    informer.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    informer.start()
    try:
        assert await informer.has_synced(timeout=3)
        assert sorted(informer.store) == ["default/a", "other/b"]
        assert informer.resource_version == str(collection.revision)
        assert sorted(rec.names()) == [("add", "a"), ("add", "b")]
        first = server.watches()[0].query
        assert first["sendInitialEvents"] == "true"
        assert first["resourceVersionMatch"] == "NotOlderThan"
        assert first["allowWatchBookmarks"] == "true"
        assert "resourceVersion" not in first  # a consistent read on the first sync
        assert 300 <= int(first["timeoutSeconds"]) < 600
        assert server.lists() == []  # no plain LIST at all
        assert gc.isenabled()  # the GC pause during the initial replay is over

        old_a = informer.get("a", "default")
        collection.put("a", {"v": "2"})
        collection.delete("b", namespace="other")
        collection.put("c")
        await eventually(lambda: len(rec.calls) == 5)
        assert rec.names()[2:] == [("update", "a"), ("delete", "b"), ("add", "c")]
        _, (old, new) = rec.calls[2]
        assert old is old_a and new["data"] == {"v": "2"}
        assert sorted(informer.store) == ["default/a", "default/c"]
        assert informer.resource_version == str(collection.revision)
        assert len(server.watches()) == 1  # the same stream carried on after the initial events
    finally:
        await informer.stop()


async def test_falls_back_to_paginated_list_and_watch(
    server: FakeServer, collection: FakeCollection, client: ApiClient
) -> None:
    collection.watch_list = False
    for name in "abcde":
        collection.put(name)
    informer = make_informer(client, page_size=2)
    rec = Recorder()
    informer.add_handler(on_add=rec.on_add)
    informer.start()
    try:
        assert await informer.has_synced(timeout=3)
        assert [n for _, n in rec.names()] == list("abcde")
        # List items come without kind/apiVersion; the informer fills them in.
        assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in informer.list())
        lists = server.lists()
        assert [r.query for r in lists] == [
            {"limit": "2", "resourceVersion": "0"},
            {"limit": "2", "continue": "2"},
            {"limit": "2", "continue": "4"},
        ]
        await eventually(lambda: len(server.watches()) == 2)
        watch = server.watches()[-1].query
        assert watch["resourceVersion"] == str(collection.revision)
        assert watch["allowWatchBookmarks"] == "true" and "sendInitialEvents" not in watch
        collection.put("f")
        await eventually(lambda: informer.get("f", "default") is not None)
        # The refusal is remembered: a later relist does not ask for a streaming list again.
        assert informer.use_watch_list is False
    finally:
        await informer.stop()


async def test_rewatches_from_last_resource_version_after_clean_close_and_bookmark(
    server: FakeServer, collection: FakeCollection, client: ApiClient
) -> None:
    collection.put("a")
    informer = make_informer(client)
    informer.start()
    try:
        assert await informer.has_synced(timeout=3)
        collection.put("b")
        collection.revision += 5  # writes to other collections advance the global revision
        collection.bookmark()
        await eventually(lambda: informer.resource_version == str(collection.revision))
        bookmark_rv = informer.resource_version
        assert "b" in {o["metadata"]["name"] for o in informer.list()}
        collection.close_watches()
        await eventually(lambda: len(server.watches()) == 2)
        again = server.watches()[1].query
        assert again["resourceVersion"] == bookmark_rv
        assert "sendInitialEvents" not in again  # a plain watch, not a new list
        collection.put("c")
        await eventually(lambda: informer.get("c", "default") is not None)
        assert collection.list_requests == 0
    finally:
        await informer.stop()


async def test_relists_on_410_and_tells_handlers_what_changed(
    server: FakeServer, collection: FakeCollection, client: ApiClient
) -> None:
    collection.watch_list = False
    for name in ("keep", "change", "vanish"):
        collection.put(name)
    informer = make_informer(client)
    rec = Recorder()
    informer.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    informer.start()
    try:
        assert await informer.has_synced(timeout=3)
        await eventually(lambda: len(collection.watchers) == 1)
        rv_before = informer.resource_version
        vanished_last_state = informer.get("vanish", "default")
        rec.calls.clear()
        detach_and_expire(
            collection,
            lambda: (
                collection.put("change", {"v": "2"}),
                collection.delete("vanish"),
                collection.put("new"),
            ),
        )
        await eventually(lambda: informer.get("new", "default") is not None)
        assert server.watches()[1].query["resourceVersion"] == rv_before  # tried to resume: 410 in-stream
        relist = server.lists()[-1].query
        assert relist == {"limit": "500", "resourceVersion": rv_before}  # at the last RV, not a quorum read
        assert sorted(informer.store) == ["default/change", "default/keep", "default/new"]
        assert informer.resource_version == str(collection.revision)
        # client-go's Replace order: updates/adds for the listed objects, then deletions of the vanished.
        assert rec.names() == [("update", "change"), ("add", "new"), ("delete", "vanish")]
        tombstone = rec.calls[-1][1]
        assert isinstance(tombstone, DeletedFinalStateUnknown)
        assert tombstone.key == "default/vanish" and tombstone == vanished_last_state
    finally:
        await informer.stop()


def detach_and_expire(collection: FakeCollection, changes: Callable[[], object]) -> None:
    """Make the informer miss ``changes``: take its stream off the fan-out, change things, compact the
    history, then end its stream after one bookmark (so it is not a "very short watch")."""
    (missed,) = collection.watchers
    collection.watchers.clear()
    stale_bookmark = watch_line(
        "BOOKMARK",
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": str(collection.revision)}},
    )
    changes()
    collection.compact()
    missed.put_nowait(stale_bookmark)
    missed.put_nowait(None)


async def test_relist_after_expired_watch_uses_streaming_list(
    server: FakeServer, collection: FakeCollection, client: ApiClient
) -> None:
    collection.put("a")
    informer = make_informer(client)
    rec = Recorder()
    informer.add_handler(rec.on_add, rec.on_update, rec.on_delete)
    informer.start()
    try:
        assert await informer.has_synced(timeout=3)
        await eventually(lambda: len(collection.watchers) == 1)
        detach_and_expire(collection, lambda: (collection.put("a", {"v": "2"}), collection.put("b")))
        await eventually(lambda: informer.get("b", "default") is not None)
        assert informer.get("a", "default")["data"] == {"v": "2"}  # type: ignore[index]
        assert rec.names() == [("add", "a"), ("update", "a"), ("add", "b")]
        watches = server.watches()
        assert [w.query.get("sendInitialEvents") for w in watches] == ["true", None, "true"]
        assert watches[2].query["resourceVersion"] == watches[1].query["resourceVersion"]
        assert server.lists() == []
    finally:
        await informer.stop()


async def test_bookmark_without_initial_events_end_falls_back_to_list(
    server: FakeServer, client: ApiClient
) -> None:
    """An old server ignores sendInitialEvents and sends ordinary bookmarks: treat as unsupported."""

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return json_response(
                {"kind": "ConfigMapList", "metadata": {"resourceVersion": "50"}, "items": []}
            )
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(watch_line("BOOKMARK", {"metadata": {"resourceVersion": "40"}}))
        if request.query.get("sendInitialEvents") != "true":
            await resp.write(watch_line("ADDED", {"metadata": {"name": "x", "resourceVersion": "51"}}))
        return resp

    server.handler = handler
    informer = make_informer(client)
    informer.start()
    try:
        assert await informer.has_synced(timeout=3)
        await eventually(lambda: informer.get("x") is not None)
        assert informer.use_watch_list is False
        assert len(server.lists()) == 1
    finally:
        await informer.stop()


async def test_handler_added_after_sync_sees_existing_objects(
    collection: FakeCollection, client: ApiClient
) -> None:
    collection.put("a")
    collection.put("b")
    informer = make_informer(client)
    informer.start()
    try:
        assert await wait_for_cache_sync(informer, timeout=3)
        late = Recorder()
        informer.add_handler(on_add=late.on_add)
        assert sorted(late.names()) == [("add", "a"), ("add", "b")]
    finally:
        await informer.stop()


async def test_handler_errors_do_not_stop_the_informer(collection: FakeCollection, client: ApiClient) -> None:
    def broken(obj: dict[str, object]) -> None:
        raise RuntimeError("handler bug")

    rec = Recorder()
    informer = make_informer(client)
    informer.add_handler(on_add=broken)
    informer.add_handler(on_add=rec.on_add)
    informer.start()
    try:
        assert await informer.has_synced(timeout=3)
        collection.put("a")
        await eventually(lambda: rec.names() == [("add", "a")])
    finally:
        await informer.stop()


async def test_has_synced_times_out_while_server_fails(server: FakeServer, client: ApiClient) -> None:
    async def handler(request: object) -> object:
        return json_response(status(500, "InternalError", "boom"), 500)

    server.handler = handler  # type: ignore[assignment]
    informer = make_informer(client)
    informer.start()
    try:
        assert not await informer.has_synced(timeout=0.2)
        assert len(server.requests) >= 2  # it keeps retrying with backoff
    finally:
        await informer.stop()
    assert not await informer.has_synced(timeout=0.1)


def test_object_key() -> None:
    assert object_key({"metadata": {"name": "p", "namespace": "ns"}}) == "ns/p"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"


def test_backoff_grows_caps_and_resets() -> None:
    now = [0.0]
    backoff = Backoff(initial=1.0, cap=4.0, reset_after=10.0, jitter=0.0, clock=lambda: now[0])
    delays = []
    for _ in range(5):
        delays.append(backoff.next())
        now[0] += 1
    assert delays == [1.0, 2.0, 4.0, 4.0, 4.0]
    now[0] += 11
    assert backoff.next() == 1.0
