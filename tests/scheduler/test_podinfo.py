"""PodInfo parsing: quantities, upstream PodRequests (init containers, sidecars, overhead, pod-level resources),
non-zero defaults, ports, images and the other fields plugins read."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo, aggregate_requests, normalized_image_name
from kubesched.scheduler.resources import (
    CPU,
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    ResourceIndex,
    is_extended_resource_name,
    parse_quantity,
    quantity_milli_value,
    quantity_value,
)


def container(requests: dict[str, Any] | None = None, *, restart: str | None = None, **extra: Any) -> dict:
    c: dict[str, Any] = {"name": "c", "image": extra.pop("image", "pause")}
    if requests is not None:
        c["resources"] = {"requests": requests}
    if restart:
        c["restartPolicy"] = restart
    c.update(extra)
    return c


def pod(containers: list[dict], inits: list[dict] | None = None, **spec: Any) -> dict:
    body: dict[str, Any] = {"containers": containers, **spec}
    if inits:
        body["initContainers"] = inits
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": body}


def info(p: dict, res: ResourceIndex | None = None) -> PodInfo:
    return PodInfo.from_pod(p, res or ResourceIndex())


# --- quantities ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("1", 1, 1000),
        ("100m", 1, 100),
        ("1.5", 2, 1500),
        ("1.5m", 1, 2),  # MilliValue rounds up
        ("0.5", 1, 500),
        ("1Ki", 1024, 1024000),
        ("64Mi", 64 * 2**20, 64 * 2**20 * 1000),
        ("1Gi", 2**30, 2**30 * 1000),
        ("1k", 1000, 10**6),
        ("1M", 10**6, 10**9),
        ("1G", 10**9, 10**12),
        ("1e3", 1000, 10**6),
        ("1E3", 1000, 10**6),
        ("1E", 10**18, 10**21),
        ("2u", 1, 1),
        ("500n", 1, 1),
        (".5", 1, 500),
        ("+3", 3, 3000),
    ],
)
def test_quantity_values(text: str, value: int, milli: int) -> None:
    assert quantity_value(text) == value
    assert quantity_milli_value(text) == milli


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "1Ki2", "1 Gi", "1e", "--1"])
def test_invalid_quantities_raise(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_exponent_without_digits_is_zero_as_upstream() -> None:
    # kube-apiserver's ParseQuantity takes "e3" as 0 (no digits read as "0"); the scheduler shares its parser.
    assert parse_quantity("e3") == 0


def test_numeric_quantities() -> None:
    assert quantity_value(3) == 3
    assert quantity_milli_value(0.25) == 250


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["", "Ki", "Mi", "Gi", "k", "M", "G", "m"]))
def test_quantity_suffixes_scale_exactly(n: int, suffix: str) -> None:
    scale = {
        "": 1,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "k": 10**3,
        "M": 10**6,
        "G": 10**9,
        "m": Fraction(1, 1000),
    }
    assert parse_quantity(f"{n}{suffix}") == n * scale[suffix]


@given(st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False))
def test_decimal_quantities_match_their_exact_value(d: Any) -> None:
    text = format(d, "f")
    assert parse_quantity(text) == Fraction(text)
    assert quantity_milli_value(text) == -(-Fraction(text) * 1000 // 1)


def test_resource_index_columns_grow_and_stay() -> None:
    res = ResourceIndex()
    assert (res.col("cpu"), res.col("memory"), res.col("ephemeral-storage"), res.col("pods")) == (0, 1, 2, 3)
    assert res.get("example.com/gpu") is None
    assert res.col("example.com/gpu") == 4
    assert res.col("example.com/gpu") == 4
    assert res.names[4] == "example.com/gpu"
    v1 = res.parse_list({"cpu": "2", "memory": "1Gi"})
    v2 = res.parse_list({"cpu": "2000m", "memory": "1024Mi"})
    assert v1 is v2  # identical vectors are shared
    assert not v1.flags.writeable


def test_extended_resource_names() -> None:
    assert is_extended_resource_name("example.com/foo")
    assert not is_extended_resource_name("cpu")
    assert not is_extended_resource_name("hugepages-2Mi")
    assert not is_extended_resource_name("kubernetes.io/something")
    assert not is_extended_resource_name("requests.example.com/foo")


# --- requests (upstream TestEnoughRequests / computePodResourceRequest) --------------------------------------


def test_requests_sum_containers_and_take_max_init_container() -> None:
    # upstream's doc example: containers 2+1 cpu, 1G+1G; init 2 cpu/1G then 2 cpu/3G -> cpu 3, memory 3G
    p = pod(
        [container({"cpu": "2", "memory": "1G"}), container({"cpu": "1", "memory": "1G"})],
        [container({"cpu": "2", "memory": "1G"}), container({"cpu": "2", "memory": "3G"})],
    )
    pi = info(p)
    assert pi.requests[CPU] == 3000
    assert pi.requests[MEMORY] == 3 * 10**9
    assert pi.requests[PODS] == 1


def test_init_container_cpu_dominates() -> None:
    pi = info(pod([container({"cpu": "1m", "memory": "1"})], [container({"cpu": "3m", "memory": "1"})]))
    assert (pi.requests[CPU], pi.requests[MEMORY]) == (3, 1)


def test_sidecars_add_to_everything_after_them() -> None:
    # sidecar 1 cpu runs alongside the 2 cpu main container; the plain init container (3 cpu) runs after the
    # sidecar started, so that step needs 1 + 3.
    p = pod(
        [container({"cpu": "2"})],
        [container({"cpu": "1"}, restart="Always"), container({"cpu": "3"})],
    )
    assert info(p).requests[CPU] == 4000
    # a plain init container before the sidecar does not see it
    p = pod([container({"cpu": "2"})], [container({"cpu": "3"}), container({"cpu": "1"}, restart="Always")])
    assert info(p).requests[CPU] == 3000
    assert aggregate_requests([{"resources": {"requests": {"cpu": "1"}}}], []) == {"cpu": 1000}


def test_overhead_is_added() -> None:
    p = pod([container({"cpu": "1m", "memory": "1"})], overhead={"cpu": "3m", "memory": "13"})
    pi = info(p)
    assert (pi.requests[CPU], pi.requests[MEMORY]) == (4, 14)
    assert (pi.nonzero_cpu, pi.nonzero_mem) == (4, 14)


def test_pod_level_requests_replace_container_sum() -> None:
    p = pod([container({"cpu": "1m", "memory": "1"})], resources={"requests": {"cpu": "7m", "memory": "2"}})
    pi = info(p)
    assert (pi.requests[CPU], pi.requests[MEMORY]) == (7, 2)


def test_nonzero_defaults_apply_to_missing_requests_only() -> None:
    pi = info(pod([container()]))
    assert (pi.requests[CPU], pi.requests[MEMORY]) == (0, 0)
    assert (pi.nonzero_cpu, pi.nonzero_mem) == (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)
    pi = info(pod([container({"cpu": "0", "memory": "0"})]))
    assert (pi.nonzero_cpu, pi.nonzero_mem) == (0, 0)
    pi = info(pod([container({"cpu": "250m"}), container()]))
    assert (pi.nonzero_cpu, pi.nonzero_mem) == (350, 2 * DEFAULT_MEMORY_REQUEST)
    assert info(pod([])).nonzero_cpu == 0  # no containers at all: nothing to default


def test_extended_resources_get_columns() -> None:
    res = ResourceIndex()
    pi = info(
        pod([container({"example.com/gpu": "2", "hugepages-2Mi": "4Mi", "ephemeral-storage": "1Gi"})]), res
    )
    assert pi.scalar_names == ("example.com/gpu", "hugepages-2Mi")
    assert pi.requests[res.col("example.com/gpu")] == 2
    assert pi.requests[res.col("hugepages-2Mi")] == 4 * 2**20
    assert pi.requests[EPHEMERAL_STORAGE] == 2**30
    assert pi.request_of(res.col("brand.new/thing")) == 0
    assert len(pi.request_row(res.count)) == res.count


def test_best_effort() -> None:
    assert info(pod([container()])).is_best_effort
    assert info(pod([container({"example.com/gpu": "1"})])).is_best_effort
    assert not info(pod([container({"cpu": "1m"})])).is_best_effort
    assert not info(pod([container(resources={"limits": {"memory": "1Gi"}})])).is_best_effort


# --- other fields --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "normalized"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@sha256:" + "a" * 64, "root@sha256:" + "a" * 64),
        ("nginx", "nginx:latest"),  # no docker.io/library rewriting, as upstream
    ],
)
def test_normalized_image_name(image: str, normalized: str) -> None:
    assert normalized_image_name(image) == normalized


def test_fields() -> None:
    p = {
        "metadata": {
            "name": "web",
            "namespace": "prod",
            "uid": "abc",
            "labels": {"app": "web"},
            "creationTimestamp": "2024-01-01T00:00:10Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}],
            "resourceVersion": "7",
        },
        "spec": {
            "priority": 100,
            "schedulerName": "other",
            "nodeSelector": {"disk": "ssd"},
            "schedulingGates": [{"name": "a"}, {"name": "b"}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "initContainers": [container(image="init")],
            "containers": [container(image="app:v1", ports=[{"containerPort": 80, "hostPort": 8080}])],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": []}]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": {}}],
                },
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
            },
        },
        "status": {"nominatedNodeName": "n1", "phase": "Pending"},
    }
    pi = info(p)
    assert (pi.key, pi.uid, pi.labels, pi.resource_version) == ("prod/web", "abc", {"app": "web"}, "7")
    assert (pi.priority, pi.scheduler_name, pi.preemption_policy) == (100, "other", "PreemptLowerPriority")
    assert pi.creation_ts == 1704067210.0
    assert pi.scheduling_gates == ("a", "b")
    assert pi.tolerations_key == (("k", "Exists", "", "NoSchedule"),)
    assert pi.host_ports == (("TCP", "0.0.0.0", 8080),)
    assert pi.images == ("init:latest", "app:v1")
    assert pi.num_containers == 2
    assert pi.nominated_node_name == "n1"
    assert pi.owner_kind == "ReplicaSet"
    assert pi.required_node_affinity == [{"matchFields": []}]
    assert pi.preferred_node_affinity == [(5, {})]
    assert pi.pod_anti_affinity == {"requiredDuringSchedulingIgnoredDuringExecution": []}
    assert pi.pod_affinity is None
    assert not pi.is_terminal


def test_defaults() -> None:
    pi = info({"metadata": {"name": "x"}, "spec": {"containers": []}})
    assert (pi.namespace, pi.scheduler_name, pi.priority, pi.node_name) == (
        "default",
        "default-scheduler",
        0,
        "",
    )
    assert pi.deletion_ts is None
    assert pi.required_node_affinity is None
    assert info({"metadata": {}, "spec": {}, "status": {"phase": "Succeeded"}}).is_terminal


def test_assumed_copy_shares_everything_but_the_node() -> None:
    pi = info(pod([container({"cpu": "1"})]))
    assumed = pi.assumed_on("n7")
    assert assumed.node_name == "n7" and pi.node_name == ""
    assert assumed.pod is pi.pod and assumed.requests is pi.requests and assumed.uid == pi.uid


def test_queued_pod_info() -> None:
    q = QueuedPodInfo(info(pod([], priority=5)), timestamp=3.0)
    assert q.priority == 5 and q.attempts == 0 and not q.gated and q.unschedulable_plugins == set()
