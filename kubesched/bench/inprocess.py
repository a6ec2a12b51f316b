"""``--mode inprocess``: the real ``Scheduler`` (queue, cache, framework, assume, binding cycle) with an
in-memory API in place of the API server and the informers.

``InMemoryApi`` is the scheduler's client: ``pods/binding``, status patches and deletions change its pods and
are fed back into the scheduler's informer handlers on the next loop iteration, as a watch event would be;
events are counted and dropped. The harness hands nodes and new pods to the same handlers, as the informers'
initial list and watch would. So the only thing missing is the network.

Pods that arrive while the measured pods are scheduled (Unschedulable's churn) are injected between two pops
of the scheduling queue, by wall-clock time: the scheduling loop does not give the event loop a turn while pods
are waiting, so a timer would only fire once the queue is empty.
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesched.apimachinery.timefmt import now_rfc3339
from kubesched.bench.check import PlacementChecker, pod_key
from kubesched.bench.measure import latency_summary, peak_rss, series, summarize
from kubesched.bench.profiles import WorkloadSkipped, inprocess_config
from kubesched.bench.workloads import CHURN_INTERVAL, Workload, load_annotations
from kubesched.client.rest import ApiError
from kubesched.scheduler.framework.catalogue import Catalogue
from kubesched.scheduler.volumes.listers import static_stores

Obj = dict[str, Any]
Progress = Callable[[str, int, int], None]
PodHandler = Callable[..., None]

log = logging.getLogger("kubesched.bench")


def _not_found(kind: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{kind} "{name}" not found')


class _StaticInformer:
    """Stands in for an informer the plugins list from (namespaces)."""

    def __init__(self, objects: list[Obj]) -> None:
        self.store = {(o.get("metadata") or {}).get("name") or "": o for o in objects}

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        return self.store.get(name)

    def list(self) -> list[Obj]:
        return list(self.store.values())

    async def stop(self) -> None:
        return None


class InMemoryApi:
    """The part of the API the scheduler calls, over an in-memory set of pods. Keys are ``namespace/name``."""

    def __init__(self) -> None:
        self.pods: dict[str, Obj] = {}
        # ("bound" | "deleted", pod) in the order the changes happened, for the placement check.
        self.changes: list[tuple[str, Obj]] = []
        self.bind_times: dict[str, float] = {}
        self.create_times: dict[str, float] = {}  # when each pod was handed to the scheduler (latency plots)
        self.rejected_binds: list[str] = []
        self.events_written = 0
        self._rv = itertools.count(1)
        self._on_add: PodHandler | None = None
        self._on_update: PodHandler | None = None
        self._on_delete: PodHandler | None = None
        self._waiting: set[str] = set()
        self._all_bound = asyncio.Event()
        self.on_bind: Callable[[int], None] | None = None

    def attach(self, on_add: PodHandler, on_update: PodHandler, on_delete: PodHandler) -> None:
        self._on_add, self._on_update, self._on_delete = on_add, on_update, on_delete

    # --- the harness side -----------------------------------------------------------------------------------

    @staticmethod
    def prepare(pods: list[Obj]) -> None:
        """Give pods their uid and creation time ahead of ``create_pod``: in a real cluster the API server does
        this in its own process, so it should not take the scheduler's CPU inside the measured window."""
        now = now_rfc3339()
        for pod in pods:
            meta = pod["metadata"]
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now)

    def create_pod(self, pod: Obj) -> Obj:
        """Store a new pod and deliver it to the scheduler at once (an informer Add)."""
        meta = pod["metadata"]
        if "uid" not in meta:
            meta["uid"] = str(uuid.uuid4())
        meta["resourceVersion"] = str(next(self._rv))
        meta.setdefault("creationTimestamp", now_rfc3339())
        pod.setdefault("status", {"phase": "Pending"})
        key = pod_key(pod)
        self.pods[key] = pod
        self.create_times[key] = time.perf_counter()
        assert self._on_add is not None
        self._on_add(pod)
        return pod

    def expect_bound(self, keys: set[str]) -> asyncio.Event:
        """An event set once every pod in ``keys`` is bound."""
        self._waiting = set(keys) - set(self.bind_times)
        self._all_bound = asyncio.Event()
        if not self._waiting:
            self._all_bound.set()
        return self._all_bound

    # --- what the scheduler calls ---------------------------------------------------------------------------

    async def create_subresource(
        self,
        api_version: str,
        plural: str,
        name: str,
        subresource: str,
        body: Obj,
        *,
        namespace: str | None = None,
    ) -> Obj:
        if plural != "pods" or subresource != "binding":
            raise NotImplementedError(f"in-memory API: POST {plural}/{subresource}")
        key = f"{namespace}/{name}"
        old = self.pods.get(key)
        if old is None:
            raise _not_found("pods", name)
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != old["metadata"].get("uid"):
            raise ApiError(
                409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": uid mismatch'
            )
        bound_to = old["spec"].get("nodeName")
        if bound_to:
            self.rejected_binds.append(key)
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} '
                f'is already assigned to node "{bound_to}"',
            )
        target = (body.get("target") or {}).get("name") or ""
        new = {
            **old,
            "metadata": {**old["metadata"], "resourceVersion": str(next(self._rv))},
            "spec": {**old["spec"], "nodeName": target},
        }
        self.pods[key] = new
        self.changes.append(("bound", new))
        self.bind_times[key] = time.perf_counter()
        if key in self._waiting:
            self._waiting.discard(key)
            if not self._waiting:
                self._all_bound.set()
        if self.on_bind is not None:
            self.on_bind(len(self.bind_times))
        self._deliver(self._on_update, old, new)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    async def patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: str = "merge",
        **_: Any,
    ) -> Obj:
        if plural == "events":
            self.events_written += 1
            return {}
        if plural != "pods" or subresource != "status":
            raise NotImplementedError(f"in-memory API: PATCH {plural}/{subresource}")
        key = f"{namespace}/{name}"
        old = self.pods.get(key)
        if old is None:
            raise _not_found("pods", name)
        status = dict(old.get("status") or {})
        for field, value in (patch.get("status") or {}).items():
            if value is None:
                status.pop(field, None)
            elif field == "conditions":
                # Strategic merge: conditions are keyed by type.
                merged = {c.get("type"): c for c in status.get("conditions") or ()}
                merged.update({c.get("type"): c for c in value})
                status["conditions"] = list(merged.values())
            else:
                status[field] = value
        new = {
            **old,
            "metadata": {**old["metadata"], "resourceVersion": str(next(self._rv))},
            "status": status,
        }
        self.pods[key] = new
        self._deliver(self._on_update, old, new)
        return new

    async def delete(
        self,
        api_version: str,
        plural: str,
        name: str,
        *,
        namespace: str | None = None,
        preconditions: dict[str, str] | None = None,
        **_: Any,
    ) -> Obj:
        if plural != "pods":
            raise NotImplementedError(f"in-memory API: DELETE {plural}")
        key = f"{namespace}/{name}"
        old = self.pods.get(key)
        if old is None:
            raise _not_found("pods", name)
        if preconditions and preconditions.get("uid") not in (None, old["metadata"].get("uid")):
            raise ApiError(
                409, "Conflict", f"Precondition failed: UID in precondition: {preconditions['uid']}"
            )
        # Benchmark pods are deleted at once (grace period 0 or no kubelet to wait for).
        del self.pods[key]
        self.changes.append(("deleted", old))
        self._deliver(self._on_delete, old)
        return old

    async def get(self, api_version: str, plural: str, name: str, *, namespace: str | None = None) -> Obj:
        pod = self.pods.get(f"{namespace}/{name}") if plural == "pods" else None
        if pod is None:
            raise _not_found(plural, name)
        return pod

    async def create(
        self, api_version: str, plural: str, body: Obj, *, namespace: str | None = None, **_: Any
    ) -> Obj:
        if plural != "events":
            raise NotImplementedError(f"in-memory API: POST {plural}")
        self.events_written += 1
        return body

    async def close(self) -> None:
        return None

    def _deliver(self, handler: PodHandler | None, *args: Obj) -> None:
        # A watch event reaches the informer's handlers after the call that caused it returned.
        if handler is not None:
            asyncio.get_running_loop().call_soon(handler, *args)


