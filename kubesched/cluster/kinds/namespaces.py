"""Namespaces: defaults, the default ServiceAccount, spec.finalizers and the finalize subresource, and the
namespace controller's lifecycle (Terminating, content sweep, finalization) done at once on delete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.apimachinery.timefmt import now_rfc3339
from kubesched.apimachinery.validation import name_is_dns_label
from kubesched.cluster import errors, validation
from kubesched.cluster.kinds.printing import AGE_COLUMN, NAME_COLUMN, Column, as_dict, col, created, name_of
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import FieldGetter, Obj, ResourceType, field_path
from kubesched.cluster.storage.interface import Stored

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

FIELDS: dict[str, FieldGetter] = {"status.phase": field_path("status.phase")}
COLUMNS: list[Column] = [NAME_COLUMN, col("Status", "Active or Terminating."), AGE_COLUMN]


class NamespaceStrategy(Strategy):
    fields = FIELDS
    columns = COLUMNS
    name_check = staticmethod(name_is_dns_label)

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        labels = dict(meta.get("labels") or {})
        labels["kubernetes.io/metadata.name"] = meta["name"]
        meta["labels"] = labels
        spec = dict(obj.get("spec") or {})
        spec.setdefault("finalizers", ["kubernetes"])
        obj["spec"] = spec
        obj["status"] = {"phase": "Active"}

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return validation.validate_namespace(obj)

    def after_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        sa = api.registry.get("", "v1", "serviceaccounts")
        name = obj["metadata"]["name"]
        if sa is not None and api.store.get(sa.storage_key, (name, "default")) is None:
            # What the controller manager's service-account controller does for every namespace.
            api.create(sa, {"metadata": {"name": "default", "namespace": name}}, name)

    def subresource_update(self, rtype: ResourceType, subresource: str, new: Obj, prev: Obj) -> Obj | None:
        if subresource == "finalize":
            merged = dict(prev)
            merged["spec"] = dict(
                prev.get("spec") or {}, finalizers=list((new.get("spec") or {}).get("finalizers") or [])
            )
            return merged
        return super().subresource_update(rtype, subresource, new, prev)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        causes = super().validate_update(rtype, new, old)
        causes.extend(validation.namespace_finalizer_causes(new))
        return causes

    def prepare_for_update(self, new: Obj, prev: Obj) -> None:
        # Status and spec.finalizers change only through the status and finalize subresources.
        new["status"] = prev.get("status", {"phase": "Active"})
        spec = dict(new.get("spec") or {})
        spec["finalizers"] = (prev.get("spec") or {}).get("finalizers", [])
        new["spec"] = spec

    def deletion_blocked(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("finalizers"))

    def delete(self, api: ClusterApi, rtype: ResourceType, old: Stored) -> tuple[Stored, bool] | None:
        return delete_namespace(api, rtype, old), False

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return [name_of(obj), as_dict(obj.get("status")).get("phase") or "", created(obj, now)]


def delete_namespace(api: ClusterApi, rtype: ResourceType, old: Stored) -> Stored:
    """Mark the namespace Terminating, delete its content, then finalize it (the namespace controller's job)."""
    meta = old.obj.get("metadata") or {}
    if not meta.get("deletionTimestamp"):
        new = dict(old.obj)
        new["metadata"] = dict(meta, deletionTimestamp=now_rfc3339(), deletionGracePeriodSeconds=0)
        new["metadata"].pop("resourceVersion", None)
        new["status"] = {
            "phase": "Terminating",
            "conditions": [
                {"type": "NamespaceDeletionContentFailure", "status": "False", "reason": "ContentDeleted",
                 "message": "All content successfully deleted, may be waiting on finalization",
                 "lastTransitionTime": now_rfc3339()},
            ],
        }  # fmt: skip
        old = api.store.update(rtype.storage_key, new, old)
        api.notify(rtype, "MODIFIED", old.obj, None)
    sweep_namespace(api, rtype, meta["name"])
    return api.store.get(rtype.storage_key, ("", meta["name"])) or old


def sweep_namespace(api: ClusterApi, rtype: ResourceType, name: str) -> None:
    """Delete what is left in a terminating namespace; finalize it once empty."""
    remaining = 0
    seen: set[str] = set()
    for content in api.registry.all():
        if not content.namespaced or content.storage_key in seen or "delete" not in content.verbs:
            continue
        seen.add(content.storage_key)
        for st in api.store.scan(content.storage_key, name):
            try:
                _, removed = api.delete(content, name, st.key[1], {"propagationPolicy": "Background"})
            except errors.ApiError:
                removed = False
            if not removed:
                remaining += 1
    if remaining:
        return
    ns = api.store.get(rtype.storage_key, ("", name))
    if ns is None or not (ns.obj.get("metadata") or {}).get("deletionTimestamp"):
        return
    spec_fin = [f for f in (ns.obj.get("spec") or {}).get("finalizers") or [] if f != "kubernetes"]
    if spec_fin != list((ns.obj.get("spec") or {}).get("finalizers") or []):
        new = dict(ns.obj)
        new["spec"] = dict(ns.obj.get("spec") or {}, finalizers=spec_fin)
        new["metadata"] = dict(ns.obj["metadata"])
        new["metadata"].pop("resourceVersion", None)
        ns = api.store.update(rtype.storage_key, new, ns)
        api.notify(rtype, "MODIFIED", ns.obj, None)
    if not spec_fin and not (ns.obj.get("metadata") or {}).get("finalizers"):
        api.remove(rtype, ns)


STRATEGY = NamespaceStrategy()
