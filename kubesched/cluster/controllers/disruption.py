"""The disruption controller: PodDisruptionBudget status, which preemption and eviction read.

As upstream's ``pkg/controller/disruption``: the pods a budget selects (a missing selector selects none, an empty
one all of its namespace), the expected count (``minAvailable`` as a number: the selected pods; otherwise the
sum of the scales of the pods' controllers — Deployment through its ReplicaSet, ReplicaSet, ReplicationController,
StatefulSet), ``desiredHealthy`` (percentages round up for both fields), ``currentHealthy`` (Ready pods not being
deleted), ``disruptionsAllowed`` and the ``DisruptionAllowed`` condition (``SufficientPods``,
``InsufficientPods``, ``SyncFailed`` when a controller cannot be found).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesched.apimachinery.labels import LabelSelector, SelectorError
from kubesched.cluster import errors
from kubesched.cluster.controllers.base import (
    FIELD_MANAGER,
    Clock,
    Controller,
    Key,
    Obj,
    controller_ref,
    get_condition,
    is_pod_ready,
    key_of,
    meta_of,
    now_text,
    scaled_value,
)
from kubesched.cluster.controllers.podindex import PodIndex
from kubesched.cluster.storage.interface import Stored

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"

# Controller kinds whose scale a budget may count: (apiVersion group, kind) -> (group, version, plural).
_SCALABLE = {
    ("apps", "ReplicaSet"): ("apps", "v1", "replicasets"),
    ("", "ReplicationController"): ("", "v1", "replicationcontrollers"),
    ("apps", "StatefulSet"): ("apps", "v1", "statefulsets"),
    ("apps", "Deployment"): ("apps", "v1", "deployments"),
}


class NoController(Exception):
    pass


def budget_selector(pdb: Obj) -> LabelSelector:
    try:
        return LabelSelector.from_dict((pdb.get("spec") or {}).get("selector"))
    except SelectorError:
        return LabelSelector(nothing=True)


def desired_healthy(spec: Obj, selected: int, expected_scale: int | None) -> tuple[int, int]:
    """(expectedPods, desiredHealthy) for a budget's spec; ``expected_scale`` is the controllers' total scale
    (None: not needed for this spec). Upstream ``getExpectedPodCount``'s arithmetic."""
    if spec.get("maxUnavailable") is not None:
        expected = int(expected_scale or 0)
        unavailable = scaled_value(spec["maxUnavailable"], expected, True)
        return expected, max(0, expected - unavailable)
    min_available = spec.get("minAvailable")
    if isinstance(min_available, int) and not isinstance(min_available, bool):
        return selected, min_available
    if isinstance(min_available, str):
        expected = int(expected_scale or 0)
        return expected, scaled_value(min_available, expected, True)
    return selected, 0


def disruptions_allowed(current: int, desired: int, expected: int) -> int:
    allowed = current - desired
    return 0 if expected <= 0 or allowed <= 0 else allowed


def needs_scale(spec: Obj) -> bool:
    return spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)


