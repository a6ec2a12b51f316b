"""DynamicResources: kube-scheduler's plugin for dynamic resource allocation (DRA, ``resource.k8s.io/v1``).

A pod's ``spec.resourceClaims`` name ResourceClaims directly (``resourceClaimName``) or through a
ResourceClaimTemplate, whose claim the ResourceClaim controller creates and records in
``pod.status.resourceClaimStatuses``. Upstream's points, with its messages:

- PreEnqueue: the pod waits (no attempt, no event) until every claim exists: ``pod "ns/p": ResourceClaim not
  created yet`` for a template not instantiated yet, the lister's ``... not found`` for a missing claim.
- PreFilter: a pod without claims gets SKIP, so it costs nothing further (its Score is a shared zero array).
  With claims: allocated claims restrict nodes to their allocation's node selector; the others are handed to
  the structured allocator (``scheduler/dra/allocator.py``) with every device already allocated or in flight
  excluded. A missing DeviceClass is ``request R: device class C does not exist``.
- Filter: ``resourceclaim not available on the node`` where an allocated claim's node selector does not
  match, ``cannot allocate all claims`` where the allocator finds no solution, ``timed out trying to allocate
  devices`` after 10 s on one node, or the CEL runtime error of a selector (all unresolvable: preemption does
  not free devices). Claims of the common shape (ExactCount of one kind of device, no constraints) are
  checked for all nodes at once by counting free matching devices, their devices picked at Reserve; the others
  are searched node by node and the allocation found is kept for Reserve and Score.
- PostFilter: ``no new claims to deallocate`` for a pod without claims (or when PreFilter rejected it); with
  claims, an allocated claim that
  kept the pod off some node and is reserved by no other pod is deallocated (``deallocation of ResourceClaim
  completed``), else ``still not schedulable``.
- Score: with ``firstAvailable`` requests, 8 minus the index of the chosen sub-request per request, normalised
  to 0..100; 0 otherwise (listed for every pod, as upstream).
- Reserve/Unreserve: the allocation goes in flight (``DraObjects.reserve``), so the next pod's cycle does not
  hand out the same devices; Unreserve drops it and takes the pod out of claims' ``reservedFor``.
- PreBind: writes ``status.allocation`` (with the ``resource.kubernetes.io/delete-protection`` finalizer first)
  and adds the pod to ``status.reservedFor``; a claim already allocated (shared) only gets the reservation.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.dra.allocator import Allocation, AllocationError, AllocationTimeout, Allocator
from kubesched.scheduler.dra.objects import DraObjects, obj_key
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Code,
    CycleState,
    Filtered,
    NodeToStatus,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.plugins.node_affinity import NodeSelector

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

log = logging.getLogger(__name__)

NAME = "DynamicResources"
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
STILL_NOT_SCHEDULABLE = "still not schedulable"
DEALLOCATED = "deallocation of ResourceClaim completed"
CANNOT_ALLOCATE = "cannot allocate all claims"
TIMED_OUT = "timed out trying to allocate devices"
NOT_AVAILABLE_ON_NODE = "resourceclaim not available on the node"
IN_USE = "resourceclaim in use"
STATE_NOT_FOUND = "not found"
FINALIZER = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX = 256
API = "resource.k8s.io/v1"
_KEY = NAME


class ClaimsUnavailable(Exception):
    """A claim of the pod that does not exist (yet), is being deleted or is not the pod's."""


def pod_claims(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("resourceClaims") or ())


def resource_claim_names(pod: Mapping[str, Any]) -> list[str]:
    """Names of the pod's ``spec.resourceClaims`` entries (empty when it has none)."""
    return [str((c or {}).get("name") or "") for c in pod_claims(pod)]


