"""RBAC evaluation, request attributes and authentication, as facts of upstream's behaviour."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kubesched.cluster import errors
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.auth.authn import Authenticator, load_token_file
from kubesched.cluster.auth.bootstrap import ensure_bootstrap_policy
from kubesched.cluster.auth.rbac import Attributes, RBACAuthorizer, Rule, forbidden_error, request_attributes
from kubesched.cluster.auth.reviews import AuthApi
from kubesched.cluster.auth.tokens import BoundObject, TokenIssuer
from kubesched.cluster.auth.user import ANONYMOUS, UserInfo

RBAC = "rbac.authorization.k8s.io"


def res(
    verb: str, resource: str, *, group: str = "", sub: str = "", ns: str = "", name: str = ""
) -> Attributes:
    return Attributes(verb, True, group, "v1", resource, sub, ns, name)


@pytest.mark.parametrize(
    ("rule", "attrs", "allowed"),
    [
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, res("get", "pods"), True),
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, res("list", "pods"), False),
        ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, res("delete", "deployments", group="apps"), True),
        ({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}, res("get", "pods"), False),
        # "*" covers subresources; a plain resource does not
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["*"]}, res("get", "pods", sub="log"), True),
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, res("get", "pods", sub="log"), False),
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}, res("get", "pods", sub="log"), True),
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]}, res("get", "nodes", sub="status"), True),
        # resourceNames limit to names; a list (no name) is not covered
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["cm"], "resourceNames": ["a"]}, res("get", "cm", name="a"), True),
        ({"verbs": ["get"], "apiGroups": [""], "resources": ["cm"], "resourceNames": ["a"]}, res("get", "cm", name="b"), False),
        ({"verbs": ["list"], "apiGroups": [""], "resources": ["cm"], "resourceNames": ["a"]}, res("list", "cm"), False),
        # non-resource URLs: exact, trailing-* prefix, "*"
        ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, Attributes("get", False, path="/healthz"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, Attributes("get", False, path="/healthz/etcd"), False),
        ({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, Attributes("get", False, path="/apis/apps/v1"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["*"]}, Attributes("get", False, path="/anything"), True),
        ({"verbs": ["get"], "nonResourceURLs": ["/version"]}, Attributes("post", False, path="/version"), False),
        # a resource rule never grants a path, nor a path rule a resource
        ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, Attributes("get", False, path="/healthz"), False),
        ({"verbs": ["*"], "nonResourceURLs": ["*"]}, res("get", "pods"), False),
    ],
)  # fmt: skip
def test_rule_matching(rule: dict[str, Any], attrs: Attributes, allowed: bool) -> None:
    assert Rule.from_api(rule).allows(attrs) is allowed


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/pods", {}, res("list", "pods")),
        ("GET", "/api/v1/namespaces/ns/pods", {"watch": "true"}, res("watch", "pods", ns="ns")),
        ("GET", "/api/v1/namespaces/ns/pods/p/log", {}, res("get", "pods", sub="log", ns="ns", name="p")),
        ("POST", "/api/v1/namespaces/ns/pods/p/binding", {}, res("create", "pods", sub="binding", ns="ns", name="p")),
        ("DELETE", "/apis/apps/v1/namespaces/ns/deployments", {}, res("deletecollection", "deployments", group="apps", ns="ns")),
        ("GET", "/api/v1/namespaces/ns", {}, res("get", "namespaces", ns="ns", name="ns")),
        ("PUT", "/api/v1/namespaces/ns/finalize", {}, res("update", "namespaces", sub="finalize", ns="ns", name="ns")),
        ("PATCH", "/api/v1/nodes/n/status", {}, res("patch", "nodes", sub="status", name="n")),
        ("GET", "/api/v1/namespaces/ns/configmaps", {"fieldSelector": "metadata.name=x"}, res("list", "configmaps", ns="ns", name="x")),
    ],
)  # fmt: skip
def test_request_attributes(method: str, path: str, query: dict[str, str], expected: Attributes) -> None:
    got = request_attributes(method, path, query)
    assert (got.verb, got.api_group, got.resource, got.subresource, got.namespace, got.name) == (
        expected.verb, expected.api_group, expected.resource, expected.subresource, expected.namespace, expected.name
    )  # fmt: skip
    assert not request_attributes("GET", "/apis/apps/v1").resource_request  # discovery is a path


def test_forbidden_messages() -> None:
    u = UserInfo("system:serviceaccount:ns:sa")
    e = forbidden_error(u, request_attributes("GET", "/api/v1/namespaces/default/pods"))
    assert e.message == (
        'pods is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "pods" in API group "" '
        'in the namespace "default"'
    )
    e = forbidden_error(
        u, request_attributes("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x")
    )
    assert e.message.startswith('leases.coordination.k8s.io "x" is forbidden: User')
    e = forbidden_error(u, request_attributes("GET", "/api/v1/nodes"))
    assert e.message.endswith('cannot list resource "nodes" in API group "" at the cluster scope')
    e = forbidden_error(u, request_attributes("GET", "/metrics"))
    assert e.message == 'forbidden: User "system:serviceaccount:ns:sa" cannot get path "/metrics"'


@pytest.fixture
def api() -> ClusterApi:
    a = ClusterApi()
    a.bootstrap()
    return a


@pytest.fixture
def authz(api: ClusterApi) -> RBACAuthorizer:
    z = RBACAuthorizer(api)
    ensure_bootstrap_policy(api)
    z.aggregate()
    return z


def _create(api: ClusterApi, plural: str, obj: dict[str, Any], ns: str | None = None) -> None:
    api.create(api.rtype(RBAC, "v1", plural), obj, ns)


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": RBAC, "kind": kind, "name": name}


def test_bootstrap_is_idempotent(api: ClusterApi, authz: RBACAuthorizer) -> None:
    assert ensure_bootstrap_policy(api) == 0


def test_bindings_by_subject_kind_and_scope(api: ClusterApi, authz: RBACAuthorizer) -> None:
    sa = UserInfo("system:serviceaccount:ns1:app", groups=("system:serviceaccounts", "system:serviceaccounts:ns1",
                                                         "system:authenticated"))  # fmt: skip
    api.create(api.rtype("", "v1", "namespaces"), {"metadata": {"name": "ns1"}}, None)
    assert not authz.authorize(sa, res("list", "pods", ns="ns1"))
    _create(api, "rolebindings", {"metadata": {"name": "b"}, "roleRef": _ref("ClusterRole", "view"),
                                  "subjects": [{"kind": "ServiceAccount", "name": "app"}]}, "ns1")  # fmt: skip
    assert authz.authorize(sa, res("list", "pods", ns="ns1"))
    assert not authz.authorize(
        sa, res("list", "pods", ns="default")
    )  # a RoleBinding grants in its namespace only
    assert not authz.authorize(sa, res("list", "pods"))  # nor cluster-wide
    assert not authz.authorize(sa, res("create", "pods", ns="ns1"))
    # A group binding reaches every member; deleting it takes the grant away at once.
    _create(api, "clusterrolebindings", {"metadata": {"name": "g"}, "roleRef": _ref("ClusterRole", "edit"),
                                         "subjects": [{"apiGroup": RBAC, "kind": "Group",
                                                       "name": "system:serviceaccounts:ns1"}]})  # fmt: skip
    assert authz.authorize(sa, res("create", "pods", ns="default"))
    api.delete(api.rtype(RBAC, "v1", "clusterrolebindings"), None, "g", {})
    assert not authz.authorize(sa, res("create", "pods", ns="default"))


def test_aggregation_follows_labelled_roles(api: ClusterApi, authz: RBACAuthorizer) -> None:
    u = UserInfo("alice", groups=("system:authenticated",))
    _create(api, "clusterrolebindings", {"metadata": {"name": "alice-view"}, "roleRef": _ref("ClusterRole", "view"),
                                         "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "alice"}]})  # fmt: skip
    widgets = res("list", "widgets", group="example.com", ns="x")
    assert not authz.authorize(u, widgets)
    _create(api, "clusterroles", {
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"verbs": ["list"], "apiGroups": ["example.com"], "resources": ["widgets"]}],
    })  # fmt: skip
    assert authz.authorize(u, widgets)  # view now carries the rule ...
    admin_rules = api.get(api.rtype(RBAC, "v1", "clusterroles"), None, "admin").obj["rules"]
    assert {
        "verbs": ["list"],
        "apiGroups": ["example.com"],
        "resources": ["widgets"],
    } in admin_rules  # ... and admin


def test_masters_and_public_info(authz: RBACAuthorizer) -> None:
    assert authz.authorize(UserInfo("x", groups=("system:masters",)), res("delete", "nodes"))
    assert authz.authorize(ANONYMOUS, Attributes("get", False, path="/version"))
    assert not authz.authorize(ANONYMOUS, Attributes("get", False, path="/apis"))
    user = UserInfo("bob", groups=("system:authenticated",))
    assert authz.authorize(user, Attributes("get", False, path="/apis/apps/v1"))
    assert authz.authorize(user, res("create", "selfsubjectaccessreviews", group="authorization.k8s.io"))
    sched = UserInfo("system:kube-scheduler", groups=("system:authenticated",))
    assert authz.authorize(sched, res("update", "leases", group="coordination.k8s.io", ns="kube-system",
                                      name="kube-scheduler"))  # fmt: skip
    assert not authz.authorize(sched, res("update", "leases", group="coordination.k8s.io", ns="kube-system",
                                          name="other"))  # fmt: skip
    assert authz.authorize(sched, res("create", "pods", sub="binding", ns="a", name="p"))


def _request(headers: dict[str, str] | None = None) -> Any:
    return SimpleNamespace(transport=None, headers=headers or {})


def test_tokens_die_with_their_service_account_or_pod(api: ClusterApi, tmp_path: Path) -> None:
    issuer = TokenIssuer(tmp_path / "sa.key")
    authn = Authenticator(api, issuer)
    sa_type, pod_type = api.rtype("", "v1", "serviceaccounts"), api.rtype("", "v1", "pods")
    sa = api.create(sa_type, {"metadata": {"name": "app"}}, "default").obj
    token, _ = issuer.issue("default", "app", sa["metadata"]["uid"], None, 3600)
    assert (
        authn.authenticate(_request({"Authorization": f"Bearer {token}"})).name
        == "system:serviceaccount:default:app"
    )
    api.delete(sa_type, "default", "app", {})
    with pytest.raises(errors.ApiError) as e:
        authn.authenticate(_request({"Authorization": f"Bearer {token}"}))
    assert e.value.code == 401
    api.create(
        sa_type, {"metadata": {"name": "app"}}, "default"
    )  # same name, new uid: the old token stays dead
    with pytest.raises(errors.ApiError):
        authn.authenticate(_request({"Authorization": f"Bearer {token}"}))
    sa = api.get(sa_type, "default", "app").obj
    pod = api.create(pod_type, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
                     "default").obj  # fmt: skip
    bound, _ = issuer.issue("default", "app", sa["metadata"]["uid"], None, 3600,
                            BoundObject("Pod", "p", pod["metadata"]["uid"]))  # fmt: skip
    assert authn.authenticate(_request({"Authorization": f"Bearer {bound}"})).extra[
        "authentication.kubernetes.io/pod-name"
    ] == ("p",)
    api.delete(pod_type, "default", "p", {"gracePeriodSeconds": 0})
    with pytest.raises(errors.ApiError):
        authn.authenticate(_request({"Authorization": f"Bearer {bound}"}))
    assert authn.authenticate(_request()).name == "system:anonymous"


def test_static_token_file(api: ClusterApi, tmp_path: Path) -> None:
    f = tmp_path / "tokens.csv"
    f.write_text('abc,alice,1001,"dev,ops"\nxyz,bob,1002\n')
    tokens = load_token_file(f)
    assert tokens["abc"] == UserInfo("alice", "1001", ("dev", "ops", "system:authenticated"))
    assert tokens["xyz"].groups == ("system:authenticated",)
    authn = Authenticator(api, None, static_tokens=tokens)
    assert authn.authenticate(_request({"Authorization": "Bearer abc"})).name == "alice"
    with pytest.raises(errors.ApiError):
        authn.authenticate(_request({"Authorization": "Bearer nope"}))


def test_impersonation_needs_the_impersonate_verb(
    api: ClusterApi, authz: RBACAuthorizer, tmp_path: Path
) -> None:
    authn = Authenticator(api, None)
    auth_api = AuthApi(api, authn, authz, None)
    admin = UserInfo("admin", groups=("system:masters", "system:authenticated"))
    who = auth_api.impersonate({"Impersonate-User": "system:serviceaccount:ns:sa"}, admin)
    assert who.groups == ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated")
    bob = UserInfo("bob", groups=("system:authenticated",))
    with pytest.raises(errors.ApiError) as e:
        auth_api.impersonate({"Impersonate-User": "alice"}, bob)
    assert e.value.message == (
        'users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope'
    )
