"""Structured-parameters allocation: the devices of ResourceSlices that satisfy a pod's pending ResourceClaims on
one node, as upstream's ``dynamic-resource-allocation/structured`` allocator (the stable feature set of 1.36).

What it does, in upstream's order: claims in the pod's order, requests in the claim's order, devices in the
order of their pools (by driver and pool name), slices and entries; a device is a candidate when every selector
of its DeviceClass and of the request matches (``cel.py``), it is not allocated to another claim (nor in
flight), and it is not already picked for this pod. ``exactCount`` takes ``count`` devices, ``All`` every
matching device of the node's pools (and fails when one of them is taken). ``firstAvailable`` tries the
sub-requests in order. ``matchAttribute`` constraints hold across the requests they name (all requests when
none are named): every picked device must carry the attribute, with one value. A choice that breaks a
constraint later is undone (depth-first search with backtracking), so the answer does not depend on luck.

Pools: only slices of a pool's newest generation count. A node sees slices published for it (``nodeName``),
for all nodes (``allNodes``) and those whose ``nodeSelector`` matches it.

Not implemented (alpha or beta-off in 1.36): device taints and tolerations, partitionable devices (shared
counters), consumable capacity, ``distinctAttribute``, admin access semantics beyond copying the flag.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.scheduler.dra.cel import DeviceView, SelectorError, compile_selector

DeviceId = tuple[str, str, str]  # (driver, pool, device)
# (selector raw dict) -> does it match the node being tried? ``None`` means no node restriction.
NodeMatcher = Callable[[Mapping[str, Any]], bool]

MAX_FIRST_AVAILABLE = 8  # resource.FirstAvailableDeviceRequestMaxSize: the score is 8 minus the chosen index


class AllocationError(Exception):
    """A claim or class the allocator cannot use (an error status upstream, not a rejection)."""


class AllocationTimeout(Exception):
    """The search for one node took longer than the filter timeout (upstream's ``filterTimeout``, 10 s)."""


FILTER_TIMEOUT = 10.0  # seconds per node, DynamicResourcesArgs.filterTimeout's default


@dataclass(slots=True)
class Candidate:
    """A device of the newest generation of its pool, with where it can be used."""

    id: DeviceId
    view: DeviceView
    node_name: str | None  # published for this node only
    node_selector: Mapping[str, Any] | None  # published for the nodes this selects
    all_nodes: bool


def device_id(result: Mapping[str, Any]) -> DeviceId:
    return (str(result.get("driver") or ""), str(result.get("pool") or ""), str(result.get("device") or ""))


class Pools:
    """The devices of a set of ResourceSlices, indexed by node; built once per change of the slices."""

    def __init__(self, slices: Iterable[Mapping[str, Any]]) -> None:
        newest: dict[tuple[str, str], int] = {}
        specs: list[Mapping[str, Any]] = []
        for s in slices:
            spec = s.get("spec") or {}
            pool = spec.get("pool") or {}
            key = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
            gen = int(pool.get("generation") or 0)
            if gen > newest.get(key, -1):
                newest[key] = gen
            specs.append(spec)
        self.by_node: dict[str, list[Candidate]] = {}
        self.shared: list[Candidate] = []  # allNodes or nodeSelector
        # (class selectors, request selectors, device) -> matches: CEL results live as long as the devices do
        # (a slice change builds new Pools), so each selector runs once per device, not once per cycle.
        self.matches: dict[tuple[tuple[str, ...], tuple[str, ...], DeviceId], bool] = {}
        # ((class selectors, request selectors), node) -> the node's matching devices (for the count check).
        self.matching: dict[tuple[tuple[tuple[str, ...], tuple[str, ...]], str], list[Candidate]] = {}
        # (class selectors, request selectors) -> node -> number of matching devices; device -> its node.
        self.match_counts: dict[
            tuple[tuple[str, ...], tuple[str, ...]], tuple[dict[str, int], dict[DeviceId, str]]
        ] = {}
        ordered: list[tuple[tuple[str, str], int, Candidate]] = []
        for order, spec in enumerate(specs):
            driver = str(spec.get("driver") or "")
            pool = spec.get("pool") or {}
            key = (driver, str(pool.get("name") or ""))
            if int(pool.get("generation") or 0) != newest[key]:
                continue
            for device in spec.get("devices") or ():
                view = DeviceView(driver, device)
                node_name = device.get("nodeName") or spec.get("nodeName")
                selector = device.get("nodeSelector") or spec.get("nodeSelector")
                all_nodes = bool(device.get("allNodes") or spec.get("allNodes"))
                cand = Candidate((driver, key[1], view.name), view, node_name, selector, all_nodes)
                ordered.append((key, order, cand))
        ordered.sort(key=lambda t: (t[0], t[1]))
        for _, _, cand in ordered:
            if cand.node_name:
                self.by_node.setdefault(cand.node_name, []).append(cand)
            elif cand.all_nodes or cand.node_selector:
                self.shared.append(cand)

    def for_node(self, node_name: str, node_matches: NodeMatcher) -> list[Candidate]:
        local = self.by_node.get(node_name, [])
        if not self.shared:
            return local  # already in pool order
        found = list(local)
        for cand in self.shared:
            if cand.all_nodes or (cand.node_selector is not None and node_matches(cand.node_selector)):
                found.append(cand)
        found.sort(key=lambda c: c.id[:2])
        return found

    def has_devices_for(self, node_name: str) -> bool:
        return bool(self.shared) or node_name in self.by_node


@dataclass(slots=True)
class _Alternative:
    """One way to satisfy a request: the request itself, or one of its ``firstAvailable`` sub-requests."""

    name: str  # "req" or "req/sub"
    index: int  # position among firstAvailable (0 for a plain request)
    claim: str  # namespace/name, for error messages
    class_name: str
    class_selectors: tuple[str, ...]
    selectors: tuple[str, ...]
    mode: str  # ExactCount or All
    count: int
    admin_access: bool


@dataclass(slots=True)
class _Request:
    name: str
    alternatives: list[_Alternative]
    first_available: bool


@dataclass(slots=True)
class _Claim:
    claim: Mapping[str, Any]
    requests: list[_Request]
    constraints: list[tuple[frozenset[str] | None, str]]  # (request names or None = all, attribute)
    class_configs: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)


