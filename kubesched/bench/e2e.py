"""``--mode e2e``: the local cluster and the scheduler as separate processes, pods created through the API.

The harness starts ``kubesched cluster up --nodes 0`` (HTTPS), creates the workload's nodes (plain Node objects,
no simulated kubelet, as scheduler_perf has none), namespaces and initial pods, and starts ``kubesched
scheduler`` with a configuration of its own (leader election off, client QPS 5000 as in the observed
kube-scheduler measurement). Its own pod watch sees every binding and deletion in the order the API server
made them; that feeds the throughput samples and the placement check.

Two orders for the measured pods (``create``):
- ``before`` (default): once the initial pods are bound the scheduler is stopped, the measured pods are created,
  and a new scheduler process is started; throughput is sampled from the moment its ``/readyz`` passes (its
  informers synced, so scheduling starts), not from its first binding: the scheduling loop assumes every
  waiting pod before its binding tasks get a turn, so bindings come in a burst at the end. Start-up is
  reported apart (``schedulerStartupSeconds``). Pod creation does not compete with scheduling for the CPU.
- ``live``: the measured pods are created while the scheduler runs (scheduler_perf's way); sampling starts
  with the first create, so a slow creator shows as a slow scheduler.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import json
import logging
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesched.bench.check import PlacementChecker, pod_key
from kubesched.bench.inprocess import Progress, _base_result
from kubesched.bench.measure import latency_summary, peak_rss, percentile, series, summarize
from kubesched.bench.profiles import WorkloadSkipped, config_document, require_plugin
from kubesched.bench.workloads import CHURN_INTERVAL, Workload, load_annotations
from kubesched.cluster.process import start_cluster_process
from kubesched.scheduler.framework.catalogue import Catalogue

Obj = dict[str, Any]
log = logging.getLogger("kubesched.bench")

SCHEDULER_QPS = 5000.0
CREATE_CONCURRENCY = 64
# Steady load: creates and deletes in flight at most. At a few hundred pods/s one or two are in flight; the
# bound only matters when the API server stalls, and then more connections add handshakes, not throughput.
STEADY_CONCURRENCY = 16
# Steady load: pause between the scheduler's /readyz passing and the first arrival.
STEADY_SETTLE_SECONDS = 1.0
# Loop-lag sampling period of the harness during a steady run (its lag shows as create and watch delay).
LAG_SAMPLE_SECONDS = 0.01
START_TIMEOUT = 60.0
BOUND_PODS = "spec.nodeName!="
LOG_TAIL = 15
EVENTS_WAIT_SECONDS = 15.0
READY_POLL = 0.05


@dataclass
class E2eOptions:
    timeout: float = 900.0
    create: str = "before"  # or "live"
    keep_dir: bool = False
    keep_series: bool = False  # add the per-pod bind offsets and latencies (``series``) for --plot
    api_writer: str | None = None  # the scheduler's --api-writer (None: its default)


class _Process:
    """A child process whose output goes to a file; ``tail`` for error messages."""

    def __init__(self, name: str, cmd: list[str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "w")  # closed in stop()
        self.port = 0
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, text=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def peak_rss(self) -> int:
        return peak_rss(self.proc.pid) if self.alive() else 0

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far, its child processes included (0 once it exited)."""
        return _cpu_seconds(self.proc.pid)

    def children_cpu_seconds(self) -> float:
        """The part of :meth:`cpu_seconds` used by its live child processes (the scheduler's API writer)."""
        return _cpu_seconds(self.proc.pid, children_only=True)

    def stop(self, timeout: float = 10.0) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode

    def tail(self, lines: int = LOG_TAIL) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _start_cluster(data_dir: Path) -> tuple[subprocess.Popen[str], str, Path, list[str]]:
    """``kubesched cluster up`` with no simulated nodes (the harness creates plain Nodes, as scheduler_perf), in
    memory: the state is throwaway and durable writes would be measured as the scheduler's time."""
    return start_cluster_process(
        data_dir, "--nodes", "0", timeout=START_TIMEOUT, keep_lines=LOG_TAIL, storage="memory"
    )


