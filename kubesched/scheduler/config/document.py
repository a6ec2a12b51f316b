"""The configuration document as written: strict decoding of the parsed YAML/JSON into typed raw models.

Like kube-scheduler's strict decoder, an unknown or misspelt field is an error, and so is a value of the
wrong type (a string where a number belongs, a number where a duration string belongs). Nothing is defaulted
here; ``None`` means "not given".
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)
from pydantic.alias_generators import to_camel

from kubesched.apimachinery.duration import DurationError, parse_duration

from .errors import FieldError, invalid, required, unknown_field
from .types import V1BETA2


def _go_duration(value: Any) -> float:
    if not isinstance(value, str):
        raise ValueError('must be a duration string such as "15s" or "1m30s"')
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise ValueError(str(exc)) from None


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    return float(value)


Duration = Annotated[float, PlainValidator(_go_duration)]
Number = Annotated[float, PlainValidator(_number)]
Int32 = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]


class DocModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )


class RawPlugin(DocModel):
    name: StrictStr
    weight: Int32 | None = None


class RawPluginSet(DocModel):
    enabled: list[RawPlugin] | None = None
    disabled: list[RawPlugin] | None = None


class RawPlugins(DocModel):
    pre_enqueue: RawPluginSet | None = None
    queue_sort: RawPluginSet | None = None
    pre_filter: RawPluginSet | None = None
    filter: RawPluginSet | None = None
    post_filter: RawPluginSet | None = None
    pre_score: RawPluginSet | None = None
    score: RawPluginSet | None = None
    reserve: RawPluginSet | None = None
    permit: RawPluginSet | None = None
    pre_bind: RawPluginSet | None = None
    bind: RawPluginSet | None = None
    post_bind: RawPluginSet | None = None
    multi_point: RawPluginSet | None = None


class RawPluginConfig(DocModel):
    name: StrictStr
    args: dict[str, Any] | None = None


class RawProfile(DocModel):
    scheduler_name: StrictStr | None = None
    percentage_of_nodes_to_score: Int32 | None = None
    plugins: RawPlugins | None = None
    plugin_config: list[RawPluginConfig] | None = None


class RawLeaderElection(DocModel):
    leader_elect: StrictBool | None = None
    lease_duration: Duration | None = None
    renew_deadline: Duration | None = None
    retry_period: Duration | None = None
    resource_lock: StrictStr = ""
    resource_name: StrictStr = ""
    resource_namespace: StrictStr = ""


class RawClientConnection(DocModel):
    kubeconfig: StrictStr = ""
    accept_content_types: StrictStr = ""
    content_type: StrictStr = ""
    qps: Number = 0.0
    burst: Int32 = 0


class RawTLSConfig(DocModel):
    insecure: StrictBool = False
    server_name: StrictStr = ""
    cert_file: StrictStr = ""
    key_file: StrictStr = ""
    ca_file: StrictStr = ""
    cert_data: StrictStr = ""
    key_data: StrictStr = ""
    ca_data: StrictStr = ""


class RawManagedResource(DocModel):
    name: StrictStr
    ignored_by_scheduler: StrictBool = False


class RawExtender(DocModel):
    url_prefix: StrictStr
    filter_verb: StrictStr = ""
    preempt_verb: StrictStr = ""
    prioritize_verb: StrictStr = ""
    weight: StrictInt = 0
    bind_verb: StrictStr = ""
    enable_https: StrictBool = Field(default=False, alias="enableHTTPS")
    tls_config: RawTLSConfig | None = None
    http_timeout: Duration | None = None
    node_cache_capable: StrictBool = False
    managed_resources: list[RawManagedResource] | None = None
    ignorable: StrictBool = False


class RawConfiguration(DocModel):
    api_version: StrictStr
    kind: StrictStr
    parallelism: Int32 | None = None
    leader_election: RawLeaderElection | None = None
    client_connection: RawClientConnection | None = None
    enable_profiling: StrictBool | None = None
    enable_contention_profiling: StrictBool | None = None
    percentage_of_nodes_to_score: Int32 | None = None
    pod_initial_backoff_seconds: StrictInt | None = None
    pod_max_backoff_seconds: StrictInt | None = None
    profiles: list[RawProfile] | None = None
    extenders: list[RawExtender] | None = None
    delay_cache_until_active: StrictBool | None = None


# Fields that exist only in newer versions: v1beta2 predates multiPoint and per-profile percentages.
_NOT_IN_V1BETA2 = ("multiPoint", "percentageOfNodesToScore")


def decode_document(data: dict[str, Any]) -> tuple[RawConfiguration | None, list[FieldError]]:
    """Strictly decode a parsed document; returns the raw model, or None and the errors."""
    errors = _version_field_errors(data)
    try:
        raw = RawConfiguration.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        return None, errors + pydantic_field_errors(exc)
    if errors:
        return None, errors
    return raw, []


def _version_field_errors(data: dict[str, Any]) -> list[FieldError]:
    if data.get("apiVersion") != V1BETA2:
        return []
    errors = []
    profiles = data.get("profiles")
    for i, profile in enumerate(profiles if isinstance(profiles, list) else []):
        if not isinstance(profile, dict):
            continue
        if "percentageOfNodesToScore" in profile:
            errors.append(unknown_field(f"profiles[{i}].percentageOfNodesToScore"))
        plugins = profile.get("plugins")
        if isinstance(plugins, dict) and "multiPoint" in plugins:
            errors.append(unknown_field(f"profiles[{i}].plugins.multiPoint"))
    return errors


def field_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """A pydantic error location as an upstream field path: ``("profiles", 0, "plugins")`` -> ``profiles[0].plugins``."""
    path = prefix
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


def pydantic_field_errors(exc: ValidationError, prefix: str = "") -> list[FieldError]:
    """Pydantic's errors as field errors under ``prefix``."""
    result = []
    for err in exc.errors():
        # Drop pydantic's internal location steps (e.g. "function-plain[...]") that are not document fields.
        loc = tuple(
            p
            for p in err["loc"]
            if isinstance(p, int) or not str(p).startswith(("function-", "constrained-"))
        )
        path = field_path(loc, prefix)
        kind = err["type"]
        if kind == "extra_forbidden":
            result.append(unknown_field(path))
        elif kind == "missing":
            result.append(required(path))
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
            detail = message[:1].lower() + message[1:]
            result.append(invalid(path, err.get("input"), detail))
    return result
