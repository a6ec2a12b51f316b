"""Fakes for the client tests: a tiny aiohttp API server: scripted per test, or a stateful single collection."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


class FakeServer:
    """Listens on 127.0.0.1; every request is recorded and passed to ``handler`` (set by the test)."""

    def __init__(self) -> None:
        self.handler: Handler | None = None
        self.requests: list[Seen] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self, ssl_context: Any = None) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            Seen(request.method, request.path, dict(request.query), dict(request.headers), body)
        )
        assert self.handler is not None, "test did not set a handler"
        return await self.handler(request)

    def watches(self) -> list[Seen]:
        return [r for r in self.requests if r.query.get("watch") == "true"]

    def lists(self) -> list[Seen]:
        return [r for r in self.requests if r.method == "GET" and r.query.get("watch") != "true"]


def status(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
        **extra,
    }


def json_response(body: Any, status_code: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status_code, content_type="application/json")


def watch_line(event_type: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj}) + b"\n"


class FakeCollection:
    """One namespaced collection (configmaps) with a global revision, history and watchers.

    Knobs: ``watch_list`` (False → 400 on sendInitialEvents), ``compacted`` (watches from an older RV get an
    in-stream 410 ERROR), ``close_watches()`` (end every open watch cleanly).
    """

    def __init__(self) -> None:
        self.revision = 100
        self.objects: dict[str, dict[str, Any]] = {}
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted = 0
        self.watch_list = True
        self.watchers: set[asyncio.Queue[bytes | None]] = set()
        self.list_requests = 0

    # -- mutations --
    def _emit(self, event_type: str, obj: dict[str, Any]) -> None:
        self.history.append((self.revision, event_type, obj))
        line = watch_line(event_type, obj)
        for q in self.watchers:
            q.put_nowait(line)

    def put(
        self, name: str, data: dict[str, str] | None = None, namespace: str = "default"
    ) -> dict[str, Any]:
        self.revision += 1
        key = f"{namespace}/{name}"
        existed = key in self.objects
        obj = {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(self.revision)},
            "data": data or {},
        }
        self.objects[key] = obj
        self._emit("MODIFIED" if existed else "ADDED", obj)
        return obj

    def delete(self, name: str, namespace: str = "default") -> None:
        self.revision += 1
        obj = self.objects.pop(f"{namespace}/{name}")
        gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.revision)}}
        self._emit("DELETED", gone)

    def bookmark(self) -> None:
        line = watch_line(
            "BOOKMARK",
            {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": str(self.revision)}},
        )
        for q in self.watchers:
            q.put_nowait(line)

    def compact(self) -> None:
        self.compacted = self.revision
        self.history.clear()

    def close_watches(self) -> None:
        for q in self.watchers:
            q.put_nowait(None)

    # -- HTTP --
    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            return await self._watch(request)
        return self._list(request)

    def _list(self, request: web.Request) -> web.Response:
        self.list_requests += 1
        items = [_without_type(o) for _, o in sorted(self.objects.items())]
        limit = int(request.query.get("limit", "0") or 0)
        start = int(request.query.get("continue", "0") or 0)
        meta: dict[str, Any] = {"resourceVersion": str(self.revision)}
        if limit:
            page = items[start : start + limit]
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
            items = page
        return json_response({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta, "items": items})

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        initial: list[bytes] = []
        if q.get("sendInitialEvents") == "true":
            if not self.watch_list:
                return json_response(status(400, "BadRequest", "sendInitialEvents is forbidden"), 400)
            initial = [watch_line("ADDED", o) for _, o in sorted(self.objects.items())]
            end = {
                "kind": "ConfigMap",
                "apiVersion": "v1",
                "metadata": {
                    "resourceVersion": str(self.revision),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                },
            }
            initial.append(watch_line("BOOKMARK", end))
        elif q.get("resourceVersion") not in (None, "", "0"):
            rv = int(q["resourceVersion"])
            if rv < self.compacted:
                msg = f"too old resource version: {rv} ({self.compacted})"
                initial = [watch_line("ERROR", status(410, "Expired", msg))]
            else:
                initial = [watch_line(t, o) for r, t, o in self.history if r > rv]
        else:
            initial = [watch_line("ADDED", o) for _, o in sorted(self.objects.items())]
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for line in initial:
            await resp.write(line)
        if initial and b'"ERROR"' in initial[-1]:
            return resp
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.watchers.add(queue)
        try:
            while (line := await queue.get()) is not None:
                await resp.write(line)
        finally:
            self.watchers.discard(queue)
        return resp


def _without_type(obj: dict[str, Any]) -> dict[str, Any]:
    # Real list responses omit kind/apiVersion on items.
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


@dataclass
class Recorder:
    """Handler calls of an informer, in order."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def on_add(self, obj: dict[str, Any]) -> None:
        self.calls.append(("add", obj))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.calls.append(("update", (old, new)))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.calls.append(("delete", obj))

    def names(self) -> list[tuple[str, str]]:
        out = []
        for kind, arg in self.calls:
            obj = arg[1] if kind == "update" else arg
            out.append((kind, obj["metadata"]["name"]))
        return out


async def eventually(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    """Poll until ``predicate()`` holds (the informer runs in the background)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
