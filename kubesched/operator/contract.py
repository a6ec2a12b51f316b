"""What the operator's controllers agree on: namespaces, object names, the revisioned inputs, and the shape of a
controller. The config side (observer, target config) writes the inputs listed here into the operand namespace;
the rollout side (revision, installer, status) copies them into numbered revisions and installs those on nodes.

Names follow upstream's cluster-kube-scheduler-operator, so the operator can stand in for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from kubesched.client.events import EventRecorder
from kubesched.client.rest import ApiClient

# -- namespaces (each changeable by a flag of ``kubesched operator``) ------------------------------------------
OPERATOR_NAMESPACE = "openshift-kube-scheduler-operator"
OPERAND_NAMESPACE = "openshift-kube-scheduler"
USER_CONFIG_NAMESPACE = "openshift-config"
MANAGED_CONFIG_NAMESPACE = "openshift-config-managed"

# -- the API ---------------------------------------------------------------------------------------------------
KUBESCHEDULER_API_VERSION = "operator.openshift.io/v1"
KUBESCHEDULER_PLURAL = "kubeschedulers"
SCHEDULER_CONFIG_API_VERSION = "config.openshift.io/v1"
SCHEDULER_CONFIG_PLURAL = "schedulers"
CLUSTEROPERATOR_API_VERSION = "config.openshift.io/v1"
CLUSTEROPERATOR_PLURAL = "clusteroperators"
SINGLETON_NAME = "cluster"  # KubeScheduler/cluster and Scheduler/cluster
CLUSTEROPERATOR_NAME = "kube-scheduler"

# -- the inputs the config side writes into the operand namespace -----------------------------------------------
POD_CONFIGMAP = (
    "kube-scheduler-pod"  # keys: pod.yaml (manifest, REVISION placeholder), version, forceRedeploymentReason
)
CONFIG_CONFIGMAP = "config"  # key: config.yaml (the merged, validated KubeSchedulerConfiguration)
KUBECONFIG_CONFIGMAP = "scheduler-kubeconfig"  # key: kubeconfig (credentials referenced by path)
SERVICEACCOUNT_CA_CONFIGMAP = "serviceaccount-ca"  # key: ca-bundle.crt
CLIENT_TOKEN_SECRET = "kube-scheduler-client-token"  # key: token (what the kubeconfig's tokenFile points at)
SERVING_CERT_SECRET = "serving-cert"  # keys: tls.crt, tls.key (the scheduler's secure port)

# (name, optional) of what each revision copies, as ``<name>-<N>``; the installer writes them under
# ``<resource-dir>/kube-scheduler-pod-<N>/{configmaps,secrets}/<name>/<key>``.
REVISION_CONFIGMAPS: tuple[tuple[str, bool], ...] = (
    (POD_CONFIGMAP, False),
    (CONFIG_CONFIGMAP, False),
    (KUBECONFIG_CONFIGMAP, False),
    (SERVICEACCOUNT_CA_CONFIGMAP, True),
)
REVISION_SECRETS: tuple[tuple[str, bool], ...] = (
    (CLIENT_TOKEN_SECRET, False),
    (SERVING_CERT_SECRET, True),
)
REVISION_STATUS_PREFIX = "revision-status-"  # configmap revision-status-<N>: keys revision, status, reason
STATIC_POD_NAME = "kube-scheduler"  # the manifest's pod name; its mirror pod is kube-scheduler-<node>
INSTALLER_POD_PREFIX = "installer-"  # installer-<N>-<node>
RESOURCE_DIR = "/etc/kubernetes/static-pod-resources"
POD_MANIFEST_DIR = "/etc/kubernetes/manifests"
LEASE_NAME = "openshift-kube-scheduler-operator-lock"  # the operator's own leader-election Lease


@dataclass
class OperatorContext:
    """What every controller is handed: one client, one event recorder, the namespaces in use."""

    client: ApiClient
    recorder: EventRecorder
    operator_namespace: str = OPERATOR_NAMESPACE
    operand_namespace: str = OPERAND_NAMESPACE
    user_config_namespace: str = USER_CONFIG_NAMESPACE
    # The KubeScheduler object the event recorder attributes operator events to (set once it exists).
    extra: dict[str, object] = field(default_factory=dict)


class Controller(Protocol):
    """A level-based controller: ``sync`` reads what it needs, computes the desired state from it and writes the
    difference. It is called on every relevant change and on a periodic resync, so it must be idempotent; an
    exception is an error the runtime logs, counts and retries with back-off."""

    name: str

    async def sync(self, ctx: OperatorContext) -> None: ...


# -- events ------------------------------------------------------------------------------------------------------
OPERATOR_DEPLOYMENT = "openshift-kube-scheduler-operator"  # what operator events are about, as upstream's


def event_regarding(ctx: OperatorContext) -> dict[str, str]:
    """The object every operator event is recorded about: ``ctx.extra["regarding"]`` when set (the operator's own
    pod or Deployment), else the operator Deployment in the operator namespace, so the events land there
    (``kubectl get events -n <operator namespace>``) as upstream's do."""
    ref = ctx.extra.get("regarding")
    if isinstance(ref, dict):
        return {str(k): str(v) for k, v in ref.items()}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "namespace": ctx.operator_namespace,
        "name": OPERATOR_DEPLOYMENT,
    }
