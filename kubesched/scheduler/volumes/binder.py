"""The volume binder's decisions (upstream ``volumebinding/binder.go``), vectorised over candidate nodes.

- ``classify``: the pod's claims as bound (a volume name and ``bind-completed``), unbound with delayed binding
  (``WaitForFirstConsumer`` class) and unbound immediate; or why the pod cannot be scheduled at all.
- ``evaluate``: for all candidate nodes at once, the reasons a node fails (bound PVs' node affinity, no PV to
  bind and no provisioning, not enough CSI storage capacity, PV missing) and, per node, which PV each unbound
  claim would get (the smallest that fits, claims taken in increasing size) and which claims would be
  provisioned. A PV's node affinity is a cached mask over the node table, so each claim costs one numpy pass per
  candidate PV of its class, not one Python call per node.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.apimachinery.labels import SelectorError
from kubesched.apimachinery.volumes import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    annotations_of,
    claim_class,
    claim_request,
    claim_selector,
    has_storage_request,
    is_claim_fully_bound,
    quantity_bytes,
    required_node_affinity,
    statically_eligible,
    volume_capacity,
)
from kubesched.scheduler.plugins.node_affinity import NodeSelector
from kubesched.scheduler.volumes.listers import VolumeLister

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable

Obj = Mapping[str, Any]

REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
# Bit i of a node's reason mask is REASONS[i], in the order upstream appends them.
REASONS = (REASON_NODE_CONFLICT, REASON_BIND_CONFLICT, REASON_NOT_ENOUGH_SPACE, REASON_PV_NOT_EXIST)
NODE_CONFLICT, BIND_CONFLICT, NOT_ENOUGH_SPACE, PV_NOT_EXIST = 1, 2, 4, 8
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
HOSTNAME = "kubernetes.io/hostname"


@dataclass(slots=True)
class PodClaims:
    """A pod's claims by kind (upstream ``PodVolumeClaims``)."""

    bound: list[Obj] = field(default_factory=list)
    delayed: list[Obj] = field(default_factory=list)
    immediate: list[Obj] = field(default_factory=list)


@dataclass(slots=True)
class NodeVolumes:
    """What binding the pod's volumes on one node takes (upstream ``PodVolumes``)."""

    static: list[tuple[Obj, Obj]] = field(default_factory=list)  # (PV, claim)
    provision: list[Obj] = field(default_factory=list)  # claims

    @property
    def empty(self) -> bool:
        return not self.static and not self.provision


def claim_names_of(pod: Obj) -> list[tuple[str, bool]]:
    """(claim name, from a generic ephemeral volume) of each of the pod's claim-backed volumes."""
    meta = pod.get("metadata") or {}
    out: list[tuple[str, bool]] = []
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        src = vol.get("persistentVolumeClaim")
        if src is not None:
            out.append((str(src.get("claimName") or ""), False))
        elif vol.get("ephemeral") is not None:
            out.append((f"{meta.get('name') or ''}-{vol.get('name') or ''}", True))
    return out


def classify(pod: Obj, lister: VolumeLister) -> tuple[PodClaims | None, str]:
    """``podHasPVCs`` + ``GetPodVolumeClaims``: (None, "") for a pod without claims, (None, why) when a claim
    is missing, lost or being deleted, else the claims by kind."""
    names = claim_names_of(pod)
    if not names:
        return None, ""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or ""
    claims: list[Obj] = []
    for name, ephemeral in names:
        claim = lister.claim(ns, name)
        if claim is None:
            if ephemeral:
                return None, (
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                )
            return None, f'persistentvolumeclaim "{name}" not found'
        if (claim.get("status") or {}).get("phase") == "Lost":
            pv = (claim.get("spec") or {}).get("volumeName") or ""
            return None, f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{pv}"'
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            return None, f'persistentvolumeclaim "{name}" is being deleted'
        if ephemeral:
            owner = next(
                (
                    r
                    for r in (claim.get("metadata") or {}).get("ownerReferences") or ()
                    if r.get("controller")
                ),
                None,
            )
            if owner is None or owner.get("uid") != meta.get("uid"):
                return None, f"PVC {ns}/{name} was not created for pod {ns}/{meta.get('name') or ''}"
        claims.append(claim)
    out = PodClaims()
    for claim in claims:
        if is_claim_fully_bound(claim):
            out.bound.append(claim)
            continue
        cls = claim_class(claim)
        sc = lister.storage_class(cls) if cls else None
        if sc is not None and sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER:
            out.delayed.append(claim)
        else:
            out.immediate.append(claim)
    return out, ""


