"""The manifests in deploy/, rendered by the real ``kubectl kustomize``, checked offline.

- every rendered object validates against Kubernetes' published OpenAPI schemas (``kubernetes-validate``,
  strict: unknown fields are errors), for the newest Kubernetes version the package ships;
- what each mode must be: the scheduler name, Lease and replicas; the takeover's control-plane placement and
  priority; the static pod's host network, kubeconfig file and own secure port; probes on ``/healthz`` over
  HTTPS on the secure port, resource requests, a non-root numeric user, the ``kubesched`` image with a tag;
- the RBAC objects bind the overlay's ServiceAccount, and the leader-election Role names the configured Lease;
- every ``KubeSchedulerConfiguration`` (and the Dynamic policy) loads with kubesched's own configuration code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_helpers import (
    API_MODES,
    DEPLOY,
    KUBECTL,
    MODES,
    flag,
    one,
    pod_spec,
    render,
    scheduler_config,
)

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine (kustomize)")

kubernetes_validate = pytest.importorskip("kubernetes_validate")
from kubernetes_validate import utils as kv  # noqa: E402

MIN_SCHEMA_VERSION = (1, 33)


def schema_version() -> str:
    version = str(kv.latest_version())
    assert tuple(int(x) for x in version.split(".")[:2]) >= MIN_SCHEMA_VERSION, version
    return version


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {m: render(m) for m in MODES}


@pytest.mark.parametrize("mode", MODES)
def test_every_object_validates_against_the_kubernetes_schemas(
    rendered: dict[str, list[dict[str, Any]]], mode: str
) -> None:
    version = schema_version()
    docs = rendered[mode]
    assert docs
    for d in docs:
        try:
            kv.validate(d, version, strict=True)
        except kv.ValidationError as e:
            raise AssertionError(f"{mode}: {d['kind']} {d['metadata']['name']}: {e.message}") from e


def test_the_validator_rejects_what_it_should() -> None:
    """The schema check is not a no-op: a typo'd field and a wrong type are both errors."""
    version = schema_version()
    pod = yaml.safe_load((DEPLOY / "static-pod" / "kubesched.yaml").read_text())
    pod["spec"]["hostNetwrk"] = True
    with pytest.raises(kv.ValidationError):
        kv.validate(pod, version, strict=True)
    pod = yaml.safe_load((DEPLOY / "static-pod" / "kubesched.yaml").read_text())
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = ["100m"]
    with pytest.raises(kv.ValidationError):
        kv.validate(pod, version, strict=True)


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = pod_spec(docs)["containers"]
    return dict(c)


@pytest.mark.parametrize("mode", MODES)
def test_the_scheduler_container(rendered: dict[str, list[dict[str, Any]]], mode: str) -> None:
    docs = rendered[mode]
    spec, c = pod_spec(docs), container(docs)
    repo, _, tag = c["image"].rpartition(":")
    assert repo.rsplit("/", 1)[-1] == "kubesched" and tag and tag != "latest", c["image"]
    assert not c.get("command"), "the image's entrypoint is kubesched; args start with the subcommand"
    args = c["args"]
    assert args[0] == "scheduler"
    port = int(flag(args, "secure-port") or 0)
    assert port
    named = {p["name"]: p["containerPort"] for p in c.get("ports") or []}
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = c[kind]["httpGet"]
        assert get["path"] == "/healthz" and get["scheme"] == "HTTPS", kind
        assert named.get(get["port"], get["port"]) == port, f"{kind} probes another port than --secure-port"
    requests = c["resources"]["requests"]
    assert requests.get("cpu") and requests.get("memory")
    sc = spec["securityContext"]
    assert sc["runAsNonRoot"] is True and isinstance(sc["runAsUser"], int) and sc["runAsUser"] != 0
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert "/tmp" in mounts  # the self-signed serving pair is written under a read-only root
    config_path = flag(args, "config")
    assert config_path and any(
        config_path.startswith(m.rstrip("/") + "/") or config_path == m for m in mounts
    )


@pytest.mark.parametrize(
    ("mode", "scheduler_name", "lease", "replicas"),
    [
        ("second-scheduler", "kubesched", ("kubesched", "kubesched"), 2),
        ("load-aware", "kubesched", ("kubesched", "kubesched"), 2),
        ("takeover", "default-scheduler", ("kube-system", "kube-scheduler"), 3),
    ],
)
def test_in_cluster_modes(
    rendered: dict[str, list[dict[str, Any]]],
    mode: str,
    scheduler_name: str,
    lease: tuple[str, str],
    replicas: int,
) -> None:
    docs = rendered[mode]
    cfg = scheduler_config(docs)
    assert cfg["profiles"][0]["schedulerName"] == scheduler_name
    le = cfg["leaderElection"]
    assert le["leaderElect"] is True
    assert (le["resourceNamespace"], le["resourceName"]) == lease
    deploy = one(docs, "Deployment")
    ns = deploy["metadata"]["namespace"]
    assert deploy["spec"]["replicas"] == replicas
    spec = pod_spec(docs)
    sa = one(docs, "ServiceAccount")
    assert spec["serviceAccountName"] == sa["metadata"]["name"] and sa["metadata"]["namespace"] == ns
    assert not spec.get("hostNetwork")
    # The Deployment's ConfigMap is the generated one, with its content hash in the name.
    cm_name = next(v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v)
    assert one(docs, "ConfigMap", cm_name)["metadata"]["namespace"] == ns
    # RBAC: both bindings name this ServiceAccount; the leader-election Role is in the Lease's namespace and
    # grants that Lease by name.
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        (subject,) = one(docs, kind)["subjects"]
        assert (
            subject["kind"],
            subject["name"],
            subject["namespace"] if kind == "ClusterRoleBinding" else ns,
        ) == (
            "ServiceAccount",
            sa["metadata"]["name"],
            ns,
        )
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == lease[0] == one(docs, "RoleBinding")["metadata"]["namespace"]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [[lease[1]]]
    # The PodDisruptionBudget and the metrics Service select the scheduler's pods.
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    for kind in ("PodDisruptionBudget", "Service"):
        obj = one(docs, kind)
        selector = obj["spec"]["selector"]
        selector = selector.get("matchLabels", selector)
        assert selector and all(labels.get(k) == v for k, v in selector.items()), kind
    assert one(docs, "Service")["spec"]["ports"][0]["targetPort"] == "https"
    anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"


