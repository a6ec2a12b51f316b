"""The structured allocator and the CEL environment: cases from upstream's allocator tests (as facts), and a
property test of the search against brute force over small random slices."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from dra_objects import CLASS, DRIVER, claim, device, device_class, exactly, resource_slice
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.scheduler.dra.allocator import AllocationError, AllocationTimeout, Allocator, Pools
from kubesched.scheduler.dra.cel import DeviceView, SelectorError, compile_selector


def classes(*objs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs} or {CLASS: device_class()}


def allocate(
    claims: list[dict[str, Any]],
    slices: list[dict[str, Any]],
    node: str = "node-1",
    cls: dict[str, dict[str, Any]] | None = None,
    allocated: set[tuple[str, str, str]] | None = None,
) -> list[list[str]] | None:
    a = Allocator(claims, cls or classes(), allocated or set(), Pools(slices))
    found = a.allocate(node, lambda sel: False)
    if found is None:
        return None
    return [[r["device"] for r in res["devices"]["results"]] for res in found.results]


def test_simple_and_already_allocated_devices_are_skipped() -> None:
    slices = [resource_slice("node-1", device("device-1"), device("device-2"))]
    assert allocate([claim()], slices) == [["device-1"]]
    assert allocate([claim()], slices, allocated={(DRIVER, "node-1", "device-1")}) == [["device-2"]]
    assert (
        allocate(
            [claim()], slices, allocated={(DRIVER, "node-1", "device-1"), (DRIVER, "node-1", "device-2")}
        )
        is None
    )


def test_two_claims_get_distinct_devices_and_too_many_fail() -> None:
    slices = [resource_slice("node-1", device("device-1"), device("device-2"))]
    assert allocate([claim("a"), claim("b")], slices) == [["device-1"], ["device-2"]]
    assert allocate([claim("a"), claim("b"), claim("c")], slices) is None


def test_other_node_and_all_nodes_slices() -> None:
    assert allocate([claim()], [resource_slice("node-2", device("device-1"))]) is None
    shared = resource_slice(None, device("net-1"), pool="fabric", allNodes=True)
    a = Allocator([claim()], classes(), set(), Pools([shared]))
    found = a.allocate("node-1", lambda sel: False)
    assert found is not None and "nodeSelector" not in found.results[0]
    by_label = resource_slice(
        None, device("net-1"), pool="rack", nodeSelector={"nodeSelectorTerms": [{"matchExpressions": []}]}
    )
    a = Allocator([claim()], classes(), set(), Pools([by_label]))
    assert a.allocate("node-1", lambda sel: False) is None
    found = a.allocate("node-1", lambda sel: True)
    assert found is not None and found.results[0]["nodeSelector"] == by_label["spec"]["nodeSelector"]


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = resource_slice("node-1", device("old"), generation=1, name="s1")
    new = resource_slice("node-1", device("new"), generation=2, name="s2")
    assert allocate([claim()], [old, new]) == [["new"]]


def test_exact_count_and_all() -> None:
    slices = [resource_slice("node-1", device("d1"), device("d2"), device("d3"))]
    assert allocate([claim(requests=[exactly("req-1", CLASS, 2)])], slices) == [["d1", "d2"]]
    assert allocate([claim(requests=[exactly("req-1", CLASS, 4)])], slices) is None
    assert allocate([claim(requests=[exactly("req-1", CLASS, 0, "All")])], slices) == [["d1", "d2", "d3"]]
    # All fails when one of the matching devices is taken.
    taken = {(DRIVER, "node-1", "d2")}
    assert allocate([claim(requests=[exactly("req-1", CLASS, 0, "All")])], slices, allocated=taken) is None


def test_class_and_request_selectors_with_quantities() -> None:
    slices = [resource_slice("node-1", device("small", "8Gi", model="a"), device("big", "80Gi", model="b"))]
    big = device_class("big", 'device.capacity["some-driver"].memory.compareTo(quantity("40Gi")) >= 0')
    assert allocate([claim(requests=[exactly("req-1", "big")])], slices, cls=classes(big)) == [["big"]]
    by_model = exactly("req-1", CLASS, 1, "ExactCount", 'device.attributes["some-driver"].model == "a"')
    assert allocate([claim(requests=[by_model])], slices) == [["small"]]


def test_match_attribute_backtracks_to_a_consistent_choice() -> None:
    # The first device of req-1 has no partner with the same numa value: the search must try the second.
    slices = [
        resource_slice(
            "node-1",
            device("gpu-0", kind="gpu", numa=0),
            device("gpu-1", kind="gpu", numa=1),
            device("nic-1", kind="nic", numa=1),
        )
    ]
    gpu = exactly("gpu", CLASS, 1, "ExactCount", 'device.attributes["some-driver"].kind == "gpu"')
    nic = exactly("nic", CLASS, 1, "ExactCount", 'device.attributes["some-driver"].kind == "nic"')
    c = claim(requests=[gpu, nic], constraints=[{"matchAttribute": "some-driver/numa"}])
    assert allocate([c], slices) == [["gpu-1", "nic-1"]]
    # A device lacking the attribute never satisfies the constraint.
    c = claim(requests=[gpu], constraints=[{"matchAttribute": "some-driver/missing"}])
    assert allocate([c], slices) is None
    # A constraint naming other requests does not apply to this one.
    c = claim(requests=[gpu], constraints=[{"requests": ["other"], "matchAttribute": "some-driver/missing"}])
    assert allocate([c], slices) == [["gpu-0"]]


def test_first_available_takes_the_first_sub_request_that_fits_and_scores_it() -> None:
    c = claim(
        requests=[
            {
                "name": "req-1",
                "firstAvailable": [
                    {"name": "two", "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 2},
                    {"name": "one", "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1},
                ],
            }
        ]
    )
    two = [resource_slice("node-1", device("d1"), device("d2"))]
    one = [resource_slice("node-1", device("d1"))]
    a = Allocator([c], classes(), set(), Pools(two))
    found = a.allocate("node-1", lambda s: False)
    assert found is not None and found.score == 8
    assert [r["request"] for r in found.results[0]["devices"]["results"]] == ["req-1/two", "req-1/two"]
    a = Allocator([c], classes(), set(), Pools(one))
    found = a.allocate("node-1", lambda s: False)
    assert found is not None and found.score == 7
    assert [r["request"] for r in found.results[0]["devices"]["results"]] == ["req-1/one"]


def test_class_config_and_claim_config_are_copied_into_the_allocation() -> None:
    cfg = [{"opaque": {"driver": DRIVER, "parameters": {"mode": "fast"}}}]
    c = claim()
    c["spec"]["devices"]["config"] = [{"requests": ["req-1"], "opaque": {"driver": DRIVER, "parameters": {}}}]
    a = Allocator(
        [c], classes(device_class(CLASS, config=cfg)), set(), Pools([resource_slice("node-1", device("d"))])
    )
    found = a.allocate("node-1", lambda s: False)
    assert found is not None
    assert [x["source"] for x in found.results[0]["devices"]["config"]] == ["FromClass", "FromClaim"]
    assert found.results[0]["devices"]["config"][0]["requests"] == ["req-1"]


def test_missing_class_and_bad_request_are_errors() -> None:
    with pytest.raises(AllocationError, match="request req-1: device class nope does not exist"):
        Allocator([claim(requests=[exactly("req-1", "nope")])], classes(), set(), Pools([]))
    with pytest.raises(AllocationError, match="unsupported request type"):
        Allocator([claim(requests=[{"name": "req-1"}])], classes(), set(), Pools([]))


# --- the CEL environment -----------------------------------------------------------------------------------


def test_cel_environment() -> None:
    d = DeviceView(
        "gpu.x",
        {
            "name": "g0",
            "attributes": {
                "model": {"string": "a100"},
                "index": {"int": 3},
                "ok": {"bool": True},
                "other.io/zone": {"string": "z1"},
                "driverVersion": {"version": "1.2.3"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        },
    )
    true = [
        'device.driver == "gpu.x"',
        'device.attributes["gpu.x"].model == "a100"',
        'device.attributes["gpu.x"].index > 2 && device.attributes["gpu.x"].ok',
        'device.attributes["other.io"].zone == "z1"',
        '!("model" in device.attributes["unknown.io"])',  # unknown domains are empty maps
        'device.capacity["gpu.x"].memory.compareTo(quantity("40Gi")) > 0',
        'device.capacity["gpu.x"].memory == quantity("81920Mi")',
        'device.capacity["gpu.x"].memory.isGreaterThan(quantity("1Gi"))',
        'device.attributes["gpu.x"].driverVersion.isGreaterThan(semver("1.2.0"))',
        'device.attributes["gpu.x"].driverVersion.isLessThan(semver("1.10.0"))',
    ]
    for expr in true:
        assert compile_selector(expr).matches(d), expr
    with pytest.raises(SelectorError, match="no such key"):
        compile_selector('device.attributes["gpu.x"].missing == 1').matches(d)
    with pytest.raises(SelectorError, match="must return a bool"):
        compile_selector('device.driver + "x"').matches(d)
    with pytest.raises(SelectorError, match="compilation failed"):
        compile_selector("device.driver ==")


# --- the search against brute force ------------------------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[tuple[str, str, str]]]:
    n = draw(st.integers(0, 5))
    devs = [device(f"d{i}", numa=draw(st.integers(0, 1))) for i in range(n)]
    taken = {(DRIVER, "node-1", f"d{i}") for i in range(n) if draw(st.booleans())}
    claims = []
    for c in range(draw(st.integers(1, 2))):
        reqs = [exactly(f"r{j}", CLASS, draw(st.integers(1, 2))) for j in range(draw(st.integers(1, 2)))]
        constraints = [{"matchAttribute": "some-driver/numa"}] if draw(st.booleans()) else None
        claims.append(claim(f"c{c}", requests=reqs, constraints=constraints))
    return claims, [resource_slice("node-1", *devs)], taken


def brute_force(claims: list[dict[str, Any]], slices: list[dict[str, Any]], taken: set[Any]) -> bool:
    free = [d for d in slices[0]["spec"]["devices"] if (DRIVER, "node-1", d["name"]) not in taken]
    needs = [
        (ci, r["exactly"]["count"]) for ci, c in enumerate(claims) for r in c["spec"]["devices"]["requests"]
    ]
    total = sum(n for _, n in needs)
    for perm in itertools.permutations(free, total):
        pos, ok = 0, True
        per_claim: dict[int, list[Any]] = {}
        for ci, n in needs:
            per_claim.setdefault(ci, []).extend(perm[pos : pos + n])
            pos += n
        for ci, picked in per_claim.items():
            if claims[ci]["spec"]["devices"].get("constraints"):
                if len({d["attributes"]["numa"]["int"] for d in picked}) > 1:
                    ok = False
        if ok:
            return True
    return False


@settings(max_examples=150, deadline=None)
@given(cases())
def test_allocator_finds_a_solution_exactly_when_one_exists(case: Any) -> None:
    claims, slices, taken = case
    found = allocate(claims, slices, allocated=taken)
    assert (found is not None) == brute_force(claims, slices, taken)
    if found is not None:
        flat = [d for devs in found for d in devs]
        assert len(flat) == len(set(flat)) and not {(DRIVER, "node-1", d) for d in flat} & taken


@st.composite
def count_cases(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[tuple[str, str, str]]]:
    slices, taken = [], set()
    for n in range(3):
        devs = [
            device(f"d{i}", model=draw(st.sampled_from(["a", "b"]))) for i in range(draw(st.integers(0, 4)))
        ]
        slices.append(resource_slice(f"node-{n}", *devs))
        taken |= {(DRIVER, f"node-{n}", d["name"]) for d in devs if draw(st.booleans())}
    sel = 'device.attributes["some-driver"].model == "a"'
    claims = [
        claim(
            f"c{c}",
            requests=[exactly(f"r{j}", CLASS, draw(st.integers(1, 2)), "ExactCount", sel) for j in range(2)],
        )
        for c in range(draw(st.integers(1, 2)))
    ]
    return claims, slices, taken


@settings(max_examples=100, deadline=None)
@given(count_cases())
def test_the_count_check_agrees_with_the_search(case: Any) -> None:
    claims, slices, taken = case
    a = Allocator(claims, classes(), taken, Pools(slices))
    assert a.count_only is not None
    index = {f"node-{n}": n for n in range(3)}
    counts = a.free_counts(index, 3)
    need = a.count_only[1]
    for name, slot in index.items():
        by_search = a.allocate(name, lambda sel: False) is not None
        assert (counts[slot] >= need) == by_search == a.fits(name, lambda sel: False)


def test_cel_runtime_errors_name_the_claim_or_the_class_as_upstream() -> None:
    slices = [resource_slice("node-1", device("d"))]
    broken = 'device.attributes["some-driver"].healthy'
    c = claim(requests=[exactly("req-1", CLASS, 1, "ExactCount", broken)])
    with pytest.raises(AllocationError) as e:
        Allocator([c], classes(), set(), Pools(slices)).allocate("node-1", lambda s: False)
    assert (
        str(e.value)
        == "claim default/my-pod-my-resource: selector #0: CEL runtime error: no such key: healthy"
    )
    bad_class = device_class("my-resource-class", broken)
    c = claim(requests=[exactly("req-1", "my-resource-class")])
    with pytest.raises(AllocationError) as e:
        Allocator([c], classes(bad_class), set(), Pools(slices)).allocate("node-1", lambda s: False)
    assert str(e.value) == "class my-resource-class: selector #0: CEL runtime error: no such key: healthy"


def test_a_search_past_the_filter_timeout_stops_as_upstream() -> None:
    # 20 GPUs on NUMA node 0, the only NIC on NUMA node 1: every choice of 3 GPUs fails at the NIC (1,350 steps).
    gpus = [device(f"gpu-{i}", kind="gpu", numa=0) for i in range(20)]
    slices = [resource_slice("node-1", *gpus, device("nic-0", kind="nic", numa=1))]
    gpu = exactly("gpu", CLASS, 3, "ExactCount", 'device.attributes["some-driver"].kind == "gpu"')
    nic = exactly("nic", CLASS, 1, "ExactCount", 'device.attributes["some-driver"].kind == "nic"')
    c = claim(requests=[gpu, nic], constraints=[{"matchAttribute": "some-driver/numa"}])
    a = Allocator([c], classes(), set(), Pools(slices))
    assert a.count_only is None
    with pytest.raises(AllocationTimeout, match="timed out trying to allocate devices"):
        a.allocate("node-1", lambda s: False, timeout=1e-9)
    assert a.allocate("node-1", lambda s: False) is None  # within the default 10 s: no solution
