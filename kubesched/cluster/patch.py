"""PATCH engines of the local API server: JSON patch, JSON merge patch, strategic merge patch, server-side apply.

Every function is pure: it copies its inputs first, never mutates them, and its result shares no structure with
them (the server may change the result freely). Bad input raises ``ApiError``:

- a malformed patch (wrong shape, unknown directive, missing merge key) → 400 BadRequest;
- a JSON patch that does not apply (failed ``test``, missing path, unknown op) → 422 Invalid with upstream's
  generic message ``the server rejected our request due to an error in our request`` and empty details, as
  kube-apiserver answers (the precise reason is kept as the exception's ``__cause__`` for logs);
- a server-side apply conflict → 409 Conflict with ``FieldManagerConflict`` causes.

Strategic merge patch follows upstream ``strategicpatch`` (server side: parallel lists merged, unmatched nulls
ignored); the patch metadata of built-in kinds lives in ``smp_schema``. Server-side apply is a pragmatic subset
of structured-merge-diff, described at ``server_side_apply``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import jsonpatch
import jsonpointer
import orjson

from kubesched.cluster import errors
from kubesched.cluster.errors import ApiError
from kubesched.cluster.smp_schema import DEFAULT, EMPTY, LIST_KEY_DEFAULTS, Field, Schema, schema_for

Obj = dict[str, Any]

MAX_JSON_PATCH_OPERATIONS = 10000


def _copy(value: Any) -> Any:
    """A deep copy of JSON data (orjson round trip: several times faster than ``copy.deepcopy``)."""
    try:
        return orjson.loads(orjson.dumps(value))
    except TypeError:  # not plain JSON (huge ints, non-string keys): take the slow path
        return copy.deepcopy(value)


def _require_object(value: Any, what: str) -> None:
    if not isinstance(value, dict):
        raise errors.bad_request(f"{what} must be a JSON object, got {type(value).__name__}")


# ==============================================================================================================
# JSON patch (RFC 6902)


def _patch_not_applied() -> ApiError:
    return ApiError(
        422, "Invalid", "the server rejected our request due to an error in our request", details={}
    )


def json_patch(obj: Obj, ops: list[Any]) -> Obj:
    """Apply RFC 6902 operations to a copy of ``obj``.

    A body that is not a list of operation objects (with string ``op``/``path``/``from``) is 400; more than
    10000 operations is 413; an operation that cannot be applied is 422 (see the module docstring).
    """
    _require_object(obj, "the object to patch")
    if not isinstance(ops, list):
        raise errors.bad_request(f"json patch must be a list of operations, got {type(ops).__name__}")
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise errors.bad_request(f"json patch operation {i} must be an object")
        for member in ("op", "path", "from"):
            if member in op and not isinstance(op[member], str):
                raise errors.bad_request(f'json patch operation {i}: "{member}" must be a string')
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise ApiError(
            413,
            "RequestEntityTooLarge",
            f"Request entity too large: The allowed maximum operations in a JSON patch is "
            f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}",
        )
    doc = _copy(obj)
    try:
        # Copy the operations too: the library puts their "value" objects into the result as they are.
        result = jsonpatch.JsonPatch(_copy(ops)).apply(doc, in_place=True)
    except (
        jsonpatch.JsonPatchException,
        jsonpointer.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
    ) as e:
        raise _patch_not_applied() from e
    if not isinstance(result, dict):
        raise _patch_not_applied()
    return result


# ==============================================================================================================
# JSON merge patch (RFC 7386)


def merge_patch(obj: Obj, patch: Obj) -> Obj:
    """Apply an RFC 7386 merge patch: objects merge recursively, ``null`` deletes, anything else replaces."""
    _require_object(obj, "the object to patch")
    _require_object(patch, "a merge patch")
    return _merge_into(_copy(obj), _copy(patch))


def _merge_into(target: Obj, patch: Obj) -> Obj:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_into(current if isinstance(current, dict) else {}, value)
        else:
            target[key] = value
    return target


# ==============================================================================================================
# Strategic merge patch

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


class _Deleted:
    """What a map carrying ``$patch: delete`` turns into."""


_DELETED = _Deleted()


def strategic_merge_patch(obj: Obj, patch: Obj, kind: str, api_version: str = "") -> Obj:
    """Apply a strategic merge patch to a built-in object of ``kind``.

    Lists of objects with a patch merge key merge item by item, ``metadata.finalizers``-style scalar lists merge
    as sets, other lists are replaced; maps merge recursively and ``null`` deletes. Directives:
    ``$patch: replace|delete|merge`` (in maps and as list items), ``$deleteFromPrimitiveList/<f>``,
    ``$setElementOrder/<f>`` and ``$retainKeys`` — everything ``kubectl apply`` sends in its 3-way patches.

    Where upstream would store a directive verbatim (a patch value for a key the object lacks), the value is
    merged into an empty one instead, so directives and nulls never reach the stored object. ``$patch: merge``
    is accepted as the explicit default (upstream rejects it).
    """
    _require_object(obj, "the object to patch")
    _require_object(patch, "a strategic merge patch")
    result = _smp_map(_copy(obj), _copy(patch), schema_for(kind, api_version=api_version), "")
    if not isinstance(result, dict):
        raise errors.bad_request("$patch: delete cannot delete the whole object; use DELETE")
    return result


def _where(path: str) -> str:
    return f" (at {path})" if path else ""


def _hashable(value: Any) -> Hashable:
    if isinstance(value, (dict, list)):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return value


def _smp_map(original: Obj, patch: Obj, schema: Schema, path: str) -> Obj | _Deleted:
    """Merge ``patch`` into ``original`` (both ours to mutate) and return the result."""
    directive = patch.pop(_PATCH, None)
    if directive is not None:
        if directive == "replace":
            # Resolve nested directives and nulls against nothing: the result is the patch's own content.
            return _smp_map({}, patch, schema, path)
        if directive == "delete":
            return _DELETED
        if directive != "merge":
            raise errors.bad_request(f"unknown patch type: {directive} in map{_where(path)}")

    if _RETAIN_KEYS in patch:
        _retain_keys(original, patch, path)

    # $setElementOrder first: it merges its list itself (and removes it from the patch).
    for key in [k for k in patch if k.startswith(_SET_ORDER)]:
        _smp_ordered_list(original, patch, key, schema, path)

    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVES):
            _delete_from_primitive_list(original, key, value, path)
            continue
        field = schema.get(key, DEFAULT)
        sub = f"{path}.{key}" if path else key
        if value is None:
            original.pop(key, None)
            continue
        if key not in original:
            fresh = _fresh(value, field, sub)
            if fresh is not _DELETED:
                original[key] = fresh
            continue
        current = original[key]
        if isinstance(current, dict) and isinstance(value, dict):
            if field.replace:
                merged = _fresh(value, field, sub)
            else:
                merged = _smp_map(current, value, field.of or EMPTY, sub)
            original[key] = {} if merged is _DELETED else merged  # upstream leaves an empty map behind
        elif isinstance(current, list) and isinstance(value, list):
            original[key] = _smp_list(current, value, field, sub)
        else:
            fresh = _fresh(value, field, sub)
            if fresh is _DELETED:
                del original[key]
            else:
                original[key] = fresh
    return original


def _retain_keys(original: Obj, patch: Obj, path: str) -> None:
    keep = patch.pop(_RETAIN_KEYS)
    if not isinstance(keep, list):
        raise errors.bad_request(f"invalid patch format of retainKeys{_where(path)}")
    kept = {k for k in keep if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_PRIMITIVES, _SET_ORDER)):
            continue
        if key not in kept:
            raise errors.bad_request(
                f"invalid patch format of retainKeys{_where(path)}: {key!r} is not retained"
            )
    for key in [k for k in original if k not in kept]:
        del original[key]


def _delete_from_primitive_list(original: Obj, key: str, value: Any, path: str) -> None:
    name = key[len(_DELETE_PRIMITIVES) :]
    if not name or not isinstance(value, list):
        raise errors.bad_request(f"invalid patch format of primitive list{_where(path)}")
    current = original.get(name)
    if not isinstance(current, list):
        return
    if any(isinstance(v, dict) for v in current):
        raise errors.bad_request(f"{_DELETE_PRIMITIVES}{name} applies to lists of scalars only{_where(path)}")
    drop = {_hashable(v) for v in value}
    original[name] = [v for v in current if _hashable(v) not in drop]


def _smp_ordered_list(original: Obj, patch: Obj, key: str, schema: Schema, path: str) -> None:
    """Merge the list named by a ``$setElementOrder/<name>`` directive and put it in the directive's order."""
    order = patch.pop(key)
    name = key[len(_SET_ORDER) :]
    if not name or not isinstance(order, list):
        raise errors.bad_request(f"invalid patch format of setElementOrder list{_where(path)}")
    field = schema.get(name, DEFAULT)
    sub = f"{path}.{name}" if path else name
    merge_key = field.merge_key
    if merge_key and not all(isinstance(o, dict) and merge_key in o for o in order):
        raise errors.bad_request(
            f"invalid patch format of setElementOrder list{_where(sub)}: items need {merge_key!r}"
        )
    current = original.get(name)
    live: list[Any] = list(current) if isinstance(current, list) else []  # the order before merging
    patch_list = patch.pop(name, None)
    if patch_list is not None and not isinstance(patch_list, list):
        raise errors.bad_request(
            f"invalid patch format of setElementOrder list{_where(sub)}: {name} is not a list"
        )
    merged: list[Any]
    if patch_list is not None:
        _check_patch_follows_order(patch_list, order, merge_key, sub)
        merged = (
            _smp_list(current, patch_list, field, sub)
            if isinstance(current, list)
            else _fresh(patch_list, field, sub)
        )
    elif isinstance(current, list):
        merged = current
    else:
        return
    original[name] = _interleave(merged, order, live, _identity(merge_key))


