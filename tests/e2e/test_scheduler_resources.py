"""Every resource kube-scheduler 1.36 lists and watches is served, the way its informers ask for it."""

from __future__ import annotations

import pytest
from clusterproc import ClusterProcess

from kubesched.client.config import load_config
from kubesched.client.rest import ApiClient

# (api group/version, plural) as kube-scheduler 1.36's informers watch them (kubernetes-1.36-observed.md).
SCHEDULER_WATCHES = [
    ("v1", "pods"),
    ("v1", "nodes"),
    ("v1", "namespaces"),
    ("v1", "services"),
    ("v1", "replicationcontrollers"),
    ("v1", "persistentvolumes"),
    ("v1", "persistentvolumeclaims"),
    ("v1", "configmaps"),
    ("apps/v1", "replicasets"),
    ("apps/v1", "statefulsets"),
    ("policy/v1", "poddisruptionbudgets"),
    ("storage.k8s.io/v1", "csidrivers"),
    ("storage.k8s.io/v1", "csinodes"),
    ("storage.k8s.io/v1", "csistoragecapacities"),
    ("storage.k8s.io/v1", "storageclasses"),
    ("storage.k8s.io/v1", "volumeattachments"),
    ("resource.k8s.io/v1", "deviceclasses"),
    ("resource.k8s.io/v1", "resourceclaims"),
    ("resource.k8s.io/v1", "resourceslices"),
]


@pytest.mark.parametrize(("api_version", "plural"), SCHEDULER_WATCHES)
async def test_streaming_list_of_every_scheduler_resource(
    cluster: ClusterProcess, api_version: str, plural: str
) -> None:
    client = ApiClient(load_config(str(cluster.kubeconfig)))
    try:
        selector = "status.phase!=Succeeded,status.phase!=Failed" if plural == "pods" else None
        lines = []
        async with client.watch(
            api_version,
            plural,
            field_selector=selector,
            send_initial_events=True,
            resource_version_match="NotOlderThan",
            allow_watch_bookmarks=True,
            timeout_seconds=1,
        ) as stream:
            async for etype, obj in stream:
                lines.append({"type": etype, "object": obj})
                if etype == "BOOKMARK":
                    break
        bookmarks = [ev for ev in lines if ev["type"] == "BOOKMARK"]
        assert bookmarks, f"no bookmark for {plural}: {lines[:3]}"
        end = bookmarks[0]["object"]["metadata"]
        assert end["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(end["resourceVersion"]) > 0
        first_bookmark = lines.index(bookmarks[0])
        assert all(ev["type"] == "ADDED" for ev in lines[:first_bookmark])
        # And a plain paginated LIST, as older informers and kubectl do.
        listed = await client.list(api_version, plural, limit=500)
        assert listed["kind"].endswith("List")
        assert int(listed["metadata"]["resourceVersion"]) > 0
    finally:
        await client.close()
