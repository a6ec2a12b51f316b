"""The Prometheus side of load-aware scheduling: a small HTTP API client and a local server harness.

``PrometheusClient`` runs instant queries (``/api/v1/query``) with bearer or basic auth, a CA bundle or client
certificate, and a timeout. ``PrometheusServer`` runs a real ``prometheus`` (Debian package ``prometheus``)
on 127.0.0.1 with a temporary TSDB, crane's recording rules and scrape targets, for tests and the demo.

History (the 1h and 1d windows) is backfilled before Prometheus starts with
``promtool tsdb create-blocks-from openmetrics``. Recording rules only evaluate going forward, so a backfill
writes, besides node-exporter's raw series, the series the rules *record* from them (``cpu_usage_active``,
``cpu_usage_avg_5m``, and the ``mem_`` ones), computed from the same load: on its first evaluation
``cpu_usage_max_avg_1h = max_over_time(cpu_usage_avg_5m[1h])`` already sees an hour of data. (``promtool tsdb
create-blocks-from rules`` would need a second Prometheus serving the raw history, then a restart to load its
blocks: more moving parts for the same series.)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import math
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import aiohttp
import numpy as np
import orjson
import yaml

from kubesched.cluster.nodemetrics import NodeHistory, write_openmetrics

from .rules import duration_text, rules_yaml

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0  # crane's DefaultPrometheusQueryTimeout
DEFAULT_JOB = "node-exporter"
INSTALL_HINT = (
    "Prometheus is not installed: `apt-get install -y --no-install-recommends prometheus` (Debian/Ubuntu), "
    "or put `prometheus` and `promtool` from https://prometheus.io/download/ on PATH"
)


class PrometheusError(Exception):
    """A query Prometheus refused or could not answer; ``error_type`` is Prometheus' ``errorType``."""

    def __init__(self, message: str, *, error_type: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.status = status


class PrometheusTimeout(PrometheusError):
    """No answer within the timeout."""


@dataclass(frozen=True, slots=True)
class Sample:
    labels: dict[str, str]
    value: float
    timestamp: float  # Unix seconds


@dataclass(frozen=True, slots=True)
class QueryResult:
    result_type: str  # "vector", "scalar", "matrix" or "string"
    samples: tuple[Sample, ...]  # one per series (for a matrix: its last point); a scalar is one sample
    warnings: tuple[str, ...] = ()


class PrometheusClient:
    """Instant queries against a Prometheus HTTP API.

    ``bearer_token_file`` and ``password_file`` are read on every request, so rotated credentials are picked
    up. ``ca_file`` verifies the server; ``cert_file``/``key_file`` present a client certificate.
    """

    def __init__(
        self,
        url: str,
        *,
        bearer_token: str | None = None,
        bearer_token_file: str | os.PathLike[str] | None = None,
        username: str | None = None,
        password: str | None = None,
        password_file: str | os.PathLike[str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        cert_file: str | os.PathLike[str] | None = None,
        key_file: str | os.PathLike[str] | None = None,
        insecure_skip_verify: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"Prometheus address {url!r} must be an http:// or https:// URL")
        if (bearer_token or bearer_token_file) and (username or password or password_file):
            raise ValueError("give either a bearer token or basic auth (username/password), not both")
        if bearer_token and bearer_token_file:
            raise ValueError("give bearer_token or bearer_token_file, not both")
        if (password or password_file) and not username:
            raise ValueError("basic auth needs a username")
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError("timeout must be a positive number of seconds")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._bearer, self._bearer_file = bearer_token, bearer_token_file
        self._username, self._password, self._password_file = username, password, password_file
        self._headers = dict(headers or {})
        self._ssl: ssl.SSLContext | bool = True
        if parts.scheme == "https":
            ctx = ssl.create_default_context(cafile=os.fspath(ca_file) if ca_file else None)
            if insecure_skip_verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if cert_file:
                ctx.load_cert_chain(os.fspath(cert_file), os.fspath(key_file) if key_file else None)
            self._ssl = ctx
        self._session: aiohttp.ClientSession | None = None

    def _auth_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self._bearer or self._bearer_file:
            token = self._bearer or Path(self._bearer_file or "").read_text().strip()
            headers["Authorization"] = f"Bearer {token}"
        elif self._username:
            password = self._password or ""
            if self._password_file:
                password = Path(self._password_file).read_text().strip()
            pair = base64.b64encode(f"{self._username}:{password}".encode()).decode()
            headers["Authorization"] = f"Basic {pair}"
        return headers

    async def query(self, expr: str, *, at: float | None = None, timeout: float | None = None) -> QueryResult:
        """Evaluate ``expr`` at ``at`` (Unix seconds; default: Prometheus' now)."""
        limit = self.timeout if timeout is None else timeout
        form = {"query": expr, "timeout": f"{limit:g}s"}
        if at is not None:
            form["time"] = f"{at:.3f}"
        if self._session is None:
            self._session = aiohttp.ClientSession()
        url = f"{self.url}/api/v1/query"
        try:
            async with asyncio.timeout(limit):
                async with self._session.post(
                    url, data=form, headers=self._auth_headers(), ssl=self._ssl
                ) as resp:
                    if resp.status == 405:  # some proxies only pass GET
                        async with self._session.get(
                            url, params=form, headers=self._auth_headers(), ssl=self._ssl
                        ) as get_resp:
                            return _decode(get_resp.status, await get_resp.text())
                    return _decode(resp.status, await resp.text())
        except TimeoutError:
            raise PrometheusTimeout(
                f"no answer from {self.url} within {limit:g}s", error_type="timeout"
            ) from None
        except aiohttp.ClientError as exc:
            raise PrometheusError(f"cannot query {self.url}: {exc}", error_type="connection") from None

    async def ready(self) -> bool:
        """Whether ``/-/ready`` answers 200."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        try:
            async with asyncio.timeout(self.timeout):
                async with self._session.get(
                    f"{self.url}/-/ready", headers=self._auth_headers(), ssl=self._ssl
                ) as resp:
                    return resp.status == 200
        except (TimeoutError, aiohttp.ClientError):
            return False

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> PrometheusClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _decode(status: int, text: str) -> QueryResult:
    try:
        body = orjson.loads(text)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise PrometheusError(f"HTTP {status}: not a Prometheus API answer: {text[:200]!r}", status=status)
    if body.get("status") != "success":
        raise PrometheusError(
            f"HTTP {status}: {body.get('error') or 'query failed'}",
            error_type=body.get("errorType", ""),
            status=status,
        )
    try:
        return _result(body)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise PrometheusError(
            f"HTTP {status}: not a Prometheus query result ({type(exc).__name__}: {exc}): {text[:200]!r}",
            status=status,
        ) from None


def _result(body: dict[str, Any]) -> QueryResult:
    data = body.get("data") or {}
    kind = data.get("resultType", "")
    raw = data.get("result")
    samples: list[Sample] = []
    if kind == "vector":
        samples = [
            Sample(dict(r.get("metric") or {}), float(r["value"][1]), float(r["value"][0])) for r in raw or []
        ]
    elif kind == "matrix":
        samples = [
            Sample(dict(r.get("metric") or {}), float(r["values"][-1][1]), float(r["values"][-1][0]))
            for r in raw or []
            if r.get("values")
        ]
    elif kind == "scalar" and raw:
        samples = [Sample({}, float(raw[1]), float(raw[0]))]
    return QueryResult(kind, tuple(samples), tuple(body.get("warnings") or ()))


# -- backfill ------------------------------------------------------------------------------------------------


def _trailing_mean(times: np.ndarray, values: np.ndarray, window: float) -> np.ndarray:
    """``avg_over_time(values[window])`` at each time: the mean of samples in (t - window, t]."""
    sums = np.concatenate([[0.0], np.cumsum(values)])
    first = np.searchsorted(times, times - window, side="right")
    last = np.arange(1, len(times) + 1)
    return (sums[last] - sums[first]) / (last - first)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_recorded(histories: Iterable[NodeHistory], out: TextIO, *, job: str = DEFAULT_JOB) -> None:
    """What crane's first two rule levels would have recorded over the histories: ``cpu_usage_active``,
    ``cpu_usage_avg_5m``, ``mem_usage_active``, ``mem_usage_avg_5m`` (percent), with the labels the rules
    leave (``avg by (instance)`` keeps only ``instance``; the memory ratio keeps the target labels)."""
    histories = list(histories)
    cpu: list[tuple[str, np.ndarray, np.ndarray]] = []
    mem: list[tuple[str, np.ndarray, np.ndarray]] = []
    for h in histories:
        # The rule averages the idle rate of the node's cpu series, each carrying total / cpu_divisor.
        cpu_active = 100.0 - 100.0 * (h.cores - h.cpu_used) / h.cpu_divisor
        mem_active = (
            100.0 * (1.0 - np.maximum(h.memory - h.memory_used, 0.0) / h.memory) if h.memory else h.times * 0
        )
        instance, node, job_label = (_quote(x) for x in (h.instance, h.name, job))
        cpu.append((f"instance={instance}", h.times, cpu_active))
        mem.append((f"instance={instance},job={job_label},node={node}", h.times, mem_active))
    for family, series, averaged in (
        ("cpu_usage_active", cpu, False),
        ("cpu_usage_avg_5m", cpu, True),
        ("mem_usage_active", mem, False),
        ("mem_usage_avg_5m", mem, True),
    ):
        out.write(f"# TYPE {family} gauge\n")
        for labels, times, values in series:
            shown = _trailing_mean(times, values, 300.0) if averaged else values
            out.writelines(
                f"{family}{{{labels}}} {v!r} {t:.3f}\n" for v, t in zip(shown.tolist(), times, strict=True)
            )


def write_backfill(histories: Iterable[NodeHistory], out: TextIO, *, job: str = DEFAULT_JOB) -> None:
    """A complete OpenMetrics backfill file: raw node-exporter series, the recorded series, ``# EOF``."""
    histories = list(histories)
    write_openmetrics(histories, out, extra_labels={"job": job})
    write_recorded(histories, out, job=job)
    out.write("# EOF\n")


def create_blocks(
    openmetrics_file: str | os.PathLike[str], tsdb_dir: str | os.PathLike[str], *, promtool: str = "promtool"
) -> None:
    """``promtool tsdb create-blocks-from openmetrics`` into ``tsdb_dir``; ``PrometheusError`` on failure."""
    Path(tsdb_dir).mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            os.fspath(openmetrics_file),
            os.fspath(tsdb_dir),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise PrometheusError(f"promtool backfill failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


# -- local server --------------------------------------------------------------------------------------------


def installed(prometheus: str = "prometheus", promtool: str = "promtool") -> bool:
    """Whether both binaries are on PATH."""
    return shutil.which(prometheus) is not None and shutil.which(promtool) is not None


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class PrometheusServer:
    """A throwaway ``prometheus`` on 127.0.0.1:<free port> with a temp TSDB, crane's rules and scrape targets.

    ``targets`` are metrics URLs (``http://127.0.0.1:9100/metrics``), scraped as job ``job`` with
    ``honor_labels: true`` so each series keeps its own ``instance``. Every rule group is evaluated at the
    scrape interval, so tests see the whole chain within seconds; ``crane_intervals=True`` keeps crane's
    30s/1m/5m. Call ``backfill`` before ``start``.
    """

    def __init__(
        self,
        targets: Sequence[str] = (),
        *,
        scrape_interval: float = 1.0,
        crane_intervals: bool = False,
        rules: str | None = None,
        job: str = DEFAULT_JOB,
        workdir: str | os.PathLike[str] | None = None,
        prometheus: str = "prometheus",
        promtool: str = "promtool",
        log_level: str = "warn",
        extra_args: Sequence[str] = (),
    ) -> None:
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.rules = rules if rules is not None else rules_yaml(None if crane_intervals else scrape_interval)
        self.job = job
        self.prometheus, self.promtool = prometheus, promtool
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self._workdir = Path(workdir) if workdir is not None else None
        self._own_workdir = workdir is None
        self.port = 0
        self.url = ""
        self._process: asyncio.subprocess.Process | None = None
        self._log: Any = None

    @property
    def workdir(self) -> Path:
        """Config, rules, log and TSDB; a temporary directory (removed by ``stop``) unless one was given."""
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="kubesched-prom-"))
        return self._workdir

    @property
    def tsdb_dir(self) -> Path:
        return self.workdir / "tsdb"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def config(self) -> dict[str, Any]:
        """prometheus.yml."""
        by_path: dict[tuple[str, str], list[str]] = {}
        for url in self.targets:
            parts = urlsplit(url)
            by_path.setdefault((parts.scheme or "http", parts.path or "/metrics"), []).append(parts.netloc)
        interval = duration_text(self.scrape_interval)
        return {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": duration_text(min(self.scrape_interval, DEFAULT_TIMEOUT)),
                "evaluation_interval": interval,
            },
            "rule_files": ["rules.yml"],
            "scrape_configs": [
                {
                    "job_name": self.job if i == 0 else f"{self.job}-{i}",
                    "honor_labels": True,
                    "scheme": scheme,
                    "metrics_path": path,
                    "static_configs": [{"targets": hosts}],
                }
                for i, ((scheme, path), hosts) in enumerate(by_path.items())
            ],
        }

    async def backfill(self, histories: Iterable[NodeHistory]) -> None:
        """Write the histories (raw + recorded series) into the TSDB; only before ``start``."""
        if self._process is not None:
            raise RuntimeError("backfill before start: Prometheus loads blocks when it opens the TSDB")
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / "backfill.om"
        with path.open("w") as out:
            write_backfill(histories, out, job=self.job)
        await asyncio.to_thread(create_blocks, path, self.tsdb_dir, promtool=self.promtool)
        path.unlink()

    async def start(self, ready_timeout: float = 30.0) -> None:
        if not installed(self.prometheus, self.promtool):
            raise PrometheusError(INSTALL_HINT)
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "rules.yml").write_text(self.rules)
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(self.config(), sort_keys=False))
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = self.log_path.open("ab")
        self._process = await asyncio.create_subprocess_exec(
            self.prometheus,
            f"--config.file={self.workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.tsdb_dir}",
            "--storage.tsdb.retention.time=30d",
            f"--web.listen-address=127.0.0.1:{self.port}",
            f"--log.level={self.log_level}",
            *self.extra_args,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        async with PrometheusClient(self.url, timeout=2.0) as probe:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + ready_timeout
            while not await probe.ready():
                if self._process.returncode is not None or loop.time() > deadline:
                    tail = self.log_path.read_text(errors="replace")[-2000:]
                    await self.stop()
                    raise PrometheusError(f"prometheus did not become ready:\n{tail}")
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._own_workdir and self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def client(self, **kwargs: Any) -> PrometheusClient:
        return PrometheusClient(self.url, **kwargs)

    async def wait_for(self, expr: str, *, count: int = 1, timeout: float = 20.0) -> QueryResult:
        """Poll ``expr`` until it returns at least ``count`` samples; ``PrometheusTimeout`` otherwise."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with self.client() as c:
            while True:
                with contextlib.suppress(PrometheusError):
                    result = await c.query(expr)
                    if len(result.samples) >= count:
                        return result
                if loop.time() > deadline:
                    raise PrometheusTimeout(
                        f"{expr!r} returned fewer than {count} samples within {timeout:g}s"
                    )
                await asyncio.sleep(0.25)

    async def __aenter__(self) -> PrometheusServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


__all__ = [
    "DEFAULT_JOB",
    "DEFAULT_TIMEOUT",
    "INSTALL_HINT",
    "PrometheusClient",
    "PrometheusError",
    "PrometheusServer",
    "PrometheusTimeout",
    "QueryResult",
    "Sample",
    "create_blocks",
    "installed",
    "write_backfill",
    "write_recorded",
]
