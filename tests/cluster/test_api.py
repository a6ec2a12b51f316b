"""ClusterApi in-process: defaults, admission, concurrency, finalizers, deletion, binding, events, CRDs, GC."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.cluster import errors
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.resources import ResourceType
from kubesched.cluster.storage.interface import ADDED, DELETED, MODIFIED, Stored
from kubesched.cluster.storage.memory import Watcher

Obj = dict[str, Any]


@pytest.fixture
def api() -> ClusterApi:
    a = ClusterApi()
    a.bootstrap()
    return a


def t(api: ClusterApi, plural: str, group: str = "", version: str = "v1") -> ResourceType:
    return api.rtype(group, version, plural)


def pod(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], **spec},
    }


def api_error(fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    with pytest.raises(errors.ApiError) as e:
        fn(*args, **kwargs)
    return e.value.status()


def watch(api: ClusterApi, rtype: ResourceType) -> Watcher:
    return api.store.watch(rtype.storage_key, namespace=None, predicate=None, since=None)[0]


def events(w: Watcher) -> list[tuple[str, str]]:
    return [(etype, st.key[1]) for etype, st in w.drain()]


def exists(api: ClusterApi, rtype: ResourceType, ns: str | None, name: str) -> bool:
    return api.lookup(rtype, ns, name) is not None


# -- create: defaults and admission --------------------------------------------------------------------------


def test_bootstrap_namespaces_have_label_finalizer_and_default_serviceaccount(api: ClusterApi) -> None:
    names = [st.key[1] for st in api.store.list(t(api, "namespaces").storage_key)[0]]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
    ns = api.create(t(api, "namespaces"), {"metadata": {"name": "team-a", "labels": {"x": "y"}}}, None).obj
    assert ns["metadata"]["labels"] == {"x": "y", "kubernetes.io/metadata.name": "team-a"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert ns["status"] == {"phase": "Active"}
    sas = {st.key for st in api.store.list(t(api, "serviceaccounts").storage_key)[0]}
    assert sas == {(n, "default") for n in [*names, "team-a"]}
    pcs = {
        st.key[1]: st.obj["value"]
        for st in api.store.list(t(api, "priorityclasses", "scheduling.k8s.io").storage_key)[0]
    }
    assert pcs == {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def test_server_owned_metadata_on_create(api: ClusterApi) -> None:
    cm = api.create(
        t(api, "configmaps"), {"metadata": {"name": "c", "resourceVersion": "99", "uid": "mine"}}, "default"
    )
    meta = cm.obj["metadata"]
    assert meta["resourceVersion"] == str(cm.rv) != "99"
    assert meta["uid"] != "mine" and len(meta["uid"]) == 36
    assert meta["creationTimestamp"].endswith("Z")
    assert (cm.obj["apiVersion"], cm.obj["kind"]) == ("v1", "ConfigMap")
    dep = api.create(
        t(api, "deployments", "apps"),
        {
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod("x")["spec"]},
            },
        },
        "default",
    )
    assert dep.obj["metadata"]["generation"] == 1
    assert dep.obj["spec"]["replicas"] == 1


def test_pod_defaults(api: ClusterApi) -> None:
    p = api.create(t(api, "pods"), pod("p"), "default").obj
    spec = p["spec"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["serviceAccountName"] == "default"
    assert spec["priority"] == 0
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert "priorityClassName" not in spec
    assert {(tol["key"], tol["effect"], tol["tolerationSeconds"]) for tol in spec["tolerations"]} == {
        ("node.kubernetes.io/not-ready", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "NoExecute", 300),
    }
    c = spec["containers"][0]
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["terminationMessagePath"] == "/dev/termination-log"
    assert p["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    latest = api.create(
        t(api, "pods"),
        {
            "metadata": {"name": "l"},
            "spec": {
                "containers": [
                    {"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
                ]
            },
        },
        "default",
    ).obj
    assert latest["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert latest["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert latest["status"]["qosClass"] == "Guaranteed"


def test_pod_priority_from_priority_class(api: ClusterApi) -> None:
    pcs = t(api, "priorityclasses", "scheduling.k8s.io")
    api.create(pcs, {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"}, None)
    p = api.create(t(api, "pods"), pod("p", priorityClassName="high"), "default").obj
    assert (p["spec"]["priority"], p["spec"]["preemptionPolicy"]) == (1000, "Never")
    crit = api.create(t(api, "pods"), pod("c", priorityClassName="system-node-critical"), "kube-system").obj
    assert crit["spec"]["priority"] == 2000001000
    # A globalDefault class applies to pods that name none.
    api.create(pcs, {"metadata": {"name": "dflt"}, "value": 7, "globalDefault": True}, None)
    d = api.create(t(api, "pods"), pod("d"), "default").obj
    assert (d["spec"]["priorityClassName"], d["spec"]["priority"]) == ("dflt", 7)


def test_missing_priority_class_is_forbidden(api: ClusterApi) -> None:
    status = api_error(api.create, t(api, "pods"), pod("p", priorityClassName="nope"), "default")
    assert status["code"] == 403
    assert status["reason"] == "Forbidden"
    assert status["message"] == 'pods "p" is forbidden: no PriorityClass with name nope was found'
    assert not exists(api, t(api, "pods"), "default", "p")


def test_create_in_missing_namespace_is_404(api: ClusterApi) -> None:
    status = api_error(api.create, t(api, "configmaps"), {"metadata": {"name": "c"}}, "nowhere")
    assert (status["code"], status["reason"], status["message"]) == (
        404,
        "NotFound",
        'namespaces "nowhere" not found',
    )


def test_create_in_terminating_namespace_is_403(api: ClusterApi) -> None:
    ns, cms = t(api, "namespaces"), t(api, "configmaps")
    api.create(ns, {"metadata": {"name": "x"}}, None)
    api.create(cms, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}, "x")
    _, removed = api.delete(ns, None, "x")
    assert not removed
    assert api.get(ns, None, "x").obj["status"]["phase"] == "Terminating"
    status = api_error(api.create, cms, {"metadata": {"name": "c"}}, "x")
    assert status["code"] == 403
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'configmaps "c" is forbidden: unable to create new content in namespace x because it is being terminated'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace x is being terminated",
            "field": "metadata.namespace",
        }
    ]


def test_generate_name(api: ClusterApi) -> None:
    cms = t(api, "configmaps")
    a = api.create(cms, {"metadata": {"generateName": "cfg-"}}, "default")
    b = api.create(cms, {"metadata": {"generateName": "cfg-"}}, "default")
    for st in (a, b):
        name = st.obj["metadata"]["name"]
        assert name.startswith("cfg-") and len(name) == len("cfg-") + 5
        assert st.obj["metadata"]["generateName"] == "cfg-"
    assert a.key != b.key
    # An explicit name wins over generateName.
    c = api.create(cms, {"metadata": {"name": "given", "generateName": "cfg-"}}, "default")
    assert c.key == ("default", "given")


def test_create_existing_is_409_already_exists(api: ClusterApi) -> None:
    api.create(t(api, "configmaps"), {"metadata": {"name": "sc"}}, "default")
    status = api_error(api.create, t(api, "configmaps"), {"metadata": {"name": "sc"}}, "default")
    assert (status["code"], status["reason"], status["message"]) == (
        409,
        "AlreadyExists",
        'configmaps "sc" already exists',
    )


# -- update -------------------------------------------------------------------------------------------------


def test_put_with_stale_resource_version_is_409(api: ClusterApi) -> None:
    cms = t(api, "configmaps")
    first = api.create(cms, {"metadata": {"name": "sc"}, "data": {"a": "1"}}, "default")
    api.update(cms, {**first.obj, "data": {"a": "2"}}, "default", "sc")
    status = api_error(api.update, cms, {**first.obj, "data": {"a": "3"}}, "default", "sc")
    assert status["code"] == 409 and status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on configmaps "sc": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert api.get(cms, "default", "sc").obj["data"] == {"a": "2"}


def test_noop_put_keeps_revision_and_sends_no_event(api: ClusterApi) -> None:
    cms = t(api, "configmaps")
    st = api.create(cms, {"metadata": {"name": "c"}, "data": {"a": "1"}}, "default")
    w = watch(api, cms)
    rev = api.store.revision
    same, created = api.update(cms, dict(st.obj), "default", "c")
    assert not created
    assert same.rv == st.rv and api.store.revision == rev
    assert w.drain() == []
    changed, _ = api.update(cms, {**st.obj, "data": {"a": "2"}}, "default", "c")
    assert changed.rv == rev + 1
    assert events(w) == [(MODIFIED, "c")]


def test_put_cannot_change_server_owned_metadata(api: ClusterApi) -> None:
    cms = t(api, "configmaps")
    st = api.create(cms, {"metadata": {"name": "c"}}, "default")
    body = {
        **st.obj,
        "metadata": {
            **st.obj["metadata"],
            "uid": "forged",
            "creationTimestamp": "2000-01-01T00:00:00Z",
            "labels": {"a": "b"},
        },
    }
    new, _ = api.update(cms, body, "default", "c")
    assert new.obj["metadata"]["uid"] == st.obj["metadata"]["uid"]
    assert new.obj["metadata"]["creationTimestamp"] == st.obj["metadata"]["creationTimestamp"]
    assert new.obj["metadata"]["labels"] == {"a": "b"}


# -- finalizers and deletion ------------------------------------------------------------------------------------


def test_finalizers_hold_deletion_until_the_last_goes(api: ClusterApi) -> None:
    cms = t(api, "configmaps")
    api.create(cms, {"metadata": {"name": "f", "finalizers": ["a.io/one", "a.io/two"]}}, "default")
    w = watch(api, cms)
    st, removed = api.delete(cms, "default", "f")
    assert not removed
    assert st.obj["metadata"]["deletionTimestamp"]
    assert st.obj["metadata"]["deletionGracePeriodSeconds"] == 0
    # A second delete changes nothing.
    again, removed = api.delete(cms, "default", "f")
    assert not removed and again.rv == st.rv
    # Adding a finalizer while deleting is refused.
    grow = {**st.obj, "metadata": {**st.obj["metadata"], "finalizers": ["a.io/one", "a.io/two", "b.io/new"]}}
    status = api_error(api.update, cms, grow, "default", "f")
    assert status["code"] == 422
    assert status["message"] == (
        'ConfigMap "f" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object '
        'is being deleted, found new finalizers []string{"b.io/new"}'
    )
    # Removing one keeps it; removing the last deletes it.
    one, _ = api.update(
        cms, {**st.obj, "metadata": {**st.obj["metadata"], "finalizers": ["a.io/two"]}}, "default", "f"
    )
    assert exists(api, cms, "default", "f")
    api.update(cms, {**one.obj, "metadata": {**one.obj["metadata"], "finalizers": []}}, "default", "f")
    assert not exists(api, cms, "default", "f")
    assert events(w) == [(MODIFIED, "f"), (MODIFIED, "f"), (MODIFIED, "f"), (DELETED, "f")]


def test_delete_preconditions(api: ClusterApi) -> None:
    cms = t(api, "configmaps")
    st = api.create(cms, {"metadata": {"name": "c"}}, "default")
    status = api_error(api.delete, cms, "default", "c", {"preconditions": {"uid": "other"}})
    assert status["code"] == 409
    assert status["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "c": the UID in the precondition (other) does not match the '
        f"UID in record ({st.obj['metadata']['uid']}). The object might have been deleted and then recreated"
    )
    status = api_error(api.delete, cms, "default", "c", {"preconditions": {"resourceVersion": "1"}})
    assert status["message"] == (
        f'Operation cannot be fulfilled on ConfigMap "c": the ResourceVersion in the precondition (1) does not match '
        f"the ResourceVersion in record ({st.rv}). The object might have been modified"
    )
    assert api.delete(cms, "default", "c", {"preconditions": {"uid": st.obj["metadata"]["uid"]}})[1]


def test_bound_pod_deletion_is_graceful(api: ClusterApi) -> None:
    pods = t(api, "pods")
    api.create(pods, pod("b", nodeName="n1"), "default")
    w = watch(api, pods)
    st, removed = api.delete(pods, "default", "b")
    assert not removed
    assert st.obj["metadata"]["deletionGracePeriodSeconds"] == 30
    assert st.obj["metadata"]["deletionTimestamp"]
    assert exists(api, pods, "default", "b")  # Terminating until the kubelet confirms
    api.finish_graceful_delete(pods, "default", "b")
    assert not exists(api, pods, "default", "b")
    assert events(w) == [(MODIFIED, "b"), (DELETED, "b")]


def test_graceful_deletion_options(api: ClusterApi) -> None:
    pods = t(api, "pods")
    api.create(pods, pod("g", nodeName="n1"), "default")
    st, removed = api.delete(pods, "default", "g", {"gracePeriodSeconds": 5})
    assert not removed and st.obj["metadata"]["deletionGracePeriodSeconds"] == 5
    # A longer grace period later does not extend it; zero forces the removal.
    same, removed = api.delete(pods, "default", "g", {"gracePeriodSeconds": 60})
    assert not removed and same.rv == st.rv
    _, removed = api.delete(pods, "default", "g", {"gracePeriodSeconds": 0})
    assert removed and not exists(api, pods, "default", "g")


def test_unbound_and_finished_pods_go_at_once(api: ClusterApi) -> None:
    pods = t(api, "pods")
    api.create(pods, pod("u"), "default")
    assert api.delete(pods, "default", "u")[1]
    done = api.create(pods, pod("d", nodeName="n1"), "default")
    api.update(pods, {**done.obj, "status": {"phase": "Succeeded"}}, "default", "d", subresource="status")
    assert api.delete(pods, "default", "d")[1]


# -- binding ------------------------------------------------------------------------------------------------


def test_binding_sets_node_and_condition_in_one_event(api: ClusterApi) -> None:
    pods = t(api, "pods")
    api.create(pods, pod("p"), "default")
    w = watch(api, pods)
    result = api.bind("default", "p", {"target": {"kind": "Node", "name": "n1"}}, url_name="p")
    assert result == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    items = w.drain()
    assert [e for e, _ in items] == [MODIFIED]
    bound = items[0][1].obj
    assert bound["spec"]["nodeName"] == "n1"
    [cond] = bound["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["lastProbeTime"]) == ("PodScheduled", "True", None)
    assert cond["lastTransitionTime"].endswith("Z")


def test_binding_conflicts(api: ClusterApi) -> None:
    pods = t(api, "pods")
    p = api.create(pods, pod("p"), "default")
    uid = p.obj["metadata"]["uid"]

    def conflict(name: str, body: Obj) -> str:
        status = api_error(api.bind, "default", name, body, url_name=name)
        assert (status["code"], status["reason"]) == (409, "Conflict")
        return str(status["message"])

    storage = "StorageError: invalid object, Code: 4, Key: /registry/pods/default/p, ResourceVersion: 0, "
    assert conflict("p", {"metadata": {"uid": "other"}, "target": {"name": "n1"}}) == (
        f'Operation cannot be fulfilled on pods "p": {storage}AdditionalErrorMsg: Precondition failed: '
        f"UID in precondition: other, UID in object meta: {uid}"
    )
    assert conflict("p", {"metadata": {"resourceVersion": "1"}, "target": {"name": "n1"}}) == (
        f'Operation cannot be fulfilled on pods "p": {storage}AdditionalErrorMsg: Precondition failed: '
        f"ResourceVersion in precondition: 1, ResourceVersion in object meta: {p.rv}"
    )
    api.bind(
        "default",
        "p",
        {"metadata": {"uid": uid, "resourceVersion": str(p.rv)}, "target": {"name": "n5"}},
        url_name="p",
    )
    assert conflict("p", {"target": {"name": "n6"}}) == (
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n5"'
    )
    api.create(pods, pod("g", schedulingGates=[{"name": "wait"}]), "default")
    assert conflict("g", {"target": {"name": "n1"}}) == (
        'Operation cannot be fulfilled on pods/binding "g": pod g has non-empty .spec.schedulingGates'
    )
    api.create(pods, pod("d", finalizers=None), "default")
    api.update(
        pods,
        {
            **api.get(pods, "default", "d").obj,
            "metadata": {**api.get(pods, "default", "d").obj["metadata"], "finalizers": ["x.io/hold"]},
        },
        "default",
        "d",
    )
    api.delete(pods, "default", "d")
    assert conflict("d", {"target": {"name": "n1"}}) == (
        'Operation cannot be fulfilled on pods/binding "d": pod d is being deleted, cannot be assigned to a host'
    )
    status = api_error(api.bind, "default", "ghost", {"target": {"name": "n1"}}, url_name="ghost")
    assert (status["code"], status["message"]) == (404, 'pods "ghost" not found')


# -- events: one storage, two views ---------------------------------------------------------------------------


def test_events_k8s_io_and_core_share_one_storage(api: ClusterApi) -> None:
    ev_new, ev_core = t(api, "events", "events.k8s.io"), t(api, "events")
    regarding = {"kind": "Pod", "namespace": "default", "name": "p", "uid": "u1", "apiVersion": "v1"}
    api.create(
        ev_new,
        {
            "metadata": {"name": "p.1"},
            "eventTime": "2026-12-02T10:00:00.000000Z",
            "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-host",
            "action": "Binding",
            "reason": "Scheduled",
            "type": "Normal",
            "note": "Successfully assigned default/p to t2",
            "regarding": regarding,
        },
        "default",
    )
    core = api.get(ev_core, "default", "p.1").obj
    assert (core["apiVersion"], core["kind"]) == ("v1", "Event")
    assert core["message"] == "Successfully assigned default/p to t2"
    assert core["involvedObject"] == regarding
    assert core["reportingComponent"] == "default-scheduler"
    assert core["reportingInstance"] == "default-scheduler-host"
    assert "note" not in core and "regarding" not in core

    api.create(
        ev_core,
        {
            "metadata": {"name": "p.2"},
            "involvedObject": regarding,
            "reason": "Pulled",
            "message": "Container image pulled",
            "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-12-02T10:00:00Z",
            "lastTimestamp": "2026-12-02T10:01:00Z",
            "count": 2,
            "type": "Normal",
        },
        "default",
    )
    view = api.to_view(ev_new, api.get(ev_new, "default", "p.2").obj)
    assert view["apiVersion"] == "events.k8s.io/v1"
    assert view["note"] == "Container image pulled"
    assert view["regarding"] == regarding
    assert view["deprecatedSource"] == {"component": "kubelet", "host": "n1"}
    assert view["deprecatedFirstTimestamp"] == "2026-12-02T10:00:00Z"
    assert view["deprecatedLastTimestamp"] == "2026-12-02T10:01:00Z"
    assert view["deprecatedCount"] == 2
    assert "message" not in view and "involvedObject" not in view
    # Both views list the same two objects.
    assert len(api.store.list(ev_new.storage_key, "default")[0]) == 2
    assert ev_new.storage_key == ev_core.storage_key


def test_events_field_selector_uses_each_views_names(api: ClusterApi) -> None:
    ev_new, ev_core = t(api, "events", "events.k8s.io"), t(api, "events")
    api.create(
        ev_core,
        {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "X"},
        "default",
    )
    st = api.get(ev_core, "default", "e")
    core_pred = api.predicate(ev_core, None, "involvedObject.name=p")
    new_pred = api.predicate(ev_new, None, "regarding.name=p")
    assert core_pred is not None and core_pred(st.obj)
    assert new_pred is not None and new_pred(st.obj)


# -- CustomResourceDefinitions --------------------------------------------------------------------------------


def widget_crd(subresources: Obj | None = None) -> Obj:
    return {
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": subresources if subresources is not None else {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def test_crd_lifecycle_with_status_subresource(api: ClusterApi) -> None:
    crds = t(api, "customresourcedefinitions", "apiextensions.k8s.io")
    assert api.registry.get("example.com", "v1", "widgets") is None
    crd = api.create(crds, widget_crd(), None).obj
    assert crd["status"]["acceptedNames"]["listKind"] == "WidgetList"
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    widgets = t(api, "widgets", "example.com")
    assert widgets.namespaced and widgets.status_subresource and not widgets.builtin

    w = api.create(
        widgets, {"metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ready": True}}, "default"
    )
    assert "status" not in w.obj  # status is ignored on create
    assert w.obj["metadata"]["generation"] == 1
    # Main-resource writes ignore status; a spec change bumps generation.
    w2, _ = api.update(widgets, {**w.obj, "spec": {"size": 2}, "status": {"ready": True}}, "default", "w")
    assert "status" not in w2.obj
    assert w2.obj["metadata"]["generation"] == 2
    # Status writes ignore spec and leave generation alone.
    w3, _ = api.update(
        widgets,
        {**w2.obj, "spec": {"size": 9}, "status": {"ready": True}},
        "default",
        "w",
        subresource="status",
    )
    assert w3.obj["spec"] == {"size": 2} and w3.obj["status"] == {"ready": True}
    assert w3.obj["metadata"]["generation"] == 2
    # Metadata-only changes leave generation alone.
    w4, _ = api.update(
        widgets, {**w3.obj, "metadata": {**w3.obj["metadata"], "labels": {"a": "b"}}}, "default", "w"
    )
    assert w4.obj["metadata"]["generation"] == 2 and w4.obj["status"] == {"ready": True}
    # Custom resources need a resourceVersion on update.
    body = {**w4.obj, "metadata": {k: v for k, v in w4.obj["metadata"].items() if k != "resourceVersion"}}
    assert api_error(api.update, widgets, body, "default", "w")["code"] == 422

    watcher = watch(api, widgets)
    _, removed = api.delete(crds, None, "widgets.example.com")
    assert removed
    assert api.registry.get("example.com", "v1", "widgets") is None
    assert api.store.list("example.com/widgets")[0] == []
    assert watcher.closed
    # Re-creating the CRD serves an empty collection.
    api.create(crds, widget_crd(), None)
    assert api.store.list(t(api, "widgets", "example.com").storage_key)[0] == []


def test_cr_without_status_subresource_counts_status_in_generation(api: ClusterApi) -> None:
    api.create(t(api, "customresourcedefinitions", "apiextensions.k8s.io"), widget_crd(subresources={}), None)
    widgets = t(api, "widgets", "example.com")
    w = api.create(
        widgets, {"metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ready": False}}, "default"
    )
    assert w.obj["status"] == {"ready": False}
    w2, _ = api.update(widgets, {**w.obj, "status": {"ready": True}}, "default", "w")
    assert w2.obj["status"] == {"ready": True}
    assert w2.obj["metadata"]["generation"] == 2


# -- garbage collection and namespace deletion -------------------------------------------------------------------


def owner_ref(owner: Stored, block: bool = False) -> list[Obj]:
    ref = {
        "apiVersion": owner.obj["apiVersion"],
        "kind": owner.obj["kind"],
        "name": owner.obj["metadata"]["name"],
        "uid": owner.obj["metadata"]["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return [ref]


def replicaset(name: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod("x")["spec"]},
        },
    }


def test_background_garbage_collection(api: ClusterApi) -> None:
    rss, pods, cms = t(api, "replicasets", "apps"), t(api, "pods"), t(api, "configmaps")
    rs = api.create(rss, replicaset("r"), "default")
    other = api.create(cms, {"metadata": {"name": "other-owner"}}, "default")
    api.create(pods, {**pod("p1"), "metadata": {"name": "p1", "ownerReferences": owner_ref(rs)}}, "default")
    api.create(
        pods,
        {**pod("p2", nodeName="n1"), "metadata": {"name": "p2", "ownerReferences": owner_ref(rs)}},
        "default",
    )
    api.create(
        cms, {"metadata": {"name": "shared", "ownerReferences": owner_ref(rs) + owner_ref(other)}}, "default"
    )
    api.create(pods, pod("unrelated"), "default")
    _, removed = api.delete(rss, "default", "r")
    assert removed
    assert not exists(api, pods, "default", "p1")
    # A bound pod is deleted gracefully; an object with another live owner only loses the dangling reference.
    assert api.get(pods, "default", "p2").obj["metadata"]["deletionTimestamp"]
    shared = api.get(cms, "default", "shared").obj
    assert [r["name"] for r in shared["metadata"]["ownerReferences"]] == ["other-owner"]
    assert exists(api, pods, "default", "unrelated")


def test_owner_held_by_a_finalizer_collects_dependents_when_it_finally_goes(api: ClusterApi) -> None:
    rss, pods = t(api, "replicasets", "apps"), t(api, "pods")
    rs = api.create(
        rss, {**replicaset("r"), "metadata": {"name": "r", "finalizers": ["x.io/hold"]}}, "default"
    )
    api.create(pods, {**pod("p"), "metadata": {"name": "p", "ownerReferences": owner_ref(rs)}}, "default")
    st, _ = api.delete(rss, "default", "r")
    assert exists(api, pods, "default", "p")
    api.update(rss, {**st.obj, "metadata": {**st.obj["metadata"], "finalizers": []}}, "default", "r")
    assert not exists(api, rss, "default", "r")
    assert not exists(api, pods, "default", "p")


def test_orphan_deletion_keeps_dependents(api: ClusterApi) -> None:
    rss, pods = t(api, "replicasets", "apps"), t(api, "pods")
    rs = api.create(rss, replicaset("r"), "default")
    api.create(pods, {**pod("p"), "metadata": {"name": "p", "ownerReferences": owner_ref(rs)}}, "default")
    _, removed = api.delete(rss, "default", "r", {"propagationPolicy": "Orphan"})
    assert removed and not exists(api, rss, "default", "r")
    assert "ownerReferences" not in api.get(pods, "default", "p").obj["metadata"]


def test_foreground_deletion_waits_for_blocking_dependents(api: ClusterApi) -> None:
    rss, pods = t(api, "replicasets", "apps"), t(api, "pods")
    rs = api.create(rss, replicaset("r"), "default")
    api.create(
        pods,
        {**pod("p", nodeName="n1"), "metadata": {"name": "p", "ownerReferences": owner_ref(rs, True)}},
        "default",
    )
    st, removed = api.delete(rss, "default", "r", {"propagationPolicy": "Foreground"})
    assert not removed
    assert st.obj["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert api.get(pods, "default", "p").obj["metadata"]["deletionTimestamp"]
    api.finish_graceful_delete(pods, "default", "p")
    assert not exists(api, pods, "default", "p")
    assert not exists(api, rss, "default", "r")


def test_namespace_delete_cascades(api: ClusterApi) -> None:
    ns, cms, pods = t(api, "namespaces"), t(api, "configmaps"), t(api, "pods")
    api.create(ns, {"metadata": {"name": "doomed"}}, None)
    api.create(cms, {"metadata": {"name": "c"}}, "doomed")
    api.create(pods, pod("running", nodeName="n1"), "doomed")
    api.create(cms, {"metadata": {"name": "keep"}}, "default")
    w = watch(api, ns)
    st, removed = api.delete(ns, None, "doomed")
    assert not removed
    assert st.obj["status"]["phase"] == "Terminating"
    assert not exists(api, cms, "doomed", "c")
    assert not exists(api, t(api, "serviceaccounts"), "doomed", "default")
    # The bound pod is terminating; the namespace waits for it, then goes.
    assert api.get(pods, "doomed", "running").obj["metadata"]["deletionTimestamp"]
    assert exists(api, ns, None, "doomed")
    api.finish_graceful_delete(pods, "doomed", "running")
    assert not exists(api, ns, None, "doomed")
    assert exists(api, cms, "default", "keep")
    assert [e for e, _ in events(w)] == [MODIFIED, MODIFIED, DELETED]
    # The name is free again.
    assert api.create(ns, {"metadata": {"name": "doomed"}}, None).obj["status"]["phase"] == "Active"


def test_empty_namespace_goes_at_once(api: ClusterApi) -> None:
    ns = t(api, "namespaces")
    api.create(ns, {"metadata": {"name": "empty"}}, None)
    w = watch(api, ns)
    api.delete(ns, None, "empty")
    assert not exists(api, ns, None, "empty")
    assert [e for e, _ in events(w)] == [MODIFIED, MODIFIED, DELETED]


def test_observers_see_committed_writes(api: ClusterApi) -> None:
    seen: list[tuple[str, str]] = []
    api.observers.append(lambda rtype, etype, new, old: seen.append((etype, rtype.plural)))
    cms = t(api, "configmaps")
    st = api.create(cms, {"metadata": {"name": "o"}}, "default")
    api.update(cms, {**st.obj, "data": {"k": "v"}}, "default", "o")
    api.delete(cms, "default", "o")
    assert seen == [(ADDED, "configmaps"), (MODIFIED, "configmaps"), (DELETED, "configmaps")]