def claim_name(pod: Mapping[str, Any], pod_claim: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The ResourceClaim's name for one entry of ``spec.resourceClaims`` and whether the pod must own it (a
    claim from a template); ``(None, False)`` when the template produced no claim (status entry without name).
    Raises ``ClaimsUnavailable`` when the template's claim is not recorded yet (upstream ``resourceclaim.Name``).
    """
    if pod_claim.get("resourceClaimName"):
        return str(pod_claim["resourceClaimName"]), False
    if pod_claim.get("resourceClaimTemplateName"):
        entry_name = pod_claim.get("name")
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
            if st.get("name") == entry_name:
                name = st.get("resourceClaimName")
                return (str(name), True) if name else (None, False)
        meta = pod.get("metadata") or {}
        raise ClaimsUnavailable(
            f'pod "{meta.get("namespace", "")}/{meta.get("name", "")}": ResourceClaim not created yet'
        )
    raise ClaimsUnavailable(f"pod claim {pod_claim.get('name', '')}: neither resourceClaimName nor template")


def _owned_by(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    uid = (pod.get("metadata") or {}).get("uid")
    return any(
        ref.get("uid") == uid and ref.get("controller")
        for ref in (claim.get("metadata") or {}).get("ownerReferences") or ()
    )


def reserved_for_pod(claim: Mapping[str, Any], uid: str) -> bool:
    return any(r.get("uid") == uid for r in (claim.get("status") or {}).get("reservedFor") or ())


def resolve_claims(objects: DraObjects, pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod's ResourceClaims in ``spec.resourceClaims`` order (upstream ``foreachPodResourceClaim``)."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    found: list[Mapping[str, Any]] = []
    for pod_claim in pod_claims(pod):
        name, must_own = claim_name(pod, pod_claim)
        if name is None:
            continue
        claim = objects.claim(namespace, name)
        if claim is None:
            raise ClaimsUnavailable(f'resourceclaim.resource.k8s.io "{name}" not found')
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            raise ClaimsUnavailable(f'resourceclaim "{name}" is being deleted')
        if must_own and not _owned_by(claim, pod):
            raise ClaimsUnavailable(
                f"ResourceClaim {namespace}/{name} was not created for pod {namespace}/{meta.get('name', '')} "
                "(pod is not owner)"
            )
        found.append(claim)
    return found


@dataclass(slots=True)
class _State:
    claims: list[Mapping[str, Any]]
    allocated: list[tuple[int, NodeSelector | None]]  # claims allocated already: (index, node selector)
    to_allocate: list[int]  # indices of claims the allocator handles
    allocator: Allocator | None
    has_first_available: bool
    node_allocations: dict[str, Allocation] = field(default_factory=dict)
    unavailable: set[int] = field(default_factory=set)  # allocated claims that did not fit some node
    feasible: set[str] = field(default_factory=set)  # nodes that passed the count check (count_only)
    masks: dict[bytes, np.ndarray] = field(default_factory=dict)  # node selector -> node mask, this cycle
    reserved: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> allocation (Reserve)


def _node_matcher(
    nodes: NodeTable, slot: int, masks: dict[bytes, np.ndarray]
) -> Callable[[Mapping[str, Any]], bool]:
    """Does a slice's node selector select the node in ``slot``? (masks cached per selector for the cycle)"""

    def matches(raw: Mapping[str, Any]) -> bool:
        sel = NodeSelector(raw)
        mask = masks.get(sel.key[1])
        if mask is None:
            mask = masks[sel.key[1]] = sel.node_mask(nodes)
        return bool(mask[slot])

    return matches


def _filter_by_counts(
    s: _State, allocator: Allocator, need: int, nodes: NodeTable, idx: np.ndarray, bits: np.ndarray
) -> None:
    """Vectorised: free matching devices per node against the number the claims need; the devices themselves
    are picked at Reserve, for the chosen node only."""
    live = bits == 0
    ok = allocator.free_counts(nodes.index, nodes.capacity)[idx] >= need
    bits[live & ~ok] = 2
    names = nodes.names
    s.feasible.update(names[slot] or "" for slot in idx[live & ok].tolist())


def _filter_by_search(
    s: _State, allocator: Allocator, nodes: NodeTable, idx: np.ndarray, bits: np.ndarray, errors: list[str]
) -> None:
    """Node by node: the allocator's search (constraints, alternatives, All, devices shared between nodes).

    A selector that fails at runtime on a node's device (a CEL error such as ``no such key``) rejects that node
    with the error as its reason, unresolvable, as upstream's Filter does; ``errors`` collects those messages
    (reason bits 8, 16, ... after the three fixed reasons)."""
    names = nodes.names
    pools = allocator.pools
    counting = allocator.count_only is not None
    for pos, slot in enumerate(idx.tolist()):
        if bits[pos]:
            continue
        node_name = names[slot] or ""
        if not pools.has_devices_for(node_name):
            bits[pos] = 2
            continue
        matches = _node_matcher(nodes, slot, s.masks)
        try:
            if counting:
                if allocator.fits(node_name, matches):
                    s.feasible.add(node_name)
                else:
                    bits[pos] = 2
                continue
            found = allocator.allocate(node_name, matches)
        except AllocationTimeout:
            bits[pos] = 4
            continue
        except AllocationError as e:
            message = str(e)
            if message not in errors and len(errors) < 60:  # 64 reason bits, 3 taken
                errors.append(message)
            bits[pos] = 8 << (errors.index(message) if message in errors else len(errors) - 1)
            continue
        if found is None:
            bits[pos] = 2
        else:
            s.node_allocations[node_name] = found


