"""``DynamicArgs``: the ``pluginConfig`` args of the Dynamic plugin.

crane's own args hold only ``policyConfigPath``. Configurations in the wild (the project's founding document)
also carry ``promeAddr``, ``metricsUpdatePeriodBySeconds`` and ``clusterName``; they are accepted here and
used by direct mode (``loadSource: prometheus``), where the scheduler polls Prometheus itself instead of reading
node annotations. The other ``prome*`` fields answer users' complaints about crane's Prometheus client
(no auth, no TLS settings, fixed 10 s timeout, rigid ``instance`` matching).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field, PlainValidator, SecretStr, StrictBool, StrictStr

from kubesched.scheduler.config import ArgsModel, DurationError, FieldError, parse_duration
from kubesched.scheduler.config.errors import forbidden, invalid, not_supported, required

from .annotations import time_zone
from .policy import PolicyError, load_policy
from .promql import DEFAULT_QUERY_TEMPLATE, check_template, parse_instance_match

ANNOTATIONS = "annotations"
PROMETHEUS = "prometheus"
LOAD_SOURCES = (ANNOTATIONS, PROMETHEUS)
DEFAULT_QUERY_TIMEOUT = 10.0  # crane's DefaultPrometheusQueryTimeout

_SECONDS = re.compile(r"\d+(\.\d*)?|\.\d+")


def _seconds(value: Any) -> float:
    """A Go duration string (``"5m"``) or a number of seconds (``300``, ``"300"``), greater than 0."""
    if isinstance(value, bool):
        raise ValueError('must be a duration such as "5m" or a number of seconds')
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        if _SECONDS.fullmatch(value):
            seconds = float(value)
        else:
            try:
                seconds = parse_duration(value)
            except DurationError as exc:
                raise ValueError(f'{exc} (give a duration such as "5m" or a number of seconds)') from None
    else:
        raise ValueError('must be a duration such as "5m" or a number of seconds')
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError("must be greater than 0")
    return seconds


Seconds = Annotated[float, PlainValidator(_seconds)]


class BasicAuth(ArgsModel):
    username: StrictStr
    password: SecretStr | None = None
    password_file: StrictStr | None = None


class DynamicArgs(ArgsModel):
    # crane
    policy_config_path: StrictStr | None = None
    # seen in crane-style configurations; used by direct mode
    prome_addr: StrictStr | None = None
    metrics_update_period_by_seconds: Seconds | None = None
    cluster_name: StrictStr | None = None
    # kubesched additions
    load_source: StrictStr = ANNOTATIONS
    annotation_time_zone: StrictStr | None = None
    prome_bearer_token: SecretStr | None = None
    prome_bearer_token_file: StrictStr | None = None
    prome_basic_auth: BasicAuth | None = None
    prome_ca_file: StrictStr | None = Field(default=None, alias="promeCAFile")
    prome_insecure_skip_verify: StrictBool = False
    prome_query_timeout: Seconds = DEFAULT_QUERY_TIMEOUT
    prome_query_template: StrictStr = DEFAULT_QUERY_TEMPLATE
    prome_query_templates: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    instance_match: StrictStr = "auto"

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        errs += self._check_policy(f"{path}.policyConfigPath")
        if self.prome_addr is not None:
            url = urlsplit(self.prome_addr)
            if url.scheme not in ("http", "https") or not url.netloc:
                errs.append(
                    invalid(f"{path}.promeAddr", self.prome_addr, "must be an http:// or https:// URL")
                )
        if self.load_source not in LOAD_SOURCES:
            errs.append(not_supported(f"{path}.loadSource", self.load_source, LOAD_SOURCES))
        elif self.load_source == PROMETHEUS and not self.prome_addr:
            errs.append(required(f"{path}.promeAddr", "loadSource prometheus needs the Prometheus address"))
        if self.annotation_time_zone is not None:
            try:
                time_zone(self.annotation_time_zone)
            except ValueError as exc:
                errs.append(invalid(f"{path}.annotationTimeZone", self.annotation_time_zone, str(exc)))
        if self.prome_bearer_token is not None and self.prome_bearer_token_file is not None:
            errs.append(
                forbidden(f"{path}.promeBearerTokenFile", "give promeBearerToken or the file, not both")
            )
        if self.prome_basic_auth is not None and (self.prome_bearer_token or self.prome_bearer_token_file):
            errs.append(forbidden(f"{path}.promeBasicAuth", "cannot be combined with a bearer token"))
        auth = self.prome_basic_auth
        if auth is not None and (auth.password is None) == (auth.password_file is None):
            errs.append(forbidden(f"{path}.promeBasicAuth", "give exactly one of password and passwordFile"))
        try:
            parse_instance_match(self.instance_match)
        except ValueError as exc:
            errs.append(invalid(f"{path}.instanceMatch", self.instance_match, str(exc)))
        templates = {"promeQueryTemplate": self.prome_query_template}
        templates |= {f"promeQueryTemplates[{m}]": t for m, t in self.prome_query_templates.items()}
        for field, template in templates.items():
            try:
                check_template(template)
            except ValueError as exc:
                errs.append(invalid(f"{path}.{field}", template, str(exc)))
        return errs

    def _check_policy(self, path: str) -> list[FieldError]:
        # A policy file that exists is checked with the configuration, so mistakes surface at load time with a
        # field path. A missing one is not a configuration error (the configuration may be checked elsewhere than
        # where the scheduler runs, e.g. by simulate or the operator): building the plugin refuses it
        # (``policy_for``), as crane's scheduler does.
        if self.policy_config_path is None or not Path(self.policy_config_path).is_file():
            return []
        try:
            load_policy(self.policy_config_path)
        except PolicyError as exc:
            detail = "; ".join(str(e) for e in exc.errors)
            return [invalid(path, self.policy_config_path, f"invalid DynamicSchedulerPolicy: {detail}")]
        return []


__all__ = ["ANNOTATIONS", "LOAD_SOURCES", "PROMETHEUS", "BasicAuth", "DynamicArgs", "Seconds"]
