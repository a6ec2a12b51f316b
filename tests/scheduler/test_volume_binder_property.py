"""The vectorised binder against a per-node reference: for random nodes, PVs and claims, ``Binder.evaluate`` over
all nodes at once gives each node the reasons and the static bindings that upstream's per-node algorithm
(``FindPodVolumes``: claims by increasing size, ``FindMatchingVolume`` with the PVs chosen so far excluded, then
provisioning for the rest) gives that node alone."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.apimachinery.volumes import (
    NOT_SUPPORTED_PROVISIONER,
    claim_class,
    claim_request,
    find_matching_volume,
    topology_terms_match,
)
from kubesched.scheduler.cache import Cache
from kubesched.scheduler.volumes.binder import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    Binder,
    PodClaims,
)
from kubesched.scheduler.volumes.listers import static_volumes

ZONES = ("a", "b", "c")
CLASSES = ("local", "zonal")
SIZES = ("1Gi", "2Gi", "3Gi", "5Gi")

node_st = st.tuples(st.sampled_from(ZONES))
pv_st = st.tuples(
    st.sampled_from(CLASSES),
    st.sampled_from(SIZES),
    st.one_of(st.none(), st.sampled_from(ZONES)),  # zone affinity
    st.one_of(st.none(), st.integers(0, 5)),  # hostname affinity (node index)
    st.sampled_from(("Available", "Available", "Bound")),
)
claim_st = st.tuples(st.sampled_from(CLASSES), st.sampled_from(SIZES))


def build(nodes: list[Any], pvs: list[Any], claims: list[Any], allowed_zone: str | None) -> tuple[Any, ...]:
    node_objs = [
        {
            "metadata": {
                "name": f"n{i}",
                "labels": {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": z},
            },
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
        for i, (z,) in enumerate(nodes)
    ]
    objs: list[dict[str, Any]] = [
        {
            "kind": "StorageClass",
            "metadata": {"name": "local"},
            "provisioner": NOT_SUPPORTED_PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "kind": "StorageClass",
            "metadata": {"name": "zonal"},
            "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            **(
                {
                    "allowedTopologies": [
                        {
                            "matchLabelExpressions": [
                                {"key": "topology.kubernetes.io/zone", "values": [allowed_zone]}
                            ]
                        }
                    ]
                }
                if allowed_zone
                else {}
            ),
        },
    ]
    for i, (cls, size, zone, host, phase) in enumerate(pvs):
        exprs = []
        if zone is not None:
            exprs.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]})
        if host is not None:
            exprs.append({"key": "kubernetes.io/hostname", "operator": "In", "values": [f"n{host}"]})
        spec: dict[str, Any] = {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": cls,
        }
        if exprs:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
        objs.append(
            {
                "kind": "PersistentVolume",
                "metadata": {"name": f"pv{i}"},
                "spec": spec,
                "status": {"phase": phase},
            }
        )
    claim_objs = [
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"u{i}", "annotations": {}},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": cls,
                "resources": {"requests": {"storage": size}},
            },
        }
        for i, (cls, size) in enumerate(claims)
    ]
    return node_objs, objs + claim_objs, claim_objs


def reference(
    node: dict[str, Any], claims: list[dict[str, Any]], objs: list[dict[str, Any]]
) -> tuple[int, list[tuple[str, str]]]:
    labels, name = node["metadata"]["labels"], node["metadata"]["name"]
    volumes = [o for o in objs if o["kind"] == "PersistentVolume"]
    classes = {o["metadata"]["name"]: o for o in objs if o["kind"] == "StorageClass"}
    chosen: list[str] = []
    static: list[tuple[str, str]] = []
    unmatched = []
    for claim in sorted(claims, key=claim_request):
        pv = find_matching_volume(
            claim,
            [v for v in volumes if v["spec"]["storageClassName"] == claim_class(claim)],
            node=(labels, name),
            excluded=chosen,
            delay_binding=True,
        )
        if pv is None:
            unmatched.append(claim)
        else:
            chosen.append(pv["metadata"]["name"])
            static.append((pv["metadata"]["name"], claim["metadata"]["name"]))
    for claim in unmatched:
        sc = classes[claim_class(claim)]
        if sc["provisioner"] == NOT_SUPPORTED_PROVISIONER or not topology_terms_match(
            sc.get("allowedTopologies"), labels
        ):
            return BIND_CONFLICT, static
    return 0, static


@settings(max_examples=150, deadline=None)
@given(
    st.lists(node_st, min_size=1, max_size=6),
    st.lists(pv_st, max_size=8),
    st.lists(claim_st, min_size=1, max_size=3),
    st.one_of(st.none(), st.sampled_from(ZONES)),
)
def test_vectorised_binder_matches_the_per_node_algorithm(
    nodes: list[Any], pvs: list[Any], claims: list[Any], allowed_zone: str | None
) -> None:
    node_objs, objs, claim_objs = build(nodes, pvs, claims, allowed_zone)
    cache = Cache()
    for n in node_objs:
        cache.on_node_add(n)
    binder = Binder(static_volumes(objs))
    idx = np.array(sorted(cache.table.index.values()), dtype=np.intp)
    ev = binder.evaluate(PodClaims(delayed=claim_objs), cache.table, idx)
    for pos, slot in enumerate(idx.tolist()):
        node = next(n for n in node_objs if n["metadata"]["name"] == cache.table.names[slot])
        bits, static = reference(node, claim_objs, objs)
        assert int(ev.bits[pos]) & ~NODE_CONFLICT == bits, node["metadata"]["name"]
        if not bits:
            got = ev.node_volumes(pos)
            assert sorted((p["metadata"]["name"], c["metadata"]["name"]) for p, c in got.static) == sorted(
                static
            )
