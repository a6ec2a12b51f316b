"""node-exporter metrics for the simulated nodes, following the pods that run on them.

Each simulated node exposes what load-aware schedulers read from node-exporter:

    node_cpu_seconds_total{cpu, mode="idle"|"user"|"system"}   counters, one series per core and mode
    node_memory_MemTotal_bytes, node_memory_MemAvailable_bytes gauges

A node's usage is its base load plus, for each Running pod on it, what the pod uses: the pod annotation
``kubesched.io/cpu-usage`` / ``kubesched.io/memory-usage`` (a quantity: "1500m", "2Gi") when present, else
``share`` * the pod's requests (so real usage differs from requests). The same annotations on a Node are
its base load (system daemons). CPU counters integrate usage over time: per second, the busy cores add to
"user" (80 %) and "system" (20 %), the rest of the node's cores to "idle", so all modes together grow by
cores * seconds.

All nodes are served from one endpoint (``/metrics``); every series carries ``instance="<InternalIP>:9100"``
(what crane's annotator matches, ``instance=~"<InternalIP>:.+"``) and ``node="<name>"``, so Prometheus scrapes
it as a single target with ``honor_labels: true``. Totals change only when pods or nodes change (an API
observer keeps them); the exposition is rendered on scrape, streamed in slices so 5,000 nodes do not stall the
event loop. ``cpu_series="one"`` exposes a single ``cpu="0"`` series per mode advancing at the *average*
core's rate: crane's ``avg by (instance)`` rule reads the same load from 1/cores of the series.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

import numpy as np
from aiohttp import web

from kubesched.cluster.api import ClusterApi
from kubesched.cluster.kubelet import SIMULATED_ANNOTATION
from kubesched.cluster.resources import ResourceType
from kubesched.cluster.validation import parse_quantity

log = logging.getLogger("kubesched.nodemetrics")

CPU_USAGE_ANNOTATION = "kubesched.io/cpu-usage"
MEMORY_USAGE_ANNOTATION = "kubesched.io/memory-usage"
DEFAULT_USAGE_SHARE = 0.6
NODE_EXPORTER_PORT = 9100
# Busy CPU time is split between these modes.
USER_SHARE = 0.8
SYSTEM_SHARE = 0.2
# Counters start as if each node had been up this long, half busy, so history written backwards from the live
# values (``history``) stays positive for several days.
INITIAL_UPTIME = 7 * 86400.0
INITIAL_BUSY = 0.5
MODES = ("idle", "user", "system")
SLICE_NODES = 250  # nodes rendered between yields to the event loop

CpuSeries = Literal["per-core", "one"]
CPU_SERIES_CHOICES: tuple[str, ...] = ("per-core", "one")
# (node name, Unix time) -> (CPU cores used, memory bytes used): a load history for ``history``.
UsageProfile = Callable[[str, float], tuple[float, float]]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class UsageModel:
    """What a pod uses: its annotations when present, else ``share`` * its requests."""

    share: float = DEFAULT_USAGE_SHARE

    def __post_init__(self) -> None:
        if not (math.isfinite(self.share) and self.share >= 0):
            raise ValueError(f"usage share must be a finite number >= 0, got {self.share}")

    def pod_usage(self, pod: Obj) -> tuple[float, float]:
        """(CPU cores, memory bytes) the pod uses."""
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        cpu = _annotated(annotations, CPU_USAGE_ANNOTATION)
        memory = _annotated(annotations, MEMORY_USAGE_ANNOTATION)
        if cpu is None or memory is None:
            req_cpu, req_memory = pod_requests(pod)
            cpu = self.share * req_cpu if cpu is None else cpu
            memory = self.share * req_memory if memory is None else memory
        return cpu, memory


def base_usage(node: Obj) -> tuple[float, float]:
    """A node's base load from its usage annotations (0 when absent)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return _annotated(annotations, CPU_USAGE_ANNOTATION) or 0.0, _annotated(
        annotations, MEMORY_USAGE_ANNOTATION
    ) or 0.0


