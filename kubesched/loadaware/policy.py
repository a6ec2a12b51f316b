"""crane's ``DynamicSchedulerPolicy`` (``scheduler.policy.crane.io/v1alpha1``): which metrics to sync and how
often, the load limits Filter enforces, the weights Score uses, and the hot-value windows.

    apiVersion: scheduler.policy.crane.io/v1alpha1
    kind: DynamicSchedulerPolicy
    spec:
      syncPolicy: [{name: cpu_usage_avg_5m, period: 3m}, ...]
      predicate:  [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}, ...]   # crane's spelling; maxLimitPercent too
      priority:   [{name: cpu_usage_avg_5m, weight: 0.2}, ...]
      hotValue:   [{timeRange: 5m, count: 5}, ...]

Durations are Go duration strings. Unlike crane (which ignores unknown fields and divides by a zero hot-value
count), mistakes are errors naming the field. Entries crane would silently skip (a predicate or priority
metric without a ``syncPolicy`` period) are kept with crane's meaning and reported in ``warnings``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from kubesched.scheduler.config import DurationError, FieldError, parse_duration
from kubesched.scheduler.config.document import pydantic_field_errors
from kubesched.scheduler.config.errors import duplicate, invalid, malformed, not_supported, required

from .annotations import active_duration

log = logging.getLogger(__name__)

API_VERSION = "scheduler.policy.crane.io/v1alpha1"
KIND = "DynamicSchedulerPolicy"
# crane's default for the plugin's policyConfigPath (all of crane's manifests set /etc/kubernetes/policy.yaml).
DEFAULT_POLICY_PATH = "/etc/kubernetes/dynamic-scheduler-policy.yaml"
MAX_PREDICATES = 32


class PolicyError(ValueError):
    """A policy that cannot be used; ``errors`` lists every problem found."""

    def __init__(self, errors: list[FieldError], *, source: str | None = None) -> None:
        self.errors = tuple(errors)
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" ({self.source})" if self.source else ""
        return "\n".join([f"invalid {KIND}{where}:", *(f"  - {e}" for e in self.errors)])

    def one_line(self) -> str:
        """The problems on one line, for a command's error message."""
        where = f" {self.source}" if self.source else ""
        return f"invalid {KIND}{where}: " + "; ".join(str(e) for e in self.errors)


def _duration(value: Any) -> float:
    if not isinstance(value, str):
        raise ValueError('must be a duration string such as "3m" or "1h"')
    try:
        seconds = parse_duration(value)
    except DurationError as exc:
        raise ValueError(str(exc)) from None
    if seconds <= 0:
        raise ValueError("must be greater than 0")
    return seconds


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("must be a finite number")
    return float(value)


Duration = Annotated[float, PlainValidator(_duration)]
Number = Annotated[float, PlainValidator(_number)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)


class SyncPolicy(_Model):
    """``metric`` is refreshed every ``period`` seconds (the annotator's job); values live ``period + 5m``."""

    name: StrictStr = Field(min_length=1)
    period: Duration

    @property
    def active_duration(self) -> float:
        return active_duration(self.period)


class PredicatePolicy(_Model):
    """Filter rejects a node whose fresh ``name`` value exceeds ``max_limit_percent`` (a fraction; 0 = off)."""

    name: StrictStr = Field(min_length=1)
    max_limit_percent: Number = Field(default=0.0, alias="maxLimitPercent")

    @model_validator(mode="before")
    @classmethod
    def _crane_spelling(cls, data: Any) -> Any:
        # crane's field is "maxLimitPecent"; accept it, and the correct spelling, but not two different values.
        if not isinstance(data, dict) or "maxLimitPecent" not in data:
            return data
        data = dict(data)
        crane = data.pop("maxLimitPecent")
        if "maxLimitPercent" in data and data["maxLimitPercent"] != crane:
            raise ValueError(
                f"maxLimitPecent ({crane}) and maxLimitPercent ({data['maxLimitPercent']}) disagree; give one"
            )
        data["maxLimitPercent"] = crane
        return data

    @field_validator("max_limit_percent")
    @classmethod
    def _fraction(cls, value: float) -> float:
        if not 0 <= value <= 1:
            raise ValueError("must be in [0, 1]: the limit is a fraction (0.65 = 65 %), 0 disables it")
        return value


class PriorityPolicy(_Model):
    """Score adds ``(1 - usage) * weight * 100`` for ``name`` and divides by the sum of weights."""

    name: StrictStr = Field(min_length=1)
    weight: Number

    @field_validator("weight")
    @classmethod
    def _not_negative(cls, value: float) -> float:
        if value < 0:
            raise ValueError("must not be negative")
        return value


class HotValuePolicy(_Model):
    """Every ``count`` bindings to a node within ``time_range`` seconds add 1 to its hot value."""

    time_range: Duration = Field(alias="timeRange")
    count: StrictInt = Field(gt=0)


