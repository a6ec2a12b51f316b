"""The StatefulSet controller (upstream ``pkg/controller/statefulset``), minimal but with its identities:

- pods ``<set>-<ordinal>`` (labels ``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index``,
  ``controller-revision-hash``; ``hostname`` and ``subdomain`` = ``serviceName``), owned by the set;
- for each ``volumeClaimTemplates`` entry a claim ``<template>-<set>-<ordinal>``, created before its pod and kept
  when the pod goes, so a recreated pod gets the same volume back and the scheduler sends it where that volume
  is; ``persistentVolumeClaimRetentionPolicy``: ``whenScaled: Delete`` deletes the claims of ordinals a
  scale-down removes, ``whenDeleted: Delete`` makes the set their owner (the garbage collector takes them with
  it); Retain (the default) keeps them;
- ``podManagementPolicy``: ``OrderedReady`` creates ordinal i only when 0..i-1 are Running and Ready and removes
  surplus pods from the highest ordinal, one at a time; ``Parallel`` creates and removes all at once;
- a pod that is deleted, or has Failed or Succeeded, is replaced (a finished one is deleted first);
- ``updateStrategy``: RollingUpdate (the default) replaces pods of an older template revision from the highest
  ordinal down, one at a time and only while all pods are Running and Ready, down to ``partition``; OnDelete
  leaves them until they are deleted. Revisions are a hash of the template (no ControllerRevision objects);
- status: replicas, readyReplicas, availableReplicas, currentReplicas, updatedReplicas, currentRevision,
  updateRevision, observedGeneration.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import orjson

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
    is_pod_ready,
    key_of,
    meta_of,
    new_controller_ref,
    only_status_changed,
)
from kubesched.cluster.controllers.podindex import PodIndex

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

NAME = "statefulset-controller"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"


def ordinal_of(set_name: str, pod_name: str) -> int | None:
    prefix = set_name + "-"
    if not pod_name.startswith(prefix):
        return None
    tail = pod_name[len(prefix) :]
    return int(tail) if tail.isdigit() and (tail == "0" or not tail.startswith("0")) else None


def claim_name(template: Obj, set_name: str, ordinal: int) -> str:
    return f"{meta_of(template).get('name') or ''}-{set_name}-{ordinal}"


def revision_of(sts: Obj) -> str:
    template = (sts.get("spec") or {}).get("template") or {}
    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).hexdigest()[:10]
    return f"{meta_of(sts).get('name') or ''}-{digest}"


def _retention(spec: Obj, when: str) -> str:
    """``persistentVolumeClaimRetentionPolicy.whenDeleted|whenScaled`` (Retain by default)."""
    return str((spec.get("persistentVolumeClaimRetentionPolicy") or {}).get(when) or "Retain")


def _running_and_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_pod_ready(pod)


def _finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class StatefulSetController(Controller):
    name = NAME

    def __init__(self, api: ClusterApi, clock: Clock, pods: PodIndex) -> None:
        super().__init__(api, clock)
        self.pods = pods
        self.rtype = api.rtype("apps", "v1", "statefulsets")
        self.pod_type = api.rtype("", "v1", "pods")
        self.pvc_type = api.rtype("", "v1", "persistentvolumeclaims")
        self.expectations = Expectations(clock)
        self._uids: dict[str, Key] = {}  # set uid -> key

    def start(self) -> None:
        items, _ = self.api.store.list(self.rtype.storage_key)
        for st in items:
            self.on_set("ADDED", st.obj, None)

    def on_set(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        if new is None:
            assert old is not None
            self._uids.pop(str(meta_of(old).get("uid") or ""), None)
            self.expectations.forget(key_of(old))
            return
        self._uids[str(meta_of(new).get("uid") or "")] = key_of(new)
        if only_status_changed(new, old):
            return
        self.queue.add(key_of(new))

    def on_pod(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "StatefulSet":
            return
        owner = self._uids.get(str(ref.get("uid") or ""))
        if owner is None:
            return
        if new is None:
            self.expectations.deletion_observed(owner, key_of(pod))
        elif old is None:
            self.expectations.creation_observed(owner)
        self.queue.add(owner)

    # -- sync ---------------------------------------------------------------------------------------------------

    def sync(self, key: Key) -> None:
        st = self.api.lookup(self.rtype, key[0], key[1])
        if st is None:
            self.expectations.forget(key)
            return
        sts = st.obj
        if meta_of(sts).get("deletionTimestamp"):
            return
        if not self.expectations.satisfied(key):
            return
        name = key[1]
        spec = sts.get("spec") or {}
        raw_replicas = spec.get("replicas")
        replicas = int(raw_replicas) if raw_replicas is not None else 1
        parallel = spec.get("podManagementPolicy") == "Parallel"
        try:
            selector = LabelSelector.from_dict(spec.get("selector"))
        except SelectorError:
            return
        uid = str(meta_of(sts).get("uid") or "")
        by_ordinal: dict[int, Obj] = {}
        for pod in self.pods.owned_by(uid).values():
            o = ordinal_of(name, str(meta_of(pod).get("name") or ""))
            if o is not None:
                by_ordinal[o] = pod
        revision = revision_of(sts)
        # Finished pods are deleted so that they can be replaced.
        for _, pod in sorted(by_ordinal.items()):
            if _finished(pod) and not meta_of(pod).get("deletionTimestamp"):
                self._delete_pod(key, pod)
                return
        # Create the missing pods of [0, replicas).
        for o in range(replicas):
            current = by_ordinal.get(o)
            if current is None:
                self._create_pod(sts, o, revision, selector)
                if not parallel:
                    break
                continue
            if not parallel and (
                not _running_and_ready(current) or meta_of(current).get("deletionTimestamp")
            ):
                break  # OrderedReady: wait for this one before the next
        else:
            # Scale down: the highest ordinals beyond replicas go first.
            surplus = sorted((o for o in by_ordinal if o >= replicas), reverse=True)
            for o in surplus:
                pod = by_ordinal[o]
                if meta_of(pod).get("deletionTimestamp"):
                    if not parallel:
                        break
                    continue
                if not parallel and not all(
                    _running_and_ready(by_ordinal[i]) for i in range(replicas) if i in by_ordinal
                ):
                    break
                self._delete_pod(key, pod)
                if _retention(spec, "whenScaled") == "Delete":
                    self._delete_claims(sts, o)
                if not parallel:
                    break
            if not surplus:
                self._roll(key, spec, by_ordinal, replicas, revision)
        self._write_status(sts, by_ordinal, revision)

    def _roll(self, key: Key, spec: Obj, by_ordinal: dict[int, Obj], replicas: int, revision: str) -> None:
        """RollingUpdate: once every pod of [0, replicas) is Running and Ready, delete the highest-ordinal pod
        of an older revision at or above the partition; it is recreated from the current template."""
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return  # OnDelete: pods get the new template when someone deletes them
        partition = int(((strategy.get("rollingUpdate") or {}).get("partition")) or 0)
        pods = [by_ordinal[o] for o in range(replicas) if o in by_ordinal]
        if len(pods) < replicas or not all(
            _running_and_ready(p) and not meta_of(p).get("deletionTimestamp") for p in pods
        ):
            return
        for o in range(replicas - 1, partition - 1, -1):
            pod = by_ordinal[o]
            if (meta_of(pod).get("labels") or {}).get(REVISION_LABEL) != revision:
                self._delete_pod(key, pod)
                return

    def _create_pod(self, sts: Obj, ordinal: int, revision: str, selector: LabelSelector) -> None:
        ns, name = key_of(sts)
        spec = sts.get("spec") or {}
        templates = spec.get("volumeClaimTemplates") or ()
        for tmpl in templates:
            self._ensure_claim(sts, tmpl, ordinal)
        template = copy_json(spec.get("template") or {})
        meta = template.get("metadata") or {}
        pod_name = f"{name}-{ordinal}"
        labels = dict(meta.get("labels") or {})
        labels.update({POD_NAME_LABEL: pod_name, POD_INDEX_LABEL: str(ordinal), REVISION_LABEL: revision})
        pod_spec = dict(template.get("spec") or {})
        pod_spec["hostname"] = pod_name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        volumes = [
            v
            for v in pod_spec.get("volumes") or ()
            if v.get("name") not in {meta_of(t).get("name") for t in templates}
        ]
        for tmpl in templates:
            volumes.append(
                {
                    "name": meta_of(tmpl).get("name"),
                    "persistentVolumeClaim": {"claimName": claim_name(tmpl, name, ordinal)},
                }
            )
        if volumes:
            pod_spec["volumes"] = volumes
        body: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": ns,
                "labels": labels,
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [new_controller_ref(sts)],
            },
            "spec": pod_spec,
        }
        self.expectations.expect_creations((ns, name), 1)
        try:
            self.api.create(self.pod_type, body, ns, field_manager=FIELD_MANAGER)
        except errors.ApiError as e:
            self.expectations.creation_observed((ns, name))
            if e.code == 409:
                return  # the old pod of this name is still terminating: its deletion requeues us
            self.events.emit(
                sts,
                "Warning",
                "FailedCreate",
                f"create Pod {pod_name} in StatefulSet {name} failed error: {e}",
            )
            raise
        self.events.emit(
            sts, "Normal", "SuccessfulCreate", f"create Pod {pod_name} in StatefulSet {name} successful"
        )

    def _ensure_claim(self, sts: Obj, tmpl: Obj, ordinal: int) -> None:
        ns, name = key_of(sts)
        cname = claim_name(tmpl, name, ordinal)
        if self.api.lookup(self.pvc_type, ns, cname) is not None:
            return
        tmeta = meta_of(tmpl)
        labels = dict(tmeta.get("labels") or {})
        labels.update(((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        body: Obj = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": cname,
                "namespace": ns,
                "labels": labels,
                "annotations": dict(tmeta.get("annotations") or {}),
            },
            "spec": copy_json(tmpl.get("spec") or {}),
        }
        if _retention(sts.get("spec") or {}, "whenDeleted") == "Delete":
            # The garbage collector removes the claim with its StatefulSet.
            ref = new_controller_ref(sts)
            ref["controller"] = False
            body["metadata"]["ownerReferences"] = [ref]
        try:
            self.api.create(self.pvc_type, body, ns, field_manager=FIELD_MANAGER)
        except errors.ApiError as e:
            if e.code != 409:
                self.events.emit(
                    sts,
                    "Warning",
                    "FailedCreate",
                    f"create Claim {cname} for Pod {name}-{ordinal} failed error: {e}",
                )
                raise
            return
        self.events.emit(
            sts,
            "Normal",
            "SuccessfulCreate",
            f"create Claim {cname} Pod {name}-{ordinal} in StatefulSet {name} success",
        )

    def _delete_claims(self, sts: Obj, ordinal: int) -> None:
        """``whenScaled: Delete``: the claims of an ordinal removed by a scale-down go with its pod."""
        ns, name = key_of(sts)
        for tmpl in (sts.get("spec") or {}).get("volumeClaimTemplates") or ():
            try:
                self.api.delete(self.pvc_type, ns, claim_name(tmpl, name, ordinal))
            except errors.ApiError as e:
                if e.code != 404:
                    raise

    def _delete_pod(self, key: Key, pod: Obj) -> None:
        pkey = key_of(pod)
        self.expectations.expect_deletions(key, [pkey])
        try:
            self.api.delete(self.pod_type, pkey[0], pkey[1])
        except errors.ApiError as e:
            self.expectations.deletion_observed(key, pkey)
            if e.code != 404:
                raise

    def _write_status(self, sts: Obj, by_ordinal: dict[int, Obj], revision: str) -> None:
        ns, name = key_of(sts)
        live = [p for p in by_ordinal.values() if not meta_of(p).get("deletionTimestamp")]
        ready = sum(1 for p in live if _running_and_ready(p))
        updated = sum(1 for p in live if (meta_of(p).get("labels") or {}).get(REVISION_LABEL) == revision)
        status = dict(sts.get("status") or {})
        # The current revision moves to the update revision once every pod runs it.
        current_revision = status.get("currentRevision") or revision
        if updated == len(live):
            current_revision = revision
        current = sum(
            1 for p in live if (meta_of(p).get("labels") or {}).get(REVISION_LABEL) == current_revision
        )
        want = {
            **status,
            "observedGeneration": meta_of(sts).get("generation") or 0,
            "replicas": len(live),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": current,
            "updatedReplicas": updated,
            "currentRevision": current_revision,
            "updateRevision": revision,
            "collisionCount": status.get("collisionCount") or 0,
        }
        if want == status:
            return
        new = copy_json(sts)
        new["status"] = want
        self.api.update(self.rtype, new, ns, name, subresource="status", field_manager=FIELD_MANAGER)


__all__ = ["NAME", "StatefulSetController", "claim_name", "ordinal_of", "revision_of"]