class DynamicResources:
    name = NAME
    scores_in_range = True

    def __init__(self, args: None = None, handle: Any = None) -> None:
        self.handle = handle
        dra = getattr(handle, "dra", None) if handle is not None else None
        if dra is None:
            dra = handle.singletons.get(DraObjects) if handle is not None else DraObjects()
        self.objects: DraObjects = dra
        self._zeros: dict[int, np.ndarray] = {}
        self._rng = random.Random(getattr(handle, "seed", None))

    def events_to_register(self) -> list[ClusterEvent]:
        # Upstream registers these with queueing hints; the queue here moves a pod on the event kind.
        return [
            ClusterEvent("ResourceClaim", "Add"),
            ClusterEvent("ResourceClaim", "Update"),
            ClusterEvent("ResourceSlice", "Add"),
            ClusterEvent("ResourceSlice", "Update"),
            ClusterEvent("DeviceClass", "Add"),
            ClusterEvent("DeviceClass", "Update"),
            ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "UpdateNodeLabel"),
            ClusterEvent("Node", "UpdateNodeTaint"),
        ]

    # -- PreEnqueue / PreFilter ----------------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.pod["spec"].get("resourceClaims"):
            return Status.success()
        try:
            resolve_claims(self.objects, pod.pod)
        except ClaimsUnavailable as e:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [str(e)], NAME)
        return Status.success()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.pod["spec"].get("resourceClaims"):
            return None, Status.skip()
        # As upstream, the state exists from here on, without claims until PreFilter succeeds: after a rejection
        # below, PostFilter answers "no new claims to deallocate" (upstream's "missing-class" case).
        s = _State([], [], [], None, False)
        state.write(_KEY, s)
        try:
            claims = resolve_claims(self.objects, pod.pod)
        except ClaimsUnavailable as e:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [str(e)], NAME)
        if not claims:
            return None, Status.skip()
        allocated: list[tuple[int, NodeSelector | None]] = []
        to_allocate: list[int] = []
        for i, claim in enumerate(claims):
            status = claim.get("status") or {}
            allocation = status.get("allocation")
            if allocation:
                if not reserved_for_pod(claim, pod.uid) and len(status.get("reservedFor") or ()) >= (
                    RESERVED_FOR_MAX
                ):
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [IN_USE], NAME)
                raw = allocation.get("nodeSelector")
                allocated.append((i, NodeSelector(raw) if raw else None))
                continue
            in_flight = self.objects.in_flight(obj_key(claim))
            if in_flight is not None and in_flight[0] != pod.uid:
                # Another pod's cycle allocated this shared claim; its PreBind will publish it.
                msg = f"resource claim {obj_key(claim)} is in the process of being allocated"
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [msg], NAME)
            to_allocate.append(i)
        allocator: Allocator | None = None
        first_available = False
        if to_allocate:
            pending = [claims[i] for i in to_allocate]
            keys = [obj_key(c) for c in pending]
            try:
                allocator = Allocator(
                    pending, self.objects.classes, self.objects.allocated(keys), self.objects.pools()
                )
            except AllocationError as e:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [str(e)], NAME)
            first_available = any(r.first_available for c in allocator.claims for r in c.requests)
        s.claims, s.allocated, s.to_allocate, s.allocator, s.has_first_available = (
            claims,
            allocated,
            to_allocate,
            allocator,
            first_available,
        )
        return None, Status.success()

    # -- Filter --------------------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        s: _State | None = state.read(_KEY)
        if s is None or not s.claims:
            return Filtered.all_pass(len(idx))
        bits = np.zeros(len(idx), dtype=np.uint64)
        for i, selector in s.allocated:
            if selector is None:
                continue
            ok = selector.node_mask(nodes)[idx]
            if not ok.all():
                bits[~ok] = 1
                s.unavailable.add(i)
        allocator = s.allocator
        errors: list[str] = []
        if allocator is not None:
            counted = False
            if allocator.count_only is not None and not allocator.pools.shared:
                try:
                    _filter_by_counts(s, allocator, allocator.count_only[1], nodes, idx, bits)
                    counted = True
                except AllocationError:
                    pass  # a selector fails on some device: the search says on which nodes
            if not counted:
                _filter_by_search(s, allocator, nodes, idx, bits, errors)
        if not bits.any():
            return Filtered.all_pass(len(idx))
        reasons = (NOT_AVAILABLE_ON_NODE, CANNOT_ALLOCATE, TIMED_OUT, *errors)
        return Filtered(bits, reasons, (True,) * len(reasons))

    # -- PostFilter ----------------------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, statuses: NodeToStatus
    ) -> tuple[str | None, Status]:
        s: _State | None = state.read(_KEY)
        if s is None:
            if NAME in state.skip_filter:  # PreFilter ran and skipped: the pod has no claims
                return None, Status(Code.UNSCHEDULABLE, [NO_CLAIMS_TO_DEALLOCATE], NAME)
            return None, Status(Code.ERROR, [STATE_NOT_FOUND], NAME)
        if not s.claims:
            return None, Status(Code.UNSCHEDULABLE, [NO_CLAIMS_TO_DEALLOCATE], NAME)
        candidates = sorted(s.unavailable)
        self._rng.shuffle(candidates)  # upstream iterates a map: one at random
        for i in candidates:
            claim = s.claims[i]
            reserved = (claim.get("status") or {}).get("reservedFor") or ()
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                client = getattr(self.handle, "client", None)
                status = {k: v for k, v in (claim.get("status") or {}).items()}
                status.pop("allocation", None)
                status.pop("reservedFor", None)
                updated = {**claim, "status": status}
                if client is not None:
                    meta = claim.get("metadata") or {}
                    try:
                        updated = await client.replace(
                            API,
                            "resourceclaims",
                            str(meta.get("name")),
                            updated,
                            namespace=str(meta.get("namespace")),
                            subresource="status",
                        )
                    except Exception as e:
                        return None, Status(Code.ERROR, [str(e)], NAME)
                self.objects.assume(updated)
                return None, Status(Code.UNSCHEDULABLE, [DEALLOCATED], NAME)
        return None, Status(Code.UNSCHEDULABLE, [STILL_NOT_SCHEDULABLE], NAME)

    # -- Score ---------------------------------------------------------------------------------------------

    def constant_score(self, pod: PodInfo, nodes: NodeTable) -> bool:
        """A pod without claims scores 0 on every node, so a cycle that records no scores can skip the call."""
        return not pod.pod["spec"].get("resourceClaims")

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        s: _State | None = state.read(_KEY) if pod.pod["spec"].get("resourceClaims") else None
        if s is None or not s.has_first_available:
            n = len(idx)
            zeros = self._zeros.get(n)
            if zeros is None:
                if len(self._zeros) >= 64:
                    self._zeros.clear()
                zeros = self._zeros[n] = np.zeros(n, dtype=np.int64)
                zeros.flags.writeable = False
            return zeros
        names = nodes.names
        raw = np.fromiter(
            (
                (a.score if (a := s.node_allocations.get(names[slot] or "")) is not None else 0)
                for slot in idx.tolist()
            ),
            dtype=np.int64,
            count=len(idx),
        )
        top = int(raw.max()) if len(raw) else 0
        if top > 0:
            raw = raw * MAX_NODE_SCORE // top
        return raw

    # -- Reserve / Unreserve / PreBind ---------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s: _State | None = state.read(_KEY)
        if s is None or not s.to_allocate:
            return Status.success()
        found = s.node_allocations.get(node_name)
        if found is None and node_name in s.feasible and s.allocator is not None:
            nodes = self.handle.nodes
            slot = nodes.index.get(node_name)
            if slot is not None:
                try:
                    found = s.allocator.allocate(node_name, _node_matcher(nodes, slot, s.masks))
                except (AllocationError, AllocationTimeout) as e:
                    return Status(Code.ERROR, [str(e)], NAME)
        if found is None:
            return Status(Code.ERROR, [f'internal error, have no allocation for node "{node_name}"'], NAME)
        for i, allocation in zip(s.to_allocate, found.results, strict=True):
            s.reserved[i] = allocation
            self.objects.reserve(obj_key(s.claims[i]), pod.uid, allocation)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s: _State | None = state.read(_KEY)
        if s is None or not s.claims:
            return
        for i in list(s.reserved):
            self.objects.unreserve(obj_key(s.claims[i]), pod.uid)
        s.reserved.clear()
        client = getattr(self.handle, "client", None)
        if client is None:
            return
        for claim in s.claims:
            key = obj_key(claim)
            ns, _, name = key.partition("/")
            current = self.objects.claim(ns, name) or claim
            reserved = (current.get("status") or {}).get("reservedFor") or ()
            if any(r.get("uid") == pod.uid for r in reserved):
                keep = [r for r in reserved if r.get("uid") != pod.uid]
                patch = {
                    "metadata": {"resourceVersion": (current.get("metadata") or {}).get("resourceVersion")}
                }
                patch["status"] = {"reservedFor": keep or None}
                self._background(
                    client.patch(API, "resourceclaims", name, patch, namespace=ns, subresource="status")
                )

    def _background(self, coro: Any) -> None:
        import asyncio

        async def run() -> None:
            try:
                await coro
            except Exception as e:
                log.warning("DynamicResources: removing a reservation failed: %s", e)

        try:
            asyncio.get_running_loop().create_task(run())
        except RuntimeError:
            coro.close()

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        s: _State | None = state.read(_KEY)
        if s is None or not s.claims:
            return Status.success()
        client = getattr(self.handle, "client", None)
        for i, claim in enumerate(s.claims):
            allocation = s.reserved.get(i)
            if allocation is None and reserved_for_pod(claim, pod.uid):
                continue
            updated: Mapping[str, Any]
            try:
                if client is None:
                    updated = _bound(claim, allocation, pod)
                else:
                    updated = await self._bind_claim(client, claim, allocation, pod)
            except Exception as e:
                if allocation is not None:
                    self.objects.unreserve(obj_key(claim), pod.uid)
                return Status(Code.ERROR, [str(e)], NAME)
            self.objects.assume(updated)
        return Status.success()

    async def _bind_claim(
        self, client: Any, claim: Mapping[str, Any], allocation: dict[str, Any] | None, pod: PodInfo
    ) -> Mapping[str, Any]:
        from kubesched.client.rest import ApiError

        meta = claim.get("metadata") or {}
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        current: Mapping[str, Any] = claim
        for attempt in range(5):
            if attempt:
                current = await client.get(API, "resourceclaims", name, namespace=ns)
            cmeta = current.get("metadata") or {}
            if cmeta.get("deletionTimestamp"):
                raise RuntimeError(f"claim {ns}/{name} got deleted in the meantime")
            try:
                if allocation is not None:
                    if (current.get("status") or {}).get("allocation"):
                        raise RuntimeError(f"claim {ns}/{name} got allocated elsewhere in the meantime")
                    if FINALIZER not in (cmeta.get("finalizers") or ()):
                        body = {
                            **current,
                            "metadata": {
                                **cmeta,
                                "finalizers": [*(cmeta.get("finalizers") or ()), FINALIZER],
                            },
                        }
                        try:
                            current = await client.replace(API, "resourceclaims", name, body, namespace=ns)
                        except ApiError as e:
                            if e.status != 403:
                                raise
                            # A role with update on resourceclaims/status only (the bootstrap
                            # system:kube-scheduler here): the allocation is still written, unprotected.
                            log.warning(
                                "DynamicResources: cannot add the finalizer to %s/%s: %s", ns, name, e
                            )
                status = dict(current.get("status") or {})
                if allocation is not None:
                    status["allocation"] = allocation
                status["reservedFor"] = [
                    *(status.get("reservedFor") or ()),
                    {"resource": "pods", "name": pod.name, "uid": pod.uid},
                ]
                return await client.replace(
                    API,
                    "resourceclaims",
                    name,
                    {**current, "status": status},
                    namespace=ns,
                    subresource="status",
                )
            except ApiError as e:
                if not e.is_conflict():
                    raise
        raise RuntimeError(f"claim {ns}/{name}: too many conflicts writing the allocation")


def _bound(claim: Mapping[str, Any], allocation: dict[str, Any] | None, pod: PodInfo) -> dict[str, Any]:
    """The claim as PreBind leaves it, written offline (simulate, tests without an API server)."""
    meta = dict(claim.get("metadata") or {})
    status = dict(claim.get("status") or {})
    if allocation is not None:
        status["allocation"] = allocation
        meta["finalizers"] = [*(f for f in meta.get("finalizers") or () if f != FINALIZER), FINALIZER]
    status["reservedFor"] = [
        *(status.get("reservedFor") or ()),
        {"resource": "pods", "name": pod.name, "uid": pod.uid},
    ]
    return {**claim, "metadata": meta, "status": status}


PLUGIN = PluginDefinition(NAME, DynamicResources)


__all__ = [
    "CANNOT_ALLOCATE",
    "DEALLOCATED",
    "IN_USE",
    "NAME",
    "NOT_AVAILABLE_ON_NODE",
    "NO_CLAIMS_TO_DEALLOCATE",
    "PLUGIN",
    "STILL_NOT_SCHEDULABLE",
    "ClaimsUnavailable",
    "DynamicResources",
    "claim_name",
    "resolve_claims",
    "resource_claim_names",
]
