"""Patch metadata of the built-in kinds: which lists merge by key, which are sets, which values are atomic.

It mirrors the markers on the upstream Go types (k8s.io/api ``patchStrategy``/``patchMergeKey`` for strategic
merge patch; ``listType``/``listMapKey``/``structType``/``mapType`` for server-side apply), only where a field
differs from the defaults:

- objects merge field by field (both engines);
- lists are replaced whole by a strategic merge patch, and are atomic (owned as one field) for server-side apply.

Custom resources get only the ``metadata`` part (their lists are atomic).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Schema = Mapping[str, "Field"]


@dataclass(frozen=True, slots=True)
class Field:
    """How one field is patched and tracked. ``of`` describes the value (object) or each item (list)."""

    # Strategic merge patch
    merge_key: str = ""  # a list of objects merged item by item on this key
    merge_set: bool = False  # a list of scalars merged as a set
    replace: bool = False  # an object replaced whole (patchStrategy=replace)
    # Server-side apply
    list_keys: tuple[str, ...] = ()  # listType=map with these keys
    list_set: bool = False  # listType=set
    atomic: bool = False  # the whole value is one field (structType/mapType=atomic, or a replaced object)
    item_atomic: bool = False  # each item of a list-map is one field (its struct is atomic)
    of: Schema | None = None


DEFAULT = Field()
ATOMIC = Field(atomic=True)
EMPTY: Schema = {}


def keyed(key: str, *more_keys: str, of: Schema | None = None, item_atomic: bool = False) -> Field:
    """A list of objects merged by ``key`` (SMP) and keyed by ``key`` plus ``more_keys`` (SSA)."""
    return Field(merge_key=key, list_keys=(key, *more_keys), of=of, item_atomic=item_atomic)


def keyed_for_apply(*keys: str, of: Schema | None = None) -> Field:
    """A list that is a map for server-side apply but replaced whole by a strategic merge patch."""
    return Field(list_keys=keys, of=of)


def obj(of: Schema, *, atomic: bool = False) -> Field:
    return Field(of=of, atomic=atomic)


SCALAR_SET = Field(merge_set=True, list_set=True)

# Defaults that upstream fills for list-map key fields a client may omit (server-side apply keys items by them).
LIST_KEY_DEFAULTS: Mapping[str, object] = {"protocol": "TCP"}

OBJECT_META: Schema = {
    "finalizers": SCALAR_SET,
    "ownerReferences": keyed("uid", item_atomic=True),
}

LABEL_SELECTOR = ATOMIC
CONDITIONS = keyed("type")

_ENV_VAR: Schema = {
    "valueFrom": obj(
        {
            "configMapKeyRef": ATOMIC,
            "secretKeyRef": ATOMIC,
            "fieldRef": ATOMIC,
            "resourceFieldRef": ATOMIC,
            "fileKeyRef": ATOMIC,
        }
    )
}

CONTAINER: Schema = {
    "ports": keyed("containerPort", "protocol"),
    "env": keyed("name", of=_ENV_VAR),
    "volumeMounts": keyed("mountPath"),
    "volumeDevices": keyed("devicePath"),
    "resources": obj({"claims": keyed_for_apply("name")}),
}

POD_SPEC: Schema = {
    "volumes": keyed("name"),  # upstream adds retainKeys: handled wherever a patch carries $retainKeys
    "initContainers": keyed("name", of=CONTAINER),
    "containers": keyed("name", of=CONTAINER),
    "ephemeralContainers": keyed("name", of=CONTAINER),
    "imagePullSecrets": keyed("name", item_atomic=True),
    "hostAliases": keyed("ip"),
    "topologySpreadConstraints": keyed(
        "topologyKey", "whenUnsatisfiable", of={"labelSelector": LABEL_SELECTOR}
    ),
    "schedulingGates": keyed("name"),
    "resourceClaims": keyed("name"),
    "nodeSelector": ATOMIC,
    "affinity": obj({"nodeAffinity": obj({"requiredDuringSchedulingIgnoredDuringExecution": ATOMIC})}),
}

POD_STATUS: Schema = {
    "conditions": CONDITIONS,
    "podIPs": keyed("ip"),
    "hostIPs": Field(merge_key="ip"),  # atomic for server-side apply
    "resourceClaimStatuses": keyed("name"),
}

POD_TEMPLATE_SPEC: Schema = {"metadata": obj(OBJECT_META), "spec": obj(POD_SPEC)}


def _root(spec: Schema | None = None, status: Schema | None = None, **other: Field) -> Schema:
    root: dict[str, Field] = {"metadata": obj(OBJECT_META)}
    if spec is not None:
        root["spec"] = obj(spec)
    if status is not None:
        root["status"] = obj(status)
    root.update(other)
    return root


# Deployment, ReplicaSet, StatefulSet, DaemonSet: an atomic selector, a pod template, conditions keyed by type.
_WORKLOAD = _root(
    {"selector": LABEL_SELECTOR, "template": obj(POD_TEMPLATE_SPEC)}, {"conditions": CONDITIONS}
)


_OBJECT_REFERENCE = ATOMIC  # ObjectReference is structType=atomic

KINDS: Mapping[str, Schema] = {
    "Pod": _root(POD_SPEC, POD_STATUS),
    "PodTemplate": _root(template=obj(POD_TEMPLATE_SPEC)),
    "Node": _root({"podCIDRs": SCALAR_SET}, {"conditions": CONDITIONS, "addresses": keyed("type")}),
    "Service": _root({"ports": keyed("port", "protocol"), "selector": ATOMIC}, {"conditions": CONDITIONS}),
    "Namespace": _root(status={"conditions": CONDITIONS}),
    "ServiceAccount": _root(secrets=keyed("name", item_atomic=True)),
    "PersistentVolumeClaim": _root(status={"conditions": CONDITIONS}),
    "ReplicationController": _root(
        {"selector": ATOMIC, "template": obj(POD_TEMPLATE_SPEC)}, {"conditions": CONDITIONS}
    ),
    "Deployment": _WORKLOAD,
    "ReplicaSet": _WORKLOAD,
    "StatefulSet": _WORKLOAD,
    "DaemonSet": _WORKLOAD,
    "Job": _root({"selector": LABEL_SELECTOR, "template": obj(POD_TEMPLATE_SPEC)}),
    "CronJob": _root({"jobTemplate": obj({"spec": obj({"template": obj(POD_TEMPLATE_SPEC)})})}),
    "PodDisruptionBudget": _root({"selector": Field(replace=True, atomic=True)}, {"conditions": CONDITIONS}),
    # core/v1 and events.k8s.io/v1 events share a kind name; their reference fields are atomic ObjectReferences.
    "Event": _root(involvedObject=_OBJECT_REFERENCE, regarding=_OBJECT_REFERENCE, related=_OBJECT_REFERENCE),
    "Binding": _root(target=_OBJECT_REFERENCE),
}

# Kinds with nothing special outside metadata (ConfigMap, Secret, Lease, ...), and every custom resource.
GENERIC: Schema = _root()


def schema_for(kind: str, *, builtin: bool = True) -> Schema:
    """The root schema of ``kind``; custom resources (``builtin=False``) only get the metadata rules."""
    if not builtin:
        return GENERIC
    return KINDS.get(kind, GENERIC)
