"""Validation rules, with upstream's field paths and wording where upstream has a rule.

Three stages, because each needs what the one before produced:
- ``validate_plugin_references``: the plugin lists as written (unknown, misplaced, duplicated, weights);
- ``validate_profile_plugins``: a profile's plugins after merging and multiPoint expansion;
- ``validate_configuration``: the defaulted configuration as a whole (scalars, leader election, profiles).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kubesched.apimachinery.duration import format_duration

from .defaults import LEADER_ELECTION_JITTER_FACTOR
from .document import RawPlugins, RawPluginSet
from .errors import FieldError, duplicate, invalid, required
from .merge import ALL_POINTS, DuplicatePlugin
from .plugins import MULTI_POINT, UPSTREAM_UNIMPLEMENTED, ExtensionPoint, point_attribute
from .types import V1, Extender, SchedulerConfiguration, SchedulerProfile

if TYPE_CHECKING:
    from kubesched.scheduler.framework.catalogue import PluginDefinition

MIN_SCORE_WEIGHT = 1
MAX_SCORE_WEIGHT = 100

# Plugins removed upstream, by the version that removed them (upstream ``invalidPluginsByVersion``).
INVALID_PLUGINS_BY_VERSION: dict[str, frozenset[str]] = {
    V1: frozenset({"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"}),
}

_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def raw_plugin_set(plugins: RawPlugins | None, point: str) -> RawPluginSet | None:
    if plugins is None:
        return None
    return getattr(plugins, point_attribute(point))


def invalid_in_version(api_version: str, name: str) -> str | None:
    """The message for a plugin removed in (or before) ``api_version``, or None if it is valid there."""
    removed_in = INVALID_PLUGINS_BY_VERSION.get(api_version, frozenset())
    if name in removed_in:
        return (
            f'was invalid in version "{api_version}" (KubeSchedulerConfiguration is version "{api_version}")'
        )
    return None


def unknown_plugin_detail(name: str, catalogue: Mapping[str, PluginDefinition]) -> str:
    if name in UPSTREAM_UNIMPLEMENTED:
        return "unknown plugin: an upstream in-tree plugin that kubesched does not implement"
    close = difflib.get_close_matches(name, list(catalogue), n=1)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    return f"unknown plugin (not in the plugin registry: {', '.join(sorted(catalogue))}){hint}"


def validate_plugin_references(
    plugins: RawPlugins | None, path: str, catalogue: Mapping[str, PluginDefinition], api_version: str
) -> list[FieldError]:
    """Every plugin named in ``enabled`` must exist, implement the point, appear once, and weigh 1..100."""
    errors: list[FieldError] = []
    for point in ALL_POINTS:
        plugin_set = raw_plugin_set(plugins, point)
        if plugin_set is None:
            continue
        set_path = f"{path}.plugins.{point}"
        seen: set[str] = set()
        for i, entry in enumerate(plugin_set.enabled or []):
            entry_path = f"{set_path}.enabled[{i}]"
            if not entry.name:
                errors.append(required(f"{entry_path}.name"))
                continue
            if entry.name in seen:
                errors.append(duplicate(entry_path, entry.name))
            seen.add(entry.name)
            removed = invalid_in_version(api_version, entry.name)
            if removed:
                errors.append(invalid(entry_path, entry.name, removed))
                continue
            spec = catalogue.get(entry.name)
            if spec is None:
                errors.append(
                    invalid(f"{entry_path}.name", entry.name, unknown_plugin_detail(entry.name, catalogue))
                )
                continue
            if point != MULTI_POINT and not spec.implements(point):
                errors.append(invalid(f"{entry_path}.name", entry.name, _not_implemented(point, spec)))
                continue
            # At score a weight must be 1..100. Under multiPoint 0 also means "unset" (upstream's own
            # --write-config-to output writes weight 0 for plugins that have none), so only 1..100 or 0.
            if point == ExtensionPoint.SCORE:
                bad_weight = (
                    entry.weight is not None and not MIN_SCORE_WEIGHT <= entry.weight <= MAX_SCORE_WEIGHT
                )
            else:
                bad_weight = (
                    point == MULTI_POINT
                    and spec.implements(ExtensionPoint.SCORE)
                    and entry.weight is not None
                    and not 0 <= entry.weight <= MAX_SCORE_WEIGHT
                )
            if bad_weight:
                errors.append(
                    invalid(
                        f"{entry_path}.weight",
                        entry.weight,
                        f"must be in the range [{MIN_SCORE_WEIGHT}, {MAX_SCORE_WEIGHT}]"
                        + (" (or 0 for unset)" if point == MULTI_POINT else ""),
                    )
                )
        for i, entry in enumerate(plugin_set.disabled or []):
            if not entry.name:
                errors.append(required(f"{set_path}.disabled[{i}].name"))
    return errors


def validate_profile_plugins(
    profile: SchedulerProfile,
    path: str,
    catalogue: Mapping[str, PluginDefinition],
    duplicates: Sequence[DuplicatePlugin],
) -> list[FieldError]:
    """A resolved profile needs exactly one queue sort and a binder; nothing may run twice at a point."""
    errors: list[FieldError] = []
    plugins = profile.plugins
    for dup in duplicates:
        errors.append(duplicate(f"{path}.plugins.{dup.point}", dup.name))
    for point, refs in plugins.items():
        for ref in refs:
            spec = catalogue.get(ref.name)
            if spec is not None and not spec.implements(point):
                errors.append(invalid(f"{path}.plugins.{point}", ref.name, _not_implemented(point, spec)))
    name = profile.scheduler_name
    if len(plugins.queue_sort) != 1:
        errors.append(
            invalid(
                f"{path}.plugins.queueSort",
                len(plugins.queue_sort),
                f'only one queue sort plugin required for profile with scheduler name "{name}", '
                f"but got {len(plugins.queue_sort)}",
            )
        )
    if not plugins.bind:
        errors.append(
            required(
                f"{path}.plugins.bind",
                f'at least one bind plugin is needed for profile with scheduler name "{name}"',
            )
        )
    return errors


def validate_common_queue_sort(profiles: Sequence[SchedulerProfile]) -> list[FieldError]:
    """All profiles share one scheduling queue, so they must sort it the same way, with the same args."""
    if not profiles:
        return []
    errors: list[FieldError] = []
    first = profiles[0]
    canon = first.plugins.queue_sort
    canon_args = {ref.name: first.args(ref.name) for ref in canon}
    for i, profile in enumerate(profiles[1:], start=1):
        current = profile.plugins.queue_sort
        if current != canon:
            errors.append(
                invalid(
                    f"profiles[{i}].plugins.queueSort",
                    [r.name for r in current],
                    "must be the same for all profiles",
                )
            )
        elif {ref.name: profile.args(ref.name) for ref in current} != canon_args:
            errors.append(
                invalid(
                    f"profiles[{i}].pluginConfig",
                    current[0].name,
                    "queueSort must be the same for all profiles",
                )
            )
    return errors


def validate_profiles(indexed: Sequence[tuple[int, SchedulerProfile]]) -> list[FieldError]:
    """Names must be present and unique; ``indexed`` pairs each profile with its index in the document."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, profile in indexed:
        path = f"profiles[{i}]"
        if not profile.scheduler_name:
            errors.append(required(f"{path}.schedulerName"))
        elif profile.scheduler_name in seen:
            errors.append(duplicate(f"{path}.schedulerName", profile.scheduler_name))
        seen.add(profile.scheduler_name)
        errors.extend(
            _validate_percentage(f"{path}.percentageOfNodesToScore", profile.percentage_of_nodes_to_score)
        )
    return errors


