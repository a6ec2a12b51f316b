"""Issue 15, devices, end to end: a local cluster whose simulated nodes carry GPUs of the simulated DRA driver
(``cluster up --node-gpus``), kubesched scheduling, the ResourceClaim controller creating claims from a
template, all through the real HTTP API with the real kubectl.

A Deployment whose pods each claim one GPU through a ResourceClaimTemplate fills exactly the free GPUs; the
rest stay Pending with upstream's message; deleting a running pod frees its GPU for a pending one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from clusterproc import (
    ClusterProcess,
    Kubectl,
    SchedulerProcess,
    find_kubectl,
    start_cluster,
    start_scheduler,
)

NS = "default"
T = TypeVar("T")
NODES = 3
GPUS_PER_NODE = 1
REPLICAS = 5
EXPECTED_PENDING = (
    "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, "
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)


def wait_for(what: str, probe: Callable[[], T], timeout: float = 60.0, interval: float = 0.3) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(interval)


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterProcess, Kubectl]]:
    binary = find_kubectl()
    if binary is None:
        pytest.skip("no kubectl binary on this machine")
    c = start_cluster(
        tmp_path_factory.mktemp("gpu-cluster"),
        "--nodes",
        str(NODES),
        "--node-gpus",
        str(GPUS_PER_NODE),
        "--bookmark-interval",
        "2",
    )
    try:
        yield c, Kubectl(binary, c.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))
    finally:
        rc = c.stop()
        assert rc == 0, "\n".join(c.output[-50:])


def get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def create(kubectl: Kubectl, *objs: dict[str, Any]) -> None:
    kubectl("create", "-f", "-", input="\n".join(json.dumps(o) for o in objs))


TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": NS},
    "spec": {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.kubesched.io",
                            "selectors": [
                                {
                                    "cel": {
                                        "expression": 'device.capacity["gpu.kubesched.io"].memory'
                                        '.compareTo(quantity("8Gi")) >= 0'
                                    }
                                }
                            ],
                        },
                    }
                ]
            }
        }
    },
}

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "trainer", "namespace": NS},
    "spec": {
        "replicas": REPLICAS,
        "selector": {"matchLabels": {"app": "trainer"}},
        "template": {
            "metadata": {"labels": {"app": "trainer"}},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "trainer:1",
                        "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            },
        },
    },
}


def trainer_pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    return [
        p
        for p in get(kubectl, "pods", "-n", NS, "-l", "app=trainer")["items"]
        if not p["metadata"].get("deletionTimestamp")
    ]


def scheduled_condition(p: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in p.get("status", {}).get("conditions") or () if c["type"] == "PodScheduled"), None)


def settled(kubectl: Kubectl, running: int, pending: int) -> list[dict[str, Any]] | None:
    pods = trainer_pods(kubectl)
    run = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
    waiting = [
        p
        for p in pods
        if not p["spec"].get("nodeName") and (scheduled_condition(p) or {}).get("reason") == "Unschedulable"
    ]
    return pods if (len(run), len(waiting), len(pods)) == (running, pending, running + pending) else None


def test_deployment_fills_the_free_gpus_and_leaves_the_rest_pending(
    gpu_cluster: tuple[ClusterProcess, Kubectl],
) -> None:
    cluster, kubectl = gpu_cluster
    slices = get(kubectl, "resourceslices")["items"]
    assert sorted(s["spec"]["nodeName"] for s in slices) == [f"node-{i}" for i in range(NODES)]
    assert get(kubectl, "deviceclasses", "gpu.kubesched.io")["metadata"]["name"] == "gpu.kubesched.io"
    sched: SchedulerProcess = start_scheduler(cluster.kubeconfig, "--leader-elect=false")
    try:
        create(kubectl, TEMPLATE, DEPLOYMENT)
        free = NODES * GPUS_PER_NODE
        pods = wait_for("GPUs filled and the rest Pending", lambda: settled(kubectl, free, REPLICAS - free))
        running = [p for p in pods if p["spec"].get("nodeName")]
        assert sorted(p["spec"]["nodeName"] for p in running) == [f"node-{i}" for i in range(NODES)]
        for p in pods:
            if not p["spec"].get("nodeName"):
                assert scheduled_condition(p)["message"] == EXPECTED_PENDING  # type: ignore[index]

        # Every pod got a claim from the template, named <pod>-gpu-<5 random>; the running ones are allocated
        # on their node and reserved for them; no device is handed out twice.
        claims = {c["metadata"]["name"]: c for c in get(kubectl, "resourceclaims", "-n", NS)["items"]}
        devices_seen: set[tuple[str, str]] = set()
        for p in pods:
            (entry,) = p["status"]["resourceClaimStatuses"]
            name = entry["resourceClaimName"]
            assert name.startswith(p["metadata"]["name"] + "-gpu-")
            claim = claims[name]
            if p["spec"].get("nodeName"):
                (result,) = claim["status"]["allocation"]["devices"]["results"]
                assert (result["driver"], result["pool"]) == ("gpu.kubesched.io", p["spec"]["nodeName"])
                devices_seen.add((result["pool"], result["device"]))
                assert [r["uid"] for r in claim["status"]["reservedFor"]] == [p["metadata"]["uid"]]
            else:
                assert not (claim.get("status") or {}).get("allocation")
        assert len(devices_seen) == free
        table = kubectl("get", "resourceclaims", "-n", NS).stdout.splitlines()
        assert table[0].split() == ["NAME", "STATE", "AGE"]
        states = sorted(line.split()[1] for line in table[1:])
        assert states == ["allocated,reserved"] * free + ["pending"] * (REPLICAS - free)

        # Deleting a running pod frees its GPU: its claim is deleted with it, a pending pod takes the device.
        victim = next(p for p in pods if p["spec"].get("nodeName"))
        kubectl("delete", "pod", victim["metadata"]["name"], "-n", NS, "--wait=false")
        after = wait_for(
            "a pending pod to take the freed GPU",
            lambda: (
                lambda ps: (
                    ps
                    if ps and victim["spec"]["nodeName"] in {p["spec"].get("nodeName") for p in ps}
                    else None
                )
            )(settled(kubectl, free, REPLICAS - free)),
            timeout=90,
        )
        assert victim["metadata"]["uid"] not in {p["metadata"]["uid"] for p in after}
    except BaseException:
        print(sched.log()[-6000:])
        raise
    finally:
        sched.stop()


def test_a_claim_shared_by_two_pods_puts_them_on_one_node(
    gpu_cluster: tuple[ClusterProcess, Kubectl],
) -> None:
    cluster, kubectl = gpu_cluster
    kubectl("delete", "deployment", "trainer", "-n", NS, "--ignore-not-found", "--wait=false")
    wait_for(
        "the trainer pods and their claims to go",
        lambda: (
            not trainer_pods(kubectl)
            and not any(
                c["metadata"]["name"].startswith("trainer-")
                for c in get(kubectl, "resourceclaims", "-n", NS)["items"]
            )
        ),
        timeout=90,
    )
    shared_claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": NS},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.kubesched.io"}}]}
        },
    }

    def user(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": "shared"}},
            "spec": {
                "containers": [{"name": "c", "image": "app:1", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
            },
        }

    sched = start_scheduler(cluster.kubeconfig, "--leader-elect=false")
    try:
        create(kubectl, shared_claim, user("user-a"), user("user-b"))

        def both_running() -> list[dict[str, Any]] | None:
            pods = get(kubectl, "pods", "-n", NS, "-l", "app=shared")["items"]
            running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
            return running if len(running) == 2 else None

        pods = wait_for("both users of the shared claim to run", both_running)
        assert len({p["spec"]["nodeName"] for p in pods}) == 1
        claim = get(kubectl, "resourceclaims", "shared-gpu", "-n", NS)
        assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["user-a", "user-b"]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == pods[0]["spec"]["nodeName"]
        # When both are gone, the controller deallocates the claim (it is not deleted: nobody owns it).
        kubectl("delete", "pod", "user-a", "user-b", "-n", NS, "--wait=false")
        wait_for(
            "the shared claim to be deallocated",
            lambda: (
                not get(kubectl, "resourceclaims", "shared-gpu", "-n", NS).get("status", {}).get("allocation")
            ),
            timeout=60,
        )
    except BaseException:
        print(sched.log()[-6000:])
        raise
    finally:
        sched.stop()
