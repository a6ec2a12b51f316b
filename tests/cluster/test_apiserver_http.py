"""The local cluster's HTTP API in-process: lists, pagination, watches, selectors, errors, auth and discovery."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from kubesched.cluster import apiserver, certs
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.cluster.storage.interface import CONTINUE_EXPIRED, LIST_EXPIRED

Obj = dict[str, Any]
CMS = "/api/v1/namespaces/pg/configmaps"


async def start(tmp_path: Path, **options: Any) -> LocalCluster:
    opts = dict(port=0, insecure_http=True, data_dir=tmp_path, nodes=2, heartbeat_interval=3600.0)
    opts.update(options)
    cluster = LocalCluster(ClusterOptions(**opts))
    await cluster.start()
    return cluster


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    c = await start(tmp_path)
    yield c
    await c.stop()


@pytest.fixture
async def http(cluster: LocalCluster) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession(cluster.url) as session:
        client = Client(session)
        await client.post("/api/v1/namespaces", {"metadata": {"name": "pg"}})
        yield client


class Client:
    """A thin JSON client over one aiohttp session."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def request(self, method: str, path: str, body: Any = None, **params: Any) -> tuple[int, Obj]:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": "application/json"}
        async with self.session.request(
            method, path, data=data, params=params or None, headers=headers
        ) as resp:
            return resp.status, orjson.loads(await resp.read())

    async def get(self, path: str, **params: Any) -> tuple[int, Obj]:
        return await self.request("GET", path, **params)

    async def post(self, path: str, body: Obj) -> Obj:
        status, out = await self.request("POST", path, body)
        assert status == 201, out
        return out

    async def put(self, path: str, body: Obj) -> Obj:
        status, out = await self.request("PUT", path, body)
        assert status == 200, out
        return out

    async def watch(
        self, path: str, *, limit_s: float = 5.0, stop_after: int | None = None, **params: Any
    ) -> tuple[int, list[bytes]]:
        """Read a watch stream line by line until it ends, ``stop_after`` lines, or ``limit_s`` seconds."""
        lines: list[bytes] = []
        async with self.session.get(path, params={"watch": "true", **params}) as resp:
            if resp.status != 200:
                return resp.status, [await resp.read()]
            try:
                async with asyncio.timeout(limit_s):
                    async for line in resp.content:
                        lines.append(line.rstrip(b"\n"))
                        if stop_after is not None and len(lines) >= stop_after:
                            break
            except TimeoutError:
                pass
        return 200, lines


def names(body: Obj) -> list[str]:
    return [item["metadata"]["name"] for item in body["items"]]


async def make_configmaps(http: Client, count: int) -> None:
    for i in range(count):
        await http.post(
            CMS, {"metadata": {"name": f"cm-{i:02d}", "labels": {"i": str(i)}}, "data": {"v": "0"}}
        )


# -- lists --------------------------------------------------------------------------------------------------


async def test_pagination_is_consistent_across_writes(http: Client) -> None:
    await make_configmaps(http, 10)
    status, first = await http.get(CMS, limit="4")
    assert status == 200
    list_rv = first["metadata"]["resourceVersion"]
    assert names(first) == ["cm-00", "cm-01", "cm-02", "cm-03"]
    assert first["metadata"]["remainingItemCount"] == 6
    snapshot = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in first["items"]}
    # Writes between pages: none of them may show up in the rest of this list.
    await http.post(CMS, {"metadata": {"name": "cm-05a"}})
    _, cm6 = await http.get(f"{CMS}/cm-06")
    await http.put(f"{CMS}/cm-06", {**cm6, "data": {"v": "changed"}})
    status, _ = await http.request("DELETE", f"{CMS}/cm-08")
    assert status == 200
    pages = [first]
    token = first["metadata"]["continue"]
    while token:
        status, page = await http.get(CMS, limit="4", **{"continue": token})
        assert status == 200
        assert page["metadata"]["resourceVersion"] == list_rv
        pages.append(page)
        token = page["metadata"].get("continue", "")
    assert len(pages) == 3
    assert "remainingItemCount" not in pages[-1]["metadata"]
    items = [i for p in pages for i in p["items"]]
    assert [i["metadata"]["name"] for i in items] == [f"cm-{i:02d}" for i in range(10)]
    snapshot.update({i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items})
    cm6_listed = next(i for i in items if i["metadata"]["name"] == "cm-06")
    assert cm6_listed["data"] == {"v": "0"}
    assert int(max(snapshot.values(), key=int)) <= int(list_rv)
    # A fresh list sees the writes.
    _, now = await http.get(CMS)
    assert "cm-05a" in names(now) and "cm-08" not in names(now)
    assert int(now["metadata"]["resourceVersion"]) > int(list_rv)


