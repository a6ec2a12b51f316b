"""Authentication and RBAC end to end: a real ``kubesched cluster up`` over HTTPS, the real kubectl, the official
Python client and a real ``kubesched scheduler`` running under a service account's token."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from clusterproc import ClusterProcess, Kubectl, start_scheduler
from kubernetes import client, config
from kubernetes.client.rest import ApiException

NS = "auth-e2e"


def admin_api(cluster: ClusterProcess) -> client.ApiClient:
    return config.new_client_from_config(str(cluster.kubeconfig))


def sa_kubeconfig(cluster: ClusterProcess, path: Path, token: str) -> Path:
    """The admin kubeconfig with the user's credentials replaced by a bearer token."""
    kc = yaml.safe_load(cluster.kubeconfig.read_text())
    kc["users"] = [{"name": kc["users"][0]["name"], "user": {"token": token}}]
    path.write_text(yaml.safe_dump(kc))
    return path


def request_token(api: client.ApiClient, ns: str, sa: str, **spec: object) -> str:
    core = client.CoreV1Api(api)
    body = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], **spec))
    return str(core.create_namespaced_service_account_token(sa, ns, body).status.token)


@pytest.fixture(scope="module")
def admin(cluster: ClusterProcess) -> client.ApiClient:
    api = admin_api(cluster)
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    for name in ("reader", "sched", "nobody"):
        core.create_namespaced_service_account(
            NS, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
        )
    return api


def test_default_service_accounts_and_bootstrap_roles_exist(admin: client.ApiClient) -> None:
    core = client.CoreV1Api(admin)
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease", NS):
        assert core.read_namespaced_service_account("default", ns).metadata.name == "default"
    rbac = client.RbacAuthorizationV1Api(admin)
    names = {r.metadata.name for r in rbac.list_cluster_role().items}
    assert {"cluster-admin", "admin", "edit", "view", "system:kube-scheduler", "system:volume-scheduler",
            "system:public-info-viewer", "system:discovery", "system:basic-user"} <= names  # fmt: skip
    # Aggregation filled the aggregated roles, as upstream's controller does (view ⊂ edit ⊂ admin).
    view = rbac.read_cluster_role("view")
    admin_role = rbac.read_cluster_role("admin")
    assert any("pods" in (r.resources or []) for r in view.rules)
    assert len(admin_role.rules) > len(view.rules)


