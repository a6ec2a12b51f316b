"""The dashboard's HTTP server (aiohttp): the page, its static files and a read-only JSON API.

- ``GET /`` and ``/static/*``: the page (plain HTML/JS/CSS shipped with the package, nothing from the internet).
- ``GET /api/state``: ``ClusterModel.snapshot()`` (tiles, or a heat map beyond the tile limit), cached per
  model generation; ``GET /api/stream``: the same as Server-Sent Events, pushed when the cluster changes (at most
  every ``min_push_interval`` seconds, more seldom for big clusters).
- ``GET /api/nodes?first=&last=``: the tiles of one heat-map cell.
- ``GET /api/pods/{namespace}/{name}/explain``: the placement ``kubesched simulate`` computes for that pod now.
- ``GET /api/profiles``, ``GET /api/scheduler`` (the live scheduler's queue and metrics, when configured).
- ``POST /api/whatif``: a simulation only, never a write to the cluster. Bad input is a 400 with a message.

It listens on 127.0.0.1 by default. While bound to loopback it answers only requests whose ``Host`` is a loopback
name, so a web page elsewhere cannot read it through DNS rebinding; the POST demands a JSON content type, which a
cross-site form cannot send without a CORS preflight (which this server never grants).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from kubesched.dashboard.explain import BadRequest, Explainer, NotFound
from kubesched.dashboard.model import ClusterModel
from kubesched.dashboard.scheduler_view import SchedulerWatcher, is_loopback
from kubesched.scheduler.server import url_host

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
MAX_BODY = 512 * 1024
SSE_KEEPALIVE = 15.0

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, content_type="application/json", headers=_NO_CACHE
    )


def _error(message: str, status: int) -> web.Response:
    return _json({"error": message}, status)


_NO_CACHE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class SnapshotCache:
    """The snapshot's JSON bytes for the model's current generation, computed at most once per generation."""

    def __init__(self, model: ClusterModel) -> None:
        self.model = model
        self._generation = -1
        self._body = b""
        self.last_compute_seconds = 0.0

    def body(self) -> bytes:
        if self._generation != self.model.generation:
            started = time.perf_counter()
            generation = self.model.generation
            self._body = orjson.dumps(self.model.snapshot())
            self._generation = generation
            self.last_compute_seconds = time.perf_counter() - started
        return self._body


class DashboardServer:
    def __init__(
        self,
        model: ClusterModel,
        explainer: Explainer,
        *,
        watcher: SchedulerWatcher | None = None,
        bind_address: str = "127.0.0.1",
        port: int = 8090,
        min_push_interval: float = 0.5,
    ) -> None:
        self.model = model
        self.explainer = explainer
        self.watcher = watcher
        self.bind_address = bind_address
        self.requested_port = port
        self.min_push_interval = min_push_interval
        self.cache = SnapshotCache(model)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._closing = asyncio.Event()

    # -- app ----------------------------------------------------------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._guard])
        r = app.router
        r.add_get("/", self._index)
        r.add_static("/static/", STATIC_DIR, follow_symlinks=False)
        r.add_get("/healthz", self._healthz)
        r.add_get("/api/state", self._state)
        r.add_get("/api/stream", self._stream)
        r.add_get("/api/nodes", self._nodes)
        r.add_get("/api/profiles", self._profiles)
        r.add_get("/api/scheduler", self._scheduler)
        r.add_get("/api/pods/{namespace}/{name}/explain", self._explain)
        r.add_post("/api/whatif", self._what_if)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_loopback(self.bind_address) and not is_loopback(request.url.host or ""):
            return _error("this dashboard answers loopback host names only", 403)
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            return _error("internal error (see the dashboard's log)", 500)

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        runner = web.AppRunner(self.build_app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.bind_address, self.requested_port)
        await site.start()
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        self._port = sockets[0].getsockname()[1] if sockets else self.requested_port

    async def stop(self) -> None:
        self._closing.set()
        if self.model.changed is not None:
            self.model.changed.set()  # wake the streams so they end
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{url_host(self.bind_address)}:{self.port}"

    # -- handlers -----------------------------------------------------------------------------------------------

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(
            body=(STATIC_DIR / "index.html").read_bytes(), content_type="text/html", headers=_NO_CACHE
        )

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _state(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.cache.body(),
            content_type="application/json",
            headers={**_NO_CACHE, "X-Compute-Seconds": f"{self.cache.last_compute_seconds:.6f}"},
        )

    def _push_interval(self) -> float:
        # Recomputing and sending a 5,000-node heat map a few times a second is wasted work: slow down.
        return max(self.min_push_interval, len(self.model.nodes) / 2500)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store", **_NO_CACHE}
        )
        await response.prepare(request)
        self.model.bind_loop()
        changed = self.model.changed
        assert changed is not None
        sent = -1
        last_write = time.monotonic()
        try:
            while not self._closing.is_set():
                if self.model.generation != sent:
                    sent = self.model.generation
                    await response.write(b"event: state\ndata: " + self.cache.body() + b"\n\n")
                    last_write = time.monotonic()
                    await asyncio.sleep(self._push_interval())
                    continue
                changed.clear()
                if self.model.generation != sent:
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), SSE_KEEPALIVE)
                if time.monotonic() - last_write >= SSE_KEEPALIVE:
                    await response.write(b": keepalive\n\n")
                    last_write = time.monotonic()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async def _nodes(self, request: web.Request) -> web.Response:
        first = request.query.get("first", "")
        last = request.query.get("last", "")
        if not first or not last:
            return _error("give first= and last= (a heat-map cell's node range)", 400)
        return _json({"nodes": self.model.nodes_between(first, last)})

    async def _profiles(self, request: web.Request) -> web.Response:
        return _json({"profiles": self.explainer.profiles})

    async def _scheduler(self, request: web.Request) -> web.Response:
        if self.watcher is None:
            return _json(
                {
                    "configured": False,
                    "hint": "start the dashboard with --scheduler-url https://127.0.0.1:10259",
                }
            )
        return _json(self.watcher.view())

    async def _explain(self, request: web.Request) -> web.Response:
        key = f"{request.match_info['namespace']}/{request.match_info['name']}"
        try:
            result = await self.explainer.explain(self.model, key)
        except NotFound as e:
            return _error(str(e.args[0] if e.args else e), 404)
        except BadRequest as e:
            return _error(str(e), 400)
        if self.watcher is not None:
            recorded = [d for d in await self.watcher.decisions() if d.get("pod") == key]
            if recorded:
                result["recorded"] = recorded[-1]
        return _json(result)

    async def _what_if(self, request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return _error("send the what-if as application/json", 415)
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(f"the request is larger than {MAX_BODY // 1024} KiB", 413)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            return _error(f"the request is not JSON: {e}", 400)
        try:
            return _json(await self.explainer.what_if(self.model, body))
        except BadRequest as e:
            return _error(str(e), 400)