async def test_continue_token_expires_with_compaction(tmp_path: Path) -> None:
    cluster = await start(tmp_path, watch_history=5)
    try:
        async with aiohttp.ClientSession(cluster.url) as session:
            http = Client(session)
            await http.post("/api/v1/namespaces", {"metadata": {"name": "pg"}})
            await make_configmaps(http, 4)
            _, first = await http.get(CMS, limit="2")
            await make_configmaps(http, 0)
            for i in range(6):  # pushes the first page's revision out of the configmaps history
                await http.post(CMS, {"metadata": {"name": f"later-{i}"}})
            status, err = await http.get(CMS, limit="2", **{"continue": first["metadata"]["continue"]})
            assert status == 410
            assert (err["reason"], err["message"]) == ("Expired", CONTINUE_EXPIRED)
            status, err = await http.get(
                CMS, resourceVersion=first["metadata"]["resourceVersion"], resourceVersionMatch="Exact"
            )
            assert (status, err["message"]) == (410, LIST_EXPIRED)
            # Watching from there is an ERROR event in a 200 stream.
            status, lines = await http.watch(CMS, resourceVersion=first["metadata"]["resourceVersion"])
            assert status == 200 and len(lines) == 1
            event = orjson.loads(lines[0])
            assert event["type"] == "ERROR"
            assert event["object"]["code"] == 410
            assert event["object"]["message"].startswith(
                f"too old resource version: {first['metadata']['resourceVersion']} ("
            )
    finally:
        await cluster.stop()


async def test_resource_version_zero_and_exact(http: Client) -> None:
    await make_configmaps(http, 3)
    _, at = await http.get(CMS)
    then = at["metadata"]["resourceVersion"]
    _, cm0 = await http.get(f"{CMS}/cm-00")
    await http.put(f"{CMS}/cm-00", {**cm0, "data": {"v": "new"}})
    await http.request("DELETE", f"{CMS}/cm-02")
    # resourceVersion=0: any recent state, whole (limit ignored as the watch cache did).
    status, zero = await http.get(CMS, resourceVersion="0", limit="1")
    assert status == 200
    assert names(zero) == ["cm-00", "cm-01"] and "continue" not in zero["metadata"]
    # Exact: the list as it was.
    status, exact = await http.get(CMS, resourceVersion=then, resourceVersionMatch="Exact")
    assert status == 200
    assert exact["metadata"]["resourceVersion"] == then
    assert names(exact) == ["cm-00", "cm-01", "cm-02"]
    assert exact["items"][0]["data"] == {"v": "0"}
    # A resourceVersion with a limit and no match is Exact too (legacy rule).
    _, legacy = await http.get(CMS, resourceVersion=then, limit="10")
    assert names(legacy) == ["cm-00", "cm-01", "cm-02"]
    # NotOlderThan: the current state.
    _, newer = await http.get(CMS, resourceVersion=then, resourceVersionMatch="NotOlderThan")
    assert names(newer) == ["cm-00", "cm-01"]
    status, err = await http.get(CMS, resourceVersionMatch="Exact")
    assert status == 400 and err["reason"] == "BadRequest"


async def test_too_large_resource_version_times_out(
    http: Client, cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(apiserver, "TOO_LARGE_RV_WAIT", 0.3)
    future = cluster.store.revision + 100
    for params in ({"resourceVersion": str(future)}, {"resourceVersion": str(future), "watch": "true"}):
        started = time.monotonic()
        status, body = await http.get(CMS, **params)
        assert 0.25 <= time.monotonic() - started < 2
        current = cluster.store.revision
        assert status == 504
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"Too large resource version: {future}, current: {current}",
            "reason": "Timeout",
            "details": {
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            },
            "code": 504,
        }
    # A revision reached while waiting is served.
    monkeypatch.setattr(apiserver, "TOO_LARGE_RV_WAIT", 3.0)
    soon = cluster.store.revision + 1
    get = asyncio.create_task(http.get(CMS, resourceVersion=str(soon)))
    await asyncio.sleep(0.05)
    await http.post(CMS, {"metadata": {"name": "arrives"}})
    status, body = await get
    assert status == 200 and names(body) == ["arrives"]


# -- watches ------------------------------------------------------------------------------------------------