class PolicySpec(_Model):
    sync_policy: tuple[SyncPolicy, ...] = Field(default=(), alias="syncPolicy")
    # Each predicate needs a Filter reason bit of its own (64 in all, most kept for per-node reasons).
    predicate: tuple[PredicatePolicy, ...] = Field(default=(), max_length=MAX_PREDICATES)
    priority: tuple[PriorityPolicy, ...] = ()
    hot_value: tuple[HotValuePolicy, ...] = Field(default=(), alias="hotValue")

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_empty(cls, data: Any) -> Any:
        # "predicate:" with nothing under it is YAML null; crane reads it as an empty list.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data


class _Document(_Model):
    api_version: StrictStr = Field(alias="apiVersion")
    kind: StrictStr
    metadata: dict[str, Any] | None = None
    spec: PolicySpec


class DynamicSchedulerPolicy:
    """A validated policy plus the lookups the plugin needs. Build with ``parse_policy``/``load_policy``."""

    __slots__ = ("_active", "source", "spec", "warnings")

    def __init__(self, spec: PolicySpec, *, source: str = "", warnings: tuple[str, ...] = ()) -> None:
        self.spec = spec
        self.source = source
        self.warnings = warnings
        active: dict[str, float] = {}
        for sync in spec.sync_policy:
            active.setdefault(sync.name, sync.active_duration)  # crane uses the first entry for a name
        self._active = active

    def active_duration(self, metric: str) -> float | None:
        """``period + 5m`` of ``metric``, or None when it has no ``syncPolicy`` entry (crane then skips the
        predicate and scores the metric 0)."""
        return self._active.get(metric)

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric named anywhere in the policy, in first-mention order."""
        names = [s.name for s in self.spec.sync_policy]
        names += [p.name for p in self.spec.predicate] + [p.name for p in self.spec.priority]
        return tuple(dict.fromkeys(names))

    @property
    def max_hot_value_range(self) -> float:
        return max((h.time_range for h in self.spec.hot_value), default=0.0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DynamicSchedulerPolicy) and other.spec == self.spec

    def __repr__(self) -> str:
        return f"DynamicSchedulerPolicy(source={self.source!r}, metrics={list(self.metrics)})"


# crane's shipped policy (deploy/manifests/dynamic/policy.yaml, identical in the README and the controller's
# ConfigMap): usages are fractions of 1.
DEFAULT_POLICY_DOCUMENT: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": KIND,
    "spec": {
        "syncPolicy": [
            {"name": "cpu_usage_avg_5m", "period": "3m"},
            {"name": "cpu_usage_max_avg_1h", "period": "15m"},
            {"name": "cpu_usage_max_avg_1d", "period": "3h"},
            {"name": "mem_usage_avg_5m", "period": "3m"},
            {"name": "mem_usage_max_avg_1h", "period": "15m"},
            {"name": "mem_usage_max_avg_1d", "period": "3h"},
        ],
        "predicate": [
            {"name": "cpu_usage_avg_5m", "maxLimitPecent": 0.65},
            {"name": "cpu_usage_max_avg_1h", "maxLimitPecent": 0.75},
            {"name": "mem_usage_avg_5m", "maxLimitPecent": 0.65},
            {"name": "mem_usage_max_avg_1h", "maxLimitPecent": 0.75},
        ],
        "priority": [
            {"name": "cpu_usage_avg_5m", "weight": 0.2},
            {"name": "cpu_usage_max_avg_1h", "weight": 0.3},
            {"name": "cpu_usage_max_avg_1d", "weight": 0.5},
            {"name": "mem_usage_avg_5m", "weight": 0.2},
            {"name": "mem_usage_max_avg_1h", "weight": 0.3},
            {"name": "mem_usage_max_avg_1d", "weight": 0.5},
        ],
        "hotValue": [{"timeRange": "5m", "count": 5}, {"timeRange": "1m", "count": 2}],
    },
}


def default_policy() -> DynamicSchedulerPolicy:
    """crane's default policy."""
    return parse_policy(DEFAULT_POLICY_DOCUMENT, source="<crane default policy>")