def _check_patch_follows_order(patch_list: list[Any], order: list[Any], merge_key: str, path: str) -> None:
    """The patch's items (deletions aside) must appear in the directive, in the same relative order."""
    ident = _identity(merge_key)
    wanted = [ident(o) for o in order]
    at = 0
    for item in patch_list:
        if isinstance(item, dict) and _PATCH in item:
            continue
        if merge_key and not (isinstance(item, dict) and merge_key in item):
            raise errors.bad_request(
                f"map: {item} does not contain declared merge key: {merge_key}{_where(path)}"
            )
        target = ident(item)
        while at < len(wanted) and wanted[at] != target:
            at += 1
        if at == len(wanted):
            raise errors.bad_request(
                f"the order in patch list {patch_list} doesn't match $setElementOrder list {order}"
            )
        at += 1


def _identity(merge_key: str) -> Callable[[Any], Hashable]:
    if merge_key:
        return lambda item: _hashable(item.get(merge_key)) if isinstance(item, dict) else _hashable(item)
    return _hashable


def _interleave(
    merged: list[Any], order: list[Any], server_order: list[Any], ident: Callable[[Any], Hashable]
) -> list[Any]:
    """Upstream's element order: items named by ``order`` come in that order; the others keep their live order
    and are slotted in before the first ordered item that came after them in the live list."""
    rank: dict[Hashable, int] = {}
    for i, o in enumerate(order):
        rank.setdefault(ident(o), i)
    live_rank: dict[Hashable, int] = {}
    for i, o in enumerate(server_order):
        live_rank.setdefault(ident(o), i)
    ordered = sorted((m for m in merged if ident(m) in rank), key=lambda m: rank[ident(m)])
    others = sorted(
        (m for m in merged if ident(m) not in rank), key=lambda m: live_rank.get(ident(m), len(live_rank))
    )
    out: list[Any] = []
    i = j = 0
    while i < len(others) or j < len(ordered):
        if j >= len(ordered):
            out.append(others[i])
            i += 1
        elif i >= len(others):
            out.append(ordered[j])
            j += 1
        else:
            left, right = live_rank.get(ident(others[i])), live_rank.get(ident(ordered[j]))
            if left is not None and right is not None and left < right:
                out.append(others[i])
                i += 1
            else:
                out.append(ordered[j])
                j += 1
    return out