async def test_watch_list_sends_initial_events_then_bookmark(http: Client, cluster: LocalCluster) -> None:
    await make_configmaps(http, 3)
    rev = cluster.store.revision

    async def write_later() -> None:
        await asyncio.sleep(0.2)
        await http.post(CMS, {"metadata": {"name": "live"}})

    task = asyncio.create_task(write_later())
    status, lines = await http.watch(
        CMS,
        stop_after=5,
        sendInitialEvents="true",
        resourceVersionMatch="NotOlderThan",
        allowWatchBookmarks="true",
    )
    await task
    assert status == 200
    events = [orjson.loads(line) for line in lines]
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "cm-00"),
        ("ADDED", "cm-01"),
        ("ADDED", "cm-02"),
        ("BOOKMARK", None),
        ("ADDED", "live"),
    ]
    assert lines[3] == (
        b'{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"'
        + str(rev).encode()
        + b'","annotations":{"k8s.io/initial-events-end":"true"}}}}'
    )
    assert int(events[4]["object"]["metadata"]["resourceVersion"]) > rev


async def test_watch_modes(http: Client, cluster: LocalCluster) -> None:
    await make_configmaps(http, 2)
    since = cluster.store.revision
    _, cm0 = await http.get(f"{CMS}/cm-00")
    await http.put(f"{CMS}/cm-00", {**cm0, "data": {"v": "1"}})
    # From a revision: only the changes after it.
    _, lines = await http.watch(CMS, resourceVersion=str(since), limit_s=0.15)
    assert [orjson.loads(x)["type"] for x in lines] == ["MODIFIED"]
    # No revision, or "0": the current state first.
    for rv in ({}, {"resourceVersion": "0"}):
        _, lines = await http.watch(CMS, limit_s=0.15, **rv)
        assert [orjson.loads(x)["type"] for x in lines] == ["ADDED", "ADDED"]
    # sendInitialEvents=false: changes from now only, whether the resourceVersion is unset or "0".
    for rv in ({}, {"resourceVersion": "0"}):
        _, lines = await http.watch(
            CMS, sendInitialEvents="false", resourceVersionMatch="NotOlderThan", limit_s=0.15, **rv
        )
        assert lines == []
    # sendInitialEvents needs resourceVersionMatch=NotOlderThan.
    status, body = await http.get(CMS, watch="true", sendInitialEvents="true")
    assert status == 422 and body["reason"] == "Invalid"


async def test_timeout_seconds_ends_the_stream_with_a_bookmark(http: Client, cluster: LocalCluster) -> None:
    await make_configmaps(http, 1)
    started = time.monotonic()
    status, lines = await http.watch(CMS, timeoutSeconds="1", allowWatchBookmarks="true", limit_s=5)
    elapsed = time.monotonic() - started
    assert status == 200
    assert 0.9 <= elapsed < 3
    events = [orjson.loads(x) for x in lines]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[-1]["object"] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(cluster.store.revision)},
    }


async def test_pod_phase_field_selector(http: Client) -> None:
    pods = "/api/v1/namespaces/pg/pods"
    spec = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    for name in ("running", "done", "failed"):
        await http.post(pods, {"metadata": {"name": name}, "spec": spec})
    for name, phase in (("done", "Succeeded"), ("failed", "Failed")):
        _, p = await http.get(f"{pods}/{name}")
        await http.put(f"{pods}/{name}/status", {**p, "status": {**p["status"], "phase": phase}})
    selector = "status.phase!=Succeeded,status.phase!=Failed"
    status, body = await http.get(pods, fieldSelector=selector)
    assert status == 200 and names(body) == ["running"]
    status, body = await http.get("/api/v1/pods", fieldSelector=selector + ",metadata.namespace=pg")
    assert names(body) == ["running"]

    async def finish_running() -> None:
        await asyncio.sleep(0.2)
        _, p = await http.get(f"{pods}/running")
        await http.put(f"{pods}/running/status", {**p, "status": {**p["status"], "phase": "Succeeded"}})

    task = asyncio.create_task(finish_running())
    _, lines = await http.watch(pods, stop_after=2, fieldSelector=selector)
    await task
    events = [orjson.loads(x) for x in lines]
    # The pod that stops matching leaves the watch as DELETED, carrying its last matching state.
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "running"),
        ("DELETED", "running"),
    ]
    assert events[1]["object"]["status"]["phase"] == "Pending"


