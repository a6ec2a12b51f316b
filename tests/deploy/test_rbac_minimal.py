"""The RBAC of each overlay is the least that works: every rule, every verb and every resource in it is needed.

How: the API server of the local cluster has no audit log to record what the scheduler requests, so the test
replays the scheduler's requests instead. ``scheduler_requests()`` lists them, each with the code that makes
it: the informers of ``Scheduler.start_informers`` (list+watch of pods, nodes, namespaces, services,
replicationcontrollers, replicasets, statefulsets, poddisruptionbudgets, and the storage kinds the volume
plugins read), VolumeBinding's PUT of PVs and claims, the pod GET before a status write,
preemption's DELETE, DefaultBinder's ``pods/binding``, the ``pods/status`` PATCH, the ``events.k8s.io``
recorder (POST, PATCH of a series), leader election on the configured Lease (GET, POST, PUT), and for a
profile with ``Dynamic`` the LIST of core ``Scheduled`` events. The overlay's RBAC objects are applied to a
real API server running RBAC; for the overlay as written, a SubjectAccessReview for each request as the
overlay's ServiceAccount must be allowed; then each rule, each verb of a rule and each resource of a rule is
removed in turn and at least one request must be denied. That is bounded (a few hundred reviews over one
connection, no scheduler run, no waiting for informers) and exact (the API server's own authorizer decides).

That the list is complete, i.e. that the real scheduler needs nothing more, is shown by
``test_modes_e2e.py``: it runs the scheduler under exactly these objects and finds no ``forbidden`` in its logs.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from clusterproc import ClusterProcess, Kubectl
from deploy_helpers import API_MODES, KUBECTL, one, render, scheduler_config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine"),
]
kubernetes = pytest.importorskip("kubernetes")

Obj = dict[str, Any]


@dataclass(frozen=True)
class Request:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    why: str = ""

    def attributes(self) -> Obj:
        return {
            k: v
            for k, v in {
                "verb": self.verb,
                "group": self.group,
                "resource": self.resource,
                "subresource": self.subresource,
                "namespace": self.namespace,
                "name": self.name,
            }.items()
            if v or k in ("group",)
        }

    def __str__(self) -> str:
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {self.group or 'core'} {res}{' ' + self.name if self.name else ''}{where} ({self.why})"


INFORMERS = (
    ("", "pods"),
    ("", "nodes"),
    ("", "namespaces"),
    ("", "services"),
    ("", "replicationcontrollers"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("policy", "poddisruptionbudgets"),
    # scheduler/volumes/informers.py, when a volume plugin is enabled (the default profile)
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csistoragecapacities"),
    # scheduler/dra/informers.py, when DynamicResources is enabled (the default profile)
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceslices"),
)
POD_NS = "team-a"  # any namespace a pod lives in


def scheduler_requests(config: Obj) -> list[Request]:
    le = config["leaderElection"]
    lease_ns, lease = le["resourceNamespace"], le["resourceName"]
    out = [
        Request(verb, g, r, why="informer (scheduler.py start_informers)")
        for g, r in INFORMERS
        for verb in ("list", "watch")
    ]
    out += [
        Request("get", "", "pods", namespace=POD_NS, name="web", why="pod re-read (scheduler.py)"),
        Request(
            "delete", "", "pods", namespace=POD_NS, name="victim", why="preemption (default_preemption.py)"
        ),
        Request("create", "", "pods", "binding", POD_NS, "web", why="DefaultBinder"),
        Request(
            "patch", "", "pods", "status", POD_NS, "web", why="PodScheduled condition, nominatedNodeName"
        ),
        Request(
            "create", "events.k8s.io", "events", namespace=POD_NS, why="event recorder (client/events.py)"
        ),
        Request("patch", "events.k8s.io", "events", namespace=POD_NS, name="web.1", why="event series"),
        Request("update", "", "persistentvolumes", name="pv-1", why="VolumeBinding PreBind: claimRef"),
        Request(
            "update", "", "persistentvolumeclaims", namespace=POD_NS, name="data", why="VolumeBinding PreBind"
        ),
        Request(
            "update",
            "resource.k8s.io",
            "resourceclaims",
            namespace=POD_NS,
            name="gpu",
            why="DRA claim finalizer",
        ),
        Request(
            "update",
            "resource.k8s.io",
            "resourceclaims",
            "status",
            POD_NS,
            "gpu",
            why="DRA PreBind allocation",
        ),
        Request(
            "patch",
            "resource.k8s.io",
            "resourceclaims",
            "status",
            POD_NS,
            "gpu",
            why="DRA Unreserve reservedFor",
        ),
        Request(
            "get",
            "",
            "configmaps",
            namespace="kube-system",
            name="extension-apiserver-authentication",
            why="secure port: client CA (serving/options.py)",
        ),
        Request("create", "authentication.k8s.io", "tokenreviews", why="secure port: bearer tokens"),
        Request("create", "authorization.k8s.io", "subjectaccessreviews", why="secure port: authorization"),
        Request(
            "get", "coordination.k8s.io", "leases", namespace=lease_ns, name=lease, why="leader election"
        ),
        Request("create", "coordination.k8s.io", "leases", namespace=lease_ns, why="leader election"),
        Request(
            "update", "coordination.k8s.io", "leases", namespace=lease_ns, name=lease, why="leader election"
        ),
    ]
    plugins = {
        e["name"]
        for p in config["profiles"]
        for point in (p.get("plugins") or {}).values()
        for e in point.get("enabled") or []
    }
    if "Dynamic" in plugins:
        out.append(Request("list", "", "events", why="Dynamic hot values (loadaware/poller.py)"))
    return out


def without(rule_set: list[Obj], index: int, field: str | None, value: str | None) -> list[Obj]:
    """The rules with rule ``index`` removed, or with one ``value`` removed from its ``field``."""
    rules = copy.deepcopy(rule_set)
    if field is None:
        del rules[index]
    else:
        rules[index][field] = [v for v in rules[index][field] if v != value]
    return rules


def variants(rules: list[Obj]) -> Iterator[tuple[str, list[Obj]]]:
    for i, rule in enumerate(rules):
        yield f"rule {i} {rule}", without(rules, i, None, None)
        for field in ("verbs", "resources"):
            if len(rule[field]) > 1:
                for v in rule[field]:
                    yield f"{field[:-1]} {v!r} of rule {i} {rule}", without(rules, i, field, v)


class Reviewer:
    def __init__(self, cluster: ClusterProcess) -> None:
        self.client = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig))
        self.authz = kubernetes.client.AuthorizationV1Api(self.client)
        self.rbac = kubernetes.client.RbacAuthorizationV1Api(self.client)
        self.reviews = 0

    def denied(self, user: str, groups: list[str], requests: list[Request]) -> list[Request]:
        out = []
        for r in requests:
            body = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": user, "groups": groups, "resourceAttributes": r.attributes()},
            }
            review = self.authz.create_subject_access_review(body)
            self.reviews += 1
            if not review.status.allowed:
                out.append(r)
        return out

    def set_rules(self, obj: Obj, rules: list[Obj]) -> None:
        body = copy.deepcopy(obj)
        body["rules"] = rules
        name, ns = obj["metadata"]["name"], obj["metadata"].get("namespace")
        if obj["kind"] == "ClusterRole":
            current = self.rbac.read_cluster_role(name)
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            self.rbac.replace_cluster_role(name, body)
        else:
            current = self.rbac.read_namespaced_role(name, ns)
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            self.rbac.replace_namespaced_role(name, ns, body)


RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


@pytest.mark.parametrize("mode", API_MODES)
def test_every_rule_verb_and_resource_is_needed(
    deploy_cluster: ClusterProcess, deploy_kubectl: Kubectl, mode: str, tmp_path: Any
) -> None:
    docs = render(mode)
    config = scheduler_config(docs)
    requests = scheduler_requests(config)
    sa = one(docs, "ServiceAccount")["metadata"]
    user = f"system:serviceaccount:{sa['namespace']}:{sa['name']}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{sa['namespace']}", "system:authenticated"]
    objects = [d for d in docs if d["kind"] in RBAC_KINDS]
    manifest = tmp_path / "rbac.yaml"
    deploy_kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    manifest.write_text(yaml.safe_dump_all([d for d in objects if d["kind"] != "Namespace"]))
    bindings = tmp_path / "bindings.yaml"
    bindings.write_text(yaml.safe_dump_all([d for d in objects if d["kind"].endswith("Binding")]))
    reviewer = Reviewer(deploy_cluster)
    started = time.monotonic()
    try:
        assert reviewer.denied(user, groups, requests) == [], (
            "the overlay's RBAC does not allow the scheduler"
        )
        needless = []
        for role in (one(docs, "ClusterRole"), one(docs, "Role")):
            for what, rules in variants(role["rules"]):
                reviewer.set_rules(role, rules)
                if not reviewer.denied(user, groups, requests):
                    needless.append(f"{role['kind']} {role['metadata']['name']}: {what}")
            reviewer.set_rules(role, role["rules"])
        assert not needless, "granted but never needed by the scheduler:\n" + "\n".join(needless)
        # The check finds a needless grant when there is one.
        cluster_role = one(docs, "ClusterRole")
        extra = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
        reviewer.set_rules(cluster_role, [*without(cluster_role["rules"], 0, None, None), extra])
        assert reviewer.denied(user, groups, requests)  # rule 0 was needed, and the extra one does not help
        reviewer.set_rules(cluster_role, [*cluster_role["rules"], extra])
        assert reviewer.denied(user, groups, requests) == []  # so removing the extra rule denies nothing
        reviewer.set_rules(cluster_role, cluster_role["rules"])
        assert reviewer.denied(user, groups, requests) == []
        # And the requests are not allowed by something else (the bootstrap roles of every account).
        deploy_kubectl("delete", "-f", str(bindings))
        denied = set(reviewer.denied(user, groups, requests))
        assert denied == set(requests), [str(r) for r in set(requests) - denied]
    finally:
        # The namespace stays (empty): the e2e tests apply the same overlays.
        deploy_kubectl("delete", "-f", str(manifest), "--ignore-not-found")
        reviewer.client.close()
    print(f"{mode}: {reviewer.reviews} SubjectAccessReviews in {time.monotonic() - started:.1f}s")
