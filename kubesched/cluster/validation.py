"""Server-side validation of objects on create and update, with upstream's field paths and messages.

The per-kind validators return ``Status`` causes (``{"reason", "message", "field"}``); each kind's strategy
(``cluster/kinds/``) picks its validators, and the server turns a non-empty list into
``errors.invalid(kind, name, causes)`` (422). Type errors that upstream reports while decoding (a malformed quantity, a string where an integer belongs) are not causes but a 400: ``decode_error``
returns that message.

The checks follow ``k8s.io/apimachinery`` (names, labels, annotations, object metadata) and the per-kind validators
of kube-apiserver 1.36, for the fields a scheduler stack relies on; less-used fields are left unchecked.
The caller applies defaults (and, for events.k8s.io, validates before converting to core/v1) first, as upstream
decodes with defaults before it validates.

The generic checks (quantities, names, label keys and values) are ``kubesched.apimachinery``'s; this module holds
the per-kind rules built on them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from kubesched.apimachinery.quantity import (
    QuantityError,
    canonical_quantity,
    format_quantity,
    parse_quantity,
    parse_quantity_with_format,
)
from kubesched.apimachinery.validation import (
    FIELD_IMMUTABLE,
    IS_NEGATIVE,
    NOT_POSITIVE,
    is_config_map_key,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
    name_is_dns_label,
    name_is_dns_subdomain,
)
from kubesched.cluster.resources import Obj, ResourceType

Cause = dict[str, str]

# ------------------------------------------------------------------------------------------------------------
# Causes, shaped like upstream's field.Error
# ------------------------------------------------------------------------------------------------------------


def show_value(value: Any) -> str:
    """A bad value as Go's field errors print it: strings quoted, numbers and booleans bare, null for nil."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    # Go prints structs with %#v; JSON is the readable stand-in.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def invalid(field: str, value: Any, detail: str) -> Cause:
    msg = f"Invalid value: {show_value(value)}"
    return {"reason": "FieldValueInvalid", "message": f"{msg}: {detail}" if detail else msg, "field": field}


def required(field: str, detail: str = "") -> Cause:
    return {
        "reason": "FieldValueRequired",
        "message": "Required value" + (f": {detail}" if detail else ""),
        "field": field,
    }