def _smp_list(original: list[Any], patch: list[Any], field: Field, path: str) -> list[Any]:
    if not (field.merge_key or field.merge_set):
        return _fresh(patch, field, path)  # replaced whole
    if not original and not patch:
        return original
    if any(isinstance(v, list) for v in original) or any(isinstance(v, list) for v in patch):
        raise ApiError(422, "Invalid", f"lists of lists are not supported{_where(path)}", details={})
    objects = [isinstance(v, dict) for v in (*original, *patch)]
    if all(objects):
        if not field.merge_key:
            raise errors.bad_request(f"cannot merge lists without merge key{_where(path)}")
        return _smp_object_list(original, patch, field, path)
    if any(objects):
        raise errors.bad_request(f"list element types are not identical{_where(path)}")
    # A set of scalars: union, patch items in patch order, live-only items slotted in by their live order.
    seen: set[Hashable] = set()
    merged = []
    for v in (*original, *patch):
        h = _hashable(v)
        if h not in seen:
            seen.add(h)
            merged.append(v)
    return _interleave(merged, patch, original, _hashable)


def _smp_object_list(original: list[Obj], patch: list[Obj], field: Field, path: str) -> list[Obj]:
    key = field.merge_key
    items: list[Obj] = []
    replace = False
    for item in patch:
        directive = item.get(_PATCH)
        if directive is None:
            items.append(item)
        elif directive == "delete":
            if key not in item:
                raise errors.bad_request(
                    f"map: {item} does not contain declared merge key: {key}{_where(path)}"
                )
            original = [o for o in original if o.get(key) != item[key]]
        elif directive == "replace":
            replace = True
        elif directive != "merge":  # "merge" is the default; accepted and dropped
            raise errors.bad_request(f"unknown patch type: {directive} in list{_where(path)}")
    if replace:
        return [f for f in (_fresh(i, Field(of=field.of), path) for i in items) if f is not _DELETED]
    schema = field.of or EMPTY
    live = list(original)  # the order before merging
    for item in items:
        if key not in item:
            raise errors.bad_request(f"map: {item} does not contain declared merge key: {key}{_where(path)}")
        sub = f"{path}[{key}={item[key]}]"
        for i, current in enumerate(original):
            if current.get(key) == item[key]:
                merged = _smp_map(current, item, schema, sub)
                original[i] = merged if isinstance(merged, dict) else {}
                break
        else:
            fresh = _fresh(item, Field(of=field.of), sub)
            if fresh is not _DELETED:
                original.append(fresh)
    return _interleave(original, items, live, _identity(key))


