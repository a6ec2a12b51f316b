"""The target config controller: writes the scheduler's revisioned inputs into the operand namespace.

- configmap ``config`` (``config.yaml``): the merge, in order, of the default configuration
  (``assets/defaultconfig.yaml``, its lease in the operand namespace), ``spec.observedConfig`` and
  ``spec.unsupportedConfigOverrides`` (library-go's rules, ``merge.py``), validated by the scheduler's own loader
  with the application's full plugin catalogue (so ``Dynamic`` validates). An invalid result sets
  ``TargetConfigControllerDegraded=True`` (reason ``InvalidConfig``, the loader's field errors in the message) and
  leaves ``config`` as it is: the last good revision keeps running.
- configmap ``kube-scheduler-pod``: ``pod.yaml`` (``manifests.py``, with ``spec.unsupportedConfigOverrides``'s
  ``arguments`` appended as flags, as upstream), ``version``, ``forceRedeploymentReason``.
- configmap ``scheduler-kubeconfig``: the API server the operator talks to (or ``server=``), the CA from
  ``serviceaccount-ca``, the token file of secret ``kube-scheduler-client-token``.
- configmap ``serviceaccount-ca`` (``ca-bundle.crt``): the CA the operator's own client trusts, else the
  cluster's ``kube-root-ca.crt`` ConfigMap in the operand namespace; absent on a plain-HTTP server.
- the credentials (``credentials.py``).

Each write is an event (``ConfigMapCreated``/``ConfigMapUpdated``, ...). The revision controller copies these
inputs into numbered revisions when their content changes; nothing here knows about revisions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import yaml

from kubesched.client.rest import ApiError
from kubesched.operator import contract as c
from kubesched.operator import manifests
from kubesched.operator.credentials import DEFAULT_TOKEN_LIFETIME, ensure_credentials
from kubesched.operator.merge import MergeError, merge_config, to_json
from kubesched.operator.resourceapply import apply_configmap, apply_namespace, get_or_none, set_condition
from kubesched.scheduler.config import ConfigError, load_config
from kubesched.scheduler.framework.catalogue import Catalogue

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEGRADED_CONDITION = "TargetConfigControllerDegraded"
MANAGED_STATES = ("Managed", "Force")


def package_version() -> str:
    try:
        return metadata.version("kubesched")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def default_config_text() -> str:
    return (
        resources.files("kubesched.operator")
        .joinpath("assets/defaultconfig.yaml")
        .read_text(encoding="utf-8")
    )


def default_config(operand_namespace: str = c.OPERAND_NAMESPACE) -> Obj:
    """The default configuration, its Lease in the operand namespace."""
    config: Obj = yaml.safe_load(default_config_text())
    config["leaderElection"]["resourceNamespace"] = operand_namespace
    return config


class InvalidConfig(ValueError):
    """The merged configuration is refused; the message names the field and the input to fix."""


def render_config(
    default: Obj,
    observed: Any,
    overrides: Any,
    catalogue: Catalogue | None = None,
    *,
    known_valid: str | None = None,
) -> str:
    """``config.yaml``: default, observed, overrides merged in that order and validated. Raises InvalidConfig.

    ``known_valid``: a text validated before; a merge that yields it again is not validated again."""
    try:
        merged = merge_config(
            default,
            observed,
            overrides,
            names=("the default config", "spec.observedConfig", "spec.unsupportedConfigOverrides"),
        )
    except MergeError as e:
        raise InvalidConfig(str(e)) from None
    text = to_json(merged) + "\n"
    if text == known_valid:
        return text
    if catalogue is None:
        from kubesched.catalogue import full_catalogue

        catalogue = full_catalogue()
    try:
        load_config(text, catalogue=catalogue)
    except ConfigError as e:
        problems = "; ".join(str(err) for err in e.errors)
        raise InvalidConfig(
            f"the merged KubeSchedulerConfiguration is invalid: {problems} "
            "(check spec.unsupportedConfigOverrides and spec.observedConfig)"
        ) from None
    return text


def split_overrides(overrides: Any) -> tuple[Any, list[str]]:
    """``spec.unsupportedConfigOverrides`` as (the config snippet, extra scheduler flags).

    As upstream, its ``arguments`` map (a string or a list of strings per flag name) becomes flags appended to
    the scheduler's command line, ``--name=value`` in sorted name order, one per list element; the rest is the
    sparse configuration merged last. Raises InvalidConfig for a malformed ``arguments``.
    """
    if not isinstance(overrides, dict) or "arguments" not in overrides:
        return overrides, []
    rest = {k: v for k, v in overrides.items() if k != "arguments"}
    arguments = overrides["arguments"]
    if arguments is None:
        return rest, []
    if not isinstance(arguments, dict):
        raise InvalidConfig(
            "spec.unsupportedConfigOverrides.arguments must be a map of flag name to value(s)"
        )
    flags: list[str] = []
    for name in sorted(arguments, key=lambda n: str(n).lstrip("-")):
        value = arguments[name]
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str | int | float | bool) and not isinstance(v, dict) for v in values):
            raise InvalidConfig(
                f"spec.unsupportedConfigOverrides.arguments.{name} must be a string or a list of strings"
            )
        for v in values:
            text = str(v).lower() if isinstance(v, bool) else str(v)
            flags.append(f"--{name.lstrip('-')}={text}")
    return rest, flags


def kubeconfig_text(server: str, namespace: str, with_ca: bool) -> str:
    """The scheduler's kubeconfig: credentials by path under the revision's resource folder."""
    cluster: Obj = {"server": server}
    if with_ca:
        cluster["certificate-authority"] = manifests.CA_BUNDLE_PATH
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": "kube-scheduler", "user": {"tokenFile": manifests.TOKEN_PATH}}],
        "contexts": [
            {
                "name": "kube-scheduler",
                "context": {"cluster": "cluster", "user": "kube-scheduler", "namespace": namespace},
            }
        ],
        "current-context": "kube-scheduler",
    }
    return yaml.safe_dump(doc, sort_keys=False)


class TargetConfigController:
    """See the module. ``image``: the scheduler's image (default: the kubesched image the control-plane kubelets
    run as processes); ``server``: the API server URL written into the scheduler's kubeconfig (default: the one
    the operator's client uses); ``secure_port``: the scheduler's HTTPS port; ``ca_bundle``: PEM the scheduler
    trusts the API server with (default: what the operator's client trusts)."""

    name = "TargetConfigController"

    # What it reads and the configmaps/secret it writes (and repairs when changed by hand); the runtime's
    # informers cover both.
    watches: tuple[tuple[str, str, str], ...] = (
        (c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME),
    )
    outputs: tuple[str, ...] = (
        c.CONFIG_CONFIGMAP,
        c.POD_CONFIGMAP,
        c.KUBECONFIG_CONFIGMAP,
        c.SERVICEACCOUNT_CA_CONFIGMAP,
        c.CLIENT_TOKEN_SECRET,
    )

    def __init__(
        self,
        *,
        image: str = manifests.DEFAULT_IMAGE,
        server: str | None = None,
        secure_port: int = manifests.DEFAULT_SECURE_PORT,
        ca_bundle: bytes | str | None = None,
        version: str | None = None,
        token_lifetime: int = DEFAULT_TOKEN_LIFETIME,
        catalogue: Catalogue | None = None,
        clock: Callable[[], float] = time.time,
        **_: Any,
    ) -> None:
        self.image = image
        self.server = server
        self.secure_port = secure_port
        self.ca_bundle = ca_bundle.decode() if isinstance(ca_bundle, bytes) else ca_bundle
        self.version = version or package_version()
        self.token_lifetime = token_lifetime
        self._catalogue = catalogue
        self._clock = clock
        self._last_valid: str | None = (
            None  # the last config.yaml validated (a resync skips validating it again)
        )

    @property
    def catalogue(self) -> Catalogue:
        if self._catalogue is None:
            from kubesched.catalogue import full_catalogue

            self._catalogue = full_catalogue()
        return self._catalogue

    async def sync(self, ctx: c.OperatorContext) -> None:
        ks = await get_or_none(
            ctx.client, c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME
        )
        if ks is None:
            return
        spec = ks.get("spec") or {}
        if str(spec.get("managementState") or "Managed") not in MANAGED_STATES:
            return
        ns = ctx.operand_namespace
        problems: list[tuple[str, str]] = []  # (reason, message)
        await apply_namespace(ctx, ns)
        extra_args: list[str] | None = None
        try:
            overrides, extra_args = split_overrides(spec.get("unsupportedConfigOverrides"))
        except InvalidConfig as e:
            overrides = {}
            problems.append(("InvalidConfig", f"{e}; configmap {ns}/{c.POD_CONFIGMAP} is left as it is"))
        else:
            try:
                config = render_config(
                    default_config(ns), spec.get("observedConfig"), overrides, self.catalogue
                )
            except InvalidConfig as e:
                problems.append(
                    ("InvalidConfig", f"{e}; configmap {ns}/{c.CONFIG_CONFIGMAP} is left as it is")
                )
            else:
                self._last_valid = config
                await apply_configmap(ctx, ns, c.CONFIG_CONFIGMAP, {"config.yaml": config})
        ca = await self._ca_bundle(ctx)
        if ca:
            await apply_configmap(ctx, ns, c.SERVICEACCOUNT_CA_CONFIGMAP, {"ca-bundle.crt": ca})
        server = self.server or ctx.client.config.server
        await apply_configmap(
            ctx, ns, c.KUBECONFIG_CONFIGMAP, {"kubeconfig": kubeconfig_text(server, ns, bool(ca))}
        )
        try:
            await ensure_credentials(ctx, lifetime=self.token_lifetime, clock=self._clock)
        except ApiError as e:
            problems.append(("SynchronizationError", f"the scheduler's credentials: {e}"))
        serving = await get_or_none(ctx.client, "v1", "secrets", c.SERVING_CERT_SECRET, ns)
        if extra_args is not None:  # with malformed arguments the last pod stays until they are fixed
            try:
                pod = manifests.scheduler_pod(
                    image=self.image,
                    namespace=ns,
                    secure_port=self.secure_port,
                    log_level=spec.get("logLevel"),
                    serving_cert=serving is not None,
                    extra_args=extra_args,
                )
            except manifests.ManifestError as e:
                problems.append(("InvalidPodSpec", str(e)))
            else:
                data = {
                    "pod.yaml": manifests.to_yaml(pod),
                    "version": self.version,
                    "forceRedeploymentReason": str(spec.get("forceRedeploymentReason") or ""),
                }
                await apply_configmap(ctx, ns, c.POD_CONFIGMAP, data)
        if problems:
            reason = "::".join(sorted({r for r, _ in problems}))
            await set_condition(
                ctx.client, DEGRADED_CONDITION, "True", reason, "\n".join(m for _, m in problems)
            )
        else:
            await set_condition(ctx.client, DEGRADED_CONDITION, "False", "AsExpected", "")

    async def _ca_bundle(self, ctx: c.OperatorContext) -> str | None:
        if self.ca_bundle:
            return self.ca_bundle
        cfg = ctx.client.config
        if not cfg.server.startswith("https://"):
            return None
        if cfg.ca_data:
            return cfg.ca_data.decode()
        if cfg.ca_file:
            try:
                return Path(cfg.ca_file).read_text()
            except OSError as e:
                log.warning("cannot read the CA file %s: %s", cfg.ca_file, e)
        root = await get_or_none(ctx.client, "v1", "configmaps", "kube-root-ca.crt", ctx.operand_namespace)
        ca = ((root or {}).get("data") or {}).get("ca.crt")
        return str(ca) if ca else None


__all__ = [
    "DEGRADED_CONDITION",
    "InvalidConfig",
    "TargetConfigController",
    "default_config",
    "kubeconfig_text",
    "render_config",
    "split_overrides",
]
