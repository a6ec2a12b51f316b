"""The PersistentVolume controller (kube-controller-manager's ``persistentvolume-binder``, upstream
``pkg/controller/volume/persistentvolume``), the part the scheduler's VolumeBinding relies on:

- an unbound claim of an ``Immediate`` class gets the smallest available PV that fits (class, size, access and
  volume modes, selector); if there is none and its class has a provisioner, the claim is annotated
  ``volume.kubernetes.io/storage-provisioner`` for that provisioner;
- a ``WaitForFirstConsumer`` claim waits for the scheduler: either a PV whose ``claimRef`` the scheduler set
  (bound now), or ``volume.kubernetes.io/selected-node`` on the claim (handed to the provisioner, as above);
- binding writes the PV's ``claimRef`` and phase Bound, then the claim's ``volumeName``,
  ``pv.kubernetes.io/bind-completed`` (and ``bound-by-controller`` where the controller chose), phase Bound,
  capacity and access modes;
- a PV without a claim is Available; one whose claim is gone is Released, and deleted when its reclaim policy is
  Delete; a claim whose PV is gone is Lost.

Keys share one work queue: a claim is ``(namespace, name)``, a volume ``("", name)`` (claims always have a
namespace).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesched.apimachinery.volumes import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    NOT_SUPPORTED_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    annotations_of,
    claim_class,
    find_matching_volume,
    is_volume_bound_to_claim,
)
from kubesched.cluster import errors
from kubesched.cluster.controllers.base import (
    FIELD_MANAGER,
    Clock,
    Controller,
    Key,
    Obj,
    copy_json,
    meta_of,
)

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

NAME = "persistentvolume-binder"


def _claim_ref(claim: Obj) -> Obj:
    meta = meta_of(claim)
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": meta.get("namespace") or "",
        "name": meta.get("name") or "",
        "uid": meta.get("uid") or "",
        "resourceVersion": meta.get("resourceVersion") or "",
    }


class PersistentVolumeController(Controller):
    name = NAME

    def __init__(self, api: ClusterApi, clock: Clock) -> None:
        super().__init__(api, clock)
        self.pv_type = api.rtype("", "v1", "persistentvolumes")
        self.pvc_type = api.rtype("", "v1", "persistentvolumeclaims")
        self.sc_type = api.rtype("storage.k8s.io", "v1", "storageclasses")
        # claim key -> PV names whose claimRef names it (pre-bound by a user or by the scheduler)
        self._refs: dict[Key, set[str]] = {}

    # -- events -------------------------------------------------------------------------------------------------

    def start(self) -> None:
        for rtype, handler in ((self.pv_type, self.on_volume), (self.pvc_type, self.on_claim)):
            items, _ = self.api.store.list(rtype.storage_key)
            for st in items:
                handler("ADDED", st.obj, None)

    def _ref_key(self, pv: Obj | None) -> Key | None:
        ref = ((pv or {}).get("spec") or {}).get("claimRef")
        if not ref:
            return None
        return (str(ref.get("namespace") or ""), str(ref.get("name") or ""))

    def on_volume(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        name = str(meta_of(new or old or {}).get("name") or "")
        old_ref, new_ref = self._ref_key(old), self._ref_key(new)
        if old_ref is not None and old_ref != new_ref:
            self._refs.get(old_ref, set()).discard(name)
        if new_ref is not None:
            self._refs.setdefault(new_ref, set()).add(name)
            self.queue.add(new_ref)
        if old_ref is not None:
            self.queue.add(old_ref)
        if new is not None:
            self.queue.add(("", name))

    def on_claim(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        claim = new or old or {}
        key = (str(meta_of(claim).get("namespace") or ""), str(meta_of(claim).get("name") or ""))
        if new is not None:
            self.queue.add(key)
        for pv_name in self._refs.get(key, ()):
            self.queue.add(("", pv_name))
        volume = ((claim.get("spec") or {}).get("volumeName")) or ""
        if volume:
            self.queue.add(("", volume))

    def on_class(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        """A new or changed class may let waiting claims of it bind or provision."""
        if new is None:
            return
        cls = str(meta_of(new).get("name") or "")
        items, _ = self.api.store.list(self.pvc_type.storage_key)
        for st in items:
            if claim_class(st.obj) == cls and not (st.obj.get("spec") or {}).get("volumeName"):
                self.queue.add(st.key)

    # -- sync ---------------------------------------------------------------------------------------------------

    def sync(self, key: Key) -> None:
        if key[0]:
            st = self.api.lookup(self.pvc_type, key[0], key[1])
            if st is not None:
                self._sync_claim(st.obj)
        else:
            st = self.api.lookup(self.pv_type, None, key[1])
            if st is not None:
                self._sync_volume(st.obj)

    def _volumes(self) -> list[Obj]:
        items, _ = self.api.store.list(self.pv_type.storage_key)
        return [st.obj for st in items]

    def _sync_claim(self, claim: Obj) -> None:
        if meta_of(claim).get("deletionTimestamp"):
            return
        spec = claim.get("spec") or {}
        ann = annotations_of(claim)
        volume_name = spec.get("volumeName") or ""
        if volume_name:
            st = self.api.lookup(self.pv_type, None, volume_name)
            if st is None:
                if ann.get(ANN_BIND_COMPLETED):
                    self._set_claim_phase(claim, "Lost")
                else:
                    self._set_claim_phase(claim, "Pending")
                return
            pv = st.obj
            ref = (pv.get("spec") or {}).get("claimRef")
            if not ref:
                self._bind(pv, claim, by_controller=False)
            elif is_volume_bound_to_claim(pv, claim):
                self._bind(pv, claim, by_controller=False)
            # else: the PV went to another claim; the claim stays pending as upstream does
            return
        # Unbound: a PV pre-bound to it (by a user or the scheduler's PreBind) comes first.
        volumes = self._volumes()
        cls = claim_class(claim)
        sc_st = self.api.lookup(self.sc_type, None, cls) if cls else None
        sc = sc_st.obj if sc_st is not None else None
        delayed = sc is not None and sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
        match = find_matching_volume(claim, volumes, delay_binding=delayed)
        if match is not None:
            self._bind(dict(match), claim, by_controller=True)
            return
        if delayed and ANN_SELECTED_NODE not in ann:
            self._set_claim_phase(claim, "Pending")
            return  # waiting for the first consumer to be scheduled
        provisioner = str((sc or {}).get("provisioner") or "")
        if sc is None or not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            self._set_claim_phase(claim, "Pending")
            return
        if ann.get(ANN_STORAGE_PROVISIONER) != provisioner:
            new = copy_json(claim)
            new["metadata"].setdefault("annotations", {}).update(
                {ANN_STORAGE_PROVISIONER: provisioner, ANN_BETA_STORAGE_PROVISIONER: provisioner}
            )
            self._update_claim(new)
            return
        self._set_claim_phase(claim, "Pending")

    def _bind(self, pv: Obj, claim: Obj, *, by_controller: bool) -> None:
        """``bind``: the PV first (claimRef, phase Bound), then the claim (volumeName, annotations, status)."""
        pv_name = str(meta_of(pv).get("name") or "")
        spec = pv.get("spec") or {}
        ref = spec.get("claimRef") or {}
        cmeta = meta_of(claim)
        if not ref or ref.get("uid") != cmeta.get("uid"):
            new_pv = copy_json(pv)
            new_pv["spec"]["claimRef"] = _claim_ref(claim)
            if not ref:
                new_pv["metadata"].setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
            st, _ = self.api.update(self.pv_type, new_pv, None, pv_name, field_manager=FIELD_MANAGER)
            pv = st.obj
        if (pv.get("status") or {}).get("phase") != "Bound":
            new_pv = copy_json(pv)
            new_pv["status"] = {**(pv.get("status") or {}), "phase": "Bound"}
            st, _ = self.api.update(
                self.pv_type, new_pv, None, pv_name, subresource="status", field_manager=FIELD_MANAGER
            )
            pv = st.obj
        cspec = claim.get("spec") or {}
        ann = annotations_of(claim)
        if cspec.get("volumeName") != pv_name or ANN_BIND_COMPLETED not in ann:
            new = copy_json(claim)
            new["spec"]["volumeName"] = pv_name
            anns = new["metadata"].setdefault("annotations", {})
            anns[ANN_BIND_COMPLETED] = "yes"
            if by_controller or not cspec.get("volumeName"):
                anns[ANN_BOUND_BY_CONTROLLER] = "yes"
            claim = self._update_claim(new)
        status = claim.get("status") or {}
        pv_spec = pv.get("spec") or {}
        want = {
            **status,
            "phase": "Bound",
            "accessModes": list(pv_spec.get("accessModes") or ()),
            "capacity": dict(pv_spec.get("capacity") or {}),
        }
        if status != want:
            new = copy_json(claim)
            new["status"] = want
            self.api.update(
                self.pvc_type,
                new,
                cmeta.get("namespace"),
                str(cmeta.get("name") or ""),
                subresource="status",
                field_manager=FIELD_MANAGER,
            )

    def _update_claim(self, claim: Obj) -> Obj:
        meta = meta_of(claim)
        st, _ = self.api.update(
            self.pvc_type,
            claim,
            meta.get("namespace"),
            str(meta.get("name") or ""),
            field_manager=FIELD_MANAGER,
        )
        return st.obj

    def _set_claim_phase(self, claim: Obj, phase: str) -> None:
        if (claim.get("status") or {}).get("phase") == phase:
            return
        new = copy_json(claim)
        new["status"] = {**(claim.get("status") or {}), "phase": phase}
        meta = meta_of(claim)
        self.api.update(
            self.pvc_type,
            new,
            meta.get("namespace"),
            str(meta.get("name") or ""),
            subresource="status",
            field_manager=FIELD_MANAGER,
        )

    def _set_volume_phase(self, pv: Obj, phase: str) -> None:
        if (pv.get("status") or {}).get("phase") == phase:
            return
        new = copy_json(pv)
        new["status"] = {**(pv.get("status") or {}), "phase": phase}
        self.api.update(
            self.pv_type,
            new,
            None,
            str(meta_of(pv).get("name") or ""),
            subresource="status",
            field_manager=FIELD_MANAGER,
        )

    def _sync_volume(self, pv: Obj) -> None:
        if meta_of(pv).get("deletionTimestamp"):
            return
        spec = pv.get("spec") or {}
        ref = spec.get("claimRef")
        if not ref:
            self._set_volume_phase(pv, "Available")
            return
        ns, name = str(ref.get("namespace") or ""), str(ref.get("name") or "")
        st = self.api.lookup(self.pvc_type, ns, name)
        claim = st.obj if st is not None else None
        if claim is not None and ref.get("uid") and meta_of(claim).get("uid") != ref.get("uid"):
            claim = None  # a new claim of the same name is not the one this PV was bound to
        if claim is None:
            if not ref.get("uid"):
                self._set_volume_phase(pv, "Available")  # pre-bound to a claim that does not exist yet
                return
            self._release(pv)
            return
        volume_name = (claim.get("spec") or {}).get("volumeName") or ""
        pv_name = str(meta_of(pv).get("name") or "")
        if not volume_name:
            self.queue.add((ns, name))  # pre-bound to this claim: the claim's sync binds
            return
        if volume_name == pv_name:
            self._set_volume_phase(pv, "Bound")
            return
        # The claim is bound to another PV.
        if annotations_of(pv).get(ANN_BOUND_BY_CONTROLLER):
            new = copy_json(pv)
            new["spec"].pop("claimRef", None)
            new["metadata"].get("annotations", {}).pop(ANN_BOUND_BY_CONTROLLER, None)
            self.api.update(self.pv_type, new, None, pv_name, field_manager=FIELD_MANAGER)
        else:
            self._release(pv)

    def _release(self, pv: Obj) -> None:
        """The claim is gone: Released, and deleted under reclaim policy Delete."""
        pv_name = str(meta_of(pv).get("name") or "")
        policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain"
        if policy == "Delete":
            try:
                self.api.delete(self.pv_type, None, pv_name)
            except errors.ApiError as e:
                if e.code != 404:
                    raise
            return
        self._set_volume_phase(pv, "Released")


def volume_key(name: str) -> Key:
    return ("", name)


__all__ = ["NAME", "PersistentVolumeController", "volume_key"]