def _fresh(value: Any, field: Field, path: str) -> Any:
    """A patch value for a place the object has nothing: directives applied against emptiness, nulls dropped."""
    if isinstance(value, dict):
        return _smp_map({}, value, field.of or EMPTY, path)
    if isinstance(value, list):
        if field.merge_key or field.merge_set:
            return _smp_list([], value, field, path)
        item_field = Field(of=field.of)
        return [f for f in (_fresh(v, item_field, path) for v in value) if f is not _DELETED]
    return value


# ==============================================================================================================
# Field sets: the FieldsV1 trees of metadata.managedFields, handled in their wire form
#
# A field set maps path elements ("f:<field>", "k:<JSON of a list-map item's keys>", "v:<JSON of a set member>")
# to nodes. A node is a member of the set when it is empty ({}) or holds "."; its other keys are its children.
# The root is never a member. Nodes are never mutated once built: operations copy on write and return their
# input when nothing changes, so untouched managedFields entries cost nothing.

FieldSet = dict[str, Any]
_SELF = "."


def _is_member(node: FieldSet) -> bool:
    return not node or _SELF in node


def _node(member: bool, children: FieldSet) -> FieldSet:
    if member and children:
        children[_SELF] = {}
    return children


def _node_union(a: FieldSet, b: FieldSet) -> FieldSet:
    if a is b:
        return a
    children = {k: v for k, v in a.items() if k != _SELF}
    for key, child in b.items():
        if key != _SELF:
            children[key] = _node_union(children[key], child) if key in children else child
    return _node(_is_member(a) or _is_member(b), children)


def _fs_union(a: FieldSet, b: FieldSet) -> FieldSet:
    if not a or a is b:
        return b
    if not b:
        return a
    out = dict(a)
    for key, child in b.items():
        out[key] = _node_union(out[key], child) if key in out else child
    return out


def _node_difference(a: FieldSet, b: FieldSet) -> FieldSet | None:
    """Members of ``a`` that ``b`` lacks (a member of ``b`` does not cover its children); None if none."""
    if a == b:  # cheap (C-level) and common: an entry unchanged since last time
        return None
    drop_self = _is_member(b) and _is_member(a)
    if not a:
        return None if drop_self else a
    out: FieldSet | None = None
    for key, b_child in b.items():
        if key == _SELF or key not in a:
            continue
        rest = _node_difference(a[key], b_child)
        if rest is a[key]:
            continue
        if out is None:
            out = dict(a)
        if rest is None:
            del out[key]
        else:
            out[key] = rest
    if not drop_self and out is None:
        return a
    if out is None:
        out = dict(a)
    out.pop(_SELF, None)
    member = _is_member(a) and not drop_self
    if not out:
        return {} if member else None
    return _node(member, out)


def _fs_difference(a: FieldSet, b: FieldSet) -> FieldSet:
    if not a or not b:
        return a
    if a == b:
        return {}
    out: FieldSet | None = None
    for key, b_child in b.items():
        if key not in a:
            continue
        rest = _node_difference(a[key], b_child)
        if rest is a[key]:
            continue
        if out is None:
            out = dict(a)
        if rest is None:
            del out[key]
        else:
            out[key] = rest
    return a if out is None else out


def _node_intersection(a: FieldSet, b: FieldSet) -> FieldSet | None:
    children: FieldSet = {}
    for key, child in a.items():
        if key != _SELF and key in b:
            both = _node_intersection(child, b[key])
            if both is not None:
                children[key] = both
    if _is_member(a) and _is_member(b):
        return _node(True, children)
    return children or None


def _fs_intersection(a: FieldSet, b: FieldSet) -> FieldSet:
    out: FieldSet = {}
    for key, child in a.items():
        if key in b:
            both = _node_intersection(child, b[key])
            if both is not None:
                out[key] = both
    return out


def _fs_members(fs: FieldSet, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key in sorted(k for k in fs if k != _SELF):
        node = fs[key]
        path = (*prefix, key)
        if _is_member(node):
            yield path
        yield from _fs_members(node, path)


def _path_text(path: tuple[str, ...]) -> str:
    """``.spec.containers[name="app"].image``: upstream's rendering of a field path."""
    out = []
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            out.append("." + rest)
        elif kind == "k":
            keys = json.loads(rest)
            out.append(
                "[" + ",".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in keys.items()) + "]"
            )
        elif kind == "v":
            out.append(f"[={rest}]")
        else:
            out.append(f"[{rest}]")
    return "".join(out)


