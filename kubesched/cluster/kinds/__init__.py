"""Per-kind behaviour of the served types: one strategy per (group, resource), as upstream's registry has one
``strategy.go`` per kind. Kinds not listed get ``DEFAULT`` (built-in) or ``CUSTOM_RESOURCE`` (from a CRD).

Where each kind's behaviour lives:

- ``pods.py`` defaults, priority admission, graceful deletion, field selectors, printer; ``bindings.py`` the
  binding subresource
- ``nodes.py``, ``namespaces.py`` (with the namespace lifecycle), ``services.py``, ``events.py`` (two views),
  ``leases.py``, ``configmaps.py`` (and Secrets), ``workloads.py`` (apps/v1, ReplicationControllers),
  ``priorityclasses.py``, ``customresourcedefinitions.py``, ``customresources.py``, ``resource.py``
  (resource.k8s.io printer columns)
- ``strategy.py`` the hooks and the plain kind's behaviour; ``printing.py`` helpers of the table printers
"""

from __future__ import annotations

from kubesched.cluster.kinds import (
    configmaps,
    customresourcedefinitions,
    customresources,
    disruptionbudgets,
    events,
    leases,
    namespaces,
    nodes,
    pods,
    priorityclasses,
    rbac,
    resource,
    services,
    storage,
    workloads,
)
from kubesched.cluster.kinds.strategy import DEFAULT, Strategy
from kubesched.cluster.resources import ResourceType

CUSTOM_RESOURCE: Strategy = customresources.STRATEGY

STRATEGIES: dict[tuple[str, str], Strategy] = {
    ("", "pods"): pods.STRATEGY,
    ("", "nodes"): nodes.STRATEGY,
    ("", "namespaces"): namespaces.STRATEGY,
    ("", "services"): services.STRATEGY,
    ("", "events"): events.CORE,
    ("events.k8s.io", "events"): events.V1,
    ("", "configmaps"): configmaps.CONFIGMAP,
    ("", "secrets"): configmaps.SECRET,
    ("", "serviceaccounts"): workloads.SERVICE_ACCOUNT,
    ("", "replicationcontrollers"): workloads.OWNER,
    ("apps", "deployments"): workloads.DEPLOYMENT,
    ("apps", "replicasets"): workloads.REPLICASET,
    ("apps", "statefulsets"): workloads.STATEFULSET,
    ("apps", "daemonsets"): workloads.OWNER,
    ("coordination.k8s.io", "leases"): leases.STRATEGY,
    ("policy", "poddisruptionbudgets"): disruptionbudgets.STRATEGY,
    ("scheduling.k8s.io", "priorityclasses"): priorityclasses.STRATEGY,
    ("resource.k8s.io", "resourceclaims"): resource.CLAIM,
    ("resource.k8s.io", "resourceslices"): resource.SLICE,
    ("storage.k8s.io", "storageclasses"): storage.STORAGE_CLASS,
    ("", "persistentvolumes"): storage.PERSISTENT_VOLUME,
    ("", "persistentvolumeclaims"): storage.PERSISTENT_VOLUME_CLAIM,
    ("apiextensions.k8s.io", "customresourcedefinitions"): customresourcedefinitions.STRATEGY,
    ("rbac.authorization.k8s.io", "roles"): rbac.ROLE,
    ("rbac.authorization.k8s.io", "clusterroles"): rbac.ROLE,
    ("rbac.authorization.k8s.io", "rolebindings"): rbac.BINDING,
    ("rbac.authorization.k8s.io", "clusterrolebindings"): rbac.BINDING,
}


def strategy_for(rtype: ResourceType) -> Strategy:
    """The behaviour of ``rtype``'s kind (a dict lookup: called once or more per request)."""
    if rtype.crd is not None:
        return CUSTOM_RESOURCE
    return STRATEGIES.get((rtype.group, rtype.plural), DEFAULT)


__all__ = ["CUSTOM_RESOURCE", "DEFAULT", "STRATEGIES", "Strategy", "strategy_for"]
