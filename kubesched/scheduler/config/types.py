"""The configuration as the scheduler uses it: defaulted, merged with the default plugins, validated.

Everything here is immutable. Durations are seconds (float); field names are the snake_case of the
configuration's camelCase ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .plugins import EXTENSION_POINTS, ExtensionPoint, point_attribute

API_GROUP = "kubescheduler.config.k8s.io"
V1 = f"{API_GROUP}/v1"
V1BETA3 = f"{API_GROUP}/v1beta3"
V1BETA2 = f"{API_GROUP}/v1beta2"
SUPPORTED_API_VERSIONS: tuple[str, ...] = (V1, V1BETA3, V1BETA2)
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"


class PluginRef(NamedTuple):
    """A plugin enabled at an extension point. ``weight`` is the score weight (>= 1) at ``score``, 0 elsewhere."""

    name: str
    weight: int = 0


@dataclass(frozen=True)
class PluginEntry:
    """A plugin as written in a plugin set (``{name, weight}``); ``weight`` None when not given."""

    name: str
    weight: int | None = None


@dataclass(frozen=True)
class PluginSet:
    """An extension point's ``enabled``/``disabled`` lists (after merging with the defaults)."""

    enabled: tuple[PluginEntry, ...] = ()
    disabled: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProfilePlugins:
    """The plugins a profile runs at each extension point, in the order they run."""

    pre_enqueue: tuple[PluginRef, ...] = ()
    queue_sort: tuple[PluginRef, ...] = ()
    pre_filter: tuple[PluginRef, ...] = ()
    filter: tuple[PluginRef, ...] = ()
    post_filter: tuple[PluginRef, ...] = ()
    pre_score: tuple[PluginRef, ...] = ()
    score: tuple[PluginRef, ...] = ()
    reserve: tuple[PluginRef, ...] = ()
    permit: tuple[PluginRef, ...] = ()
    pre_bind: tuple[PluginRef, ...] = ()
    bind: tuple[PluginRef, ...] = ()
    post_bind: tuple[PluginRef, ...] = ()

    def __getitem__(self, point: str) -> tuple[PluginRef, ...]:
        """Plugins at a point by its configuration name: ``plugins["preFilter"]``."""
        try:
            return getattr(self, _ATTRIBUTE_OF_POINT[ExtensionPoint(point)])
        except ValueError:
            raise KeyError(point) from None

    def items(self) -> Iterator[tuple[ExtensionPoint, tuple[PluginRef, ...]]]:
        for point in EXTENSION_POINTS:
            yield point, self[point]

    def names(self, point: str) -> tuple[str, ...]:
        return tuple(ref.name for ref in self[point])

    @property
    def score_weights(self) -> dict[str, int]:
        return {ref.name: ref.weight for ref in self.score}

    def all_names(self) -> tuple[str, ...]:
        """Every enabled plugin once, in order of first appearance across the extension points."""
        seen: dict[str, None] = {}
        for _, refs in self.items():
            for ref in refs:
                seen.setdefault(ref.name, None)
        return tuple(seen)


_ATTRIBUTE_OF_POINT: dict[ExtensionPoint, str] = {point: point_attribute(point) for point in EXTENSION_POINTS}


@dataclass(frozen=True)
class SchedulerProfile:
    """One ``profiles[]`` entry, resolved.

    ``plugins``: what runs where (defaults merged, multiPoint expanded).
    ``plugin_args``: for every enabled plugin, its args: a typed model for in-tree plugins (and out-of-tree
    ones that declare an ``args_model``), a dict for other out-of-tree plugins, None for plugins without args.
    ``dropped_default_plugins``: upstream default plugins left out because the registry does not know them.
    ``percentage_of_nodes_to_score``: the profile's override; None means "use the configuration's".
    """

    scheduler_name: str
    plugins: ProfilePlugins
    plugin_args: Mapping[str, Any]
    dropped_default_plugins: tuple[str, ...] = ()
    percentage_of_nodes_to_score: int | None = None

    def args(self, plugin: str) -> Any:
        """The args for an enabled plugin (None if it takes none or is not enabled)."""
        return self.plugin_args.get(plugin)


@dataclass(frozen=True)
class LeaderElectionConfig:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


@dataclass(frozen=True)
class ClientConnectionConfig:
    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    burst: int = 100


@dataclass(frozen=True)
class ExtenderManagedResource:
    name: str
    ignored_by_scheduler: bool = False


@dataclass(frozen=True)
class Extender:
    """A scheduler extender: kept so the configuration round-trips, never called by kubesched."""

    url_prefix: str
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = False
    tls_config: Mapping[str, Any] | None = None
    http_timeout: float = 5.0
    node_cache_capable: bool = False
    managed_resources: tuple[ExtenderManagedResource, ...] = ()
    ignorable: bool = False


@dataclass(frozen=True)
class SchedulerConfiguration:
    """A whole KubeSchedulerConfiguration, ready for the scheduler.

    ``percentage_of_nodes_to_score``: 0 means adaptive (upstream's default); a profile may override it.
    ``warnings``: things accepted but worth telling the operator (extenders, args for plugins not enabled...).
    """

    api_version: str
    profiles: tuple[SchedulerProfile, ...]
    parallelism: int = 16
    leader_election: LeaderElectionConfig = field(default_factory=LeaderElectionConfig)
    client_connection: ClientConnectionConfig = field(default_factory=ClientConnectionConfig)
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    delay_cache_until_active: bool = False
    extenders: tuple[Extender, ...] = ()
    warnings: tuple[str, ...] = ()

    def profile(self, scheduler_name: str) -> SchedulerProfile:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        raise KeyError(scheduler_name)

    @property
    def profiles_by_name(self) -> dict[str, SchedulerProfile]:
        return {p.scheduler_name: p for p in self.profiles}

    def percentage_of_nodes_to_score_for(self, profile: SchedulerProfile) -> int:
        """The profile's override if set, else the configuration's value (0 = adaptive)."""
        if profile.percentage_of_nodes_to_score is not None:
            return profile.percentage_of_nodes_to_score
        return self.percentage_of_nodes_to_score