def _json_compact(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # not plain JSON
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _item_element(item: Obj, keys: tuple[str, ...]) -> str:
    found = {
        k: item[k] if k in item else LIST_KEY_DEFAULTS[k] for k in keys if k in item or k in LIST_KEY_DEFAULTS
    }
    return "k:" + _json_compact(found)


def _value_element(value: Any) -> str:
    return "v:" + _json_compact(value)


# Paths the server owns: never part of anyone's field set (upstream stripmeta).
_STRIPPED: FieldSet = {
    "f:apiVersion": {},
    "f:kind": {},
    "f:metadata": {
        _SELF: {},
        **{
            f"f:{name}": {}
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        },
    },
}

# metadata fields an apply request cannot set: the live values stay.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)

# Upstream types hold these as plain (non-pointer) structs, so an update never adds them as a whole; other
# objects an update adds are owned as a whole too ("." in FieldsV1), as kube-apiserver records them.
_PLAIN_STRUCTS = frozenset(
    {"metadata", "spec", "status", "template", "strategy", "updateStrategy", "resources"}
)
_NO_PLAIN: frozenset[str] = frozenset()


def _list_kind(field: Field, items: list[Any]) -> str:
    """How server-side apply treats a list: "map" (keyed items), "set" (scalar members) or "atomic"."""
    if field.atomic:
        return "atomic"
    if field.list_keys and all(isinstance(v, dict) for v in items):
        return "map"
    if field.list_set and not any(isinstance(v, (dict, list)) for v in items):
        return "set"
    return "atomic"


def _item_field(field: Field) -> Field:
    return Field(of=field.of, atomic=field.item_atomic)


def _applied_set(obj: Obj, schema: Schema) -> FieldSet:
    """The fields an apply configuration sets: leaves, list-map items (with "."), set members, atomic values."""
    return {"f:" + key: _applied_value_set(value, schema.get(key, DEFAULT)) for key, value in obj.items()}


def _applied_value_set(value: Any, field: Field) -> FieldSet:
    if isinstance(value, dict) and value and not field.atomic:
        return _applied_set(value, field.of or EMPTY)
    if isinstance(value, list) and value:
        kind = _list_kind(field, value)
        if kind == "map":
            node: FieldSet = {}
            for item in value:
                element = _item_element(item, field.list_keys)
                if element in node:
                    raise ApiError(
                        422, "Invalid", f"duplicate entries for key {_path_text((element,))}", details={}
                    )
                node[element] = (
                    {} if field.item_atomic else _node(True, _applied_set(item, field.of or EMPTY))
                )
            return node
        if kind == "set":
            return {_value_element(v): {} for v in value}
    return {}


def _subtree(value: Any, field: Field, own_self: bool, plain: frozenset[str]) -> FieldSet:
    """Every path in ``value``; objects are members too unless their field name is in ``plain``."""
    if isinstance(value, dict) and value and not field.atomic:
        schema = field.of or EMPTY
        children = {
            "f:" + k: _subtree(v, schema.get(k, DEFAULT), k not in plain, plain)
            for k, v in value.items()
            if v is not None
        }
        return _node(own_self, children)
    if isinstance(value, list) and value:
        kind = _list_kind(field, value)
        if kind == "map":
            item_field = _item_field(field)
            return {
                _item_element(item, field.list_keys): _subtree(item, item_field, True, plain)
                for item in value
            }
        if kind == "set":
            return {_value_element(v): {} for v in value}
    return {}


class _Diff:
    """What changed between two versions of a value: field set nodes, or None for nothing."""

    __slots__ = ("added", "modified", "removed")

    def __init__(self) -> None:
        self.added: FieldSet | None = None
        self.modified: FieldSet | None = None
        self.removed: FieldSet | None = None


class _Children:
    """Collects the children of the three diff nodes of a container (never a member itself)."""

    __slots__ = ("added", "modified", "removed")

    def __init__(self) -> None:
        self.added: FieldSet = {}
        self.modified: FieldSet = {}
        self.removed: FieldSet = {}

    def attach(self, element: str, sub: _Diff) -> None:
        if sub.added is not None:
            self.added[element] = sub.added
        if sub.modified is not None:
            self.modified[element] = sub.modified
        if sub.removed is not None:
            self.removed[element] = sub.removed

    def diff(self) -> _Diff:
        out = _Diff()
        out.added = self.added or None
        out.modified = self.modified or None
        out.removed = self.removed or None
        return out


def _compare_objects(old: Obj, new: Obj, schema: Schema, plain: frozenset[str]) -> _Diff:
    found = _Children()
    for key, new_value in new.items():
        field = schema.get(key, DEFAULT)
        old_value = old.get(key)
        element = "f:" + key
        if new_value is None:
            if old_value is not None:
                found.removed[element] = _subtree(old_value, field, True, _NO_PLAIN)
        elif old_value is None:
            found.added[element] = _subtree(new_value, field, key not in plain, plain)
        elif old_value != new_value:
            found.attach(element, _compare_values(old_value, new_value, field, plain))
    for key, old_value in old.items():
        if key not in new and old_value is not None:
            found.removed["f:" + key] = _subtree(old_value, schema.get(key, DEFAULT), True, _NO_PLAIN)
    return found.diff()


def _compare_values(old: Any, new: Any, field: Field, plain: frozenset[str]) -> _Diff:
    if isinstance(old, dict) and isinstance(new, dict) and not field.atomic:
        return _compare_objects(old, new, field.of or EMPTY, plain)
    if isinstance(old, list) and isinstance(new, list):
        kind = _list_kind(field, old + new)
        if kind == "map":
            return _compare_keyed(
                old, new, lambda item: _item_element(item, field.list_keys), _item_field(field), plain
            )
        if kind == "set":
            return _compare_keyed(old, new, _value_element, Field(atomic=True), plain)
    diff = _Diff()
    if _is_leaf(old, field) and _is_leaf(new, field):
        diff.modified = {}
    else:  # the shape changed: everything old went away and everything new arrived
        diff.removed = _subtree(old, field, True, _NO_PLAIN)
        diff.added = _subtree(new, field, True, plain)
    return diff


def _is_leaf(value: Any, field: Field) -> bool:
    if isinstance(value, dict):
        return field.atomic or not value
    if isinstance(value, list):
        return not value or _list_kind(field, value) == "atomic"
    return True


def _compare_keyed(
    old: list[Any], new: list[Any], element_of: Callable[[Any], str], item_field: Field, plain: frozenset[str]
) -> _Diff:
    found = _Children()
    old_items = {element_of(item): item for item in old}
    new_items = {element_of(item): item for item in new}
    for element, new_item in new_items.items():
        old_item = old_items.get(element)
        if old_item is None:
            found.added[element] = _subtree(new_item, item_field, True, plain)
        elif old_item != new_item:
            found.attach(element, _compare_values(old_item, new_item, item_field, plain))
    for element, old_item in old_items.items():
        if element not in new_items:
            found.removed[element] = _subtree(old_item, item_field, True, _NO_PLAIN)
    return found.diff()


def _changes(old: Obj, new: Obj, schema: Schema, plain: frozenset[str]) -> tuple[FieldSet, FieldSet]:
    """(fields added or modified, fields removed) between two objects, server-owned paths left out."""
    diff = _compare_objects(old, new, schema, plain)
    changed = _fs_union(diff.added or {}, diff.modified or {})
    return _fs_difference(changed, _STRIPPED), _fs_difference(diff.removed or {}, _STRIPPED)


def _apply_merge(live: Any, config: Any, field: Field) -> Any:
    """Merge an apply configuration into the live value (ours to mutate): config wins at the leaves."""
    if live == config:
        return live
    if isinstance(live, dict) and isinstance(config, dict) and not field.atomic:
        schema = field.of or EMPTY
        for key, value in config.items():
            current = live.get(key)
            live[key] = value if current is None else _apply_merge(current, value, schema.get(key, DEFAULT))
        return live
    if isinstance(live, list) and isinstance(config, list):
        kind = _list_kind(field, live + config)
        if kind == "map":
            item_field = _item_field(field)
            return _merge_keyed(
                live,
                config,
                lambda item: _item_element(item, field.list_keys),
                lambda old, new: new if old is None else _apply_merge(old, new, item_field),
            )
        if kind == "set":
            return _merge_keyed(live, config, _value_element, lambda old, new: new)
    return config


def _merge_keyed(
    live: list[Any], config: list[Any], element_of: Callable[[Any], str], merge: Callable[[Any, Any], Any]
) -> list[Any]:
    """Merge keyed items. Config items keep the config's order; live-only items stay where they were
    relative to it (structured-merge-diff's ordering)."""
    live_keys = [element_of(item) for item in live]
    config_keys = [element_of(item) for item in config]
    live_by_key: dict[str, Any] = {}
    for k, item in zip(live_keys, live, strict=True):
        live_by_key.setdefault(k, item)
    in_config = set(config_keys)
    shared = [k for k in config_keys if k in live_by_key]
    next_shared = 0
    out: list[Any] = []
    done: set[str] = set()
    li = ci = 0
    while li < len(live) or ci < len(config):
        if li < len(live):
            k = live_keys[li]
            if ci < len(config) and k == config_keys[ci] and k not in done:
                out.append(merge(live[li], config[ci]))
                done.add(k)
                li += 1
                ci += 1
                if next_shared < len(shared) and shared[next_shared] == k:
                    next_shared += 1
                continue
            if k not in in_config:
                out.append(live[li])
                li += 1
                continue
            if k in done or ci >= len(config) or (next_shared < len(shared) and shared[next_shared] != k):
                li += 1  # merged already, or merged later when the config reaches it
                continue
        k = config_keys[ci]
        if k not in done:
            out.append(merge(live_by_key.get(k), config[ci]))
            done.add(k)
            if next_shared < len(shared) and shared[next_shared] == k:
                next_shared += 1
        ci += 1
    return out


def _prune(value: Any, gone: FieldSet, keep: FieldSet | None, field: Field) -> None:
    """Remove (in place) what ``gone`` names from ``value``, except paths ``keep`` holds or holds below.

    A container emptied this way goes too, unless someone owns it as a whole.
    """
    keep = keep or {}
    if isinstance(value, dict):
        schema = field.of or EMPTY
        for element, gone_below in gone.items():
            name = element[2:]
            if not element.startswith("f:") or name not in value:
                continue
            kept = keep.get(element)
            if kept is None and _is_member(gone_below):
                del value[name]
                continue
            child = value[name]
            if isinstance(child, (dict, list)) and child:
                _prune(child, gone_below, kept, schema.get(name, DEFAULT))
                if not child and not (kept is not None and _is_member(kept)):
                    del value[name]
    elif isinstance(value, list) and value:
        kind = _list_kind(field, value)
        if kind == "atomic":
            return
        item_field = _item_field(field)
        survivors = []
        for item in value:
            element = _item_element(item, field.list_keys) if kind == "map" else _value_element(item)
            gone_below = gone.get(element)
            if gone_below is None:
                survivors.append(item)
                continue
            kept = keep.get(element)
            if kept is None and _is_member(gone_below):
                continue
            if kind == "map":
                _prune(item, gone_below, kept, item_field)
            survivors.append(item)
        value[:] = survivors


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


# ==============================================================================================================
# managedFields entries


class _Entry:
    """One ``managedFields`` entry: a manager's field set for one operation."""

    __slots__ = ("api_version", "fields", "manager", "operation", "subresource", "time")

    def __init__(
        self,
        manager: str,
        operation: str,
        api_version: str,
        subresource: str,
        time: str | None,
        fields: FieldSet,
    ) -> None:
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.subresource = subresource
        self.time = time
        self.fields = fields

    def identity(self) -> tuple[str, str, str, str]:
        # Appliers are one manager whatever version they apply with; updaters are one per version.
        version = "" if self.operation == "Apply" else self.api_version
        return (self.manager, self.operation, self.subresource, version)

    def describe(self) -> str:
        """As upstream names a manager in conflict messages."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def encode(self) -> Obj:
        out: Obj = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = self.fields
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def _decode_entries(managed: Any) -> list[_Entry]:
    """The entries of a ``managedFields`` list (malformed entries are skipped; duplicates are merged)."""
    entries: dict[tuple[str, str, str, str], _Entry] = {}
    if not isinstance(managed, list):
        return []
    for raw in managed:
        if not isinstance(raw, dict):
            continue
        fields = raw.get("fieldsV1")
        entry = _Entry(
            manager=str(raw.get("manager") or ""),
            operation=str(raw.get("operation") or ""),
            api_version=str(raw.get("apiVersion") or ""),
            subresource=str(raw.get("subresource") or ""),
            time=raw.get("time") if isinstance(raw.get("time"), str) else None,
            fields=fields
            if isinstance(fields, dict) and raw.get("fieldsType", "FieldsV1") == "FieldsV1"
            else {},
        )
        same = entries.get(entry.identity())
        if same is None:
            entries[entry.identity()] = entry
        else:
            same.fields = _fs_union(same.fields, entry.fields)
    return list(entries.values())


def _split_managed_fields(obj: Obj) -> tuple[Obj, Any]:
    """``obj`` without ``metadata.managedFields`` (a shallow copy where needed) and the entries it had."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj, None
    rest = {k: v for k, v in meta.items() if k != "managedFields"}
    return {**obj, "metadata": rest}, meta["managedFields"]


def _set_managed_fields(obj: Obj, entries: list[_Entry]) -> None:
    """Store the non-empty entries, sorted as upstream (operation, time, manager, version, subresource)."""
    kept = sorted(
        (e for e in entries if e.fields),
        key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource),
    )
    meta = obj.get("metadata")
    if kept:
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        meta["managedFields"] = [e.encode() for e in kept]
    elif isinstance(meta, dict):
        meta.pop("managedFields", None)


