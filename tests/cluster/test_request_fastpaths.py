"""The API server's short paths for the common request (a small body that arrived whole, no query string) answer
exactly as the general paths do (a body still streaming in, a query string present)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from kubesched.cluster.api import ClusterApi
from kubesched.cluster.apiserver import ApiServer, start_server

Obj = dict[str, Any]
NS = "fast"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
PODS = f"/api/v1/namespaces/{NS}/pods"


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    api = ClusterApi()
    api.bootstrap()
    runner = await start_server(ApiServer(api, require_auth=False), "127.0.0.1", 0, None)
    host, port = runner.addresses[0][:2]
    async with aiohttp.ClientSession(f"http://{host}:{port}") as s:
        async with s.post("/api/v1/namespaces", json={"metadata": {"name": NS}}) as resp:
            assert resp.status == 201
        yield s
    await runner.cleanup()


def _cm(name: str, **extra: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}, **extra}


async def _post(
    s: aiohttp.ClientSession, path: str, data: Any, params: dict[str, str] | None = None
) -> tuple[int, Obj, list[str]]:
    async with s.post(path, data=data, params=params, headers={"Content-Type": "application/json"}) as resp:
        out = orjson.loads(await resp.read())
        return resp.status, out, resp.headers.getall("Warning", [])


def _comparable(obj: Obj) -> Obj:
    meta = {
        k: v for k, v in obj["metadata"].items() if k not in ("uid", "resourceVersion", "creationTimestamp")
    }
    return {**obj, "metadata": meta}


async def test_streamed_body_is_read_as_a_whole_one(session: aiohttp.ClientSession) -> None:
    whole = orjson.dumps(_cm("whole", bogus=1))
    status_a, a, warn_a = await _post(session, CMS, whole)

    streamed = orjson.dumps(_cm("streamed", bogus=1))

    async def slowly() -> AsyncIterator[bytes]:  # chunked, in pieces with pauses: not at EOF when handled
        for i in range(0, len(streamed), 7):
            yield streamed[i : i + 7]
            await asyncio.sleep(0.001)

    status_b, b, warn_b = await _post(session, CMS, slowly())
    assert (status_a, status_b) == (201, 201)
    assert warn_a == warn_b == ['299 - "unknown field \\"bogus\\""']
    assert _comparable(a) == {**_comparable(b), "metadata": {**_comparable(b)["metadata"], "name": "whole"}}
    assert "bogus" not in a and a["data"] == {"k": "v"}


async def test_empty_and_broken_bodies_answer_as_before(session: aiohttp.ClientSession) -> None:
    status, out, _ = await _post(session, CMS, b"")
    assert status == 400 and out["reason"] == "BadRequest", out
    status, out, _ = await _post(session, CMS, b'{"metadata": ')
    assert status == 400 and out["message"].startswith("the request body could not be decoded"), out


async def test_no_query_means_the_default_options(session: aiohttp.ClientSession) -> None:
    # Without a query: fieldValidation Warn (a warning, the field dropped), not a dry run, no field manager.
    status, out, warnings = await _post(session, CMS, orjson.dumps(_cm("plain", bogus=1)))
    assert status == 201 and warnings == ['299 - "unknown field \\"bogus\\""'] and "bogus" not in out
    assert "managedFields" not in out["metadata"]
    async with session.get(f"{CMS}/plain") as resp:
        assert resp.status == 200
    # An empty query string is the same request.
    status, out, warnings = await _post(session, CMS + "?", orjson.dumps(_cm("emptyq", bogus=1)))
    assert status == 201 and len(warnings) == 1
    # With a query the options still count, and are still checked.
    status, out, _ = await _post(
        session, CMS, orjson.dumps(_cm("strict", bogus=1)), params={"fieldValidation": "Strict"}
    )
    assert status == 400 and 'unknown field "bogus"' in out["message"], out
    status, out, _ = await _post(session, CMS, orjson.dumps(_cm("dry")), params={"dryRun": "All"})
    assert status == 201
    async with session.get(f"{CMS}/dry") as resp:
        assert resp.status == 404
    status, out, _ = await _post(session, CMS, orjson.dumps(_cm("badq")), params={"dryRun": "Some"})
    assert status == 422 and out["details"]["kind"] == "CreateOptions", out
    status, out, _ = await _post(session, CMS, orjson.dumps(_cm("badb")), params={"pretty": "maybe"})
    assert status == 400 and "ParseBool" in out["message"], out
    async with session.get(CMS, params={"watch": "nope"}) as resp:
        assert resp.status == 400


async def test_binding_without_a_query(session: aiohttp.ClientSession) -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    status, _, _ = await _post(session, PODS, orjson.dumps(pod))
    assert status == 201
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "n1"}}
    status, out, _ = await _post(session, f"{PODS}/p/binding", orjson.dumps(binding))
    assert status == 201 and out == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    status, out, _ = await _post(session, f"{PODS}/p/binding", orjson.dumps(binding))
    assert status == 409 and "already assigned" in out["message"], out


def test_binding_observers_see_the_pod_before_and_after() -> None:
    api = ClusterApi()
    api.bootstrap()
    pods = api.rtype("", "v1", "pods")
    created = api.create(
        pods, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "default"
    )
    before = orjson.loads(orjson.dumps(created.obj))
    seen: list[tuple[str, Any, Any]] = []
    api.observers.append(lambda rtype, etype, new, old: seen.append((etype, new, old)))
    api.bind("default", "p", {"target": {"name": "n1"}}, url_name="p")
    assert len(seen) == 1
    etype, new, old = seen[0]
    assert etype == "MODIFIED" and old == before and new["spec"]["nodeName"] == "n1"
    assert new["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]
