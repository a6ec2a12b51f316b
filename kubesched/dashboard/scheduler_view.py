"""The live scheduler's own view: its queue (``/debug/queue``, served with ``--explain``) and its metrics.

Every ``interval`` seconds the watcher reads ``/metrics`` and keeps the cumulative
``scheduler_schedule_attempts_total`` (by result) and ``scheduler_scheduling_attempt_duration_seconds``
(sum, count, buckets) in a ring buffer covering ``window`` seconds; throughput and attempt latency per interval
are the differences between neighbouring samples (a counter that went down means a restart: that interval is
skipped). The queue is read at the same pace.

TLS: the scheduler's secure port usually has a self-signed certificate. It is verified against ``ca_file`` when
one is given; without one, verification is off only for a loopback address, and any other address is refused.

Credentials: the secure port authorizes ``/metrics`` and ``/debug/*`` (kube-scheduler's delegated authorization),
so the watcher presents ``credentials`` (the dashboard's kubeconfig: its client certificate and/or bearer token).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import logging
import math
import ssl
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from kubesched.client.config import ClientConfig, load_client_certificate
from kubesched.serving.fetch import auth_headers

log = logging.getLogger(__name__)

ATTEMPTS = "scheduler_schedule_attempts"
DURATION = "scheduler_scheduling_attempt_duration_seconds"


class SchedulerUrlError(ValueError):
    pass


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def ssl_context_for(
    url: str, ca_file: str | None, credentials: ClientConfig | None = None
) -> ssl.SSLContext | None:
    ctx = _server_context(url, ca_file)
    if (
        ctx is not None
        and credentials is not None
        and (credentials.client_cert_file or credentials.client_cert_data)
    ):
        load_client_certificate(ctx, credentials)
    return ctx


def _server_context(url: str, ca_file: str | None) -> ssl.SSLContext | None:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise SchedulerUrlError(f"--scheduler-url {url!r}: expected https://host:port")
    if parts.scheme == "http":
        return None
    if ca_file:
        return ssl.create_default_context(cafile=ca_file)
    if not is_loopback(parts.hostname):
        raise SchedulerUrlError(
            f"--scheduler-url {url}: not a loopback address, so its certificate must be verified: "
            "give --scheduler-ca-file"
        )
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # loopback, self-signed: nothing on the way to impersonate it
    return ctx


def _status_message(body: bytes) -> str:
    """The message of a ``metav1.Status`` answer (401/403 from the secure port), else the start of the body."""
    try:
        return str(orjson.loads(body).get("message") or "")
    except (ValueError, AttributeError):
        return body[:200].decode("utf-8", "replace").strip()


@dataclass(slots=True)
class Sample:
    t: float
    attempts: dict[str, float]  # result -> cumulative count
    duration_sum: float
    duration_count: float
    buckets: list[tuple[float, float]]  # (le, cumulative count), ascending


def parse_metrics(text: str, t: float) -> Sample:
    attempts: dict[str, float] = {}
    dsum = dcount = 0.0
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        # Without "# TYPE" lines a family is named after its sample (``..._total``): match by prefix.
        if not family.name.startswith((ATTEMPTS, DURATION)):
            continue
        for s in family.samples:
            if s.name == ATTEMPTS + "_total":
                result = s.labels.get("result", "")
                attempts[result] = attempts.get(result, 0.0) + s.value
            elif s.name == DURATION + "_sum":
                dsum += s.value
            elif s.name == DURATION + "_count":
                dcount += s.value
            elif s.name == DURATION + "_bucket":
                le = float(s.labels.get("le", "inf"))
                buckets[le] = buckets.get(le, 0.0) + s.value
    return Sample(t, attempts, dsum, dcount, sorted(buckets.items()))


def _quantile(q: float, counts: list[tuple[float, float]]) -> float | None:
    """histogram_quantile over the bucket differences of one interval (linear within a bucket)."""
    if not counts or counts[-1][1] <= 0:
        return None
    total = counts[-1][1]
    rank = q * total
    lower_le, lower_count = 0.0, 0.0
    for le, c in counts:
        if c >= rank:
            if math.isinf(le):
                return lower_le
            if c == lower_count:
                return le
            return lower_le + (le - lower_le) * (rank - lower_count) / (c - lower_count)
        lower_le, lower_count = le, c
    return None


def series(samples: list[Sample]) -> list[dict[str, Any]]:
    """Per interval: attempts per second by result, scheduled per second, mean and p90 attempt latency."""
    out: list[dict[str, Any]] = []
    for prev, cur in itertools.pairwise(samples):
        dt = cur.t - prev.t
        if dt <= 0:
            continue
        deltas = {r: cur.attempts.get(r, 0.0) - prev.attempts.get(r, 0.0) for r in cur.attempts}
        dcount = cur.duration_count - prev.duration_count
        if any(v < 0 for v in deltas.values()) or dcount < 0:
            continue  # the scheduler restarted
        prev_b = dict(prev.buckets)
        dbuckets = [(le, c - prev_b.get(le, 0.0)) for le, c in cur.buckets]
        p90 = _quantile(0.9, dbuckets)
        out.append(
            {
                "t": round(cur.t, 3),
                "scheduledPerSecond": round(deltas.get("scheduled", 0.0) / dt, 3),
                "attemptsPerSecond": {r: round(v / dt, 3) for r, v in sorted(deltas.items())},
                "meanLatencySeconds": (
                    round((cur.duration_sum - prev.duration_sum) / dcount, 6) if dcount > 0 else None
                ),
                "p90LatencySeconds": round(p90, 6) if p90 is not None else None,
            }
        )
    return out


@dataclass
class SchedulerWatcher:
    url: str
    ca_file: str | None = None
    interval: float = 3.0
    window: float = 600.0
    timeout: float = 5.0
    samples: deque[Sample] = field(init=False)
    queue: dict[str, Any] | None = None
    queue_error: str = ""
    metrics_error: str = ""
    last_poll: float = 0.0
    credentials: ClientConfig | None = None

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        self._ssl = ssl_context_for(self.url, self.ca_file, self.credentials)
        self.samples = deque(maxlen=max(2, int(self.window / self.interval) + 1))
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="scheduler watcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._session is not None:
            await self._session.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False, limit=2)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout)
            )
        return self._session

    async def _get(self, path: str) -> tuple[int, bytes]:
        async with self._get_session().get(self.url + path, headers=auth_headers(self.credentials)) as r:
            return r.status, await r.read()

    async def poll_once(self) -> None:
        now = time.time()
        self.last_poll = now
        try:
            status, body = await self._get("/metrics")
            if status != 200:
                raise RuntimeError(f"/metrics answered {status}: {_status_message(body)}")
            sample = await asyncio.to_thread(parse_metrics, body.decode("utf-8", "replace"), now)
            self.samples.append(sample)
            self.metrics_error = ""
        except (aiohttp.ClientError, OSError, RuntimeError, ValueError, TimeoutError) as e:
            self.metrics_error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        try:
            status, body = await self._get("/debug/queue")
            if status == 404:
                self.queue = None
                self.queue_error = "the scheduler serves no /debug/queue: start it with --explain"
            elif status in (401, 403):
                raise RuntimeError(f"/debug/queue answered {status}: {_status_message(body)}")
            elif status != 200:
                raise RuntimeError(f"/debug/queue answered {status}")
            else:
                self.queue = orjson.loads(body)
                self.queue_error = ""
        except (aiohttp.ClientError, OSError, RuntimeError, ValueError, TimeoutError) as e:
            self.queue_error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__

    async def decisions(self) -> list[dict[str, Any]]:
        """The scheduler's recent decisions (``--explain``), or [] when it has none to give."""
        try:
            status, body = await self._get("/debug/decisions")
        except (aiohttp.ClientError, OSError, TimeoutError):
            return []
        if status != 200:
            return []
        try:
            return list(orjson.loads(body).get("decisions") or [])
        except (ValueError, AttributeError):
            return []

    async def _loop(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self.interval)

    def view(self) -> dict[str, Any]:
        return {
            "configured": True,
            "url": self.url,
            "intervalSeconds": self.interval,
            "lastPoll": self.last_poll,
            "metricsError": self.metrics_error,
            "queueError": self.queue_error,
            "queue": self.queue,
            "series": series(list(self.samples)),
        }
