"""NodeTable columns and the Cache's assumed-pod bookkeeping."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.scheduler.cache import Cache, NodeTable, SlotMemo
from kubesched.scheduler.podinfo import PodInfo
from kubesched.scheduler.resources import CPU, MEMORY, PODS, ResourceIndex

GI = 2**30


def node(
    name: str,
    cpu: str = "4",
    mem: str = "32Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    images: list[dict[str, Any]] | None = None,
    **alloc: str,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": labels if labels is not None else {"kubernetes.io/hostname": name},
        },
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": pods, **alloc}, "images": images or []},
    }


def pod(
    name: str,
    cpu: str | None = "100m",
    mem: str | None = "64Mi",
    node_name: str = "",
    phase: str = "",
    ports: list[dict[str, Any]] | None = None,
    **extra: str,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None} | extra
    c: dict[str, Any] = {"name": "c", "image": "pause", "resources": {"requests": requests}}
    if ports:
        c["ports"] = ports
    p: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"containers": [c]},
        "status": {"phase": phase} if phase else {},
    }
    if node_name:
        p["spec"]["nodeName"] = node_name
    return p


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []

    def on_pod_added(self, pi: PodInfo, slot: int) -> None:
        self.events.append(("add", pi.uid, slot))

    def on_pod_removed(self, pi: PodInfo, slot: int) -> None:
        self.events.append(("remove", pi.uid, slot))

    def on_node_changed(self, slot: int) -> None:
        self.events.append(("node", "", slot))


# --- NodeTable: nodes ----------------------------------------------------------------------------------------


def test_nodes_get_slots_and_columns() -> None:
    t = NodeTable()
    a = t.add_node(node("a", cpu="4", mem="32Gi"))
    b = t.add_node(node("b", cpu="2500m", mem="1Gi", pods="10"))
    assert (t.num_nodes, t.index, t.names[a], t.names[b]) == (2, {"a": a, "b": b}, "a", "b")
    assert list(t.slots()) == sorted([a, b])
    assert t.allocatable[b, CPU] == 2500 and t.allocatable[b, MEMORY] == GI and t.allocatable[b, PODS] == 10
    assert t.valid[a] and t.valid[b]
    assert t.node(a)["metadata"]["name"] == "a"
    assert t.node_by_name("b") is t.node(b)
    assert "a" in t and "zz" not in t


def test_table_grows_and_keeps_data() -> None:
    t = NodeTable(initial_capacity=4)
    for i in range(50):
        t.add_node(node(f"n{i}", cpu=str(i + 1)))
    assert t.capacity >= 50 and t.num_nodes == 50
    for i in range(50):
        assert t.allocatable[t.index[f"n{i}"], CPU] == (i + 1) * 1000
    assert t.allocatable.flags.f_contiguous  # column-major: one resource over slots is contiguous


def test_removed_slot_is_reused() -> None:
    t = NodeTable()
    a = t.add_node(node("a"))
    t.add_node(node("b"))
    assert t.remove_node("a") == a
    assert not t.valid[a] and "a" not in t.index and t.num_nodes == 1
    assert t.allocatable[a].sum() == 0
    assert t.add_node(node("c")) == a
    assert t.names[a] == "c"


def test_pods_before_their_node_and_after_it_is_gone() -> None:
    t = NodeTable()
    pi = PodInfo.from_pod(pod("p", cpu="1"), t.res)
    slot = t.add_pod(pi, "late")
    assert not t.valid[slot] and t.num_nodes == 0
    assert t.requested[slot, CPU] == 1000
    assert t.add_node(node("late")) == slot  # the node takes the slot its pods already use
    assert t.free[slot, CPU] == 3000
    t.remove_node("late")
    assert t.pod_slot("p") == slot and t.names[slot] == "late"  # kept while the pod is there
    t.remove_pod("p")
    assert t.names[slot] is None  # released


def test_update_node_reports_what_changed() -> None:
    t = NodeTable()
    t.add_node(node("a"))
    assert t.update_node(node("a")) == set()
    assert t.update_node(node("a", cpu="8")) == {"UpdateNodeAllocatable"}
    assert t.update_node(node("a", cpu="8", labels={"x": "1"})) == {"UpdateNodeLabel"}
    changes = t.update_node(
        node("a", cpu="8", labels={"x": "1"}, taints=[{"key": "k", "effect": "NoSchedule"}])
    )
    assert changes == {"UpdateNodeTaint"}
    assert "UpdateNodeTaint" in t.update_node(
        node(
            "a", cpu="8", labels={"x": "1"}, taints=[{"key": "k", "effect": "NoSchedule"}], unschedulable=True
        )
    )
    assert t.update_node(node("b")) == {"Add"}


def test_labels_columns_and_versions() -> None:
    t = NodeTable()
    a = t.add_node(node("a", labels={"zone": "z1"}))
    b = t.add_node(node("b", labels={"zone": "z2", "disk": "ssd"}))
    col = t.label_column("zone")
    assert (col[a], col[b]) == ("z1", "z2")
    assert t.label_column("zone") is col  # cached
    v = t.label_version
    t.update_node(node("a", labels={"zone": "z3"}))
    assert t.label_version > v and col[a] == "z3"  # cached column kept current
    c = t.add_node(node("c", labels={}))
    assert col[c] is None
    t.remove_node("b")
    assert col[b] is None and t.label_column("disk")[b] is None


def test_taint_groups_are_shared() -> None:
    t = NodeTable()
    taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    a = t.add_node(node("a", taints=taints))
    b = t.add_node(node("b", taints=taints))
    c = t.add_node(node("c"))
    assert t.taint_group[a] == t.taint_group[b] != 0 and t.taint_group[c] == 0
    assert t.taint_sets[t.taint_group[a]] == (("dedicated", "x", "NoSchedule"),)
    assert t.num_tainted == 2
    t.remove_node("a")
    assert t.num_tainted == 1
    t.update_node(node("b"))
    assert t.num_tainted == 0 and t.taint_group[b] == 0


def test_unschedulable_count() -> None:
    t = NodeTable()
    a = t.add_node(node("a", unschedulable=True))
    t.add_node(node("b"))
    assert t.num_unschedulable == 1 and t.unschedulable[a]
    t.update_node(node("a"))
    assert t.num_unschedulable == 0


def test_images() -> None:
    t = NodeTable()
    mb = 2**20
    a = t.add_node(node("a", images=[{"names": ["gcr.io/40:latest", "gcr.io/40:v1"], "sizeBytes": 40 * mb}]))
    b = t.add_node(node("b", images=[{"names": ["gcr.io/40:latest"], "sizeBytes": 40 * mb}]))
    assert t.image_node_count("gcr.io/40:latest") == 2 and t.image_node_count("gcr.io/40:v1") == 1
    sizes = t.image_sizes("gcr.io/40:v1")
    assert sizes[a] == 40 * mb and sizes[b] == 0
    t.update_node(node("a"))
    assert t.image_node_count("gcr.io/40:v1") == 0 and t.image_sizes("gcr.io/40:v1")[a] == 0
    assert t.image_node_count("nope:latest") == 0


# --- NodeTable: pods -----------------------------------------------------------------------------------------


def test_pod_accounting() -> None:
    t = NodeTable()
    a = t.add_node(node("a"))
    p1 = PodInfo.from_pod(pod("p1", cpu="1", mem="1Gi"), t.res)
    p2 = PodInfo.from_pod(pod("p2", cpu=None, mem=None), t.res)
    t.add_pod(p1, "a")
    t.add_pod(p2, "a")
    assert t.requested[a, CPU] == 1000 and t.requested[a, MEMORY] == GI and t.requested[a, PODS] == 2
    assert list(t.nonzero_requested[a]) == [1100, GI + 200 * 2**20]  # p2 counts with the defaults
    assert t.free[a, CPU] == 3000 and t.free[a, PODS] == 108
    assert set(t.pods_on(a)) == {"p1", "p2"} and t.pod("p1") is p1 and t.num_pods == 2
    with pytest.raises(ValueError):
        t.add_pod(p1, "a")
    assert t.remove_pod("p1") is p1
    assert t.requested[a, CPU] == 0 and t.requested[a, PODS] == 1 and t.free[a, CPU] == 4000
    assert t.remove_pod("p1") is None


def test_update_pod_moves_it() -> None:
    t = NodeTable()
    a = t.add_node(node("a"))
    b = t.add_node(node("b"))
    old = PodInfo.from_pod(pod("p", cpu="1", node_name="a"), t.res)
    t.add_pod(old, "a")
    new = PodInfo.from_pod(pod("p", cpu="2", node_name="b"), t.res)
    t.update_pod(old, new)
    assert t.requested[a, CPU] == 0 and t.requested[b, CPU] == 2000 and t.pod_slot("p") == b


def test_host_ports() -> None:
    t = NodeTable()
    a = t.add_node(node("a"))
    ports = [
        {"containerPort": 80, "hostPort": 8080},
        {"containerPort": 53, "hostPort": 53, "protocol": "UDP"},
    ]
    t.add_pod(PodInfo.from_pod(pod("p1", ports=ports), t.res), "a")
    t.add_pod(PodInfo.from_pod(pod("p2", ports=ports[:1]), t.res), "a")
    assert t.used_ports[a] == {("TCP", "0.0.0.0", 8080), ("UDP", "0.0.0.0", 53)} and t.port_slots == {a}
    t.remove_pod("p1")
    assert t.used_ports[a] == {("TCP", "0.0.0.0", 8080)}  # p2 still holds 8080
    t.remove_pod("p2")
    assert t.used_ports[a] is None and t.port_slots == set()


def test_new_resource_columns_widen_the_table() -> None:
    t = NodeTable()
    a = t.add_node(node("a"))
    assert t.zero_allocatable(CPU) == 0
    pi = PodInfo.from_pod(pod("p", **{"example.com/gpu": "1"}), t.res)
    gpu = t.res.col("example.com/gpu")
    t.add_pod(pi, "a")
    assert t.width > gpu and t.requested[a, gpu] == 1 and t.free[a, gpu] == -1
    assert t.zero_allocatable(gpu) == 1
    t.update_node(node("a", **{"example.com/gpu": "4"}))
    assert t.allocatable[a, gpu] == 4 and t.free[a, gpu] == 3 and t.zero_allocatable(gpu) == 0
    t.ensure_columns()
    assert t.allocatable.flags.f_contiguous


def test_listeners_and_row_versions() -> None:
    t = NodeTable()
    rec = Recorder()
    t.add_listener(rec)
    a = t.add_node(node("a"))
    v0 = t.row_version[a]
    pi = PodInfo.from_pod(pod("p"), t.res)
    t.add_pod(pi, "a")
    assert t.row_version[a] > v0
    t.add_pod(PodInfo.from_pod(pod("q"), t.res), "a", notify=False)
    t.remove_pod("p")
    t.update_node(node("a", cpu="8"))
    assert rec.events == [("node", "", a), ("add", "p", a), ("remove", "p", a), ("node", "", a)]


def test_slot_memo_recomputes_only_changed_slots() -> None:
    t = NodeTable()
    slots = np.array([t.add_node(node(f"n{i}")) for i in range(5)], dtype=np.intp)
    memo = SlotMemo()
    seen: list[list[int]] = []

    def compute(idx: np.ndarray) -> np.ndarray:
        seen.append(idx.tolist())
        return t.requested[idx, CPU] + 1

    assert memo.get(t, "k", slots[:2], compute).tolist() == [1] * 2  # a new key: every node at once
    assert memo.get(t, "k", slots, compute).tolist() == [1] * 5
    t.add_pod(PodInfo.from_pod(pod("p", cpu="1"), t.res), "n2")
    assert memo.get(t, "k", slots, compute).tolist() == [1, 1, 1001, 1, 1]
    new = t.add_node(node("n5"))
    t.add_pod(PodInfo.from_pod(pod("q", cpu="2"), t.res), "n5")
    assert memo.get(t, "k", np.array([new]), compute).tolist() == [2001]
    assert seen == [slots.tolist(), [int(slots[2])], [new]]
    assert t.change_log[-1] == new


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["add", "remove", "look", "node"]), st.integers(0, 5)), max_size=40)
)
def test_slot_memo_with_compute_one_equals_a_fresh_computation(ops: list[tuple[str, int]]) -> None:
    """Whatever changed between lookups (nothing, one slot, several, a new node), the memo's answer is the
    function's answer now; ``compute_one`` and ``compute`` serve the changed slots."""
    t = NodeTable()
    for i in range(4):
        t.add_node(node(f"n{i}"))
    memo = SlotMemo()
    live: list[str] = []

    def compute(idx: np.ndarray) -> np.ndarray:
        return t.requested[idx, CPU] * 3 + t.nonzero_requested[idx, 1] % 7

    def compute_one(slot: int) -> int:
        return int(compute(np.array([slot], dtype=np.intp))[0])

    for n, (op, arg) in enumerate(ops):
        if op == "add":
            uid = f"p{n}"
            t.add_pod(PodInfo.from_pod(pod(uid, cpu=f"{arg + 1}"), t.res), f"n{arg % 4}")
            live.append(uid)
        elif op == "remove" and live:
            t.remove_pod(live.pop(arg % len(live)))
        elif op == "node":
            t.add_node(node(f"x{n}"))
        slots = t.slots()
        assert memo.get(t, "k", slots, compute, compute_one).tolist() == compute(slots).tolist()