class _PodWatch:
    """The harness's view of pods: bindings and deletions in API order, with the time each binding was seen."""

    def __init__(self, client: Any, label_selector: str | None = None) -> None:
        from kubesched.client.informer import Informer

        self.changes: list[tuple[str, Obj]] = []
        self.bind_times: dict[str, float] = {}
        self._waiting: set[str] = set()
        self._all_bound = asyncio.Event()
        self.on_bind: Callable[[int], None] | None = None
        # Only bound pods: a pending pod's creation is nothing to the harness, and leaving it out saves the
        # API server and this process one watch event per pod (a pod shows up here as ADDED once bound).
        self.informer = Informer(
            client, "v1", "pods", label_selector=label_selector, field_selector=BOUND_PODS
        )
        self.informer.add_handler(self._added, self._updated, self._deleted)

    def expect_bound(self, keys: Iterable[str]) -> asyncio.Event:
        self._waiting = set(keys) - set(self.bind_times)
        self._all_bound = asyncio.Event()
        if not self._waiting:
            self._all_bound.set()
        return self._all_bound

    def _bound(self, pod: Obj) -> None:
        key = pod_key(pod)
        self.changes.append(("bound", pod))
        self.bind_times.setdefault(key, time.perf_counter())
        if key in self._waiting:
            self._waiting.discard(key)
            if not self._waiting:
                self._all_bound.set()
        if self.on_bind is not None:
            self.on_bind(len(self.bind_times))

    def _added(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self._bound(pod)

    def _updated(self, old: Obj, new: Obj) -> None:
        if not (old.get("spec") or {}).get("nodeName") and (new.get("spec") or {}).get("nodeName"):
            self._bound(new)

    def _deleted(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            self.changes.append(("deleted", pod))


# The storage kinds a workload's ``volume_objects`` holds.
VOLUME_PLURALS = {
    "PersistentVolume": "persistentvolumes",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "CSINode": "csinodes",
}


async def _create_all(create: Callable[[Obj], Awaitable[Any]], objects: list[Obj]) -> None:
    limit = asyncio.Semaphore(CREATE_CONCURRENCY)

    async def one(obj: Obj) -> None:
        async with limit:
            await create(obj)

    await asyncio.gather(*(one(o) for o in objects))


class BenchObjects:
    """The objects a run creates, as the workload defines them (the harness's own cluster: nothing else runs
    there). ``external.py`` subclasses it to fence the objects off on somebody else's cluster."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload

    def namespaces(self) -> list[str]:
        """Namespaces to create (``default`` exists already)."""
        return [ns for ns in self.workload.namespaces if ns != "default"]

    def nodes(self, annotate: Callable[[int], dict[str, str]] | None) -> list[Obj]:
        return self.workload.node_objects(annotate)

    def pod(self, pod: Obj) -> Obj:
        return pod

    def init_pods(self) -> list[Obj]:
        return [self.pod(p) for p in self.workload.init_pod_objects()]

    def measured_pods(self) -> list[Obj]:
        return [self.pod(p) for p in self.workload.measured_pod_objects()]

    def churn_pod(self, index: int) -> Obj:
        return self.pod(self.workload.churn_pod(index))


@dataclass
class Target:
    """Where an end-to-end run happens: the API server (its kubeconfig, and its process when the harness
    started it, for CPU accounting), how a scheduler is started, and the objects to create."""

    kubeconfig: Path
    start_scheduler: Callable[[], _Process]
    objects: BenchObjects
    api_pid: int | None = None
    pod_selector: str | None = None  # the harness watches only these pods (a shared cluster has others)


def run_e2e(
    workload: Workload, options: E2eOptions, catalogue: Catalogue, progress: Progress | None = None
) -> dict[str, Any]:
    """``catalogue``: the plugins of this build; the ``kubesched scheduler`` process loads the same."""
    return asyncio.run(_run(workload, options, catalogue, progress or (lambda phase, done, total: None)))


def kubesched_scheduler_command(config_path: Path, port: int, api_writer: str | None = None) -> list[str]:
    """This build's ``kubesched scheduler``; its secure port serves /readyz, which passes once the informers
    synced (scheduling starts then)."""
    extra = ["--api-writer", api_writer] if api_writer else []
    return [
        sys.executable,
        "-m",
        "kubesched.cli",
        "scheduler",
        "--config",
        str(config_path),
        "--secure-port",
        str(port),
        "--bind-address",
        "127.0.0.1",
        *extra,
    ]


async def _run(
    workload: Workload, options: E2eOptions, catalogue: Catalogue, progress: Progress
) -> dict[str, Any]:
    result = _base_result(workload, "e2e")
    result["create"] = options.create
    try:
        require_plugin(workload, catalogue)
    except WorkloadSkipped as e:
        result.update(skipped=str(e))
        return result
    work = Path(tempfile.mkdtemp(prefix="kubesched-bench-"))
    cluster_proc: subprocess.Popen[str] | None = None
    schedulers: list[_Process] = []
    try:
        progress("starting the cluster", 0, 1)
        proc, _url, kubeconfig, _lines = await asyncio.to_thread(_start_cluster, work / "cluster")
        cluster_proc = proc  # the finally clause stops it
        config_path = work / "scheduler-config.json"
        config_path.write_text(
            json.dumps(config_document(workload, kubeconfig=str(kubeconfig), qps=SCHEDULER_QPS))
        )

        def start_scheduler() -> _Process:
            port = _free_port()
            cmd = kubesched_scheduler_command(config_path, port, options.api_writer)
            started = _Process("scheduler", cmd, work / f"scheduler-{len(schedulers)}.log")
            started.port = port
            schedulers.append(started)
            return started

        target = Target(kubeconfig, start_scheduler, BenchObjects(workload), proc.pid)
        result.update(await drive(workload, options, progress, target, schedulers))
    except Exception as e:
        result.update(error=f"{type(e).__name__}: {e}")
        for s in schedulers:
            result.setdefault("schedulerLog", s.tail())
    finally:
        for s in schedulers:
            s.stop()
        if cluster_proc is not None and cluster_proc.poll() is None:
            cluster_proc.send_signal(signal.SIGTERM)
            try:
                cluster_proc.wait(15)
            except subprocess.TimeoutExpired:
                cluster_proc.kill()
                cluster_proc.wait(5)
        if not options.keep_dir:
            shutil.rmtree(work, ignore_errors=True)
    return result


async def drive(
    workload: Workload,
    options: E2eOptions,
    progress: Progress,
    target: Target,
    schedulers: list[_Process],
) -> dict[str, Any]:
    """Create the workload's objects on ``target`` and measure its scheduler; ``schedulers`` collects the
    processes started (the caller stops them)."""
    from kubesched.client.config import load_config
    from kubesched.client.rest import ApiClient

    objects = target.objects
    start_scheduler = target.start_scheduler
    client = ApiClient(load_config(str(target.kubeconfig)), max_connections=CREATE_CONCURRENCY)
    watch = _PodWatch(client, target.pod_selector)
    churn_task: asyncio.Task[None] | None = None
    churn_created: list[str] = []
    scheduler_rss = 0
    api_pid = target.api_pid
    quiet = contextlib.ExitStack()  # the steady phase's GC setting and loop-lag sampler
    lag: _LoopLag | None = None
    try:
        for ns in objects.namespaces():
            await client.create("v1", "namespaces", {"metadata": {"name": ns}})
        annotate = load_annotations(time.time()) if workload.load_annotations else None
        nodes = objects.nodes(annotate)
        progress("creating nodes", 0, len(nodes))
        await _create_all(lambda n: client.create("v1", "nodes", n), nodes)
        volumes = workload.volume_objects()
        if volumes:
            progress("creating volumes", 0, len(volumes))
            await _create_all(
                lambda o: client.create(
                    o["apiVersion"], VOLUME_PLURALS[o["kind"]], o, namespace=o["metadata"].get("namespace")
                ),
                volumes,
            )
        watch.informer.start()
        await watch.informer.has_synced(START_TIMEOUT)
        if workload.startup:
            return await _startup(client, watch, objects, nodes, options, progress, start_scheduler, api_pid)

        scheduler = start_scheduler()
        init = objects.init_pods()
        watch.on_bind = lambda n: progress("initial pods", n, len(init))
        init_bound = watch.expect_bound(pod_key(p) for p in init)
        await _create_all(
            lambda p: client.create("v1", "pods", p, namespace=p["metadata"]["namespace"]), init
        )
        timed_out = not await _wait_alive(init_bound, options.timeout, scheduler)

        measured = objects.measured_pods()
        measured_keys = {pod_key(p) for p in measured}
        done_before = len(watch.bind_times)
        measured_bound = watch.expect_bound(measured_keys)
        created: dict[str, float] = {}  # when each create returned: the pod's hand-over, for latencies
        create_returned: dict[str, float] = {}  # steady load: when each create returned (hand-over: when due)

        async def create_measured(p: Obj) -> None:
            await client.create("v1", "pods", p, namespace=p["metadata"]["namespace"])
            created[pod_key(p)] = time.perf_counter()

        create_pods = _create_all(create_measured, measured)
        start: float | None = None
        startup = startup_cpu = 0.0
        creating: asyncio.Task[None] | None = None
        begin = time.perf_counter()
        cpu_start = scheduler.cpu_seconds()
        writer_cpu_start = scheduler.children_cpu_seconds()
        api_cpu_start, harness_cpu_start = _cpu_seconds(api_pid), time.process_time()
        steady = workload.arrival_rate > 0
        if not timed_out and steady:
            # arrivals at a fixed rate while the scheduler runs (once ready); a pod's hand-over is when it is due
            create_pods.close()
            await _wait_ready(scheduler, options.timeout)
            # /readyz passes once the informers synced; the scheduler then still starts its plugins' services
            # and collects garbage once before its loop runs: start-up, not part of the steady state.
            await asyncio.sleep(STEADY_SETTLE_SECONDS)
            await _warm_connections(client, STEADY_CONCURRENCY)
            quiet.enter_context(_steady_gc())
            lag = _LoopLag(LAG_SAMPLE_SECONDS)
            quiet.callback(lag.stop)
            cpu_start = scheduler.cpu_seconds()
            writer_cpu_start = scheduler.children_cpu_seconds()
            api_cpu_start, harness_cpu_start = _cpu_seconds(api_pid), time.process_time()
            begin = start = time.perf_counter()
            creating = asyncio.create_task(
                _steady_create(client, measured, workload, start, created, watch, create_returned)
            )
        elif not timed_out and options.create == "before":
            scheduler_rss = max(scheduler_rss, scheduler.peak_rss())
            scheduler.stop()
            progress("creating measured pods", 0, len(measured))
            await create_pods
            scheduler = start_scheduler()
            begin = time.perf_counter()
            cpu_start = writer_cpu_start = 0.0
            api_cpu_start, harness_cpu_start = _cpu_seconds(api_pid), time.process_time()
            if await _wait_ready(scheduler, options.timeout):
                start = time.perf_counter()
                startup = start - begin
                startup_cpu = scheduler.cpu_seconds()  # imports, informers' lists, caches: not per pod
        elif not timed_out:
            begin = start = time.perf_counter()
            creating = asyncio.create_task(create_pods)
        else:
            create_pods.close()
        watch.on_bind = lambda n: progress("measured pods", n - done_before, len(measured))
        if workload.unschedulable_churn and not timed_out:
            churn_task = asyncio.create_task(_churn(client, objects, churn_created))
        if not timed_out:
            arrivals = len(measured) / workload.arrival_rate if steady else 0.0
            timed_out = not await _wait_alive(
                measured_bound, options.timeout + arrivals, scheduler, creating if steady else None
            )
            if creating is not None:
                if creating.done() and not creating.cancelled() and creating.exception() is not None:
                    await creating  # a create or delete failed: its pod will never be bound; say why
                if timed_out:
                    creating.cancel()
                await asyncio.gather(creating, return_exceptions=not steady or timed_out)
        end = time.perf_counter()
        quiet.close()
        api_cpu = _cpu_seconds(api_pid) - api_cpu_start
        harness_cpu = time.process_time() - harness_cpu_start
        if churn_task is not None:
            churn_task.cancel()
            await asyncio.gather(churn_task, return_exceptions=True)
        await asyncio.sleep(0.5)  # let deletions and late bindings reach the watch
        scheduler_rss = max(scheduler_rss, scheduler.peak_rss())
        cpu_seconds = scheduler.cpu_seconds() - cpu_start
        writer_cpu = scheduler.children_cpu_seconds() - writer_cpu_start
        bound_keys = {k for k in measured_keys if k in watch.bind_times}
        scheduled_events, events_lag = (
            await _scheduled_events(client, bound_keys, since=end) if scheduler.alive() else (None, 0.0)
        )
        api_rss = peak_rss(api_pid) if api_pid is not None else 0
        scheduler_alive = scheduler.alive()
    finally:
        quiet.close()
        if churn_task is not None:
            churn_task.cancel()
        await watch.informer.stop()
        await client.close()

    times = [watch.bind_times[k] for k in measured_keys if k in watch.bind_times]
    last = max(times) if times else end
    checker = PlacementChecker(nodes)
    for kind, pod in watch.changes:
        if kind == "bound":
            checker.bound(pod)
        else:
            checker.deleted(pod)
    if timed_out:
        checker.problem(
            f"timed out after {options.timeout:.0f} s waiting for pods to be bound"
            + ("" if scheduler_alive else " (the scheduler process exited)")
        )
    if scheduled_events is not None and scheduled_events < len(times):
        checker.problem(f"{len(times) - scheduled_events} bound pods have no Scheduled event")
    check = checker.finish(measured_keys, churn_created)
    out: dict[str, Any] = {
        "throughput": summarize(times, start).as_json(),
        "durationSeconds": round(last - begin, 3),
        "schedulerStartupSeconds": round(startup, 3),
        # --create before: the part of schedulerCPUSeconds spent before /readyz passed (0 otherwise: the
        # measurement starts with the scheduler running)
        "schedulerStartupCPUSeconds": round(startup_cpu, 3),
        "podsPerSecondOverall": round(len(times) / (last - begin), 1) if last > begin else 0.0,
        "peakRSSBytes": scheduler_rss,
        # the scheduler's process tree: its API writer child (--api-writer) included, and reported apart
        "schedulerCPUSeconds": round(cpu_seconds, 3),
        "writerCPUSeconds": round(writer_cpu, 3),
        "podsPerCPUSecond": round(len(times) / cpu_seconds, 1) if cpu_seconds > 0 else 0.0,
        "harnessCPUSeconds": round(harness_cpu, 3),
        "check": check.as_json(),
        "unschedulablePodsCreated": len(churn_created),
        "podsDeleted": sum(1 for kind, _ in watch.changes if kind == "deleted"),
        "scheduledEvents": scheduled_events,
        # from the end of the measurement (the last binding seen) until every Scheduled event was there: the
        # scheduler favours bindings, so most events of a burst are written after its last binding
        "scheduledEventsLagSeconds": round(events_lag, 2),
    }
    if api_pid is not None:
        # CPU the API server and this harness (its pod watch) used while the measured pods were scheduled:
        # on a two-core machine they compete with the scheduler.
        out["apiServerPeakRSSBytes"] = api_rss
        out["apiServerCPUSeconds"] = round(api_cpu, 3)
    if steady:
        out["create"] = "steady"
        bound_measured = {k: watch.bind_times[k] for k in measured_keys if k in watch.bind_times}
        out["arrivalRate"] = workload.arrival_rate
        # from when each pod was due to be created to when the harness's watch saw it bound
        out["latencyMilliseconds"] = latency_summary(bound_measured, created)
        # how late the creates themselves were (harness and API server): a loaded machine shows here first
        out["createLatencyMilliseconds"] = latency_summary(create_returned, created)
        if lag is not None:
            # how late this harness's own event loop ran (its creates and its watch wait behind it)
            out["harnessLoopLagMilliseconds"] = lag.summary()
    if not check.passed:
        out["schedulerLog"] = scheduler.tail()
    if options.keep_series and start is not None:
        out["series"] = series(
            {k: watch.bind_times[k] for k in measured_keys if k in watch.bind_times}, created, start
        )
    return out


async def _scheduled_events(
    client: Any, bound: set[str], wait: float = EVENTS_WAIT_SECONDS, since: float | None = None
) -> tuple[int | None, float]:
    """How many of the ``bound`` pods have their ``Scheduled`` event, waiting up to ``wait`` seconds for the
    scheduler's event writes to land (after the measurement: this costs the measured run nothing), and when
    the count was taken, in seconds after ``since`` (a ``perf_counter`` time; default: now). The count is None
    when events cannot be listed.

    One list, then a watch from its resourceVersion: listing tens of thousands of events again every poll
    took the API server's CPU from the very writes being waited for (40,000 pods: 15 s and still short)."""
    since = time.perf_counter() if since is None else since
    from kubesched.client.rest import ApiError

    namespaces = {key.split("/", 1)[0] for key in bound}
    # one namespace: watch just it; several (the benchmark's own): the whole collection, filtered here
    scope = next(iter(namespaces)) if len(namespaces) == 1 else None
    seen: set[str] = set()

    def count(event: dict[str, Any]) -> None:
        if event.get("reason") != "Scheduled":
            return
        ref = event.get("regarding") or {}
        key = f"{ref.get('namespace')}/{ref.get('name')}"
        if key in bound:
            seen.add(key)

    try:
        listed = await client.list_all("events.k8s.io/v1", "events", namespace=scope)
    except ApiError as e:  # e.g. no right to list events on somebody else's cluster: not counted
        log.warning("cannot count the Scheduled events: %s", e)
        return None, 0.0
    for event in listed.get("items") or ():
        count(event)
    if len(seen) < len(bound):
        rv = (listed.get("metadata") or {}).get("resourceVersion")
        try:
            async with asyncio.timeout(wait):
                async with client.watch(
                    "events.k8s.io/v1", "events", namespace=scope, resource_version=rv
                ) as stream:
                    async for event_type, event in stream:
                        if event_type == "ADDED":
                            count(event)
                            if len(seen) >= len(bound):
                                break
        except TimeoutError:
            pass
        except ApiError as e:  # e.g. 410 Gone after a compaction: what was counted stands
            log.warning("watching the Scheduled events stopped: %s", e)
    return len(seen), time.perf_counter() - since


def _cpu_seconds(pid: int | None, children_only: bool = False) -> float:
    """User + system CPU time process ``pid`` and its live children used so far (0 when it is gone): a
    scheduler command may be a wrapper (``sh -c``, a container runtime's shim) around the scheduler, and the
    scheduler may have an API writer child. ``children_only``: the children's part."""
    import psutil

    if pid is None:
        return 0.0
    try:
        proc = psutil.Process(pid)
        total = 0.0 if children_only else sum(proc.cpu_times()[:2])
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += sum(child.cpu_times()[:2])
    except psutil.Error:
        return 0.0
    return float(total)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_ready(proc: _Process, timeout: float) -> bool:
    """Poll the scheduler's /readyz until it passes (its informers synced). A scheduler started without a
    known port (a command with no ``{port}``) counts as ready once started."""
    import aiohttp

    if not proc.port:
        return proc.alive()
    deadline = time.monotonic() + timeout
    url = f"https://127.0.0.1:{proc.port}/readyz"
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline and proc.alive():
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with session.get(url, ssl=False) as resp:
                    if resp.status == 200:
                        return True
            await asyncio.sleep(READY_POLL)
    return False


async def _wait_alive(
    event: asyncio.Event, timeout: float, proc: _Process, feeder: asyncio.Task[Any] | None = None
) -> bool:
    """Wait for ``event``; False on timeout, when ``proc`` exits first, or when ``feeder`` (the task creating
    what ``event`` waits for) failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), 1.0)
        if event.is_set():
            return True
        if not proc.alive():
            return False
        if feeder is not None and feeder.done() and not feeder.cancelled() and feeder.exception() is not None:
            return False
    return event.is_set()


async def _warm_connections(client: Any, count: int) -> None:
    """Open ``count`` kept-alive connections in both of the client's pools (the POST path the creates take and
    the one the deletes take) before a steady run, so that the measured pods do not pay for TLS handshakes on
    both sides. A SelfSubjectReview stores nothing; any answer, even a refusal, leaves the connection open."""
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    await asyncio.gather(
        *(client.create("authentication.k8s.io/v1", "selfsubjectreviews", review) for _ in range(count)),
        return_exceptions=True,
    )
    await asyncio.gather(
        *(client.get("v1", "namespaces", "default") for _ in range(count)), return_exceptions=True
    )


@contextlib.contextmanager
def _steady_gc() -> Iterator[None]:
    """No full garbage collections in this harness while a steady run is measured.

    By then the harness holds every node and pod it created and watched; a full collection walks them all
    (measured: pauses of 65-510 ms on a loaded two-core machine), and every create due meanwhile is late and
    every binding is seen late by that much. What exists is frozen out of the collector's reach and the
    third generation's threshold is lifted; young collections still free short-lived cycles. Pods are trees
    (no cycles), so reference counting frees them; the few cycles that outlive the young generations wait
    for the collection on the way out."""
    gc.collect()
    gc.freeze()
    threshold = gc.get_threshold()
    gc.set_threshold(threshold[0], threshold[1], 1_000_000_000)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


class _LoopLag:
    """Samples how late the event loop wakes a task that sleeps ``period``: the lag every callback of the
    harness (a due create, a watch event) saw at that moment."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.lags: list[float] = []
        self._task = asyncio.get_running_loop().create_task(self._sample(), name="loop lag")

    async def _sample(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.period)
            self.lags.append(max(0.0, time.perf_counter() - before - self.period))

    def stop(self) -> None:
        self._task.cancel()

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.lags)
        if not ordered:
            return {"count": 0}
        return {
            "count": len(ordered),
            "p50": round(percentile(ordered, 50) * 1e3, 2),
            "p99": round(percentile(ordered, 99) * 1e3, 2),
            "max": round(ordered[-1] * 1e3, 2),
        }


