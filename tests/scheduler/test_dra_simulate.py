"""``simulate`` with DeviceClasses, ResourceSlices, ResourceClaims and templates in the cluster file: claims made
from templates as the controller would, devices taken by earlier placements, upstream's messages, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from dra_objects import CLASS, claim, device, device_class, node, resource_slice

from kubesched.scheduler.config import default_config
from kubesched.scheduler.simulate import placements_json, simulate

NOT_HELPFUL = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."


def gpu_pod(name: str, claims: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": f"2026-01-01T00:00:0{len(name) % 10}Z",
        },
        "spec": {
            "containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}],
            "resourceClaims": claims,
        },
    }


def template(name: str = "one-gpu") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}},
    }


def nodes(*names: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Node", **node(n)} for n in names]


TEMPLATE_REF = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]


async def run(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return placements_json(await simulate(default_config(), objects, seed=1))["placements"]


async def test_template_claims_fill_the_free_devices_then_the_rest_cannot_allocate() -> None:
    objects = [
        *nodes("n1", "n2", "n3"),
        device_class(),
        template(),
        resource_slice("n1", device("gpu-0"), device("gpu-1")),
        resource_slice("n2", device("gpu-0")),
        *(gpu_pod(f"p{i}", TEMPLATE_REF) for i in range(4)),
    ]
    placements = await run(objects)
    placed = [p["node"] for p in placements]
    assert sorted(n for n in placed if n) == ["n1", "n1", "n2"]
    (last,) = [p for p in placements if p["node"] is None]
    assert last["message"] == (
        "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, "
        + NOT_HELPFUL.format(n=3)
    )
    assert last["filtered"] == {n: ["cannot allocate all claims"] for n in ("n1", "n2", "n3")}
    # n3 has no devices at all: it is rejected for the placed pods too, and they list DynamicResources' score.
    first = placements[0]
    assert first["filtered"] == {"n3": ["cannot allocate all claims"]}
    assert all(scores["DynamicResources"] == 0 for scores in first["scores"].values())


async def test_a_named_claim_allocated_on_another_node_is_explained() -> None:
    allocated = claim("pinned")
    allocated["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "req-1", "driver": "some-driver", "pool": "n2", "device": "d"}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
                ]
            },
        }
    }
    objects = [
        *nodes("n1", "n2"),
        device_class(),
        allocated,
        gpu_pod("p", [{"name": "gpu", "resourceClaimName": "pinned"}]),
    ]
    (placement,) = await run(objects)
    assert placement["node"] == "n2"
    assert placement["filtered"] == {"n1": ["resourceclaim not available on the node"]}


async def test_missing_claim_and_missing_class() -> None:
    objects = [*nodes("n1"), gpu_pod("p", [{"name": "gpu", "resourceClaimName": "nope"}])]
    (placement,) = await run(objects)
    assert placement["message"] == 'pod is gated: resourceclaim.resource.k8s.io "nope" not found'
    objects = [*nodes("n1"), template(), gpu_pod("p", TEMPLATE_REF)]
    (placement,) = await run(objects)
    assert placement["message"] == (
        "0/1 nodes are available: request gpu: device class class does not exist. no new claims to deallocate, "
        + NOT_HELPFUL.format(n=1)
    )


def test_cli_reads_resource_objects_from_the_cluster_file(tmp_path: Path) -> None:
    objects = [
        *nodes("n1", "n2"),
        device_class(),
        template(),
        resource_slice("n2", device("gpu-0")),
        gpu_pod("p", TEMPLATE_REF),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    run_ = subprocess.run(
        [sys.executable, "-m", "kubesched.cli", "simulate", "--cluster", str(path), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run_.returncode == 0, run_.stderr
    (placement,) = json.loads(run_.stdout)["placements"]
    assert placement["node"] == "n2"
    assert placement["filtered"] == {"n1": ["cannot allocate all claims"]}