def _annotated(annotations: dict[str, str], key: str) -> float | None:
    text = annotations.get(key)
    if text is None:
        return None
    try:
        value = float(parse_quantity(text))
    except (ValueError, TypeError):
        log.debug("ignoring %s=%r: not a quantity", key, text)
        return None
    return value if value >= 0 else None


def pod_requests(pod: Obj) -> tuple[float, float]:
    """Requested (CPU cores, memory bytes) of the pod's app containers plus its overhead; a container with
    limits but no requests requests its limits (as API defaulting makes it)."""
    spec = pod.get("spec") or {}
    cpu = memory = 0.0
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        cpu += _quantity(req.get("cpu", lim.get("cpu")))
        memory += _quantity(req.get("memory", lim.get("memory")))
    overhead = spec.get("overhead") or {}
    return cpu + _quantity(overhead.get("cpu")), memory + _quantity(overhead.get("memory"))


def _quantity(value: Any) -> float:
    if value is None:
        return 0.0
    try:
        return float(parse_quantity(value))
    except (ValueError, TypeError):
        return 0.0


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass(slots=True)
class _Node:
    name: str
    instance: str
    cores: float
    memory: float
    base_cpu: float = 0.0
    base_memory: float = 0.0
    pods_cpu: float = 0.0
    pods_memory: float = 0.0
    # CPU seconds per mode summed over all cores, as of ``since`` (time.monotonic()).
    counters: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    since: float = 0.0
    prefixes: list[list[str]] | None = None  # per mode, the "name{labels} " of each cpu series

    @property
    def busy(self) -> float:
        return min(max(self.base_cpu + self.pods_cpu, 0.0), self.cores)

    @property
    def memory_used(self) -> float:
        return self.base_memory + self.pods_memory

    def rates(self) -> tuple[float, float, float]:
        busy = self.busy
        return self.cores - busy, USER_SHARE * busy, SYSTEM_SHARE * busy

    def advance(self, now: float) -> None:
        """Fold the time since ``since`` into the counters at the current rates (call before rates change)."""
        elapsed = now - self.since
        if elapsed > 0:
            for i, rate in enumerate(self.rates()):
                self.counters[i] += rate * elapsed
        self.since = now

    def counters_at(self, now: float) -> list[float]:
        elapsed = max(0.0, now - self.since)
        return [c + r * elapsed for c, r in zip(self.counters, self.rates(), strict=True)]


@dataclass(frozen=True, slots=True)
class NodeHistory:
    """A node's load at ``times`` (Unix seconds, ascending) and its CPU counters there, for backfilling."""

    name: str
    instance: str
    cores: float
    memory: float
    cpu_series: int  # how many ``cpu`` series each mode has
    cpu_divisor: float  # each series' value is the node total divided by this
    times: np.ndarray
    cpu_used: np.ndarray  # cores (capped at ``cores``)
    memory_used: np.ndarray  # bytes
    counters: np.ndarray  # shape (len(times), 3): idle, user, system CPU seconds over all cores

    @property
    def labels(self) -> dict[str, str]:
        """The target labels every series of the node carries."""
        return {"instance": self.instance, "node": self.name}


