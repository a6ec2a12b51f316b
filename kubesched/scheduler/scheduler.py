"""The scheduling loop: informers → cache and queue → framework → assume → background binding → events.

As kube-scheduler's ``scheduler.go``/``schedule_one.go``/``eventhandlers.go``: one pod at a time through the
scheduling cycle on the event loop (the cycle never awaits, so it sees a consistent cache), then the binding cycle
runs as a background task so the next pod does not wait for the API round trip. A pod is *assumed* on its node
before binding, so the next cycles already count it; a failed binding forgets it and puts the pod back in the queue.
A 409 from ``pods/binding`` means someone else bound it: the pod is dropped, never bound twice.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import gc
import logging
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from kubesched.apimachinery.timefmt import now_rfc3339
from kubesched.client.events import EventRecorder
from kubesched.client.informer import Informer
from kubesched.client.rest import ApiClient, ApiError
from kubesched.scheduler.cache import Cache
from kubesched.scheduler.config import SchedulerConfiguration
from kubesched.scheduler.cycle import CycleFailure, scheduling_cycle
from kubesched.scheduler.decisions import DecisionLog
from kubesched.scheduler.dra.informers import dra_informers
from kubesched.scheduler.dra.objects import DraObjects
from kubesched.scheduler.framework.catalogue import Catalogue
from kubesched.scheduler.framework.handle import Handle
from kubesched.scheduler.framework.interface import AssignedPodHints, ClusterEvent, Code, CycleState, Status
from kubesched.scheduler.framework.runtime import Framework
from kubesched.scheduler.metrics import SchedulerMetrics
from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo
from kubesched.scheduler.queue import (
    EVENT_ASSIGNED_POD_DELETE,
    Nominator,
    SchedulingQueue,
)
from kubesched.scheduler.volumes.informers import VOLUME_PLUGINS, volume_informers
from kubesched.scheduler.volumes.listers import Store, StoreVolumes

log = logging.getLogger("kubesched.scheduler")

# Cycles between forced yields to the event loop: often enough that bindings and events keep flowing (32 cycles
# are ~10 ms), rarely enough that they run in batches, which keeps the loop's overhead small and the CPU caches
# warm (measured: 8 -> 32 gave +5% on SchedulingBasic).
YIELD_EVERY = 32
# Bindings in flight at most before the scheduling loop waits for some to finish (down to half). Without a bound
# the loop, faster than the API server, ran thousands of pods ahead of their bindings, which then queued for a
# connection and landed in bursts; 256 keeps every connection of the client's pool busy (~0.1 s of bindings).
MAX_BINDINGS_IN_FLIGHT = 256
GC_YOUNG_THRESHOLD = 50_000

POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
# Reasons of the PodScheduled=False condition (v1.PodReasonUnschedulable, v1.PodReasonSchedulerError).
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


class InformerNamespaces:
    """Namespaces from the informer, for plugins (``Handle.namespaces``: InterPodAffinity's namespace selectors)."""

    def __init__(self, informers: dict[str, Informer]) -> None:
        self._informers = informers

    def get(self, name: str) -> dict[str, Any] | None:
        inf = self._informers.get("namespaces")
        return inf.get(name) if inf is not None else None

    def list(self) -> builtins.list[dict[str, Any]]:
        inf = self._informers.get("namespaces")
        return inf.list() if inf is not None else []


class InformerWorkloads:
    """Services, owners and PDBs from the informers (``Handle.workloads`` for default spreading, ``Handle.pdbs``
    for preemption)."""

    def __init__(self, informers: dict[str, Informer]) -> None:
        self._informers = informers

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        inf = self._informers.get(kind.lower() + "s")
        return inf.get(name, namespace) if inf is not None else None

    def services(self, namespace: str) -> list[dict[str, Any]]:
        inf = self._informers.get("services")
        if inf is None or not getattr(inf, "store", True):
            return []  # asked once per pod by default spreading: no list to build when there are none
        return [s for s in inf.list() if (s.get("metadata") or {}).get("namespace") == namespace]

    def pdbs(self) -> list[dict[str, Any]]:
        inf = self._informers.get("poddisruptionbudgets")
        return inf.list() if inf is not None else []


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfiguration,
        client: ApiClient | None,
        *,
        catalogue: Catalogue | None = None,
        metrics: SchedulerMetrics | None = None,
        seed: int | None = None,
        identity: str = "",
        on_scheduled: Callable[[PodInfo, str], None] | None = None,
        explain: bool = False,
    ) -> None:
        self.config = config
        self.client = client
        self.metrics = metrics or SchedulerMetrics()
        self.cache = Cache()
        self.identity = identity or socket.gethostname()
        self.on_scheduled = on_scheduled
        self.decisions: DecisionLog | None = DecisionLog() if explain else None
        self.informers: dict[str, Informer] = {}
        # The storage informers (or static stores, in-process benchmarks), filled when volume plugins run.
        self.volume_stores: dict[str, Store] = {}
        workloads = InformerWorkloads(self.informers)
        self._bind_tasks: set[asyncio.Task[None]] = set()
        # Awaited by the loop while MAX_BINDINGS_IN_FLIGHT bindings run; set once they drop to half that.
        self._bind_room: asyncio.Future[None] | None = None
        # PodScheduled=False status writes in flight, by pod uid; a binding waits for its pod's write to land.
        self._condition_writes: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        self.recorders: dict[str, EventRecorder] = {}
        if catalogue is None:
            from kubesched.scheduler.plugins import in_tree_catalogue

            catalogue = in_tree_catalogue()
        self.frameworks: dict[str, Framework] = {}
        # The nominator comes first: the queue and every plugin's handle share it from the start.
        nominator = Nominator()
        handle = Handle(
            cache=self.cache,
            client=client,
            nominator=nominator,
            parallelism=config.parallelism,
            metrics=self.metrics,
            activate=self._activate,
            seed=seed,
            namespaces=InformerNamespaces(self.informers),
            workloads=workloads,
            pdbs=workloads,
            dra=DraObjects(),
            volumes=StoreVolumes(self.volume_stores),
        )
        self.dra = handle.dra
        for profile in config.profiles:
            recorder = None
            if client is not None:
                # As client-go's events recorder: reportingInstance is "<controller>-<hostname>".
                recorder = EventRecorder(
                    client, profile.scheduler_name, f"{profile.scheduler_name}-{socket.gethostname()}"
                )
                self.recorders[profile.scheduler_name] = recorder
            self.frameworks[profile.scheduler_name] = Framework.from_profile(
                profile,
                catalogue,
                dataclasses.replace(handle, recorder=recorder),
                percentage_of_nodes_to_score=config.percentage_of_nodes_to_score or None,
                seed=seed,
            )
        # One queue for all profiles, sorted by the first profile's QueueSort (validation makes them equal).
        first = next(iter(self.frameworks.values()))
        plugin_events: dict[str, list[ClusterEvent]] = {}
        hints: dict[str, AssignedPodHints] = {}
        for fw in self.frameworks.values():
            plugin_events.update(fw.events_to_register())
            for name, plugin in fw.plugins.items():
                if name not in hints and isinstance(plugin, AssignedPodHints):
                    hints[name] = plugin
        self.queue = SchedulingQueue(
            first.queue_sort_key,
            pre_enqueue=self._pre_enqueue,
            plugin_events=plugin_events,
            initial_backoff=float(config.pod_initial_backoff_seconds),
            max_backoff=float(config.pod_max_backoff_seconds),
            metrics=self.metrics,
            nominator=nominator,
            assigned_pod_hints=tuple(hints.values()),
        )
        self.metrics.watch_pending(self.queue.pending_counts)
        self.metrics.watch_cache_size(self.cache.stats)

    def _activate(self, uids: Iterable[str]) -> None:
        # Handed to plugins before the queue exists: preemption requeues a pod whose preemption failed.
        self.queue.activate(uids)

    # -- informers ----------------------------------------------------------------------------------------

    def _pre_enqueue(self, pi: PodInfo) -> Status:
        fw = self.frameworks.get(pi.scheduler_name)
        return fw.run_pre_enqueue(pi) if fw is not None else Status.success()

    def _responsible(self, pi: PodInfo) -> bool:
        return pi.scheduler_name in self.frameworks

    def start_informers(self) -> None:
        assert self.client is not None
        c = self.client
        nodes = Informer(c, "v1", "nodes")
        nodes.add_handler(self._node_added, self._node_updated, self._node_deleted)
        pods = Informer(c, "v1", "pods", field_selector=POD_FIELD_SELECTOR)
        pods.add_handler(self._pod_added, self._pod_updated, self._pod_deleted)
        self.informers["nodes"] = nodes
        self.informers["pods"] = pods
        for api_version, plural in (
            ("v1", "namespaces"),
            ("v1", "services"),
            ("v1", "replicationcontrollers"),
            ("apps/v1", "replicasets"),
            ("apps/v1", "statefulsets"),
            ("policy/v1", "poddisruptionbudgets"),
        ):
            inf = Informer(c, api_version, plural)
            if plural == "namespaces":
                inf.add_handler(
                    lambda o: self.queue.move_all_to_active_or_backoff(ClusterEvent("Namespace", "Add")),
                    lambda o, n: self.queue.move_all_to_active_or_backoff(
                        ClusterEvent("Namespace", "Update")
                    ),
                    None,
                )
            self.informers[plural] = inf
        if self.dra is not None and any("DynamicResources" in fw.plugins for fw in self.frameworks.values()):
            self.informers.update(dra_informers(c, self.dra, self.queue.move_all_to_active_or_backoff))
        volumes = next(iter(self.frameworks.values())).handle.volumes
        if isinstance(volumes, StoreVolumes) and any(
            name in fw.plugins for fw in self.frameworks.values() for name in VOLUME_PLUGINS
        ):
            move = self.queue.move_all_to_active_or_backoff
            self.informers.update(volume_informers(c, volumes, self.volume_stores, move))
        for inf in self.informers.values():
            inf.start()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        results = await asyncio.gather(*(inf.has_synced(timeout) for inf in self.informers.values()))
        return all(results)

    def _node_added(self, node: dict[str, Any]) -> None:
        self.cache.on_node_add(node)
        self.queue.move_all_to_active_or_backoff(ClusterEvent("Node", "Add"))

    def _node_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        changes = self.cache.on_node_update(old, new)
        for action in sorted(changes):
            self.queue.move_all_to_active_or_backoff(ClusterEvent("Node", action))

    def _node_deleted(self, node: dict[str, Any]) -> None:
        self.cache.on_node_delete(node)

    def _pod_added(self, pod: dict[str, Any]) -> None:
        if (pod.get("spec") or {}).get("nodeName"):
            pi = self.cache.on_pod_add(pod)
            if pi is not None:
                self.queue.nominator.delete_nominated(pi.uid)
                self.queue.assigned_pod_added(pi)
            return
        pi = self.cache.pod_info(pod)
        if self._responsible(pi) and pi.deletion_ts is None:
            self.queue.add(pi)

    def _pod_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if (new.get("spec") or {}).get("nodeName"):
            old_bound = bool((old.get("spec") or {}).get("nodeName"))
            pi = self.cache.on_pod_update(old, new)
            if not old_bound:
                # Bound (by us or by someone else): it leaves the queue for good.
                self.queue.delete(self.cache.pod_info(new).uid)
            if pi is not None:
                self.queue.nominator.delete_nominated(pi.uid)
                if old_bound:
                    self.queue.assigned_pod_updated(self.cache.pod_info(old), pi)
                else:
                    self.queue.assigned_pod_added(pi)
            return
        new_pi = self.cache.pod_info(new)
        if self.cache.is_assumed(new_pi.uid) or not self._responsible(new_pi):
            return
        if new_pi.deletion_ts is not None:
            self.queue.delete(new_pi.uid)
            return
        self.queue.update(self.cache.pod_info(old), new_pi)

    def _pod_deleted(self, pod: dict[str, Any]) -> None:
        obj = pod  # a DeletedFinalStateUnknown is a dict of the last state seen, so this covers both
        if (obj.get("spec") or {}).get("nodeName"):
            pi = self.cache.on_pod_delete(obj)
            if pi is not None:
                self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE)
            return
        uid = (obj.get("metadata") or {}).get("uid") or ""
        self.queue.delete(uid)
        self.queue.nominator.delete_nominated(uid)
        if self.cache.is_assumed(uid):
            self.cache.forget(uid)

    # -- the loop -----------------------------------------------------------------------------------------

    async def run(self, leading: asyncio.Event | None = None) -> None:
        """Schedule until stopped (``leading`` cleared means stop at once)."""
        self.queue.start()
        # Informer stores are now large and long-lived: keep the collector from rescanning them every cycle.
        gc.collect()
        gc.freeze()
        # A cycle allocates a few hundred objects, so the default young-generation threshold (700) ran the
        # collector every couple of pods, promoting short-lived cycle state into older generations that are
        # then rescanned. Real garbage cycles are rare here (pod dicts are trees): collect them less often.
        # Measured: +7% pods/s on SchedulingBasic, RSS unchanged.
        gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 20)
        cycles = 0
        while not self._stopping:
            if leading is not None and not leading.is_set():
                break
            qpi = await self.queue.pop()
            if qpi is None:
                break
            if leading is not None and not leading.is_set():
                break
            try:
                await self.schedule_one(qpi)
            except Exception:
                log.exception("scheduling %s failed unexpectedly", qpi.pod_info.key)
                self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
            # Let bindings, informer updates and event writes run between cycles: with a full queue neither
            # pop() nor a successful cycle awaits anything, and they would otherwise wait for the queue to drain.
            cycles += 1
            if len(self._bind_tasks) >= MAX_BINDINGS_IN_FLIGHT:
                self._bind_room = asyncio.get_running_loop().create_future()
                await self._bind_room
            elif cycles % YIELD_EVERY == 0:
                await asyncio.sleep(0)

    async def stop(self) -> None:
        self._stopping = True
        self.queue.close()
        for t in [*self._bind_tasks, *self._condition_writes.values()]:
            t.cancel()
        for inf in self.informers.values():
            await inf.stop()
        for r in self.recorders.values():
            await r.close()

    async def schedule_one(self, qpi: QueuedPodInfo) -> None:
        pi = qpi.pod_info
        fw = self.frameworks.get(pi.scheduler_name)
        if fw is None or self._skip(pi):
            self.queue.done(pi.uid)
            return
        start = time.perf_counter()
        state = CycleState()
        result, outcome = await scheduling_cycle(
            fw,
            state,
            pi,
            self.cache,
            self.queue.nominator,
            start=start,
            record_scores=self.decisions is not None,
            cycle=self.queue.scheduling_cycle,
        )
        if self.decisions is not None:
            self.decisions.record(
                pi.key,
                result.node,
                profile=fw.scheduler_name,
                message=result.status.message(),
                filtered=result.filtered,
                scores=result.scores,
                total_scores=result.total_scores,
            )
        if isinstance(outcome, CycleFailure):
            self._handle_failure(fw, qpi, outcome, start)
            return
        task = asyncio.create_task(self._binding_cycle(fw, qpi, state, outcome, result.node or "", start))
        self._bind_tasks.add(task)
        task.add_done_callback(self._binding_done)

    def _binding_done(self, task: asyncio.Task[None]) -> None:
        self._bind_tasks.discard(task)
        room = self._bind_room
        if room is not None and len(self._bind_tasks) <= MAX_BINDINGS_IN_FLIGHT // 2:
            self._bind_room = None
            if not room.done():
                room.set_result(None)

    def _skip(self, pi: PodInfo) -> bool:
        """Pods deleted or already assumed/bound since they were queued are not scheduled again."""
        if pi.deletion_ts is not None:
            return True
        return self.cache.is_assumed(pi.uid) or self.cache.get_pod(pi.uid) is not None

    async def _binding_cycle(
        self, fw: Framework, qpi: QueuedPodInfo, state: CycleState, assumed: PodInfo, node: str, start: float
    ) -> None:
        pi = qpi.pod_info
        pending_write = self._condition_writes.get(pi.uid)
        if pending_write is not None:
            # Else a late "PodScheduled=False" could land on the pod after it is bound.
            await asyncio.gather(pending_write, return_exceptions=True)
        s = await fw.run_pre_bind(state, assumed, node)
        if s.ok:
            s = await fw.run_bind(state, assumed, node)
        if not s.ok:
            fw.run_unreserve(state, assumed, node)
            self.cache.forget(pi.uid)
            if await self._already_bound_elsewhere(pi):
                log.info("pod %s was bound by someone else or is gone; not retrying: %s", pi.key, s.message())
                self.queue.done(pi.uid)
                return
            message = f"Binding rejected: {s.message()}"
            self._record(fw, pi.pod, "Warning", "FailedScheduling", "Scheduling", message)
            self._set_unschedulable_condition(pi, REASON_SCHEDULER_ERROR, message)
            self.metrics.observe_attempt("error", fw.scheduler_name, time.perf_counter() - start)
            qpi.unschedulable_plugins = set()
            self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
            return
        elapsed = time.perf_counter() - start
        self.metrics.observe_attempt("scheduled", fw.scheduler_name, elapsed)
        first = qpi.initial_attempt_ts or qpi.timestamp
        self.metrics.observe_pod_scheduled(
            qpi.attempts or 1, max(0.0, self.queue.clock() - first) if first else 0.0
        )
        self._record(
            fw, pi.pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {pi.key} to {node}"
        )
        fw.run_post_bind(state, assumed, node)
        self.queue.done(pi.uid)
        if self.on_scheduled is not None:
            self.on_scheduled(assumed, node)

    async def _already_bound_elsewhere(self, pi: PodInfo) -> bool:
        """After a failed bind: is the pod bound (by another scheduler) or gone? Then it is not ours to retry."""
        if self.client is None:
            return False
        try:
            pod = await self.client.get("v1", "pods", pi.name, namespace=pi.namespace)
        except ApiError as e:
            return e.is_not_found()
        except Exception:
            return False
        meta = pod.get("metadata") or {}
        if meta.get("uid") != pi.uid:
            return True
        return bool((pod.get("spec") or {}).get("nodeName"))

    def _handle_failure(self, fw: Framework, qpi: QueuedPodInfo, failure: CycleFailure, start: float) -> None:
        """Upstream ``handleSchedulingFailure``: metrics, FailedScheduling, the PodScheduled condition, requeue."""
        pi = qpi.pod_info
        message = failure.message
        if failure.status.code == Code.ERROR:
            result = "error"
            qpi.unschedulable_plugins = set()
        else:
            result = "unschedulable"
            if failure.unschedulable_plugins is not None:
                qpi.unschedulable_plugins = failure.unschedulable_plugins
        self.metrics.observe_attempt(result, fw.scheduler_name, time.perf_counter() - start)
        self._record(fw, pi.pod, "Warning", "FailedScheduling", "Scheduling", message)
        reason = REASON_SCHEDULER_ERROR if result == "error" else REASON_UNSCHEDULABLE
        self._set_unschedulable_condition(pi, reason, message)
        self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)

    def _set_unschedulable_condition(self, pi: PodInfo, reason: str, message: str) -> None:
        """Upstream ``updatePod``: write ``PodScheduled=False`` with the reason and the FailedScheduling message
        into the pod's status (what ``kubectl describe`` and cluster autoscalers read), off the scheduling cycle,
        unless the pod already says exactly that."""
        if self.client is None:
            return
        current = next(
            (
                c
                for c in (pi.pod.get("status") or {}).get("conditions") or ()
                if c.get("type") == "PodScheduled"
            ),
            None,
        )
        if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == (
            "False",
            reason,
            message,
        ):
            return
        changed_at = (
            (current or {}).get("lastTransitionTime") if (current or {}).get("status") == "False" else None
        )
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": changed_at or now_rfc3339(),
            "reason": reason,
            "message": message,
        }
        task = asyncio.create_task(self._patch_condition(pi, condition), name=f"PodScheduled of {pi.key}")
        self._condition_writes[pi.uid] = task

        def forget(t: asyncio.Task[None]) -> None:
            if self._condition_writes.get(pi.uid) is t:
                del self._condition_writes[pi.uid]

        task.add_done_callback(forget)

    async def _patch_condition(self, pi: PodInfo, condition: dict[str, Any]) -> None:
        assert self.client is not None
        try:
            await self.client.patch(
                "v1",
                "pods",
                pi.name,
                {"status": {"conditions": [condition]}},
                namespace=pi.namespace,
                subresource="status",
                patch_type="strategic",
            )
        except ApiError as e:
            if not e.is_not_found():
                log.warning("updating the PodScheduled condition of %s failed: %s", pi.key, e)
        except Exception as e:  # connection trouble: the next attempt writes it again
            log.warning("updating the PodScheduled condition of %s failed: %s", pi.key, e)

    def _record(
        self, fw: Framework, pod: dict[str, Any], etype: str, reason: str, action: str, note: str
    ) -> None:
        rec = self.recorders.get(fw.scheduler_name)
        if rec is not None:
            rec.event(pod, etype, reason, action, note)
        log.log(
            logging.INFO if etype == "Normal" else logging.WARNING,
            "%s %s: %s",
            reason,
            (pod.get("metadata") or {}).get("name"),
            note,
        )