def local_volume_nodes(pv: Obj) -> set[str]:
    """``GetLocalPersistentVolumeNodeNames``: hostnames a PV's required node affinity names with ``In``."""
    req = required_node_affinity(pv)
    result: set[str] = set()
    if req is None:
        return result
    for term in req.get("nodeSelectorTerms") or ():
        nodes: set[str] | None = None
        for expr in term.get("matchExpressions") or ():
            if expr.get("key") == HOSTNAME and expr.get("operator") == "In":
                values = set(expr.get("values") or ())
                nodes = values if nodes is None else nodes & values
        if nodes:
            result |= nodes
    return result


def eligible_nodes(bound: Sequence[Obj], lister: VolumeLister) -> set[str] | None:
    """``GetEligibleNodes``: the nodes local PVs of the bound claims allow, None for no restriction."""
    eligible: set[str] | None = None
    for claim in bound:
        pv = lister.volume((claim.get("spec") or {}).get("volumeName") or "")
        if pv is None:
            continue
        names = local_volume_nodes(pv)
        if names:
            eligible = set(names) if eligible is None else eligible & names
    return eligible


def _label_selector_as_node_selector(sel: Obj) -> dict[str, Any] | None:
    """A ``metav1.LabelSelector`` as a one-term ``v1.NodeSelector`` (None: it selects every node)."""
    exprs: list[dict[str, Any]] = [
        {"key": k, "operator": "In", "values": [v]} for k, v in (sel.get("matchLabels") or {}).items()
    ]
    exprs.extend(dict(e) for e in sel.get("matchExpressions") or ())
    if not exprs:
        return None
    return {"nodeSelectorTerms": [{"matchExpressions": exprs}]}


def _topology_as_node_selector(terms: Sequence[Obj]) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": e.get("key", ""), "operator": "In", "values": list(e.get("values") or ())}
                    for e in t.get("matchLabelExpressions") or ()
                ]
            }
            for t in terms
        ]
    }


