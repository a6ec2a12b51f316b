"""``PodTopologySpreadArgs``: the default constraints applied to pods that declare none."""

from __future__ import annotations

from typing import Any

from pydantic import StrictInt, StrictStr, model_validator

from kubesched.scheduler.config.args import ArgsModel, validate_qualified_name
from kubesched.scheduler.config.errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"


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
                errs.extend(validate_qualified_name(f"{p}.topologyKey", c.topology_key))
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


__all__ = [
    "LIST_DEFAULTING",
    "SYSTEM_DEFAULTING",
    "PodTopologySpreadArgs",
    "TopologySpreadConstraint",
    "system_default_constraints",
]
