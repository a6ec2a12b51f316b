"""``kubesched render``: what a new cluster's bootstrap control plane starts from, written with no cluster
(upstream's ``cluster-kube-scheduler-operator render``).

Outputs, under ``--asset-output-dir``:

- ``bootstrap-manifests/kube-scheduler-pod.yaml``: the bootstrap scheduler's static pod (``kube-system``), which
  reads its configuration from ``<--manifest-config-host-path>/<--manifest-config-file-name>`` and its
  kubeconfig from ``<--manifest-secrets-host-path>/kubeconfig`` on the bootstrap node;
- ``manifests/``: what installs the operator, applied in file-name order: the namespaces, the CRDs, the
  operator's ServiceAccount and ClusterRoleBinding, its Deployment (the kubesched image running
  ``kubesched operator`` on a control-plane node), and the ``KubeScheduler``/``Scheduler`` singletons.

``--config-output-file`` receives the bootstrap configuration: the operator's default configuration without its
``clientConnection`` (the bootstrap pod names its kubeconfig by flag), then each ``--config-override-files`` in
order, merged with library-go's rules and validated as the scheduler would. Its Lease is the one the
operator-installed schedulers take (``<operand namespace>/kube-scheduler``), so the bootstrap scheduler and its
successors never schedule at the same time.

Same inputs, same bytes: objects are written with a fixed key order and nothing depends on time or randomness.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from kubesched.operator import contract as c
from kubesched.operator import manifests
from kubesched.operator.crds import crd_texts
from kubesched.operator.merge import MergeError, merge_config
from kubesched.operator.targetconfig import InvalidConfig, default_config, render_config

Obj = dict[str, Any]

OPERATOR_NAME = c.OPERATOR_DEPLOYMENT
OPERATOR_CLUSTER_ROLE_BINDING = "system:openshift:operator:cluster-kube-scheduler-operator"


class RenderError(Exception):
    """A bad input (a missing file, an invalid override); the message is one line for the user."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--asset-output-dir", required=True, help="where bootstrap-manifests/ and manifests/ go")
    p.add_argument("--config-output-file", required=True, help="the bootstrap scheduler's configuration")
    p.add_argument(
        "--asset-input-dir",
        default=None,
        help="the installer's TLS assets; when given, ../auth/kubeconfig beside it must exist (as upstream)",
    )
    p.add_argument(
        "--config-override-files",
        action="append",
        default=[],
        metavar="FILE",
        help="sparse configuration merged over the bootstrap configuration, in order (repeatable)",
    )
    p.add_argument("--manifest-image", default=manifests.DEFAULT_IMAGE, help="the scheduler's image")
    p.add_argument(
        "--manifest-operator-image", default=None, help="the operator's image (default: --manifest-image)"
    )
    p.add_argument("--manifest-namespace", default=c.OPERAND_NAMESPACE, help="the scheduler's namespace")
    p.add_argument("--operator-namespace", default=c.OPERATOR_NAMESPACE, help="the operator's namespace")
    p.add_argument("--manifest-config-host-path", default="/etc/kubernetes/bootstrap-configs")
    p.add_argument("--manifest-config-file-name", default="kube-scheduler-config.yaml")
    p.add_argument("--manifest-secrets-host-path", default="/etc/kubernetes/bootstrap-secrets")
    p.add_argument(
        "--secure-port", type=int, default=manifests.DEFAULT_SECURE_PORT, help="the schedulers' port"
    )


def bootstrap_config(operand_namespace: str, overrides: list[tuple[str, str]]) -> str:
    """The bootstrap configuration text; ``overrides`` are (file name, text) pairs. Raises RenderError."""
    default = default_config(operand_namespace)
    default.pop("clientConnection", None)
    try:
        # The override files merge among themselves first (each one guarded like any snippet), then over the
        # default as one snippet, through the same path as the operator's own config.
        merged_overrides = merge_config(
            {"apiVersion": default["apiVersion"], "kind": default["kind"]},
            *(text for _, text in overrides),
            names=("the bootstrap config", *(name for name, _ in overrides)),
        )
        text = render_config(default, None, merged_overrides)
    except (MergeError, InvalidConfig) as e:
        message = str(e).replace(
            "spec.unsupportedConfigOverrides and spec.observedConfig", "--config-override-files"
        )
        raise RenderError(message) from None
    return yaml.safe_dump(yaml.safe_load(text), sort_keys=True)