def _conflict_error(conflicts: list[tuple[_Entry, FieldSet]]) -> ApiError:
    conflicts = sorted(conflicts, key=lambda c: c[0].identity())
    causes: list[dict[str, str]] = []
    lines: list[str] = []
    for entry, fields in conflicts:
        who = entry.describe()
        lines.append(f"conflicts with {who}:")
        for path in (_path_text(p) for p in _fs_members(fields)):
            causes.append(
                {"reason": "FieldManagerConflict", "message": f"conflict with {who}", "field": path}
            )
            lines.append(f"- {path}")
    if len(causes) == 1:
        message = f"Apply failed with 1 conflict: {causes[0]['message']}: {causes[0]['field']}"
    else:
        message = f"Apply failed with {len(causes)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, details={"causes": causes})


# ==============================================================================================================
# Server-side apply and update tracking


def server_side_apply(
    live: Obj | None,
    applied: Obj,
    *,
    manager: str,
    force: bool,
    kind: str,
    api_version: str,
    now: str,
    builtin: bool,
    subresource: str = "",
) -> Obj:
    """Apply ``applied`` (an apply configuration) for ``manager`` over ``live`` (``None``: create).

    A pragmatic subset of structured-merge-diff:

    - merge: objects merge field by field; lists that built-in kinds key (containers by ``name``, ports by
      ``containerPort``+``protocol``, conditions by ``type``, ...) merge item by item, scalar sets
      (``finalizers``) merge as sets; other lists, and every list of a custom resource, are atomic. ``null``
      in the configuration means "not set".
    - ownership: the manager's ``Apply`` entry becomes exactly the fields of this configuration. Fields it
      applied last time and omits now are removed from the object unless another manager owns them (or
      something below them).
    - conflicts: a field another manager owns whose value would change is a 409 ``Conflict`` (all conflicts
      listed, upstream's message and ``FieldManagerConflict`` causes); with ``force`` the field moves to this
      manager instead. Setting a field to the value it already has makes the managers co-owners.

    Server-owned metadata (uid, resourceVersion, creationTimestamp, generation, ...) keeps its live values.
    Returns the new object with ``metadata.managedFields`` updated; the entry's ``time`` moves to ``now`` when
    the object changed.
    """
    _require_object(applied, "an apply patch")
    if live is not None:
        _require_object(live, "the live object")
    if not manager:
        raise errors.bad_request("fieldManager: Required value: is required for apply patch")
    meta = applied.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    if meta and meta.get("managedFields"):
        raise errors.bad_request("metadata.managedFields must be nil")

    schema = schema_for(kind, builtin=builtin, api_version=api_version)
    root = Field(of=schema)
    current, managed = _split_managed_fields(live if live is not None else {})
    entries = _decode_entries(_copy(managed))  # entries end up in the result: no sharing with ``live``
    config, _ = _split_managed_fields(_without_nulls(applied))  # a fresh copy, free of nulls

    merged = _apply_merge(_copy(current), config, root)
    applied_fields = _fs_difference(_applied_set(config, schema), _STRIPPED)
    mine = next((e for e in entries if e.identity() == (manager, "Apply", subresource, "")), None)
    others = [e for e in entries if e is not mine]
    if mine is not None:
        gone = _fs_difference(mine.fields, applied_fields)
        if gone:
            keep = applied_fields
            for other in others:
                keep = _fs_union(keep, other.fields)
            _prune(merged, gone, keep, root)
    _restore_server_metadata(merged, current)

    changed, removed = _changes(current, merged, schema, _NO_PLAIN)
    conflicts = [(e, both) for e in others if (both := _fs_intersection(e.fields, changed))]
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for other in others:
        other.fields = _fs_difference(_fs_difference(other.fields, changed), removed)
    if mine is None:
        entries.append(_Entry(manager, "Apply", api_version, subresource, now, applied_fields))
    else:
        mine.fields = applied_fields
        mine.api_version = api_version
        if changed or removed or not mine.time:
            mine.time = now
    _set_managed_fields(merged, entries)
    return merged


