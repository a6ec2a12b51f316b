"""KubeSchedulerConfiguration loading: parse, default, merge with the default plugins, validate.

    config = load_config("/etc/kubernetes/scheduler-config.yaml", catalogue=full_catalogue())
    profile = config.profile("default-scheduler")
    profile.plugins.score          # (PluginRef("TaintToleration", 3), ...)
    profile.args("NodeResourcesFit").scoring_strategy.type

``default_config()`` is what runs without ``--config``. Problems raise ``ConfigError``, whose ``errors`` list
upstream-style field errors.
"""

from kubesched.apimachinery.duration import DurationError, format_duration, parse_duration

from .args import ArgsModel, ResourceSpec, ValidatesArgs
from .errors import ConfigError, ErrorType, FieldError
from .load import default_config, load_config, parse_document
from .plugins import EXTENSION_POINTS, MULTI_POINT, UPSTREAM_UNIMPLEMENTED, ExtensionPoint
from .types import (
    DEFAULT_SCHEDULER_NAME,
    SUPPORTED_API_VERSIONS,
    V1,
    V1BETA2,
    V1BETA3,
    ClientConnectionConfig,
    Extender,
    LeaderElectionConfig,
    PluginEntry,
    PluginRef,
    PluginSet,
    ProfilePlugins,
    SchedulerConfiguration,
    SchedulerProfile,
)

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINTS",
    "MULTI_POINT",
    "SUPPORTED_API_VERSIONS",
    "UPSTREAM_UNIMPLEMENTED",
    "V1",
    "V1BETA2",
    "V1BETA3",
    "ArgsModel",
    "ClientConnectionConfig",
    "ConfigError",
    "DurationError",
    "ErrorType",
    "Extender",
    "ExtensionPoint",
    "FieldError",
    "LeaderElectionConfig",
    "PluginEntry",
    "PluginRef",
    "PluginSet",
    "ProfilePlugins",
    "ResourceSpec",
    "SchedulerConfiguration",
    "SchedulerProfile",
    "ValidatesArgs",
    "default_config",
    "format_duration",
    "load_config",
    "parse_document",
    "parse_duration",
]
