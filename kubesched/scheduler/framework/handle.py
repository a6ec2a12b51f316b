"""The ``Handle`` plugins get at construction: everything a plugin may use besides the pod, as typed fields.

Each field is set once, when the scheduler (or ``simulate``) builds its frameworks, so a plugin reads plain
attributes and nothing is patched in afterwards. Fields a caller has no use for stay None (a unit test's handle
usually has just a cache).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from kubesched.scheduler.cache import Cache, NodeTable
    from kubesched.scheduler.dra.objects import DraObjects
    from kubesched.scheduler.framework.runtime import Framework
    from kubesched.scheduler.metrics import SchedulerMetrics
    from kubesched.scheduler.podinfo import PodInfo
    from kubesched.scheduler.resources import ResourceIndex
    from kubesched.scheduler.volumes.listers import VolumeLister

T = TypeVar("T")


class Nominator(Protocol):
    """What the framework needs from the scheduling queue's nominator (pods nominated by preemption)."""

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def nodes(self) -> Collection[str]: ...

    def nominated_node(self, uid: str) -> str | None: ...

    def add_nominated(self, pod: PodInfo, node_name: str | None = None) -> None: ...

    def delete_nominated(self, pi: PodInfo | str) -> None: ...


class NamespaceLister(Protocol):
    """Namespaces, for namespaceSelector (InterPodAffinity)."""

    def get(self, name: str) -> Mapping[str, Any] | None: ...

    def list(self) -> Iterable[Mapping[str, Any]]: ...


class WorkloadLister(Protocol):
    """Services and owning workloads, for default topology spreading (PodTopologySpread)."""

    def services(self, namespace: str) -> Iterable[Mapping[str, Any]]: ...

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        """``kind`` is ReplicaSet, StatefulSet or ReplicationController."""
        ...


class PdbLister(Protocol):
    """PodDisruptionBudgets, for preemption."""

    def pdbs(self) -> Iterable[Mapping[str, Any]]: ...


# ``evict(victim, preemptor, node_name)``: removes a preemption victim offline (``kubesched simulate``).
EvictHook = Callable[["PodInfo", "PodInfo", str], None]


class Singletons:
    """One instance per type, shared by every framework of one scheduler (and only of that scheduler).

    For state a plugin keeps across its profiles, such as load-aware scheduling's hot values: the plugin asks
    ``handle.singletons.get(HotValueStore)`` at construction. Keyed by the type, so the answer is typed.
    """

    __slots__ = ("_instances",)

    def __init__(self) -> None:
        self._instances: dict[type, Any] = {}

    def get(self, cls: type[T], factory: Callable[[], T] | None = None) -> T:
        found = self._instances.get(cls)
        if found is None:
            found = self._instances[cls] = (factory or cls)()
        return found

    def find(self, cls: type[T]) -> T | None:
        """The instance if some plugin created it, else None."""
        return self._instances.get(cls)


@dataclass
class Handle:
    """What plugins may use besides the pod.

    ``framework`` is set by the Framework that built the plugin (each framework gets its own copy of the
    handle), so a plugin such as DefaultPreemption can run the profile's filters. The copies share the rest,
    ``singletons`` included.
    """

    cache: Cache | None = None
    client: Any = None
    recorder: Any = None
    nominator: Nominator | None = None
    parallelism: int = 16
    framework: Framework | None = None
    metrics: SchedulerMetrics | None = None
    # Moves pods (by uid) back to activeQ: preemption requeues a pod whose asynchronous preemption failed.
    activate: Callable[[Iterable[str]], None] | None = None
    # Seeds random choices (preemption's candidate offset) so runs repeat.
    seed: int | None = None
    namespaces: NamespaceLister | None = None
    workloads: WorkloadLister | None = None
    pdbs: PdbLister | None = None
    preemption_evict: EvictHook | None = None
    # resource.k8s.io objects (DeviceClasses, ResourceClaims, templates, ResourceSlices) for DynamicResources.
    dra: DraObjects | None = None
    # PVs, PVCs, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities (the volume plugins).
    volumes: VolumeLister | None = None
    singletons: Singletons = field(default_factory=Singletons)

    @property
    def nodes(self) -> NodeTable:
        if self.cache is None:
            raise RuntimeError("this handle has no cache")
        return self.cache.table

    @property
    def res(self) -> ResourceIndex:
        if self.cache is None:
            raise RuntimeError("this handle has no cache")
        return self.cache.res


__all__ = [
    "EvictHook",
    "Handle",
    "NamespaceLister",
    "Nominator",
    "PdbLister",
    "Singletons",
    "WorkloadLister",
]