# --- Cache ---------------------------------------------------------------------------------------------------


def test_assume_confirm_and_forget() -> None:
    c = Cache()
    c.on_node_add(node("a"))
    c.on_node_add(node("b"))
    pi = c.pod_info(pod("p", cpu="1"))
    assumed = c.assume(pi, "a")
    assert (
        assumed.node_name == "a" and c.is_assumed("p") and c.table.requested[c.table.index["a"], CPU] == 1000
    )
    with pytest.raises(ValueError):
        c.assume(pi, "b")
    # the informer reports the pod bound where we assumed it: counted once, no longer assumed
    kept = c.on_pod_add(pod("p", cpu="1", node_name="a"))
    assert kept is not None and not c.is_assumed("p")
    assert c.table.requested[c.table.index["a"], CPU] == 1000 and c.stats() == {
        "nodes": 2,
        "pods": 1,
        "assumed_pods": 0,
    }
    pi2 = c.pod_info(pod("q", cpu="1"))
    c.assume(pi2, "b")
    assert c.forget("q") is not None
    assert c.table.requested[c.table.index["b"], CPU] == 0 and not c.is_assumed("q")
    assert c.forget("q") is None


def test_bound_elsewhere_moves_the_pod() -> None:
    c = Cache()
    c.on_node_add(node("a"))
    c.on_node_add(node("b"))
    c.assume(c.pod_info(pod("p", cpu="1")), "a")
    c.on_pod_add(pod("p", cpu="1", node_name="b"))
    assert (
        c.table.requested[c.table.index["a"], CPU] == 0 and c.table.requested[c.table.index["b"], CPU] == 1000
    )