def test_service_account_gets_403_until_bound_then_200(
    admin: client.ApiClient, cluster: ClusterProcess, tmp_path: Path
) -> None:
    token = request_token(admin, NS, "reader")
    kc = sa_kubeconfig(cluster, tmp_path / "reader.kubeconfig", token)
    sa_api = config.new_client_from_config(str(kc))
    core = client.CoreV1Api(sa_api)
    with pytest.raises(ApiException) as e:
        core.list_namespaced_pod(NS)
    assert e.value.status == 403
    body = yaml.safe_load(e.value.body)
    assert body["message"] == (
        'pods is forbidden: User "system:serviceaccount:auth-e2e:reader" cannot list resource "pods" '
        'in API group "" in the namespace "auth-e2e"'
    )
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role_binding(NS, {
        "metadata": {"name": "reader-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NS}],
    })  # fmt: skip
    assert core.list_namespaced_pod(NS).items == []
    with pytest.raises(ApiException) as e:  # view is namespaced by the binding: other namespaces stay closed
        core.list_namespaced_pod("default")
    assert e.value.status == 403
    with pytest.raises(ApiException) as e:  # and view does not write
        core.create_namespaced_config_map(NS, {"metadata": {"name": "x"}})
    assert e.value.status == 403


def test_kubectl_can_i_whoami_and_create_token(
    admin: client.ApiClient, kubectl: Kubectl, cluster: ClusterProcess, tmp_path: Path
) -> None:
    sa = f"system:serviceaccount:{NS}:nobody"
    r = kubectl("auth", "can-i", "list", "pods", "-n", NS, f"--as={sa}", check=False)
    assert (r.returncode, r.stdout.strip()) == (1, "no")
    assert kubectl("auth", "can-i", "list", "pods", "-n", NS, "--as=system:serviceaccount:auth-e2e:reader",
                   check=False).stdout.strip() == "yes"  # fmt: skip
    assert kubectl("auth", "can-i", "get", "/version", f"--as={sa}").stdout.strip() == "yes"
    assert (
        kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}").stdout.find("system:masters")
        >= 0
    )
    token = kubectl("create", "token", "nobody", "-n", NS).stdout.strip()
    sa_kc = sa_kubeconfig(cluster, tmp_path / "nobody.kubeconfig", token)
    own = Kubectl(kubectl.binary, sa_kc, tmp_path / "cache")
    who = own("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout
    assert who == sa
    r = own("get", "pods", "-n", NS, check=False)
    assert r.returncode != 0
    assert (f'pods is forbidden: User "{sa}" cannot list resource "pods" in API group "" '
            f'in the namespace "{NS}"') in r.stderr  # fmt: skip
    r = own("auth", "can-i", "--list", "-n", NS)
    assert "selfsubjectaccessreviews.authorization.k8s.io" in r.stdout
    # Impersonation needs the impersonate verb: the service account has none.
    r = own("get", "pods", "-n", NS, "--as=someone", check=False)
    assert (
        'users "someone" is forbidden: User "system:serviceaccount:auth-e2e:nobody" cannot impersonate '
        'resource "users" in API group "" at the cluster scope' in r.stderr
    )


def test_anonymous_gets_version_and_health_only(cluster: ClusterProcess) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE

    def get(path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(cluster.url + path, context=ctx, timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    assert get("/version")[0] == 200
    assert get("/healthz") == (200, "ok")
    status, body = get("/api/v1/pods")
    assert status == 403
    assert yaml.safe_load(body)["message"] == (
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope'
    )


def test_scheduler_under_service_account(
    admin: client.ApiClient, cluster: ClusterProcess, tmp_path: Path
) -> None:
    core = client.CoreV1Api(admin)
    # Without any binding the scheduler's first list is refused, and it says so in its log.
    kc = sa_kubeconfig(cluster, tmp_path / "nobody.kubeconfig", request_token(admin, NS, "nobody"))
    denied = start_scheduler(kc)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "forbidden" not in denied.log().lower():
            time.sleep(0.2)
        assert (
            'User \\"system:serviceaccount:auth-e2e:nobody\\" cannot' in denied.log()
            or 'User "system:serviceaccount:auth-e2e:nobody" cannot' in denied.log()
        ), denied.log()
    finally:
        denied.kill()
    # Bound to the roles kube-scheduler gets, it takes its Lease and binds a pod.
    rbac = client.RbacAuthorizationV1Api(admin)
    for role in ("system:kube-scheduler", "system:volume-scheduler"):
        rbac.create_cluster_role_binding({
            "metadata": {"name": f"sched-{role.split(':')[1]}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "sched", "namespace": NS}],
        })  # fmt: skip
    # ... and, as any delegated-auth component, the reader of the client CA in kube-system (kubeadm binds the
    # user system:kube-scheduler to it; a service account needs its own binding).
    rbac.create_namespaced_role_binding("kube-system", {
        "metadata": {"name": "sched-authentication-reader"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "extension-apiserver-authentication-reader",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "sched", "namespace": NS}],
    })  # fmt: skip
    kc = sa_kubeconfig(cluster, tmp_path / "sched.kubeconfig", request_token(admin, NS, "sched"))
    sched = start_scheduler(kc, "--leader-elect=true")
    try:
        core.create_namespaced_pod(NS, {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        })  # fmt: skip
        deadline = time.monotonic() + 30
        node = None
        while time.monotonic() < deadline and not node:
            node = core.read_namespaced_pod("p", NS).spec.node_name
            time.sleep(0.2)
        assert node, sched.log()
        lease = client.CoordinationV1Api(admin).read_namespaced_lease("kube-scheduler", "kube-system")
        assert lease.spec.holder_identity
        assert "forbidden" not in sched.log().lower(), sched.log()
    finally:
        sched.kill()