def namespace(name: str, labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "annotations": {"openshift.io/node-selector": ""}}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def operator_objects(args: argparse.Namespace) -> list[Obj]:
    image = args.manifest_operator_image or args.manifest_image
    ns = args.operator_namespace
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": OPERATOR_NAME, "namespace": ns}}
    # Upstream binds its operator to cluster-admin: it writes RBAC for its operand and installer pods, which
    # needs at least the permissions it grants.
    crb = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": OPERATOR_CLUSTER_ROLE_BINDING},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_NAME, "namespace": ns}],
    }
    labels = {"app": "openshift-kube-scheduler-operator"}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": OPERATOR_NAME, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"name": OPERATOR_NAME, "labels": labels},
                "spec": {
                    "serviceAccountName": OPERATOR_NAME,
                    "priorityClassName": "system-cluster-critical",
                    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                    "tolerations": [
                        {
                            "key": "node-role.kubernetes.io/master",
                            "operator": "Exists",
                            "effect": "NoSchedule",
                        },
                        {
                            "key": "node-role.kubernetes.io/control-plane",
                            "operator": "Exists",
                            "effect": "NoSchedule",
                        },
                        {
                            "key": "node.kubernetes.io/unreachable",
                            "operator": "Exists",
                            "effect": "NoExecute",
                            "tolerationSeconds": 120,
                        },
                        {
                            "key": "node.kubernetes.io/not-ready",
                            "operator": "Exists",
                            "effect": "NoExecute",
                            "tolerationSeconds": 120,
                        },
                    ],
                    "containers": [
                        {
                            "name": "kube-scheduler-operator-container",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["kubesched", "operator"],
                            "args": [
                                f"--operator-namespace={ns}",
                                f"--operand-namespace={args.manifest_namespace}",
                                f"--image={args.manifest_image}",
                                f"--scheduler-secure-port={args.secure_port}",
                            ],
                            "env": [
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                            ],
                            "ports": [{"name": "metrics", "containerPort": 8443}],
                            "resources": {"requests": {"cpu": "10m", "memory": "50Mi"}},
                        }
                    ],
                },
            },
        },
    }
    return [sa, crb, deployment]


def singletons() -> list[Obj]:
    ks = {
        "apiVersion": c.KUBESCHEDULER_API_VERSION,
        "kind": "KubeScheduler",
        "metadata": {"name": c.SINGLETON_NAME, "annotations": {"release.openshift.io/create-only": "true"}},
        "spec": {"managementState": "Managed"},
    }
    scheduler = {
        "apiVersion": c.SCHEDULER_CONFIG_API_VERSION,
        "kind": "Scheduler",
        "metadata": {"name": c.SINGLETON_NAME},
        "spec": {"mastersSchedulable": False},
    }
    return [ks, scheduler]


def render(args: argparse.Namespace) -> dict[Path, str]:
    """Relative output path -> text, for ``--asset-output-dir`` (the config file is separate). Raises RenderError."""
    if args.asset_input_dir is not None:
        kubeconfig = Path(args.asset_input_dir).parent / "auth" / "kubeconfig"
        if not Path(args.asset_input_dir).is_dir():
            raise RenderError(f"--asset-input-dir {args.asset_input_dir}: no such directory")
        if not kubeconfig.is_file():
            raise RenderError(f"--asset-input-dir {args.asset_input_dir}: {kubeconfig} is missing")
    try:
        pod = manifests.bootstrap_scheduler_pod(
            image=args.manifest_image,
            config_host_path=args.manifest_config_host_path,
            config_file_name=args.manifest_config_file_name,
            secrets_host_path=args.manifest_secrets_host_path,
            secure_port=args.secure_port,
        )
    except manifests.ManifestError as e:
        raise RenderError(str(e)) from None
    out: dict[Path, str] = {Path("bootstrap-manifests/kube-scheduler-pod.yaml"): manifests.to_yaml(pod)}
    run_level = {"openshift.io/run-level": "0"}
    for i, (name, labels) in enumerate(
        (
            (args.manifest_namespace, run_level),
            (args.operator_namespace, run_level),
            (c.USER_CONFIG_NAMESPACE, None),
        )
    ):
        out[Path(f"manifests/00_namespace-{i}-{name}.yaml")] = manifests.to_yaml(namespace(name, labels))
    for name, text in crd_texts().items():
        out[Path(f"manifests/01_crd-{name}")] = text
    for i, obj in enumerate(operator_objects(args)):
        out[Path(f"manifests/02_operator-{i}-{obj['kind'].lower()}.yaml")] = manifests.to_yaml(obj)
    for obj in singletons():
        out[Path(f"manifests/03_{obj['kind'].lower()}-cluster.yaml")] = manifests.to_yaml(obj)
    return out


def run(args: argparse.Namespace) -> int:
    try:
        overrides: list[tuple[str, str]] = []
        for f in args.config_override_files:
            try:
                overrides.append((f, Path(f).read_text(encoding="utf-8")))
            except OSError as e:
                raise RenderError(f"--config-override-files {f}: {e.strerror or e}") from None
        config = bootstrap_config(args.manifest_namespace, overrides)
        files = render(args)
        root = Path(args.asset_output_dir)
        for rel, text in sorted(files.items()):
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        config_file = Path(args.config_output_file)
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.write_text(config, encoding="utf-8")
    except RenderError as e:
        print(f"kubesched render: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kubesched render: {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    print(
        f"wrote {len(files)} manifests under {args.asset_output_dir} and the configuration {args.config_output_file}"
    )
    return 0


__all__ = ["RenderError", "add_arguments", "bootstrap_config", "render", "run"]
