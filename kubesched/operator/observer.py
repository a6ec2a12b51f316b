"""The configuration observer: ``Scheduler/cluster`` -> ``KubeScheduler/cluster`` ``spec.observedConfig``.

``spec.observedConfig`` is a sparse ``KubeSchedulerConfiguration`` that the target config controller merges over
the default configuration (and under ``spec.unsupportedConfigOverrides``). What it takes from the cluster:

- ``spec.profile`` -> the ``default-scheduler`` profile's plugins (upstream's three profiles, and ``LoadAware``);
- ``spec.defaultNodeSelector`` -> NodeAffinity's ``addedAffinity`` in every profile (upstream leaves that to the
  API server's project node selector; a scheduler-side added affinity has the same effect on placement and needs
  no admission plugin);
- ``spec.profileCustomizations.dynamicResourceAllocation`` -> ``Disabled`` turns the DynamicResources plugin off
  (1.36 enables it by default, so ``Enabled`` and unset change nothing);
- ``spec.policy`` -> refused: the Policy API is gone upstream (as upstream's operator, it degrades).

``spec.mastersSchedulable`` is a node taint (machine-config-operator's job) and the TLS profile of
``apiservers.config.openshift.io`` does not exist on the local cluster: neither reaches the scheduler's config.

Level-based: every sync recomputes the snippet from ``Scheduler/cluster``; when it differs from what is stored,
it is written (event ``ObservedConfigChanged`` with a diff). When the input cannot be observed the previous
observed config stays and ``ConfigObservationDegraded`` says why.
"""

from __future__ import annotations

import copy
import difflib
import logging
from typing import Any

import yaml

from kubesched.apimachinery.labels import LabelSelector, Op, SelectorError
from kubesched.client.rest import ApiError
from kubesched.operator import contract as c
from kubesched.operator.resourceapply import get_or_none, record, set_condition

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEGRADED_CONDITION = "ConfigObservationDegraded"
SCHEDULER_NAME = "default-scheduler"
DEFAULT_PROFILE = "LowNodeUtilization"
PROFILES = ("LowNodeUtilization", "HighNodeUtilization", "NoScoring", "LoadAware")

# LoadAware: Dynamic's score is crane's 0..100 "free capacity" (100 - weighted usage percent), so one percentage
# point of load difference between two nodes is one point of Dynamic's score. For a pod without preferred
# affinities, PreferNoSchedule tolerations or inter-pod terms, the default scores that can differ between nodes
# are NodeResourcesFit (weight 1), NodeResourcesBalancedAllocation (1), ImageLocality (1) and PodTopologySpread's
# system default spreading (2): at most (1 + 1 + 1 + 2) * 100 = 500 weighted points. At weight 100 (the most a
# KubeSchedulerConfiguration allows) a node more than 5 points less loaded outweighs all of them together, and a
# 2-point difference outweighs either resource score over its whole range; crane's suggested weight 3 would need
# a 167-point load difference, which cannot exist, so the resource scores would decide.
# tests/operator/test_observer.py checks this arithmetic against the resolved default profile.
LOAD_AWARE_WEIGHT = 100
LOAD_AWARE_PLUGIN = "Dynamic"


class ObservationError(ValueError):
    """An input that cannot be turned into configuration; the message says what to change."""


def profile_plugins(profile: str) -> tuple[Obj, list[Obj]]:
    """(plugins, pluginConfig) of the ``default-scheduler`` profile for one of ``PROFILES``."""
    if profile in ("", "LowNodeUtilization"):
        return {}, []
    if profile == "HighNodeUtilization":
        # Upstream's asset: pack nodes by MostAllocated at weight 5, balance ignored.
        return (
            {
                "score": {
                    "disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                    "enabled": [{"name": "NodeResourcesFit", "weight": 5}],
                }
            },
            [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}],
        )
    if profile == "NoScoring":
        return {"preScore": {"disabled": [{"name": "*"}]}, "score": {"disabled": [{"name": "*"}]}}, []
    if profile == "LoadAware":
        return (
            {
                "filter": {"enabled": [{"name": LOAD_AWARE_PLUGIN}]},
                "score": {"enabled": [{"name": LOAD_AWARE_PLUGIN, "weight": LOAD_AWARE_WEIGHT}]},
            },
            [],
        )
    raise ObservationError(
        f"Scheduler/cluster spec.profile {profile!r} not recognized: use one of {', '.join(PROFILES)}"
    )


def node_selector_affinity(selector: str) -> Obj:
    """``defaultNodeSelector`` (label-selector syntax, e.g. ``type=user-node,region=east``) as NodeAffinity's
    ``addedAffinity``: one required node selector term whose expressions all must hold."""
    try:
        parsed = LabelSelector.parse(selector)
    except SelectorError as e:
        raise ObservationError(
            f"Scheduler/cluster spec.defaultNodeSelector {selector!r} is invalid: {e}"
        ) from None
    expressions: list[Obj] = []
    for r in parsed.requirements:
        op = str(r.op)
        values = sorted(r.values)
        if op in (Op.EQUALS, Op.DOUBLE_EQUALS, Op.IN):
            expressions.append({"key": r.key, "operator": "In", "values": values})
        elif op in (Op.NOT_EQUALS, Op.NOT_IN):
            expressions.append({"key": r.key, "operator": "NotIn", "values": values})
        elif op in (Op.EXISTS, Op.DOES_NOT_EXIST):
            expressions.append({"key": r.key, "operator": op})
        else:  # Gt/Lt: label selectors parse them, node selector terms take them with one integer value
            expressions.append({"key": r.key, "operator": op, "values": [str(r.number)]})
    if not expressions:
        return {}
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]
        }
    }


