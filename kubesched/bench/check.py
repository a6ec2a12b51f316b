"""Does a run's result hold? Replays the bindings and deletions in the order the API saw them.

Written independently of the scheduler's plugins (its own quantity parser and matchers) so that a bug there
is caught rather than repeated. At each binding of pod P to node N, with the pods bound before it:

- N exists; P's requests fit N's allocatable (cpu, memory, ephemeral-storage, pod count) with the pods on N;
- P's ``nodeSelector`` and required node affinity match N's labels; N's NoSchedule/NoExecute taints are
  tolerated;
- each DoNotSchedule topology spread constraint holds: pods of P's namespace matching the selector, per domain
  of the eligible nodes (those matching P's node selector/affinity), give ``count(N's domain) + self - min``
  at most ``maxSkew``;
- required pod affinity: a matching pod is in N's domain, or none exists anywhere and P matches its own term;
  required pod anti-affinity: no matching pod in N's domain, and no bound pod whose anti-affinity P matches.

At the end: every measured pod is bound, exactly once; pods that fit nowhere stay unbound.
``namespaceSelector`` in pod affinity terms is not modelled (the workloads use ``namespaces``).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

Obj = dict[str, Any]

MAX_PROBLEMS = 20
_SUFFIXES = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
CHECKED_RESOURCES = ("cpu", "memory", "ephemeral-storage")


_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)


def parse_quantity(value: str | int | float) -> Fraction:
    """A Kubernetes quantity (``100m``, ``500Mi``, ``4``, ``1e3``) as an exact number."""
    m = _QUANTITY.match(str(value).strip())
    if m is None:
        raise ValueError(f"invalid quantity {value!r}")
    number, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIXES[suffix]


@lru_cache(maxsize=1024)
def _selector(canonical: str) -> Any:
    return json.loads(canonical)


def amount(resource: str, value: str | int | float) -> int:
    """cpu in millicores, everything else in units; rounded up as the API does."""
    q = parse_quantity(value)
    if resource == "cpu":
        q *= 1000
    return math.ceil(q)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """Sum of the containers' requests, raised to the largest init container's; plus overhead."""
    spec = pod.get("spec") or {}
    total: Counter[str] = Counter()
    for c in spec.get("containers") or ():
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] += amount(name, q)
    for c in spec.get("initContainers") or ():
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total[name], amount(name, q))
    for name, q in (spec.get("overhead") or {}).items():
        total[name] += amount(name, q)
    return dict(total)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector; ``None`` matches nothing, ``{}`` everything."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(_expression_matches(e, labels) for e in selector.get("matchExpressions") or ())


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key") or "", expr.get("operator"), list(expr.get("values") or ())
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_matches(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """``nodeSelector`` and required node affinity."""
    spec = pod.get("spec") or {}
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    fields = {"metadata.name": meta.get("name") or ""}
    for term in required.get("nodeSelectorTerms") or ():
        exprs = term.get("matchExpressions") or ()
        field_exprs = term.get("matchFields") or ()
        if not exprs and not field_exprs:
            continue  # an empty term matches nothing
        if all(_expression_matches(e, labels) for e in exprs) and all(
            _expression_matches(e, fields) for e in field_exprs
        ):
            return True
    return False


def taints_tolerated(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations") or ()
    for taint in (node.get("spec") or {}).get("taints") or ():
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return False
    return True


def _tolerates(tol: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if tol.get("effect") and tol.get("effect") != taint.get("effect"):
        return False
    if tol.get("operator") == "Exists":
        return not tol.get("key") or tol.get("key") == taint.get("key")
    return tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or "")


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class _Term:
    """A required pod (anti-)affinity term with its namespaces resolved."""

    namespaces: frozenset[str]
    selector: str  # canonical JSON of the LabelSelector ("null" for none)
    topology_key: str

    def matches(self, pod: _Bound) -> bool:
        return pod.namespace in self.namespaces and selector_matches(_selector(self.selector), pod.labels)


@dataclass
class _Bound:
    key: str
    namespace: str
    labels: Mapping[str, str]
    node: str
    requests: dict[str, int]
    pod: Obj


@dataclass
class CheckResult:
    passed: bool
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    bound: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "problemCount": self.problem_count, "problems": self.problems}


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


class PlacementChecker:
    """Feed ``bound``/``deleted`` in API order, then ``finish``."""

    def __init__(self, nodes: Iterable[Obj]) -> None:
        self.nodes: dict[str, Obj] = {(n.get("metadata") or {}).get("name") or "": n for n in nodes}
        self._labels = {name: (n.get("metadata") or {}).get("labels") or {} for name, n in self.nodes.items()}
        self._alloc: dict[str, dict[str, int]] = {}
        for name, n in self.nodes.items():
            alloc = (n.get("status") or {}).get("allocatable") or {}
            self._alloc[name] = {r: amount(r, q) for r, q in alloc.items()}
        self._used: dict[str, Counter[str]] = {name: Counter() for name in self.nodes}
        self._bound: dict[str, _Bound] = {}
        self.binds: Counter[str] = Counter()
        self._problems: list[str] = []
        self.problem_count = 0
        # term -> domain -> number of bound pods matching the term (kept for every term seen)
        self._term_counts: dict[_Term, Counter[str]] = {}
        # anti-affinity term -> domain -> number of bound pods owning that term
        self._anti_owners: dict[_Term, Counter[str]] = {}
        # (namespace, selector, topology key) -> domain -> matching bound pods
        self._spread_counts: dict[tuple[str, str, str], Counter[str]] = {}
        self._eligible_domains: dict[tuple[str, str], set[str]] = {}

    # --- problems -------------------------------------------------------------------------------------------

    def problem(self, message: str) -> None:
        self.problem_count += 1
        if len(self._problems) < MAX_PROBLEMS:
            self._problems.append(message)

    # --- events ---------------------------------------------------------------------------------------------

    def bound(self, pod: Obj) -> None:
        """``pod`` (with ``spec.nodeName``) was bound; check it against the pods bound before it."""
        key = pod_key(pod)
        self.binds[key] += 1
        if key in self._bound:
            self.problem(f"{key} bound again (to {pod['spec'].get('nodeName')})")
            return
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName") or ""
        b = _Bound(key, meta.get("namespace") or "", meta.get("labels") or {}, node, pod_requests(pod), pod)
        if node not in self.nodes:
            self.problem(f"{key} bound to unknown node {node!r}")
            return
        self._check_resources(b)
        if not node_matches(pod, self.nodes[node]):
            self.problem(f"{key} on {node}: node selector/affinity not matched")
        if not taints_tolerated(pod, self.nodes[node]):
            self.problem(f"{key} on {node}: untolerated taint")
        self._check_spread(b)
        self._check_pod_affinity(b)
        self._add(b)

    def deleted(self, pod: Obj) -> None:
        b = self._bound.pop(pod_key(pod), None)
        if b is None:
            return
        used = self._used[b.node]
        used.subtract(b.requests)
        used["pods"] -= 1
        self._count(b, -1)

    def finish(self, measured: Iterable[str], never_bound: Iterable[str] = ()) -> CheckResult:
        """``measured``: keys of pods that must be bound exactly once; ``never_bound``: keys that fit nowhere."""
        missing = 0
        for key in measured:
            n = self.binds.get(key, 0)
            if n == 0:
                missing += 1
                if missing <= 5:
                    self.problem(f"{key} was never bound")
            elif n > 1:
                self.problem(f"{key} bound {n} times")
        if missing > 5:
            self.problem(f"... {missing} measured pods were never bound in all")
        for key in never_bound:
            if self.binds.get(key):
                self.problem(f"{key} fits no node but was bound")
        return CheckResult(self.problem_count == 0, list(self._problems), self.problem_count, len(self.binds))

    # --- checks ---------------------------------------------------------------------------------------------

    def _check_resources(self, b: _Bound) -> None:
        alloc = self._alloc[b.node]
        used = self._used[b.node]
        if used["pods"] + 1 > alloc.get("pods", 0):
            self.problem(f"{b.key} on {b.node}: too many pods ({used['pods'] + 1} > {alloc.get('pods', 0)})")
        for r, want in b.requests.items():
            if want <= 0:
                continue
            if r in CHECKED_RESOURCES or r in alloc:
                have = alloc.get(r, 0)
                if used[r] + want > have:
                    self.problem(f"{b.key} on {b.node}: {r} {used[r]} + {want} > allocatable {have}")

    def _domain(self, node: str, key: str) -> str | None:
        return self._labels.get(node, {}).get(key)

    def _check_spread(self, b: _Bound) -> None:
        for c in (b.pod.get("spec") or {}).get("topologySpreadConstraints") or ():
            if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
                continue
            tkey = c.get("topologyKey") or ""
            domain = self._domain(b.node, tkey)
            if domain is None:
                self.problem(f"{b.key} on {b.node}: node lacks topology key {tkey}")
                continue
            selector = c.get("labelSelector")
            counts = self._spread_counter(b.namespace, selector, tkey)
            eligible = self._eligible(b.pod, tkey)
            low = min((counts.get(d, 0) for d in eligible), default=0)
            self_match = 1 if selector_matches(selector, b.labels) else 0
            skew = counts.get(domain, 0) + self_match - low
            if skew > int(c.get("maxSkew") or 1):
                self.problem(
                    f"{b.key} on {b.node}: skew {skew} over {tkey} exceeds maxSkew {c.get('maxSkew')}"
                )

    def _spread_counter(self, namespace: str, selector: Any, tkey: str) -> Counter[str]:
        ck = (namespace, _canonical(selector), tkey)
        counts = self._spread_counts.get(ck)
        if counts is None:
            counts = Counter()
            for other in self._bound.values():
                if other.namespace == namespace and selector_matches(selector, other.labels):
                    d = self._domain(other.node, tkey)
                    if d is not None:
                        counts[d] += 1
            self._spread_counts[ck] = counts
        return counts

    def _eligible(self, pod: Obj, tkey: str) -> set[str]:
        spec = pod.get("spec") or {}
        sig = _canonical([spec.get("nodeSelector"), (spec.get("affinity") or {}).get("nodeAffinity")])
        ek = (sig, tkey)
        domains = self._eligible_domains.get(ek)
        if domains is None:
            domains = {
                self._labels[name][tkey]
                for name, node in self.nodes.items()
                if tkey in self._labels[name] and node_matches(pod, node)
            }
            self._eligible_domains[ek] = domains
        return domains

    def _terms(self, b: _Bound, kind: str) -> list[_Term]:
        aff = ((b.pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
        out = []
        for t in aff.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
            namespaces = frozenset(t.get("namespaces") or ()) or frozenset({b.namespace})
            out.append(_Term(namespaces, _canonical(t.get("labelSelector")), t.get("topologyKey") or ""))
        return out

    def _term_counter(self, term: _Term) -> Counter[str]:
        counts = self._term_counts.get(term)
        if counts is None:
            counts = Counter()
            for other in self._bound.values():
                if term.matches(other):
                    d = self._domain(other.node, term.topology_key)
                    if d is not None:
                        counts[d] += 1
            self._term_counts[term] = counts
        return counts

    def _check_pod_affinity(self, b: _Bound) -> None:
        for term in self._terms(b, "podAffinity"):
            counts = self._term_counter(term)
            domain = self._domain(b.node, term.topology_key)
            if domain is not None and counts.get(domain, 0) > 0:
                continue
            if sum(counts.values()) == 0 and term.matches(b):
                continue  # the first pod of a group that selects itself
            self.problem(f"{b.key} on {b.node}: required pod affinity ({term.topology_key}) not satisfied")
        for term in self._terms(b, "podAntiAffinity"):
            domain = self._domain(b.node, term.topology_key)
            if domain is not None and self._term_counter(term).get(domain, 0) > 0:
                self.problem(
                    f"{b.key} on {b.node}: required pod anti-affinity ({term.topology_key}) violated"
                )
        for term, owners in self._anti_owners.items():
            domain = self._domain(b.node, term.topology_key)
            if domain is not None and owners.get(domain, 0) > 0 and term.matches(b):
                self.problem(f"{b.key} on {b.node}: violates the anti-affinity of a pod already there")

    # --- bookkeeping ----------------------------------------------------------------------------------------

    def _add(self, b: _Bound) -> None:
        self._bound[b.key] = b
        used = self._used[b.node]
        used.update(b.requests)
        used["pods"] += 1
        self._count(b, +1)

    def _count(self, b: _Bound, delta: int) -> None:
        for term, counts in self._term_counts.items():
            if term.matches(b):
                d = self._domain(b.node, term.topology_key)
                if d is not None:
                    counts[d] += delta
        for (namespace, selector, tkey), counts in self._spread_counts.items():
            if namespace == b.namespace and selector_matches(_selector(selector), b.labels):
                d = self._domain(b.node, tkey)
                if d is not None:
                    counts[d] += delta
        for term in self._terms(b, "podAntiAffinity"):
            d = self._domain(b.node, term.topology_key)
            if d is not None:
                self._anti_owners.setdefault(term, Counter())[d] += delta