def test_takeover_runs_on_the_control_plane_as_critical(rendered: dict[str, list[dict[str, Any]]]) -> None:
    spec = pod_spec(rendered["takeover"])
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert {
        "key": "node-role.kubernetes.io/control-plane",
        "operator": "Exists",
        "effect": "NoSchedule",
    } in spec["tolerations"]
    assert one(rendered["takeover"], "Deployment")["metadata"]["namespace"] == "kube-system"


def test_second_scheduler_has_its_own_namespace_and_no_control_plane_placement(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["second-scheduler"]
    assert one(docs, "Namespace")["metadata"]["name"] == "kubesched"
    spec = pod_spec(docs)
    assert "nodeSelector" not in spec and "tolerations" not in spec and "priorityClassName" not in spec


def test_static_pod(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["static-pod"]
    assert [d["kind"] for d in docs] == ["Pod"]
    pod = docs[0]
    assert pod["metadata"]["namespace"] == "kube-system"
    spec, c = pod["spec"], container(docs)
    assert spec["hostNetwork"] is True
    assert "serviceAccountName" not in spec  # a static pod cannot use one
    assert spec["priorityClassName"] == "system-node-critical"
    port = int(flag(c["args"], "secure-port") or 0)
    assert port != 10259, "kube-scheduler holds 10259 on a control-plane node"
    host_paths = {v["name"]: v["hostPath"] for v in spec["volumes"] if "hostPath" in v}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert {hp["type"] for hp in host_paths.values()} == {"File"}
    cfg = yaml.safe_load((DEPLOY / "static-pod" / "config.yaml").read_text())
    # The config file and the kubeconfig it names are both hostPath files mounted where the process reads them.
    config_path = flag(c["args"], "config")
    kubeconfig = cfg["clientConnection"]["kubeconfig"]
    mounted_from = {mounts[name]: hp["path"] for name, hp in host_paths.items()}
    assert config_path in mounted_from and kubeconfig in mounted_from
    assert cfg["profiles"][0]["schedulerName"] == "default-scheduler"
    le = cfg["leaderElection"]
    assert (le["resourceNamespace"], le["resourceName"]) == ("kube-system", "kube-scheduler")
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert c[kind]["httpGet"]["host"] == flag(c["args"], "bind-address")
    # A static pod beside the takeover replicas (both in kube-system) is not selected by their anti-affinity,
    # PodDisruptionBudget or metrics Service: otherwise its node would be closed to a replica.
    selector = one(rendered["takeover"], "PodDisruptionBudget")["spec"]["selector"]["matchLabels"]
    labels = pod["metadata"]["labels"]
    assert not all(labels.get(k) == v for k, v in selector.items())


def _load(text: str, tmp_path: Path) -> Any:
    from kubesched.catalogue import full_catalogue
    from kubesched.scheduler.config import load_config

    return load_config(text, catalogue=full_catalogue())


@pytest.mark.parametrize("mode", API_MODES)
def test_configurations_load_with_kubesched(
    rendered: dict[str, list[dict[str, Any]]], mode: str, tmp_path: Path
) -> None:
    cm = next(d for d in rendered[mode] if d["kind"] == "ConfigMap")
    text = cm["data"]["config.yaml"]
    if "policy.yaml" in cm["data"]:
        # The Dynamic policy is read from the mounted ConfigMap: put it where this test can read it.
        policy = tmp_path / "policy.yaml"
        policy.write_text(cm["data"]["policy.yaml"])
        assert "/etc/kubesched/policy.yaml" in text
        text = text.replace("/etc/kubesched/policy.yaml", str(policy))
    config = _load(text, tmp_path)
    names = [p.scheduler_name for p in config.profiles]
    assert names == [p["schedulerName"] for p in yaml.safe_load(text)["profiles"]]


def test_static_pod_configuration_loads_with_kubesched(tmp_path: Path) -> None:
    config = _load((DEPLOY / "static-pod" / "config.yaml").read_text(), tmp_path)
    assert config.client_connection.kubeconfig == "/etc/kubernetes/kubesched/scheduler.conf"


def test_load_aware_uses_the_dynamic_policy(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["load-aware"]
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    assert set(cm["data"]) == {"config.yaml", "policy.yaml"}
    policy = yaml.safe_load(cm["data"]["policy.yaml"])
    assert policy["kind"] == "DynamicSchedulerPolicy"
    profiles = {p["schedulerName"]: p for p in scheduler_config(docs)["profiles"]}
    assert set(profiles) == {"kubesched", "kubesched-load-aware"}
    dynamic = profiles["kubesched-load-aware"]["pluginConfig"][0]
    assert (
        dynamic["name"] == "Dynamic" and dynamic["args"]["policyConfigPath"] == "/etc/kubesched/policy.yaml"
    )
