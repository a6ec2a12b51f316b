"""What the PersistentVolume controller and the scheduler's volume plugins both need to know about PVs and PVCs
(upstream's ``k8s.io/component-helpers/storage/volume``): storage classes of claims and volumes, the annotations
the binding protocol writes, and which available volume a claim should get (the smallest that fits).

Objects are plain dicts as the API serves them; nothing here writes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubesched.apimachinery.labels import LabelSelector, Requirement, SelectorError
from kubesched.apimachinery.quantity import QuantityError, parse_quantity

Obj = Mapping[str, Any]

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def annotations_of(obj: Obj) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def claim_class(claim: Obj) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation wins over ``spec.storageClassName``."""
    ann = annotations_of(claim)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str(_spec(claim).get("storageClassName") or "")


def volume_class(pv: Obj) -> str:
    """``GetPersistentVolumeClass``."""
    ann = annotations_of(pv)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str(_spec(pv).get("storageClassName") or "")


def quantity_bytes(value: Any) -> int:
    """A storage quantity as whole bytes, rounded up (``Quantity.Value()``); unparsable counts as 0."""
    if value is None:
        return 0
    try:
        return math.ceil(parse_quantity(value))
    except (QuantityError, ValueError, TypeError):
        return 0


def claim_request(claim: Obj) -> int:
    return quantity_bytes(((_spec(claim).get("resources") or {}).get("requests") or {}).get("storage"))


def has_storage_request(claim: Obj) -> bool:
    return "storage" in ((_spec(claim).get("resources") or {}).get("requests") or {})


def volume_capacity(pv: Obj) -> int:
    return quantity_bytes((_spec(pv).get("capacity") or {}).get("storage"))


def claim_key(claim: Obj) -> tuple[str, str]:
    meta = _meta(claim)
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def is_claim_fully_bound(claim: Obj) -> bool:
    """Bound as the scheduler counts it: a volume name *and* ``bind-completed`` (the PV controller's mark)."""
    return bool(_spec(claim).get("volumeName")) and ANN_BIND_COMPLETED in annotations_of(claim)


def is_volume_bound_to_claim(pv: Obj, claim: Obj) -> bool:
    """``IsVolumeBoundToClaim``: the PV's claimRef names this claim (and its uid, when the ref has one)."""
    ref = _spec(pv).get("claimRef")
    if not ref:
        return False
    meta = _meta(claim)
    if ref.get("name") != meta.get("name") or (ref.get("namespace") or "") != (meta.get("namespace") or ""):
        return False
    uid = ref.get("uid")
    return not uid or uid == meta.get("uid")


def access_modes_ok(claim: Obj, pv: Obj) -> bool:
    """``CheckAccessModes``: the PV offers every mode the claim asks for."""
    offered = set(_spec(pv).get("accessModes") or ())
    return all(m in offered for m in _spec(claim).get("accessModes") or ())


def volume_mode_mismatch(claim: Obj, pv: Obj) -> bool:
    """``CheckVolumeModeMismatches``: both default to Filesystem."""
    return (_spec(claim).get("volumeMode") or "Filesystem") != (_spec(pv).get("volumeMode") or "Filesystem")


def required_node_affinity(pv: Obj) -> Obj | None:
    """``spec.nodeAffinity.required`` of a PV (a ``v1.NodeSelector``), or None when it has none."""
    na = _spec(pv).get("nodeAffinity") or {}
    req = na.get("required")
    return req if req is not None else None


def node_selector_matches(selector: Obj, labels: Mapping[str, str], node_name: str = "") -> bool:
    """A ``v1.NodeSelector`` (terms ORed, expressions ANDed) against one node; empty terms match nothing."""
    for term in selector.get("nodeSelectorTerms") or ():
        exprs = term.get("matchExpressions") or ()
        fields = term.get("matchFields") or ()
        if not exprs and not fields:
            continue
        try:
            ok = all(Requirement.from_node_selector(e).matches(labels) for e in exprs)
        except SelectorError:
            ok = False
        for f in fields:
            if not ok:
                break
            value = node_name if f.get("key") == "metadata.name" else ""
            values = list(f.get("values") or ())
            op = f.get("operator")
            ok = (value in values) if op == "In" else (value not in values) if op == "NotIn" else False
        if ok:
            return True
    return False


def volume_fits_node(pv: Obj, labels: Mapping[str, str], node_name: str = "") -> bool:
    """``CheckNodeAffinity``: a PV without required node affinity fits every node."""
    req = required_node_affinity(pv)
    return req is None or node_selector_matches(req, labels, node_name)