def observe(scheduler: Obj | None) -> Obj:
    """The observed config for a ``Scheduler`` object (None: it does not exist, the defaults apply).

    Raises :class:`ObservationError` with every problem found, one per line.
    """
    spec = (scheduler or {}).get("spec") or {}
    problems: list[str] = []
    policy = (spec.get("policy") or {}).get("name") if isinstance(spec.get("policy"), dict) else None
    if policy:
        problems.append(
            f"Scheduler/cluster spec.policy.name {policy!r}: the scheduler Policy API has been removed upstream; "
            "use spec.profile instead"
        )
    profile = str(spec.get("profile") or DEFAULT_PROFILE)
    plugins: Obj = {}
    plugin_config: list[Obj] = []
    try:
        plugins, plugin_config = profile_plugins(profile)
    except ObservationError as e:
        problems.append(str(e))
    dra = str((spec.get("profileCustomizations") or {}).get("dynamicResourceAllocation") or "")
    if dra == "Disabled":
        plugins = copy.deepcopy(plugins)
        plugins.setdefault("multiPoint", {}).setdefault("disabled", []).append({"name": "DynamicResources"})
    elif dra not in ("", "Enabled"):
        problems.append(
            f"Scheduler/cluster spec.profileCustomizations.dynamicResourceAllocation {dra!r} not recognized: "
            "use Enabled or Disabled"
        )
    selector = str(spec.get("defaultNodeSelector") or "").strip()
    if selector:
        try:
            added = node_selector_affinity(selector)
        except ObservationError as e:
            problems.append(str(e))
        else:
            if added:
                plugin_config = [*plugin_config, {"name": "NodeAffinity", "args": {"addedAffinity": added}}]
    if problems:
        raise ObservationError("\n".join(problems))
    prof: Obj = {"schedulerName": SCHEDULER_NAME}
    if plugins:
        prof["plugins"] = plugins
    if plugin_config:
        prof["pluginConfig"] = plugin_config
    return {"profiles": [prof]}


def config_diff(old: Obj | None, new: Obj) -> str:
    """A unified diff of two observed configs as YAML (sorted keys), for the ``ObservedConfigChanged`` event."""
    a = yaml.safe_dump(old or {}, sort_keys=True).splitlines()
    b = yaml.safe_dump(new, sort_keys=True).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "observedConfig", "observedConfig", n=1, lineterm=""))


class ConfigObserver:
    """Writes ``KubeScheduler/cluster`` ``spec.observedConfig`` from ``Scheduler/cluster`` (see the module).

    Runs whatever the management state (upstream's observer does too: only the controllers that write to the
    operand stop when Unmanaged)."""

    name = "ConfigObserver"

    # What this controller reads (api version, plural, name); the runtime's informers cover them.
    watches: tuple[tuple[str, str, str], ...] = (
        (c.SCHEDULER_CONFIG_API_VERSION, c.SCHEDULER_CONFIG_PLURAL, c.SINGLETON_NAME),
        (c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME),
    )

    async def sync(self, ctx: c.OperatorContext) -> None:
        client = ctx.client
        ks = await get_or_none(client, c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME)
        if ks is None:
            return  # nothing to write to; the runtime's status side reports the missing object
        try:
            scheduler = await get_or_none(
                client, c.SCHEDULER_CONFIG_API_VERSION, c.SCHEDULER_CONFIG_PLURAL, c.SINGLETON_NAME
            )
            observed = observe(scheduler)
        except (ObservationError, ApiError) as e:
            message = str(e) if isinstance(e, ObservationError) else f"reading Scheduler/cluster: {e}"
            await set_condition(client, DEGRADED_CONDITION, "True", "Error", message)
            return
        await self._write(ctx, ks, observed)
        await set_condition(client, DEGRADED_CONDITION, "False", "AsExpected", "")

    async def _write(self, ctx: c.OperatorContext, ks: Obj, observed: Obj) -> None:
        for attempt in range(5):
            current = (ks.get("spec") or {}).get("observedConfig")
            if current == observed:
                return
            ks["spec"] = {**(ks.get("spec") or {}), "observedConfig": observed}
            try:
                await ctx.client.replace(
                    c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME, ks
                )
            except ApiError as e:
                if e.is_conflict() and attempt < 4:
                    fresh = await get_or_none(
                        ctx.client, c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME
                    )
                    if fresh is None:
                        return
                    ks = fresh
                    continue
                record(ctx, "ObservedConfigWriteError", f"Failed to write observed config: {e}", warning=True)
                raise
            record(
                ctx,
                "ObservedConfigChanged",
                "Writing updated observed config: " + config_diff(current, observed),
            )
            return


__all__ = [
    "DEGRADED_CONDITION",
    "LOAD_AWARE_WEIGHT",
    "PROFILES",
    "ConfigObserver",
    "ObservationError",
    "config_diff",
    "node_selector_affinity",
    "observe",
    "profile_plugins",
]
