"""Server-side Tables: columns, cells and ages as kube-apiserver renders them for kubectl get."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kubesched.cluster.kinds.pods import pod_status_reason
from kubesched.cluster.kinds.printing import human_duration, selector_string
from kubesched.cluster.resources import ResourceRegistry, ResourceType
from kubesched.cluster.tables import jsonpath_get, to_table, wants_table

REG = ResourceRegistry()
NOW = dt.datetime(2024, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def ago(seconds: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def rtype(group: str, plural: str, version: str = "v1") -> ResourceType:
    found = REG.get(group, version, plural)
    assert found is not None
    return found


def cells(rt: ResourceType, obj: dict[str, Any]) -> list[Any]:
    return to_table(rt, [obj], now=NOW)["rows"][0]["cells"]


def names(rt: ResourceType) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in to_table(rt, [], now=NOW)["columnDefinitions"]]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (182, "3m2s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (51 * 3600, "2d3h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (740 * 86400, "2y10d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_human_duration_matches_kubectl(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_wants_table() -> None:
    kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    assert wants_table(kubectl)
    assert not wants_table("application/json")
    assert not wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    assert not wants_table("")


def test_table_envelope_and_row_objects() -> None:
    pods = rtype("", "pods")
    obj = {
        "metadata": {"name": "p", "namespace": "default", "creationTimestamp": ago(5)},
        "spec": {},
        "status": {},
    }
    table = to_table(pods, [obj], now=NOW, resource_version="42", continue_token="abc")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42", "continue": "abc"}
    assert table["rows"][0]["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }
    assert to_table(pods, [obj], now=NOW, include_object="Object")["rows"][0]["object"] is obj
    assert "object" not in to_table(pods, [obj], now=NOW, include_object="None")["rows"][0]
    assert to_table(pods, [obj], now=NOW, include_columns=False)["columnDefinitions"] == []
    name_col = table["columnDefinitions"][0]
    assert name_col["name"] == "Name" and name_col["type"] == "string" and name_col["format"] == "name"


def test_pod_columns_and_cells() -> None:
    pods = rtype("", "pods")
    assert names(pods) == [
        ("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0),
        ("IP", 1), ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1),
    ]  # fmt: skip
    pending = {
        "metadata": {"name": "p", "creationTimestamp": ago(182)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Pending", "nominatedNodeName": "n2"},
    }
    assert cells(pods, pending) == ["p", "0/2", "Pending", "0", "3m2s", "<none>", "<none>", "n2", "<none>"]
    running = {
        "metadata": {"name": "r", "creationTimestamp": ago(3600 * 30)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1", "readinessGates": [{"conditionType": "x/ok"}]},
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.0.0.9"}],
            "conditions": [{"type": "x/ok", "status": "True"}],
            "containerStatuses": [
                {"name": "a", "ready": True, "restartCount": 3, "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": ago(90)}}},
                {"name": "b", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
            ],
        },
    }  # fmt: skip
    assert cells(pods, running) == [
        "r",
        "1/2",
        "CrashLoopBackOff",
        "3 (90s ago)",
        "30h",
        "10.0.0.9",
        "n1",
        "<none>",
        "1/1",
    ]


@pytest.mark.parametrize(
    ("pod", "status"),
    [
        (
            {
                "status": {
                    "phase": "Pending",
                    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
                }
            },
            "SchedulingGated",
        ),
        (
            {"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "status": {"phase": "Running"}},
            "Terminating",
        ),
        (
            {"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}, "status": {"phase": "Succeeded"}},
            "Succeeded",
        ),
        (
            {"status": {"phase": "Running", "reason": "NodeLost"}, "metadata": {"deletionTimestamp": "x"}},
            "Unknown",
        ),
        ({"status": {"phase": "Failed", "reason": "Evicted"}}, "Evicted"),
        (
            {
                "spec": {"initContainers": [{"name": "i"}]},
                "status": {
                    "phase": "Pending",
                    "initContainerStatuses": [{"name": "i", "state": {"running": {}}}],
                },
            },
            "Init:0/1",
        ),
        (
            {
                "spec": {"initContainers": [{"name": "i"}]},
                "status": {
                    "phase": "Pending",
                    "initContainerStatuses": [{"name": "i", "state": {"terminated": {"exitCode": 2}}}],
                },
            },
            "Init:ExitCode:2",
        ),
        (
            {
                "spec": {"initContainers": [{"name": "i"}]},
                "status": {
                    "phase": "Pending",
                    "initContainerStatuses": [
                        {"name": "i", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
                    ],
                },
            },
            "Init:ImagePullBackOff",
        ),
        (
            {
                "status": {
                    "phase": "Succeeded",
                    "containerStatuses": [
                        {"name": "c", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                    ],
                }
            },
            "Completed",
        ),
        (
            {
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": "c", "state": {"terminated": {"exitCode": 137, "signal": 9}}}
                    ],
                }
            },
            "Signal:9",
        ),
    ],
)
def test_pod_status_column(pod: dict[str, Any], status: str) -> None:
    pod.setdefault("spec", {}).setdefault("containers", [{"name": "c"}])
    assert pod_status_reason(pod)[0] == status


def test_completed_pods_carry_a_row_condition() -> None:
    done = {
        "metadata": {"name": "d"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Succeeded"},
    }
    row = to_table(rtype("", "pods"), [done], now=NOW)["rows"][0]
    assert row["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]


def test_sidecars_count_as_containers() -> None:
    pod = {
        "spec": {
            "initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
            "containers": [{"name": "app"}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [
                {"name": "proxy", "started": True, "ready": True, "restartCount": 1, "state": {"running": {}}}
            ],
            "containerStatuses": [
                {"name": "app", "ready": True, "restartCount": 0, "state": {"running": {}}}
            ],
        },
    }
    reason, ready, total, restarts, _ = pod_status_reason(pod)
    assert (reason, ready, total, restarts) == ("Running", 2, 2, 1)


def test_node_cells() -> None:
    nodes = rtype("", "nodes")
    assert [n for n, _ in names(nodes)] == [
        "Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"
    ]  # fmt: skip
    node = {
        "metadata": {
            "name": "n1",
            "creationTimestamp": ago(86400 * 3 + 3600),
            "labels": {
                "node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/worker": "",
                "kubernetes.io/role": "infra",
            },
        },
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
            "addresses": [
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "192.168.1.5"},
            ],
            "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Debian 12"},
        },
    }
    assert cells(nodes, node) == [
        "n1", "Ready,SchedulingDisabled", "control-plane,infra,worker", "3d1h", "v1.32.0",
        "192.168.1.5", "<none>", "Debian 12", "<unknown>", "<unknown>",
    ]  # fmt: skip
    bare = {"metadata": {"name": "n2"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert cells(nodes, bare)[:4] == ["n2", "NotReady", "<none>", "<unknown>"]
    assert cells(nodes, {"metadata": {"name": "n3"}})[1] == "Unknown"


def test_event_cells_for_both_apis() -> None:
    core = rtype("", "events")
    assert [n for n, p in names(core) if p == 0] == ["Last Seen", "Type", "Reason", "Object", "Message"]
    old_style = {
        "metadata": {"name": "p.1"},
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
        "reason": "Pulled",
        "message": " pulled \n",
        "type": "Normal",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": ago(600),
        "lastTimestamp": ago(30),
        "count": 4,
    }
    assert cells(core, old_style) == [
        "30s",
        "Normal",
        "Pulled",
        "pod/p",
        "spec.containers{c}",
        "kubelet, n1",
        "pulled",
        "10m",
        4,
        "p.1",
    ]
    new_style = {
        "metadata": {"name": "p.2"},
        "eventTime": "2024-03-01T11:59:00.000000Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-h",
        "regarding": {"kind": "Pod", "name": "p"},
        "reason": "Scheduled",
        "note": "Successfully assigned default/p to n1",
        "type": "Normal",
    }
    v1 = rtype("events.k8s.io", "events")
    assert cells(v1, new_style) == [
        "60s", "Normal", "Scheduled", "pod/p", "", "default-scheduler, default-scheduler-h",
        "Successfully assigned default/p to n1", "60s", 1, "p.2",
    ]  # fmt: skip
    series = {**new_style, "series": {"count": 7, "lastObservedTime": "2024-03-01T11:59:50.000000Z"}}
    assert cells(v1, series)[0] == "10s" and cells(v1, series)[8] == 7


def test_namespaces_deployments_leases_and_defaults() -> None:
    ns = {"metadata": {"name": "team", "creationTimestamp": ago(70)}, "status": {"phase": "Active"}}
    assert cells(rtype("", "namespaces"), ns) == ["team", "Active", "70s"]
    deploy = {
        "metadata": {"name": "web", "creationTimestamp": ago(45)},
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
            "template": {
                "spec": {
                    "containers": [{"name": "nginx", "image": "nginx:1"}, {"name": "log", "image": "busybox"}]
                }
            },
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    deployments = rtype("apps", "deployments")
    assert [n for n, p in names(deployments) if p == 0] == ["Name", "Ready", "Up-to-date", "Available", "Age"]
    assert cells(deployments, deploy) == [
        "web",
        "2/3",
        3,
        2,
        "45s",
        "nginx,log",
        "nginx:1,busybox",
        "app=web,tier in (a,b)",
    ]
    lease = {
        "metadata": {"name": "kube-scheduler", "creationTimestamp": ago(5)},
        "spec": {"holderIdentity": "h_1"},
    }
    assert cells(rtype("coordination.k8s.io", "leases"), lease) == ["kube-scheduler", "h_1", "5s"]
    sa = {"metadata": {"name": "default", "creationTimestamp": ago(3)}}
    assert names(rtype("", "serviceaccounts")) == [("Name", 0), ("Age", 0)]
    assert cells(rtype("", "serviceaccounts"), sa) == ["default", "3s"]
    assert cells(rtype("", "configmaps"), {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}) == [
        "c",
        2,
        "<unknown>",
    ]


def test_crd_objects_get_name_and_created_at() -> None:
    crds = rtype("apiextensions.k8s.io", "customresourcedefinitions")
    table = to_table(
        crds,
        [{"metadata": {"name": "crontabs.stable.example.com", "creationTimestamp": "2024-01-01T00:00:00Z"}}],
        now=NOW,
    )
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Created At", "date"),
    ]
    assert table["rows"][0]["cells"] == ["crontabs.stable.example.com", "2024-01-01T00:00:00Z"]


def custom(columns: list[dict[str, Any]] | None) -> ResourceType:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True}
    if columns is not None:
        version["additionalPrinterColumns"] = columns
    crd = {
        "spec": {
            "group": "stable.example.com",
            "names": {"plural": "crontabs", "kind": "CronTab"},
            "versions": [version],
        }
    }
    return ResourceType("stable.example.com", "v1", "crontabs", "CronTab", True, crd=crd, builtin=False)


def test_custom_resources_default_to_name_and_age() -> None:
    rt = custom(None)
    table = to_table(rt, [{"metadata": {"name": "a", "creationTimestamp": ago(61)}}], now=NOW)
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Age", "date"),
    ]
    assert table["rows"][0]["cells"] == ["a", "61s"]


def test_custom_printer_columns() -> None:
    rt = custom([
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.cronSpec", "description": "When it runs"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ratio", "type": "number", "jsonPath": ".status.ratio"},
        {"name": "Suspended", "type": "boolean", "jsonPath": ".spec.suspend", "priority": 1},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "First", "type": "string", "jsonPath": ".spec.items[0].name"},
        {"name": "Labels", "type": "string", "jsonPath": ".metadata.labels"},
        {"name": "Dotted", "type": "string", "jsonPath": ".metadata.annotations.example\\.com/owner"},
        {"name": "Last Run", "type": "date", "jsonPath": ".status.lastRun"},
        {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
    ])  # fmt: skip
    obj = {
        "metadata": {"name": "nightly", "labels": {"a": "b"}, "annotations": {"example.com/owner": "ops"}},
        "spec": {"cronSpec": "0 3 * * *", "replicas": 2, "suspend": False, "items": [{"name": "x"}]},
        "status": {"ratio": 1, "conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}],
                   "lastRun": ago(7200)},
    }  # fmt: skip
    table = to_table(rt, [obj], now=NOW)
    assert table["columnDefinitions"][1]["description"] == "When it runs"
    assert (
        table["columnDefinitions"][2]["description"]
        == "Custom resource definition column (in JSONPath format): .spec.replicas"
    )
    assert table["columnDefinitions"][4]["priority"] == 1
    assert table["rows"][0]["cells"] == [
        "nightly",
        "0 3 * * *",
        2,
        1.0,
        False,
        "True",
        "x",
        '{"a":"b"}',
        "ops",
        "120m",
        None,
    ]
    bad_date = {"metadata": {"name": "n"}, "status": {"lastRun": "yesterday"}}
    assert to_table(rt, [bad_date], now=NOW)["rows"][0]["cells"][9] == "<invalid>"


def test_jsonpath_subset() -> None:
    doc = {"a": {"b": [{"c": 1, "k": "x"}, {"c": 2, "k": "y"}]}, "m": {"d.e": 5}}
    assert jsonpath_get(doc, ".a.b[1].c") == (True, 2)
    assert jsonpath_get(doc, "{.a.b[-1].k}") == (True, "y")
    assert jsonpath_get(doc, ".a.b[?(@.k=='y')].c") == (True, 2)
    assert jsonpath_get(doc, ".a.b[*].c") == (True, 1)
    assert jsonpath_get(doc, ".m['d.e']") == (True, 5)
    assert jsonpath_get(doc, ".a.x") == (False, None)
    assert jsonpath_get(doc, ".a.b[5]") == (False, None)


def test_selector_string() -> None:
    assert selector_string({}) == "<none>"
    sel = {"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [
        {"key": "x", "operator": "Exists"}, {"key": "y", "operator": "DoesNotExist"}, {"key": "z", "operator": "NotIn", "values": ["q"]}]}  # fmt: skip
    assert selector_string(sel) == "a=1,b=2,x,!y,z notin (q)"
