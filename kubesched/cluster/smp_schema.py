"""Patch metadata of the built-in kinds: which lists merge by key, which are sets, which values are atomic.

Read from Kubernetes' published definitions (``schema/published.py``), which carry the markers of the upstream Go
types: ``x-kubernetes-patch-strategy``/``x-kubernetes-patch-merge-key`` for strategic merge patch,
``x-kubernetes-list-type``/``x-kubernetes-list-map-keys``/``x-kubernetes-map-type`` for server-side apply. A
kind's tree holds only the fields that differ from the defaults:

- objects merge field by field (both engines);
- lists are replaced whole by a strategic merge patch, and are atomic (owned as one field) for server-side apply.

Custom resources get only the ``metadata`` part (their lists are atomic). Trees are built once per kind, on first
use, and shared (recursive definitions point back at themselves).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.cluster.schema import definition_for, definitions
from kubesched.cluster.schema.published import ref_name

Schema = Mapping[str, "Field"]


@dataclass(frozen=True, slots=True)
class Field:
    """How one field is patched and tracked. ``of`` describes the value (object) or each item (list)."""

    # Strategic merge patch
    merge_key: str = ""  # a list of objects merged item by item on this key
    merge_set: bool = False  # a list of scalars merged as a set
    replace: bool = False  # an object replaced whole (patchStrategy=replace)
    # Server-side apply
    list_keys: tuple[str, ...] = ()  # listType=map with these keys
    list_set: bool = False  # listType=set
    atomic: bool = False  # the whole value is one field (structType/mapType=atomic, or a replaced object)
    item_atomic: bool = False  # each item of a list-map is one field (its struct is atomic)
    of: Schema | None = None


DEFAULT = Field()
ATOMIC = Field(atomic=True)
EMPTY: Schema = {}


# Defaults that upstream fills for list-map key fields a client may omit (server-side apply keys items by them).
LIST_KEY_DEFAULTS: Mapping[str, object] = {"protocol": "TCP"}

OBJECT_META_DEFINITION = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_trees: dict[str, dict[str, Field]] = {}


def _struct(name: str) -> dict[str, Field]:
    """The non-default fields of one published struct (memoised before it is filled, so cycles close)."""
    tree = _trees.get(name)
    if tree is not None:
        return tree
    tree = {}
    _trees[name] = tree
    for key, prop in (definitions().get(name, {}).get("properties") or {}).items():
        field = _field(prop)
        if field != DEFAULT:
            tree[key] = field
    return tree


def _resolve(prop: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    if "$ref" in prop:
        name = ref_name(prop["$ref"])
        return name, definitions().get(name) or {}
    return "", prop


def _primary_type(node: Mapping[str, Any]) -> Any:
    kind = node.get("type")
    if isinstance(kind, list):
        return next((k for k in kind if k != "null"), None)
    return kind


def _field(prop: Mapping[str, Any]) -> Field:
    name, node = _resolve(prop)
    strategies = set(str(prop.get("x-kubernetes-patch-strategy") or "").split(","))
    if "properties" in node:
        of = _struct(name) if name else None
        # patchStrategy=replace replaces the struct whole, and server-side apply owns it as one field.
        replace = "replace" in strategies
        atomic = (
            node.get("x-kubernetes-map-type") == "atomic" or prop.get("x-kubernetes-map-type") == "atomic"
        )
        return Field(of=of or None, atomic=atomic or replace, replace=replace)
    kind = _primary_type(node)
    if kind == "array":
        item_name, item = _resolve(prop.get("items") or {})
        merge = "merge" in strategies
        list_type = prop.get("x-kubernetes-list-type")
        keys = tuple(prop.get("x-kubernetes-list-map-keys") or ()) if list_type == "map" else ()
        if "properties" in item:
            return Field(
                merge_key=str(prop.get("x-kubernetes-patch-merge-key") or "") if merge else "",
                list_keys=keys,
                of=(_struct(item_name) if item_name else None) or None,
                item_atomic=item.get("x-kubernetes-map-type") == "atomic",
            )
        return Field(merge_set=merge, list_set=list_type == "set")
    if kind == "object" and prop.get("x-kubernetes-map-type") == "atomic":
        return ATOMIC
    return DEFAULT


@functools.cache
def _kind_tree(kind: str, api_version: str) -> Schema:
    group, _, version = api_version.rpartition("/")
    name = definition_for(group, version, kind) if api_version else None
    if name is None:  # no apiVersion given: the core kind of that name, else any group's
        name = definition_for("", "v1", kind)
    if name is None:
        name = next(
            (
                n
                for n, d in definitions().items()
                if any(g.get("kind") == kind for g in d.get("x-kubernetes-group-version-kind") or ())
            ),
            None,
        )
    return _struct(name) if name is not None else _generic()


@functools.cache
def _generic() -> Schema:
    """Custom resources and unpublished kinds: only ``metadata`` is known."""
    return {"metadata": Field(of=_struct(OBJECT_META_DEFINITION))}


def schema_for(kind: str, *, builtin: bool = True, api_version: str = "") -> Schema:
    """The root schema of ``kind`` (of ``api_version`` when given: core/v1 and events.k8s.io/v1 both have an
    Event); custom resources (``builtin=False``) only get the metadata rules."""
    if not builtin:
        return _generic()
    return _kind_tree(kind, api_version)
