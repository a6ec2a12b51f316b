"""The resource types the local API server serves: names, scope, verbs and subresources.

One ``ResourceType`` per group/version/resource. Built-in types are listed here; CustomResourceDefinitions add
theirs at run time through ``ResourceRegistry.add``. Discovery, OpenAPI, routing and storage all read this table,
so a type added here is served everywhere at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
FieldGetter = Callable[[Obj], str]

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def field_path(path: str, default: str = "") -> FieldGetter:
    """A field-selector getter for a dotted path: the value as a string (booleans lowercase), ``default`` if absent."""
    keys = path.split(".")
    if len(keys) == 2:
        # Most selectable fields are two levels down (spec.nodeName, status.phase, metadata.name): read them
        # without the walk, as watches with a field selector read them on every change of every object.
        outer, inner = keys

        def getter2(obj: Obj) -> str:
            if isinstance(obj, dict):
                parent = obj.get(outer)
                if isinstance(parent, dict):
                    value = parent.get(inner)
                    if value is None:
                        return default
                    if type(value) is str:
                        return value
                    if isinstance(value, bool):
                        return "true" if value else "false"
                    return str(value)
            return default

        return getter2

    def getter(obj: Obj) -> str:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, dict):
                return default
            cur = cur.get(k)
            if cur is None:
                return default
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return getter


_METADATA_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": field_path("metadata.name"),
    "metadata.namespace": field_path("metadata.namespace"),
}


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Subresources served beside the main resource: "status", "binding", "finalize", "scale".
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # metadata.generation increments on changes outside metadata (and outside status with a status subresource).
    has_generation: bool = False
    # PUT on a missing object creates it (Lease, upstream AllowCreateOnUpdate).
    allow_create_on_update: bool = False
    # PUT without metadata.resourceVersion is an unconditional overwrite (most core kinds); otherwise 422.
    allow_unconditional_update: bool = True
    # Fields usable in fieldSelector beyond metadata.name, metadata.namespace and the kind's own (``kinds/``).
    fields: dict[str, FieldGetter] = field(default_factory=dict, compare=False, hash=False)
    # Types sharing one storage (events in core/v1 and events.k8s.io/v1) name the same storage key.
    storage: str = ""
    # The CRD this type comes from, if any (its schema, printer columns and scale paths).
    crd: Obj | None = field(default=None, compare=False, hash=False)
    # Strategic merge patch is accepted only for built-in kinds.
    builtin: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        if self.crd is not None:
            return str(self.crd["spec"]["names"].get("singular") or self.kind.lower())
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def storage_key(self) -> str:
        """Identity of the stored collection (shared by types that are two views of one storage)."""
        return self.storage or f"{self.group}/{self.plural}"

    @property
    def status_subresource(self) -> bool:
        return "status" in self.subresources

    def _kind_fields(self) -> Mapping[str, FieldGetter]:
        # Imported here: the kinds' modules import this one.
        from kubesched.cluster.kinds import strategy_for

        return strategy_for(self).fields

    def field_getter(self, name: str) -> FieldGetter | None:
        found = _METADATA_FIELDS.get(name) or self.fields.get(name)
        return found if found is not None else self._kind_fields().get(name)

    def supported_fields(self) -> list[str]:
        return [*_METADATA_FIELDS, *self.fields, *self._kind_fields()]


def _core(plural: str, kind: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType("", "v1", plural, kind, namespaced, **kw)


def _t(group: str, version: str, plural: str, kind: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, **kw)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    # core/v1
    _core(
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        subresources=("status", "finalize"),
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    ),
    _core(
        "nodes",
        "Node",
        namespaced=False,
        short_names=("no",),
        subresources=("status",),
    ),
    _core(
        "pods",
        "Pod",
        short_names=("po",),
        categories=("all",),
        subresources=("status", "binding", "log"),
    ),
    _core("bindings", "Binding", verbs=("create",)),
    _core("events", "Event", short_names=("ev",), storage="core/events"),
    _core("configmaps", "ConfigMap", short_names=("cm",)),
    _core("secrets", "Secret"),
    _core("services", "Service", short_names=("svc",), categories=("all",), subresources=("status",)),
    _core("endpoints", "Endpoints", short_names=("ep",)),
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",), subresources=("token",)),
    _core(
        "replicationcontrollers",
        "ReplicationController",
        short_names=("rc",),
        categories=("all",),
        subresources=("status", "scale"),
        has_generation=True,
    ),
    _core(
        "persistentvolumes",
        "PersistentVolume",
        namespaced=False,
        short_names=("pv",),
        subresources=("status",),
    ),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), subresources=("status",)),
    _core("limitranges", "LimitRange", short_names=("limits",)),
    _core("resourcequotas", "ResourceQuota", short_names=("quota",), subresources=("status",)),
    _core("podtemplates", "PodTemplate"),
    # apps/v1
    _t(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        short_names=("deploy",),
        categories=("all",),
        subresources=("status", "scale"),
        has_generation=True,
    ),
    _t(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        short_names=("rs",),
        categories=("all",),
        subresources=("status", "scale"),
        has_generation=True,
    ),
    _t(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        short_names=("sts",),
        categories=("all",),
        subresources=("status", "scale"),
        has_generation=True,
    ),
    _t(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
        has_generation=True,
    ),
    _t("apps", "v1", "controllerrevisions", "ControllerRevision"),
    # coordination.k8s.io/v1
    _t("coordination.k8s.io", "v1", "leases", "Lease", allow_create_on_update=True),
    # events.k8s.io/v1: a second view of core/v1 events
    _t("events.k8s.io", "v1", "events", "Event", short_names=("ev",), storage="core/events"),
    # policy/v1
    _t(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        short_names=("pdb",),
        subresources=("status",),
        has_generation=True,
    ),
    # scheduling.k8s.io/v1
    _t("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False, short_names=("pc",)),
    # storage.k8s.io/v1
    _t("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short_names=("sc",)),
    _t("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False),
    _t("storage.k8s.io", "v1", "csinodes", "CSINode", namespaced=False),
    _t("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity"),
    _t(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "VolumeAttachment",
        namespaced=False,
        subresources=("status",),
    ),
    # resource.k8s.io/v1 (dynamic resource allocation)
    _t("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False, has_generation=True),
    _t("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", subresources=("status",)),
    _t("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate"),
    _t("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False),
    # rbac.authorization.k8s.io/v1 (evaluated by cluster/auth/rbac.py)
    _t("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _t("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _t("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _t("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    # authentication.k8s.io/v1 and authorization.k8s.io/v1: create-only reviews, answered and never stored
    _t("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False, verbs=("create",)),
    _t(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        namespaced=False,
        verbs=("create",),
    ),
    _t(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        namespaced=False,
        verbs=("create",),
    ),
    _t(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        namespaced=False,
        verbs=("create",),
    ),
    _t(
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        verbs=("create",),
    ),
    _t(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        namespaced=False,
        verbs=("create",),
    ),
    # apiextensions.k8s.io/v1
    _t(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=("status",),
        has_generation=True,
    ),
)


class ResourceRegistry:
    """The served types, indexed by (group, version, plural); CRDs come and go at run time."""

    def __init__(self, types: Iterable[ResourceType] = BUILTIN_TYPES) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self.generation = 0  # bumps whenever the set changes, so discovery and OpenAPI caches know to rebuild
        for t in types:
            self.add(t)

    def add(self, rtype: ResourceType) -> None:
        self._by_gvr[(rtype.group, rtype.version, rtype.plural)] = rtype
        self.generation += 1

    def remove(self, group: str, version: str, plural: str) -> None:
        if self._by_gvr.pop((group, version, plural), None) is not None:
            self.generation += 1

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for t in self._by_gvr.values():
            if t.api_version == api_version and t.kind == kind:
                return t
        return None

    def all(self) -> list[ResourceType]:
        return list(self._by_gvr.values())

    def groups(self) -> dict[str, list[str]]:
        """group name → served versions, core group ("") included, in registration order."""
        out: dict[str, list[str]] = {}
        for t in self._by_gvr.values():
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [t for t in self._by_gvr.values() if t.group == group and t.version == version]
