"""``NodeAffinityArgs``: the profile's ``addedAffinity``, checked as the API server checks a pod's."""

from __future__ import annotations

from typing import Any

from kubesched.apimachinery.labels import NODE_SELECTOR_OPERATORS, parse_int64
from kubesched.scheduler.config.args import ArgsModel
from kubesched.scheduler.config.errors import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    unknown_field,
)


class NodeAffinityArgs(ArgsModel):
    # A core/v1 NodeAffinity, kept as its wire form: the NodeAffinity plugin matches it like a pod's own.
    added_affinity: dict[str, Any] | None = None

    def validate_args(self, path: str) -> list[FieldError]:
        if self.added_affinity is None:
            return []
        return _validate_node_affinity(f"{path}.addedAffinity", self.added_affinity)


def _validate_node_affinity(path: str, affinity: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    known = {
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    }
    for key in affinity:
        if key not in known:
            errs.append(unknown_field(f"{path}.{key}"))
    req = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        rp = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        terms = req.get("nodeSelectorTerms") if isinstance(req, dict) else None
        if not isinstance(terms, list) or not terms:
            errs.append(required(f"{rp}.nodeSelectorTerms", "must have at least one node selector term"))
        else:
            for i, term in enumerate(terms):
                errs.extend(_validate_selector_term(f"{rp}.nodeSelectorTerms[{i}]", term))
    preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if preferred is not None:
        pp = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
        if not isinstance(preferred, list):
            errs.append(invalid(pp, preferred, "must be a list"))
        else:
            for i, item in enumerate(preferred):
                ip = f"{pp}[{i}]"
                if not isinstance(item, dict):
                    errs.append(invalid(ip, item, "must be an object"))
                    continue
                weight = item.get("weight")
                if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
                    errs.append(invalid(f"{ip}.weight", weight, "must be in the range 1-100"))
                errs.extend(_validate_selector_term(f"{ip}.preference", item.get("preference", {})))
    return errs


def _validate_selector_term(path: str, term: Any) -> list[FieldError]:
    if not isinstance(term, dict):
        return [invalid(path, term, "must be an object")]
    errs: list[FieldError] = []
    for i, req in enumerate(term.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(req, dict):
            errs.append(invalid(p, req, "must be an object"))
            continue
        op, values = req.get("operator"), req.get("values") or []
        if not req.get("key"):
            errs.append(required(f"{p}.key", ""))
        if op in ("In", "NotIn") and not values:
            errs.append(required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            errs.append(
                forbidden(f"{p}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
            )
        elif op in ("Gt", "Lt"):
            if len(values) != 1 or parse_int64(str(values[0])) is None:
                errs.append(
                    invalid(
                        f"{p}.values",
                        values,
                        "must be specified single integer value when `operator` is 'Lt' or 'Gt'",
                    )
                )
        elif op not in NODE_SELECTOR_OPERATORS:
            errs.append(not_supported(f"{p}.operator", op, tuple(NODE_SELECTOR_OPERATORS)))
    for i, req in enumerate(term.get("matchFields") or []):
        p = f"{path}.matchFields[{i}]"
        if not isinstance(req, dict):
            errs.append(invalid(p, req, "must be an object"))
            continue
        if req.get("key") != "metadata.name":
            errs.append(invalid(f"{p}.key", req.get("key"), "not a valid field selector key"))
        if req.get("operator") not in ("In", "NotIn"):
            errs.append(invalid(f"{p}.operator", req.get("operator"), "not a valid selector operator"))
        if len(req.get("values") or []) != 1:
            errs.append(
                required(
                    f"{p}.values",
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                )
            )
    return errs


__all__ = ["NodeAffinityArgs"]