async def test_request_errors(http: Client) -> None:
    status, body = await http.get("/api/v1/pods", fieldSelector="spec.foo=bar")
    assert (status, body["reason"], body["message"]) == (
        400,
        "BadRequest",
        "field label not supported: spec.foo",
    )
    for path in (
        "/api/v1/widgets",
        "/apis/nope.example.com/v1/things",
        "/nothing/here",
        "/api/v1/namespaces/pg/nodes",
    ):
        status, body = await http.get(path)
        assert (status, body["reason"], body["message"]) == (
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    status, body = await http.get(f"{CMS}/missing")
    assert (status, body["message"]) == (404, 'configmaps "missing" not found')
    status, body = await http.request("POST", CMS, {"metadata": {"name": "Bad_Name"}})
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"


async def test_delete_collection(http: Client) -> None:
    await make_configmaps(http, 4)
    status, body = await http.request("DELETE", CMS, labelSelector="i in (1,2)")
    assert status == 200 and body["status"] == "Success"
    _, left = await http.get(CMS)
    assert names(left) == ["cm-00", "cm-03"]
    await http.request("DELETE", CMS)
    _, left = await http.get(CMS)
    assert names(left) == []


async def test_version_and_crd_discovery(http: Client) -> None:
    status, version = await http.get("/version")
    assert status == 200 and version["major"] == "1" and version["gitVersion"].startswith("v1.")
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    status, _ = await http.get("/apis/example.com/v1")
    assert status == 404
    await http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    # Served at once: no wait for an Established condition.
    status, resources = await http.get("/apis/example.com/v1")
    assert status == 200
    widget = next(r for r in resources["resources"] if r["name"] == "widgets")
    assert widget["kind"] == "Widget" and widget["namespaced"] is True
    assert any(r["name"] == "widgets/status" for r in resources["resources"])
    _, groups = await http.get("/apis")
    assert "example.com" in [g["name"] for g in groups["groups"]]
    await http.post(
        "/apis/example.com/v1/namespaces/pg/widgets",
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"n": 1}},
    )
    status, listed = await http.get("/apis/example.com/v1/namespaces/pg/widgets")
    assert status == 200 and listed["kind"] == "WidgetList" and names(listed) == ["w"]


# -- authentication over HTTPS ----------------------------------------------------------------------------------


async def test_https_authentication(tmp_path: Path) -> None:
    cluster = await start(tmp_path, insecure_http=False)
    try:
        pki = certs.generate_pki(tmp_path / "pki", [])  # the files the cluster wrote: same CA, same token
        assert cluster.server is not None and pki.token == cluster.server.token
        anonymous = pki.client_ssl_context(with_client_cert=False)
        async with aiohttp.ClientSession(
            cluster.url, connector=aiohttp.TCPConnector(ssl=anonymous)
        ) as session:
            async with session.get("/api/v1/namespaces") as resp:
                assert resp.status == 403
                body = orjson.loads(await resp.read())
            assert body["reason"] == "Forbidden"
            assert body["message"] == (
                'namespaces is forbidden: User "system:anonymous" cannot list resource '
                '"namespaces" in API group "" at the cluster scope'
            )
            async with session.get("/api/v1/namespaces/default/pods/p") as resp:
                body = orjson.loads(await resp.read())
            assert body["message"] == (
                'pods "p" is forbidden: User "system:anonymous" cannot get resource "pods" '
                'in API group "" in the namespace "default"'
            )
            async with session.get("/apis") as resp:
                body = orjson.loads(await resp.read())
            assert (resp.status, body["message"]) == (
                403,
                'forbidden: User "system:anonymous" cannot get path "/apis"',
            )
            async with session.get("/version") as resp:
                assert resp.status == 200  # public, as system:public-info-viewer allows
            async with session.get(
                "/api/v1/namespaces", headers={"Authorization": f"Bearer {pki.token}"}
            ) as resp:
                assert resp.status == 200
            async with session.get("/api/v1/namespaces", headers={"Authorization": "Bearer wrong"}) as resp:
                assert resp.status == 401
                assert orjson.loads(await resp.read())["reason"] == "Unauthorized"
        with_cert = pki.client_ssl_context()
        async with aiohttp.ClientSession(
            cluster.url, connector=aiohttp.TCPConnector(ssl=with_cert)
        ) as session:
            async with session.get("/api/v1/namespaces") as resp:
                assert resp.status == 200
        plain = ssl.create_default_context()  # does not trust our CA
        async with aiohttp.ClientSession(cluster.url, connector=aiohttp.TCPConnector(ssl=plain)) as session:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get("/version")
    finally:
        await cluster.stop()