def validate_configuration(config: SchedulerConfiguration) -> list[FieldError]:
    """The top-level fields: parallelism, leader election, client connection, percentages, backoff, extenders."""
    errors: list[FieldError] = []
    if config.parallelism <= 0:
        errors.append(
            invalid("parallelism", config.parallelism, "should be an integer value greater than zero")
        )
    errors.extend(_validate_leader_election(config))
    if config.client_connection.burst < 0:
        errors.append(
            invalid("clientConnection.burst", config.client_connection.burst, "must be non-negative")
        )
    errors.extend(_validate_percentage("percentageOfNodesToScore", config.percentage_of_nodes_to_score))
    if config.pod_initial_backoff_seconds <= 0:
        errors.append(
            invalid("podInitialBackoffSeconds", config.pod_initial_backoff_seconds, "must be greater than 0")
        )
    if config.pod_max_backoff_seconds < config.pod_initial_backoff_seconds:
        errors.append(
            invalid(
                "podMaxBackoffSeconds",
                config.pod_max_backoff_seconds,
                "must be greater than or equal to PodInitialBackoffSeconds",
            )
        )
    errors.extend(_validate_extenders(config.extenders))
    return errors


def _validate_percentage(path: str, value: int | None) -> list[FieldError]:
    if value is not None and not 0 <= value <= 100:
        return [invalid(path, value, "not in valid range [0-100]")]
    return []


