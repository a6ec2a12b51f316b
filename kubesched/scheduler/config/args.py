"""Typed args of the in-tree plugins, with upstream defaults and validation.

Each model decodes the ``args`` of a ``pluginConfig`` entry strictly (an unknown field is an error), fills in
the defaults kube-scheduler applies, and reports semantic problems through ``validate_args(path)`` with
upstream-style field paths. The defaults are the same in v1, v1beta3 and v1beta2.
"""

from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator
from pydantic.alias_generators import to_camel

from .errors import FieldError, duplicate, forbidden, invalid, not_supported, required, unknown_field

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

# Scores in a RequestedToCapacityRatio shape are 0..10, scaled by 10 to the 0..100 node score range.
MAX_CUSTOM_PRIORITY_SCORE = 10

_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@runtime_checkable
class ValidatesArgs(Protocol):
    """Args that check their own values; an out-of-tree ``args_model`` may implement this too."""

    def validate_args(self, path: str) -> list[FieldError]: ...


class ArgsModel(BaseModel):
    """Base for plugin args: camelCase on the wire, strict about unknown fields, immutable once built."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )

    def validate_args(self, path: str) -> list[FieldError]:
        return []


class ResourceSpec(ArgsModel):
    name: StrictStr
    weight: StrictInt = 1

    @model_validator(mode="before")
    @classmethod
    def _default_weight(cls, data: Any) -> Any:
        # Upstream treats an unset or zero resource weight as 1.
        if isinstance(data, dict) and data.get("weight", 0) in (0, None):
            return {**data, "weight": 1}
        return data


def default_resources() -> tuple[ResourceSpec, ...]:
    return (ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1))


class UtilizationShapePoint(ArgsModel):
    utilization: StrictInt
    score: StrictInt


class RequestedToCapacityRatioParam(ArgsModel):
    shape: tuple[UtilizationShapePoint, ...] = ()


class ScoringStrategy(ArgsModel):
    # No default for ``type``: upstream only defaults the whole strategy, so an empty type is rejected.
    type: StrictStr = ""
    resources: tuple[ResourceSpec, ...] = Field(default_factory=default_resources)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_resources(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("resources"):
            return {k: v for k, v in data.items() if k != "resources"}
        return data


def _least_allocated() -> ScoringStrategy:
    return ScoringStrategy(type=LEAST_ALLOCATED)


class NodeResourcesFitArgs(ArgsModel):
    ignored_resources: tuple[StrictStr, ...] = ()
    ignored_resource_groups: tuple[StrictStr, ...] = ()
    scoring_strategy: ScoringStrategy = Field(default_factory=_least_allocated)

    @model_validator(mode="before")
    @classmethod
    def _default_strategy(cls, data: Any) -> Any:
        # An explicit null strategy means "use the default", as an absent one does.
        if isinstance(data, dict) and "scoringStrategy" in data and data["scoringStrategy"] is None:
            return {k: v for k, v in data.items() if k != "scoringStrategy"}
        return data

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        for i, res in enumerate(self.ignored_resources):
            errs.extend(_validate_qualified_name(f"{path}.ignoredResources[{i}]", res))
        for i, group in enumerate(self.ignored_resource_groups):
            p = f"{path}.ignoredResourceGroups[{i}]"
            if "/" in group:
                errs.append(invalid(p, group, "resource group name can't contain '/'"))
            errs.extend(_validate_qualified_name(p, group))
        strategy = self.scoring_strategy
        sp = f"{path}.scoringStrategy"
        if strategy.type not in SCORING_STRATEGY_TYPES:
            errs.append(not_supported(f"{sp}.type", strategy.type, SCORING_STRATEGY_TYPES))
        errs.extend(_validate_resource_weights(f"{sp}.resources", strategy.resources))
        ratio_path = f"{sp}.requestedToCapacityRatio"
        if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            if strategy.requested_to_capacity_ratio is None:
                errs.append(required(ratio_path, "must be specified when type is RequestedToCapacityRatio"))
            else:
                errs.extend(
                    _validate_shape(f"{ratio_path}.shape", strategy.requested_to_capacity_ratio.shape)
                )
        elif strategy.requested_to_capacity_ratio is not None:
            errs.append(forbidden(ratio_path, "must be nil when type is not RequestedToCapacityRatio"))
        return errs


class NodeResourcesBalancedAllocationArgs(ArgsModel):
    resources: tuple[ResourceSpec, ...] = Field(default_factory=default_resources)

    @model_validator(mode="before")
    @classmethod
    def _default_resources(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("resources"):
            return {k: v for k, v in data.items() if k != "resources"}
        return data

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        seen: set[str] = set()
        for i, res in enumerate(self.resources):
            if res.name in seen:
                errs.append(duplicate(f"{path}.resources[{i}].name", res.name))
            seen.add(res.name)
            if res.weight != 1:
                errs.append(invalid(f"{path}.resources[{i}].weight", res.weight, "must be 1"))
        return errs


class InterPodAffinityArgs(ArgsModel):
    hard_pod_affinity_weight: StrictInt = 1
    ignore_preferred_terms_of_existing_pods: StrictBool = False

    def validate_args(self, path: str) -> list[FieldError]:
        w = self.hard_pod_affinity_weight
        if not 0 <= w <= 100:
            return [invalid(f"{path}.hardPodAffinityWeight", w, "not in valid range [0, 100]")]
        return []


class NodeAffinityArgs(ArgsModel):
    # A core/v1 NodeAffinity, kept as its wire form: the NodeAffinity plugin matches it like a pod's own.
    added_affinity: dict[str, Any] | None = None

    def validate_args(self, path: str) -> list[FieldError]:
        if self.added_affinity is None:
            return []
        return _validate_node_affinity(f"{path}.addedAffinity", self.added_affinity)


class TopologySpreadConstraint(ArgsModel):
    max_skew: StrictInt
    topology_key: StrictStr = ""
    when_unsatisfiable: StrictStr = ""
    label_selector: dict[str, Any] | None = None
    min_domains: StrictInt | None = None
    node_affinity_policy: StrictStr | None = None
    node_taints_policy: StrictStr | None = None
    match_label_keys: tuple[StrictStr, ...] | None = None


def system_default_constraints() -> tuple[TopologySpreadConstraint, ...]:
    """The spreading kube-scheduler applies when ``defaultingType`` is System (soft, by host then zone)."""
    return (
        TopologySpreadConstraint(
            max_skew=3, topology_key="kubernetes.io/hostname", when_unsatisfiable="ScheduleAnyway"
        ),
        TopologySpreadConstraint(
            max_skew=5, topology_key="topology.kubernetes.io/zone", when_unsatisfiable="ScheduleAnyway"
        ),
    )


class PodTopologySpreadArgs(ArgsModel):
    default_constraints: tuple[TopologySpreadConstraint, ...] = ()
    defaulting_type: StrictStr = SYSTEM_DEFAULTING

    @model_validator(mode="before")
    @classmethod
    def _default_type(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("defaultingType") == "":
            return {**data, "defaultingType": SYSTEM_DEFAULTING}
        return data

    @property
    def effective_default_constraints(self) -> tuple[TopologySpreadConstraint, ...]:
        """The constraints applied to pods that declare none: the System pair, or the configured List."""
        if self.defaulting_type == SYSTEM_DEFAULTING:
            return system_default_constraints()
        return self.default_constraints

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        tp = f"{path}.defaultingType"
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            errs.append(not_supported(tp, self.defaulting_type, (SYSTEM_DEFAULTING, LIST_DEFAULTING)))
        elif self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            errs.append(invalid(tp, self.defaulting_type, "when .defaultConstraints are not empty"))
        cp = f"{path}.defaultConstraints"
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            p = f"{cp}[{i}]"
            if c.max_skew <= 0:
                errs.append(invalid(f"{p}.maxSkew", c.max_skew, "not in valid range (0, inf)"))
            if not c.topology_key:
                errs.append(required(f"{p}.topologyKey", "can not be empty"))
            else:
                errs.extend(_validate_qualified_name(f"{p}.topologyKey", c.topology_key))
            actions = ("DoNotSchedule", "ScheduleAnyway")
            if not c.when_unsatisfiable:
                errs.append(required(f"{p}.whenUnsatisfiable", "can not be empty"))
            elif c.when_unsatisfiable not in actions:
                errs.append(not_supported(f"{p}.whenUnsatisfiable", c.when_unsatisfiable, actions))
            if c.label_selector is not None:
                errs.append(
                    forbidden(
                        f"{p}.labelSelector",
                        "constraint must not define a selector, as they deduced for each pod",
                    )
                )
            key = (c.topology_key, c.when_unsatisfiable)
            if key in seen:
                errs.append(duplicate(p, f"{{{c.topology_key}, {c.when_unsatisfiable}}}"))
            seen.add(key)
        return errs


class DefaultPreemptionArgs(ArgsModel):
    min_candidate_nodes_percentage: StrictInt = 10
    min_candidate_nodes_absolute: StrictInt = 100

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        pct_path, abs_path = f"{path}.minCandidateNodesPercentage", f"{path}.minCandidateNodesAbsolute"
        if not 0 <= pct <= 100:
            errs.append(invalid(pct_path, pct, "not in valid range [0, 100]"))
        if absolute < 0:
            errs.append(invalid(abs_path, absolute, "not in valid range [0, inf)"))
        if pct == 0 and absolute == 0:
            errs.append(
                invalid(pct_path, pct, "cannot be zero at the same time as minCandidateNodesAbsolute")
            )
            errs.append(
                invalid(abs_path, absolute, "cannot be zero at the same time as minCandidateNodesPercentage")
            )
        return errs


# Plugin name -> its typed args; the registry in plugins.py attaches these to the in-tree specs.
IN_TREE_ARGS: dict[str, type[ArgsModel]] = {
    "NodeResourcesFit": NodeResourcesFitArgs,
    "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs,
    "InterPodAffinity": InterPodAffinityArgs,
    "NodeAffinity": NodeAffinityArgs,
    "PodTopologySpread": PodTopologySpreadArgs,
    "DefaultPreemption": DefaultPreemptionArgs,
}


# --- shared checks ---------------------------------------------------------------------------------------


def _validate_resource_weights(path: str, resources: tuple[ResourceSpec, ...]) -> list[FieldError]:
    errs = []
    for i, res in enumerate(resources):
        if not 0 < res.weight <= 100:
            errs.append(
                invalid(
                    f"{path}[{i}].weight",
                    res.weight,
                    f"resource weight of {res.name} not in valid range (0, 100]",
                )
            )
    return errs


def _validate_shape(path: str, shape: tuple[UtilizationShapePoint, ...]) -> list[FieldError]:
    if not shape:
        return [required(path, "at least one point must be specified")]
    errs: list[FieldError] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(
                invalid(
                    f"{path}[{i}].utilization",
                    shape[i].utilization,
                    "values must be sorted in increasing order",
                )
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            errs.append(invalid(f"{path}[{i}].utilization", point.utilization, "not in valid range [0, 100]"))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(
                invalid(
                    f"{path}[{i}].score", point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
                )
            )
    return errs


def _validate_qualified_name(path: str, value: str) -> list[FieldError]:
    """A label-style name: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters."""
    prefix, _, name = value.rpartition("/")
    errs: list[FieldError] = []
    if "/" in value and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        errs.append(invalid(path, value, "prefix part must be a lowercase RFC 1123 subdomain"))
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        errs.append(
            invalid(
                path,
                value,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character (at most 63 characters)",
            )
        )
    return errs


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


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
            if len(values) != 1 or not str(values[0]).lstrip("-").isdigit():
                errs.append(
                    invalid(
                        f"{p}.values",
                        values,
                        "must be specified single integer value when `operator` is 'Lt' or 'Gt'",
                    )
                )
        elif op not in _SELECTOR_OPERATORS:
            errs.append(not_supported(f"{p}.operator", op, _SELECTOR_OPERATORS))
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