def _restore_server_metadata(merged: Obj, live: Obj) -> None:
    live_meta = live.get("metadata")
    meta = merged.get("metadata")
    if not isinstance(live_meta, dict) or not isinstance(meta, dict):
        return
    for name in _SERVER_METADATA:
        if name in live_meta:
            meta[name] = _copy(live_meta[name])


def record_update(
    old: Obj | None,
    new: Obj,
    *,
    manager: str,
    api_version: str,
    now: str,
    kind: str = "",
    builtin: bool = True,
    subresource: str = "",
) -> Obj:
    """Track a non-apply write (create, update, patch) of ``new`` over ``old`` (``None``: create).

    ``manager``'s ``Update`` entry gains the fields this write added or changed (the time moves to ``now``);
    every manager loses the fields whose value changed or that were removed. A write that changes nothing
    leaves managedFields as they were. If ``new`` carries a non-empty ``managedFields`` (and this is not a
    subresource write) it replaces the live one first, as upstream lets clients rewrite or reset it
    (``[{}]`` clears it). ``kind`` (default: the object's own ``kind``) and ``builtin`` select the list keys;
    pass ``builtin=False`` for custom resources so their lists stay atomic, as in ``server_side_apply``.
    Cost: one copy of ``new`` and one comparison with ``old`` that skips equal subtrees; managedFields
    entries the write does not touch are not rebuilt.
    """
    _require_object(new, "the new object")
    if old is not None:
        _require_object(old, "the old object")
    result, sent = _split_managed_fields(_copy(new))
    before, live_managed = _split_managed_fields(old) if old is not None else ({}, None)
    if isinstance(sent, list) and sent and not subresource:
        entries = _decode_entries(sent)  # part of our copy of ``new`` already
    else:
        entries = _decode_entries(_copy(live_managed))

    kind = kind or str(result.get("kind") or "")
    schema = schema_for(kind, builtin=builtin and bool(kind), api_version=api_version)
    changed, removed = _changes(before, result, schema, _PLAIN_STRUCTS)
    if changed or removed:
        identity = (manager, "Update", subresource, api_version)
        mine = next((e for e in entries if e.identity() == identity), None)
        for entry in entries:
            entry.fields = _fs_difference(_fs_difference(entry.fields, changed), removed)
        if mine is None:
            mine = _Entry(manager, "Update", api_version, subresource, now, {})
            entries.append(mine)
        mine.fields = _fs_union(mine.fields, changed)
        mine.time = now
    _set_managed_fields(result, entries)
    return result
