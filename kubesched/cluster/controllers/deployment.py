"""The Deployment controller: ReplicaSets per pod template, rolled as upstream's ``pkg/controller/deployment``.

- The *new* ReplicaSet is the one whose template equals the Deployment's (ignoring the ``pod-template-hash``
  label); it is created as ``<deployment>-<hash>`` when missing, the hash a stable function of the template and
  ``status.collisionCount`` (a name taken by a different template bumps the count and the next sync tries again).
- ``RollingUpdate``: scale the new ReplicaSet up while the total stays within ``replicas + maxSurge`` (surge rounds
  up), scale old ones down while at least ``replicas - maxUnavailable`` stay available (unavailable rounds down;
  both zero means one may be unavailable), unhealthy old pods first. ``Recreate``: old ReplicaSets to zero, wait
  until their pods are gone, then the new one to full size.
- A change of ``spec.replicas`` alone (``kubectl scale``) is a scaling event: during a rollout the change is spread
  over the active ReplicaSets in proportion to their size.
- ``deployment.kubernetes.io/revision`` on ReplicaSets and the Deployment (a rollback bumps the old ReplicaSet's
  revision and keeps its former ones in ``revision-history``), ``desired-replicas``/``max-replicas``, old
  ReplicaSets beyond ``revisionHistoryLimit`` deleted once empty.
- Status as upstream computes it, with the ``Available`` and ``Progressing`` conditions and their reasons, so
  ``kubectl rollout status`` reports ``successfully rolled out``; ``ProgressDeadlineExceeded`` after
  ``progressDeadlineSeconds`` without progress.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import orjson

from kubesched.apimachinery.labels import LabelSelector, SelectorError
from kubesched.cluster import errors
from kubesched.cluster.controllers.base import (
    FIELD_MANAGER,
    Clock,
    Controller,
    Key,
    Obj,
    controller_ref,
    copy_json,
    get_condition,
    key_of,
    meta_of,
    new_controller_ref,
    now_text,
    only_status_changed,
    parse_time,
    remove_condition,
    scaled_value,
    with_owner_refs,
)
from kubesched.cluster.controllers.podindex import PodIndex
from kubesched.cluster.storage.interface import Stored

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# Deployment annotations not copied to its ReplicaSets.
_NOT_COPIED = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        REVISION_HISTORY,
        DESIRED_REPLICAS,
        MAX_REPLICAS,
    }
)
MAX_REVISION_HISTORY_CHARS = 2000
NO_DEADLINE = 2**31 - 1  # progressDeadlineSeconds meaning "never" (math.MaxInt32)

# Condition reasons (upstream's deploymentutil constants).
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
FAILED_RS_CREATE = "ReplicaSetCreateError"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MIN_AVAILABLE = "MinimumReplicasAvailable"
MIN_UNAVAILABLE = "MinimumReplicasUnavailable"

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# -- pure arithmetic (property-tested) ------------------------------------------------------------------------


def compute_hash(template: Obj, collision_count: int | None) -> str:
    """A stable short hash of a pod template (and the collision count, when set), in the alphabet upstream's
    ``rand.SafeEncodeString`` uses so it never spells words. Not upstream's exact bits: the same idea."""
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    if collision_count is not None:
        data += collision_count.to_bytes(4, "little", signed=False)
    value = int.from_bytes(hashlib.blake2b(data, digest_size=4).digest(), "little")
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in str(value))


def _without_hash(template: Obj) -> Obj:
    meta = template.get("metadata") or {}
    labels = meta.get("labels") or {}
    if HASH_LABEL not in labels:
        return template
    out = dict(template)
    out["metadata"] = dict(meta, labels={k: v for k, v in labels.items() if k != HASH_LABEL})
    return out


def equal_ignore_hash(a: Obj, b: Obj) -> bool:
    return _without_hash(a) == _without_hash(b)


