"""The RBAC objects a fresh kubeadm cluster has: upstream's bootstrap ClusterRoles and ClusterRoleBindings
(``bootstrappolicy``) and the kube-system Roles kube-scheduler and kube-controller-manager need.

Rules are written down as the API shows them on a 1.36 cluster (``kubectl get clusterrole -o yaml``). Objects
are created at start when missing and left alone when present, so an administrator's edits survive restarts
(upstream reconciles roles marked ``autoupdate``; we only add what is missing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.cluster import errors
from kubesched.cluster.auth.user import AUTHENTICATED, SERVICE_ACCOUNTS, SYSTEM_MASTERS, UNAUTHENTICATED

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

Obj = dict[str, Any]

RBAC = "rbac.authorization.k8s.io"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
KUBE_SCHEDULER_USER = "system:kube-scheduler"
KUBE_CONTROLLER_MANAGER_USER = "system:kube-controller-manager"

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
READ_UPDATE = ["get", "list", "patch", "update", "watch"]


def _r(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> Obj:
    rule: Obj = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _urls(verbs: list[str], urls: list[str]) -> Obj:
    return {"nonResourceURLs": urls, "verbs": verbs}


_EVENTS = _r(["create", "patch", "update"], ["", "events.k8s.io"], ["events"])


def _aggregated(target: str) -> Obj:
    return {
        "clusterRoleSelectors": [
            {"matchLabels": {f"rbac.authorization.k8s.io/aggregate-to-{target}": "true"}}
        ]
    }


def _agg_label(target: str) -> dict[str, str]:
    return {f"rbac.authorization.k8s.io/aggregate-to-{target}": "true"}


# name -> (rules, aggregationRule or None, extra labels)
CLUSTER_ROLES: dict[str, tuple[list[Obj], Obj | None, dict[str, str]]] = {
    "cluster-admin": ([_r(["*"], ["*"], ["*"]), _urls(["*"], ["*"])], None, {}),
    "admin": ([], _aggregated("admin"), {}),
    "edit": ([], _aggregated("edit"), _agg_label("admin")),
    "view": ([], _aggregated("view"), _agg_label("edit")),
    "system:aggregate-to-admin": (
        [
            _r(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
            _r(READ_WRITE, [RBAC], ["rolebindings", "roles"]),
        ],
        None,
        _agg_label("admin"),
    ),
    "system:aggregate-to-edit": (
        [
            _r(
                READ,
                [""],
                ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"],
            ),
            _r(["impersonate"], [""], ["serviceaccounts"]),
            _r(WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
            _r(["create"], [""], ["pods/eviction"]),
            _r(
                WRITE,
                [""],
                [
                    "configmaps",
                    "events",
                    "persistentvolumeclaims",
                    "replicationcontrollers",
                    "replicationcontrollers/scale",
                    "secrets",
                    "serviceaccounts",
                    "services",
                    "services/proxy",
                ],
            ),
            _r(["create"], [""], ["serviceaccounts/token"]),
            _r(
                WRITE,
                ["apps"],
                [
                    "daemonsets",
                    "deployments",
                    "deployments/rollback",
                    "deployments/scale",
                    "replicasets",
                    "replicasets/scale",
                    "statefulsets",
                    "statefulsets/scale",
                ],
            ),
            _r(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
            _r(WRITE, ["batch"], ["cronjobs", "jobs"]),
            _r(
                WRITE,
                ["extensions"],
                [
                    "daemonsets",
                    "deployments",
                    "deployments/rollback",
                    "deployments/scale",
                    "ingresses",
                    "networkpolicies",
                    "replicasets",
                    "replicasets/scale",
                    "replicationcontrollers/scale",
                ],
            ),
            _r(WRITE, ["policy"], ["poddisruptionbudgets"]),
            _r(WRITE, ["networking.k8s.io"], ["ingresses", "networkpolicies"]),
            _r(READ_WRITE, ["coordination.k8s.io"], ["leases"]),
        ],
        None,
        _agg_label("edit"),
    ),
    "system:aggregate-to-view": (
        [
            _r(
                READ,
                [""],
                [
                    "configmaps",
                    "endpoints",
                    "persistentvolumeclaims",
                    "persistentvolumeclaims/status",
                    "pods",
                    "replicationcontrollers",
                    "replicationcontrollers/scale",
                    "serviceaccounts",
                    "services",
                    "services/status",
                ],
            ),
            _r(
                READ,
                [""],
                [
                    "bindings",
                    "events",
                    "limitranges",
                    "namespaces/status",
                    "pods/log",
                    "pods/status",
                    "replicationcontrollers/status",
                    "resourcequotas",
                    "resourcequotas/status",
                ],
            ),
            _r(READ, [""], ["namespaces"]),
            _r(READ, ["discovery.k8s.io"], ["endpointslices"]),
            _r(
                READ,
                ["apps"],
                [
                    "controllerrevisions",
                    "daemonsets",
                    "daemonsets/status",
                    "deployments",
                    "deployments/scale",
                    "deployments/status",
                    "replicasets",
                    "replicasets/scale",
                    "replicasets/status",
                    "statefulsets",
                    "statefulsets/scale",
                    "statefulsets/status",
                ],
            ),
            _r(READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
            _r(READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
            _r(
                READ,
                ["extensions"],
                [
                    "daemonsets",
                    "daemonsets/status",
                    "deployments",
                    "deployments/scale",
                    "deployments/status",
                    "ingresses",
                    "ingresses/status",
                    "networkpolicies",
                    "replicasets",
                    "replicasets/scale",
                    "replicasets/status",
                    "replicationcontrollers/scale",
                ],
            ),
            _r(READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
            _r(READ, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
        ],
        None,
        _agg_label("view"),
    ),
    "system:auth-delegator": (
        [
            _r(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            _r(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
        ],
        None,
        {},
    ),
    "system:basic-user": (
        [
            _r(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            _r(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
        ],
        None,
        {},
    ),
    "system:discovery": (
        [
            _urls(
                ["get"],
                [
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )
        ],
        None,
        {},
    ),
    "system:public-info-viewer": (
        [_urls(["get"], ["/healthz", "/livez", "/readyz", "/version", "/version/"])],
        None,
        {},
    ),
    "system:monitoring": (
        [
            _urls(
                ["get"],
                [
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/metrics/slis",
                    "/readyz",
                    "/readyz/*",
                ],
            )
        ],
        None,
        {},
    ),
    "system:service-account-issuer-discovery": (
        [_urls(["get"], ["/.well-known/openid-configuration", "/openid/v1/jwks"])],
        None,
        {},
    ),
    "system:kube-scheduler": (
        [
            _EVENTS,
            _r(["create"], ["coordination.k8s.io"], ["leases"]),
            _r(["get", "update"], ["coordination.k8s.io"], ["leases"], ["kube-scheduler"]),
            _r(READ, [""], ["nodes"]),
            _r(["delete", "get", "list", "watch"], [""], ["pods"]),
            _r(["create"], [""], ["bindings", "pods/binding"]),
            _r(["patch", "update"], [""], ["pods/status"]),
            _r(READ, [""], ["replicationcontrollers", "services"]),
            _r(READ, ["apps", "extensions"], ["replicasets"]),
            _r(READ, ["apps"], ["statefulsets"]),
            _r(READ, ["policy"], ["poddisruptionbudgets"]),
            _r(READ, [""], ["persistentvolumeclaims", "persistentvolumes"]),
            _r(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            _r(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            _r(READ, ["storage.k8s.io"], ["csinodes"]),
            _r(READ, [""], ["namespaces"]),
            _r(READ, ["storage.k8s.io"], ["csidrivers"]),
            _r(READ, ["storage.k8s.io"], ["csistoragecapacities"]),
            _r(READ, ["storage.k8s.io"], ["volumeattachments"]),
            _r(READ, ["resource.k8s.io"], ["deviceclasses", "resourceclaims"]),
            # ReadUpdate as upstream: PreBind writes the allocation (PUT), Unreserve patches reservedFor.
            _r(READ_UPDATE, ["resource.k8s.io"], ["resourceclaims/status"]),
            _r(READ_WRITE, [""], ["pods/finalizers"]),
            _r(READ, ["resource.k8s.io"], ["resourceslices"]),
        ],
        None,
        {},
    ),
    "system:volume-scheduler": (
        [
            _r(READ_UPDATE, [""], ["persistentvolumes"]),
            _r(READ, ["storage.k8s.io"], ["storageclasses"]),
            _r(READ_UPDATE, [""], ["persistentvolumeclaims"]),
        ],
        None,
        {},
    ),
    "system:kube-controller-manager": (
        [
            _EVENTS,
            _r(["create"], ["coordination.k8s.io"], ["leases"]),
            _r(["get", "update"], ["coordination.k8s.io"], ["leases"], ["kube-controller-manager"]),
            _r(["create"], [""], ["secrets", "serviceaccounts"]),
            _r(["delete"], [""], ["secrets"]),
            _r(["get"], [""], ["configmaps", "namespaces", "secrets", "serviceaccounts"]),
            _r(["update"], [""], ["secrets", "serviceaccounts"]),
            _r(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            _r(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"]),
            _r(["list", "watch"], ["*"], ["*"]),
            _r(["create"], [""], ["serviceaccounts/token"]),
        ],
        None,
        {},
    ),
}


def _subject(kind: str, name: str, namespace: str = "") -> Obj:
    if kind == "ServiceAccount":
        return {"kind": kind, "name": name, "namespace": namespace}
    return {"apiGroup": RBAC, "kind": kind, "name": name}


# name -> (ClusterRole name, subjects)
CLUSTER_ROLE_BINDINGS: dict[str, tuple[str, list[Obj]]] = {
    "cluster-admin": ("cluster-admin", [_subject("Group", SYSTEM_MASTERS)]),
    "system:basic-user": ("system:basic-user", [_subject("Group", AUTHENTICATED)]),
    "system:discovery": ("system:discovery", [_subject("Group", AUTHENTICATED)]),
    "system:public-info-viewer": (
        "system:public-info-viewer",
        [_subject("Group", AUTHENTICATED), _subject("Group", UNAUTHENTICATED)],
    ),
    "system:kube-scheduler": ("system:kube-scheduler", [_subject("User", KUBE_SCHEDULER_USER)]),
    "system:volume-scheduler": ("system:volume-scheduler", [_subject("User", KUBE_SCHEDULER_USER)]),
    "system:kube-controller-manager": (
        "system:kube-controller-manager",
        [_subject("User", KUBE_CONTROLLER_MANAGER_USER)],
    ),
    "system:service-account-issuer-discovery": (
        "system:service-account-issuer-discovery",
        [_subject("Group", SERVICE_ACCOUNTS)],
    ),
}

# (namespace, name) -> rules
ROLES: dict[tuple[str, str], list[Obj]] = {
    ("kube-system", "extension-apiserver-authentication-reader"): [
        _r(READ, [""], ["configmaps"], ["extension-apiserver-authentication"])
    ],
    ("kube-system", "system::leader-locking-kube-scheduler"): [
        _r(["watch"], [""], ["configmaps"]),
        _r(["get", "update"], [""], ["configmaps"], ["kube-scheduler"]),
    ],
    ("kube-system", "system::leader-locking-kube-controller-manager"): [
        _r(["watch"], [""], ["configmaps"]),
        _r(["get", "update"], [""], ["configmaps"], ["kube-controller-manager"]),
    ],
}

# (namespace, name) -> (Role name, subjects)
ROLE_BINDINGS: dict[tuple[str, str], tuple[str, list[Obj]]] = {
    ("kube-system", "system::extension-apiserver-authentication-reader"): (
        "extension-apiserver-authentication-reader",
        [_subject("User", KUBE_CONTROLLER_MANAGER_USER), _subject("User", KUBE_SCHEDULER_USER)],
    ),
    ("kube-system", "system::leader-locking-kube-scheduler"): (
        "system::leader-locking-kube-scheduler",
        [_subject("User", KUBE_SCHEDULER_USER), _subject("ServiceAccount", "kube-scheduler", "kube-system")],
    ),
    ("kube-system", "system::leader-locking-kube-controller-manager"): (
        "system::leader-locking-kube-controller-manager",
        [
            _subject("User", KUBE_CONTROLLER_MANAGER_USER),
            _subject("ServiceAccount", "kube-controller-manager", "kube-system"),
            _subject("ServiceAccount", "leader-election-controller", "kube-system"),
        ],
    ),
}


def _meta(name: str, namespace: str = "", labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {
        "name": name,
        "labels": {**BOOTSTRAP_LABELS, **(labels or {})},
        "annotations": dict(AUTOUPDATE),
    }
    if namespace:
        meta["namespace"] = namespace
    return meta


def bootstrap_objects() -> list[tuple[str, Obj]]:
    """(plural, object) for every bootstrap RBAC object, roles before the bindings that name them."""
    out: list[tuple[str, Obj]] = []
    for name, (rules, aggregation, labels) in CLUSTER_ROLES.items():
        obj: Obj = {"metadata": _meta(name, labels=labels), "rules": rules}
        if aggregation is not None:
            obj["aggregationRule"] = aggregation
        out.append(("clusterroles", obj))
    for (ns, name), rules in ROLES.items():
        out.append(("roles", {"metadata": _meta(name, ns), "rules": rules}))
    for name, (role, subjects) in CLUSTER_ROLE_BINDINGS.items():
        ref = {"apiGroup": RBAC, "kind": "ClusterRole", "name": role}
        out.append(("clusterrolebindings", {"metadata": _meta(name), "roleRef": ref, "subjects": subjects}))
    for (ns, name), (role, subjects) in ROLE_BINDINGS.items():
        ref = {"apiGroup": RBAC, "kind": "Role", "name": role}
        out.append(("rolebindings", {"metadata": _meta(name, ns), "roleRef": ref, "subjects": subjects}))
    return out


def ensure_bootstrap_policy(api: ClusterApi) -> int:
    """Create the bootstrap objects that are missing; returns how many were created (0 on a restart)."""
    created = 0
    for plural, obj in bootstrap_objects():
        rtype = api.registry.get(RBAC, "v1", plural)
        if rtype is None:
            continue
        meta = obj["metadata"]
        ns = meta.get("namespace")
        if api.lookup(rtype, ns, meta["name"]) is not None:
            continue
        try:
            api.create(rtype, obj, ns, field_manager="kube-apiserver")
            created += 1
        except errors.ApiError as e:
            if e.code != 409:
                raise
    return created


AUTHENTICATION_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


def ensure_authentication_configmap(api: ClusterApi, client_ca_pem: bytes) -> bool:
    """Publish the client CA as kube-apiserver does: ``kube-system/extension-apiserver-authentication`` with
    ``client-ca-file``, which components' delegated authentication (kube-scheduler's secure port, kubesched's
    ``serving``) reads to verify client certificates. Creates it, or updates a stale CA; True when written."""
    rtype = api.registry.get("", "v1", "configmaps")
    if rtype is None:
        return False
    namespace, name = AUTHENTICATION_CONFIGMAP
    data = {"client-ca-file": client_ca_pem.decode()}
    current = api.lookup(rtype, namespace, name)
    if current is not None:
        if (current.obj.get("data") or {}).get("client-ca-file") == data["client-ca-file"]:
            return False
        body = {**current.obj, "data": {**(current.obj.get("data") or {}), **data}}
        api.update(rtype, body, namespace, name, field_manager="kube-apiserver")
        return True
    try:
        meta = {"name": name, "namespace": namespace}
        api.create(rtype, {"metadata": meta, "data": data}, namespace, field_manager="kube-apiserver")
    except errors.ApiError as e:
        if e.code != 409:
            raise
        return False
    return True
