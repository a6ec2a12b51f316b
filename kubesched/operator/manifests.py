"""The scheduler's static pod manifest, as upstream's ``bindata/assets/kube-scheduler/pod.yaml`` describes it,
for the kubesched scheduler and the local cluster's process kubelet.

- Host network, a kubeconfig instead of a service account (``automountServiceAccountToken: false``); every file it
  reads comes from the revision's resource folder, a hostPath
  ``/etc/kubernetes/static-pod-resources/kube-scheduler-pod-REVISION`` mounted at
  ``/etc/kubernetes/static-pod-resources``. ``REVISION`` is replaced by the installer, as upstream's.
- ``--config`` (whose ``clientConnection.kubeconfig`` names the kubeconfig), and the same kubeconfig for
  ``--kubeconfig`` (a config that names none) and for the secure port's delegated authentication and
  authorization (``--authentication-kubeconfig``/``--authorization-kubeconfig``).
- The secure port (10259 by default) is bound to the node's own address (``$(HOST_IP)`` from ``status.hostIP``):
  the local cluster runs its control-plane nodes as 127.0.1.N on one machine, where 0.0.0.0:10259 could be bound
  only once. Liveness and readiness probe ``/healthz`` over HTTPS at that address.
- ``-v`` from ``spec.logLevel``: Normal 2, Debug 4, Trace 6, TraceAll 10 (upstream's operand mapping).
- The serving certificate from the revisioned secret ``serving-cert`` when it exists, else the scheduler's own
  self-signed pair.
"""

from __future__ import annotations

from typing import Any

import yaml

from kubesched.operator import contract as c

Obj = dict[str, Any]

DEFAULT_IMAGE = "kubesched"  # what the local cluster's control-plane kubelets run as processes
DEFAULT_SECURE_PORT = 10259
CONTAINER_NAME = "kube-scheduler"
IN_POD_RESOURCE_DIR = "/etc/kubernetes/static-pod-resources"  # where the revision's folder is mounted
CONFIG_PATH = f"{IN_POD_RESOURCE_DIR}/configmaps/{c.CONFIG_CONFIGMAP}/config.yaml"
KUBECONFIG_PATH = f"{IN_POD_RESOURCE_DIR}/configmaps/{c.KUBECONFIG_CONFIGMAP}/kubeconfig"
CA_BUNDLE_PATH = f"{IN_POD_RESOURCE_DIR}/configmaps/{c.SERVICEACCOUNT_CA_CONFIGMAP}/ca-bundle.crt"
TOKEN_PATH = f"{IN_POD_RESOURCE_DIR}/secrets/{c.CLIENT_TOKEN_SECRET}/token"
SERVING_CERT_DIR = f"{IN_POD_RESOURCE_DIR}/secrets/{c.SERVING_CERT_SECRET}"
REVISION_PLACEHOLDER = "REVISION"

LOG_LEVELS: dict[str, int] = {"": 2, "Normal": 2, "Debug": 4, "Trace": 6, "TraceAll": 10}


class ManifestError(ValueError):
    """A setting the manifest cannot be built from (an unknown logLevel, a port out of range)."""


def verbosity(log_level: str | None) -> int:
    """The scheduler's ``-v`` for ``spec.logLevel``."""
    level = log_level or ""
    if level not in LOG_LEVELS:
        raise ManifestError(
            f"spec.logLevel {level!r} not recognized: use one of {', '.join(k for k in LOG_LEVELS if k)}"
        )
    return LOG_LEVELS[level]