@dataclass
class RunOptions:
    seed: int | None = 1
    timeout: float = 900.0
    profile_path: str | None = None
    keep_series: bool = False  # add the per-pod bind offsets and latencies (``series``) for --plot


class _ChurnInjector:
    """Adds a pod that fits nowhere every CHURN_INTERVAL seconds, checked before each pop of the queue."""

    def __init__(self, workload: Workload, api: InMemoryApi, queue: Any) -> None:
        self.workload = workload
        self.api = api
        self.queue = queue
        self.created: list[str] = []
        self._pop = queue.pop
        self._start = 0.0
        self._active = False

    def start(self) -> None:
        self._start = time.perf_counter()
        self._active = True
        self.queue.pop = self._pop_with_churn

    def stop(self) -> None:
        self._active = False

    def _inject_due(self) -> None:
        due = int((time.perf_counter() - self._start) / CHURN_INTERVAL) + 1
        while self._active and len(self.created) < due:
            pod = self.api.create_pod(self.workload.churn_pod(len(self.created)))
            self.created.append(pod_key(pod))

    async def _pop_with_churn(self) -> Any:
        self._inject_due()
        return await self._pop()


def run_inprocess(
    workload: Workload, options: RunOptions, catalogue: Catalogue, progress: Progress | None = None
) -> dict[str, Any]:
    """Run one workload in this process with the plugins of ``catalogue``; returns the result object (see
    ``cli``)."""
    return asyncio.run(_run(workload, options, catalogue, progress or (lambda phase, done, total: None)))