def forbidden(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def duplicate(field: str, value: Any) -> Cause:
    return {
        "reason": "FieldValueDuplicate",
        "message": f"Duplicate value: {show_value(value)}",
        "field": field,
    }


def not_supported(field: str, value: Any, supported: Iterable[str]) -> Cause:
    options = ", ".join(json.dumps(s) for s in supported)
    msg = f"Unsupported value: {show_value(value)}" + (f": supported values: {options}" if options else "")
    return {"reason": "FieldValueNotSupported", "message": msg, "field": field}


def too_long(field: str, max_bytes: int) -> Cause:
    return {
        "reason": "FieldValueTooLong",
        "message": f"Too long: must have at most {max_bytes} bytes",
        "field": field,
    }


def _key(path: str, key: str) -> str:
    return f"{path}[{key}]"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ------------------------------------------------------------------------------------------------------------
# Object metadata (k8s.io/apimachinery/pkg/api/validation/objectmeta.go)
# ------------------------------------------------------------------------------------------------------------

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
NameFn = Any  # Callable[[str, bool], list[str]]


def validate_labels(labels: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in sorted(_dict(labels).items()):
        causes.extend(invalid(path, key, m) for m in is_label_key(key))
        causes.extend(invalid(path, value, m) for m in is_label_value(_str(value)))
    return causes


def validate_annotations(annotations: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    items = _dict(annotations)
    for key in sorted(items):
        # Annotation keys follow the label-key rule, case aside.
        causes.extend(invalid(path, key, m) for m in is_label_key(key.lower()))
    size = sum(len(k) + len(_str(v)) for k, v in items.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def _validate_owner_references(refs: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    first_controller = ""
    for ref in _list(refs):
        ref = _dict(ref)
        api_version = _str(ref.get("apiVersion"))
        if not api_version.rpartition("/")[2]:
            causes.append(invalid(path + ".apiVersion", api_version, "version must not be empty"))
        for name in ("kind", "name", "uid"):
            if not _str(ref.get(name)):
                causes.append(invalid(f"{path}.{name}", _str(ref.get(name)), "must not be empty"))
        if api_version == "v1" and ref.get("kind") == "Event":
            causes.append(invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if first_controller:
                causes.append(
                    invalid(
                        path,
                        refs,
                        "Only one reference can have Controller set to true. "
                        f'Found "true" in references for {first_controller} and {current}',
                    )
                )
            else:
                first_controller = current
    return causes


def _validate_finalizers(finalizers: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    names = [_str(f) for f in _list(finalizers)]
    for name in names:
        causes.extend(invalid(path, name, m) for m in is_label_key(name))
    if "orphan" in names and "foregroundDeletion" in names:
        causes.append(invalid(path, names, "finalizer orphan and foregroundDeletion cannot be both set"))
    return causes


def validate_object_meta(meta: Any, namespaced: bool, name_fn: NameFn, path: str = "metadata") -> list[Cause]:
    """Create-time metadata checks. Name generation may not have happened yet: a generateName stands in."""
    meta = _dict(meta)
    causes: list[Cause] = []
    name, generate_name = _str(meta.get("name")), _str(meta.get("generateName"))
    if generate_name:
        errs = name_fn(generate_name, True)
        if errs:
            causes.extend(invalid(path + ".generateName", generate_name, m) for m in errs)
    if name:
        errs = name_fn(name, False)
        if errs:
            causes.extend(invalid(path + ".name", name, m) for m in errs)
    elif not generate_name:
        causes.append(required(path + ".name", "name or generateName is required"))
    namespace = _str(meta.get("namespace"))
    if namespaced:
        if not namespace:
            causes.append(required(path + ".namespace"))
        else:
            errs = _namespace_errors(namespace)
            if errs:
                causes.extend(invalid(path + ".namespace", namespace, m) for m in errs)
    elif namespace:
        causes.append(forbidden(path + ".namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(invalid(path + ".generation", generation, IS_NEGATIVE))
    # Absent (or empty) labels, annotations, owners and finalizers have nothing to report: most objects have
    # few of them, so their checks are only called for what is there.
    labels = meta.get("labels")
    if labels:
        causes.extend(validate_labels(labels, path + ".labels"))
    annotations = meta.get("annotations")
    if annotations:
        causes.extend(validate_annotations(annotations, path + ".annotations"))
    refs = meta.get("ownerReferences")
    if refs:
        causes.extend(_validate_owner_references(refs, path + ".ownerReferences"))
    finalizers = meta.get("finalizers")
    if finalizers:
        causes.extend(_validate_finalizers(finalizers, path + ".finalizers"))
    return causes


@lru_cache(maxsize=1024)
def _namespace_errors(namespace: str) -> tuple[str, ...]:
    """What a namespace name breaks of the DNS label rule (the same few namespaces come with every write)."""
    return tuple(name_is_dns_label(namespace))


@lru_cache(maxsize=1024)
def _subdomain_errors(value: str) -> tuple[str, ...]:
    """What a value breaks of the DNS subdomain rule, for values that repeat (an event's namespace)."""
    return tuple(is_dns1123_subdomain(value))


def validate_object_meta_update(new_meta: Any, old_meta: Any, path: str = "metadata") -> list[Cause]:
    """Update-time metadata checks.

    As upstream's ``rest.BeforeUpdate``, the caller copies ``creationTimestamp`` from the stored object (a changed
    one is silently kept, not refused), copies ``uid`` when the request leaves it empty, and fills
    ``resourceVersion`` for unconditional updates; this function does not look at those three.
    """
    new, old = _dict(new_meta), _dict(old_meta)
    causes: list[Cause] = []
    if old.get("deletionTimestamp"):
        added = sorted(set(_list(new.get("finalizers"))) - set(_list(old.get("finalizers"))))
        if added:
            shown = "[]string{" + ", ".join(json.dumps(f) for f in added) + "}"
            causes.append(
                forbidden(
                    path + ".finalizers",
                    f"no new finalizers can be added if the object is being deleted, found new finalizers {shown}",
                )
            )
    for name in ("name", "namespace"):
        if _str(new.get(name)) != _str(old.get(name)):
            causes.append(invalid(f"{path}.{name}", _str(new.get(name)), FIELD_IMMUTABLE))
    if new.get("uid") and new.get("uid") != old.get("uid"):
        causes.append(invalid(path + ".uid", new.get("uid"), FIELD_IMMUTABLE))
    if new.get("deletionTimestamp") and not old.get("deletionTimestamp"):
        causes.append(invalid(path + ".deletionTimestamp", new.get("deletionTimestamp"), FIELD_IMMUTABLE))
    if (
        "deletionGracePeriodSeconds" in new
        and new.get("deletionGracePeriodSeconds") != old.get("deletionGracePeriodSeconds")
        and new.get("deletionGracePeriodSeconds") is not None
    ):
        causes.append(
            invalid(
                path + ".deletionGracePeriodSeconds", new.get("deletionGracePeriodSeconds"), FIELD_IMMUTABLE
            )
        )
    causes.extend(validate_labels(new.get("labels"), path + ".labels"))
    causes.extend(validate_annotations(new.get("annotations"), path + ".annotations"))
    causes.extend(_validate_owner_references(new.get("ownerReferences"), path + ".ownerReferences"))
    causes.extend(_validate_finalizers(new.get("finalizers"), path + ".finalizers"))
    return causes


# ------------------------------------------------------------------------------------------------------------
# Pods (pkg/apis/core/validation)
# ------------------------------------------------------------------------------------------------------------

_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
_INTEGER_RESOURCES = {"pods", "count/pods"}
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
_PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")
_SELECTOR_VALUES_NEEDED = ("In", "NotIn")
_SELECTOR_NO_VALUES = ("Exists", "DoesNotExist")
_SELECTOR_ONE_VALUE = ("Gt", "Lt")
PORT_RANGE = "must be between 1 and 65535, inclusive"
WEIGHT_RANGE = "must be in the range 1-100"
UPDATABLE_POD_SPEC_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)
_MAX_INT32 = 2**31 - 1


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """A resource named outside kubernetes.io (``example.com/gpu``): integer-valued and never overcommitted."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not is_label_key("requests." + name)


def _overcommit_allowed(name: str) -> bool:
    return is_native_resource(name) and not _is_hugepages(name)


def _validate_container_resource_name(name: str, path: str) -> list[Cause]:
    causes = [invalid(path, name, m) for m in is_label_key(name)]
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not _is_hugepages(name):
            causes.append(invalid(path, name, "must be a standard resource for containers"))
    elif not is_native_resource(name) and not is_extended_resource(name):
        causes.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return causes


def _validate_quantity_value(name: str, raw: Any, path: str) -> list[Cause]:
    try:
        amount, fmt = parse_quantity_with_format(raw)
    except QuantityError:
        return []  # reported by decode_error as a 400 before validation runs
    causes: list[Cause] = []
    if amount < 0:
        causes.append(invalid(path, format_quantity(amount, fmt), IS_NEGATIVE))
    if (name in _INTEGER_RESOURCES or is_extended_resource(name)) and math.ceil(amount * 1000) % 1000 != 0:
        # upstream passes the Quantity itself, which prints unquoted
        shown = format_quantity(amount, fmt)
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "message": f"Invalid value: {shown}: must be an integer",
                "field": path,
            }
        )
    return causes


def _validate_resource_requirements(resources: Any, path: str) -> list[Cause]:
    resources = _dict(resources)
    limits, requests = _dict(resources.get("limits")), _dict(resources.get("requests"))
    lim_path, req_path = path + ".limits", path + ".requests"
    causes: list[Cause] = []
    for name in sorted(limits):
        causes.extend(_validate_container_resource_name(name, _key(lim_path, name)))
        causes.extend(_validate_quantity_value(name, limits[name], _key(lim_path, name)))
    for name in sorted(requests):
        causes.extend(_validate_container_resource_name(name, _key(req_path, name)))
        causes.extend(_validate_quantity_value(name, requests[name], _key(req_path, name)))
        try:
            request = parse_quantity(requests[name])
        except QuantityError:
            continue
        if name in limits:
            try:
                limit = parse_quantity(limits[name])
            except QuantityError:
                continue
            shown_req, shown_lim = canonical_quantity(requests[name]), canonical_quantity(limits[name])
            if request != limit and not _overcommit_allowed(name):
                causes.append(invalid(req_path, shown_req, f"must be equal to {name} limit of {shown_lim}"))
            elif request > limit:
                causes.append(
                    invalid(req_path, shown_req, f"must be less than or equal to {name} limit of {shown_lim}")
                )
        elif not _overcommit_allowed(name):
            causes.append(required(lim_path, "Limit must be set for non overcommitable resources"))
    return causes


def _validate_container(container: Any, path: str) -> list[Cause]:
    container = _dict(container)
    causes: list[Cause] = []
    name = _str(container.get("name"))
    if not name:
        causes.append(required(path + ".name"))
    else:
        causes.extend(invalid(path + ".name", name, m) for m in is_dns1123_label(name))
    if not _str(container.get("image")):
        causes.append(required(path + ".image"))
    causes.extend(_validate_ports(container.get("ports"), path + ".ports"))
    pull = container.get("imagePullPolicy")
    if pull not in (None, "") and pull not in _PULL_POLICIES:
        causes.append(not_supported(path + ".imagePullPolicy", pull, _PULL_POLICIES))
    causes.extend(_validate_resource_requirements(container.get("resources"), path + ".resources"))
    return causes


def _validate_ports(ports: Any, path: str) -> list[Cause]:
    """Container ports (upstream validateContainerPorts): numbers in range, a known protocol."""
    causes: list[Cause] = []
    for i, port in enumerate(_list(ports)):
        port = _dict(port)
        at = f"{path}[{i}]"
        number = port.get("containerPort")
        if not number:
            causes.append(required(at + ".containerPort"))
        elif isinstance(number, int) and not 1 <= number <= 65535:
            causes.append(invalid(at + ".containerPort", number, PORT_RANGE))
        host = port.get("hostPort")
        if isinstance(host, int) and host != 0 and not 1 <= host <= 65535:
            causes.append(invalid(at + ".hostPort", host, PORT_RANGE))
        protocol = port.get("protocol")
        if protocol not in (None, "") and protocol not in _PORT_PROTOCOLS:
            causes.append(not_supported(at + ".protocol", protocol, _PORT_PROTOCOLS))
    return causes


def _validate_selector_requirement(req: Any, path: str, node: bool) -> list[Cause]:
    """One matchExpressions entry of a node selector (``node``: Gt and Lt allowed) or a label selector."""
    req = _dict(req)
    causes: list[Cause] = []
    key = _str(req.get("key"))
    causes.extend(invalid(path + ".key", key, m) for m in is_label_key(key))
    operator = req.get("operator")
    values = _list(req.get("values"))
    if operator in _SELECTOR_VALUES_NEEDED:
        if not values:
            causes.append(required(path + ".values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in _SELECTOR_NO_VALUES:
        if values:
            causes.append(
                forbidden(
                    path + ".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
            )
    elif node and operator in _SELECTOR_ONE_VALUE:
        if len(values) != 1:
            causes.append(
                required(path + ".values", "must be specified single value when `operator` is 'Lt' or 'Gt'")
            )
    else:
        causes.append(invalid(path + ".operator", operator, "not a valid selector operator"))
    return causes


def _validate_node_selector_term(term: Any, path: str) -> list[Cause]:
    term = _dict(term)
    causes: list[Cause] = []
    for field in ("matchExpressions", "matchFields"):
        for j, req in enumerate(_list(term.get(field))):
            causes.extend(_validate_selector_requirement(req, f"{path}.{field}[{j}]", node=True))
    return causes


def _validate_label_selector(selector: Any, path: str) -> list[Cause]:
    selector = _dict(selector)
    causes = validate_labels(selector.get("matchLabels"), path + ".matchLabels")
    for j, req in enumerate(_list(selector.get("matchExpressions"))):
        causes.extend(_validate_selector_requirement(req, f"{path}.matchExpressions[{j}]", node=False))
    return causes


def _validate_weight(weight: Any, path: str) -> list[Cause]:
    if isinstance(weight, int) and not 1 <= weight <= 100:
        return [invalid(path, weight, WEIGHT_RANGE)]
    return []


def _validate_pod_affinity_term(term: Any, path: str) -> list[Cause]:
    term = _dict(term)
    causes = _validate_label_selector(term.get("labelSelector"), path + ".labelSelector")
    if term.get("namespaceSelector") is not None:
        causes.extend(_validate_label_selector(term.get("namespaceSelector"), path + ".namespaceSelector"))
    if not _str(term.get("topologyKey")):
        causes.append(required(path + ".topologyKey", "can not be empty"))
    return causes


def _validate_affinity(affinity: Any, path: str) -> list[Cause]:
    """Node, pod and pod anti-affinity (upstream validateAffinity): selector operators, values, weights."""
    affinity = _dict(affinity)
    causes: list[Cause] = []
    node = _dict(affinity.get("nodeAffinity"))
    at = path + ".nodeAffinity"
    hard = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if hard is not None:
        terms = _list(_dict(hard).get("nodeSelectorTerms"))
        where = at + ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        if not terms:
            causes.append(required(where, "must have at least one node selector term"))
        for i, term in enumerate(terms):
            causes.extend(_validate_node_selector_term(term, f"{where}[{i}]"))
    for i, pref in enumerate(_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        where = f"{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        causes.extend(_validate_weight(_dict(pref).get("weight"), where + ".weight"))
        causes.extend(_validate_node_selector_term(_dict(pref).get("preference"), where + ".preference"))
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = _dict(affinity.get(kind))
        at = f"{path}.{kind}"
        for i, term in enumerate(_list(pod.get("requiredDuringSchedulingIgnoredDuringExecution"))):
            causes.extend(
                _validate_pod_affinity_term(term, f"{at}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
            )
        for i, pref in enumerate(_list(pod.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            where = f"{at}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            causes.extend(_validate_weight(_dict(pref).get("weight"), where + ".weight"))
            causes.extend(
                _validate_pod_affinity_term(_dict(pref).get("podAffinityTerm"), where + ".podAffinityTerm")
            )
    return causes


def _validate_taint_effect(effect: str, allow_empty: bool, path: str) -> list[Cause]:
    if not effect:
        return [] if allow_empty else [required(path)]
    if effect not in _TAINT_EFFECTS:
        return [not_supported(path, effect, _TAINT_EFFECTS)]
    return []


def validate_tolerations(tolerations: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, toleration in enumerate(_list(tolerations)):
        toleration = _dict(toleration)
        at = f"{path}[{i}]"
        key, operator = _str(toleration.get("key")), _str(toleration.get("operator"))
        value, effect = _str(toleration.get("value")), _str(toleration.get("effect"))
        if key:
            causes.extend(invalid(at + ".key", key, m) for m in is_label_key(key))
        if not key and operator != "Exists":
            causes.append(
                invalid(
                    at + ".operator",
                    operator,
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                )
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(
                invalid(at + ".effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
            )
        if operator in ("Equal", ""):
            errs = is_label_value(value)
            if errs:
                causes.append(invalid(at + ".operator", value, ";".join(errs)))
        elif operator == "Exists":
            if value:
                causes.append(
                    invalid(at + ".operator", toleration, "value must be empty when `operator` is 'Exists'")
                )
        else:
            causes.append(not_supported(at + ".operator", operator, ("Equal", "Exists")))
        causes.extend(_validate_taint_effect(effect, True, at + ".effect"))
    return causes


def _validate_topology_spread(constraints: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    items = [_dict(c) for c in _list(constraints)]
    for i, c in enumerate(items):
        at = f"{path}[{i}]"
        max_skew = c.get("maxSkew")
        if not isinstance(max_skew, int) or max_skew <= 0:
            causes.append(
                invalid(at + ".maxSkew", max_skew if isinstance(max_skew, int) else 0, NOT_POSITIVE)
            )
        if not _str(c.get("topologyKey")):
            causes.append(required(at + ".topologyKey", "can not be empty"))
        when = _str(c.get("whenUnsatisfiable"))
        if when not in _WHEN_UNSATISFIABLE:
            causes.append(not_supported(at + ".whenUnsatisfiable", when, _WHEN_UNSATISFIABLE))
        if (
            c.get("labelSelector") is not None
        ):  # upstream: ValidateLabelSelector on each constraint's selector
            causes.extend(_validate_label_selector(c.get("labelSelector"), at + ".labelSelector"))
        pair = (c.get("topologyKey"), c.get("whenUnsatisfiable"))
        if any((o.get("topologyKey"), o.get("whenUnsatisfiable")) == pair for o in items[i + 1 :]):
            causes.append(duplicate(at + ".{topologyKey, whenUnsatisfiable}", f"{{{pair[0]}, {pair[1]}}}"))
    return causes


def _validate_scheduling_gates(gates: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, gate in enumerate(_list(gates)):
        name = _str(_dict(gate).get("name"))
        causes.extend(invalid(f"{path}[{i}]", name, m) for m in is_label_key(name))
        if name in seen:
            causes.append(duplicate(f"{path}[{i}]", name))
        seen.add(name)
    return causes


def _validate_pod_spec(spec: Any, path: str = "spec") -> list[Cause]:
    spec = _dict(spec)
    causes: list[Cause] = []
    containers = _list(spec.get("containers"))
    names: set[str] = set()
    if not containers:
        causes.append(required(path + ".containers"))
    for i, container in enumerate(containers):
        at = f"{path}.containers[{i}]"
        causes.extend(_validate_container(container, at))
        name = _str(_dict(container).get("name"))
        if name in names:
            causes.append(duplicate(at + ".name", name))
        names.add(name)
    for i, container in enumerate(_list(spec.get("initContainers"))):
        at = f"{path}.initContainers[{i}]"
        causes.extend(_validate_container(container, at))
        name = _str(_dict(container).get("name"))
        if name in names:
            causes.append(duplicate(at + ".name", name))
        names.add(name)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in _RESTART_POLICIES:
        causes.append(not_supported(path + ".restartPolicy", policy, _RESTART_POLICIES))
    dns = spec.get("dnsPolicy")
    if dns not in (None, "") and dns not in _DNS_POLICIES:
        causes.append(not_supported(path + ".dnsPolicy", dns, _DNS_POLICIES))
    if spec.get("affinity") is not None:
        causes.extend(_validate_affinity(spec.get("affinity"), path + ".affinity"))
    causes.extend(validate_labels(spec.get("nodeSelector"), path + ".nodeSelector"))
    if _str(spec.get("serviceAccountName")):
        sa = spec["serviceAccountName"]
        causes.extend(invalid(path + ".serviceAccountName", sa, m) for m in name_is_dns_subdomain(sa))
    if _str(spec.get("nodeName")):
        node = spec["nodeName"]
        causes.extend(invalid(path + ".nodeName", node, m) for m in name_is_dns_subdomain(node))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= _MAX_INT32:
        causes.append(
            invalid(
                path + ".activeDeadlineSeconds", deadline, f"must be between 1 and {_MAX_INT32}, inclusive"
            )
        )
    for field in ("hostname", "subdomain"):
        if _str(spec.get(field)):
            causes.extend(invalid(f"{path}.{field}", spec[field], m) for m in is_dns1123_label(spec[field]))
    causes.extend(validate_tolerations(spec.get("tolerations"), path + ".tolerations"))
    if _str(spec.get("priorityClassName")):
        pc = spec["priorityClassName"]
        causes.extend(invalid(path + ".priorityClassName", pc, m) for m in name_is_dns_subdomain(pc))
    preemption = spec.get("preemptionPolicy")
    if preemption is not None and preemption not in _PREEMPTION_POLICIES:
        causes.append(not_supported(path + ".preemptionPolicy", preemption, _PREEMPTION_POLICIES))
    causes.extend(
        _validate_topology_spread(spec.get("topologySpreadConstraints"), path + ".topologySpreadConstraints")
    )
    causes.extend(_validate_scheduling_gates(spec.get("schedulingGates"), path + ".schedulingGates"))
    return causes


def validate_pod(pod: Obj) -> list[Cause]:
    causes = validate_object_meta(pod.get("metadata"), True, name_is_dns_subdomain)
    causes.extend(_validate_pod_spec(pod.get("spec")))
    spec = _dict(pod.get("spec"))
    if _str(spec.get("nodeName")) and _list(spec.get("schedulingGates")):
        causes.append(forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return causes


def _normalised(value: Any, key: str = "") -> Any:
    """Drop what Go would not tell apart from absent (nil vs empty lists and maps, empty strings, false), and
    compare quantities by value, so "unchanged" means what upstream's semantic equality means."""
    if isinstance(value, dict):
        if key in ("limits", "requests"):
            out = {}
            for k, v in value.items():
                try:
                    out[k] = parse_quantity(v)
                except QuantityError:
                    out[k] = v
            return out or None
        items = {k: _normalised(v, k) for k, v in value.items()}
        return {k: v for k, v in items.items() if v is not None} or None
    if isinstance(value, list):
        return [_normalised(v) for v in value] or None
    if value is False or value == "":
        return None
    return value


_GO_NAMES = {"nodeName": "NodeName", "schedulerName": "SchedulerName", "restartPolicy": "RestartPolicy"}


def _spec_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    """A short before/after listing of the changed fields, standing in for upstream's Go struct diff."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            go_name = _GO_NAMES.get(key, key[:1].upper() + key[1:])
            if key in old:
                lines.append(f"- \t{go_name}: {json.dumps(old[key], default=str, sort_keys=True)},")
            if key in new:
                lines.append(f"+ \t{go_name}: {json.dumps(new[key], default=str, sort_keys=True)},")
    lines.append("  }")
    return "\n".join(lines) + "\n"


def _only_added_tolerations(new: list[Any], old: list[Any], path: str) -> list[Cause]:
    """Every old toleration must still be there; only its tolerationSeconds may have changed."""
    for existing in old:
        found = False
        for candidate in new:
            seconds = _dict(candidate).get("tolerationSeconds")
            if _normalised({**_dict(existing), "tolerationSeconds": seconds}) == _normalised(
                _dict(candidate)
            ):
                found = True
                break
        if not found:
            return [forbidden(path, "existing toleration can not be modified except its tolerationSeconds")]
    return []


def validate_pod_update(new: Obj, old: Obj) -> list[Cause]:
    causes = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    causes.extend(_validate_pod_spec(new.get("spec")))
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    for field in ("containers", "initContainers"):
        new_list, old_list = _list(new_spec.get(field)), _list(old_spec.get(field))
        if len(new_list) != len(old_list):
            causes.append(forbidden(f"spec.{field}", "pod updates may not add or remove containers"))
            return causes
        for i, container in enumerate(new_list):
            image = _str(_dict(container).get("image"))
            if image and image.strip() != image:
                causes.append(
                    invalid(f"spec.{field}[{i}].image", image, "must not have leading or trailing whitespace")
                )
    new_deadline, old_deadline = new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if new_deadline is not None:
        if isinstance(old_deadline, int) and isinstance(new_deadline, int) and old_deadline < new_deadline:
            causes.append(
                invalid(
                    "spec.activeDeadlineSeconds", new_deadline, "must be less than or equal to previous value"
                )
            )
            return causes
    elif old_deadline is not None:
        causes.append(
            invalid(
                "spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value"
            )
        )
    causes.extend(
        _only_added_tolerations(
            _list(new_spec.get("tolerations")), _list(old_spec.get("tolerations")), "spec.tolerations"
        )
    )
    new_gates = [_str(_dict(g).get("name")) for g in _list(new_spec.get("schedulingGates"))]
    old_gates = {_str(_dict(g).get("name")) for g in _list(old_spec.get("schedulingGates"))}
    for i, gate in enumerate(new_gates):
        if gate not in old_gates:
            causes.append(
                forbidden(
                    f"spec.schedulingGates[{i}].name",
                    f"only deletion is allowed, but found new scheduling gate '{gate}'",
                )
            )

    # Everything else in the spec is frozen: put the updatable fields back to their old values and compare.
    munged = dict(new_spec)
    for field in ("containers", "initContainers"):
        if field in munged:
            olds = _list(old_spec.get(field))
            munged[field] = [
                {**_dict(c), "image": _dict(olds[i]).get("image")} if i < len(olds) else c
                for i, c in enumerate(_list(munged[field]))
            ]
    for field in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        munged.pop(field, None)
        if field in old_spec:
            munged[field] = old_spec[field]
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if old_gates:
        # A gated pod may still gain node selector entries (not change or lose them).
        new_selector, old_selector = _dict(munged.get("nodeSelector")), _dict(old_spec.get("nodeSelector"))
        if new_selector != old_selector:
            if any(new_selector.get(k) != v for k, v in old_selector.items()):
                causes.append(
                    invalid(
                        "spec.nodeSelector",
                        new_selector,
                        "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
                    )
                )
            munged.pop("nodeSelector", None)
            if "nodeSelector" in old_spec:
                munged["nodeSelector"] = old_spec["nodeSelector"]
    norm_new, norm_old = _dict(_normalised(munged)), _dict(_normalised(old_spec))
    if norm_new != norm_old:
        causes.append(
            forbidden(
                "spec",
                "pod updates may not change fields other than "
                + ",".join(UPDATABLE_POD_SPEC_FIELDS)
                + "\n"
                + _spec_diff(norm_old, norm_new),
            )
        )
    return causes


# ------------------------------------------------------------------------------------------------------------
# Other kinds
# ------------------------------------------------------------------------------------------------------------


def validate_node(node: Obj) -> list[Cause]:
    causes = validate_object_meta(node.get("metadata"), False, name_is_dns_subdomain)
    causes.extend(validate_node_taints(_dict(node.get("spec")).get("taints")))
    return causes


def validate_node_taints(taints: Any) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(_list(taints)):
        taint = _dict(taint)
        at = f"spec.taints[{i}]"
        key, value, effect = _str(taint.get("key")), _str(taint.get("value")), _str(taint.get("effect"))
        causes.extend(invalid(at + ".key", key, m) for m in is_label_key(key))
        errs = is_label_value(value)
        if errs:
            causes.append(invalid(at + ".value", value, ";".join(errs)))
        causes.extend(_validate_taint_effect(effect, False, at + ".effect"))
        if (key, effect) in seen:
            dup = duplicate(at, taint)
            dup["message"] += ": taints must be unique by key and effect pair"
            causes.append(dup)
            continue
        seen.add((key, effect))
    return causes


_STANDARD_FINALIZERS = {"kubernetes", "orphan", "foregroundDeletion"}


def namespace_finalizer_causes(ns: Obj) -> list[Cause]:
    causes: list[Cause] = []
    for finalizer in _list(_dict(ns.get("spec")).get("finalizers")):
        name = _str(finalizer)
        causes.extend(invalid("spec.finalizers", name, m) for m in is_label_key(name))
        if "/" not in name and name not in _STANDARD_FINALIZERS:
            causes.append(
                invalid(
                    "spec.finalizers",
                    name,
                    "name is neither a standard finalizer name nor is it fully qualified",
                )
            )
    return causes


def validate_namespace(ns: Obj) -> list[Cause]:
    return validate_object_meta(ns.get("metadata"), False, name_is_dns_label) + namespace_finalizer_causes(ns)


MAX_CONFIG_MAP_SIZE = 1024 * 1024


def validate_config_map(cm: Obj) -> list[Cause]:
    return validate_object_meta(cm.get("metadata"), True, name_is_dns_subdomain) + _config_map_data_causes(cm)


def _config_map_data_causes(cm: Obj) -> list[Cause]:
    causes: list[Cause] = []
    data, binary = _dict(cm.get("data")), _dict(cm.get("binaryData"))
    total = 0
    for key in sorted(data):
        causes.extend(invalid(_key("data", key), key, m) for m in is_config_map_key(key))
        if key in binary:
            causes.append(invalid(_key("data", key), key, "duplicate of key present in binaryData"))
        total += len(_str(data[key]))
    for key in sorted(binary):
        causes.extend(invalid(_key("binaryData", key), key, m) for m in is_config_map_key(key))
        total += len(_str(binary[key])) * 3 // 4  # stored base64; upstream counts decoded bytes
    if total > MAX_CONFIG_MAP_SIZE:
        causes.append(too_long("", MAX_CONFIG_MAP_SIZE))
    return causes


def validate_config_map_update(new: Obj, old: Obj) -> list[Cause]:
    causes = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            causes.append(forbidden("immutable", "field is immutable when `immutable` is set"))
        if _dict(new.get("data")) != _dict(old.get("data")):
            causes.append(forbidden("data", "field is immutable when `immutable` is set"))
        if _dict(new.get("binaryData")) != _dict(old.get("binaryData")):
            causes.append(forbidden("binaryData", "field is immutable when `immutable` is set"))
    causes.extend(_config_map_data_causes(new))
    return causes


def validate_lease(lease: Obj) -> list[Cause]:
    return validate_object_meta(lease.get("metadata"), True, name_is_dns_subdomain) + lease_spec_causes(lease)


def lease_spec_causes(lease: Obj) -> list[Cause]:
    causes: list[Cause] = []
    spec = _dict(lease.get("spec"))
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        causes.append(invalid("spec.leaseTransitions", transitions, IS_NEGATIVE))
    if _str(spec.get("preferredHolder")) and not _str(spec.get("strategy")):
        causes.append(forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
    return causes


_NOTE_LIMIT, _SHORT_LIMIT = 1024, 128


_CORE_ONLY_EVENT_FIELDS = ("involvedObject", "message", "source", "firstTimestamp", "lastTimestamp", "count",
                           "reportingComponent")  # fmt: skip


def _in_events_v1_shape(rtype: ResourceType, event: Obj) -> bool:
    """Whether the object is spelled the events.k8s.io/v1 way. Its apiVersion says so when present; the API it
    came through decides otherwise (a server may hand over the stored core/v1 form on update)."""
    api_version = event.get("apiVersion")
    if api_version == "events.k8s.io/v1":
        return True
    if api_version == "v1" or any(k in event for k in _CORE_ONLY_EVENT_FIELDS):
        return False
    return rtype.group == "events.k8s.io"


def _event_fields(rtype: ResourceType, event: Obj) -> dict[str, Any]:
    """The event in core/v1 terms, whichever shape it is in (events.k8s.io/v1 renames several fields)."""
    get = event.get
    if not _in_events_v1_shape(rtype, event):
        return {
            "involvedObject": _dict(get("involvedObject")),
            "message": _str(get("message")),
            "source": _dict(get("source")),
            "firstTimestamp": get("firstTimestamp"),
            "lastTimestamp": get("lastTimestamp"),
            "count": get("count") or 0,
            "eventTime": get("eventTime"),
            "reportingComponent": get("reportingComponent"),
            "reportingInstance": get("reportingInstance"),
            "action": get("action"),
            "reason": get("reason"),
            "type": get("type"),
            "series": get("series"),
            "related": get("related"),
        }
    return {
        "involvedObject": _dict(get("regarding")),
        "message": _str(get("note")),
        "source": _dict(get("deprecatedSource")),
        "firstTimestamp": get("deprecatedFirstTimestamp"),
        "lastTimestamp": get("deprecatedLastTimestamp"),
        "count": get("deprecatedCount") or 0,
        "reportingComponent": get("reportingController"),
        "eventTime": get("eventTime"),
        "reportingInstance": get("reportingInstance"),
        "action": get("action"),
        "reason": get("reason"),
        "type": get("type"),
        "series": get("series"),
        "related": get("related"),
    }


def _legacy_event_checks(e: dict[str, Any], namespace: str) -> list[Cause]:
    # Field paths are the internal type's names (message, involvedObject), as upstream reports them for both APIs.
    causes: list[Cause] = []
    involved_ns = _str(e["involvedObject"].get("namespace"))
    if not e.get("eventTime"):
        if involved_ns:
            if namespace != involved_ns:
                causes.append(
                    invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
                )
        elif namespace not in ("", "default"):
            causes.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            causes.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        controller = _str(e.get("reportingComponent"))
        if not controller:
            causes.append(required("reportingController"))
        controller_errs = is_label_key(controller)
        if controller_errs:
            causes.extend(invalid("reportingController", controller, m) for m in controller_errs)
        for field in ("reportingInstance", "action", "reason"):
            value = _str(e.get(field))
            if not value:
                causes.append(required(field))
            elif len(value) > _SHORT_LIMIT:
                causes.append(invalid(field, "", f"can have at most {_SHORT_LIMIT} characters"))
        if len(e["message"]) > _NOTE_LIMIT:
            causes.append(invalid("message", "", f"can have at most {_NOTE_LIMIT} characters"))
    errs = _subdomain_errors(namespace)
    if errs:
        causes.extend(invalid("namespace", namespace, m) for m in errs)
    return causes


def validate_event(rtype: ResourceType, event: Obj) -> list[Cause]:
    e = _event_fields(rtype, event)
    meta = _dict(event.get("metadata"))
    causes = _legacy_event_checks(e, _str(meta.get("namespace")))
    if rtype.group != "events.k8s.io":
        return causes  # core/v1 keeps its lax rules for old clients
    causes.extend(validate_object_meta(meta, True, name_is_dns_subdomain))
    series = e.get("series")
    if isinstance(series, dict):
        if not isinstance(series.get("count"), int) or series["count"] < 2:
            causes.append(invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(required("series.lastObservedTime"))
    if not e.get("eventTime"):
        causes.append(required("eventTime"))
    if e.get("type") not in ("Normal", "Warning"):
        causes.append(invalid("type", "", f"has invalid value: {_str(e.get('type'))}"))
    if e.get("firstTimestamp"):
        causes.append(invalid("firstTimestamp", "", "needs to be unset"))
    if e.get("lastTimestamp"):
        causes.append(invalid("lastTimestamp", "", "needs to be unset"))
    if e.get("count"):
        causes.append(invalid("count", "", "needs to be unset"))
    if _str(e["source"].get("component")) or _str(e["source"].get("host")):
        causes.append(invalid("source", "", "needs to be unset"))
    return causes


_EVENT_IMMUTABLE = (
    "involvedObject",
    "reason",
    "message",
    "source",
    "firstTimestamp",
    "lastTimestamp",
    "count",
    "type",
    "eventTime",
    "action",
    "related",
    "reportingComponent",
    "reportingInstance",
)


def validate_event_update(rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
    e = _event_fields(rtype, new)
    causes = _legacy_event_checks(e, _str(_dict(new.get("metadata")).get("namespace")))
    if rtype.group != "events.k8s.io":
        return causes
    causes.extend(validate_object_meta_update(new.get("metadata"), old.get("metadata")))
    o = _event_fields(rtype, old)
    if e.get("series") != o.get("series") and isinstance(e.get("series"), dict):
        series = e["series"]
        if not isinstance(series.get("count"), int) or series["count"] < 2:
            causes.append(invalid("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(required("series.lastObservedTime"))
    for field in _EVENT_IMMUTABLE:
        if _normalised(e.get(field)) != _normalised(o.get(field)):
            shown = "reportingController" if field == "reportingComponent" else field
            causes.append(invalid(shown, e.get(field), FIELD_IMMUTABLE))
    return causes


def _crd_name_fn(crd: Obj) -> NameFn:
    spec = _dict(crd.get("spec"))
    wanted = f"{_str(_dict(spec.get('names')).get('plural'))}.{_str(spec.get('group'))}"

    def check(name: str, prefix: bool) -> list[str]:
        errs = name_is_dns_subdomain(name, prefix)
        if name != wanted:
            errs.append('must be spec.names.plural+"."+spec.group')
        return errs

    return check


def _validate_crd_names(names: dict[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    for field in ("plural", "singular", "kind", "listKind"):
        if not _str(names.get(field)):
            # singular and listKind are defaulted by the server before validation
            if field in ("plural", "kind"):
                causes.append(required(f"{path}.{field}"))
    for field in ("plural", "singular"):
        value = _str(names.get(field))
        if value:
            errs = is_dns1035_label(value)
            if errs:
                causes.append(invalid(f"{path}.{field}", value, ",".join(errs)))
    for field in ("kind", "listKind"):
        value = _str(names.get(field))
        if value:
            errs = is_dns1035_label(value.lower())
            if errs:
                causes.append(
                    invalid(
                        f"{path}.{field}",
                        value,
                        "may have mixed case, but should otherwise match: " + ",".join(errs),
                    )
                )
    for i, short in enumerate(_list(names.get("shortNames"))):
        errs = is_dns1035_label(_str(short))
        if errs:
            causes.append(invalid(f"{path}.shortNames[{i}]", short, ",".join(errs)))
    if _str(names.get("kind")) and names.get("kind") == names.get("listKind"):
        causes.append(
            invalid(f"{path}.listKind", names.get("listKind"), "kind and listKind may not be the same")
        )
    for i, category in enumerate(_list(names.get("categories"))):
        errs = is_dns1035_label(_str(category))
        if errs:
            causes.append(invalid(f"{path}.categories[{i}]", category, ",".join(errs)))
    return causes


def _validate_crd_spec(spec: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    group = _str(spec.get("group"))
    if not group:
        causes.append(required("spec.group"))
    else:
        errs = is_dns1123_subdomain(group)
        if errs:
            causes.append(invalid("spec.group", group, ",".join(errs)))
        elif len(group.split(".")) < 2:
            causes.append(invalid("spec.group", group, "should be a domain with at least one dot"))
    scope = _str(spec.get("scope"))
    if not scope:
        causes.append(required("spec.scope"))
    elif scope not in ("Cluster", "Namespaced"):
        causes.append(not_supported("spec.scope", scope, ("Cluster", "Namespaced")))
    versions = [_dict(v) for v in _list(spec.get("versions"))]
    preserve_unknown = spec.get("preserveUnknownFields") is True
    for i, version in enumerate(versions):
        schema = _dict(version.get("schema")).get("openAPIV3Schema")
        if not preserve_unknown and not isinstance(schema, dict):
            causes.append(required(f"spec.versions[{i}].schema.openAPIV3Schema", "schemas are required"))
        elif isinstance(schema, dict):
            causes.extend(_validate_schema_props(schema, f"spec.versions[{i}].schema.openAPIV3Schema"))
    storage, seen, unique = 0, set(), True
    for i, version in enumerate(versions):
        storage += version.get("storage") is True
        name = _str(version.get("name"))
        if name in seen:
            unique = False
        seen.add(name)
        errs = is_dns1035_label(name)
        if errs:
            causes.append(invalid(f"spec.versions[{i}].name", name, ",".join(errs)))
    if not versions:
        causes.append(required("spec.versions", "must have at least one version"))
    if not unique:
        causes.append(invalid("spec.versions", spec.get("versions"), "must contain unique version names"))
    if versions and storage != 1:
        causes.append(
            invalid(
                "spec.versions",
                spec.get("versions"),
                "must have exactly one version marked as storage version",
            )
        )
    causes.extend(_validate_crd_names(_dict(spec.get("names")), "spec.names"))
    return causes


_SCHEMA_TYPES = ("array", "boolean", "integer", "number", "object", "string")


def _validate_schema_props(props: Any, path: str, depth: int = 0) -> list[Cause]:
    """A CRD's structural schema, as far as types go: every ``type`` one of JSON Schema's (upstream's
    ValidateCustomResourceDefinitionOpenAPISchema), through properties, items and additionalProperties."""
    props = _dict(props)
    causes: list[Cause] = []
    kind = props.get("type")
    if kind not in (None, "") and kind not in _SCHEMA_TYPES:
        causes.append(not_supported(path + ".type", kind, _SCHEMA_TYPES))
    if depth > 64:
        return causes
    for name, sub in _dict(props.get("properties")).items():
        causes.extend(_validate_schema_props(sub, f"{path}.properties[{name}]", depth + 1))
    items = props.get("items")
    if isinstance(items, dict):
        causes.extend(_validate_schema_props(items, path + ".items", depth + 1))
    extra = props.get("additionalProperties")
    if isinstance(extra, dict):
        causes.extend(_validate_schema_props(extra, path + ".additionalProperties", depth + 1))
    for combiner in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(_list(props.get(combiner))):
            causes.extend(_validate_schema_props(sub, f"{path}.{combiner}[{i}]", depth + 1))
    return causes


_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
_SESSION_AFFINITIES = ("ClientIP", "None")


def validate_service(service: Obj) -> list[Cause]:
    """Service spec enums and port numbers (upstream ValidateService, the parts clients get wrong)."""
    spec = _dict(service.get("spec"))
    causes: list[Cause] = []
    kind = spec.get("type")
    if kind not in (None, "") and kind not in _SERVICE_TYPES:
        causes.append(not_supported("spec.type", kind, _SERVICE_TYPES))
    affinity = spec.get("sessionAffinity")
    if affinity not in (None, "") and affinity not in _SESSION_AFFINITIES:
        causes.append(not_supported("spec.sessionAffinity", affinity, _SESSION_AFFINITIES))
    for i, port in enumerate(_list(spec.get("ports"))):
        port = _dict(port)
        at = f"spec.ports[{i}]"
        number = port.get("port")
        if isinstance(number, int) and not 1 <= number <= 65535:
            causes.append(invalid(at + ".port", number, PORT_RANGE))
        target = port.get("targetPort")
        if isinstance(target, int) and target != 0 and not 1 <= target <= 65535:
            causes.append(invalid(at + ".targetPort", target, PORT_RANGE))
        protocol = port.get("protocol")
        if protocol not in (None, "") and protocol not in _PORT_PROTOCOLS:
            causes.append(not_supported(at + ".protocol", protocol, _PORT_PROTOCOLS))
    return causes


def _int_or_percent(value: Any, path: str) -> list[Cause]:
    if isinstance(value, int):
        return [invalid(path, value, IS_NEGATIVE)] if value < 0 else []
    if isinstance(value, str):
        digits = value[:-1] if value.endswith("%") else ""
        if not digits.isdigit():
            return [
                invalid(
                    path, value, "a valid percent string must be a numeric string followed by an ending '%'"
                )
            ]
        if int(digits) > 100:
            return [invalid(path, value, "must not be greater than 100%")]
    return []


def validate_disruption_budget(pdb: Obj) -> list[Cause]:
    """PodDisruptionBudget spec (upstream ValidatePodDisruptionBudgetSpec): one of the two bounds, each a
    non-negative count or a percentage, and a valid selector."""
    spec = _dict(pdb.get("spec"))
    causes: list[Cause] = []
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    if low is not None and high is not None:
        causes.append(invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    if low is not None:
        causes.extend(_int_or_percent(low, "spec.minAvailable"))
    if high is not None:
        causes.extend(_int_or_percent(high, "spec.maxUnavailable"))
    if isinstance(spec.get("selector"), dict):
        causes.extend(_validate_label_selector(spec["selector"], "spec.selector"))
    return causes


def validate_priority_class(pc: Obj) -> list[Cause]:
    policy = pc.get("preemptionPolicy")
    if policy not in (None, "") and policy not in _PREEMPTION_POLICIES:
        return [not_supported("preemptionPolicy", policy, _PREEMPTION_POLICIES)]
    return []


def validate_replicated(obj: Obj) -> list[Cause]:
    """Deployments, ReplicaSets, StatefulSets, DaemonSets, ReplicationControllers: counts not negative and the
    pod template's spec valid (upstream validates the template as a pod)."""
    spec = _dict(obj.get("spec"))
    causes: list[Cause] = []
    for field in ("replicas", "minReadySeconds", "revisionHistoryLimit"):
        value = spec.get(field)
        if isinstance(value, int) and value < 0:
            causes.append(invalid(f"spec.{field}", value, IS_NEGATIVE))
    if spec.get("selector") is not None and isinstance(spec.get("selector"), dict):
        selector = spec["selector"]
        if "matchLabels" in selector or "matchExpressions" in selector:
            causes.extend(_validate_label_selector(selector, "spec.selector"))
    template = spec.get("template")
    if isinstance(template, dict) and template.get("spec") is not None:
        causes.extend(_validate_pod_spec(template.get("spec"), "spec.template.spec"))
    return causes


def validate_crd(crd: Obj) -> list[Cause]:
    causes = validate_object_meta(crd.get("metadata"), False, _crd_name_fn(crd))
    causes.extend(_validate_crd_spec(_dict(crd.get("spec"))))
    return causes


def validate_crd_update(new: Obj, old: Obj) -> list[Cause]:
    causes = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    causes.extend(_validate_crd_spec(new_spec))
    for field in ("scope", "group"):
        if new_spec.get(field) != old_spec.get(field):
            causes.append(invalid(f"spec.{field}", new_spec.get(field), FIELD_IMMUTABLE))
    return causes


def _kind_of(rtype: ResourceType) -> tuple[str, str]:
    return rtype.group, rtype.kind


# ------------------------------------------------------------------------------------------------------------
# Decoding errors (400 BadRequest, raised before validation)
# ------------------------------------------------------------------------------------------------------------

_GO_JSON_TYPES = {str: "string", bool: "bool", int: "number", float: "number", list: "array", dict: "object"}


def _json_type(value: Any) -> str:
    for py, name in _GO_JSON_TYPES.items():
        if type(value) is py:
            return name
    return "null"


def _quantity_maps(rtype: ResourceType, obj: Obj) -> Iterable[Mapping[str, Any]]:
    key = _kind_of(rtype)
    if key == ("", "Pod"):
        spec = _dict(obj.get("spec"))
        for field in ("containers", "initContainers"):
            for container in _list(spec.get(field)):
                resources = _dict(_dict(container).get("resources"))
                yield _dict(resources.get("limits"))
                yield _dict(resources.get("requests"))
        yield _dict(spec.get("overhead"))
    elif key == ("", "Node"):
        status = _dict(obj.get("status"))
        yield _dict(status.get("capacity"))
        yield _dict(status.get("allocatable"))


def _decode_prefix(rtype: ResourceType) -> str:
    return f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '


def decode_error(rtype: ResourceType, obj: Obj) -> str | None:
    """The 400 message upstream gives when the body cannot be decoded into the kind's Go type, else None.

    Covers resource quantities in Pods and Nodes, and the typed fields of a Lease spec.
    """
    for quantities in _quantity_maps(rtype, obj):
        for value in quantities.values():
            try:
                parse_quantity_with_format(value)
            except QuantityError as err:
                return _decode_prefix(rtype) + str(err)
    if _kind_of(rtype) == ("coordination.k8s.io", "Lease"):
        spec = obj.get("spec")
        if spec is not None and not isinstance(spec, dict):
            return (
                _decode_prefix(rtype)
                + f"json: cannot unmarshal {_json_type(spec)} into Go struct field Lease.spec of type v1.LeaseSpec"
            )
        spec = _dict(spec)
        typed = {
            "holderIdentity": (str, "string"),
            "leaseDurationSeconds": (int, "int32"),
            "acquireTime": (str, "v1.MicroTime"),
            "renewTime": (str, "v1.MicroTime"),
            "leaseTransitions": (int, "int32"),
            "strategy": (str, "v1.CoordinatedLeaseStrategy"),
            "preferredHolder": (str, "string"),
        }
        for field, (py, go) in typed.items():
            value = spec.get(field)
            if value is None:
                continue
            if type(value) is not py:
                return (
                    _decode_prefix(rtype)
                    + f"json: cannot unmarshal {_json_type(value)} into Go struct field LeaseSpec.spec.{field} of type {go}"
                )
    meta = _dict(obj.get("metadata"))
    for field in ("labels", "annotations"):
        for value in _dict(meta.get(field)).values():
            if not isinstance(value, str):
                return (
                    _decode_prefix(rtype)
                    + f"json: cannot unmarshal {_json_type(value)} into Go struct field ObjectMeta.metadata.{field} of type string"
                )
    return None