async def _steady_create(
    client: Any,
    pods: list[Obj],
    workload: Workload,
    start: float,
    handed: dict[str, float],
    watch: _PodWatch,
    created: dict[str, float],
) -> None:
    """Create ``pods`` at ``workload.arrival_rate`` per second from ``start``, each at its due time whatever
    the earlier creates are doing (up to STEADY_CONCURRENCY creates and deletes at once); once ``live_pods`` exist, delete the
    oldest bound one (grace period 0) as each new one arrives."""
    rate, live = workload.arrival_rate, workload.live_pods
    limit = asyncio.Semaphore(STEADY_CONCURRENCY)
    pending: set[asyncio.Task[Any]] = set()
    oldest: collections.deque[tuple[str, str]] = collections.deque()

    async def create(pod: Obj) -> None:
        async with limit:
            await client.create("v1", "pods", pod, namespace=pod["metadata"]["namespace"])
        created[pod_key(pod)] = time.perf_counter()

    async def delete(namespace: str, name: str) -> None:
        async with limit:
            await client.delete("v1", "pods", name, namespace=namespace, grace_period_seconds=0)

    def spawn(coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        pending.add(task)
        task.add_done_callback(pending.discard)

    try:
        for i, pod in enumerate(pods):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            meta = pod["metadata"]
            handed[f"{meta['namespace']}/{meta['name']}"] = time.perf_counter()
            spawn(create(pod))
            if live is None:
                continue
            oldest.append((meta["namespace"], meta["name"]))
            while len(oldest) > live and "/".join(oldest[0]) in watch.bind_times:
                spawn(delete(*oldest.popleft()))
        while pending:
            await asyncio.gather(*list(pending))
    finally:
        for task in pending:
            task.cancel()


async def _startup(
    client: Any,
    watch: _PodWatch,
    objects: BenchObjects,
    nodes: list[Obj],
    options: E2eOptions,
    progress: Progress,
    start_scheduler: Callable[[], _Process],
    api_pid: int | None,
) -> dict[str, Any]:
    """StartupLarge: every initial pod created already bound, the measured pods pending, then a scheduler
    process started: the time from its start to its first binding (its informers list everything, through
    WatchList, before it schedules) and its peak RSS by then."""
    init = objects.init_pods()
    watch.on_bind = lambda n: progress("creating bound pods", n, len(init))
    init_seen = watch.expect_bound(pod_key(p) for p in init)
    await _create_all(lambda p: client.create("v1", "pods", p, namespace=p["metadata"]["namespace"]), init)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(init_seen.wait(), options.timeout)
    measured = objects.measured_pods()
    measured_keys = {pod_key(p) for p in measured}
    await _create_all(
        lambda p: client.create("v1", "pods", p, namespace=p["metadata"]["namespace"]), measured
    )
    bound = watch.expect_bound(measured_keys)
    watch.on_bind = None
    progress("scheduler start-up", 0, 1)
    begin = time.perf_counter()
    scheduler = start_scheduler()
    ok = await _wait_alive(bound, options.timeout, scheduler)
    rss = scheduler.peak_rss()
    cpu = scheduler.cpu_seconds()
    times = sorted(watch.bind_times[k] for k in measured_keys if k in watch.bind_times)
    checker = PlacementChecker(nodes)
    for kind, pod in watch.changes:
        if kind == "bound":
            checker.bound(pod)
        else:
            checker.deleted(pod)
    if not ok:
        checker.problem(
            f"timed out after {options.timeout:.0f} s waiting for the first binding"
            + ("" if scheduler.alive() else " (the scheduler process exited)")
        )
    check = checker.finish(measured_keys)
    first = times[0] - begin if times else 0.0
    out: dict[str, Any] = {
        "throughput": summarize(times, begin).as_json(),
        "durationSeconds": round((times[-1] if times else time.perf_counter()) - begin, 3),
        "startupToFirstBindingSeconds": round(first, 3),
        "existingPods": len(init),
        "peakRSSBytes": rss,
        "schedulerCPUSeconds": round(cpu, 3),
        "check": check.as_json(),
    }
    if api_pid is not None:
        out["apiServerPeakRSSBytes"] = peak_rss(api_pid)
    if not check.passed:
        out["schedulerLog"] = scheduler.tail()
    return out


async def _churn(client: Any, objects: BenchObjects, created: list[str]) -> None:
    """A pod that fits nowhere every CHURN_INTERVAL seconds (scheduler_perf's ``churn`` op)."""
    start = time.perf_counter()
    while True:
        pod = objects.churn_pod(len(created))
        await client.create("v1", "pods", pod, namespace=pod["metadata"]["namespace"])
        created.append(pod_key(pod))
        await asyncio.sleep(max(0.0, start + len(created) * CHURN_INTERVAL - time.perf_counter()))