def scheduler_pod(
    *,
    image: str = DEFAULT_IMAGE,
    namespace: str = c.OPERAND_NAMESPACE,
    secure_port: int = DEFAULT_SECURE_PORT,
    log_level: str | None = "Normal",
    serving_cert: bool = False,
    host_resource_dir: str = c.RESOURCE_DIR,
    extra_args: list[str] | None = None,
) -> Obj:
    """The static pod of one revision (``REVISION`` still in it) as a dict."""
    if not 1 <= secure_port <= 65535:
        raise ManifestError(f"secure port {secure_port} out of range 1-65535")
    args = [
        f"--config={CONFIG_PATH}",
        f"--kubeconfig={KUBECONFIG_PATH}",
        f"--authentication-kubeconfig={KUBECONFIG_PATH}",
        f"--authorization-kubeconfig={KUBECONFIG_PATH}",
        "--bind-address=$(HOST_IP)",
        f"--secure-port={secure_port}",
    ]
    if serving_cert:
        args += [
            f"--tls-cert-file={SERVING_CERT_DIR}/tls.crt",
            f"--tls-private-key-file={SERVING_CERT_DIR}/tls.key",
        ]
    args.append(f"-v={verbosity(log_level)}")
    args += extra_args or []

    def probe(initial_delay: int, period: int) -> Obj:
        return {
            "httpGet": {"scheme": "HTTPS", "port": secure_port, "path": "/healthz"},
            "initialDelaySeconds": initial_delay,
            "periodSeconds": period,
            "timeoutSeconds": 10,
        }

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": c.STATIC_POD_NAME,
            "namespace": namespace,
            "labels": {
                "app": "openshift-kube-scheduler",
                "scheduler": "true",
                "revision": REVISION_PLACEHOLDER,
            },
            "annotations": {"kubectl.kubernetes.io/default-container": CONTAINER_NAME},
        },
        "spec": {
            "hostNetwork": True,
            "automountServiceAccountToken": False,
            "priorityClassName": "system-node-critical",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": CONTAINER_NAME,
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["kubesched", "scheduler"],
                    "args": args,
                    "env": [{"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
                    "ports": [{"name": "https", "containerPort": secure_port, "hostPort": secure_port}],
                    "resources": {"requests": {"cpu": "15m", "memory": "50Mi"}},
                    # Upstream waits 45 s before either probe; readiness starts sooner here so that a revision
                    # counts as installed as soon as the scheduler serves /healthz.
                    "livenessProbe": probe(45, 10),
                    "readinessProbe": probe(3, 5),
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "volumeMounts": [
                        {"name": "resource-dir", "mountPath": IN_POD_RESOURCE_DIR, "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "resource-dir",
                    "hostPath": {
                        "path": f"{host_resource_dir}/{c.POD_CONFIGMAP}-{REVISION_PLACEHOLDER}",
                        "type": "Directory",
                    },
                }
            ],
        },
    }


def bootstrap_scheduler_pod(
    *,
    image: str = DEFAULT_IMAGE,
    config_host_path: str = "/etc/kubernetes/bootstrap-configs",
    config_file_name: str = "kube-scheduler-config.yaml",
    secrets_host_path: str = "/etc/kubernetes/bootstrap-secrets",
    secure_port: int = DEFAULT_SECURE_PORT,
) -> Obj:
    """The bootstrap control plane's scheduler (``bootstrap-kube-scheduler`` in kube-system), as upstream's
    render writes it, except that it runs on the rendered config (upstream's runs on flags): the bootstrap and the
    operator-installed scheduler then contend for one Lease (upstream's bug 2062459 was two of them at once)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "bootstrap-kube-scheduler",
            "namespace": "kube-system",
            "labels": {"openshift.io/control-plane": "true", "openshift.io/component": "scheduler"},
        },
        "spec": {
            "hostNetwork": True,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": CONTAINER_NAME,
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["kubesched", "scheduler"],
                    "args": [
                        f"--config=/etc/kubernetes/config/{config_file_name}",
                        "--kubeconfig=/etc/kubernetes/secrets/kubeconfig",
                        "--authentication-kubeconfig=/etc/kubernetes/secrets/kubeconfig",
                        "--authorization-kubeconfig=/etc/kubernetes/secrets/kubeconfig",
                        "--bind-address=$(HOST_IP)",
                        f"--secure-port={secure_port}",
                        "-v=2",
                    ],
                    "env": [{"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
                    "resources": {"requests": {"cpu": "15m", "memory": "50Mi"}},
                    "volumeMounts": [
                        {"name": "secrets", "mountPath": "/etc/kubernetes/secrets", "readOnly": True},
                        {"name": "config", "mountPath": "/etc/kubernetes/config", "readOnly": True},
                    ],
                }
            ],
            "volumes": [
                {"name": "secrets", "hostPath": {"path": secrets_host_path}},
                {"name": "config", "hostPath": {"path": config_host_path}},
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Quotes strings holding the revision placeholder: the installer replaces ``REVISION`` in the text, and an
    unquoted ``revision: 3`` would be a number where a label needs a string."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if REVISION_PLACEHOLDER in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(obj: Obj) -> str:
    """YAML of a manifest; the same object always gives the same text."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


__all__ = [
    "CONFIG_PATH",
    "DEFAULT_IMAGE",
    "DEFAULT_SECURE_PORT",
    "KUBECONFIG_PATH",
    "LOG_LEVELS",
    "ManifestError",
    "bootstrap_scheduler_pod",
    "scheduler_pod",
    "to_yaml",
    "verbosity",
]
