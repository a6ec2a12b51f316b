"""RBAC kinds (Role, ClusterRole, RoleBinding, ClusterRoleBinding): upstream's validation (``ValidateRBACName``
lets names be any path segment, so ``system:kube-scheduler`` is valid), rules and subjects checked, ``roleRef``
immutable. Authorization by these objects is ``cluster/auth/rbac.py``."""

from __future__ import annotations

from typing import Any

from kubesched.apimachinery.validation import validate_path_segment_name
from kubesched.cluster import errors
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import Obj, ResourceType

RBAC_GROUP = "rbac.authorization.k8s.io"
_SUBJECT_KINDS = ["Group", "ServiceAccount", "User"]


def _path_segment(name: str, prefix: bool) -> list[str]:
    return validate_path_segment_name(name, prefix)


def _rule_causes(rules: Any, namespaced: bool, path: str = "rules") -> list[Cause]:
    causes: list[Cause] = []
    for i, rule in enumerate(rules or []):
        p = f"{path}[{i}]"
        if not isinstance(rule, dict):
            causes.append(errors.field_invalid(p, rule, "must be an object"))
            continue
        if not rule.get("verbs"):
            causes.append(errors.field_required(f"{p}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                causes.append(
                    errors.field_invalid(
                        f"{p}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs"
                    )
                )
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                causes.append(
                    errors.field_invalid(
                        p, urls, "rules cannot apply to both regular resources and non-resource URLs"
                    )
                )
            continue
        if not rule.get("apiGroups"):
            causes.append(
                errors.field_required(f"{p}.apiGroups", "resource rules must supply at least one api group")
            )
        if not rule.get("resources"):
            causes.append(
                errors.field_required(f"{p}.resources", "resource rules must supply at least one resource")
            )
    return causes


def _binding_causes(obj: Obj, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    ref = obj.get("roleRef") or {}
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.get("apiGroup") != RBAC_GROUP:
        causes.append(errors.field_not_supported("roleRef.apiGroup", ref.get("apiGroup") or "", [RBAC_GROUP]))
    if ref.get("kind") not in kinds:
        causes.append(errors.field_not_supported("roleRef.kind", ref.get("kind") or "", kinds))
    if not ref.get("name"):
        causes.append(errors.field_required("roleRef.name"))
    for i, s in enumerate(obj.get("subjects") or []):
        p = f"subjects[{i}]"
        if not isinstance(s, dict):
            causes.append(errors.field_invalid(p, s, "must be an object"))
            continue
        if not s.get("name"):
            causes.append(errors.field_required(f"{p}.name"))
        kind = s.get("kind")
        if kind not in _SUBJECT_KINDS:
            causes.append(errors.field_not_supported(f"{p}.kind", kind or "", _SUBJECT_KINDS))
        elif kind == "ServiceAccount":
            if s.get("apiGroup"):
                causes.append(errors.field_not_supported(f"{p}.apiGroup", s["apiGroup"], [""]))
            if not namespaced and not s.get("namespace"):
                causes.append(errors.field_required(f"{p}.namespace"))
        elif s.get("apiGroup") != RBAC_GROUP:
            causes.append(errors.field_not_supported(f"{p}.apiGroup", s.get("apiGroup") or "", [RBAC_GROUP]))
    return causes


class RoleStrategy(Strategy):
    name_check = staticmethod(_path_segment)

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        causes = super().validate_object(rtype, obj)
        causes += _rule_causes(obj.get("rules"), rtype.namespaced)
        agg = obj.get("aggregationRule")
        if isinstance(agg, dict) and not agg.get("clusterRoleSelectors"):
            causes.append(
                errors.field_required(
                    "aggregationRule.clusterRoleSelectors",
                    "at least one clusterRoleSelector required if aggregationRule is non-nil",
                )
            )
        return causes

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return super().validate_update(rtype, new, old) + self.validate_object(rtype, new)


class BindingStrategy(Strategy):
    name_check = staticmethod(_path_segment)

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return super().validate_object(rtype, obj) + _binding_causes(obj, rtype.namespaced)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        causes = super().validate_update(rtype, new, old) + _binding_causes(new, rtype.namespaced)
        if (new.get("roleRef") or {}) != (old.get("roleRef") or {}):
            causes.append(errors.field_invalid("roleRef", new.get("roleRef"), "cannot change roleRef"))
        return causes


ROLE = RoleStrategy()
BINDING = BindingStrategy()
