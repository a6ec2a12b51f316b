"""The ResourceClaim controller, as upstream's ``pkg/controller/resourceclaim``.

- For each entry of a pod's ``spec.resourceClaims`` that names a ResourceClaimTemplate and has no entry in
  ``status.resourceClaimStatuses`` yet, it creates the claim from the template (``generateName:
  <pod>-<claim>-``, so ``<pod>-<claim>-<5 random>``; the template's labels and annotations, the annotation
  ``resource.kubernetes.io/pod-claim-name``, the pod as controlling owner, so the garbage collector deletes the
  claim with the pod) and records the name in the pod's status. A claim it created earlier but could not record
  (a crash, a conflict) is found by owner and annotation instead of created twice. Pods being deleted or done get
  no new claims.
- For each claim, it drops ``status.reservedFor`` entries of pods that are gone, replaced (other uid) or done.
  A claim reserved by nobody is deallocated (``status.allocation`` cleared, then the
  ``resource.kubernetes.io/delete-protection`` finalizer removed), and one generated for a pod that is done,
  replaced or gone is deleted.

It watches pods with ``spec.resourceClaims`` (one dict lookup for any other pod write), claims and templates
through ``ClusterApi.observers`` like the other controllers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.cluster import errors
from kubesched.cluster.controllers.base import Clock, Controller, Key, Obj, key_of, meta_of
from kubesched.cluster.resources import ResourceType

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
FINALIZER = "resource.kubernetes.io/delete-protection"
_POD = "pod:"
_CLAIM = "claim:"
_NAME_PREFIX_MAX = 57  # generated names stay within 63 characters with the 5 random ones and the dash


def _pod_done(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def claim_names(pod: Obj) -> list[str]:
    """The claims a pod uses: named ones and those its status records for templates."""
    out: list[str] = []
    recorded = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
    }
    for pc in (pod.get("spec") or {}).get("resourceClaims") or ():
        if pc.get("resourceClaimName"):
            out.append(str(pc["resourceClaimName"]))
        elif recorded.get(pc.get("name")):
            out.append(str(recorded[pc.get("name")]))
    return out


class ResourceClaimController(Controller):
    name = "resourceclaim-controller"

    def __init__(self, api: ClusterApi, clock: Clock) -> None:
        super().__init__(api, clock)
        self.pods_t: ResourceType = api.rtype("", "v1", "pods")
        self.claims_t: ResourceType = api.rtype("resource.k8s.io", "v1", "resourceclaims")
        self.templates_t: ResourceType = api.rtype("resource.k8s.io", "v1", "resourceclaimtemplates")
        # (namespace, template) -> pods waiting for it
        self._waiting: dict[tuple[str, str], set[str]] = {}

    # -- events ------------------------------------------------------------------------------------------------

    def observe(self, rtype: ResourceType, etype: str, new: Obj | None, old: Obj | None) -> None:
        if rtype is self.pods_t:
            obj = new if new is not None else old
            if obj is None or not (obj.get("spec") or {}).get("resourceClaims"):
                return
            ns, name = key_of(obj)
            if new is not None:
                self.queue.add((ns, _POD + name))
            if new is None or _pod_done(new) or meta_of(new).get("deletionTimestamp"):
                for claim in claim_names(obj):
                    self.queue.add((ns, _CLAIM + claim))
        elif rtype is self.claims_t:
            obj = new if new is not None else old
            if obj is not None and new is not None:
                ns, name = key_of(obj)
                self.queue.add((ns, _CLAIM + name))
        elif rtype is self.templates_t and new is not None:
            waiting = self._waiting.pop(key_of(new), set())
            for pod in waiting:
                self.queue.add((key_of(new)[0], _POD + pod))

    def start(self) -> None:
        for st in self.api.store.scan(self.pods_t.storage_key):
            if (st.obj.get("spec") or {}).get("resourceClaims"):
                self.queue.add((key_of(st.obj)[0], _POD + key_of(st.obj)[1]))
        for st in self.api.store.scan(self.claims_t.storage_key):
            self.queue.add((key_of(st.obj)[0], _CLAIM + key_of(st.obj)[1]))

    # -- sync --------------------------------------------------------------------------------------------------

    def sync(self, key: Key) -> None:
        ns, tagged = key
        if tagged.startswith(_POD):
            self._sync_pod(ns, tagged[len(_POD) :])
        elif tagged.startswith(_CLAIM):
            self._sync_claim(ns, tagged[len(_CLAIM) :])

    def _get(self, rtype: ResourceType, ns: str, name: str) -> Obj | None:
        st = self.api.store.get(rtype.storage_key, (ns, name))
        return st.obj if st is not None else None

    def _sync_pod(self, ns: str, name: str) -> None:
        pod = self._get(self.pods_t, ns, name)
        if pod is None or meta_of(pod).get("deletionTimestamp") or _pod_done(pod):
            return
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or ())
        recorded = {s.get("name") for s in statuses}
        added: list[dict[str, Any]] = []
        for pc in (pod.get("spec") or {}).get("resourceClaims") or ():
            template_name = pc.get("resourceClaimTemplateName")
            if not template_name or pc.get("name") in recorded:
                continue
            claim = self._existing_claim(pod, str(pc.get("name")))
            if claim is None:
                template = self._get(self.templates_t, ns, str(template_name))
                if template is None:
                    self._waiting.setdefault((ns, str(template_name)), set()).add(name)
                    self.events.emit(
                        pod,
                        "Warning",
                        "FailedResourceClaimCreation",
                        f'PodResourceClaim {pc.get("name")}: resource claim template "{template_name}": '
                        f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found',
                    )
                    continue
                claim = self.api.create(
                    self.claims_t, self._claim_from(pod, str(pc.get("name")), template), ns
                ).obj
            added.append({"name": pc.get("name"), "resourceClaimName": meta_of(claim).get("name")})
        if not added:
            return
        status = dict(pod.get("status") or {})
        status["resourceClaimStatuses"] = statuses + added
        self.api.update(self.pods_t, {**pod, "status": status}, ns, name, subresource="status")

    def _existing_claim(self, pod: Obj, pod_claim: str) -> Obj | None:
        uid = meta_of(pod).get("uid")
        for st in self.api.store.scan(self.claims_t.storage_key, meta_of(pod).get("namespace") or ""):
            meta = meta_of(st.obj)
            if (meta.get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) != pod_claim:
                continue
            if any(r.get("uid") == uid and r.get("controller") for r in meta.get("ownerReferences") or ()):
                return st.obj
        return None

    @staticmethod
    def _claim_from(pod: Obj, pod_claim: str, template: Obj) -> Obj:
        pmeta = meta_of(pod)
        tmeta = (template.get("spec") or {}).get("metadata") or {}
        prefix = f"{pmeta.get('name')}-{pod_claim}"[:_NAME_PREFIX_MAX] + "-"
        annotations = dict(tmeta.get("annotations") or {})
        annotations[POD_CLAIM_NAME_ANNOTATION] = pod_claim
        meta: dict[str, Any] = {
            "generateName": prefix,
            "namespace": pmeta.get("namespace"),
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pmeta.get("name"),
                    "uid": pmeta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if tmeta.get("labels"):
            meta["labels"] = dict(tmeta["labels"])
        spec = (template.get("spec") or {}).get("spec") or {}
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta, "spec": spec}

    def _pod_still_uses(self, ns: str, ref: Obj) -> bool:
        pod = self._get(self.pods_t, ns, str(ref.get("name") or ""))
        if pod is None or meta_of(pod).get("uid") != ref.get("uid") or _pod_done(pod):
            return False
        # A pod being deleted before it ever ran on a node will not use the claim.
        return not (meta_of(pod).get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"))

    def _sync_claim(self, ns: str, name: str) -> None:
        claim = self._get(self.claims_t, ns, name)
        if claim is None:
            return
        status = dict(claim.get("status") or {})
        reserved = list(status.get("reservedFor") or ())
        valid = [r for r in reserved if r.get("resource") != "pods" or self._pod_still_uses(ns, r)]
        if valid:
            if len(valid) != len(reserved):
                status["reservedFor"] = valid
                self.api.update(self.claims_t, {**claim, "status": status}, ns, name, subresource="status")
            return
        owner = next((r for r in meta_of(claim).get("ownerReferences") or () if r.get("controller")), None)
        if owner is not None and owner.get("kind") == "Pod":
            pod = self._get(self.pods_t, ns, str(owner.get("name") or ""))
            # Generated for a pod that is done, replaced or gone: the claim goes too (upstream leaves "gone" to
            # the garbage collector; the local cluster's collector does not follow pods' dependents).
            if pod is None or meta_of(pod).get("uid") != owner.get("uid") or _pod_done(pod):
                self._deallocate(claim, status)
                try:
                    self.api.delete(self.claims_t, ns, name)
                except errors.ApiError as e:
                    if e.code != 404:
                        raise
                return
        # A claim the scheduler is about to allocate has the finalizer and nothing else yet: leave it be.
        deleting = bool(meta_of(claim).get("deletionTimestamp"))
        if status.get("allocation") or reserved or deleting:
            self._deallocate(claim, status)

    def _deallocate(self, claim: Obj, status: dict[str, Any]) -> None:
        ns, name = key_of(claim)
        if status.get("allocation") or status.get("reservedFor"):
            status.pop("allocation", None)
            status.pop("reservedFor", None)
            claim = self.api.update(
                self.claims_t, {**claim, "status": status}, ns, name, subresource="status"
            )[0].obj
        finalizers = list(meta_of(claim).get("finalizers") or ())
        if FINALIZER in finalizers:
            meta = dict(meta_of(claim))
            meta["finalizers"] = [f for f in finalizers if f != FINALIZER]
            self.api.update(self.claims_t, {**claim, "metadata": meta}, ns, name)


__all__ = ["FINALIZER", "POD_CLAIM_NAME_ANNOTATION", "ResourceClaimController", "claim_names"]
