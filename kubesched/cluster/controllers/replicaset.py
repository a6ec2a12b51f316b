"""The ReplicaSet controller (and, with another kind descriptor, the ReplicationController manager).

Keeps ``spec.replicas`` active pods per ReplicaSet, as upstream's ``pkg/controller/replicaset`` does:

- claims pods: owned ones that still match the selector stay, owned ones that stopped matching are released
  (their controller reference removed), orphans that match are adopted (a controller reference added);
- creates missing pods from the template through the ordinary API path (defaults, validation, admission), named
  by ``generateName: <rs>-``, in slow-start batches (1, 2, 4, ...) so a failing create stops early;
- deletes surplus pods, least valuable first (unscheduled, pending, not ready, low deletion cost, doubled up on a
  node, ready for less time, restarted more, newest);
- records expectations before each create/delete, and manages replicas only once the last ones were observed;
- writes status: replicas, fullyLabeledReplicas, readyReplicas, availableReplicas (Ready for minReadySeconds),
  observedGeneration, and a ReplicaFailure condition while creates or deletes fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.apimachinery.labels import LabelSelector, SelectorError
from kubesched.cluster import errors
from kubesched.cluster.controllers.base import (
    FIELD_MANAGER,
    Clock,
    Controller,
    Expectations,
    Key,
    Obj,
    controller_ref,
    copy_json,
    get_condition,
    is_pod_active,
    is_pod_available,
    is_pod_ready,
    key_of,
    meta_of,
    new_controller_ref,
    now_text,
    only_status_changed,
    parse_time,
    pod_ready_condition,
    with_owner_refs,
)
from kubesched.cluster.controllers.podindex import PodIndex
from kubesched.cluster.storage.interface import Stored

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

BURST_REPLICAS = 500  # creates or deletes per sync, as upstream's burstReplicas
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def _rs_selector(obj: Obj) -> LabelSelector:
    return LabelSelector.from_dict((obj.get("spec") or {}).get("selector"))


def _rc_selector(obj: Obj) -> LabelSelector:
    # A ReplicationController without a selector selects its template's labels (upstream defaulting).
    spec = obj.get("spec") or {}
    sel = spec.get("selector") or ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return LabelSelector.from_set(sel) if sel else LabelSelector(nothing=True)


@dataclass(frozen=True)
class ReplicatedKind:
    """What differs between ReplicaSets and ReplicationControllers."""

    group: str
    version: str
    plural: str
    kind: str
    controller_name: str
    selector_of: Callable[[Obj], LabelSelector]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


REPLICASET = ReplicatedKind("apps", "v1", "replicasets", "ReplicaSet", "replicaset-controller", _rs_selector)
REPLICATION_CONTROLLER = ReplicatedKind(
    "", "v1", "replicationcontrollers", "ReplicationController", "replication-controller", _rc_selector
)


@dataclass
class _Cached:
    uid: str
    selector: LabelSelector
    min_ready_seconds: int
    owner_uid: str  # the controller of this ReplicaSet (a Deployment), "" if none


def selector_of(kind: ReplicatedKind, obj: Obj) -> LabelSelector:
    try:
        return kind.selector_of(obj)
    except SelectorError:
        return LabelSelector(nothing=True)


class ReplicaSetController(Controller):
    def __init__(
        self,
        api: ClusterApi,
        clock: Clock,
        pods: PodIndex,
        kind: ReplicatedKind = REPLICASET,
        *,
        burst: int = BURST_REPLICAS,
    ) -> None:
        self.name = kind.controller_name
        super().__init__(api, clock)
        self.kind = kind
        self.pods = pods
        self.burst = burst
        self.rtype = api.rtype(kind.group, kind.version, kind.plural)
        self.pod_type = api.rtype("", "v1", "pods")
        self.expectations = Expectations(clock)
        self._cache: dict[str, dict[str, _Cached]] = {}  # namespace -> name -> what events need
        self._orphans: dict[Key, set[Key]] = {}  # owner -> orphan pods seen matching it since its last sync
        self._needs_scan: set[Key] = set()  # owners whose namespace must be searched for orphans

    # -- events -------------------------------------------------------------------------------------------------

    def start(self) -> None:
        items, _ = self.api.store.list(self.rtype.storage_key)
        for st in items:
            self.on_owner("ADDED", st.obj, None)

    def on_owner(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        if new is None:
            assert old is not None
            ns, name = key_of(old)
            ns_cache = self._cache.get(ns)
            if ns_cache is not None and ns_cache.pop(name, None) is not None:
                self.pods.selecting[ns] -= 1
                if not ns_cache:
                    del self._cache[ns]
                    if self.pods.selecting[ns] <= 0:
                        del self.pods.selecting[ns]
            self.expectations.forget((ns, name))
            self._orphans.pop((ns, name), None)
            self._needs_scan.discard((ns, name))
            return
        if only_status_changed(new, old):
            return  # our own status write: nothing to reconcile
        ns, name = key_of(new)
        meta = meta_of(new)
        sel = selector_of(self.kind, new)
        ns_cache = self._cache.setdefault(ns, {})
        prev = ns_cache.get(name)
        if prev is None:
            self.pods.selecting[ns] += 1
        if prev is None or prev.uid != meta.get("uid") or prev.selector != sel:
            self._needs_scan.add((ns, name))
        owner = controller_ref(new)
        ns_cache[name] = _Cached(
            str(meta.get("uid")),
            sel,
            int((new.get("spec") or {}).get("minReadySeconds") or 0),
            str(owner.get("uid")) if owner else "",
        )
        self.queue.add((ns, name))

    def _resolve(self, namespace: str, ref: Obj | None) -> Key | None:
        """The owner key a controller reference points at, if it is one of ours and still the same object."""
        if ref is None or ref.get("kind") != self.kind.kind:
            return None
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        if group != self.kind.group:
            return None
        name = str(ref.get("name", ""))
        cached = self._cache.get(namespace, {}).get(name)
        if cached is None or cached.uid != ref.get("uid"):
            return None
        return (namespace, name)

    def on_pod(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        ns = meta_of(pod).get("namespace", "")
        pod_key = key_of(pod)
        new_owner = self._resolve(ns, controller_ref(new)) if new is not None else None
        old_owner = self._resolve(ns, controller_ref(old)) if old is not None else None
        if new is None:  # deleted
            if old_owner is not None:
                self.expectations.deletion_observed(old_owner, pod_key)
                self.queue.add(old_owner)
            return
        if old_owner is not None and old_owner != new_owner:
            self.queue.add(old_owner)
        if new_owner is not None:
            if old is None:
                self.expectations.creation_observed(new_owner)
            elif meta_of(new).get("deletionTimestamp") and not meta_of(old).get("deletionTimestamp"):
                # A graceful deletion started: for the controller the pod is gone already.
                self.expectations.deletion_observed(new_owner, pod_key)
            self.queue.add(new_owner)
            cached = self._cache[ns][new_owner[1]]
            if cached.min_ready_seconds and old is not None and is_pod_ready(new) and not is_pod_ready(old):
                # Becomes available later: look again once minReadySeconds have passed.
                self.queue.add_after(new_owner, cached.min_ready_seconds + 0.001)
            return
        if controller_ref(new) is None and ns in self._cache and is_pod_active(new):
            labels = meta_of(new).get("labels")
            for name, cached in self._cache[ns].items():
                if cached.selector.matches(labels):
                    self._orphans.setdefault((ns, name), set()).add(pod_key)
                    self.queue.add((ns, name))

    # -- sync ---------------------------------------------------------------------------------------------------

    def sync(self, key: Key) -> None:
        st = self.api.lookup(self.rtype, key[0], key[1])
        if st is None:
            self.expectations.forget(key)
            return
        rs = st.obj
        needs_sync = self.expectations.satisfied(key)
        selector = selector_of(self.kind, rs)
        active = self._claim_pods(rs, selector)
        manage_error: errors.ApiError | None = None
        deleting = bool(meta_of(rs).get("deletionTimestamp"))
        if needs_sync and not deleting:
            try:
                self._manage_replicas(rs, key, active)
            except errors.ApiError as e:
                manage_error = e
        # The pods as they are now (creates and deletes above changed the index).
        uid = str(meta_of(rs).get("uid"))
        active = [p for p in self.pods.owned_by(uid).values() if is_pod_active(p)]
        status = self._status(rs, active, manage_error)
        self._write_status(st, status)
        if manage_error is not None:
            raise manage_error
        min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
        spec_replicas = _replicas(rs)
        if (
            min_ready > 0
            and status["readyReplicas"] == spec_replicas
            and status["availableReplicas"] != spec_replicas
        ):
            self.queue.add_after(key, min_ready)

    def _claim_pods(self, rs: Obj, selector: LabelSelector) -> list[Obj]:
        """Owned active pods after adopting matching orphans and releasing owned pods that stopped matching."""
        meta = meta_of(rs)
        ns, uid = meta.get("namespace", ""), str(meta.get("uid"))
        key = (ns, str(meta.get("name")))
        deleting = bool(meta.get("deletionTimestamp"))
        claimed: list[Obj] = []
        for pod in list(self.pods.owned_by(uid).values()):
            if not is_pod_active(pod):
                continue
            if selector.matches(meta_of(pod).get("labels")):
                claimed.append(pod)
            elif not deleting:
                self._set_owner(pod, rs, adopt=False)
        if key in self._needs_scan:
            self._needs_scan.discard(key)
            self._orphans.pop(key, None)
            items, _ = self.api.store.list(
                self.pod_type.storage_key, ns, lambda o: selector.matches(meta_of(o).get("labels"))
            )
            orphans = [s.obj for s in items]
        else:
            orphans = []
            for pod_key in self._orphans.pop(key, ()):
                cur = self.api.store.get(self.pod_type.storage_key, pod_key)
                if cur is not None:
                    orphans.append(cur.obj)
        if deleting:
            return claimed
        for pod in orphans:
            if (
                controller_ref(pod) is None
                and is_pod_active(pod)
                and selector.matches(meta_of(pod).get("labels"))
            ):
                adopted = self._set_owner(pod, rs, adopt=True)
                if adopted is not None:
                    claimed.append(adopted)
        return claimed

    def _set_owner(self, pod: Obj, rs: Obj, *, adopt: bool) -> Obj | None:
        """Adopt (add our controller reference) or release (remove it); the pod as stored after, None if gone."""
        pkey = key_of(pod)
        cur = self.api.store.get(self.pod_type.storage_key, pkey)
        if cur is None:
            return None
        uid = meta_of(rs).get("uid")
        refs = [r for r in meta_of(cur.obj).get("ownerReferences") or () if r.get("uid") != uid]
        if adopt:
            if controller_ref(cur.obj) is not None:
                return None  # someone else adopted it meanwhile
            refs.append(new_controller_ref(rs))
        new = with_owner_refs(cur.obj, refs)
        try:
            st, _ = self.api.update(self.pod_type, new, pkey[0], pkey[1], field_manager=FIELD_MANAGER)
        except errors.ApiError as e:
            if e.code == 404:
                return None
            raise
        return st.obj

    def _manage_replicas(self, rs: Obj, key: Key, active: list[Obj]) -> None:
        diff = len(active) - _replicas(rs)
        if diff < 0:
            count = min(-diff, self.burst)
            self.expectations.expect_creations(key, count)
            created, error = self._slow_start(count, lambda: self._create_pod(rs))
            for _ in range(count - created):
                self.expectations.creation_observed(key)  # never created: nothing to wait for
            if error is not None:
                raise error
        elif diff > 0:
            count = min(diff, self.burst)
            victims = self._pods_to_delete(rs, active, count)
            self.expectations.expect_deletions(key, [key_of(p) for p in victims])
            first_error: errors.ApiError | None = None
            for pod in victims:
                pkey = key_of(pod)
                try:
                    self.api.delete(self.pod_type, pkey[0], pkey[1])
                except errors.ApiError as e:
                    self.expectations.deletion_observed(key, pkey)
                    if e.code != 404:
                        self.events.emit(rs, "Warning", "FailedDelete", f"Error deleting: {e}")
                        first_error = first_error or e
                    continue
                self.events.emit(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {pkey[1]}")
            if first_error is not None:
                raise first_error

    @staticmethod
    def _slow_start(count: int, create: Callable[[], None]) -> tuple[int, errors.ApiError | None]:
        """Create in batches of 1, 2, 4, ...; stop after the first batch with an error. (successes, error)"""
        done, batch = 0, 1
        while done < count:
            size = min(batch, count - done)
            error: errors.ApiError | None = None
            ok = 0
            for _ in range(size):
                try:
                    create()
                    ok += 1
                except errors.ApiError as e:
                    error = error or e
            done += ok
            if error is not None:
                return done, error
            batch *= 2
        return done, None

    def _create_pod(self, rs: Obj) -> None:
        meta = meta_of(rs)
        template = copy_json((rs.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        pmeta: Obj = {"generateName": f"{meta.get('name')}-", "ownerReferences": [new_controller_ref(rs)]}
        for field_name in ("labels", "annotations", "finalizers"):
            if tmeta.get(field_name):
                pmeta[field_name] = tmeta[field_name]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pmeta, "spec": template.get("spec") or {}}
        try:
            st = self.api.create(self.pod_type, body, meta.get("namespace"), field_manager=FIELD_MANAGER)
        except errors.ApiError as e:
            self.events.emit(rs, "Warning", "FailedCreate", f"Error creating: {e}")
            raise
        self.events.emit(rs, "Normal", "SuccessfulCreate", f"Created pod: {meta_of(st.obj).get('name')}")

    def _pods_to_delete(self, rs: Obj, active: list[Obj], count: int) -> list[Obj]:
        """The ``count`` least valuable pods, ranked as upstream's ``ActivePodsWithRanks`` ranks them."""
        if count >= len(active):
            return list(active)
        # Pods of sibling ReplicaSets (same Deployment) count when judging who is doubled up on a node.
        ns = meta_of(rs).get("namespace", "")
        own = self._cache.get(ns, {}).get(str(meta_of(rs).get("name")))
        related: list[Obj] = list(active)
        if own is not None and own.owner_uid:
            for cached in self._cache.get(ns, {}).values():
                if cached.owner_uid == own.owner_uid and cached.uid != own.uid:
                    related.extend(p for p in self.pods.owned_by(cached.uid).values() if is_pod_active(p))
        on_node: dict[str, int] = {}
        for p in related:
            node = (p.get("spec") or {}).get("nodeName")
            if node:
                on_node[node] = on_node.get(node, 0) + 1
        now = self.clock.now()

        def rank(p: Obj) -> tuple[int, int, int, int, int, int, int, int, str]:
            spec, status, pmeta = p.get("spec") or {}, p.get("status") or {}, meta_of(p)
            node = spec.get("nodeName") or ""
            ready = is_pod_ready(p)
            try:
                cost = int((pmeta.get("annotations") or {}).get(DELETION_COST, 0))
            except ValueError:
                cost = 0
            ready_for = 0
            if ready:
                cond = pod_ready_condition(p) or {}
                ready_for = _log_bucket(now, parse_time(cond.get("lastTransitionTime")))
            restarts = max(
                (int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or ()), default=0
            )
            return (
                1 if node else 0,
                _PHASE_ORDER.get(str(status.get("phase")), 3),
                1 if ready else 0,
                cost,
                -on_node.get(node, 0) if node else 0,
                ready_for,
                -restarts,
                _log_bucket(now, parse_time(pmeta.get("creationTimestamp"))),
                str(pmeta.get("uid", "")),
            )

        return sorted(active, key=rank)[:count]

    # -- status -------------------------------------------------------------------------------------------------

    def _status(self, rs: Obj, active: list[Obj], manage_error: errors.ApiError | None) -> Obj:
        spec = rs.get("spec") or {}
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        min_ready = int(spec.get("minReadySeconds") or 0)
        now = self.clock.now()
        fully = ready = available = 0
        for p in active:
            labels = meta_of(p).get("labels") or {}
            if all(labels.get(k) == v for k, v in template_labels.items()):
                fully += 1
            if is_pod_ready(p):
                ready += 1
                if is_pod_available(p, min_ready, now):
                    available += 1
        status: Obj = dict(rs.get("status") or {})
        status.update(
            replicas=len(active),
            fullyLabeledReplicas=fully,
            readyReplicas=ready,
            availableReplicas=available,
            observedGeneration=int(meta_of(rs).get("generation") or 1),
        )
        for f in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
            if not status[f]:
                del status[f]  # omitempty in the Go type; replicas is always written
        failure = get_condition(status, "ReplicaFailure")
        if manage_error is not None:
            reason = "FailedCreate" if len(active) < _replicas(rs) else "FailedDelete"
            if (
                failure is None
                or failure.get("reason") != reason
                or failure.get("message") != str(manage_error)
            ):
                others = [c for c in status.get("conditions") or () if c.get("type") != "ReplicaFailure"]
                status["conditions"] = [
                    *others,
                    {
                        "type": "ReplicaFailure",
                        "status": "True",
                        "lastTransitionTime": now_text(self.clock),
                        "reason": reason,
                        "message": str(manage_error),
                    },
                ]
        elif failure is not None:
            conds = [c for c in status.get("conditions") or () if c.get("type") != "ReplicaFailure"]
            if conds:
                status["conditions"] = conds
            else:
                status.pop("conditions", None)
        return status

    def _write_status(self, st: Stored, status: Obj) -> None:
        if st.obj.get("status") == status:
            return
        new = dict(st.obj)
        new["status"] = status
        ns, name = st.key
        self.api.update(self.rtype, new, ns or None, name, subresource="status", field_manager=FIELD_MANAGER)


def _replicas(obj: Obj) -> int:
    r = (obj.get("spec") or {}).get("replicas")
    return 1 if r is None else int(r)


def _log_bucket(now: float, t: float | None) -> int:
    """floor(log2(age in ns)): upstream's logarithmic comparison of ages (newer ranks lower)."""
    if t is None:
        return -1
    age_ns = (now - t) * 1e9
    return int(math.log2(age_ns)) if age_ns >= 1 else 0