def parse_policy(document: Mapping[str, Any] | str | bytes, *, source: str = "") -> DynamicSchedulerPolicy:
    """A policy from its YAML/JSON text or parsed mapping. Raises ``PolicyError``."""
    data: Any = document
    if isinstance(document, str | bytes):
        try:
            data = yaml.safe_load(document)
        except yaml.YAMLError as exc:
            raise PolicyError([malformed(str(exc))], source=source or None) from None
    if not isinstance(data, Mapping):
        found = "nothing" if data is None else f"a {type(data).__name__}"
        raise PolicyError([malformed(f"expected a {KIND} mapping, found {found}")], source=source or None)
    errors: list[FieldError] = []
    version, kind = data.get("apiVersion"), data.get("kind")
    if version is None:
        errors.append(required("apiVersion", f'must be "{API_VERSION}"'))
    elif version != API_VERSION:
        errors.append(not_supported("apiVersion", version, (API_VERSION,)))
    if kind is None:
        errors.append(required("kind", f'must be "{KIND}"'))
    elif kind != KIND:
        errors.append(not_supported("kind", kind, (KIND,)))
    try:
        doc = _Document.model_validate(dict(data))
    except ValidationError as exc:
        field_errors = pydantic_field_errors(exc)
        errors.extend(_as_written(e, data) for e in field_errors if e.field not in ("apiVersion", "kind"))
        raise PolicyError(errors, source=source or None) from None
    if errors:
        raise PolicyError(errors, source=source or None)
    errors.extend(_duplicates(doc.spec))
    if errors:
        raise PolicyError(errors, source=source or None)
    return DynamicSchedulerPolicy(doc.spec, source=source, warnings=tuple(_warnings(doc.spec)))


def _as_written(error: FieldError, data: Mapping[str, Any]) -> FieldError:
    """Name the limit field as the document spells it (crane's ``maxLimitPecent`` or ``maxLimitPercent``)."""
    head, dot, last = error.field.rpartition(".")
    if last != "maxLimitPercent" or not head.startswith("spec.predicate["):
        return error
    try:
        entry = (data.get("spec") or {})["predicate"][int(head[len("spec.predicate[") : -1])]
    except (KeyError, IndexError, TypeError, ValueError):
        return error
    if isinstance(entry, Mapping) and "maxLimitPecent" in entry and "maxLimitPercent" not in entry:
        return dataclasses.replace(error, field=f"{head}{dot}maxLimitPecent")
    return error


def _duplicates(spec: PolicySpec) -> list[FieldError]:
    errors = []
    groups: tuple[tuple[str, Sequence[SyncPolicy | PredicatePolicy | PriorityPolicy]], ...] = (
        ("syncPolicy", spec.sync_policy),
        ("predicate", spec.predicate),
        ("priority", spec.priority),
    )
    for field, entries in groups:
        seen: set[str] = set()
        for i, entry in enumerate(entries):
            if entry.name in seen:
                errors.append(duplicate(f"spec.{field}[{i}].name", entry.name))
            seen.add(entry.name)
    return errors


def _warnings(spec: PolicySpec) -> list[str]:
    synced = {s.name for s in spec.sync_policy}
    out = []
    for i, p in enumerate(spec.predicate):
        if p.name not in synced:
            out.append(
                f"spec.predicate[{i}]: {p.name!r} has no syncPolicy period, so this limit is never checked"
            )
        elif p.max_limit_percent == 0:
            out.append(f"spec.predicate[{i}]: {p.name!r} has limit 0, which disables it")
    for i, q in enumerate(spec.priority):
        if q.name not in synced:
            out.append(
                f"spec.priority[{i}]: {q.name!r} has no syncPolicy period, so it always scores 0 "
                "while its weight still counts"
            )
    if spec.priority and sum(q.weight for q in spec.priority) == 0:
        out.append("spec.priority: all weights are 0, so every node scores 0")
    return out


def load_policy(path: str | os.PathLike[str]) -> DynamicSchedulerPolicy:
    """Read and parse a policy file. Raises ``PolicyError`` (also for a file that cannot be read)."""
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        raise PolicyError([invalid("", str(p), exc.strerror or str(exc))], source=str(p)) from None
    return parse_policy(text, source=str(p))


def policy_for(path: str | None) -> DynamicSchedulerPolicy:
    """The policy a component runs with, one rule for the scheduler's Dynamic plugin and the annotator: a file
    that is named (``policyConfigPath``, ``--policy-config-path``) must exist and be valid, else ``PolicyError``,
    as crane's scheduler and controller refuse to start without it. With none named, crane's default path
    (``/etc/kubernetes/policy.yaml``) is read when it exists, else crane's default policy applies (logged).
    """
    if path is None:
        file = Path(DEFAULT_POLICY_PATH)
        if not file.exists():
            log.info(
                "Dynamic: no policy file named and %s does not exist; using crane's default policy", file
            )
            return default_policy()
    else:
        file = Path(path)
        if not file.is_file():
            raise PolicyError(
                [invalid("", str(file), "the DynamicSchedulerPolicy file does not exist")], source=str(file)
            )
    policy = load_policy(file)
    for warning in policy.warnings:
        log.warning("Dynamic policy %s: %s", file, warning)
    return policy


__all__ = [
    "API_VERSION",
    "DEFAULT_POLICY_DOCUMENT",
    "DEFAULT_POLICY_PATH",
    "KIND",
    "DynamicSchedulerPolicy",
    "HotValuePolicy",
    "PolicyError",
    "PolicySpec",
    "PredicatePolicy",
    "PriorityPolicy",
    "SyncPolicy",
    "default_policy",
    "load_policy",
    "parse_policy",
    "policy_for",
]
