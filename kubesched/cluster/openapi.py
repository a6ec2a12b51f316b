"""OpenAPI v3 documents built from the resource registry: the ``/openapi/v3`` index and one document per
group-version.

What kubectl needs from them:
- ``create``/``apply``/``replace`` with default validation look for a PATCH operation carrying the kind's
  ``x-kubernetes-group-version-kind`` and a ``fieldValidation`` parameter; finding it, kubectl leaves validation to
  the server (``fieldValidation=Strict``).
- ``explain`` looks up ``components.schemas`` by ``x-kubernetes-group-version-kind``. CRDs contribute their
  ``openAPIV3Schema``; built-in kinds get Kubernetes' published definitions (``schema/published.py``) with every
  definition they reference, so ``kubectl explain pod.spec.containers`` walks the real types. A built-in kind
  Kubernetes does not publish keeps a minimal schema (its top-level fields).
- Client-side ``apply`` builds a strategic merge patch from the v3 schema only when the PATCH operation declares a
  ``application/strategic-merge-patch+json`` request body. Ours declare none, so kubectl falls back to its
  compiled-in type information, which knows the real merge keys (``containers`` by ``name`` and so on).

The ``hash`` in each ``serverRelativeURL`` is a digest of the document: kubectl caches per URL, so it changes
exactly when the document does. Documents are cached per ``registry.generation``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import weakref
from typing import Any

import orjson

from kubesched.cluster import schema as published
from kubesched.cluster.discovery import GIT_VERSION, SUBRESOURCES
from kubesched.cluster.resources import ResourceRegistry, ResourceType

Doc = dict[str, Any]

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"

_SCHEMA_PACKAGES = {
    "": "io.k8s.api.core",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}

# Top-level fields of built-in kinds that have no spec/status pair; everything else gets spec and status.
_TOP_LEVEL_FIELDS: dict[str, dict[str, str]] = {
    "ConfigMap": {"data": "object", "binaryData": "object", "immutable": "boolean"},
    "Secret": {"data": "object", "stringData": "object", "type": "string", "immutable": "boolean"},
    "Binding": {"target": "object"},
    "Endpoints": {"subsets": "array"},
    "ServiceAccount": {
        "secrets": "array",
        "imagePullSecrets": "array",
        "automountServiceAccountToken": "boolean",
    },
    "PriorityClass": {
        "value": "integer",
        "globalDefault": "boolean",
        "description": "string",
        "preemptionPolicy": "string",
    },
    "StorageClass": {
        "provisioner": "string",
        "parameters": "object",
        "reclaimPolicy": "string",
        "mountOptions": "array",
        "allowVolumeExpansion": "boolean",
        "volumeBindingMode": "string",
        "allowedTopologies": "array",
    },
    "ControllerRevision": {"data": "object", "revision": "integer"},
    "CSIStorageCapacity": {
        "nodeTopology": "object",
        "storageClassName": "string",
        "capacity": "string",
        "maximumVolumeSize": "string",
    },
    "PodTemplate": {"template": "object"},
    "Lease": {"spec": "object"},
    "LimitRange": {"spec": "object"},
}
_CORE_EVENT_FIELDS = {
    "involvedObject": "object", "reason": "string", "message": "string", "source": "object",
    "firstTimestamp": "string", "lastTimestamp": "string", "count": "integer", "type": "string",
    "eventTime": "string", "series": "object", "action": "string", "related": "object",
    "reportingComponent": "string", "reportingInstance": "string",
}  # fmt: skip
_EVENTS_V1_FIELDS = {
    "eventTime": "string", "series": "object", "reportingController": "string", "reportingInstance": "string",
    "action": "string", "reason": "string", "regarding": "object", "related": "object", "note": "string",
    "type": "string", "deprecatedSource": "object", "deprecatedFirstTimestamp": "string",
    "deprecatedLastTimestamp": "string", "deprecatedCount": "integer",
}  # fmt: skip


_FIELD_DESCRIPTIONS = {
    "spec": "The desired state of the object, as the user asks for it.",
    "status": "The most recently observed state of the object, written by the system (read-only for users).",
}


def schema_name(rtype: ResourceType, kind: str | None = None) -> str:
    """The ``components.schemas`` key kube-apiserver uses for a kind (``io.k8s.api.core.v1.Pod``,
    ``com.example.stable.v1.CronTab`` for a CRD of group ``stable.example.com``)."""
    kind = kind or rtype.kind
    if rtype.crd is not None:
        return ".".join(reversed(rtype.group.split("."))) + f".{rtype.version}.{kind}"
    package = _SCHEMA_PACKAGES.get(rtype.group, "io.k8s.api." + rtype.group.split(".")[0])
    return f"{package}.{rtype.version}.{kind}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _gvk(rtype: ResourceType, kind: str | None = None) -> dict[str, str]:
    return {"group": rtype.group, "version": rtype.version, "kind": kind or rtype.kind}


def _type_meta_properties() -> dict[str, Any]:
    return {
        "apiVersion": {
            "type": "string",
            "description": "The versioned schema of this representation of an object.",
        },
        "kind": {"type": "string", "description": "The REST resource this object represents."},
    }


def _metadata_property() -> dict[str, Any]:
    return {"allOf": [_ref(OBJECT_META)], "default": {}, "description": "Standard object's metadata."}


def _common_schemas() -> dict[str, Any]:
    string_map = {"type": "object", "additionalProperties": {"type": "string", "default": ""}}
    return {
        OBJECT_META: {
            "description": "Metadata that all persisted resources must have.",
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Unique name within a namespace."},
                "generateName": {"type": "string", "description": "Prefix for a server-generated name."},
                "namespace": {"type": "string", "description": "The namespace the object lives in."},
                "uid": {"type": "string", "description": "Unique identifier, set by the server."},
                "resourceVersion": {"type": "string", "description": "Opaque version, set by the server."},
                "generation": {
                    "type": "integer",
                    "format": "int64",
                    "description": "Desired-state sequence.",
                },
                "creationTimestamp": {
                    "type": "string",
                    "format": "date-time",
                    "description": "Creation time.",
                },
                "deletionTimestamp": {
                    "type": "string",
                    "format": "date-time",
                    "description": "Deletion time.",
                },
                "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
                "labels": {**string_map, "description": "Labels for selection."},
                "annotations": {**string_map, "description": "Unstructured key/value data."},
                "ownerReferences": {"type": "array", "items": {"type": "object"}, "description": "Owners."},
                "finalizers": {"type": "array", "items": {"type": "string", "default": ""}},
                "managedFields": {
                    "type": "array",
                    "items": {"type": "object"},
                    "description": "Field ownership.",
                },
            },
        },
        LIST_META: {
            "type": "object",
            "properties": {
                "resourceVersion": {"type": "string"},
                "continue": {"type": "string"},
                "remainingItemCount": {"type": "integer", "format": "int64"},
            },
        },
        STATUS: {
            "type": "object",
            "properties": {
                **_type_meta_properties(),
                "status": {"type": "string"},
                "message": {"type": "string"},
                "reason": {"type": "string"},
                "code": {"type": "integer", "format": "int32"},
                "details": {"type": "object"},
            },
            "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Status"}],
        },
    }


def _builtin_schema(rtype: ResourceType) -> dict[str, Any]:
    if rtype.kind == "Event":
        fields = _EVENTS_V1_FIELDS if rtype.group == "events.k8s.io" else _CORE_EVENT_FIELDS
    else:
        fields = _TOP_LEVEL_FIELDS.get(rtype.kind, {"spec": "object", "status": "object"})
    properties: dict[str, Any] = {**_type_meta_properties(), "metadata": _metadata_property()}
    for name, kind in fields.items():
        prop: dict[str, Any] = {
            "type": kind,
            "description": _FIELD_DESCRIPTIONS.get(name, f"The {rtype.kind}'s {name}."),
        }
        if kind == "object":
            prop["x-kubernetes-preserve-unknown-fields"] = True
        elif kind == "array":
            prop["items"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        properties[name] = prop
    return {
        "description": f"{rtype.kind} ({rtype.api_version}).",
        "type": "object",
        "properties": properties,
        "x-kubernetes-group-version-kind": [_gvk(rtype)],
    }


# Definitions whose published JSON-Schema form (oneOf) kube-apiserver's OpenAPI writes as a plain string.
_STRING_FORMS = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
}


def _to_openapi(node: Any, refs: set[str]) -> Any:
    """A published JSON-Schema fragment in OpenAPI 3.0 form: ``$ref`` into ``components.schemas`` (wrapped in
    ``allOf`` when it has siblings, as kube-apiserver writes it), nullable type lists reduced to their type, the
    ``apiVersion``/``kind`` enums dropped. Collects the definitions referenced into ``refs``."""
    if isinstance(node, list):
        return [_to_openapi(x, refs) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref":
            continue
        if key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            if kinds:
                out["type"] = kinds[0]
            continue
        if key == "enum":
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _to_openapi(sub, refs) for name, sub in value.items()}
            continue
        out[key] = _to_openapi(value, refs)
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        refs.add(name)
        if not out:
            return _ref(name)
        out["allOf"] = [_ref(name)]
    return out


@functools.cache
def _published_schema(name: str) -> tuple[dict[str, Any], frozenset[str]]:
    """One published definition converted (cached: shared by every document, never mutated) and the
    definitions it references."""
    source = published.definitions().get(name) or {}
    if name in _STRING_FORMS:
        converted = {"description": source.get("description", ""), **_STRING_FORMS[name]}
        return converted, frozenset()
    refs: set[str] = set()
    converted = _to_openapi(source, refs)
    converted.pop("$schema", None)
    return converted, frozenset(refs)


def _add_published(schemas: dict[str, Any], name: str) -> None:
    """``name`` and every definition it reaches, into ``schemas``."""
    todo = [name]
    while todo:
        current = todo.pop()
        if current in schemas and schemas[current] is _published_schema(current)[0]:
            continue
        converted, refs = _published_schema(current)
        schemas[current] = converted
        todo.extend(r for r in refs if schemas.get(r) is not _published_schema(r)[0])


def _crd_version(rtype: ResourceType) -> dict[str, Any]:
    assert rtype.crd is not None
    for version in rtype.crd.get("spec", {}).get("versions", []) or []:
        if version.get("name") == rtype.version:
            return version
    return {}


def _crd_schema(rtype: ResourceType) -> dict[str, Any]:
    schema = copy.deepcopy(((_crd_version(rtype).get("schema") or {}).get("openAPIV3Schema")) or {})
    if not schema:
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema.setdefault("type", "object")
    properties = schema.setdefault("properties", {})
    # The server adds the standard fields every custom resource has, as kube-apiserver does.
    for name, prop in _type_meta_properties().items():
        properties.setdefault(name, prop)
    properties["metadata"] = _metadata_property()
    schema["x-kubernetes-group-version-kind"] = [_gvk(rtype)]
    return schema


def _list_schema(rtype: ResourceType) -> dict[str, Any]:
    return {
        "description": f"A list of {rtype.kind} objects.",
        "type": "object",
        "required": ["items"],
        "properties": {
            **_type_meta_properties(),
            "items": {"type": "array", "items": _ref(schema_name(rtype))},
            "metadata": {"allOf": [_ref(LIST_META)], "default": {}},
        },
        "x-kubernetes-group-version-kind": [_gvk(rtype, rtype.list_kind)],
    }


# -- paths -----------------------------------------------------------------------------------------------------


def _query(name: str, description: str, kind: str = "string") -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": kind, "uniqueItems": True},
    }


_DRY_RUN = _query("dryRun", "When present, modifications are not persisted (All).")
_FIELD_MANAGER = _query("fieldManager", "Name of the actor making the change.")
_FIELD_VALIDATION = _query(
    "fieldValidation", "How to treat unknown or duplicate fields: Ignore, Warn or Strict."
)
_FORCE = _query("force", "Take ownership of conflicting fields (apply patches only).", "boolean")
_PRETTY = _query("pretty", "Pretty-print the output.")
_WRITE_PARAMS = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
_LIST_PARAMS = [
    _query(name, f"List option {name}.", kind)
    for name, kind in (
        ("allowWatchBookmarks", "boolean"),
        ("continue", "string"),
        ("fieldSelector", "string"),
        ("labelSelector", "string"),
        ("limit", "integer"),
        ("resourceVersion", "string"),
        ("resourceVersionMatch", "string"),
        ("sendInitialEvents", "boolean"),
        ("timeoutSeconds", "integer"),
        ("watch", "boolean"),
    )
]


def _path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "uniqueItems": True}}


def _response(schema: str, code: str = "200") -> dict[str, Any]:
    return {code: {"description": "OK", "content": {"application/json": {"schema": _ref(schema)}}}}


def _operation(
    rtype: ResourceType,
    action: str,
    op_id: str,
    response: str,
    params: list[dict[str, Any]],
    gvk: tuple[str, str, str] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "tags": [rtype.group.split(".")[0] + "_" + rtype.version if rtype.group else "core_" + rtype.version],
        "description": f"{action} {rtype.plural}",
        "operationId": op_id,
        "parameters": params,
        "responses": _response(response),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": (
            _gvk(rtype) if gvk is None else {"group": gvk[0], "version": gvk[1], "kind": gvk[2]}
        ),
    }
    return op


def _body(schema: str) -> dict[str, Any]:
    return {"content": {"*/*": {"schema": _ref(schema)}}, "required": True}


def _op_id(verb: str, rtype: ResourceType, suffix: str = "") -> str:
    scope = "Namespaced" if rtype.namespaced else ""
    group = "".join(p.capitalize() for p in rtype.group.split(".")[0].split("-")) or "Core"
    return f"{verb}{group}{rtype.version.capitalize()}{scope}{rtype.kind}{suffix}"


def _resource_paths(rtype: ResourceType) -> dict[str, Any]:
    base = f"/apis/{rtype.group}/{rtype.version}" if rtype.group else f"/api/{rtype.version}"
    ns = "/namespaces/{namespace}" if rtype.namespaced else ""
    collection = f"{base}{ns}/{rtype.plural}"
    item = collection + "/{name}"
    kind_schema, list_schema = schema_name(rtype), schema_name(rtype, rtype.list_kind)
    verbs = set(rtype.verbs)
    path_params = ([_path_param("namespace")] if rtype.namespaced else []) + [_PRETTY]
    paths: dict[str, Any] = {}

    coll: dict[str, Any] = {}
    if "list" in verbs:
        coll["get"] = _operation(rtype, "list", _op_id("list", rtype), list_schema, _LIST_PARAMS)
    if "create" in verbs:
        coll["post"] = {
            **_operation(rtype, "post", _op_id("create", rtype), kind_schema, _WRITE_PARAMS),
            "requestBody": _body(kind_schema),
        }
    if "deletecollection" in verbs:
        coll["delete"] = _operation(
            rtype, "deletecollection", _op_id("deleteCollection", rtype), STATUS, _LIST_PARAMS
        )
    if coll:
        paths[collection] = {**coll, "parameters": path_params}

    one: dict[str, Any] = {}
    if "get" in verbs:
        one["get"] = _operation(rtype, "get", _op_id("read", rtype), kind_schema, [])
    if "update" in verbs:
        one["put"] = {
            **_operation(rtype, "put", _op_id("replace", rtype), kind_schema, _WRITE_PARAMS),
            "requestBody": _body(kind_schema),
        }
    if "patch" in verbs:
        # No requestBody on purpose: see the module docstring.
        one["patch"] = _operation(
            rtype, "patch", _op_id("patch", rtype), kind_schema, [*_WRITE_PARAMS, _FORCE]
        )
    if "delete" in verbs:
        one["delete"] = _operation(rtype, "delete", _op_id("delete", rtype), kind_schema, [_DRY_RUN])
    if one:
        paths[item] = {**one, "parameters": [_path_param("name"), *path_params]}

    if rtype.namespaced and "list" in verbs:
        paths[f"{base}/{rtype.plural}"] = {
            "get": _operation(
                rtype, "list", _op_id("list", rtype, "ForAllNamespaces"), list_schema, _LIST_PARAMS
            ),
            "parameters": [_PRETTY],
        }

    for sub in rtype.subresources:
        sub_verbs = SUBRESOURCES.get(sub, (("get", "patch", "update"), None))[0]
        fixed_kind = SUBRESOURCES.get(sub, ((), None))[1]
        sub_kind = fixed_kind
        response = kind_schema if fixed_kind is None else _subresource_schema(fixed_kind)
        suffix = sub.capitalize()
        ops: dict[str, Any] = {}
        if "get" in sub_verbs:
            ops["get"] = _operation(rtype, "get", _op_id("read", rtype, suffix), response, [], sub_kind)
        if "update" in sub_verbs:
            ops["put"] = _operation(
                rtype, "put", _op_id("replace", rtype, suffix), response, _WRITE_PARAMS, sub_kind
            )
        if "patch" in sub_verbs:
            params = [*_WRITE_PARAMS, _FORCE]
            ops["patch"] = _operation(
                rtype, "patch", _op_id("patch", rtype, suffix), response, params, sub_kind
            )
        if "create" in sub_verbs:
            ops["post"] = _operation(
                rtype, "post", _op_id("create", rtype, suffix), response, _WRITE_PARAMS, sub_kind
            )
        paths[f"{item}/{sub}"] = {**ops, "parameters": [_path_param("name"), *path_params]}
    return paths


def _subresource_schema(gvk: tuple[str, str, str]) -> str:
    group, version, kind = gvk
    package = _SCHEMA_PACKAGES.get(group, "io.k8s.api." + group.split(".")[0])
    return f"{package}.{version}.{kind}"


def _subresource_schemas() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _verbs, gvk in SUBRESOURCES.values():
        if gvk is None:
            continue
        group, version, kind = gvk
        out[_subresource_schema(gvk)] = {
            "type": "object",
            "properties": {
                **_type_meta_properties(),
                "metadata": _metadata_property(),
                "spec": {"type": "object"},
            },
            "x-kubernetes-group-version-kind": [{"group": group, "version": version, "kind": kind}],
        }
    return out


# -- documents ---------------------------------------------------------------------------------------------------


def _prefix(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _build_document(types: list[ResourceType]) -> Doc:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = _common_schemas()
    for common in (OBJECT_META, LIST_META, STATUS):
        if common in published.definitions():
            _add_published(schemas, common)
    needs_subresource_schemas = False
    for rtype in types:
        paths.update(_resource_paths(rtype))
        needs_subresource_schemas |= any(SUBRESOURCES.get(s, ((), None))[1] for s in rtype.subresources)
        definition = (
            published.definition_for(rtype.group, rtype.version, rtype.kind) if rtype.crd is None else None
        )
        if definition is not None and definition == schema_name(rtype):
            _add_published(schemas, definition)
            list_definition = published.definition_for(rtype.group, rtype.version, rtype.list_kind)
            if list_definition == schema_name(rtype, rtype.list_kind):
                _add_published(schemas, list_definition)
            else:
                schemas[schema_name(rtype, rtype.list_kind)] = _list_schema(rtype)
            continue
        schemas[schema_name(rtype)] = _crd_schema(rtype) if rtype.crd is not None else _builtin_schema(rtype)
        schemas[schema_name(rtype, rtype.list_kind)] = _list_schema(rtype)
    if needs_subresource_schemas:
        for name, schema in _subresource_schemas().items():
            if name in published.definitions():
                _add_published(schemas, name)
                continue
            schemas.setdefault(name, schema)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }


class _Built:
    def __init__(self, generation: int, docs: dict[str, Doc], index: Doc) -> None:
        self.generation = generation
        self.docs = docs
        self.index = index


_cache: weakref.WeakKeyDictionary[ResourceRegistry, _Built] = weakref.WeakKeyDictionary()


def _built(registry: ResourceRegistry) -> _Built:
    built = _cache.get(registry)
    if built is not None and built.generation == registry.generation:
        return built
    docs: dict[str, Doc] = {}
    index_paths: dict[str, Any] = {}
    for group, versions in registry.groups().items():
        for version in versions:
            prefix = _prefix(group, version)
            doc = _build_document(registry.in_group_version(group, version))
            digest = hashlib.sha512(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest().upper()
            docs[prefix] = doc
            index_paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={digest}"}
    built = _Built(registry.generation, docs, {"paths": index_paths})
    _cache[registry] = built
    return built


def is_built(registry: ResourceRegistry) -> bool:
    """Whether the documents of the registry's current generation are built (serving them is a lookup)."""
    built = _cache.get(registry)
    return built is not None and built.generation == registry.generation


def openapi_index(registry: ResourceRegistry) -> Doc:
    """``GET /openapi/v3``: each served group-version's document URL, with a content hash."""
    return _built(registry).index


def openapi_group_version(registry: ResourceRegistry, prefix: str) -> Doc | None:
    """``GET /openapi/v3/<prefix>`` for ``prefix`` like ``api/v1`` or ``apis/apps/v1``; None if not served.

    The ``hash`` query parameter is only a cache key for clients; any value gets the current document.
    """
    return _built(registry).docs.get(prefix.strip("/"))