class DisruptionController(Controller):
    name = "disruption-controller"

    def __init__(self, api: ClusterApi, clock: Clock, pods: PodIndex) -> None:
        super().__init__(api, clock)
        self.pods = pods
        self.rtype = api.rtype("policy", "v1", "poddisruptionbudgets")
        self.pod_type = api.rtype("", "v1", "pods")
        self._cache: dict[str, dict[str, LabelSelector]] = {}  # namespace -> budget -> selector

    def start(self) -> None:
        items, _ = self.api.store.list(self.rtype.storage_key)
        for st in items:
            self.on_budget("ADDED", st.obj, None)

    def on_budget(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        ns, name = key_of(obj)
        ns_cache = self._cache.setdefault(ns, {})
        if new is None:
            if ns_cache.pop(name, None) is not None:
                self.pods.selecting[ns] -= 1
                if self.pods.selecting[ns] <= 0:
                    del self.pods.selecting[ns]
            if not ns_cache:
                del self._cache[ns]
            return
        if name not in ns_cache:
            self.pods.selecting[ns] += 1
        ns_cache[name] = budget_selector(new)
        self.queue.add((ns, name))

    def on_pod(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        ns = meta_of(pod).get("namespace", "")
        budgets = self._cache.get(ns)
        if not budgets:
            return
        labels = meta_of(new).get("labels") if new is not None else None
        old_labels = meta_of(old).get("labels") if old is not None else None
        for name, sel in budgets.items():
            if (new is not None and sel.matches(labels)) or (old is not None and sel.matches(old_labels)):
                self.queue.add((ns, name))

    # -- sync ---------------------------------------------------------------------------------------------------

    def sync(self, key: Key) -> None:
        st = self.api.lookup(self.rtype, key[0], key[1])
        if st is None:
            return
        pdb = st.obj
        spec = pdb.get("spec") or {}
        selector = budget_selector(pdb)
        items, _ = self.api.store.list(
            self.pod_type.storage_key, key[0], lambda o: selector.matches(meta_of(o).get("labels"))
        )
        pods = [s.obj for s in items]
        try:
            scale = self.expected_scale(key[0], pods) if needs_scale(spec) else None
            expected, desired = desired_healthy(spec, len(pods), scale)
        except (NoController, ValueError) as e:
            if isinstance(e, NoController):
                self.events.emit(
                    pdb,
                    "Warning",
                    "CalculateExpectedPodCountFailed",
                    f"Failed to calculate the number of expected pods: {e}",
                )
            self.fail_safe(st, str(e))
            return
        current = sum(1 for p in pods if not meta_of(p).get("deletionTimestamp") and is_pod_ready(p))
        if self.write_status(st, current, desired, expected) and not pods:
            self.events.emit(pdb, "Normal", "NoPods", "No matching pods found")

    def expected_scale(self, namespace: str, pods: list[Obj]) -> int:
        """The total scale of the controllers of ``pods`` (pods without a controller are ignored)."""
        scales: dict[str, int] = {}  # uid of the controller whose scale counts -> its scale
        seen: set[str] = set()
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None or str(ref.get("uid")) in seen:
                continue
            seen.add(str(ref.get("uid")))
            found = self._scale_of(namespace, ref)
            if found is None:
                raise NoController(f"found no controllers for pod {meta_of(pod).get('name')!r}")
            scales[found[0]] = found[1]
        return sum(scales.values())

    def _scale_of(self, namespace: str, ref: Obj) -> tuple[str, int] | None:
        """(uid of the controller whose scale counts, its spec.replicas), following a ReplicaSet to its Deployment."""
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        where = _SCALABLE.get((group, str(ref.get("kind"))))
        if where is None:
            return None
        st = self.api.lookup(self.api.rtype(*where), namespace, str(ref.get("name")))
        if st is None or meta_of(st.obj).get("uid") != ref.get("uid"):
            return None
        if ref.get("kind") == "ReplicaSet":
            owner = controller_ref(st.obj)
            if owner is not None and owner.get("kind") == "Deployment":
                up = self._scale_of(namespace, owner)
                if up is not None:
                    return up
        replicas = (st.obj.get("spec") or {}).get("replicas")
        return str(meta_of(st.obj).get("uid")), 1 if replicas is None else int(replicas)

    def fail_safe(self, st: Stored, message: str) -> None:
        pdb = st.obj
        status = dict(pdb.get("status") or {})
        status["disruptionsAllowed"] = 0
        for f in ("currentHealthy", "desiredHealthy", "expectedPods"):
            status.setdefault(f, 0)
        self._set_condition(status, "False", SYNC_FAILED, message, int(meta_of(pdb).get("generation") or 1))
        self._store(st, status)

    def write_status(self, st: Stored, current: int, desired: int, expected: int) -> bool:
        pdb = st.obj
        generation = int(meta_of(pdb).get("generation") or 1)
        status = dict(pdb.get("status") or {})
        allowed = disruptions_allowed(current, desired, expected)
        status.update(
            currentHealthy=current,
            desiredHealthy=desired,
            expectedPods=expected,
            disruptionsAllowed=allowed,
            observedGeneration=generation,
        )
        if allowed > 0:
            self._set_condition(status, "True", SUFFICIENT_PODS, "", generation)
        else:
            self._set_condition(status, "False", INSUFFICIENT_PODS, "", generation)
        return self._store(st, status)

    def _set_condition(self, status: Obj, cstatus: str, reason: str, message: str, generation: int) -> None:
        """``meta.SetStatusCondition``: the transition time changes only with the status."""
        current = get_condition(status, "DisruptionAllowed")
        cond = {
            "type": "DisruptionAllowed",
            "status": cstatus,
            "observedGeneration": generation,
            "lastTransitionTime": now_text(self.clock),
            "reason": reason,
            "message": message,
        }
        if current is not None and current.get("status") == cstatus:
            cond["lastTransitionTime"] = current.get("lastTransitionTime", cond["lastTransitionTime"])
        others = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionAllowed"]
        status["conditions"] = [*others, cond]

    def _store(self, st: Stored, status: Obj) -> bool:
        if status == st.obj.get("status"):
            return False
        new = dict(st.obj)
        new["status"] = status
        try:
            self.api.update(
                self.rtype, new, st.key[0], st.key[1], subresource="status", field_manager=FIELD_MANAGER
            )
        except errors.ApiError as e:
            if e.code != 404:
                raise
        return True
