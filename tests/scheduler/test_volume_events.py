"""The storage informers' events and the queue: a pod a volume plugin rejected is moved back on the PV, PVC,
StorageClass, CSINode and CSIStorageCapacity events the plugin registered (PV/PVC events only for pods with
claims, upstream's hint), not on events nobody registered."""

from __future__ import annotations

from typing import Any

from volume_objects import pod

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework.interface import ClusterEvent
from kubesched.scheduler.volumes.informers import KINDS, has_claims, volume_informers
from kubesched.scheduler.volumes.listers import StoreVolumes


class FakeClient:
    pass


def test_handlers_report_add_and_update_and_keep_generations() -> None:
    seen: list[tuple[ClusterEvent, Any]] = []
    stores: dict[str, Any] = {}
    volumes = StoreVolumes(stores)
    informers = volume_informers(FakeClient(), volumes, stores, lambda e, check: seen.append((e, check)))
    assert set(informers) == set(KINDS) == set(stores)
    pv = {"metadata": {"name": "v", "resourceVersion": "1"}, "spec": {"storageClassName": "fast"}}
    inf = informers["persistentvolumes"]
    for handler in inf._handlers:  # what the informer calls on an ADDED event
        assert handler.on_add is not None
        handler.on_add(pv)
    for handler in informers["csinodes"]._handlers:
        assert handler.on_update is not None
        handler.on_update({"metadata": {"name": "n"}}, {"metadata": {"name": "n"}})
    assert [e for e, _ in seen] == [
        ClusterEvent("PersistentVolume", "Add"),
        ClusterEvent("CSINode", "Update"),
    ]
    assert seen[0][1] is has_claims and seen[1][1] is None
    assert volumes.generation("persistentvolumes") == 1 and volumes.generation("csinodes") == 1


def test_only_pods_with_claims_are_moved_by_volume_events() -> None:
    cache = Cache()
    assert has_claims(cache.pod_info(pod("p", "data")))
    assert not has_claims(cache.pod_info(pod("q")))


def test_queue_moves_a_pod_rejected_by_volume_binding() -> None:
    from kubesched.scheduler.plugins.volume_binding import VolumeBinding
    from kubesched.scheduler.podinfo import QueuedPodInfo
    from kubesched.scheduler.queue import SchedulingQueue

    queue = SchedulingQueue(
        lambda q: q.timestamp, plugin_events={"VolumeBinding": VolumeBinding().events_to_register()}
    )
    cache = Cache()
    waiting = QueuedPodInfo(cache.pod_info(pod("p", "data")), timestamp=1.0)
    waiting.unschedulable_plugins = {"VolumeBinding"}
    queue.add_unschedulable_if_not_present(waiting, queue.scheduling_cycle)
    queue.move_all_to_active_or_backoff(ClusterEvent("Namespace", "Add"))
    assert queue.pending_counts()["unschedulable"] == 1  # not an event VolumeBinding registered
    queue.move_all_to_active_or_backoff(ClusterEvent("PersistentVolume", "Add"), has_claims)
    assert queue.pending_counts()["unschedulable"] == 0
