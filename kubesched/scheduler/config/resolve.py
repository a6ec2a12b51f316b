"""From a parsed document to a ``SchedulerConfiguration``: decode, default, merge, expand, validate.

Errors from every stage are collected so that one run reports as many problems as it can; a stage is skipped
only when it would work on something an earlier stage already rejected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from . import defaults as d
from .args import ValidatesArgs
from .document import (
    RawConfiguration,
    RawExtender,
    RawPluginConfig,
    RawPlugins,
    RawProfile,
    decode_document,
    pydantic_field_errors,
)
from .errors import ConfigError, FieldError, duplicate, invalid, not_supported, required
from .merge import ALL_POINTS, expand_multi_point, merge_plugins
from .types import (
    DEFAULT_SCHEDULER_NAME,
    KIND,
    SUPPORTED_API_VERSIONS,
    ClientConnectionConfig,
    Extender,
    ExtenderManagedResource,
    LeaderElectionConfig,
    PluginEntry,
    PluginSet,
    ProfilePlugins,
    SchedulerConfiguration,
    SchedulerProfile,
)
from .validation import (
    invalid_in_version,
    raw_plugin_set,
    validate_common_queue_sort,
    validate_configuration,
    validate_plugin_references,
    validate_profile_plugins,
    validate_profiles,
)

if TYPE_CHECKING:
    from kubesched.scheduler.framework.catalogue import PluginDefinition


def check_type_meta(data: Mapping[str, Any]) -> list[FieldError]:
    """``apiVersion`` must be a supported scheduler config version and ``kind`` KubeSchedulerConfiguration."""
    errors = []
    version = data.get("apiVersion")
    if version is None:
        errors.append(required("apiVersion", f"supported versions: {', '.join(SUPPORTED_API_VERSIONS)}"))
    elif version not in SUPPORTED_API_VERSIONS:
        errors.append(not_supported("apiVersion", version, SUPPORTED_API_VERSIONS))
    kind = data.get("kind")
    if kind is None:
        errors.append(required("kind", f'must be "{KIND}"'))
    elif kind != KIND:
        errors.append(not_supported("kind", kind, (KIND,)))
    return errors


def resolve_document(
    data: Mapping[str, Any], catalogue: Mapping[str, PluginDefinition], *, source: str | None = None
) -> SchedulerConfiguration:
    errors = check_type_meta(data)
    if errors:
        raise ConfigError(errors, source=source)
    raw, errors = decode_document(dict(data))
    if raw is None:
        raise ConfigError(errors, source=source)

    warnings: list[str] = []
    raw_profiles = raw.profiles or [RawProfile()]
    indexed: list[tuple[int, SchedulerProfile]] = []
    for i, raw_profile in enumerate(raw_profiles):
        # Only a lone profile gets the default name; with several, each must name itself.
        name = raw_profile.scheduler_name
        if name is None:
            name = DEFAULT_SCHEDULER_NAME if len(raw_profiles) == 1 else ""
        profile = _resolve_profile(
            raw_profile, f"profiles[{i}]", name, raw.api_version, catalogue, errors, warnings
        )
        if profile is not None:
            indexed.append((i, profile))
    profiles = [profile for _, profile in indexed]

    extenders = tuple(_extender(e) for e in raw.extenders or [])
    for i, ext in enumerate(extenders):
        warnings.append(
            f"extenders[{i}] ({ext.url_prefix}): accepted, but kubesched does not call scheduler extenders"
        )
    config = _with_defaults(raw, tuple(profiles), extenders, tuple(warnings))
    errors.extend(validate_configuration(config))
    errors.extend(validate_profiles(indexed))
    if len(profiles) == len(raw_profiles):
        errors.extend(validate_common_queue_sort(profiles))
    if errors:
        raise ConfigError(errors, source=source)
    return config


def _resolve_profile(
    raw: RawProfile,
    path: str,
    name: str,
    api_version: str,
    catalogue: Mapping[str, PluginDefinition],
    errors: list[FieldError],
    warnings: list[str],
) -> SchedulerProfile | None:
    reference_errors = validate_plugin_references(raw.plugins, path, catalogue, api_version)
    if reference_errors:
        errors.extend(reference_errors)
        return None
    default_sets, dropped = d.keep_known(d.default_plugin_sets(api_version), catalogue)
    merged = merge_plugins(default_sets, _custom_sets(raw.plugins))
    plugins, duplicates = expand_multi_point(merged, lambda plugin: catalogue[plugin].extension_points)
    plugin_args = _resolve_args(
        raw.plugin_config or [], path, name, plugins, api_version, catalogue, errors, warnings
    )
    profile = SchedulerProfile(
        scheduler_name=name,
        plugins=plugins,
        plugin_args=plugin_args,
        dropped_default_plugins=dropped,
        percentage_of_nodes_to_score=raw.percentage_of_nodes_to_score,
    )
    errors.extend(validate_profile_plugins(profile, path, catalogue, duplicates))
    return profile


def _custom_sets(plugins: RawPlugins | None) -> dict[str, PluginSet]:
    sets = {}
    for point in ALL_POINTS:
        raw_set = raw_plugin_set(plugins, point)
        if raw_set is not None:
            sets[point] = PluginSet(
                enabled=tuple(PluginEntry(p.name, p.weight) for p in raw_set.enabled or []),
                disabled=tuple(p.name for p in raw_set.disabled or []),
            )
    return sets


def _resolve_args(
    configs: list[RawPluginConfig],
    path: str,
    profile_name: str,
    plugins: ProfilePlugins,
    api_version: str,
    catalogue: Mapping[str, PluginDefinition],
    errors: list[FieldError],
    warnings: list[str],
) -> dict[str, Any]:
    enabled = plugins.all_names()
    configured: dict[str, Any] = {}
    for j, config in enumerate(configs):
        config_path = f"{path}.pluginConfig[{j}]"
        if config.name in configured:
            errors.append(duplicate(config_path, config.name))
            continue
        removed = invalid_in_version(api_version, config.name)
        if removed:
            errors.append(invalid(config_path, config.name, removed))
            continue
        definition = catalogue.get(config.name)
        if definition is None:
            # Upstream keeps args of unregistered plugins without complaint; we keep going but say so.
            warnings.append(
                f"{config_path}: plugin {config.name!r} is not in the plugin registry; its args are ignored"
            )
            continue
        if config.name not in enabled:
            warnings.append(
                f"{config_path}: plugin {config.name!r} is not enabled in profile {profile_name!r}; "
                "its args have no effect"
            )
        configured[config.name] = _decode_args(
            definition, config.args, f"{config_path}.args", api_version, errors
        )
    return {
        name: configured[name] if name in configured else catalogue[name].default_args(api_version)
        for name in enabled
    }


def _decode_args(
    definition: PluginDefinition,
    args: dict[str, Any] | None,
    path: str,
    api_version: str,
    errors: list[FieldError],
) -> Any:
    body = dict(args or {})
    if definition.args is None:
        return body  # a plugin without an args model gets what was written
    # Args may carry their own TypeMeta ("kind: NodeResourcesFitArgs"), as `--write-config-to` output does.
    kind = body.pop("kind", None)
    version = body.pop("apiVersion", None)
    if kind is not None and kind != f"{definition.name}Args":
        errors.append(not_supported(f"{path}.kind", kind, (f"{definition.name}Args",)))
    if version is not None and version not in SUPPORTED_API_VERSIONS:
        errors.append(not_supported(f"{path}.apiVersion", version, SUPPORTED_API_VERSIONS))
    try:
        # Fields whose default differs in this version come first; what the document says wins.
        value = definition.args.model_validate(
            {**definition.defaults_for(api_version), **body}, by_alias=True, by_name=False
        )
    except ValidationError as exc:
        errors.extend(pydantic_field_errors(exc, path))
        return None
    if isinstance(value, ValidatesArgs):
        errors.extend(value.validate_args(path))
    return value


def _extender(raw: RawExtender) -> Extender:
    return Extender(
        url_prefix=raw.url_prefix,
        filter_verb=raw.filter_verb,
        preempt_verb=raw.preempt_verb,
        prioritize_verb=raw.prioritize_verb,
        weight=raw.weight,
        bind_verb=raw.bind_verb,
        enable_https=raw.enable_https,
        tls_config=raw.tls_config.model_dump(by_alias=True) if raw.tls_config else None,
        http_timeout=raw.http_timeout or d.DEFAULT_EXTENDER_HTTP_TIMEOUT,
        node_cache_capable=raw.node_cache_capable,
        managed_resources=tuple(
            ExtenderManagedResource(r.name, r.ignored_by_scheduler) for r in raw.managed_resources or []
        ),
        ignorable=raw.ignorable,
    )


def _with_defaults(
    raw: RawConfiguration,
    profiles: tuple[SchedulerProfile, ...],
    extenders: tuple[Extender, ...],
    warnings: tuple[str, ...],
) -> SchedulerConfiguration:
    # Zero durations and counts mean "unset" here, as they do for Go's defaulting of non-pointer fields.
    le = raw.leader_election
    leader_election = LeaderElectionConfig(
        leader_elect=True if le is None or le.leader_elect is None else le.leader_elect,
        lease_duration=(le and le.lease_duration) or d.DEFAULT_LEASE_DURATION,
        renew_deadline=(le and le.renew_deadline) or d.DEFAULT_RENEW_DEADLINE,
        retry_period=(le and le.retry_period) or d.DEFAULT_RETRY_PERIOD,
        resource_lock=(le and le.resource_lock) or d.DEFAULT_RESOURCE_LOCK,
        resource_name=(le and le.resource_name) or d.DEFAULT_LOCK_NAME,
        resource_namespace=(le and le.resource_namespace) or d.DEFAULT_LOCK_NAMESPACE,
    )
    cc = raw.client_connection
    client_connection = ClientConnectionConfig(
        kubeconfig=cc.kubeconfig if cc else "",
        accept_content_types=cc.accept_content_types if cc else "",
        content_type=(cc and cc.content_type) or d.DEFAULT_CONTENT_TYPE,
        qps=(cc and cc.qps) or d.DEFAULT_QPS,
        burst=(cc and cc.burst) or d.DEFAULT_BURST,
    )
    profiling = True if raw.enable_profiling is None else raw.enable_profiling
    contention = profiling if raw.enable_contention_profiling is None else raw.enable_contention_profiling
    return SchedulerConfiguration(
        api_version=raw.api_version,
        profiles=profiles,
        parallelism=d.DEFAULT_PARALLELISM if raw.parallelism is None else raw.parallelism,
        leader_election=leader_election,
        client_connection=client_connection,
        percentage_of_nodes_to_score=_or(
            raw.percentage_of_nodes_to_score, d.DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE
        ),
        pod_initial_backoff_seconds=_or(
            raw.pod_initial_backoff_seconds, d.DEFAULT_POD_INITIAL_BACKOFF_SECONDS
        ),
        pod_max_backoff_seconds=_or(raw.pod_max_backoff_seconds, d.DEFAULT_POD_MAX_BACKOFF_SECONDS),
        enable_profiling=profiling,
        enable_contention_profiling=contention,
        delay_cache_until_active=bool(raw.delay_cache_until_active),
        extenders=extenders,
        warnings=warnings,
    )


def _or(value: int | None, default: int) -> int:
    return default if value is None else value