def _selectors(raw: Iterable[Mapping[str, Any]] | None) -> tuple[str, ...]:
    out = []
    for sel in raw or ():
        expr = ((sel or {}).get("cel") or {}).get("expression")
        if expr:
            out.append(str(expr))
    return tuple(out)


def _claim_name(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def parse_claim(claim: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> _Claim:
    """The claim's requests with their classes resolved (``AllocationError`` when a class is missing)."""
    devices = (claim.get("spec") or {}).get("devices") or {}
    requests: list[_Request] = []
    class_configs: dict[str, list[Mapping[str, Any]]] = {}

    def alternative(name: str, index: int, raw: Mapping[str, Any]) -> _Alternative:
        class_name = str(raw.get("deviceClassName") or "")
        cls = classes.get(class_name)
        if cls is None:
            raise AllocationError(f"request {name}: device class {class_name} does not exist")
        class_configs.setdefault(class_name, list((cls.get("spec") or {}).get("config") or ()))
        mode = str(raw.get("allocationMode") or "ExactCount")
        return _Alternative(
            name,
            index,
            _claim_name(claim),
            class_name,
            _selectors((cls.get("spec") or {}).get("selectors")),
            _selectors(raw.get("selectors")),
            mode,
            int(raw.get("count") or 1) if mode == "ExactCount" else 0,
            bool(raw.get("adminAccess")),
        )

    for req in devices.get("requests") or ():
        name = str(req.get("name") or "")
        if req.get("firstAvailable"):
            alts = [
                alternative(f"{name}/{sub.get('name', '')}", i, sub)
                for i, sub in enumerate(req.get("firstAvailable") or ())
            ]
            requests.append(_Request(name, alts, True))
        elif req.get("exactly") is not None:
            requests.append(_Request(name, [alternative(name, 0, req["exactly"])], False))
        else:
            raise AllocationError(f"claim {_claim_name(claim)}, request {name}: unsupported request type")
    constraints: list[tuple[frozenset[str] | None, str]] = []
    for c in devices.get("constraints") or ():
        attr = c.get("matchAttribute")
        if not attr:
            continue  # distinctAttribute is alpha in 1.36: not enforced here
        names = c.get("requests")
        constraints.append((frozenset(str(n) for n in names) if names else None, str(attr)))
    return _Claim(claim, requests, constraints, class_configs)


class Allocation:
    """What Filter found for one node: the devices picked per claim and the score of the choices. The
    ``status.allocation`` objects are built on first use (Reserve needs them for one node, Filter finds many)."""

    __slots__ = ("_allocator", "_node", "_picks", "_results", "score")

    def __init__(
        self,
        allocator: Allocator,
        node_name: str,
        picks: list[list[tuple[_Alternative, list[Candidate]]]],
        score: int,
    ) -> None:
        self._allocator = allocator
        self._node = node_name
        self._picks = picks
        self._results: list[dict[str, Any]] | None = None
        self.score = score

    @property
    def results(self) -> list[dict[str, Any]]:
        """One ``status.allocation`` per claim, in the order the claims were given."""
        if self._results is None:
            a = self._allocator
            self._results = [
                a._result(claim, picks, self._node)
                for claim, picks in zip(a.claims, self._picks, strict=True)
            ]
        return self._results


class Allocator:
    """Allocates the given (unallocated) claims on one node at a time."""

    def __init__(
        self,
        claims: Sequence[Mapping[str, Any]],
        classes: Mapping[str, Mapping[str, Any]],
        allocated: set[DeviceId],
        pools: Pools,
    ) -> None:
        self.claims = [parse_claim(c, classes) for c in claims]
        self.allocated = allocated
        self.pools = pools
        self._match = pools.matches
        self._classes = classes
        self._deadline: float | None = None
        self._steps = 0
        # The common shape: every request asks ExactCount devices of one kind (same selectors), no constraints,
        # no alternatives. Then a node fits exactly when it has that many free matching devices, a count Filter
        # takes without searching; the devices are picked for the chosen node only.
        self.count_only: tuple[_Alternative, int] | None = None
        alts = [r.alternatives[0] for c in self.claims for r in c.requests if len(r.alternatives) == 1]
        simple = (
            alts
            and len(alts) == sum(len(c.requests) for c in self.claims)
            and not any(c.constraints for c in self.claims)
            and all(a.mode == "ExactCount" for a in alts)
            and len({(a.class_selectors, a.selectors) for a in alts}) == 1
        )
        if simple:
            self.count_only = (alts[0], sum(a.count for a in alts))

    def free_counts(self, index: Mapping[str, int], size: int) -> np.ndarray:
        """Free matching devices per node slot (``index``: node name -> slot), for the ``count_only`` shape with
        node-local devices only: one pass over the nodes with devices and one over the allocated devices."""
        assert self.count_only is not None
        alt, _ = self.count_only
        key = (alt.class_selectors, alt.selectors)
        found = self.pools.match_counts.get(key)
        if found is None:
            per_node: dict[str, int] = {}
            node_of: dict[DeviceId, str] = {}  # matching devices only
            for name, cands in self.pools.by_node.items():
                matching = [d for d in cands if self._matches(alt, d)]
                self.pools.matching[(key, name)] = matching
                if matching:
                    per_node[name] = len(matching)
                    node_of.update((d.id, name) for d in matching)
            found = self.pools.match_counts[key] = (per_node, node_of)
        per_node, node_of = found
        counts = np.zeros(size, dtype=np.int64)
        for name, n in per_node.items():
            slot = index.get(name)
            if slot is not None:
                counts[slot] = n
        for dev in self.allocated:
            owner = node_of.get(dev)
            if owner is not None:
                taken = index.get(owner)
                if taken is not None:
                    counts[taken] -= 1
        return counts

    def fits(self, node_name: str, node_matches: NodeMatcher) -> bool:
        """Whether ``allocate`` would succeed, by counting (only when ``count_only`` is set)."""
        assert self.count_only is not None
        alt, need = self.count_only
        if self.pools.shared:
            devices = [d for d in self.pools.for_node(node_name, node_matches) if self._matches(alt, d)]
        else:
            key = ((alt.class_selectors, alt.selectors), node_name)
            found = self.pools.matching.get(key)
            if found is None:
                found = [d for d in self.pools.by_node.get(node_name, ()) if self._matches(alt, d)]
                self.pools.matching[key] = found
            devices = found
        if len(devices) < need:
            return False
        allocated = self.allocated
        if not allocated:
            return True
        free = 0
        for d in devices:
            if d.id not in allocated:
                free += 1
                if free >= need:
                    return True
        return False

    def _matches(self, alt: _Alternative, cand: Candidate) -> bool:
        key = (alt.class_selectors, alt.selectors, cand.id)
        found = self._match.get(key)
        if found is None:
            found = True
            for i, expr in enumerate(alt.class_selectors):
                if not self._eval(expr, cand, f"class {alt.class_name}: selector #{i}"):
                    found = False
                    break
            else:
                for i, expr in enumerate(alt.selectors):
                    if not self._eval(expr, cand, f"claim {alt.claim}: selector #{i}"):
                        found = False
                        break
            self._match[key] = found
        return found

    @staticmethod
    def _eval(expr: str, cand: Candidate, where: str) -> bool:
        try:
            return compile_selector(expr).matches(cand.view)
        except SelectorError as e:
            raise AllocationError(f"{where}: CEL runtime error: {e}") from None

    def allocate(
        self, node_name: str, node_matches: NodeMatcher, timeout: float = FILTER_TIMEOUT
    ) -> Allocation | None:
        """The allocation of every claim on ``node_name``, or None when they cannot all be satisfied; raises
        ``AllocationTimeout`` when the search takes longer than ``timeout`` seconds (0: no limit)."""
        self._deadline = time.monotonic() + timeout if timeout > 0 else None
        self._steps = 0
        devices = self.pools.for_node(node_name, node_matches)
        picked: dict[DeviceId, Candidate] = {}
        # per claim: list of (alternative, candidates chosen)
        chosen: list[list[tuple[_Alternative, list[Candidate]]]] = [[] for _ in self.claims]
        if not self._search(0, 0, devices, picked, chosen):
            return None
        score = 0
        for claim, picks in zip(self.claims, chosen, strict=True):
            for req, (alt, _) in zip(claim.requests, picks, strict=True):
                if req.first_available:
                    score += MAX_FIRST_AVAILABLE - alt.index
        return Allocation(self, node_name, chosen, score)

    def _search(
        self,
        ci: int,
        ri: int,
        devices: list[Candidate],
        picked: dict[DeviceId, Candidate],
        chosen: list[list[tuple[_Alternative, list[Candidate]]]],
    ) -> bool:
        if ci == len(self.claims):
            return True
        claim = self.claims[ci]
        if ri == len(claim.requests):
            return self._search(ci + 1, 0, devices, picked, chosen)
        req = claim.requests[ri]
        for alt in req.alternatives:
            usable = [d for d in devices if self._matches(alt, d)]
            if alt.mode == "All":
                if not usable or any(d.id in self.allocated or d.id in picked for d in usable):
                    continue
                if not self._fits_constraints(claim, chosen[ci], alt, usable):
                    continue
                if self._take(ci, ri, alt, usable, devices, picked, chosen):
                    return True
                continue
            free = [d for d in usable if d.id not in self.allocated and d.id not in picked]
            if len(free) < alt.count:
                continue
            if self._choose(ci, ri, alt, free, 0, [], devices, picked, chosen):
                return True
        return False

    def _choose(
        self,
        ci: int,
        ri: int,
        alt: _Alternative,
        free: list[Candidate],
        start: int,
        taken: list[Candidate],
        devices: list[Candidate],
        picked: dict[DeviceId, Candidate],
        chosen: list[list[tuple[_Alternative, list[Candidate]]]],
    ) -> bool:
        if len(taken) == alt.count:
            return self._take(ci, ri, alt, list(taken), devices, picked, chosen)
        self._steps += 1
        if self._deadline is not None and not self._steps & 1023 and time.monotonic() > self._deadline:
            raise AllocationTimeout("timed out trying to allocate devices")
        claim = self.claims[ci]
        for i in range(start, len(free) - (alt.count - len(taken)) + 1):
            cand = free[i]
            if not self._fits_constraints(claim, chosen[ci], alt, [*taken, cand]):
                continue
            taken.append(cand)
            if self._choose(ci, ri, alt, free, i + 1, taken, devices, picked, chosen):
                return True
            taken.pop()
        return False

    def _take(
        self,
        ci: int,
        ri: int,
        alt: _Alternative,
        cands: list[Candidate],
        devices: list[Candidate],
        picked: dict[DeviceId, Candidate],
        chosen: list[list[tuple[_Alternative, list[Candidate]]]],
    ) -> bool:
        for d in cands:
            picked[d.id] = d
        chosen[ci].append((alt, cands))
        if self._search(ci, ri + 1, devices, picked, chosen):
            return True
        chosen[ci].pop()
        for d in cands:
            del picked[d.id]
        return False

    @staticmethod
    def _fits_constraints(
        claim: _Claim,
        so_far: list[tuple[_Alternative, list[Candidate]]],
        alt: _Alternative,
        new: list[Candidate],
    ) -> bool:
        parent = alt.name.split("/", 1)[0]
        for names, attr in claim.constraints:
            if names is not None and alt.name not in names and parent not in names:
                continue
            value: Any = None
            have = False
            for prev_alt, prev in so_far:
                prev_parent = prev_alt.name.split("/", 1)[0]
                if names is not None and prev_alt.name not in names and prev_parent not in names:
                    continue
                for d in prev:
                    value, have = d.view.attribute(attr), True
                    break
                if have:
                    break
            for d in new:
                v = d.view.attribute(attr)
                if v is None:
                    return False
                if not have:
                    value, have = v, True
                elif v != value:
                    return False
        return True

    def _result(
        self, claim: _Claim, picks: list[tuple[_Alternative, list[Candidate]]], node_name: str
    ) -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        node_local = False
        selector: Mapping[str, Any] | None = None
        for alt, cands in picks:
            for d in cands:
                entry: dict[str, Any] = {
                    "request": alt.name,
                    "driver": d.id[0],
                    "pool": d.id[1],
                    "device": d.id[2],
                }
                if alt.admin_access:
                    entry["adminAccess"] = True
                results.append(entry)
                if d.node_name:
                    node_local = True
                elif d.node_selector is not None and not d.all_nodes and selector is None:
                    selector = d.node_selector
        config: list[dict[str, Any]] = []
        for alt, _ in picks:
            for cfg in claim.class_configs.get(alt.class_name, ()):
                config.append({"source": "FromClass", "requests": [alt.name], **dict(cfg)})
        for cfg in ((claim.claim.get("spec") or {}).get("devices") or {}).get("config") or ():
            config.append({"source": "FromClaim", **dict(cfg)})
        devices: dict[str, Any] = {"results": results}
        if config:
            devices["config"] = config
        allocation: dict[str, Any] = {"devices": devices}
        if node_local:
            allocation["nodeSelector"] = node_name_selector(node_name)
        elif selector is not None:
            allocation["nodeSelector"] = dict(selector)
        return allocation


def node_name_selector(node_name: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }


__all__ = [
    "FILTER_TIMEOUT",
    "MAX_FIRST_AVAILABLE",
    "Allocation",
    "AllocationError",
    "AllocationTimeout",
    "Allocator",
    "Candidate",
    "DeviceId",
    "Pools",
    "device_id",
    "node_name_selector",
    "parse_claim",
]