class NodeMetrics:
    """Tracks simulated nodes and their pods through ``ClusterApi`` observers and serves their metrics."""

    def __init__(
        self,
        api: ClusterApi,
        *,
        model: UsageModel | None = None,
        cpu_series: CpuSeries = "per-core",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if cpu_series not in CPU_SERIES_CHOICES:
            raise ValueError(f"cpu_series must be one of {', '.join(CPU_SERIES_CHOICES)}")
        self.api = api
        self.model = model or UsageModel()
        self.cpu_series = cpu_series
        self._clock = clock
        self._pods_t = api.rtype("", "v1", "pods")
        self._nodes_t = api.rtype("", "v1", "nodes")
        self._nodes: dict[str, _Node] = {}
        self._pods: dict[tuple[str, str], tuple[str, float, float]] = {}  # key -> (node, cpu, memory)
        self._runner: web.AppRunner | None = None
        self.url = ""
        api.observers.append(self._observe)

    # -- state -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Pick up the nodes and pods already stored (observers only see later writes)."""
        for st in self.api.store.list(self._nodes_t.storage_key)[0]:
            self._node_changed(st.obj)
        for st in self.api.store.list(self._pods_t.storage_key)[0]:
            self._pod_changed(st.obj, deleted=False)

    @property
    def node_names(self) -> list[str]:
        return list(self._nodes)

    def usage(self, node: str) -> tuple[float, float]:
        """(CPU cores busy, memory bytes used) of a node now: base load plus its running pods."""
        n = self._nodes[node]
        return n.busy, n.memory_used

    def instance(self, node: str) -> str:
        return self._nodes[node].instance

    def capacity(self, node: str) -> tuple[float, float]:
        n = self._nodes[node]
        return n.cores, n.memory

    def _observe(self, rtype: ResourceType, etype: str, new: Obj | None, old: Obj | None) -> None:
        try:
            if rtype is self._pods_t:
                obj = new if new is not None else old
                if obj is not None:
                    self._pod_changed(obj, deleted=etype == "DELETED" or new is None)
            elif rtype is self._nodes_t:
                if etype == "DELETED" or new is None:
                    if old is not None:
                        self._forget_node(old["metadata"]["name"])
                else:
                    self._node_changed(new)
        except Exception:  # metrics must never break an API write
            log.exception("node metrics observer")

    def _node_changed(self, node: Obj) -> None:
        meta = node.get("metadata") or {}
        name = meta.get("name", "")
        if (meta.get("annotations") or {}).get(SIMULATED_ANNOTATION) != "true":
            self._forget_node(name)
            return
        status = node.get("status") or {}
        capacity = status.get("capacity") or status.get("allocatable") or {}
        cores = _quantity(capacity.get("cpu"))
        memory = _quantity(capacity.get("memory"))
        ip = next(
            (a.get("address", "") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), ""
        )
        host = f"[{ip}]" if ":" in ip else ip or name
        instance = f"{host}:{NODE_EXPORTER_PORT}"
        base_cpu, base_memory = base_usage(node)
        now = self._clock()
        n = self._nodes.get(name)
        if n is None:
            n = _Node(name, instance, cores, memory, base_cpu, base_memory, since=now)
            busy = INITIAL_BUSY * cores * INITIAL_UPTIME
            n.counters = [cores * INITIAL_UPTIME - busy, USER_SHARE * busy, SYSTEM_SHARE * busy]
            self._nodes[name] = n
            return
        if (n.instance, n.cores, n.memory, n.base_cpu, n.base_memory) == (
            instance,
            cores,
            memory,
            base_cpu,
            base_memory,
        ):
            return
        n.advance(now)
        if (n.instance, n.cores) != (instance, cores):
            n.prefixes = None
        n.instance, n.cores, n.memory, n.base_cpu, n.base_memory = (
            instance,
            cores,
            memory,
            base_cpu,
            base_memory,
        )

    def _forget_node(self, name: str) -> None:
        if self._nodes.pop(name, None) is not None:
            for key in [k for k, v in self._pods.items() if v[0] == name]:
                del self._pods[key]

    def _pod_changed(self, pod: Obj, *, deleted: bool) -> None:
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        node = (pod.get("spec") or {}).get("nodeName") or ""
        running = not deleted and node in self._nodes and (pod.get("status") or {}).get("phase") == "Running"
        previous = self._pods.get(key)
        if running:
            cpu, memory = self.model.pod_usage(pod)
            if previous == (node, cpu, memory):
                return
            self._unaccount(key, previous)
            self._pods[key] = (node, cpu, memory)
            n = self._nodes[node]
            n.advance(self._clock())
            n.pods_cpu += cpu
            n.pods_memory += memory
        elif previous is not None:
            self._unaccount(key, previous)
            del self._pods[key]

    def _unaccount(self, key: tuple[str, str], previous: tuple[str, float, float] | None) -> None:
        if previous is None:
            return
        n = self._nodes.get(previous[0])
        if n is not None:
            n.advance(self._clock())
            n.pods_cpu = max(0.0, n.pods_cpu - previous[1])
            n.pods_memory = max(0.0, n.pods_memory - previous[2])

    # -- exposition ------------------------------------------------------------------------------------------

    def _series_count(self, n: _Node) -> int:
        return max(1, round(n.cores)) if self.cpu_series == "per-core" else 1

    def _cpu_divisor(self, n: _Node) -> float:
        """Node totals are divided by this for each cpu series: per core, the series share the node's time;
        the one averaged core advances at the node's rate / cores."""
        return float(self._series_count(n)) if self.cpu_series == "per-core" else n.cores or 1.0

    def _prefixes(self, n: _Node) -> list[list[str]]:
        if n.prefixes is None:
            target = f'instance="{_escape(n.instance)}",node="{_escape(n.name)}"'
            n.prefixes = [
                [
                    f'node_cpu_seconds_total{{{target},cpu="{i}",mode="{mode}"}} '
                    for i in range(self._series_count(n))
                ]
                for mode in MODES
            ]
        return n.prefixes

    def render(self, names: Iterable[str] | None = None) -> Iterator[str]:
        """The text exposition (format 0.0.4) in slices of ``SLICE_NODES`` nodes, family by family."""
        nodes = (
            list(self._nodes.values())
            if names is None
            else [self._nodes[x] for x in names if x in self._nodes]
        )
        now = self._clock()
        yield "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
        yield "# TYPE node_cpu_seconds_total counter\n"
        for start in range(0, len(nodes), SLICE_NODES):
            lines: list[str] = []
            for n in nodes[start : start + SLICE_NODES]:
                divisor = self._cpu_divisor(n)
                for prefixes, total in zip(self._prefixes(n), n.counters_at(now), strict=True):
                    value = f"{total / divisor!r}\n"
                    lines.extend(p + value for p in prefixes)
            yield "".join(lines)
        for family, help_text, value_of in (
            ("node_memory_MemTotal_bytes", "Memory information field MemTotal_bytes.", _mem_total),
            (
                "node_memory_MemAvailable_bytes",
                "Memory information field MemAvailable_bytes.",
                _mem_available,
            ),
        ):
            yield f"# HELP {family} {help_text}\n# TYPE {family} gauge\n"
            for start in range(0, len(nodes), SLICE_NODES):
                yield "".join(
                    f'{family}{{instance="{_escape(n.instance)}",node="{_escape(n.name)}"}} {value_of(n)!r}\n'
                    for n in nodes[start : start + SLICE_NODES]
                )

    async def handle_metrics(self, request: web.Request) -> web.StreamResponse:
        names = request.query.getall("node", None)
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})
        await resp.prepare(request)
        for chunk in self.render(names):
            await resp.write(chunk.encode())  # awaits the transport: other tasks run between slices
        await resp.write_eof()
        return resp

    async def serve(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve ``/metrics`` on ``host:port`` (0 picks a free port); returns the URL of ``/metrics``."""
        app = web.Application()
        app.router.add_get("/metrics", self.handle_metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = self._runner.addresses[0]
        url_host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(bound[0], bound[0])
        url_host = f"[{url_host}]" if ":" in url_host else url_host
        self.url = f"http://{url_host}:{bound[1]}/metrics"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- history (backfill) ----------------------------------------------------------------------------------

    def history(
        self, start: float, end: float, step: float, profile: UsageProfile | None = None
    ) -> list[NodeHistory]:
        """Each node's load every ``step`` seconds over [start, end] (Unix times) and CPU counters that end at
        the live counters' values at ``end``, so a scrape after a backfill continues them without a reset.

        ``profile`` gives the load at a time (default: the current load throughout). Busy cores are capped at
        the node's cores, as on a real machine.
        """
        if step <= 0 or end < start:
            raise ValueError("need step > 0 and end >= start")
        times = np.arange(end, start - step / 2, -step)[::-1]
        wall_offset = time.time() - self._clock()
        out = []
        for n in self._nodes.values():
            if profile is None:
                cpu = np.full(len(times), n.busy)
                memory = np.full(len(times), n.memory_used)
            else:
                pairs = [profile(n.name, float(t)) for t in times]
                cpu = np.clip(np.array([p[0] for p in pairs], dtype=float), 0.0, n.cores)
                memory = np.array([p[1] for p in pairs], dtype=float)
            # Rates over (t[k-1], t[k]] are the load at t[k]; walk back from the live counters at ``end``.
            rates = np.stack([n.cores - cpu, USER_SHARE * cpu, SYSTEM_SHARE * cpu], axis=1)
            gaps = np.diff(times, prepend=times[0])[:, None]
            spent_after = np.cumsum((rates * gaps)[::-1], axis=0)[::-1] - rates * gaps
            final = np.array(n.counters_at(end - wall_offset))
            counters = np.maximum(final[None, :] - spent_after, 0.0)
            out.append(
                NodeHistory(
                    n.name,
                    n.instance,
                    n.cores,
                    n.memory,
                    self._series_count(n),
                    self._cpu_divisor(n),
                    times,
                    cpu,
                    memory,
                    counters,
                )
            )
        return out


def _mem_total(n: _Node) -> float:
    return n.memory


def _mem_available(n: _Node) -> float:
    return max(0.0, n.memory - n.memory_used)


def write_openmetrics(
    histories: Iterable[NodeHistory], out: TextIO, extra_labels: dict[str, str] | None = None
) -> None:
    """node-exporter's families for ``histories`` as OpenMetrics samples (timestamps in seconds), without the
    closing ``# EOF``. ``extra_labels`` (e.g. the scrape job) are added to every series, as Prometheus adds
    them when scraping."""
    histories = list(histories)
    extra = "".join(f',{k}="{_escape(v)}"' for k, v in (extra_labels or {}).items())
    out.write("# TYPE node_cpu_seconds counter\n")
    for h in histories:
        target = f'instance="{_escape(h.instance)}",node="{_escape(h.name)}"{extra}'
        stamps = [_timestamp(t) for t in h.times]
        for m, mode in enumerate(MODES):
            values = h.counters[:, m] / h.cpu_divisor
            for cpu in range(h.cpu_series):
                name = f'node_cpu_seconds_total{{{target},cpu="{cpu}",mode="{mode}"}} '
                out.writelines(f"{name}{v!r} {s}\n" for v, s in zip(values.tolist(), stamps, strict=True))
    for family, of in (
        ("node_memory_MemTotal_bytes", lambda h: np.full(len(h.times), h.memory)),
        ("node_memory_MemAvailable_bytes", lambda h: np.maximum(h.memory - h.memory_used, 0.0)),
    ):
        out.write(f"# TYPE {family} gauge\n")
        for h in histories:
            name = f'{family}{{instance="{_escape(h.instance)}",node="{_escape(h.name)}"{extra}}} '
            out.writelines(
                f"{name}{v!r} {_timestamp(t)}\n" for v, t in zip(of(h).tolist(), h.times, strict=True)
            )


def _timestamp(t: float) -> str:
    return f"{t:.3f}"


__all__ = [
    "CPU_SERIES_CHOICES",
    "CPU_USAGE_ANNOTATION",
    "DEFAULT_USAGE_SHARE",
    "MEMORY_USAGE_ANNOTATION",
    "NODE_EXPORTER_PORT",
    "CpuSeries",
    "NodeHistory",
    "NodeMetrics",
    "UsageModel",
    "UsageProfile",
    "base_usage",
    "pod_requests",
    "write_openmetrics",
]