class Binder:
    """Decisions over the node table; one per scheduler, parsed selectors cached by object version."""

    def __init__(self, lister: VolumeLister) -> None:
        self.lister = lister
        self._selectors: OrderedDict[tuple[str, str, str], NodeSelector | None] = OrderedDict()

    def _selector(self, kind: str, obj: Obj, raw: Obj | None) -> NodeSelector | None:
        if raw is None:
            return None
        meta = obj.get("metadata") or {}
        key = (kind, str(meta.get("name") or ""), str(meta.get("resourceVersion") or id(obj)))
        if key in self._selectors:
            self._selectors.move_to_end(key)
            return self._selectors[key]
        sel = NodeSelector(raw)
        self._selectors[key] = sel
        if len(self._selectors) > 4096:
            self._selectors.popitem(last=False)
        return sel

    def volume_mask(self, pv: Obj, nodes: NodeTable, idx: np.ndarray) -> np.ndarray | None:
        """Which candidates the PV's required node affinity allows (None: all)."""
        sel = self._selector("pv", pv, required_node_affinity(pv))
        return None if sel is None else sel.node_mask(nodes)[idx]

    def _topology_mask(self, sc: Obj, nodes: NodeTable, idx: np.ndarray) -> np.ndarray | None:
        terms = sc.get("allowedTopologies") or ()
        if not terms:
            return None
        sel = self._selector("sc", sc, _topology_as_node_selector(terms))
        assert sel is not None
        return sel.node_mask(nodes)[idx]

    def _capacity_mask(
        self, claim: Obj, sc: Obj, provisioner: str, nodes: NodeTable, idx: np.ndarray
    ) -> np.ndarray | None:
        """``hasEnoughCapacity`` over the candidates (None: no capacity to check)."""
        if not has_storage_request(claim):
            return None
        driver = self.lister.csi_driver(provisioner)
        if driver is None or not (driver.get("spec") or {}).get("storageCapacity"):
            return None
        size = claim_request(claim)
        sc_name = (sc.get("metadata") or {}).get("name") or ""
        ok = np.zeros(len(idx), dtype=bool)
        for cap in self.lister.capacities():
            if cap.get("storageClassName") != sc_name:
                continue
            limit_raw = cap.get("maximumVolumeSize")
            if limit_raw is None:
                limit_raw = cap.get("capacity")
            if limit_raw is None or quantity_bytes(limit_raw) < size:
                continue
            topo = cap.get("nodeTopology")
            if topo is None:
                continue
            sel = self._selector("cap", cap, _label_selector_as_node_selector(topo))
            if sel is None:
                return np.ones(len(idx), dtype=bool)
            ok |= sel.node_mask(nodes)[idx]
        return ok

    def evaluate(self, claims: PodClaims, nodes: NodeTable, idx: np.ndarray) -> Evaluation:
        """Upstream ``FindPodVolumes`` for every candidate in ``idx`` at once."""
        n = len(idx)
        ev = Evaluation(np.zeros(n, dtype=np.uint64))
        bits = ev.bits
        for claim in claims.bound:
            pv = self.lister.volume((claim.get("spec") or {}).get("volumeName") or "")
            if pv is None:
                bits |= np.uint64(NODE_CONFLICT | PV_NOT_EXIST)
                break
            mask = self.volume_mask(pv, nodes, idx)
            if mask is not None:
                bits[~mask] |= np.uint64(NODE_CONFLICT)
        if not claims.delayed:
            return ev
        active = np.ones(n, dtype=bool)
        selected: list[Obj] = []
        to_match: list[Obj] = []
        for claim in claims.delayed:
            node = annotations_of(claim).get(ANN_SELECTED_NODE)
            if node is not None:
                selected.append(claim)
                slot = nodes.index.get(node)
                active &= idx == (slot if slot is not None else -1)
            else:
                to_match.append(claim)
        ev.active = active
        ev.selected = selected
        bits[~active] |= np.uint64(BIND_CONFLICT)
        # Static matches: claims in increasing size, each node's smallest fitting PV not taken by an earlier one.
        to_match.sort(key=claim_request)
        taken: dict[str, np.ndarray] = {}
        for claim in to_match:
            pick = np.full(n, -1, dtype=np.int64)
            cands = self._candidates(claim)
            prebound = [pv for pv, kind in cands if kind == "prebound"]
            ordered = (
                prebound[:1]
                if prebound
                else sorted((pv for pv, _ in cands), key=volume_capacity)  # stable: ties keep list order
            )
            remaining = active.copy()
            for k, pv in enumerate(ordered):
                if not remaining.any():
                    break
                mask = self.volume_mask(pv, nodes, idx)
                hit = remaining if mask is None else remaining & mask
                used = taken.get((pv.get("metadata") or {}).get("name") or "")
                if used is not None:
                    hit = hit & ~used
                pick[hit] = k
                remaining &= ~hit
            for k, pv in enumerate(ordered):
                chosen = pick == k
                if chosen.any():
                    name = (pv.get("metadata") or {}).get("name") or ""
                    taken[name] = chosen if name not in taken else taken[name] | chosen
            ev.matched.append((claim, ordered, pick))
        # Provisioning: the selected-node claims, then each node's unmatched claims; the first failure decides.
        pending = active.copy()
        checks: list[tuple[Obj, np.ndarray]] = [(c, active) for c in selected]
        checks.extend((c, active & (pick < 0)) for c, _, pick in ev.matched)
        for claim, need in checks:
            need = need & pending
            if not need.any():
                continue
            cls = claim_class(claim)
            sc = self.lister.storage_class(cls) if cls else None
            provisioner = str((sc or {}).get("provisioner") or "")
            if sc is None or not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
                bits[need] |= np.uint64(BIND_CONFLICT)
                pending &= ~need
                continue
            topo = self._topology_mask(sc, nodes, idx)
            if topo is not None:
                fail = need & ~topo
                bits[fail] |= np.uint64(BIND_CONFLICT)
                pending &= ~fail
                need = need & topo
            cap = self._capacity_mask(claim, sc, provisioner, nodes, idx)
            if cap is not None:
                fail = need & ~cap
                bits[fail] |= np.uint64(NOT_ENOUGH_SPACE)
                pending &= ~fail
        return ev

    def _candidates(self, claim: Obj) -> list[tuple[Obj, str]]:
        try:
            selector = claim_selector(claim)
        except SelectorError:
            return []
        cls = claim_class(claim)
        request = claim_request(claim)
        out: list[tuple[Obj, str]] = []
        for pv in self.lister.volumes_of_class(cls):
            kind = statically_eligible(pv, claim, selector, cls, request)
            if kind:
                out.append((pv, kind))
        return out


@dataclass(slots=True)
class Evaluation:
    """``evaluate``'s answer: reason bits per candidate and what each candidate would bind or provision."""

    bits: np.ndarray
    active: np.ndarray | None = None
    selected: list[Obj] = field(default_factory=list)
    matched: list[tuple[Obj, list[Obj], np.ndarray]] = field(default_factory=list)

    def node_volumes(self, pos: int) -> NodeVolumes:
        out = NodeVolumes()
        if self.active is None or not self.active[pos]:
            return out
        out.provision.extend(self.selected)
        for claim, ordered, pick in self.matched:
            k = int(pick[pos])
            if k >= 0:
                out.static.append((ordered[k], claim))
            else:
                out.provision.append(claim)
        return out


__all__ = [
    "BIND_CONFLICT",
    "NODE_CONFLICT",
    "NOT_ENOUGH_SPACE",
    "PV_NOT_EXIST",
    "REASONS",
    "REASON_BIND_CONFLICT",
    "REASON_NODE_CONFLICT",
    "REASON_NOT_ENOUGH_SPACE",
    "REASON_PV_NOT_EXIST",
    "UNBOUND_IMMEDIATE",
    "Binder",
    "Evaluation",
    "NodeVolumes",
    "PodClaims",
    "classify",
    "eligible_nodes",
    "local_volume_nodes",
]