async def _run(
    workload: Workload, options: RunOptions, catalogue: Catalogue, progress: Progress
) -> dict[str, Any]:
    from kubesched.scheduler.scheduler import Scheduler

    result = _base_result(workload, "inprocess")
    if workload.startup:
        result.update(
            skipped=f"{workload.name} measures a scheduler process's start-up: run it with --mode e2e"
        )
        return result
    try:
        config = inprocess_config(workload, catalogue)
    except WorkloadSkipped as e:
        result.update(skipped=str(e))
        return result

    api = InMemoryApi()
    sched = Scheduler(config, api, catalogue=catalogue, seed=options.seed, identity="bench")  # type: ignore[arg-type]
    api.attach(sched._pod_added, sched._pod_updated, sched._pod_deleted)
    namespaces = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
        }
        for ns in workload.namespaces
    ]
    sched.informers["namespaces"] = _StaticInformer(namespaces)  # type: ignore[assignment]
    if workload.volumes:
        # What the volume informers would hold: the PVs, PVCs and CSINodes of the workload.
        sched.volume_stores.update(static_stores(workload.volume_objects()))

    annotate = load_annotations(time.time()) if workload.load_annotations else None
    nodes = workload.node_objects(annotate)
    progress("nodes", 0, len(nodes))
    for node in nodes:
        sched._node_added(node)
    run_task = asyncio.create_task(sched.run())
    churn: _ChurnInjector | None = None
    profiler: cProfile.Profile | None = None
    timed_out = False
    try:
        init = workload.init_pod_objects()
        init_keys = {pod_key(p) for p in init}
        api.on_bind = lambda n: progress("initial pods", n, len(init))
        init_bound = api.expect_bound(init_keys)
        for pod in init:
            api.create_pod(pod)
        timed_out = not await _wait(init_bound, options.timeout)

        measured = workload.measured_pod_objects()
        api.prepare(measured)
        measured_keys = {pod_key(p) for p in measured}
        done_before = len(api.bind_times)
        api.on_bind = lambda n: progress("measured pods", n - done_before, len(measured))
        measured_bound = api.expect_bound(measured_keys)
        if workload.unschedulable_churn:
            churn = _ChurnInjector(workload, api, sched.queue)
        if options.profile_path:
            profiler = cProfile.Profile()
            profiler.enable()
        start = time.perf_counter()
        cpu_start = time.process_time()
        if churn is not None:
            churn.start()
        feeder: asyncio.Task[None] | None = None
        if not timed_out and workload.arrival_rate:
            feeder = asyncio.create_task(_steady_feed(api, measured, workload, start))
            arrivals = len(measured) / workload.arrival_rate
            timed_out = not await _wait(measured_bound, options.timeout + arrivals)
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
        elif not timed_out:
            for pod in measured:
                api.create_pod(pod)
            timed_out = not await _wait(measured_bound, options.timeout)
        end = time.perf_counter()
        cpu_seconds = time.process_time() - cpu_start
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(str(options.profile_path))  # set: the profiler runs only with a path
        if churn is not None:
            churn.stop()
        await asyncio.sleep(0)  # let the last informer updates reach the scheduler
    finally:
        await sched.stop()
        run_task.cancel()
        await asyncio.gather(run_task, return_exceptions=True)

    times = [api.bind_times[k] for k in measured_keys if k in api.bind_times]
    last = max(times) if times else end
    checker = PlacementChecker(nodes)
    for kind, pod in api.changes:
        if kind == "bound":
            checker.bound(pod)
        else:
            checker.deleted(pod)
    for key in api.rejected_binds:
        checker.problem(f"the scheduler tried to bind {key}, which was already bound")
    if timed_out:
        checker.problem(f"timed out after {options.timeout:.0f} s waiting for pods to be bound")
    check = checker.finish(measured_keys, churn.created if churn is not None else ())
    result.update(
        throughput=summarize(times, start).as_json(),
        durationSeconds=round(last - start, 3),
        podsPerSecondOverall=round(len(times) / (last - start), 1) if last > start else 0.0,
        peakRSSBytes=peak_rss(),
        cpuSeconds=round(cpu_seconds, 3),
        podsPerCPUSecond=round(len(times) / cpu_seconds, 1) if cpu_seconds > 0 else 0.0,
        check=check.as_json(),
        unschedulablePodsCreated=len(churn.created) if churn is not None else 0,
        podsDeleted=sum(1 for kind, _ in api.changes if kind == "deleted"),
        eventsWritten=api.events_written,
    )
    if workload.arrival_rate:
        bound_measured = {k: api.bind_times[k] for k in measured_keys if k in api.bind_times}
        result.update(
            arrivalRate=workload.arrival_rate,
            latencyMilliseconds=latency_summary(bound_measured, api.create_times),
        )
    if options.keep_series:
        bound = {k: api.bind_times[k] for k in measured_keys if k in api.bind_times}
        result["series"] = series(bound, api.create_times, start)
    return result


async def _steady_feed(api: InMemoryApi, pods: list[Obj], workload: Workload, start: float) -> None:
    """Hand ``pods`` over at ``workload.arrival_rate`` per second from ``start`` (late ones at once); once
    ``live_pods`` measured pods exist, delete the oldest bound one as each new one arrives."""
    rate, live = workload.arrival_rate, workload.live_pods
    oldest: collections.deque[str] = collections.deque()
    for i, pod in enumerate(pods):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        api.create_pod(pod)
        if live is None:
            continue
        oldest.append(pod_key(pod))
        while len(oldest) > live and oldest[0] in api.bind_times:
            namespace, name = oldest.popleft().split("/", 1)
            await api.delete("v1", "pods", name, namespace=namespace)


async def _wait(event: asyncio.Event, timeout: float) -> bool:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        return False
    return True


def _base_result(workload: Workload, mode: str) -> dict[str, Any]:
    return {
        "workload": workload.name,
        "mode": mode,
        "nodes": workload.nodes,
        "initPods": workload.init_pods,
        "measuredPods": workload.measured_pods,
    }
