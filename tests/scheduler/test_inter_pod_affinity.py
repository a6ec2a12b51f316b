"""InterPodAffinity plugin: cases transcribed from upstream's interpodaffinity filtering/scoring table tests."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework.handle import Handle
from kubesched.scheduler.framework.interface import Code, CycleState
from kubesched.scheduler.plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY,
    ERR_REASON_ANTI_AFFINITY,
    ERR_REASON_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
    InterPodAffinityArgs,
)
from kubesched.scheduler.podinfo import PodInfo

_uid = itertools.count()


class FakeNamespaces:
    """Namespaces as the scheduler gives them in ``Handle.namespaces``."""

    def __init__(self, labels: dict[str, dict[str, str]]):
        self._objs = {n: {"metadata": {"name": n, "labels": lab}} for n, lab in labels.items()}

    def get(self, name: str) -> dict[str, Any] | None:
        return self._objs.get(name)

    def list(self) -> list[dict[str, Any]]:
        return list(self._objs.values())


NAMESPACES = FakeNamespaces(
    {
        "subteam1.team1": {"team": "team1"},
        "subteam2.team1": {"team": "team1"},
        "subteam1.team2": {"team": "team2"},
        "subteam2.team2": {"team": "team2"},
    }
)


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"cpu": "4"}}}


def sel(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return {"matchExpressions": [e]}


def term(selector: dict[str, Any] | None, topology_key: str, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": topology_key, **extra}
    if selector is not None:
        t["labelSelector"] = selector
    return t


def affinity(
    req: list[dict[str, Any]] = (),
    anti: list[dict[str, Any]] = (),
    pref: list[tuple[int, dict[str, Any]]] = (),
    pref_anti: list[tuple[int, dict[str, Any]]] = (),
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if req or pref:
        out["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(req),
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": t} for w, t in pref
            ],
        }
    if anti or pref_anti:
        out["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(anti),
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "podAffinityTerm": t} for w, t in pref_anti
            ],
        }
    return out


def pod(
    labels: dict[str, str] | None = None,
    node_name: str = "",
    namespace: str = "default",
    aff: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if node_name:
        spec["nodeName"] = node_name
    if aff:
        spec["affinity"] = aff
    meta = {"name": f"p{next(_uid)}", "namespace": namespace, "uid": f"u{next(_uid)}", "labels": labels or {}}
    return {"metadata": meta, "spec": spec}


class World:
    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]] = (), args: Any = None):
        self.cache = Cache()
        for n in nodes:
            self.cache.on_node_add(n)
        for p in pods:
            self.cache.on_pod_add(p)
        model = InterPodAffinityArgs.model_validate(args or {})
        self.plugin = InterPodAffinity(model, Handle(cache=self.cache, namespaces=NAMESPACES))

    @property
    def table(self) -> Any:
        return self.cache.table

    def pi(self, d: dict[str, Any]) -> PodInfo:
        return PodInfo.from_pod(d, self.cache.res)

    def filter(self, d: dict[str, Any]) -> dict[str, str | None] | Code:
        """Reason per node (None = passes), or the PreFilter code when it is not Success."""
        p = self.pi(d)
        state = CycleState()
        _, status = self.plugin.pre_filter(state, p, self.table)
        if not status.ok:
            return status.code
        idx = self.table.slots()
        f = self.plugin.filter(state, p, self.table, idx)
        out: dict[str, str | None] = {}
        for slot, bits in zip(idx, f.reason_bits, strict=True):
            reason = None
            if bits:
                (j,) = [j for j in range(len(f.reasons)) if int(bits) >> j & 1]
                reason = f.reasons[j]
                assert f.unresolvable[j] == (reason == ERR_REASON_AFFINITY)
            out[self.table.names[slot]] = reason
        return out

    def scores(self, d: dict[str, Any]) -> list[int] | Code:
        p = self.pi(d)
        state = CycleState()
        idx = self.table.slots()
        status = self.plugin.pre_score(state, p, self.table, idx)
        if not status.ok:
            return status.code
        raw = self.plugin.score(state, p, self.table, idx)
        return self.plugin.normalize_score(state, p, raw).tolist()


SCAN = {"service": "securityscan"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}
NODE1 = node("node1", region="r1", zone="z11")
AFF, ANTI, EXISTING = ERR_REASON_AFFINITY, ERR_REASON_ANTI_AFFINITY, ERR_REASON_EXISTING_ANTI_AFFINITY


# --- Filter on one node, from upstream TestRequiredAffinitySingleNode ---------------------------------------------


@pytest.mark.parametrize(
    ("incoming", "pods", "want"),
    [
        (pod(), [], Code.SKIP),
        (
            pod(S1, aff=affinity([term(sel("service", "In", "securityscan", "value2"), "region")])),
            [pod(SCAN, "node1")],
            None,
        ),
        (
            pod(S1, aff=affinity([term(sel("service", "NotIn", "securityscan3", "value3"), "region")])),
            [pod(SCAN, "node1")],
            None,
        ),
        (  # different namespace
            pod(
                S1,
                aff=affinity(
                    [
                        term(
                            sel("service", "In", "securityscan", "value2"),
                            "region",
                            namespaces=["DiffNameSpace"],
                        )
                    ]
                ),
            ),
            [pod(SCAN, "node1", "ns")],
            AFF,
        ),
        (
            pod(SCAN, aff=affinity([term(sel("service", "In", "antivirusscan", "value2"), "")])),
            [pod(SCAN, "node1")],
            AFF,
        ),
        (  # terms are ANDed: both match the existing pod
            pod(
                S1,
                aff=affinity(
                    [
                        term(
                            {
                                "matchExpressions": [
                                    {"key": "service", "operator": "Exists"},
                                    {"key": "wrongkey", "operator": "DoesNotExist"},
                                ]
                            },
                            "region",
                        ),
                        term(
                            {
                                "matchExpressions": [
                                    {"key": "service", "operator": "In", "values": ["securityscan"]},
                                    {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
                                ]
                            },
                            "region",
                        ),
                    ]
                ),
            ),
            [pod(SCAN, "node1")],
            None,
        ),
        (  # one term does not match
            pod(
                S1,
                aff=affinity(
                    [
                        term(
                            {
                                "matchExpressions": [
                                    {"key": "service", "operator": "Exists"},
                                    {"key": "wrongkey", "operator": "DoesNotExist"},
                                ]
                            },
                            "region",
                        ),
                        term(
                            {
                                "matchExpressions": [
                                    {"key": "service", "operator": "In", "values": ["securityscan2"]},
                                    {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
                                ]
                            },
                            "region",
                        ),
                    ]
                ),
            ),
            [pod(SCAN, "node1")],
            AFF,
        ),
        (  # affinity and anti-affinity both satisfied (node1 has no "node" label)
            pod(
                S1,
                aff=affinity(
                    [term(sel("service", "In", "securityscan", "value2"), "region")],
                    [term(sel("service", "In", "antivirusscan", "value2"), "node")],
                ),
            ),
            [pod(SCAN, "node1")],
            None,
        ),
        (  # existing pod's anti-affinity does not match the incoming pod
            pod(
                S1,
                aff=affinity(
                    [term(sel("service", "In", "securityscan", "value2"), "region")],
                    [term(sel("service", "In", "antivirusscan", "value2"), "node")],
                ),
            ),
            [
                pod(
                    SCAN,
                    "node1",
                    aff=affinity(anti=[term(sel("service", "In", "antivirusscan", "value2"), "node")]),
                )
            ],
            None,
        ),
        (  # anti-affinity violated
            pod(
                S1,
                aff=affinity(
                    [term(sel("service", "In", "securityscan", "value2"), "region")],
                    [term(sel("service", "In", "securityscan", "value2"), "zone")],
                ),
            ),
            [pod(SCAN, "node1")],
            ANTI,
        ),
        (  # existing pod's anti-affinity violated
            pod(
                SCAN,
                aff=affinity(
                    [term(sel("service", "In", "securityscan", "value2"), "region")],
                    [term(sel("service", "In", "antivirusscan", "value2"), "node")],
                ),
            ),
            [
                pod(
                    SCAN,
                    "node1",
                    aff=affinity(anti=[term(sel("service", "In", "securityscan", "value2"), "zone")]),
                )
            ],
            EXISTING,
        ),
        (  # the pod matches its own NotIn term only if... it does not: and the only match is on a missing node
            pod(SCAN, aff=affinity([term(sel("service", "NotIn", "securityscan", "value2"), "region")])),
            [pod(SCAN, "node2")],
            AFF,
        ),
        (  # existing anti-affinity applies to pods without any affinity
            pod(SCAN),
            [
                pod(
                    SCAN,
                    "node1",
                    aff=affinity(anti=[term(sel("service", "In", "securityscan", "value2"), "zone")]),
                )
            ],
            EXISTING,
        ),
        (  # ... and when it does not match, PreFilter has nothing to do
            pod(SCAN),
            [
                pod(
                    SCAN,
                    "node1",
                    aff=affinity(anti=[term(sel("service", "NotIn", "securityscan", "value2"), "zone")]),
                )
            ],
            Code.SKIP,
        ),
        (
            pod(
                SCAN,
                aff=affinity(
                    anti=[term(sel("service", "Exists"), "region"), term(sel("security", "Exists"), "region")]
                ),
            ),
            [pod(S1, "node1", aff=affinity(anti=[term(sel("security", "Exists"), "zone")]))],
            ANTI,
        ),
        (  # symmetry a1
            pod(
                SCAN,
                aff=affinity(
                    anti=[term(sel("service", "Exists"), "zone"), term(sel("security", "Exists"), "zone")]
                ),
            ),
            [pod(S1, "node1", aff=affinity(anti=[term(sel("security", "Exists"), "zone")]))],
            ANTI,
        ),
        (  # symmetry a2
            pod(S1, aff=affinity(anti=[term(sel("security", "Exists"), "zone")])),
            [
                pod(
                    SCAN,
                    "node1",
                    aff=affinity(
                        anti=[term(sel("service", "Exists"), "zone"), term(sel("security", "Exists"), "zone")]
                    ),
                )
            ],
            EXISTING,
        ),
        (  # symmetry b1
            pod(
                {"abc": "", "xyz": ""},
                aff=affinity(anti=[term(sel("abc", "Exists"), "zone"), term(sel("def", "Exists"), "zone")]),
            ),
            [
                pod(
                    {"def": "", "xyz": ""},
                    "node1",
                    aff=affinity(
                        anti=[term(sel("abc", "Exists"), "zone"), term(sel("def", "Exists"), "zone")]
                    ),
                )
            ],
            ANTI,
        ),
        (  # namespaceSelector matching the existing pod's namespace
            pod(
                S1,
                aff=affinity(
                    [
                        term(
                            sel("service", "In", "securityscan", "value2"),
                            "region",
                            namespaceSelector=sel("team", "In", "team1"),
                        )
                    ]
                ),
            ),
            [pod(SCAN, "node1", "subteam1.team1")],
            None,
        ),
        (
            pod(
                S1,
                aff=affinity(
                    [
                        term(
                            sel("service", "In", "securityscan", "value2"),
                            "region",
                            namespaceSelector=sel("team", "In", "team1"),
                        )
                    ]
                ),
            ),
            [pod(SCAN, "node1", "subteam1.team2")],
            AFF,
        ),
        (
            pod(
                S1,
                "",
                "subteam1.team1",
                affinity(
                    anti=[
                        term(
                            sel("service", "In", "securityscan", "value2"),
                            "zone",
                            namespaceSelector=sel("team", "In", "team1"),
                        )
                    ]
                ),
            ),
            [pod(SCAN, "node1", "subteam2.team1")],
            ANTI,
        ),
        (  # {} namespaceSelector: all namespaces
            pod(
                S1,
                "",
                "subteam1.team1",
                affinity(
                    anti=[term(sel("service", "In", "securityscan", "value2"), "zone", namespaceSelector={})]
                ),
            ),
            [pod(SCAN, "node1", "subteam2.team1")],
            ANTI,
        ),
        (
            pod(
                S1,
                "",
                "subteam1.team1",
                affinity(
                    anti=[
                        term(
                            sel("service", "In", "securityscan", "value2"),
                            "zone",
                            namespaceSelector=sel("team", "In", "team1"),
                        )
                    ]
                ),
            ),
            [pod(SCAN, "node1", "subteam1.team2")],
            None,
        ),
    ],
)
def test_single_node(incoming: dict[str, Any], pods: list[dict[str, Any]], want: str | Code | None) -> None:
    got = World([NODE1], pods).filter(incoming)
    assert got == (want if isinstance(want, Code) else {"node1": want})


def test_invalid_selector_is_unresolvable() -> None:
    w = World([NODE1])
    bad = pod(SCAN, aff=affinity([term(sel("service", "In", "{{.bad-value.}}"), "region")]))
    _, status = w.plugin.pre_filter(CycleState(), w.pi(bad), w.table)
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and "parsing pod" in status.message()
    # PreScore parses every term of the pod, as upstream's NewPodInfo does: an error there too.
    assert w.plugin.pre_score(CycleState(), w.pi(bad), w.table, w.table.slots()).code == Code.ERROR
    bad_pref = pod(aff=affinity(pref=[(8, term(sel("security", "In", "{{.bad-value.}}"), "region"))]))
    assert w.plugin.pre_score(CycleState(), w.pi(bad_pref), w.table, w.table.slots()).code == Code.ERROR


# --- Filter on several nodes, from upstream TestRequiredAffinityMultipleNodes -------------------------------------

CHINA, CHINA_AZ1, INDIA = {"region": "China"}, {"region": "China", "az": "az1"}, {"region": "India"}


def three(prefix: str = "node") -> list[dict[str, Any]]:
    return [node(f"{prefix}1", **CHINA), node(f"{prefix}2", **CHINA_AZ1), node(f"{prefix}3", **INDIA)]


def test_multiple_nodes_affinity_by_region() -> None:
    w = World(three(), [pod({"foo": "bar"}, "node1")])
    got = w.filter(pod(aff=affinity([term(sel("foo", "In", "bar"), "region")])))
    assert got == {"node1": None, "node2": None, "node3": AFF}


def test_first_pod_of_a_group() -> None:
    incoming = pod(
        {"foo": "bar", "service": "securityscan"},
        aff=affinity(
            [term(sel("foo", "In", "bar"), "zone"), term(sel("service", "In", "securityscan"), "zone")]
        ),
    )
    # No pod matches both terms anywhere, the pod matches its own terms: any node with the key.
    nodes = [node("nodeA", zone="az1", hostname="h1"), node("nodeB", zone="az2", hostname="h2")]
    assert World(nodes, [pod({"foo": "bar"}, "nodeA")]).filter(incoming) == {"nodeA": None, "nodeB": None}
    # ... but only nodes carrying the topology keys.
    nodes = [node("nodeA", zoneLabel="az1", hostname="h1"), node("nodeB", zoneLabel="az2", hostname="h2")]
    assert World(nodes, [pod({"foo": "bar"}, "nodeA")]).filter(incoming) == {"nodeA": AFF, "nodeB": AFF}


def test_multiple_nodes_anti_affinity() -> None:
    nodes = [node("nodeA", region="r1", hostname="nodeA"), node("nodeB", region="r1", hostname="nodeB")]
    incoming = pod(aff=affinity(anti=[term(sel("foo", "In", "abc"), "region")]))
    assert World(nodes, [pod({"foo": "abc"}, "nodeA")]).filter(incoming) == {"nodeA": ANTI, "nodeB": ANTI}
    # any term of the anti-affinity matching is enough
    nodes = [node("nodeA", region="r1", zone="z1"), node("nodeB", region="r1", zone="z2")]
    incoming = pod(
        aff=affinity(
            anti=[term(sel("foo", "In", "abc"), "region"), term(sel("service", "In", "securityscan"), "zone")]
        )
    )
    got = World(nodes, [pod({"foo": "abc", "service": "securityscan"}, "nodeA")]).filter(incoming)
    assert got == {"nodeA": ANTI, "nodeB": ANTI}
    incoming = pod(aff=affinity(anti=[term(sel("foo", "In", "abc"), "region")]))
    got = World(three(), [pod({"foo": "abc"}, "node1")]).filter(incoming)
    assert got == {"node1": ANTI, "node2": ANTI, "node3": None}


def test_multiple_nodes_namespaces() -> None:
    incoming = pod(
        {"foo": "123"}, namespace="NS1", aff=affinity(anti=[term(sel("foo", "In", "bar"), "region")])
    )
    pods = [
        pod({"foo": "bar"}, "node1", "NS1"),
        pod({}, "node3", "NS2", affinity(anti=[term(sel("foo", "In", "123"), "region")])),
    ]
    assert World(three(), pods).filter(incoming) == {"node1": ANTI, "node2": ANTI, "node3": None}


def test_topology_key_missing_on_nodes() -> None:
    nodes = [node("nodeA", region="r1", zone="z1"), node("nodeB", region="r1", zone="z1")]
    # Existing pod's term with a key no node has: the selector matches but nothing is blocked, so PreFilter skips.
    pods = [pod({}, "nodeA", aff=affinity(anti=[term(sel("foo", "Exists"), "invalid-node-label")]))]
    assert World(nodes, pods).filter(pod({"foo": ""})) == Code.SKIP
    # Incoming pod's anti-affinity with such a key blocks nothing.
    incoming = pod(aff=affinity(anti=[term(sel("foo", "Exists"), "invalid-node-label")]))
    assert World(nodes, [pod({"foo": ""}, "nodeA")]).filter(incoming) == {"nodeA": None, "nodeB": None}


def test_existing_anti_affinity_per_topology() -> None:
    nodes = [node("nodeA", region="r1", zone="z1"), node("nodeB", region="r1", zone="z2")]
    pods = [
        pod({}, "nodeA", aff=affinity(anti=[term(sel("foo", "Exists"), "zone")])),
        pod({}, "nodeA", aff=affinity(anti=[term(sel("bar", "Exists"), "region")])),
    ]
    got = World(nodes, pods).filter(pod({"foo": "", "bar": ""}))
    assert got == {"nodeA": EXISTING, "nodeB": EXISTING}
    got = World(nodes, pods).filter(pod({"foo": ""}))
    assert got == {"nodeA": EXISTING, "nodeB": None}


def test_match_label_keys_and_mismatch_label_keys() -> None:
    nodes = [node("n1", zone="z1"), node("n2", zone="z2")]
    pods = [pod({"app": "a", "rev": "1"}, "n1"), pod({"app": "a", "rev": "2"}, "n2")]
    # Anti-affinity to pods of the same app *and the same revision*.
    same_rev = pod(
        {"app": "a", "rev": "2"},
        aff=affinity(anti=[term(sel("app", "In", "a"), "zone", matchLabelKeys=["rev"])]),
    )
    assert World(nodes, pods).filter(same_rev) == {"n1": None, "n2": ANTI}
    # Anti-affinity to pods of the same app with *another* revision.
    other_rev = pod(
        {"app": "a", "rev": "2"},
        aff=affinity(anti=[term(sel("app", "In", "a"), "zone", mismatchLabelKeys=["rev"])]),
    )
    assert World(nodes, pods).filter(other_rev) == {"n1": ANTI, "n2": None}


def test_pre_filter_extensions() -> None:
    nodes = [node("n1", zone="z1"), node("n2", zone="z2")]
    w = World(nodes, [pod({"app": "db"}, "n1")])
    incoming = w.pi(
        pod(
            {"app": "web"},
            aff=affinity([term(sel("app", "In", "db"), "zone")], [term(sel("app", "In", "web"), "zone")]),
        )
    )
    state = CycleState()
    w.plugin.pre_filter(state, incoming, w.table)
    idx = w.table.slots()

    def passing(s: CycleState) -> set[str]:
        ok = w.plugin.filter(s, incoming, w.table, idx).ok
        return {w.table.names[i] for i, good in zip(idx, ok, strict=True) if good}

    assert passing(state) == {"n1"}
    clone = state.clone()
    db = next(iter(w.table.pods_on(w.table.index["n1"]).values()))
    w.plugin.remove_pod(clone, incoming, db, w.table.index["n1"], w.table)
    # Without the db pod no pod matches the affinity anywhere, and the pod does not match itself.
    assert passing(clone) == set()
    w.plugin.add_pod(clone, incoming, w.pi(pod({"app": "db"}, "n2")), w.table.index["n2"], w.table)
    assert passing(clone) == {"n2"}
    w.plugin.add_pod(clone, incoming, w.pi(pod({"app": "web"}, "n2")), w.table.index["n2"], w.table)
    assert passing(clone) == set()
    # An existing pod whose anti-affinity matches the incoming pod.
    w.plugin.remove_pod(clone, incoming, w.pi(pod({"app": "web"}, "n2")), w.table.index["n2"], w.table)
    w.plugin.add_pod(
        clone,
        incoming,
        w.pi(pod({}, "n2", aff=affinity(anti=[term(sel("app", "In", "web"), "zone")]))),
        w.table.index["n2"],
        w.table,
    )
    assert passing(clone) == set()
    assert passing(state) == {"n1"}  # the original state is untouched


def test_index_follows_pod_churn() -> None:
    nodes = [node(f"n{i}", hostname=f"n{i}") for i in range(4)]
    w = World(nodes)
    incoming = pod({"app": "x"}, aff=affinity(anti=[term(sel("app", "In", "x"), "hostname")]))
    assert w.filter(incoming) == dict.fromkeys(["n0", "n1", "n2", "n3"], None)
    placed = [
        pod({"app": "x"}, f"n{i}", aff=affinity(anti=[term(sel("app", "In", "x"), "hostname")]))
        for i in range(3)
    ]
    for p in placed:
        w.cache.on_pod_add(p)
    assert w.filter(incoming) == {"n0": ANTI, "n1": ANTI, "n2": ANTI, "n3": None}
    w.cache.on_pod_delete(placed[1])
    assert w.filter(incoming) == {"n0": ANTI, "n1": None, "n2": ANTI, "n3": None}
    # A pod without anti-affinity of its own is still blocked by the existing pods' terms.
    assert w.filter(pod({"app": "x"})) == {"n0": EXISTING, "n1": None, "n2": EXISTING, "n3": None}


# --- Score, from upstream TestPreferredAffinity ------------------------------------------------------------------

AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}
STAY_S1_REGION = affinity(pref=[(5, term(sel("security", "In", "S1"), "region"))])
STAY_S2_REGION = affinity(pref=[(6, term(sel("security", "In", "S2"), "region"))])
AFFINITY3 = affinity(
    pref=[
        (
            8,
            term(
                {
                    "matchExpressions": [
                        {"key": "security", "operator": "NotIn", "values": ["S1"]},
                        {"key": "security", "operator": "In", "values": ["S2"]},
                    ]
                },
                "region",
            ),
        ),
        (
            2,
            term(
                {
                    "matchExpressions": [
                        {"key": "security", "operator": "Exists"},
                        {"key": "wrongkey", "operator": "DoesNotExist"},
                    ]
                },
                "region",
            ),
        ),
    ]
)
HARD_AFFINITY = affinity(
    [
        term(sel("security", "In", "S1", "value2"), "region"),
        term(
            {
                "matchExpressions": [
                    {"key": "security", "operator": "Exists"},
                    {"key": "wrongkey", "operator": "DoesNotExist"},
                ]
            },
            "region",
        ),
    ]
)
AWAY_S1_AZ = affinity(pref_anti=[(5, term(sel("security", "In", "S1"), "az"))])
AWAY_S2_AZ = affinity(pref_anti=[(5, term(sel("security", "In", "S2"), "az"))])
S1_REGION_AWAY_S2_AZ = affinity(
    pref=[(8, term(sel("security", "In", "S1"), "region"))],
    pref_anti=[(5, term(sel("security", "In", "S2"), "az"))],
)
NS_SELECTOR_TERM = term(
    sel("security", "In", "S1"),
    "region",
    namespaces=["subteam2.team2"],
    namespaceSelector=sel("team", "In", "team1"),
)


def nodes_of(*labels: dict[str, str]) -> list[dict[str, Any]]:
    return [node(f"node{i + 1}", **lab) for i, lab in enumerate(labels)]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "want"),
    [
        (pod(S1), [], nodes_of(CHINA, INDIA, AZ1), Code.SKIP),
        (
            pod(S1, aff=STAY_S1_REGION),
            [pod(S1, "node1"), pod(S2, "node2"), pod(S1, "node3")],
            nodes_of(CHINA, INDIA, AZ1),
            [100, 0, 0],
        ),
        (pod(aff=STAY_S1_REGION), [pod(S1, "node1")], nodes_of(CHINA, CHINA_AZ1, INDIA), [100, 100, 0]),
        (
            pod(S1, aff=STAY_S2_REGION),
            [
                pod(S2, "node1"),
                pod(S2, "node1"),
                pod(S2, "node2"),
                pod(S2, "node3"),
                pod(S2, "node4"),
                pod(S2, "node5"),
            ],
            nodes_of(CHINA, INDIA, CHINA, CHINA, INDIA),
            [100, 0, 100, 100, 0],
        ),
        (
            pod(S1, aff=AFFINITY3),
            [pod(S1, "node1"), pod(S2, "node2"), pod(S1, "node3")],
            nodes_of(CHINA, INDIA, AZ1),
            [20, 100, 0],
        ),
        (  # symmetry: existing pods' preferred affinity
            pod(S2),
            [pod(S1, "node1", aff=STAY_S1_REGION), pod(S2, "node2", aff=STAY_S2_REGION)],
            nodes_of(CHINA, INDIA, AZ1),
            [0, 100, 0],
        ),
        (  # symmetry with a namespace selector
            pod(S1, namespace="subteam1.team1"),
            [
                pod(S1, "node1", aff=affinity(pref=[(5, NS_SELECTOR_TERM)])),
                pod(S2, "node2", aff=STAY_S2_REGION),
            ],
            nodes_of(CHINA, INDIA, AZ1),
            [100, 0, 0],
        ),
        (
            pod(S1, namespace="subteam1.team1"),
            [
                pod(S1, "node1", aff=affinity(pref_anti=[(5, NS_SELECTOR_TERM)])),
                pod(S2, "node2", aff=STAY_S2_REGION),
            ],
            nodes_of(CHINA, INDIA, AZ1),
            [0, 100, 100],
        ),
        (  # symmetry: existing pods' required affinity, weighted by hardPodAffinityWeight
            pod(S1),
            [pod(S1, "node1", aff=HARD_AFFINITY), pod(S2, "node2", aff=HARD_AFFINITY)],
            nodes_of(CHINA, INDIA, AZ1),
            [100, 100, 0],
        ),
        (pod(S1, aff=AWAY_S1_AZ), [pod(S1, "node1"), pod(S2, "node2")], nodes_of(AZ1, CHINA), [0, 100]),
        (pod(S1, aff=AWAY_S1_AZ), [pod(S1, "node1"), pod(S1, "node2")], nodes_of(AZ1, CHINA), [0, 100]),
        (
            pod(S1, aff=AWAY_S1_AZ),
            [pod(S1, "node1"), pod(S1, "node1"), pod(S2, "node2")],
            nodes_of(AZ1, INDIA),
            [0, 100],
        ),
        (
            pod(S2),
            [pod(S1, "node1", aff=AWAY_S2_AZ), pod(S2, "node2", aff=AWAY_S1_AZ)],
            nodes_of(AZ1, AZ2),
            [0, 100],
        ),
        (
            pod(S1, aff=S1_REGION_AWAY_S2_AZ),
            [pod(S1, "node1"), pod(S1, "node2")],
            nodes_of(CHINA, AZ1),
            [100, 0],
        ),
        (
            pod(S1, aff=S1_REGION_AWAY_S2_AZ),
            [pod(S1, f"node{n}") for n in (1, 1, 2, 3, 3, 4, 5)],
            nodes_of(CHINA_AZ1, INDIA, CHINA, CHINA, INDIA),
            [100, 0, 100, 100, 0],
        ),
        (  # affinity, anti-affinity and symmetry together: weights 8, -5, 8, -5
            pod(S1, aff=S1_REGION_AWAY_S2_AZ),
            [
                pod(S1, "node1"),
                pod(S2, "node2"),
                pod({}, "node3", aff=S1_REGION_AWAY_S2_AZ),
                pod({}, "node4", aff=AWAY_S1_AZ),
            ],
            nodes_of(CHINA, AZ1, INDIA, AZ2),
            [100, 0, 100, 0],
        ),
        (  # partial topology without affinity pods (upstream issue 82796)
            pod(S1),
            [pod(S1, "node1"), pod({}, "node2", aff=S1_REGION_AWAY_S2_AZ)],
            nodes_of(CHINA, CHINA),
            [0, 0],
        ),
    ],
)
def test_score_table(
    incoming: dict[str, Any], pods: list[dict[str, Any]], nodes: list[dict[str, Any]], want: Any
) -> None:
    assert World(nodes, pods).scores(incoming) == want


def test_ignore_preferred_terms_of_existing_pods() -> None:
    nodes = nodes_of(AZ1, AZ2)
    pods = [pod(S1, "node1", aff=AWAY_S2_AZ), pod(S2, "node2", aff=AWAY_S1_AZ)]
    assert World(nodes, pods).scores(pod(S2)) == [0, 100]
    assert World(nodes, pods, {"ignorePreferredTermsOfExistingPods": True}).scores(pod(S2)) == Code.SKIP
    # With preferences of its own, existing pods' terms still count.
    w = World(nodes, pods, {"ignorePreferredTermsOfExistingPods": True})
    assert w.scores(pod(S2, aff=affinity(pref=[(1, term(sel("nothing", "Exists"), "az"))]))) == [0, 100]


def test_hard_pod_affinity_weight() -> None:
    nodes = nodes_of(CHINA, INDIA)
    pods = [pod(S1, "node1", aff=HARD_AFFINITY)]
    w = World(
        nodes, [*pods, pod(S1, "node2", aff=affinity(pref=[(1, term(sel("security", "Exists"), "region"))]))]
    )
    assert w.scores(pod(S1)) == [100, 0]  # 2 terms x weight 1 in China vs 1 in India
    w = World(
        nodes, [*pods, pod(S1, "node2", aff=affinity(pref=[(3, term(sel("security", "Exists"), "region"))]))]
    )
    assert w.scores(pod(S1)) == [0, 100]
    w = World(nodes, pods, {"hardPodAffinityWeight": 0})
    assert w.scores(pod(S1)) == Code.SKIP
    # The args model is the one place args are checked (the configuration loader reports these).
    assert InterPodAffinityArgs.model_validate({"hardPodAffinityWeight": 101}).validate_args("args")


def test_normalize_min_max() -> None:
    w = World(nodes_of(CHINA, INDIA, AZ1))
    p = w.pi(pod())
    state = CycleState()
    from kubesched.scheduler.plugins.inter_pod_affinity import _PreScoreState

    state.write("PreScoreInterPodAffinity", _PreScoreState({"k": (None, np.zeros(1))}))  # type: ignore[arg-type]
    assert w.plugin.normalize_score(state, p, np.array([-5, 0, 5])).tolist() == [0, 50, 100]
    assert w.plugin.normalize_score(state, p, np.array([3, 7])).tolist() == [0, 100]
    assert w.plugin.normalize_score(state, p, np.array([4, 4])).tolist() == [0, 0]


def test_args_from_pydantic_model_and_events() -> None:
    plugin = InterPodAffinity(InterPodAffinityArgs(hard_pod_affinity_weight=7), None)
    assert plugin.hard_pod_affinity_weight == 7
    actions = {(e.resource, e.action) for e in plugin.events_to_register()}
    assert {("Pod", "Add"), ("Pod", "Delete"), ("Pod", "UpdatePodLabel"), ("Node", "Add")} <= actions


# --- Through the real Framework, with the sibling placement plugins -----------------------------------------------


def test_through_framework() -> None:
    from kubesched.scheduler.framework.runtime import Framework
    from kubesched.scheduler.plugins import in_tree_catalogue
    from kubesched.scheduler.plugins.pod_topology_spread_args import PodTopologySpreadArgs

    cache = Cache()
    for i in range(6):
        cache.on_node_add(node(f"n{i}", hostname=f"n{i}", zone=f"z{i % 3}"))
    names = ["NodeAffinity", "PodTopologySpread", "InterPodAffinity"]
    points = {
        "PreFilter": names,
        "Filter": names,
        "PreScore": names,
        "Score": [(n, 2) for n in names],
    }
    fw = Framework.from_plugins(
        in_tree_catalogue(),
        points,
        {"PodTopologySpread": PodTopologySpreadArgs(defaulting_type="List")},
        Handle(cache=cache),
        seed=1,
    )
    anti = affinity(anti=[term(sel("app", "In", "web"), "hostname")])
    spread = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": sel("app", "Exists"),
    }
    placed: list[str] = []
    for _ in range(6):
        d = pod({"app": "web"}, aff=anti)
        d["spec"]["topologySpreadConstraints"] = [spread]
        d["spec"]["nodeSelector"] = {}
        p = PodInfo.from_pod(d, cache.res)
        result = fw.schedule(CycleState(), p)
        assert result.ok, result.status
        placed.append(result.node)
        cache.assume(p, result.node)
    assert sorted(placed) == [f"n{i}" for i in range(6)]  # one per host, two per zone
    # A seventh web pod fits nowhere: every host holds a web pod.
    d = pod({"app": "web"}, aff=anti)
    result = fw.schedule(CycleState(), PodInfo.from_pod(d, cache.res))
    assert not result.ok
    assert result.diagnosis.counts == {ERR_REASON_ANTI_AFFINITY: 6}
    # A pod pinned by node affinity to a zone label nobody has.
    d = pod({"app": "db"}, aff=None)
    d["spec"]["nodeSelector"] = {"zone": "z9"}
    result = fw.schedule(CycleState(), PodInfo.from_pod(d, cache.res))
    assert not result.ok and "node(s) didn't match Pod's node affinity/selector" in result.diagnosis.counts


# --- Randomised cross-check against a plain transcription of upstream's per-pod loops ------------------------------


def _random_term(rng: np.random.Generator) -> dict[str, Any]:
    selectors = [
        sel("app", "In", str(rng.choice(["a", "b", "c"]))),
        sel("tier", "Exists"),
        sel("app", "NotIn", "a"),
        {"matchLabels": {"app": str(rng.choice(["a", "b"])), "tier": "x"}},
        {},
    ]
    t = term(selectors[int(rng.integers(len(selectors)))], str(rng.choice(["zone", "hostname", "region"])))
    scope = int(rng.integers(4))
    if scope == 1:
        t["namespaces"] = ["other"]
    elif scope == 2:
        t["namespaceSelector"] = {}
    elif scope == 3:
        t["namespaceSelector"] = sel("team", "In", "team1")
    return t


def _random_affinity(rng: np.random.Generator) -> dict[str, Any] | None:
    if rng.random() < 0.4:
        return None

    def terms(p: float) -> list[dict[str, Any]]:
        return [_random_term(rng) for _ in range(int(rng.integers(1, 3)))] if rng.random() < p else []

    def weighted(p: float) -> list[tuple[int, dict[str, Any]]]:
        return [(int(rng.integers(1, 10)), t) for t in terms(p)]

    return affinity(terms(0.3), terms(0.4), weighted(0.4), weighted(0.4)) or None


def _reference(
    w: World, incoming: PodInfo, hard_weight: int
) -> tuple[dict[str, str | None] | None, dict[str, int] | None]:
    """Upstream's algorithm, pod by pod (PreFilter + Filter verdicts, raw scores), on the same parsed terms."""
    from collections import Counter

    from kubesched.scheduler.plugins.inter_pod_affinity import pod_terms

    table = w.table
    ns_labels = (
        NAMESPACES.get(incoming.namespace)["metadata"]["labels"] if NAMESPACES.get(incoming.namespace) else {}
    )
    own = pod_terms(incoming)
    aff = [t.resolved(NAMESPACES) for t in own.required_affinity]
    anti = [t.resolved(NAMESPACES) for t in own.required_anti_affinity]
    existing = [(pi, table.labels[slot]) for pi, slot in table.iter_pods()]
    ex_anti: Counter[tuple[str, str]] = Counter()
    aff_counts: Counter[tuple[str, str]] = Counter()
    anti_counts: Counter[tuple[str, str]] = Counter()
    for pi, labels in existing:
        theirs = pod_terms(pi)
        for t in theirs.required_anti_affinity:
            if t.matches(incoming.namespace, incoming.labels, ns_labels) and t.topology_key in labels:
                ex_anti[(t.topology_key, labels[t.topology_key])] += 1
        if aff and all(t.matches(pi.namespace, pi.labels, None) for t in aff):
            for t in aff:
                if t.topology_key in labels:
                    aff_counts[(t.topology_key, labels[t.topology_key])] += 1
        for t in anti:
            if t.matches(pi.namespace, pi.labels, None) and t.topology_key in labels:
                anti_counts[(t.topology_key, labels[t.topology_key])] += 1
    verdicts: dict[str, str | None] | None = None
    if aff or anti or +ex_anti:
        verdicts = {}
        self_match = all(t.matches(incoming.namespace, incoming.labels, ns_labels) for t in aff)
        for slot in table.slots():
            labels = table.labels[slot]
            reason = None
            exist, missing = True, False
            for t in aff:
                if t.topology_key not in labels:
                    missing = True
                elif aff_counts[(t.topology_key, labels[t.topology_key])] <= 0:
                    exist = False
            if missing or (not exist and not (not +aff_counts and self_match)):
                reason = AFF
            elif any(
                t.topology_key in labels and anti_counts[(t.topology_key, labels[t.topology_key])] > 0
                for t in anti
            ):
                reason = ANTI
            elif any(ex_anti[kv] > 0 for kv in labels.items()):
                reason = EXISTING
            verdicts[table.names[slot]] = reason
    topo: dict[str, dict[str, int]] = {}
    touched = False

    def add(t: Any, weight: int, labels: dict[str, str]) -> None:
        nonlocal touched
        if t.topology_key in labels:
            touched = True
            d = topo.setdefault(t.topology_key, {})
            d[labels[t.topology_key]] = d.get(labels[t.topology_key], 0) + weight

    for pi, labels in existing:
        for wt in own.preferred_affinity:
            t = wt.term.resolved(NAMESPACES)
            if t.matches(pi.namespace, pi.labels, None):
                add(t, wt.weight, labels)
        for wt in own.preferred_anti_affinity:
            t = wt.term.resolved(NAMESPACES)
            if t.matches(pi.namespace, pi.labels, None):
                add(t, -wt.weight, labels)
        theirs = pod_terms(pi)
        if hard_weight > 0:
            for t in theirs.required_affinity:
                if t.matches(incoming.namespace, incoming.labels, ns_labels):
                    add(t, hard_weight, labels)
        for sign, group in ((1, theirs.preferred_affinity), (-1, theirs.preferred_anti_affinity)):
            for wt in group:
                if wt.term.matches(incoming.namespace, incoming.labels, ns_labels):
                    add(wt.term, sign * wt.weight, labels)
    scores = None
    if touched:
        scores = {}
        for slot in table.slots():
            labels = table.labels[slot]
            scores[table.names[slot]] = sum(topo[k].get(labels[k], 0) for k in topo if k in labels)
    return verdicts, scores