def resolve_fenceposts(max_surge: Any, max_unavailable: Any, desired: int) -> tuple[int, int]:
    """(surge, unavailable) for ``desired`` replicas: surge rounds up, unavailable down; never both zero."""
    surge = scaled_value(max_surge, desired, True)
    unavailable = scaled_value(max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def new_rs_replicas_rolling(desired: int, surge: int, total_spec: int, new_spec: int) -> int:
    """The new ReplicaSet's next size during a rolling update (upstream ``NewRSNewReplicas``)."""
    max_total = desired + surge
    if total_spec >= max_total:
        return new_spec
    return new_spec + min(max_total - total_spec, desired - new_spec)


def old_scale_down_budget(
    desired: int, unavailable: int, total_spec: int, new_spec: int, new_available: int
) -> int:
    """How many old replicas may go now (upstream ``reconcileOldReplicaSets``' maxScaledDown)."""
    min_available = desired - unavailable
    new_unavailable = new_spec - new_available
    return total_spec - min_available - new_unavailable


# -- ReplicaSet views ---------------------------------------------------------------------------------------------


class _RS:
    """A ReplicaSet as read for one sync; ``st`` is replaced when the sync writes it."""

    __slots__ = ("st",)

    def __init__(self, st: Stored) -> None:
        self.st = st

    @property
    def obj(self) -> Obj:
        return self.st.obj

    @property
    def name(self) -> str:
        return str(meta_of(self.obj).get("name"))

    @property
    def uid(self) -> str:
        return str(meta_of(self.obj).get("uid"))

    @property
    def replicas(self) -> int:
        r = (self.obj.get("spec") or {}).get("replicas")
        return 1 if r is None else int(r)

    def status(self, field_name: str) -> int:
        return int((self.obj.get("status") or {}).get(field_name) or 0)

    @property
    def annotations(self) -> dict[str, str]:
        return meta_of(self.obj).get("annotations") or {}

    @property
    def revision(self) -> int:
        try:
            return int(self.annotations.get(REVISION, "0"))
        except ValueError:
            return 0

    @property
    def created(self) -> tuple[float, str]:
        return (parse_time(meta_of(self.obj).get("creationTimestamp")) or 0.0, self.name)

    @property
    def template(self) -> Obj:
        return (self.obj.get("spec") or {}).get("template") or {}


def _active(rss: list[_RS]) -> list[_RS]:
    return [rs for rs in rss if rs.replicas > 0]


def _sum(rss: list[_RS], field_name: str | None = None) -> int:
    return sum(rs.replicas if field_name is None else rs.status(field_name) for rs in rss)


# The rollout decisions below read ReplicaSet statuses that may lag their specs by one ReplicaSet sync (a scale
# just written, its pods not yet deleted or created). Upstream takes them as they are; bounding them keeps the
# surge and availability limits true at every moment, not only once the ReplicaSets caught up.


def _pods_upper(rss: list[_RS]) -> int:
    """At most this many pods exist: a ReplicaSet scaled down may not have deleted its surplus yet."""
    return sum(max(rs.replicas, rs.status("replicas")) for rs in rss)


def _available_lower(rs: _RS) -> int:
    """At least this many pods stay available: a ReplicaSet scaled down deletes unavailable pods first."""
    return min(rs.status("availableReplicas"), rs.replicas)


# -- the controller -------------------------------------------------------------------------------------------


class DeploymentController(Controller):
    name = "deployment-controller"

    def __init__(self, api: ClusterApi, clock: Clock, pods: PodIndex) -> None:
        super().__init__(api, clock)
        self.pods = pods
        self.rtype = api.rtype("apps", "v1", "deployments")
        self.rs_type = api.rtype("apps", "v1", "replicasets")
        # ReplicaSet uid -> its Deployment (pod deletions under Recreate).
        self._rs_owner: dict[str, Key] = {}

    # -- events -------------------------------------------------------------------------------------------------

    def start(self) -> None:
        items, _ = self.api.store.list(self.rs_type.storage_key)
        for st in items:
            self.on_replicaset("ADDED", st.obj, None)
        items, _ = self.api.store.list(self.rtype.storage_key)
        for st in items:
            self.queue.add(st.key)

    def on_deployment(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        if new is not None and only_status_changed(new, old):
            return  # our own status write
        self.queue.add(key_of(obj))

    def _owner_key(self, rs: Obj | None) -> Key | None:
        ref = controller_ref(rs) if rs is not None else None
        if ref is None or ref.get("kind") != "Deployment":
            return None
        return (meta_of(rs).get("namespace", ""), str(ref.get("name")))  # type: ignore[arg-type]

    def on_replicaset(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        new_owner, old_owner = self._owner_key(new), self._owner_key(old)
        if old_owner is not None and old_owner != new_owner:
            self.queue.add(old_owner)
        if new is None:
            assert old is not None
            self._rs_owner.pop(str(meta_of(old).get("uid")), None)
        elif new_owner is not None:
            self._rs_owner[str(meta_of(new).get("uid"))] = new_owner
        else:
            self._rs_owner.pop(str(meta_of(new).get("uid")), None)
        if new_owner is not None:
            self.queue.add(new_owner)
            return
        if new is not None and (old is None or meta_of(new).get("labels") != meta_of(old).get("labels")):
            # An orphan: any Deployment whose selector matches may adopt it.
            ns = meta_of(new).get("namespace", "")
            items, _ = self.api.store.list(self.rtype.storage_key, ns)
            for st in items:
                if _selector(st.obj).matches(meta_of(new).get("labels")):
                    self.queue.add(st.key)

    def on_pod(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        # Recreate waits until the old pods are gone: their deletion is what it waits for.
        if new is not None and not (old is not None and meta_of(new).get("deletionTimestamp")):
            return
        pod = new if new is not None else old
        ref = controller_ref(pod) if pod is not None else None
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        owner = self._rs_owner.get(str(ref.get("uid")))
        if owner is not None:
            self.queue.add(owner)

    # -- sync ---------------------------------------------------------------------------------------------------

    def sync(self, key: Key) -> None:
        st = self.api.lookup(self.rtype, key[0], key[1])
        if st is None:
            return
        run = _Sync(self, st)
        run.sync()


def _selector(d: Obj) -> LabelSelector:
    try:
        return LabelSelector.from_dict((d.get("spec") or {}).get("selector"))
    except SelectorError:
        return LabelSelector(nothing=True)


class _Sync:
    """One sync of one Deployment (upstream's syncDeployment and the rollout functions it calls)."""

    def __init__(self, ctl: DeploymentController, st: Stored) -> None:
        self.ctl = ctl
        self.api = ctl.api
        self.clock = ctl.clock
        self.st = st

    # -- the Deployment's fields ----------------------------------------------------------------------------

    @property
    def d(self) -> Obj:
        return self.st.obj

    @property
    def spec(self) -> Obj:
        return self.d.get("spec") or {}

    @property
    def replicas(self) -> int:
        r = self.spec.get("replicas")
        return 1 if r is None else int(r)

    @property
    def rolling(self) -> bool:
        return ((self.spec.get("strategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"

    def fenceposts(self) -> tuple[int, int]:
        ru = (self.spec.get("strategy") or {}).get("rollingUpdate") or {}
        return resolve_fenceposts(ru.get("maxSurge", "25%"), ru.get("maxUnavailable", "25%"), self.replicas)

    def max_surge(self) -> int:
        return self.fenceposts()[0] if self.rolling else 0

    def max_unavailable(self) -> int:
        if not self.rolling or self.replicas == 0:
            return 0
        return min(self.fenceposts()[1], self.replicas)

    def progress_deadline(self) -> int | None:
        v = self.spec.get("progressDeadlineSeconds", 600)
        return None if v is None or int(v) == NO_DEADLINE else int(v)

    def ref(self) -> Key:
        return key_of(self.d)

    def event(self, etype: str, reason: str, message: str) -> None:
        self.ctl.events.emit(self.d, etype, reason, message)

    # -- the sync -------------------------------------------------------------------------------------------

    def sync(self) -> None:
        meta = meta_of(self.d)
        selector = _selector(self.d)
        if selector.empty:
            # Upstream refuses to select every pod of the namespace.
            self.event(
                "Warning",
                "SelectingAll",
                "This deployment is selecting all pods. A non-empty selector is required.",
            )
            status = dict(self.d.get("status") or {})
            if status.get("observedGeneration") != meta.get("generation"):
                status["observedGeneration"] = meta.get("generation")
                self.write_status(status)
            return
        rss = self.claim_replicasets(selector)
        if meta.get("deletionTimestamp"):
            new_rs, old = self.new_and_old(rss, create=False)
            self.sync_status([*old, *([new_rs] if new_rs else [])], new_rs)
            return
        self.check_paused_conditions()
        if self.spec.get("paused"):
            self.sync_scale(rss)
            return
        if self.is_scaling_event(rss):
            self.sync_scale(rss)
            return
        if self.rolling:
            self.rollout_rolling(rss)
        else:
            self.rollout_recreate(rss)

    # -- ReplicaSets of this Deployment -----------------------------------------------------------------------

    def claim_replicasets(self, selector: LabelSelector) -> list[_RS]:
        meta = meta_of(self.d)
        uid = meta.get("uid")
        deleting = bool(meta.get("deletionTimestamp"))
        items, _ = self.api.store.list(self.ctl.rs_type.storage_key, meta.get("namespace"))
        owned: list[_RS] = []
        for st in items:
            ref = controller_ref(st.obj)
            labels = meta_of(st.obj).get("labels")
            if ref is not None:
                if ref.get("uid") != uid:
                    continue
                if selector.matches(labels):
                    owned.append(_RS(st))
                elif not deleting:
                    self.set_owner(st, adopt=False)
            elif not deleting and selector.matches(labels) and not meta_of(st.obj).get("deletionTimestamp"):
                adopted = self.set_owner(st, adopt=True)
                if adopted is not None:
                    owned.append(_RS(adopted))
        return owned

    def set_owner(self, st: Stored, *, adopt: bool) -> Stored | None:
        uid = meta_of(self.d).get("uid")
        refs = [r for r in meta_of(st.obj).get("ownerReferences") or () if r.get("uid") != uid]
        if adopt:
            refs.append(new_controller_ref(self.d))
        new = with_owner_refs(st.obj, refs)
        try:
            out, _ = self.api.update(self.ctl.rs_type, new, st.key[0], st.key[1], field_manager=FIELD_MANAGER)
        except errors.ApiError as e:
            if e.code == 404:
                return None
            raise
        return out

    def new_and_old(self, rss: list[_RS], *, create: bool) -> tuple[_RS | None, list[_RS]]:
        """The new ReplicaSet (created when asked and missing; its revision synced) and the old ones."""
        template = self.spec.get("template") or {}
        new_rs: _RS | None = None
        for rs in sorted(rss, key=lambda r: r.created):
            if equal_ignore_hash(rs.template, template):
                new_rs = rs
                break
        old = [rs for rs in rss if rs is not new_rs]
        max_old_revision = max((rs.revision for rs in old), default=0)
        new_revision = str(max_old_revision + 1)
        if new_rs is not None:
            self.sync_existing_new_rs(new_rs, new_revision)
        elif create:
            new_rs = self.create_new_rs(old, new_revision)
        return new_rs, old

    def rs_annotations(self, rs_obj: Obj, new_revision: str, exists: bool) -> dict[str, str]:
        """The annotations a new ReplicaSet should carry (upstream ``SetNewReplicaSetAnnotations``)."""
        ann = dict(meta_of(rs_obj).get("annotations") or {})
        for k, v in (meta_of(self.d).get("annotations") or {}).items():
            if k not in _NOT_COPIED:
                ann[k] = v
        old_text = ann.get(REVISION, "")
        try:
            old_rev = int(old_text) if old_text else 0
        except ValueError:
            return ann
        if old_rev < int(new_revision):
            ann[REVISION] = new_revision
            if old_text:
                # Rolling back to this ReplicaSet: remember the revisions it had.
                history = ann.get(REVISION_HISTORY, "")
                history = f"{history},{old_text}" if history else old_text
                while len(history) > MAX_REVISION_HISTORY_CHARS and "," in history:
                    history = history.split(",", 1)[1]
                ann[REVISION_HISTORY] = history
        if not exists:
            ann.setdefault(DESIRED_REPLICAS, str(self.replicas))
            ann.setdefault(MAX_REPLICAS, str(self.replicas + self.max_surge()))
        return ann

    def sync_existing_new_rs(self, rs: _RS, new_revision: str) -> None:
        ann = self.rs_annotations(rs.obj, new_revision, exists=True)
        min_ready = int(self.spec.get("minReadySeconds") or 0)
        spec = rs.obj.get("spec") or {}
        if ann != rs.annotations or int(spec.get("minReadySeconds") or 0) != min_ready:
            new = dict(rs.obj)
            new["metadata"] = dict(meta_of(rs.obj), annotations=ann)
            new["spec"] = dict(spec, minReadySeconds=min_ready)
            rs.st, _ = self.api.update(
                self.ctl.rs_type, new, rs.st.key[0], rs.st.key[1], field_manager=FIELD_MANAGER
            )
        self.set_revision(rs.annotations.get(REVISION, ""))
        status = dict(self.d.get("status") or {})
        if self.progress_deadline() is not None and get_condition(status, "Progressing") is None:
            self.set_condition(
                status, "Progressing", "True", FOUND_NEW_RS, f'Found new replica set "{rs.name}"'
            )
            self.write_status(status)

    def create_new_rs(self, old: list[_RS], new_revision: str) -> _RS | None:
        status = dict(self.d.get("status") or {})
        collision = status.get("collisionCount")
        template = copy_json(self.spec.get("template") or {})
        h = compute_hash(template, collision)
        tmeta = dict(template.get("metadata") or {})
        tmeta["labels"] = dict(tmeta.get("labels") or {}, **{HASH_LABEL: h})
        template["metadata"] = tmeta
        selector = copy_json(self.spec.get("selector") or {})
        selector["matchLabels"] = dict(selector.get("matchLabels") or {}, **{HASH_LABEL: h})
        meta = meta_of(self.d)
        name = f"{meta.get('name')}-{h}"
        total = _pods_upper(old)
        size = (
            new_rs_replicas_rolling(self.replicas, self.max_surge(), total, 0)
            if self.rolling
            else self.replicas
        )
        body: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace"),
                "labels": tmeta["labels"],
                "ownerReferences": [new_controller_ref(self.d)],
            },
            "spec": {
                "replicas": size,
                "minReadySeconds": int(self.spec.get("minReadySeconds") or 0),
                "selector": selector,
                "template": template,
            },
        }
        body["metadata"]["annotations"] = self.rs_annotations(body, new_revision, exists=False)
        body["metadata"]["annotations"][DESIRED_REPLICAS] = str(self.replicas)
        body["metadata"]["annotations"][MAX_REPLICAS] = str(self.replicas + self.max_surge())
        try:
            st = self.api.create(self.ctl.rs_type, body, meta.get("namespace"), field_manager=FIELD_MANAGER)
        except errors.ApiError as e:
            if e.code == 409 and e.reason == "AlreadyExists":
                existing = self.api.lookup(self.ctl.rs_type, meta.get("namespace"), name)
                if existing is not None:
                    ref = controller_ref(existing.obj)
                    if (
                        ref is not None
                        and ref.get("uid") == meta.get("uid")
                        and equal_ignore_hash(_RS(existing).template, self.spec.get("template") or {})
                    ):
                        return _RS(existing)
                # The name belongs to another template: try the next hash.
                status["collisionCount"] = int(collision or 0) + 1
                self.write_status(status)
                raise
            if self.progress_deadline() is not None:
                msg = f'Failed to create new replica set "{name}": {e}'
                self.set_condition(status, "ReplicaFailure", "True", FAILED_RS_CREATE, msg)
                self.set_condition(status, "Progressing", "False", FAILED_RS_CREATE, msg)
                self.write_status(status)
            self.event("Warning", FAILED_RS_CREATE, f'Failed to create new replica set "{name}": {e}')
            raise
        rs = _RS(st)
        if size > 0:
            self.event("Normal", "ScalingReplicaSet", f"Scaled up replica set {name} from 0 to {size}")
        self.set_revision(new_revision)
        if self.progress_deadline() is not None:
            status = dict(self.d.get("status") or {})
            self.set_condition(
                status, "Progressing", "True", NEW_RS_CREATED, f'Created new replica set "{name}"'
            )
            self.write_status(status)
        return rs

    def set_revision(self, revision: str) -> None:
        ann = meta_of(self.d).get("annotations") or {}
        if not revision or ann.get(REVISION) == revision:
            return
        new = dict(self.d)
        new["metadata"] = dict(meta_of(self.d), annotations=dict(ann, **{REVISION: revision}))
        self.st, _ = self.api.update(
            self.ctl.rtype, new, self.st.key[0], self.st.key[1], field_manager=FIELD_MANAGER
        )

    # -- scaling ----------------------------------------------------------------------------------------------

    def scale_rs(self, rs: _RS, size: int, operation: str | None = None) -> bool:
        """Set a ReplicaSet's size and replica annotations; True if its size changed."""
        size = max(0, size)
        ann = rs.annotations
        desired, max_total = str(self.replicas), str(self.replicas + self.max_surge())
        size_changed = rs.replicas != size
        if not size_changed and ann.get(DESIRED_REPLICAS) == desired and ann.get(MAX_REPLICAS) == max_total:
            return False
        before = rs.replicas
        new = dict(rs.obj)
        new["metadata"] = dict(
            meta_of(rs.obj), annotations=dict(ann, **{DESIRED_REPLICAS: desired, MAX_REPLICAS: max_total})
        )
        new["spec"] = dict(rs.obj.get("spec") or {}, replicas=size)
        rs.st, _ = self.api.update(
            self.ctl.rs_type, new, rs.st.key[0], rs.st.key[1], field_manager=FIELD_MANAGER
        )
        if size_changed:
            op = operation or ("up" if size > before else "down")
            self.event(
                "Normal", "ScalingReplicaSet", f"Scaled {op} replica set {rs.name} from {before} to {size}"
            )
        return size_changed

    def is_scaling_event(self, rss: list[_RS]) -> bool:
        new_rs, old = self.new_and_old(rss, create=False)
        for rs in _active([*old, *([new_rs] if new_rs else [])]):
            desired = rs.annotations.get(DESIRED_REPLICAS)
            if desired is not None and desired.isdigit() and int(desired) != self.replicas:
                return True
        return False

    def sync_scale(self, rss: list[_RS]) -> None:
        """A replicas change (or a paused Deployment): resize without rolling (upstream ``sync``)."""
        new_rs, old = self.new_and_old(rss, create=False)
        self.scale(new_rs, old)
        if self.spec.get("paused"):
            self.cleanup(old)
        self.sync_status([*old, *([new_rs] if new_rs else [])], new_rs)

    def scale(self, new_rs: _RS | None, old: list[_RS]) -> None:
        olds_newest_first = sorted(old, key=lambda r: r.created, reverse=True)
        everything = [*olds_newest_first, *([new_rs] if new_rs else [])]
        active = _active(everything)
        if not active:
            target = new_rs if new_rs is not None else (olds_newest_first[0] if olds_newest_first else None)
            if target is not None and target.replicas != self.replicas:
                self.scale_rs(target, self.replicas)
            return
        if len(active) == 1:
            if active[0].replicas != self.replicas:
                self.scale_rs(active[0], self.replicas)
            return
        if new_rs is not None and self.is_saturated(new_rs):
            for rs in _active(old):
                self.scale_rs(rs, 0)
            return
        if not self.rolling:
            return
        allowed = self.replicas + self.max_surge() if self.replicas > 0 else 0
        to_add = allowed - _sum(active)
        if to_add > 0:
            # Bigger first; among equals the newer first.
            active.sort(key=lambda r: (-r.replicas, -r.created[0], r.name))
            op = "up"
        elif to_add < 0:
            active.sort(key=lambda r: (-r.replicas, r.created[0], r.name))
            op = "down"
        else:
            op = ""
        added = 0
        sizes: dict[str, int] = {}
        for rs in active:
            if to_add != 0:
                share = self.proportion(rs, to_add, added)
                sizes[rs.name] = rs.replicas + share
                added += share
            else:
                sizes[rs.name] = rs.replicas
        for i, rs in enumerate(active):
            if i == 0 and to_add != 0:
                sizes[rs.name] = max(0, sizes[rs.name] + to_add - added)  # leftovers to the largest
            self.scale_rs(rs, sizes[rs.name], op or None)

    def proportion(self, rs: _RS, to_add: int, added: int) -> int:
        if rs.replicas == 0 or to_add == 0 or to_add == added:
            return 0
        if self.replicas == 0:
            fraction = -rs.replicas
        else:
            total = self.replicas + self.max_surge()
            annotated_text = rs.annotations.get(MAX_REPLICAS, "")
            annotated = (
                int(annotated_text)
                if annotated_text.isdigit()
                else int((self.d.get("status") or {}).get("replicas") or 0)
            )
            if annotated <= 0:
                fraction = 0
            else:
                # Go's RoundToInt32 rounds half away from zero.
                exact = rs.replicas * total / annotated
                fraction = int(exact + 0.5) - rs.replicas
        allowed = to_add - added
        return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)

    def is_saturated(self, rs: _RS) -> bool:
        desired = rs.annotations.get(DESIRED_REPLICAS, "")
        return (
            rs.replicas == self.replicas
            and desired.isdigit()
            and int(desired) == self.replicas
            and rs.status("availableReplicas") == self.replicas
        )

    # -- rolling update -----------------------------------------------------------------------------------------

    def rollout_rolling(self, rss: list[_RS]) -> None:
        new_rs, old = self.new_and_old(rss, create=True)
        everything = [*old, *([new_rs] if new_rs else [])]
        if new_rs is not None and self.reconcile_new_rs(everything, new_rs):
            self.sync_rollout_status(everything, new_rs)
            return
        if self.reconcile_old_rss(everything, _active(old), new_rs):
            self.sync_rollout_status(everything, new_rs)
            return
        if self.is_complete(self.calculate_status(everything, new_rs)):
            self.cleanup(old)
        self.sync_rollout_status(everything, new_rs)

    def reconcile_new_rs(self, everything: list[_RS], new_rs: _RS) -> bool:
        if new_rs.replicas == self.replicas:
            return False
        if new_rs.replicas > self.replicas:
            return self.scale_rs(new_rs, self.replicas, "down")
        size = new_rs_replicas_rolling(
            self.replicas, self.max_surge(), _pods_upper(everything), new_rs.replicas
        )
        return self.scale_rs(new_rs, size, "up")

    def reconcile_old_rss(self, everything: list[_RS], old: list[_RS], new_rs: _RS | None) -> bool:
        if _sum(old) == 0:
            return False
        budget = old_scale_down_budget(
            self.replicas,
            self.max_unavailable(),
            _sum(everything),
            new_rs.replicas if new_rs else 0,
            _available_lower(new_rs) if new_rs else 0,
        )
        if budget <= 0:
            return False
        # Old pods that are not available go first: removing them costs no availability.
        cleaned = 0
        for rs in sorted(old, key=lambda r: r.created):
            if cleaned >= budget:
                break
            if rs.replicas == 0 or rs.replicas == _available_lower(rs):
                continue
            n = min(budget - cleaned, rs.replicas - _available_lower(rs))
            self.scale_rs(rs, rs.replicas - n, "down")
            cleaned += n
        everything = [*old, *([new_rs] if new_rs else [])]
        scaled = self.scale_down_old_for_rolling(everything, old)
        return cleaned + scaled > 0

    def scale_down_old_for_rolling(self, everything: list[_RS], old: list[_RS]) -> int:
        min_available = self.replicas - self.max_unavailable()
        available = sum(_available_lower(rs) for rs in everything)
        if available <= min_available:
            return 0
        total = available - min_available
        done = 0
        for rs in sorted(old, key=lambda r: r.created):
            if done >= total:
                break
            if rs.replicas == 0:
                continue
            n = min(rs.replicas, total - done)
            self.scale_rs(rs, rs.replicas - n, "down")
            done += n
        return done

    # -- recreate -----------------------------------------------------------------------------------------------

    def rollout_recreate(self, rss: list[_RS]) -> None:
        new_rs, old = self.new_and_old(rss, create=False)
        everything = [*old, *([new_rs] if new_rs else [])]
        scaled_down = False
        for rs in _active(old):
            scaled_down = self.scale_rs(rs, 0, "down") or scaled_down
        if scaled_down or self.old_pods_running(new_rs, old):
            self.sync_rollout_status(everything, new_rs)
            return
        if new_rs is None:
            new_rs, old = self.new_and_old(rss, create=True)
            everything = [*old, *([new_rs] if new_rs else [])]
        if new_rs is not None:
            self.scale_rs(new_rs, self.replicas, "up")
        if self.is_complete(self.d.get("status") or {}):
            self.cleanup(old)
        self.sync_rollout_status(everything, new_rs)

    def old_pods_running(self, new_rs: _RS | None, old: list[_RS]) -> bool:
        if any(rs.status("replicas") > 0 for rs in old):
            return True
        for rs in old:
            for pod in self.ctl.pods.owned_by(rs.uid).values():
                if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    return True
        return False

    # -- history ----------------------------------------------------------------------------------------------

    def cleanup(self, old: list[_RS]) -> None:
        """Delete the oldest empty old ReplicaSets beyond ``revisionHistoryLimit``."""
        limit = self.spec.get("revisionHistoryLimit", 10)
        if limit is None:
            return
        cleanable = [rs for rs in old if not meta_of(rs.obj).get("deletionTimestamp")]
        diff = len(cleanable) - int(limit)
        if diff <= 0:
            return
        cleanable.sort(key=lambda r: (r.revision, r.created))
        for rs in cleanable[:diff]:
            observed = rs.status("observedGeneration")
            if (
                rs.status("replicas") != 0
                or rs.replicas != 0
                or int(meta_of(rs.obj).get("generation") or 1) > observed
            ):
                continue
            try:
                self.api.delete(self.ctl.rs_type, rs.st.key[0], rs.name)
            except errors.ApiError as e:
                if e.code != 404:
                    raise

    # -- status -----------------------------------------------------------------------------------------------

    def calculate_status(self, everything: list[_RS], new_rs: _RS | None) -> Obj:
        available = _sum(everything, "availableReplicas")
        prev = self.d.get("status") or {}
        status: Obj = {
            "observedGeneration": int(meta_of(self.d).get("generation") or 1),
            "replicas": _sum(everything, "replicas"),
            "updatedReplicas": new_rs.status("replicas") if new_rs else 0,
            "readyReplicas": _sum(everything, "readyReplicas"),
            "availableReplicas": available,
            "unavailableReplicas": max(0, self.replicas - available),
        }
        status = {k: v for k, v in status.items() if v}  # omitempty, as the Go type
        if prev.get("conditions"):
            status["conditions"] = list(prev["conditions"])
        if prev.get("collisionCount") is not None:
            status["collisionCount"] = prev["collisionCount"]
        if available >= self.replicas - self.max_unavailable():
            self.set_condition(
                status, "Available", "True", MIN_AVAILABLE, "Deployment has minimum availability."
            )
        else:
            self.set_condition(
                status,
                "Available",
                "False",
                MIN_UNAVAILABLE,
                "Deployment does not have minimum availability.",
            )
        return status

    def is_complete(self, status: Obj) -> bool:
        return (
            int(status.get("updatedReplicas") or 0) == self.replicas
            and int(status.get("replicas") or 0) == self.replicas
            and int(status.get("availableReplicas") or 0) == self.replicas
            and int(status.get("observedGeneration") or 0) >= int(meta_of(self.d).get("generation") or 1)
        )

    def is_progressing(self, status: Obj) -> bool:
        old = self.d.get("status") or {}

        def n(s: Obj, f: str) -> int:
            return int(s.get(f) or 0)

        return (
            n(status, "updatedReplicas") > n(old, "updatedReplicas")
            or n(status, "replicas") - n(status, "updatedReplicas")
            < n(old, "replicas") - n(old, "updatedReplicas")
            or n(status, "readyReplicas") > n(old, "readyReplicas")
            or n(status, "availableReplicas") > n(old, "availableReplicas")
        )

    def timed_out(self, status: Obj) -> bool:
        deadline = self.progress_deadline()
        cond = get_condition(self.d.get("status") or {}, "Progressing")
        if deadline is None or cond is None or cond.get("reason") == NEW_RS_AVAILABLE:
            return False
        if cond.get("reason") == TIMED_OUT:
            return True
        since = parse_time(cond.get("lastUpdateTime"))
        return since is not None and since + deadline < self.clock.now()

    def sync_status(self, everything: list[_RS], new_rs: _RS | None) -> None:
        status = self.calculate_status(everything, new_rs)
        if status != (self.d.get("status") or {}):
            self.write_status(status)

    def sync_rollout_status(self, everything: list[_RS], new_rs: _RS | None) -> None:
        status = self.calculate_status(everything, new_rs)
        deadline = self.progress_deadline()
        if deadline is None:
            remove_condition(status, "Progressing")
        current = get_condition(self.d.get("status") or {}, "Progressing")
        complete = (
            int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0)
            and current is not None
            and current.get("reason") == NEW_RS_AVAILABLE
        )
        if deadline is not None and not complete:
            if self.is_complete(status):
                msg = (
                    f'ReplicaSet "{new_rs.name}" has successfully progressed.'
                    if new_rs
                    else (f'Deployment "{meta_of(self.d).get("name")}" has successfully progressed.')
                )
                self.set_condition(status, "Progressing", "True", NEW_RS_AVAILABLE, msg)
            elif self.is_progressing(status):
                msg = (
                    f'ReplicaSet "{new_rs.name}" is progressing.'
                    if new_rs
                    else (f'Deployment "{meta_of(self.d).get("name")}" is progressing.')
                )
                now = now_text(self.clock)
                cond = {
                    "type": "Progressing",
                    "status": "True",
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                    "reason": RS_UPDATED,
                    "message": msg,
                }
                if current is not None and current.get("status") == "True":
                    cond["lastTransitionTime"] = current.get("lastTransitionTime", now)
                # Progress refreshes lastUpdateTime even when the reason stays the same.
                remove_condition(status, "Progressing")
                status["conditions"] = [*(status.get("conditions") or []), cond]
            elif self.timed_out(status):
                msg = (
                    f'ReplicaSet "{new_rs.name}" has timed out progressing.'
                    if new_rs
                    else (f'Deployment "{meta_of(self.d).get("name")}" has timed out progressing.')
                )
                self.set_condition(status, "Progressing", "False", TIMED_OUT, msg)
        failure = None
        for rs in everything:
            failure = get_condition(rs.obj.get("status") or {}, "ReplicaFailure")
            if failure is not None and failure.get("status") == "True":
                break
            failure = None
        if failure is not None:
            self.set_condition(
                status, "ReplicaFailure", "True", str(failure.get("reason")), str(failure.get("message"))
            )
        else:
            remove_condition(status, "ReplicaFailure")
        if status != (self.d.get("status") or {}):
            self.write_status(status)
        self.requeue_if_stuck(status)

    def requeue_if_stuck(self, status: Obj) -> None:
        """Look again when the progress deadline would pass, so ``ProgressDeadlineExceeded`` gets reported."""
        deadline = self.progress_deadline()
        cond = get_condition(status, "Progressing")
        if deadline is None or cond is None or cond.get("reason") in (NEW_RS_AVAILABLE, TIMED_OUT):
            return
        if self.is_complete(status):
            return
        since = parse_time(cond.get("lastUpdateTime"))
        if since is None:
            return
        self.ctl.queue.add_after(self.ref(), max(0.0, since + deadline - self.clock.now()) + 1.0)

    def check_paused_conditions(self) -> None:
        if self.progress_deadline() is None:
            return
        status = dict(self.d.get("status") or {})
        cond = get_condition(status, "Progressing")
        if cond is not None and cond.get("reason") == TIMED_OUT:
            return
        paused_cond = cond is not None and cond.get("reason") == PAUSED
        if self.spec.get("paused") and not paused_cond:
            self.set_condition(status, "Progressing", "Unknown", PAUSED, "Deployment is paused")
        elif not self.spec.get("paused") and paused_cond:
            self.set_condition(status, "Progressing", "Unknown", RESUMED, "Deployment is resumed")
        else:
            return
        self.write_status(status)

    def set_condition(self, status: Obj, ctype: str, cstatus: str, reason: str, message: str) -> None:
        """Upstream ``SetDeploymentCondition``: same status and reason is no change; the transition time is kept
        while the status stays; the condition moves to the end."""
        current = get_condition(status, ctype)
        if current is not None and current.get("status") == cstatus and current.get("reason") == reason:
            return
        now = now_text(self.clock)
        cond = {
            "type": ctype,
            "status": cstatus,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }
        if current is not None and current.get("status") == cstatus:
            cond["lastTransitionTime"] = current.get("lastTransitionTime", now)
        others = [c for c in status.get("conditions") or () if c.get("type") != ctype]
        status["conditions"] = [*others, cond]

    def write_status(self, status: Obj) -> None:
        new = dict(self.d)
        new["status"] = status
        self.st, _ = self.api.update(
            self.ctl.rtype,
            new,
            self.st.key[0],
            self.st.key[1],
            subresource="status",
            field_manager=FIELD_MANAGER,
        )