def _validate_leader_election(config: SchedulerConfiguration) -> list[FieldError]:
    le = config.leader_election
    if not le.leader_elect:
        return []
    errors: list[FieldError] = []
    durations = {
        "leaseDuration": le.lease_duration,
        "renewDeadline": le.renew_deadline,
        "retryPeriod": le.retry_period,
    }
    for name, seconds in durations.items():
        if seconds <= 0:
            errors.append(
                invalid(f"leaderElection.{name}", format_duration(seconds), "must be greater than zero")
            )
    if errors:
        return errors
    if le.lease_duration <= le.renew_deadline:
        errors.append(
            invalid(
                "leaderElection.leaseDuration",
                format_duration(le.lease_duration),
                f"must be greater than renewDeadline ({format_duration(le.renew_deadline)})",
            )
        )
    minimum_renew = LEADER_ELECTION_JITTER_FACTOR * le.retry_period
    if le.renew_deadline <= minimum_renew:
        errors.append(
            invalid(
                "leaderElection.renewDeadline",
                format_duration(le.renew_deadline),
                f"must be greater than {LEADER_ELECTION_JITTER_FACTOR} * retryPeriod ({format_duration(minimum_renew)})",
            )
        )
    if le.resource_lock != "leases":
        errors.append(
            invalid("leaderElection.resourceLock", le.resource_lock, 'resourceLock value must be "leases"')
        )
    return errors


def _validate_extenders(extenders: Sequence[Extender]) -> list[FieldError]:
    errors: list[FieldError] = []
    binders = 0
    managed: set[str] = set()
    for i, ext in enumerate(extenders):
        path = f"extenders[{i}]"
        if ext.prioritize_verb and ext.weight <= 0:
            errors.append(invalid(f"{path}.weight", ext.weight, "must have a positive weight applied to it"))
        if ext.bind_verb:
            binders += 1
        for j, res in enumerate(ext.managed_resources):
            res_path = f"{path}.managedResources[{j}].name"
            if not _QUALIFIED_NAME.match(res.name) or not _is_extended_resource(res.name):
                errors.append(invalid(res_path, res.name, "is an invalid extended resource name"))
            if res.name in managed:
                errors.append(invalid(res_path, res.name, "duplicate extender managed resource name"))
            managed.add(res.name)
    if binders > 1:
        errors.append(
            invalid(
                "extenders",
                f"found {binders} extenders implementing bind",
                "only one extender can implement bind",
            )
        )
    return errors


def _is_extended_resource(name: str) -> bool:
    # Extended resources are domain-prefixed, outside kubernetes.io, and not quota "requests." names.
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _not_implemented(point: str, spec: PluginDefinition) -> str:
    implemented = ", ".join(p for p in ALL_POINTS if p in spec.extension_points) or "none"
    return f"plugin does not implement the {point} extension point (it implements: {implemented})"
