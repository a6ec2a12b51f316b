"""The controllers a real cluster runs in kube-controller-manager, run in-process by the local cluster.

- ``replicaset`` (``replicaset.py``): ReplicaSets keep their pods; ``replicationcontroller`` the same for
  ReplicationControllers.
- ``deployment`` (``deployment.py``): Deployments roll ReplicaSets (RollingUpdate, Recreate, scaling, history).
- ``disruption`` (``disruption.py``): PodDisruptionBudget status.
- ``statefulset`` (``statefulset.py``): StatefulSets keep their ordinal pods and their claims.
- ``persistentvolume-binder`` (``persistentvolume.py``): binds claims to volumes, completes the bindings the
  scheduler chose, Available/Bound/Released phases, reclaim policy Delete.
- ``simulated-provisioner`` (``provisioner.py``): the ``standard`` and ``local`` StorageClasses and volumes
  provisioned for them where the scheduler put the first consumer.
- ``resourceclaim`` (``resourceclaim.py``): ResourceClaims from a pod's templates, ``reservedFor`` cleanup,
  deallocation (it watches pods with claims itself: those rarely have an owner the pod index selects).

They subscribe to committed writes through ``ClusterApi.observers`` (one dispatch per write: a dict lookup by
resource type), keep small indexes, and write through ``ClusterApi`` as any client would, so their pods get the
same defaults, validation and admission as pods created with kubectl. Which ones run is chosen like
kube-controller-manager's ``--controllers``: ``*`` (all), ``name`` (enable), ``-name`` (disable).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kubesched.cluster.background import cancel_and_wait
from kubesched.cluster.controllers.base import Clock, Controller, Obj
from kubesched.cluster.controllers.deployment import DeploymentController
from kubesched.cluster.controllers.disruption import DisruptionController
from kubesched.cluster.controllers.persistentvolume import PersistentVolumeController
from kubesched.cluster.controllers.podindex import PodIndex
from kubesched.cluster.controllers.provisioner import SimulatedProvisioner
from kubesched.cluster.controllers.replicaset import REPLICATION_CONTROLLER, ReplicaSetController
from kubesched.cluster.controllers.resourceclaim import ResourceClaimController
from kubesched.cluster.controllers.statefulset import StatefulSetController

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi
    from kubesched.cluster.resources import ResourceType

KNOWN_CONTROLLERS = (
    "deployment",
    "disruption",
    "persistentvolume-binder",
    "replicaset",
    "replicationcontroller",
    "resourceclaim",
    "simulated-provisioner",
    "statefulset",
)

Handler = Callable[[str, Obj | None, Obj | None], None]


def parse_controllers(spec: Iterable[str] | str) -> frozenset[str]:
    """kube-controller-manager's ``--controllers`` list: ``*`` enables all, ``foo`` enables foo, ``-foo``
    disables foo (a disable wins over ``*``); an empty list enables none. Unknown names raise ``ValueError``."""
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    items = [s for s in items if s]
    enabled: set[str] = set()
    disabled: set[str] = set()
    for item in items:
        name = item[1:] if item.startswith("-") else item
        if name != "*" and name not in KNOWN_CONTROLLERS:
            raise ValueError(
                f'"{name}" is not in the list of known controllers ({", ".join(KNOWN_CONTROLLERS)})'
            )
        if item == "*":
            enabled.update(KNOWN_CONTROLLERS)
        elif item.startswith("-"):
            disabled.add(name)
        else:
            enabled.add(name)
    return frozenset(enabled - disabled)


class ControllerManager:
    """Runs the enabled controllers: routes committed writes to them and drives their work queues."""

    def __init__(
        self, api: ClusterApi, enabled: Iterable[str] = KNOWN_CONTROLLERS, *, clock: Clock | None = None
    ) -> None:
        self.api = api
        self.clock = clock or Clock()
        self.pods = PodIndex()
        self.controllers: dict[str, Controller] = {}
        enabled = frozenset(enabled)
        routes: dict[str, list[Handler]] = {}
        pod_handlers: list[Handler] = []

        def route(rtype: ResourceType, handler: Handler) -> None:
            routes.setdefault(rtype.storage_key, []).append(handler)

        if "replicaset" in enabled:
            rs = ReplicaSetController(api, self.clock, self.pods)
            self.controllers["replicaset"] = rs
            route(rs.rtype, rs.on_owner)
            pod_handlers.append(rs.on_pod)
        if "replicationcontroller" in enabled:
            rc = ReplicaSetController(api, self.clock, self.pods, REPLICATION_CONTROLLER)
            self.controllers["replicationcontroller"] = rc
            route(rc.rtype, rc.on_owner)
            pod_handlers.append(rc.on_pod)
        if "deployment" in enabled:
            dc = DeploymentController(api, self.clock, self.pods)
            self.controllers["deployment"] = dc
            route(dc.rtype, dc.on_deployment)
            route(dc.rs_type, dc.on_replicaset)
            pod_handlers.append(dc.on_pod)
        if "disruption" in enabled:
            pdb = DisruptionController(api, self.clock, self.pods)
            self.controllers["disruption"] = pdb
            route(pdb.rtype, pdb.on_budget)
            pod_handlers.append(pdb.on_pod)
        if "statefulset" in enabled:
            sts = StatefulSetController(api, self.clock, self.pods)
            self.controllers["statefulset"] = sts
            route(sts.rtype, sts.on_set)
            pod_handlers.append(sts.on_pod)
        if "persistentvolume-binder" in enabled:
            pvc = PersistentVolumeController(api, self.clock)
            self.controllers["persistentvolume-binder"] = pvc
            route(pvc.pv_type, pvc.on_volume)
            route(pvc.pvc_type, pvc.on_claim)
            route(pvc.sc_type, pvc.on_class)
        if "simulated-provisioner" in enabled:
            prov = SimulatedProvisioner(api, self.clock)
            self.controllers["simulated-provisioner"] = prov
            route(prov.pvc_type, prov.on_claim)
        self._own_observers: list[Callable[..., None]] = []
        if "resourceclaim" in enabled:
            claims = ResourceClaimController(api, self.clock)
            self.controllers["resourceclaim"] = claims
            self._own_observers.append(claims.observe)
        self._pods_key = api.rtype("", "v1", "pods").storage_key
        self._pod_handlers = pod_handlers
        self._routes = routes
        self._tasks: list[asyncio.Task[None]] = []
        if self.controllers:
            api.observers.append(self._observe)
        api.observers.extend(self._own_observers)

    def _observe(self, rtype: ResourceType, etype: str, new: Obj | None, old: Obj | None) -> None:
        key = rtype.storage_key
        if key == self._pods_key:
            pods = self.pods
            # The one check a bare pod in a namespace no controller selects in costs.
            if (new is None or not pods.wants(new)) and (old is None or not pods.wants(old)):
                return
            if new is None:
                if old is not None:
                    pods.remove(old)
            else:
                pods.observe(new, old)
            for handler in self._pod_handlers:
                handler(etype, new, old)
            return
        handlers = self._routes.get(key)
        if handlers is not None:
            for handler in handlers:
                handler(etype, new, old)

    def start(self) -> None:
        """Index the stored pods with a controller, fill the controllers' caches, start their workers."""
        if not self.controllers:
            return
        self.start_sync()
        self._tasks = [
            asyncio.create_task(c.run(), name=f"controller-{n}") for n, c in self.controllers.items()
        ]

    def start_sync(self) -> None:
        """``start`` without the asyncio workers (tests drive the queues with ``drain``)."""
        items, _ = self.api.store.list(self._pods_key)
        for st in items:
            if st.obj.get("metadata", {}).get("ownerReferences"):
                self.pods.observe(st.obj, None)
        for ctl in self.controllers.values():
            ctl.start()

    def drain(self, max_syncs: int = 100_000) -> int:
        """Process every ready key of every controller until all queues are empty (tests); the syncs done."""
        done = 0
        progressed = True
        while progressed and done < max_syncs:
            progressed = False
            for ctl in self.controllers.values():
                while ctl.process_one():
                    done += 1
                    progressed = True
        return done

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        if self._observe in self.api.observers:
            self.api.observers.remove(self._observe)
        for observer in self._own_observers:
            if observer in self.api.observers:
                self.api.observers.remove(observer)


__all__ = ["KNOWN_CONTROLLERS", "ControllerManager", "parse_controllers"]