def test_assumed_pods_stay_until_forgotten_or_observed() -> None:
    c = Cache()
    c.on_node_add(node("a"))
    c.assume(c.pod_info(pod("p")), "a")
    assert c.is_assumed("p")  # no expiry: upstream's default, and nothing drove one here
    c.forget("p")
    assert not c.is_assumed("p") and c.table.num_pods == 0


def test_informer_pod_events() -> None:
    c = Cache()
    c.on_node_add(node("a"))
    assert c.on_pod_add(pod("pending")) is None and c.table.num_pods == 0
    c.on_pod_add(pod("p", cpu="1", node_name="a"))
    a = c.table.index["a"]
    assert c.table.requested[a, CPU] == 1000
    c.on_pod_update(None, pod("p", cpu="1", node_name="a", phase="Succeeded"))  # terminal: releases
    assert c.table.requested[a, CPU] == 0 and c.get_pod("p") is None
    c.on_pod_add(pod("r", cpu="2", node_name="a"))
    assert set(c.pods) == {"r"}
    c.on_pod_delete(pod("r"))
    assert c.table.requested[a, CPU] == 0 and c.pods == {}


def test_node_events_and_pod_info_reuse() -> None:
    c = Cache()
    c.on_node_add(node("a"))
    assert c.on_node_update(None, node("a", cpu="8")) == {"UpdateNodeAllocatable"}
    c.on_node_delete(node("a"))
    assert c.table.num_nodes == 0
    body = pod("p", node_name="a")
    first = c.on_pod_add(body)
    assert c.pod_info(body) is first


def test_shared_resource_index() -> None:
    res = ResourceIndex()
    c = Cache(res)
    assert c.table.res is res and c.res is res