def claim_selector(claim: Obj) -> LabelSelector | None:
    """The claim's ``spec.selector`` (None: no selector); a bad selector raises ``SelectorError``."""
    sel = _spec(claim).get("selector")
    if sel is None:
        return None
    return LabelSelector.from_dict(sel)


def statically_eligible(pv: Obj, claim: Obj, selector: LabelSelector | None, cls: str, request: int) -> str:
    """How ``pv`` relates to ``claim`` before its node affinity is looked at, in ``FindMatchingVolume``'s order:
    "" (not a candidate), "prebound" (its claimRef names the claim) or "candidate" (available and fitting)."""
    spec = _spec(pv)
    ref = spec.get("claimRef")
    prebound = bool(ref) and is_volume_bound_to_claim(pv, claim)
    if ref and not prebound:
        return ""
    if volume_capacity(pv) < request:
        return ""
    if volume_mode_mismatch(claim, pv):
        return ""
    if _meta(pv).get("deletionTimestamp"):
        return ""
    if prebound:
        return "prebound"
    if (pv.get("status") or {}).get("phase") != "Available":
        return ""
    if selector is not None and not selector.matches(_meta(pv).get("labels") or {}):
        return ""
    if volume_class(pv) != cls:
        return ""
    if not access_modes_ok(claim, pv):
        return ""
    return "candidate"


def find_matching_volume(
    claim: Obj,
    volumes: Iterable[Obj],
    *,
    node: tuple[Mapping[str, str], str] | None = None,
    excluded: Sequence[str] | set[str] = (),
    delay_binding: bool = False,
) -> Obj | None:
    """``FindMatchingVolume``: the volume pre-bound to ``claim``, else the smallest available one that fits
    (class, size, access and volume modes, selector, and ``node``'s labels and name when given). The PV
    controller passes no node and skips delay-binding claims' volumes (the scheduler picks those)."""
    try:
        selector = claim_selector(claim)
    except SelectorError:
        return None
    cls = claim_class(claim)
    request = claim_request(claim)
    best: Obj | None = None
    best_size = 0
    for pv in volumes:
        if _meta(pv).get("name") in excluded:
            continue
        kind = statically_eligible(pv, claim, selector, cls, request)
        if not kind:
            continue
        fits = node is None or volume_fits_node(pv, node[0], node[1])
        if kind == "prebound":
            return pv if fits else None
        if node is None and delay_binding:
            continue
        if not fits:
            continue
        size = volume_capacity(pv)
        if best is None or size < best_size:
            best, best_size = pv, size
    return best


def topology_terms_match(terms: Sequence[Obj] | None, labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms`` (a StorageClass's ``allowedTopologies``): no terms match everything; a
    term matches when every ``matchLabelExpressions`` entry has the node's value among its values."""
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") or ()
        if all(labels.get(e.get("key", "")) in (e.get("values") or ()) for e in exprs):
            return True
    return False


def pod_claim_names(pod: Obj) -> list[str]:
    """The claims a pod's volumes use: ``persistentVolumeClaim.claimName`` and generic ephemeral volumes
    (named ``<pod>-<volume>``)."""
    names: list[str] = []
    pod_name = _meta(pod).get("name") or ""
    for vol in _spec(pod).get("volumes") or ():
        pvc = vol.get("persistentVolumeClaim")
        if pvc is not None:
            names.append(str(pvc.get("claimName") or ""))
        elif vol.get("ephemeral") is not None:
            names.append(f"{pod_name}-{vol.get('name') or ''}")
    return names


def binding_mode(storage_class: Obj | None) -> str:
    if storage_class is None:
        return ""
    return str(storage_class.get("volumeBindingMode") or IMMEDIATE)


__all__ = [
    "ANN_BETA_STORAGE_CLASS",
    "ANN_BETA_STORAGE_PROVISIONER",
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_DEFAULT_CLASS",
    "ANN_DYNAMICALLY_PROVISIONED",
    "ANN_SELECTED_NODE",
    "ANN_STORAGE_PROVISIONER",
    "IMMEDIATE",
    "NOT_SUPPORTED_PROVISIONER",
    "READ_WRITE_ONCE_POD",
    "WAIT_FOR_FIRST_CONSUMER",
    "access_modes_ok",
    "annotations_of",
    "binding_mode",
    "claim_class",
    "claim_key",
    "claim_request",
    "claim_selector",
    "find_matching_volume",
    "has_storage_request",
    "is_claim_fully_bound",
    "is_volume_bound_to_claim",
    "node_selector_matches",
    "pod_claim_names",
    "quantity_bytes",
    "required_node_affinity",
    "statically_eligible",
    "topology_terms_match",
    "volume_capacity",
    "volume_class",
    "volume_fits_node",
    "volume_mode_mismatch",
]