@pytest.mark.parametrize("seed", range(25))
def test_matches_reference_on_random_clusters(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nodes = []
    for i in range(8):
        labels = {"hostname": f"h{i}", "zone": f"z{i % 3}"}
        if rng.random() < 0.7:
            labels["region"] = f"r{i % 2}"
        nodes.append(node(f"n{i}", **labels))
    namespaces = ["default", "other", "subteam1.team1", "subteam1.team2"]

    def random_pod(node_name: str = "") -> dict[str, Any]:
        labels = {"app": str(rng.choice(["a", "b", "c"]))}
        if rng.random() < 0.5:
            labels["tier"] = str(rng.choice(["x", "y"]))
        return pod(labels, node_name, str(rng.choice(namespaces)), _random_affinity(rng))

    hard_weight = int(rng.choice([0, 1, 5]))
    w = World(
        nodes, [random_pod(f"n{rng.integers(8)}") for _ in range(25)], {"hardPodAffinityWeight": hard_weight}
    )
    for _ in range(4):
        incoming = w.pi(random_pod())
        want_verdicts, want_scores = _reference(w, incoming, hard_weight)
        state = CycleState()
        _, status = w.plugin.pre_filter(state, incoming, w.table)
        idx = w.table.slots()
        if want_verdicts is None:
            assert status.code == Code.SKIP
        else:
            assert status.ok
            f = w.plugin.filter(state, incoming, w.table, idx)
            got = {}
            for slot, bits in zip(idx, f.reason_bits, strict=True):
                got[w.table.names[slot]] = f.reasons[int(bits).bit_length() - 1] if bits else None
            assert got == want_verdicts
        status = w.plugin.pre_score(state, incoming, w.table, idx)
        if want_scores is None:
            assert status.code == Code.SKIP
        else:
            assert status.ok
            raw = w.plugin.score(state, incoming, w.table, idx)
            assert dict(zip([w.table.names[s] for s in idx], raw.tolist(), strict=True)) == want_scores
        # Schedule it somewhere so that later pods see more variety.
        w.cache.on_pod_add(
            {**incoming.pod, "spec": {**incoming.pod["spec"], "nodeName": f"n{rng.integers(8)}"}}
        )
