"""CustomResourceDefinitions: defaults and status, and serving the defined types as soon as the CRD is stored
(its Established condition is true from the start), unserving them and their objects on delete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.apimachinery.timefmt import now_rfc3339
from kubesched.cluster import validation
from kubesched.cluster.kinds.printing import NAME_COLUMN, Column, col, meta_of, name_of
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import Obj, ResourceType
from kubesched.cluster.storage.interface import Stored

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

# No printer upstream: Name and the creation time as an RFC 3339 date column.
COLUMNS: list[Column] = [NAME_COLUMN, col("Created At", "When the object was created.", type="date")]


class CustomResourceDefinitionStrategy(Strategy):
    columns = COLUMNS
    owns_dependents = True

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        spec = dict(obj.get("spec") or {})
        names = dict(spec.get("names") or {})
        if names.get("kind"):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        spec["names"] = names
        spec.setdefault("conversion", {"strategy": "None"})
        obj["spec"] = spec
        storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
        ts = now_rfc3339()
        obj["status"] = {
            "acceptedNames": {k: v for k, v in names.items()},
            "storedVersions": storage,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": ts, "reason": "NoConflicts",
                 "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": ts,
                 "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
            ],
        }  # fmt: skip

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return validation.validate_crd(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return validation.validate_crd_update(new, old)

    def prepare_for_update(self, new: Obj, prev: Obj) -> None:
        new["status"] = prev.get("status")

    def after_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        serve(api, obj)

    def after_update(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        serve(api, obj)

    def delete(self, api: ClusterApi, rtype: ResourceType, old: Stored) -> tuple[Stored, bool] | None:
        unserve(api, old.obj)
        return api.remove(rtype, old), True

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return [name_of(obj), meta_of(obj).get("creationTimestamp") or ""]


def serve(api: ClusterApi, crd: Obj) -> None:
    """Register (or re-register) the CRD's served versions, drop the ones no longer served."""
    spec = crd["spec"]
    names = spec["names"]
    for v in spec.get("versions") or []:
        if not v.get("served", True):
            api.registry.remove(spec["group"], v["name"], names["plural"])
            continue
        sub = v.get("subresources") or {}
        subresources = tuple(s for s in ("status", "scale") if s in sub)
        api.registry.add(
            ResourceType(
                spec["group"],
                v["name"],
                names["plural"],
                names["kind"],
                spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=subresources,
                allow_unconditional_update=False,
                storage=f"{spec['group']}/{names['plural']}",
                crd=crd,
                builtin=False,
            )
        )


def unserve(api: ClusterApi, crd: Obj) -> None:
    spec = crd["spec"]
    for v in spec.get("versions") or []:
        api.registry.remove(spec["group"], v["name"], spec["names"]["plural"])
    api.store.drop_collection(f"{spec['group']}/{spec['names']['plural']}")


STRATEGY = CustomResourceDefinitionStrategy()
