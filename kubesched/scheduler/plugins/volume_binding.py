"""VolumeBinding: pods go only where their volumes can be, and the scheduler binds or provisions the delayed ones,
as upstream's ``volumebinding`` plugin.

- PreFilter: SKIP for a pod without claims (so a plain pod costs one dict lookup); a missing, lost or deleted
  claim, or an unbound claim of an ``Immediate`` class (the PV controller binds those), is final. Local PVs of
  bound claims restrict the nodes (PreFilterResult).
- Filter: ``Binder.evaluate`` over all candidates (bound PVs' node affinity; for ``WaitForFirstConsumer``
  claims a matching available PV or provisioning allowed by the class's ``allowedTopologies`` and
  CSIStorageCapacity). All reasons are final for preemption, as upstream.
- Reserve/Unreserve: the chosen PVs (claimRef set) and claims (``selected-node`` set) are assumed in
  ``AssumedVolumes``, so the next pod sees them taken; Unreserve restores them.
- PreBind: writes the PVs' claimRefs and the claims' ``selected-node``, then waits (``bindTimeoutSeconds``) for
  the PV controller to complete the binding (``bind-completed`` on every claim).
- Score: none. Capacity scoring is behind the StorageCapacityScoring gate, off by default in 1.36, so the plugin
  answers SKIP at PreScore as upstream does and appears in no score list.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import StrictInt

from kubesched.apimachinery.volumes import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    is_claim_fully_bound,
    volume_fits_node,
)
from kubesched.scheduler.config.args import ArgsModel
from kubesched.scheduler.config.errors import FieldError, invalid
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    Filtered,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.plugins.node_resources_fit import UtilizationShapePoint
from kubesched.scheduler.plugins.volume_restrictions import lister_of
from kubesched.scheduler.volumes.assume import AssumedView, AssumedVolumes
from kubesched.scheduler.volumes.binder import (
    REASONS,
    UNBOUND_IMMEDIATE,
    Binder,
    NodeVolumes,
    PodClaims,
    classify,
    eligible_nodes,
)

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "VolumeBinding"
DEFAULT_BIND_TIMEOUT_SECONDS = 600
POLL_INTERVAL = 0.2
_STATE = NAME
_UNRESOLVABLE = (True, True, True, True)

Obj = Mapping[str, Any]


class VolumeBindingArgs(ArgsModel):
    bind_timeout_seconds: StrictInt = DEFAULT_BIND_TIMEOUT_SECONDS
    # Only with the StorageCapacityScoring gate, which 1.36 leaves off: setting it is an error, as upstream.
    shape: tuple[UtilizationShapePoint, ...] | None = None

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        if self.bind_timeout_seconds < 0:
            errs.append(
                invalid(
                    f"{path}.bindTimeoutSeconds",
                    self.bind_timeout_seconds,
                    "invalid BindTimeoutSeconds, should not be a negative value",
                )
            )
        if self.shape is not None:
            errs.append(
                invalid(
                    f"{path}.shape",
                    [p.model_dump() for p in self.shape],
                    "unsupported when StorageCapacityScoring feature is disabled",
                )
            )
        return errs


@dataclass(slots=True)
class _State:
    claims: PodClaims
    chosen: NodeVolumes | None = None
    all_bound: bool = False


def _final(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [message], NAME)


def _has_claims(pod: PodInfo) -> bool:
    for vol in (pod.pod.get("spec") or {}).get("volumes") or ():
        if "persistentVolumeClaim" in vol or "ephemeral" in vol:
            return True
    return False


class VolumeBinding:
    name = NAME

    def __init__(self, args: VolumeBindingArgs | None = None, handle: Any = None) -> None:
        self.args = args or VolumeBindingArgs()
        self.handle = handle
        self.live = lister_of(handle)
        self.assumed: AssumedVolumes = (
            handle.singletons.get(AssumedVolumes) if handle is not None else AssumedVolumes()
        )
        self.view = AssumedView(self.live, self.assumed)
        self.binder = Binder(self.view)

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("StorageClass", "Add"),
            ClusterEvent("StorageClass", "Update"),
            ClusterEvent("PersistentVolumeClaim", "Add"),
            ClusterEvent("PersistentVolumeClaim", "Update"),
            ClusterEvent("PersistentVolume", "Add"),
            ClusterEvent("PersistentVolume", "Update"),
            ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "UpdateNodeLabel"),
            ClusterEvent("Node", "UpdateNodeTaint"),
            ClusterEvent("CSINode", "Add"),
            ClusterEvent("CSINode", "Update"),
            ClusterEvent("CSIDriver", "Add"),
            ClusterEvent("CSIDriver", "Update"),
            ClusterEvent("CSIStorageCapacity", "Add"),
            ClusterEvent("CSIStorageCapacity", "Update"),
        ]

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not _has_claims(pod):
            return None, Status.skip()
        claims, why = classify(pod.pod, self.view)
        if claims is None:
            return None, _final(why) if why else Status.skip()
        if claims.immediate:
            return None, _final(UNBOUND_IMMEDIATE)
        state.write(_STATE, _State(claims))
        eligible = eligible_nodes(claims.bound, self.view)
        return (PreFilterResult(eligible) if eligible is not None else None), Status.success()

    def _state(self, state: CycleState, pod: PodInfo) -> _State | None:
        s: _State | None = state.read(_STATE)
        if s is None and _has_claims(pod):
            claims, _ = classify(pod.pod, self.view)
            if claims is not None:
                s = _State(claims)
                state.write(_STATE, s)
        return s

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        s = self._state(state, pod)
        if s is None or (not s.claims.bound and not s.claims.delayed):
            return Filtered.all_pass(len(idx))
        ev = self.binder.evaluate(s.claims, nodes, idx)
        if not ev.bits.any():
            return Filtered.all_pass(len(idx))
        return Filtered(ev.bits, REASONS, _UNRESOLVABLE)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Status:
        return Status.skip()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        return np.zeros(len(idx), dtype=np.int64)

    # -- Reserve / Unreserve -----------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s: _State | None = state.read(_STATE)
        if s is None or not s.claims.delayed:
            if s is not None:
                s.all_bound = True
            return Status.success()
        if self.handle is None or self.handle.cache is None:
            return Status.error("VolumeBinding: no node table to reserve against")
        nodes = self.handle.cache.table
        slot = nodes.index.get(node_name)
        if slot is None:
            return Status.error(f'node "{node_name}" not found')
        ev = self.binder.evaluate(s.claims, nodes, np.array([slot], dtype=np.intp))
        if ev.bits[0]:
            return Status.error(f"volumes of pod {pod.key} no longer fit node {node_name}")
        chosen = ev.node_volumes(0)
        s.chosen = chosen
        s.all_bound = chosen.empty
        for pv, claim in chosen.static:
            cmeta = claim.get("metadata") or {}
            new_pv = dict(pv)
            spec = dict(pv.get("spec") or {})
            spec["claimRef"] = {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": cmeta.get("namespace") or "",
                "name": cmeta.get("name") or "",
                "uid": cmeta.get("uid") or "",
                "resourceVersion": cmeta.get("resourceVersion") or "",
            }
            new_pv["spec"] = spec
            meta = dict(pv.get("metadata") or {})
            meta["annotations"] = {**(meta.get("annotations") or {}), ANN_BOUND_BY_CONTROLLER: "yes"}
            new_pv["metadata"] = meta
            self.assumed.assume_volume(new_pv, pv)
        for claim in chosen.provision:
            meta = dict(claim.get("metadata") or {})
            meta["annotations"] = {**(meta.get("annotations") or {}), ANN_SELECTED_NODE: node_name}
            self.assumed.assume_claim({**claim, "metadata": meta}, claim)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s: _State | None = state.read(_STATE)
        if s is None or s.chosen is None:
            return
        for pv, _ in s.chosen.static:
            self.assumed.restore_volume((pv.get("metadata") or {}).get("name") or "")
        for claim in s.chosen.provision:
            meta = claim.get("metadata") or {}
            self.assumed.restore_claim(meta.get("namespace") or "", meta.get("name") or "")

    # -- PreBind -------------------------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s: _State | None = state.read(_STATE)
        if s is None or s.all_bound or s.chosen is None:
            return Status.success()
        client = self.handle.client if self.handle is not None else None
        if client is None:
            return Status.success()  # offline (simulate): nothing to write
        try:
            for pv, _ in s.chosen.static:
                name = (pv.get("metadata") or {}).get("name") or ""
                assumed = self.view.volume(name) or pv
                await client.replace("v1", "persistentvolumes", name, dict(assumed))
            for claim in s.chosen.provision:
                meta = claim.get("metadata") or {}
                ns, name = meta.get("namespace") or "", meta.get("name") or ""
                assumed = self.view.claim(ns, name) or claim
                await client.replace("v1", "persistentvolumeclaims", name, dict(assumed), namespace=ns)
        except Exception as exc:  # an API error: the pod is retried
            return Status.error(f"binding volumes: {exc}")
        return await self._wait_for_bindings(s.chosen, node_name)

    async def _wait_for_bindings(self, chosen: NodeVolumes, node_name: str) -> Status:
        """``checkBindings`` polled until every claim is fully bound, or the timeout."""
        deadline = time.monotonic() + self.args.bind_timeout_seconds
        claims = [claim for _, claim in chosen.static] + list(chosen.provision)
        provisioned = {id(c) for c in chosen.provision}
        # A claim's selected-node counts as removed (provisioning given up) only once the informer has shown it.
        seen_selected: set[int] = set()
        while True:
            done = True
            for claim in claims:
                meta = claim.get("metadata") or {}
                ns, name = meta.get("namespace") or "", meta.get("name") or ""
                live = self.live.claim(ns, name)
                if live is None:
                    return Status.error(f'binding volumes: pvc "{ns}/{name}" not found')
                if is_claim_fully_bound(live):
                    pv = self.live.volume((live.get("spec") or {}).get("volumeName") or "")
                    if pv is None:
                        done = False
                        continue
                    node = self.handle.cache.table.node_by_name(node_name) if self.handle.cache else None
                    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
                    if node is not None and not volume_fits_node(pv, labels, node_name):
                        return Status.error(
                            f'binding volumes: pv "{(pv.get("metadata") or {}).get("name")}" node affinity '
                            f'doesn\'t match node "{node_name}"'
                        )
                    continue
                done = False
                ann = (live.get("metadata") or {}).get("annotations") or {}
                if id(claim) in provisioned:
                    if ANN_SELECTED_NODE in ann:
                        seen_selected.add(id(claim))
                    elif id(claim) in seen_selected:
                        return Status.error(f'binding volumes: provisioning failed for PVC "{name}"')
            if done:
                return Status.success()
            if time.monotonic() >= deadline:
                return Status.error("binding volumes: context deadline exceeded")
            await asyncio.sleep(POLL_INTERVAL)


PLUGIN = PluginDefinition(NAME, VolumeBinding, VolumeBindingArgs)

__all__ = ["DEFAULT_BIND_TIMEOUT_SECONDS", "NAME", "PLUGIN", "VolumeBinding", "VolumeBindingArgs"]
