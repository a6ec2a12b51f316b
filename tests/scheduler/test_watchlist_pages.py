"""The API server writes a WatchList's initial events a page at a time (``INITIAL_EVENTS_PAGE``): the stream is
the same as one chunk would be (every object once, in key order, then the initial-events-end bookmark, then
live events), and an informer syncing through it while objects change converges on the stored state."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from kubesched.client.informer import Informer
from kubesched.client.rest import ApiClient
from kubesched.cluster import apiserver
from kubesched.cluster.local import ClusterOptions, LocalCluster

CMS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LocalCluster]:
    monkeypatch.setattr(apiserver, "INITIAL_EVENTS_PAGE", 3)
    c = LocalCluster(
        ClusterOptions(port=0, insecure_http=True, data_dir=tmp_path, nodes=0, heartbeat_interval=3600.0)
    )
    await c.start()
    yield c
    await c.stop()


async def _create(session: aiohttp.ClientSession, name: str, value: str = "0") -> None:
    body = {"metadata": {"name": name}, "data": {"v": value}}
    async with session.post(CMS, data=orjson.dumps(body), headers={"Content-Type": "application/json"}) as r:
        assert r.status == 201, await r.text()


async def test_paged_initial_events_then_bookmark_then_live(cluster: LocalCluster) -> None:
    async with aiohttp.ClientSession(cluster.url) as session:
        for i in range(10):
            await _create(session, f"cm-{i:02d}")
        params = {
            "watch": "true",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "allowWatchBookmarks": "true",
        }
        lines: list[bytes] = []
        async with session.get(CMS, params=params) as resp:
            assert resp.status == 200
            while len(lines) < 11:
                lines.append(await resp.content.readline())
            await _create(session, "live")
            lines.append(await asyncio.wait_for(resp.content.readline(), 10))
    events = [orjson.loads(line) for line in lines]
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        *(("ADDED", f"cm-{i:02d}") for i in range(10)),
        ("BOOKMARK", None),
        ("ADDED", "live"),
    ]
    assert events[10]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_informer_syncs_through_pages_while_objects_change(cluster: LocalCluster) -> None:
    async with aiohttp.ClientSession(cluster.url) as session:
        for i in range(20):
            await _create(session, f"cm-{i:02d}")

        async def churn() -> None:
            for i in range(20, 60):
                await _create(session, f"cm-{i:02d}")

        client = ApiClient(cluster.url)
        informer = Informer(client, "v1", "configmaps", namespace="default")
        try:
            writer = asyncio.create_task(churn())
            informer.start()
            assert await informer.has_synced(30)
            await writer
            async with session.get(CMS) as resp:
                listed = orjson.loads(await resp.read())
            want = {
                f"default/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in listed["items"]
            }
            for _ in range(200):
                got = {k: o["metadata"]["resourceVersion"] for k, o in informer.store.items()}
                if got == want:
                    break
                await asyncio.sleep(0.05)
            assert got == want
            assert informer.use_watch_list  # synced by WatchList, not by the LIST fallback
        finally:
            await informer.stop()
            await client.close()


async def test_synced_store_is_frozen_out_of_the_collector(cluster: LocalCluster) -> None:
    """What the initial sync built is frozen when the GC pause ends, so the next collection does not walk it."""
    async with aiohttp.ClientSession(cluster.url) as session:
        for i in range(5):
            await _create(session, f"cm-{i:02d}")
    client = ApiClient(cluster.url)
    informer = Informer(client, "v1", "configmaps", namespace="default")
    gc.unfreeze()
    try:
        informer.start()
        assert await informer.has_synced(30)
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        tracked = {id(o) for o in gc.get_objects()}  # the generations the collector walks (not the frozen)
        stored = list(informer.store.values())
        assert len(stored) == 5
        assert not any(id(o) in tracked for o in stored)
    finally:
        gc.unfreeze()
        await informer.stop()
        await client.close()
