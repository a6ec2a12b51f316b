"""Objects of CustomResourceDefinitions: the generic strategy, driven by the CRD (generation, status subresource,
scale paths, printer columns)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.cluster.kinds.strategy import SPEC_REPLICAS, STATUS_REPLICAS, Cause, Strategy, changed_outside
from kubesched.cluster.resources import Obj, ResourceType
from kubesched.cluster.schema.structural import validate_custom_resource

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi


class CustomResourceStrategy(Strategy):
    # Custom resources may own things (operators' children), and their deletion is rare enough to scan for them.
    owns_dependents = True

    def tracks_generation(self, rtype: ResourceType) -> bool:
        return True

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        if rtype.status_subresource:
            obj.pop("status", None)  # CRs with a status subresource ignore status on create

    def _schema(self, rtype: ResourceType) -> Any:
        assert rtype.crd is not None
        for v in rtype.crd["spec"].get("versions") or []:
            if v.get("name") == rtype.version:
                return (v.get("schema") or {}).get("openAPIV3Schema")
        return None

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        """Metadata as every kind, then the CRD's structural schema (types, required, enums, bounds)."""
        causes = super().validate_object(rtype, obj)
        return causes or validate_custom_resource(self._schema(rtype), obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        causes = super().validate_update(rtype, new, old)
        return causes or validate_custom_resource(self._schema(rtype), new)

    def spec_changed(self, rtype: ResourceType, new: Obj, prev: Obj) -> bool:
        # Without a status subresource, a status change is a change like any other.
        skip = ("metadata", "status") if rtype.status_subresource else ("metadata",)
        return changed_outside(new, prev, (*skip, "apiVersion", "kind"))

    def _scale(self, rtype: ResourceType) -> dict[str, Any] | None:
        assert rtype.crd is not None
        for v in rtype.crd["spec"].get("versions") or []:
            if v["name"] == rtype.version:
                return (v.get("subresources") or {}).get("scale") or {}
        return None

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str]:
        sc = self._scale(rtype)
        if sc is None:
            return SPEC_REPLICAS, STATUS_REPLICAS
        return sc.get("specReplicasPath", SPEC_REPLICAS), sc.get("statusReplicasPath", STATUS_REPLICAS)

    def scale_selector(self, rtype: ResourceType, obj: Obj) -> Any:
        sc = self._scale(rtype)
        path = ".status.selector" if sc is None else sc.get("labelSelectorPath", "")
        return dig(obj, path) if path else None


def dig(obj: Obj, path: str) -> Any:
    """The value at a ``.a.b`` path, None where it stops."""
    cur: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


STRATEGY = CustomResourceStrategy()
