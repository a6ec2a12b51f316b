"""The per-kind behaviour ``ClusterApi`` asks for, as upstream's ``registry/<kind>/strategy.go`` holds it.

``Strategy`` is the behaviour of a kind with nothing special (most built-in kinds); the kinds that differ subclass
it in their own module (``pods.py``, ``namespaces.py``, ...). ``ClusterApi`` keeps what every kind shares
(server-owned metadata, optimistic concurrency, finalizers, garbage collection) and calls these hooks where kinds
differ, so a kind's defaults, validation, status/spec split, field selectors and printer columns are read in one
place.

Hooks that need the rest of the cluster (a PriorityClass lookup, serving a CRD's types) receive the ``ClusterApi``;
the others are pure functions of the objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kubesched.apimachinery.validation import name_is_dns_subdomain, validate_path_segment_name
from kubesched.cluster import validation
from kubesched.cluster.kinds.printing import Column, Printer
from kubesched.cluster.resources import FieldGetter, Obj, ResourceType
from kubesched.cluster.storage.interface import Stored

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

Cause = dict[str, str]
NameCheck = Callable[[str, bool], list[str]]

# Built-in kinds whose scale subresource reads these paths (CRDs name their own).
SPEC_REPLICAS, STATUS_REPLICAS = ".spec.replicas", ".status.replicas"


class Strategy:
    """Behaviour of one kind (see the module docstring); this base is the behaviour of a plain built-in kind."""

    # Fields usable in a fieldSelector beyond metadata.name and metadata.namespace (getters read the stored form).
    fields: Mapping[str, FieldGetter] = {}
    # kubectl's table columns and the row printer; None: Name and Age.
    columns: list[Column] | None = None
    # Deleting an object of this kind sends the garbage collector looking for its dependents. A scan per delete
    # costs O(objects), so only kinds that own things in practice set it (pods own nothing).
    owns_dependents: bool = False
    # How names are checked (RFC 1123 subdomain for most kinds).
    name_check: NameCheck = staticmethod(name_is_dns_subdomain)
    # Kinds served as a second view of another kind's storage convert on the way out and in (events.k8s.io/v1).
    to_view: Callable[[Obj], Obj] | None = None
    from_view: Callable[[Obj], Obj] | None = None

    def __init__(
        self,
        *,
        fields: Mapping[str, FieldGetter] | None = None,
        columns: list[Column] | None = None,
        printer: Printer | None = None,
        owns_dependents: bool | None = None,
    ) -> None:
        # Instances of the base carry a plain kind's table (Secret, ConfigMap) or flags without a subclass.
        if fields is not None:
            self.fields = fields
        if columns is not None:
            self.columns = columns
        if printer is not None:
            self.print_row = printer  # type: ignore[method-assign,assignment]
        if owns_dependents is not None:
            self.owns_dependents = owns_dependents

    # -- create --------------------------------------------------------------------------------------------------

    def stored_api_version(self, rtype: ResourceType) -> str:
        """The apiVersion objects are stored with."""
        return rtype.api_version

    def tracks_generation(self, rtype: ResourceType) -> bool:
        """Whether metadata.generation starts at 1 and counts spec changes."""
        return rtype.has_generation

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        """Defaults and server-set fields of a new object (in place); admission errors are raised from here."""

    def decode_error(self, rtype: ResourceType, obj: Obj) -> str | None:
        """The 400 upstream gives when the body does not decode into the kind's Go type (quantities, typed
        fields), else None."""
        return validation.decode_error(rtype, obj)

    def validate_create(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        causes = self.validate_object(rtype, obj)
        if not causes:
            # Upstream's last, kind-independent pass (rest.BeforeCreate): common metadata rules with the name only
            # required to fit in a URL path segment. It matters for kinds with lax rules of their own (Event).
            causes = validation.validate_object_meta(
                obj.get("metadata"), rtype.namespaced, validate_path_segment_name
            )
        return causes

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        """The kind's own rules for a new object."""
        return validation.validate_object_meta(obj.get("metadata"), rtype.namespaced, self.name_check)

    def after_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        """What follows a committed create (a controller's immediate reaction)."""

    # -- update --------------------------------------------------------------------------------------------------

    def main_resource_update(self, rtype: ResourceType, new: Obj, prev: Obj) -> None:
        """The status/spec split for a write to the main resource (in place): with a status subresource, status
        only changes through it."""
        if rtype.status_subresource:
            if "status" in prev:
                new["status"] = prev["status"]
            else:
                new.pop("status", None)

    def subresource_update(self, rtype: ResourceType, subresource: str, new: Obj, prev: Obj) -> Obj | None:
        """The object a write to ``subresource`` stores: the stored one with only that subresource's fields taken
        from the request. None: not a subresource with fields of its own (the write is treated as a main one)."""
        if subresource == "status":
            merged = dict(prev)
            if "status" in new:
                merged["status"] = new["status"]
            return merged
        return None

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return validation.validate_object_meta_update(new.get("metadata"), old.get("metadata"))

    def prepare_for_update(self, new: Obj, prev: Obj) -> None:
        """Fields a main-resource update may not change, reset to the stored ones (in place, after validation)."""

    def spec_changed(self, rtype: ResourceType, new: Obj, prev: Obj) -> bool:
        """Whether the update changes anything that bumps metadata.generation (all but metadata and status)."""
        return changed_outside(new, prev, ("metadata", "status", "apiVersion", "kind"))

    def after_update(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        """What follows a committed update that did not complete a deletion."""

    # -- delete --------------------------------------------------------------------------------------------------

    def grace_period(self, obj: Obj, options: Obj) -> int:
        """Seconds a deletion waits for (only pods on a node have something to wait for)."""
        return 0

    def delete(self, api: ClusterApi, rtype: ResourceType, old: Stored) -> tuple[Stored, bool] | None:
        """A kind-specific deletion (namespace lifecycle, CRD), or None for the generic one."""
        return None

    def deletion_blocked(self, obj: Obj) -> bool:
        """Whether a deletion must wait for more than metadata.finalizers (a namespace's spec.finalizers)."""
        return False

    # -- scale subresource ---------------------------------------------------------------------------------------

    def scale_paths(self, rtype: ResourceType) -> tuple[str, str]:
        """(spec replicas path, status replicas path) for the scale subresource."""
        return SPEC_REPLICAS, STATUS_REPLICAS

    def scale_selector(self, rtype: ResourceType, obj: Obj) -> Any:
        """The scale subresource's status.selector: the label selector in its text form."""
        ls = (obj.get("spec") or {}).get("selector") or {}
        return (
            ",".join(f"{k}={v}" for k, v in (ls.get("matchLabels") or {}).items())
            if isinstance(ls, dict)
            else ls
        )

    # -- tables --------------------------------------------------------------------------------------------------

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        """The cells of ``columns`` for one object (only called when ``columns`` is set)."""
        raise NotImplementedError

    def row_conditions(self, obj: Obj) -> list[dict[str, str]] | None:
        """Row conditions kubectl reads (a finished pod's Completed)."""
        return None


def changed_outside(new: Obj, prev: Obj, skip: tuple[str, ...]) -> bool:
    """Whether any top-level field other than ``skip`` differs."""
    keys = (set(new) | set(prev)).difference(skip)
    return any(new.get(k) != prev.get(k) for k in keys)


DEFAULT = Strategy()
