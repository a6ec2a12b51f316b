"""KubeSchedulerConfiguration loading: versions, defaults, merge/multiPoint, plugin args, validation errors."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from kubesched.apimachinery.duration import DurationError, format_duration_ns, parse_duration_ns
from kubesched.scheduler.config import (
    EXTENSION_POINTS,
    V1,
    V1BETA2,
    V1BETA3,
    ConfigError,
    ExtensionPoint,
    FieldError,
    ProfilePlugins,
    SchedulerConfiguration,
    default_config,
    load_config,
    parse_duration,
)
from kubesched.scheduler.config.errors import invalid
from kubesched.scheduler.config.merge import expand_multi_point, merge_plugin_set
from kubesched.scheduler.config.plugins import point_attribute
from kubesched.scheduler.config.types import PluginEntry, PluginSet
from kubesched.scheduler.framework.catalogue import POINT_METHODS, Catalogue, PluginDefinition
from kubesched.scheduler.plugins import in_tree_catalogue
from kubesched.scheduler.plugins.node_resources_fit import NodeResourcesFitArgs

CONFIGS = Path(__file__).parent / "configs"
P = ExtensionPoint


def spec(name: str, *points: str, args: Any = None) -> PluginDefinition:
    """A definition for configuration tests: a class with just the methods of ``points``."""
    cls = type(name, (), {POINT_METHODS[p]: (lambda self, *a: None) for p in points})
    return PluginDefinition(name, cls, args)


def with_plugins(*definitions: PluginDefinition) -> Catalogue:
    return in_tree_catalogue().extended(*definitions)


DYNAMIC = spec("Dynamic", P.FILTER, P.SCORE, P.POST_BIND)
CRANE = with_plugins(DYNAMIC)


def doc(body: str = "", version: str = "v1") -> str:
    return f"apiVersion: kubescheduler.config.k8s.io/{version}\nkind: KubeSchedulerConfiguration\n{body}"


def names(refs: tuple[Any, ...]) -> list[str]:
    return [r.name for r in refs]


def errors_of(text: str, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(text, **kwargs)
    return [str(e) for e in info.value.errors]


# --- the 1.36 default profile ------------------------------------------------------------------------------

# kubernetes-1.36-observed.md "The default profile in 1.36", minus NodeDeclaredFeatures, which kubesched does not
# implement. Score weights from upstream getDefaultPlugins (v1); VolumeBinding implements Score, so multiPoint
# enables it there with weight 1 (it answers SKIP at PreScore while StorageCapacityScoring is off).
OBSERVED_136 = {
    P.PRE_ENQUEUE: ["SchedulingGates", "DynamicResources", "DefaultPreemption"],
    P.QUEUE_SORT: ["PrioritySort"],
    P.PRE_FILTER: [
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
    ],
    P.FILTER: [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
    ],
    # DynamicResources before DefaultPreemption: "no new claims to deallocate, preemption: ..." in that order.
    P.POST_FILTER: ["DynamicResources", "DefaultPreemption"],
    P.PRE_SCORE: [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    P.SCORE: [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    ],
    P.RESERVE: ["VolumeBinding", "DynamicResources"],
    P.PERMIT: [],
    P.PRE_BIND: ["VolumeBinding", "DynamicResources"],
    P.BIND: ["DefaultBinder"],
    P.POST_BIND: [],
}
V1_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "VolumeBinding": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "DynamicResources": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
NODE_FEATURES = ("NodeDeclaredFeatures",)


@pytest.mark.parametrize("point", EXTENSION_POINTS)
def test_v1_default_profile_matches_136_observed(point: ExtensionPoint) -> None:
    profile = default_config().profiles[0]
    assert profile.scheduler_name == "default-scheduler"
    assert names(profile.plugins[point]) == OBSERVED_136[point]


def test_v1_default_score_weights_and_dropped_plugins() -> None:
    profile = default_config().profiles[0]
    assert profile.plugins.score_weights == V1_WEIGHTS
    assert all(ref.weight == 0 for ref in profile.plugins.filter)
    # Upstream defaults the registry does not know are dropped silently, and recorded.
    assert profile.dropped_default_plugins == NODE_FEATURES


def test_unimplemented_defaults_are_kept_when_the_registry_knows_them() -> None:
    features = spec("NodeDeclaredFeatures", P.PRE_FILTER, P.FILTER)
    profile = default_config(catalogue=with_plugins(features)).profiles[0]
    assert names(profile.plugins.pre_filter) == [*OBSERVED_136[P.PRE_FILTER], "NodeDeclaredFeatures"]
    assert names(profile.plugins.filter) == [*OBSERVED_136[P.FILTER], "NodeDeclaredFeatures"]
    assert "NodeDeclaredFeatures" not in profile.dropped_default_plugins
    # Upstream's order at Reserve/PreBind: VolumeBinding, DynamicResources.
    assert (
        names(profile.plugins.reserve)
        == names(profile.plugins.pre_bind)
        == ["VolumeBinding", "DynamicResources"]
    )


def test_default_top_level_values() -> None:
    config = default_config()
    assert config.api_version == V1
    assert config.parallelism == 16
    assert config.percentage_of_nodes_to_score == 0  # adaptive
    assert config.profiles[0].percentage_of_nodes_to_score is None  # inherit
    assert config.percentage_of_nodes_to_score_for(config.profiles[0]) == 0
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (1, 10)
    le = config.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (True, 15.0, 10.0, 2.0)
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == (
        "leases",
        "kube-scheduler",
        "kube-system",
    )
    cc = config.client_connection
    assert (cc.qps, cc.burst, cc.content_type) == (50.0, 100, "application/vnd.kubernetes.protobuf")
    assert config.enable_profiling and config.enable_contention_profiling
    assert not config.delay_cache_until_active
    assert config.extenders == () and config.warnings == ()


def test_default_plugin_args() -> None:
    profile = default_config().profiles[0]
    fit = profile.args("NodeResourcesFit")
    assert fit.scoring_strategy.type == "LeastAllocated"
    assert [(r.name, r.weight) for r in fit.scoring_strategy.resources] == [("cpu", 1), ("memory", 1)]
    balanced = profile.args("NodeResourcesBalancedAllocation")
    assert [(r.name, r.weight) for r in balanced.resources] == [("cpu", 1), ("memory", 1)]
    affinity = profile.args("InterPodAffinity")
    assert (affinity.hard_pod_affinity_weight, affinity.ignore_preferred_terms_of_existing_pods) == (1, False)
    assert profile.args("NodeAffinity").added_affinity is None
    preemption = profile.args("DefaultPreemption")
    assert (preemption.min_candidate_nodes_percentage, preemption.min_candidate_nodes_absolute) == (10, 100)
    spread = profile.args("PodTopologySpread")
    assert spread.defaulting_type == "System" and spread.default_constraints == ()
    assert [
        (c.topology_key, c.max_skew, c.when_unsatisfiable) for c in spread.effective_default_constraints
    ] == [
        ("kubernetes.io/hostname", 3, "ScheduleAnyway"),
        ("topology.kubernetes.io/zone", 5, "ScheduleAnyway"),
    ]
    # Every enabled plugin has an entry; plugins without args map to None.
    assert set(profile.plugin_args) == set(profile.plugins.all_names())
    assert profile.args("PrioritySort") is None


def test_v1beta3_defaults_use_multipoint_with_v1_weights() -> None:
    profile = default_config(version="v1beta3").profiles[0]
    assert profile.plugins.score_weights == {k: w for k, w in V1_WEIGHTS.items() if k != "DynamicResources"}
    assert names(profile.plugins.pre_enqueue) == ["DefaultPreemption", "SchedulingGates"]
    # 1.28 had DynamicResources behind a feature gate that was off: not in the v1beta3 defaults.
    assert names(profile.plugins.filter) == [p for p in OBSERVED_136[P.FILTER] if p != "DynamicResources"]
    assert names(profile.plugins.post_filter) == ["DefaultPreemption"]
    assert "EBSLimits" in profile.dropped_default_plugins


def test_v1beta2_defaults_are_per_point_with_old_weights() -> None:
    profile = default_config(version=V1BETA2).profiles[0]
    assert [tuple(r) for r in profile.plugins.score] == [
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("InterPodAffinity", 1),
        ("NodeResourcesFit", 1),
        ("NodeAffinity", 1),
        ("PodTopologySpread", 2),
        ("TaintToleration", 1),
    ]
    assert names(profile.plugins.pre_filter) == [
        "NodeResourcesFit",
        "NodePorts",
        "VolumeRestrictions",
        "PodTopologySpread",
        "InterPodAffinity",
        "VolumeBinding",
        "VolumeZone",
        "NodeAffinity",
    ]
    assert names(profile.plugins.reserve) == names(profile.plugins.pre_bind) == ["VolumeBinding"]
    assert names(profile.plugins.pre_score) == [
        "InterPodAffinity",
        "PodTopologySpread",
        "TaintToleration",
        "NodeAffinity",
    ]
    assert names(profile.plugins.pre_enqueue) == ["SchedulingGates"]
    assert names(profile.plugins.post_filter) == ["DefaultPreemption"]
    assert names(profile.plugins.bind) == ["DefaultBinder"]


@pytest.mark.parametrize("version", [V1, V1BETA3, V1BETA2])
def test_every_version_loads_a_minimal_document(version: str) -> None:
    config = load_config(f"apiVersion: {version}\nkind: KubeSchedulerConfiguration\n")
    assert config.api_version == version
    assert len(config.profiles) == 1 and config.profiles[0].scheduler_name == "default-scheduler"
    assert names(config.profiles[0].plugins.queue_sort) == ["PrioritySort"]


# --- crane's Dynamic ---------------------------------------------------------------------------------------


def test_founding_document_v1beta2_profile_with_dynamic() -> None:
    config = load_config(CONFIGS / "crane-founding-v1beta2.yaml", catalogue=CRANE)
    assert config.api_version == V1BETA2
    profile = config.profile("default-scheduler")
    # Dynamic is appended after the v1beta2 default score plugins, whose weights sum to 8.
    assert profile.plugins.score[-1] == ("Dynamic", 3)
    assert sum(profile.plugins.score_weights.values()) == 8 + 3
    assert names(profile.plugins.post_bind) == ["Dynamic"]
    assert "Dynamic" not in names(profile.plugins.filter)  # the founding config enables no Dynamic filter
    # Out-of-tree args without an args_model are handed over as a dict, untouched.
    assert profile.args("Dynamic") == {
        "promeAddr": "http://prometheus.crane-system.svc.cluster.local:9090",
        "metricsUpdatePeriodBySeconds": "5m",
        "clusterName": "cs-test-2",
        "policyConfigPath": "/etc/kubernetes/policy.yaml",
    }
    assert config.leader_election.resource_name == "kube-scheduler"
    assert config.leader_election.resource_namespace == "kube-system"


def test_founding_document_without_dynamic_is_an_unknown_plugin_error() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(CONFIGS / "crane-founding-v1beta2.yaml")
    err = info.value
    assert err.fields() == [
        "profiles[0].plugins.score.enabled[0].name",
        "profiles[0].plugins.postBind.enabled[0].name",
    ]
    assert all('"Dynamic": unknown plugin' in str(e) for e in err.errors)
    assert "crane-founding-v1beta2.yaml" in str(err)


def test_crane_shipped_config_enables_dynamic_filter() -> None:
    profile = load_config(CONFIGS / "crane-shipped-v1beta2.yaml", catalogue=CRANE).profiles[0]
    assert names(profile.plugins.filter)[-1] == "Dynamic"
    assert profile.plugins.score_weights["Dynamic"] == 3
    assert profile.args("Dynamic") == {"policyConfigPath": "/etc/kubernetes/policy.yaml"}


def test_dynamic_at_a_point_it_does_not_implement_is_an_error() -> None:
    body = "profiles:\n- plugins:\n    reserve:\n      enabled: [{name: Dynamic}]\n"
    assert errors_of(doc(body), catalogue=CRANE) == [
        'profiles[0].plugins.reserve.enabled[0].name: Invalid value: "Dynamic": plugin does not implement '
        "the reserve extension point (it implements: filter, score, postBind)"
    ]


def test_out_of_tree_args_model_is_decoded_and_validated() -> None:
    class DynamicArgs(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        policyConfigPath: str = "/etc/kubernetes/dynamic-scheduler-policy.yaml"  # the wire name, no alias

        def validate_args(self, path: str) -> list[FieldError]:
            if not self.policyConfigPath.startswith("/"):
                return [
                    invalid(f"{path}.policyConfigPath", self.policyConfigPath, "must be an absolute path")
                ]
            return []

    registry = with_plugins(spec("Dynamic", P.FILTER, P.SCORE, P.POST_BIND, args=DynamicArgs))
    profile = default_config(catalogue=registry).profiles[0]
    assert "Dynamic" not in profile.plugin_args  # not enabled by default

    def with_args(args: str) -> str:
        return doc(
            "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: Dynamic, weight: 3}]\n"
            f"  pluginConfig:\n  - name: Dynamic\n    args: {args}\n"
        )

    profile = load_config(with_args("{policyConfigPath: /etc/p.yaml}"), catalogue=registry).profiles[0]
    assert profile.args("Dynamic") == DynamicArgs(policyConfigPath="/etc/p.yaml")
    assert names(profile.plugins.filter)[-1] == "Dynamic" and profile.plugins.score[-1] == ("Dynamic", 3)
    assert errors_of(with_args("{promeAddr: x}"), catalogue=registry) == [
        "profiles[0].pluginConfig[0].args.promeAddr: Unknown field"
    ]
    assert errors_of(with_args("{policyConfigPath: rel.yaml}"), catalogue=registry) == [
        'profiles[0].pluginConfig[0].args.policyConfigPath: Invalid value: "rel.yaml": must be an absolute path'
    ]


def test_catalogue_must_be_consistent() -> None:
    with pytest.raises(ValueError, match="already registered"):
        with_plugins(spec("NodeName", P.FILTER))
    with pytest.raises(TypeError, match="plugin_type"):
        PluginDefinition("X", lambda args, handle: None)
    with pytest.raises(TypeError, match="pydantic BaseModel"):
        spec("X", P.SCORE, args=dict)
    # The points are read off the class: a method that is no extension point adds none.
    assert spec("X", P.SCORE).extension_points == {P.SCORE}


# --- documented kube-scheduler examples ---------------------------------------------------------------------


def test_multiple_profiles_one_without_scoring() -> None:
    config = load_config(CONFIGS / "multiple-profiles.yaml")
    assert [p.scheduler_name for p in config.profiles] == ["default-scheduler", "no-scoring-scheduler"]
    default, no_scoring = config.profiles
    assert default.plugins.score_weights == V1_WEIGHTS
    assert no_scoring.plugins.score == () and no_scoring.plugins.pre_score == ()
    assert no_scoring.plugins.filter == default.plugins.filter
    assert config.profiles_by_name["no-scoring-scheduler"] is no_scoring


def test_disable_a_score_plugin_and_add_custom_ones() -> None:
    registry = with_plugins(*(spec(name, P.SCORE) for name in ("MyCustomPluginA", "MyCustomPluginB")))
    profile = load_config(CONFIGS / "disable-score-plugin.yaml", catalogue=registry).profiles[0]
    assert [tuple(r) for r in profile.plugins.score] == [
        # multiPoint defaults still flow in, minus the disabled one; the specific ones come after.
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("VolumeBinding", 1),
        ("InterPodAffinity", 2),
        ("DynamicResources", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("MyCustomPluginA", 2),
        ("MyCustomPluginB", 1),
    ]
    # Disabled at score only: PodTopologySpread still filters.
    assert "PodTopologySpread" in names(profile.plugins.filter)


def test_documented_multipoint_example() -> None:
    registry = with_plugins(
        spec("CustomQueueSort", P.QUEUE_SORT),
        spec("CustomPlugin1", P.PRE_FILTER, P.FILTER, P.SCORE),
        spec("CustomPlugin2", P.RESERVE, P.PERMIT),
    )
    profile = load_config(CONFIGS / "multipoint.yaml", catalogue=registry).profiles[0]
    assert names(profile.plugins.queue_sort) == ["CustomQueueSort"]
    assert "NodeName" not in names(profile.plugins.filter)
    assert names(profile.plugins.filter)[-1] == "CustomPlugin1"
    assert names(profile.plugins.reserve) == [
        "VolumeBinding",
        "DynamicResources",
        "CustomPlugin2",
    ]  # defaults first
    assert names(profile.plugins.permit) == ["CustomPlugin2"]
    # ImageLocality, set explicitly at score, overrides its multiPoint entry and moves first, weight 1.
    assert [tuple(r) for r in profile.plugins.score] == [
        ("ImageLocality", 1),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("VolumeBinding", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("DynamicResources", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("CustomPlugin1", 3),
    ]


def test_most_allocated_args() -> None:
    fit = load_config(CONFIGS / "most-allocated.yaml").profiles[0].args("NodeResourcesFit")
    assert isinstance(fit, NodeResourcesFitArgs)
    assert fit.scoring_strategy.type == "MostAllocated"
    assert [(r.name, r.weight) for r in fit.scoring_strategy.resources] == [
        ("cpu", 1),
        ("memory", 1),
        ("intel.com/foo", 3),
        ("intel.com/bar", 3),
    ]
    assert fit.scoring_strategy.requested_to_capacity_ratio is None


def test_requested_to_capacity_ratio_args() -> None:
    fit = load_config(CONFIGS / "requested-to-capacity-ratio.yaml").profiles[0].args("NodeResourcesFit")
    strategy = fit.scoring_strategy
    assert strategy.type == "RequestedToCapacityRatio"
    assert [(p.utilization, p.score) for p in strategy.requested_to_capacity_ratio.shape] == [
        (0, 0),
        (100, 10),
    ]
    assert [r.name for r in strategy.resources] == ["intel.com/foo", "intel.com/bar"]


def test_written_config_round_trips_with_warnings() -> None:
    config = load_config(CONFIGS / "written-config.yaml")
    assert config.client_connection.kubeconfig == "/etc/kubernetes/scheduler.conf"
    profile = config.profiles[0]
    assert profile.plugins == default_config().profiles[0].plugins
    assert profile.plugin_args == default_config().profiles[0].plugin_args
    # Its VolumeBinding args (bindTimeoutSeconds: 600) are the defaults, now that the plugin is in the registry.
    assert config.warnings == ()
    assert profile.args("VolumeBinding").bind_timeout_seconds == 600


def test_pod_topology_spread_list_defaulting_and_node_affinity_args() -> None:
    text = doc(
        """
profiles:
  - schedulerName: default-scheduler
    pluginConfig:
      - name: PodTopologySpread
        args:
          defaultConstraints:
            - maxSkew: 1
              topologyKey: topology.kubernetes.io/zone
              whenUnsatisfiable: ScheduleAnyway
          defaultingType: List
  - schedulerName: foo-scheduler
    pluginConfig:
      - name: NodeAffinity
        args:
          addedAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - key: scheduler-profile
                  operator: In
                  values:
                  - foo
"""
    )
    config = load_config(text)
    spread = config.profile("default-scheduler").args("PodTopologySpread")
    assert [(c.max_skew, c.topology_key) for c in spread.effective_default_constraints] == [
        (1, "topology.kubernetes.io/zone")
    ]
    added = config.profile("foo-scheduler").args("NodeAffinity").added_affinity
    terms = added["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["foo"]


# --- merge semantics -----------------------------------------------------------------------------------------


def test_score_override_keeps_the_plugin_but_moves_it_first() -> None:
    body = "profiles:\n- plugins:\n    score:\n      enabled: [{name: NodeResourcesFit, weight: 5}]\n"
    score = load_config(doc(body)).profiles[0].plugins.score
    assert score[0] == ("NodeResourcesFit", 5)
    assert names(score).count("NodeResourcesFit") == 1 and len(score) == 9


def test_v1beta2_reenabled_default_keeps_its_position_with_the_new_weight() -> None:
    body = "profiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality, weight: 7}, {name: PodTopologySpread}]\n"
    score = load_config(doc(body, "v1beta2")).profiles[0].plugins.score
    assert score[1] == ("ImageLocality", 7)
    assert score[5] == ("PodTopologySpread", 1)  # re-listed without a weight: weight 1, as upstream
    assert len(score) == 7


def test_disable_all_then_enable_in_user_order() -> None:
    body = (
        "profiles:\n- plugins:\n    filter:\n      disabled: [{name: '*'}]\n"
        "      enabled: [{name: NodeName}, {name: TaintToleration}]\n"
    )
    plugins = load_config(doc(body)).profiles[0].plugins
    assert names(plugins.filter) == ["NodeName", "TaintToleration"]
    assert names(plugins.pre_filter) == OBSERVED_136[P.PRE_FILTER]


def test_multipoint_disable_all_and_reenable() -> None:
    body = (
        "profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: '*'}]\n"
        "      enabled: [{name: PrioritySort}, {name: DefaultBinder}, {name: NodeResourcesFit, weight: 4}]\n"
    )
    plugins = load_config(doc(body)).profiles[0].plugins
    assert names(plugins.queue_sort) == ["PrioritySort"] and names(plugins.bind) == ["DefaultBinder"]
    assert [tuple(r) for r in plugins.score] == [("NodeResourcesFit", 4)]
    assert names(plugins.filter) == ["NodeResourcesFit"] and plugins.pre_enqueue == ()


def test_specific_weight_beats_multipoint_weight_and_disable_is_per_point() -> None:
    body = (
        "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: Dynamic, weight: 3}]\n"
        "    score:\n      enabled: [{name: Dynamic, weight: 9}]\n"
        "    filter:\n      disabled: [{name: Dynamic}]\n"
    )
    plugins = load_config(doc(body), catalogue=CRANE).profiles[0].plugins
    assert plugins.score[0] == ("Dynamic", 9)
    assert "Dynamic" not in names(plugins.filter)
    assert names(plugins.post_bind) == ["Dynamic"]


def test_duplicates_in_one_point_are_errors() -> None:
    body = "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: Dynamic}, {name: Dynamic}]\n"
    assert errors_of(doc(body), catalogue=CRANE) == [
        'profiles[0].plugins.multiPoint.enabled[1]: Duplicate value: "Dynamic"'
    ]
    body = "profiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality}, {name: ImageLocality, weight: 2}]\n"
    assert errors_of(doc(body, "v1beta2")) == [
        'profiles[0].plugins.score.enabled[1]: Duplicate value: "ImageLocality"'
    ]


# --- errors that name the field ------------------------------------------------------------------------------

INVALID_CASES = [
    pytest.param(
        "profiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality}, {name: NodeAffinity, weight: 0}]\n",
        "profiles[0].plugins.score.enabled[1].weight: Invalid value: 0: must be in the range [1, 100]",
        id="score-weight-zero",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    score:\n      enabled: [{name: NodeAffinity, weight: 101}]\n",
        "profiles[0].plugins.score.enabled[0].weight: Invalid value: 101: must be in the range [1, 100]",
        id="score-weight-too-big",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NodeResourceFit}]\n",
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "NodeResourceFit": unknown plugin',
        id="unknown-plugin",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NodeDeclaredFeatures}]\n",
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "NodeDeclaredFeatures": unknown plugin: an upstream '
        "in-tree plugin that kubesched does not implement",
        id="unimplemented-upstream-plugin",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    filter:\n      enabled: [{name: EBSLimits}]\n",
        'profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid in version',
        id="removed-plugin",
    ),
    pytest.param(
        "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 15s\n",
        'leaderElection.leaseDuration: Invalid value: "10s": must be greater than renewDeadline (15s)',
        id="lease-not-longer-than-renew",
    ),
    pytest.param(
        "leaderElection:\n  renewDeadline: 2s\n  retryPeriod: 2s\n",
        'leaderElection.renewDeadline: Invalid value: "2s": must be greater than 1.2 * retryPeriod (2.4s)',
        id="renew-not-longer-than-jittered-retry",
    ),
    pytest.param(
        "leaderElection:\n  retryPeriod: -1s\n",
        'leaderElection.retryPeriod: Invalid value: "-1s": must be greater than zero',
        id="negative-retry",
    ),
    pytest.param(
        "leaderElection:\n  resourceLock: endpoints\n",
        'leaderElection.resourceLock: Invalid value: "endpoints": resourceLock value must be "leases"',
        id="resource-lock",
    ),
    pytest.param(
        "leaderElection:\n  leaseDuration: 15\n",
        'leaderElection.leaseDuration: Invalid value: 15: must be a duration string such as "15s" or "1m30s"',
        id="duration-not-a-string",
    ),
    pytest.param(
        "leaderElection:\n  leaseDuration: 15 seconds\n",
        'leaderElection.leaseDuration: Invalid value: "15 seconds": time: unknown unit " seconds" in duration',
        id="duration-bad-unit",
    ),
    pytest.param(
        "parallelism: 0\n",
        "parallelism: Invalid value: 0: should be an integer value greater than zero",
        id="parallelism",
    ),
    pytest.param(
        'parallelism: "16"\n',
        'parallelism: Invalid value: "16": input should be a valid integer',
        id="parallelism-string",
    ),
    pytest.param(
        "percentageOfNodesToScore: 101\n",
        "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]",
        id="percentage",
    ),
    pytest.param(
        "profiles:\n- percentageOfNodesToScore: -1\n",
        "profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]",
        id="profile-percentage",
    ),
    pytest.param(
        "podInitialBackoffSeconds: 0\n",
        "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0",
        id="initial-backoff",
    ),
    pytest.param(
        "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n",
        "podMaxBackoffSeconds: Invalid value: 4: must be greater than or equal to PodInitialBackoffSeconds",
        id="max-backoff",
    ),
    pytest.param(
        "profiles:\n- schedulerName: a\n- schedulerName: a\n",
        'profiles[1].schedulerName: Duplicate value: "a"',
        id="duplicate-scheduler-name",
    ),
    pytest.param(
        "profiles:\n- schedulerName: a\n- {}\n",
        "profiles[1].schedulerName: Required value",
        id="missing-scheduler-name",
    ),
    pytest.param(
        "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    queueSort:\n      disabled: [{name: '*'}]\n"
        "      enabled: [{name: PrioritySort}, {name: Other}]\n",
        'profiles[1].plugins.queueSort.enabled[1].name: Invalid value: "Other": unknown plugin',
        id="unknown-queue-sort",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    bind:\n      disabled: [{name: DefaultBinder}]\n",
        'profiles[0].plugins.bind: Required value: at least one bind plugin is needed for profile with scheduler name "default-scheduler"',
        id="no-binder",
    ),
    pytest.param(
        "profiles:\n- schedulerName: a\n  plugin: {}\n",
        "profiles[0].plugin: Unknown field",
        id="unknown-field",
    ),
    pytest.param(
        "clientConnection:\n  burst: -1\n",
        "clientConnection.burst: Invalid value: -1: must be non-negative",
        id="burst",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: Fancy}}\n",
        'profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Fancy": supported values: '
        '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
        id="fit-strategy-type",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: LeastAllocated, resources: [{name: cpu, weight: 101}]}}\n",
        "profiles[0].pluginConfig[0].args.scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]",
        id="fit-resource-weight",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: RequestedToCapacityRatio}}\n",
        "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is RequestedToCapacityRatio",
        id="ratio-missing",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: RequestedToCapacityRatio\n"
        "        requestedToCapacityRatio: {shape: [{utilization: 50, score: 5}, {utilization: 40, score: 11}]}\n",
        "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization: Invalid value: 40: values must be sorted in increasing order",
        id="ratio-shape-order",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated, requestedToCapacityRatio: {shape: []}}}\n",
        "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio",
        id="ratio-forbidden",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {ignoredResources: [example.com/foo], ignoredResourceGroups: [example.com/x]}\n",
        "profiles[0].pluginConfig[0].args.ignoredResourceGroups[0]: Invalid value: \"example.com/x\": resource group name can't contain '/'",
        id="fit-ignored-group",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {ignoredResources: [a/b/c]}\n",
        'profiles[0].pluginConfig[0].args.ignoredResources[0]: Invalid value: "a/b/c": a qualified name must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        id="fit-ignored-resource-qualified-name",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n"
        "      defaultConstraints: [{maxSkew: 1, topologyKey: Zone.Example/z, whenUnsatisfiable: ScheduleAnyway}]\n",
        'profiles[0].pluginConfig[0].args.defaultConstraints[0].topologyKey: Invalid value: "Zone.Example/z": prefix part a '
        "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters",
        id="spread-topology-key-prefix",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated}, unknownThing: 1}\n",
        "profiles[0].pluginConfig[0].args.unknownThing: Unknown field",
        id="fit-unknown-arg",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {kind: InterPodAffinityArgs}\n",
        'profiles[0].pluginConfig[0].args.kind: Unsupported value: "InterPodAffinityArgs": supported values: "NodeResourcesFitArgs"',
        id="args-kind",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesBalancedAllocation\n    args: {resources: [{name: cpu, weight: 2}]}\n",
        "profiles[0].pluginConfig[0].args.resources[0].weight: Invalid value: 2: must be 1",
        id="balanced-weight",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args: {hardPodAffinityWeight: 101}\n",
        "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]",
        id="hard-pod-affinity-weight",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args: {minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0}\n",
        "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute",
        id="preemption-both-zero",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args: {defaultingType: Sometimes}\n",
        'profiles[0].pluginConfig[0].args.defaultingType: Unsupported value: "Sometimes": supported values: "System", "List"',
        id="spread-defaulting-type",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]\n",
        'profiles[0].pluginConfig[0].args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
        id="spread-system-with-constraints",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n"
        "          nodeSelectorTerms: [{matchExpressions: [{key: a, operator: In}]}]\n",
        "profiles[0].pluginConfig[0].args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value",
        id="node-affinity-values",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n  - name: DefaultPreemption\n",
        'profiles[0].pluginConfig[1]: Duplicate value: "DefaultPreemption"',
        id="duplicate-plugin-config",
    ),
    pytest.param(
        "extenders:\n- urlPrefix: http://127.0.0.1:8888\n  prioritizeVerb: prioritize\n",
        "extenders[0].weight: Invalid value: 0: must have a positive weight applied to it",
        id="extender-weight",
    ),
]


@pytest.mark.parametrize(("body", "expected"), INVALID_CASES)
def test_invalid_configuration_names_the_field(body: str, expected: str) -> None:
    messages = errors_of(doc(body))
    assert any(m.startswith(expected) for m in messages), messages


def test_v1beta2_rejects_fields_it_never_had() -> None:
    body = "profiles:\n- percentageOfNodesToScore: 5\n  plugins:\n    multiPoint:\n      enabled: [{name: ImageLocality}]\n"
    assert errors_of(doc(body, "v1beta2")) == [
        "profiles[0].percentageOfNodesToScore: Unknown field",
        "profiles[0].plugins.multiPoint: Unknown field",
    ]


def test_queue_sort_must_be_the_same_for_all_profiles() -> None:
    registry = with_plugins(spec("OtherSort", P.QUEUE_SORT))
    body = (
        "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    queueSort:\n"
        "      disabled: [{name: '*'}]\n      enabled: [{name: OtherSort}]\n"
    )
    assert errors_of(doc(body), catalogue=registry) == [
        'profiles[1].plugins.queueSort: Invalid value: ["OtherSort"]: must be the same for all profiles'
    ]
    two_sorts = "profiles:\n- plugins:\n    queueSort:\n      enabled: [{name: OtherSort}]\n"
    assert errors_of(doc(two_sorts), catalogue=registry) == [
        "profiles[0].plugins.queueSort: Invalid value: 2: only one queue sort plugin required for profile with "
        'scheduler name "default-scheduler", but got 2'
    ]


def test_all_errors_are_reported_together_and_readable() -> None:
    body = "parallelism: -1\npodInitialBackoffSeconds: 0\npercentageOfNodesToScore: 200\n"
    with pytest.raises(ConfigError) as info:
        load_config(doc(body))
    assert set(info.value.fields()) == {"parallelism", "podInitialBackoffSeconds", "percentageOfNodesToScore"}
    text = str(info.value)
    assert text.splitlines()[0] == "invalid KubeSchedulerConfiguration (<text>):"
    assert (
        "  - parallelism: Invalid value: -1: should be an integer value greater than zero"
        in text.splitlines()
    )


def test_leader_election_durations_are_not_checked_when_not_electing() -> None:
    config = load_config(
        doc("leaderElection:\n  leaderElect: false\n  leaseDuration: 1s\n  renewDeadline: 5s\n")
    )
    assert not config.leader_election.leader_elect
    assert (config.leader_election.lease_duration, config.leader_election.renew_deadline) == (1.0, 5.0)


def test_durations_and_scalars_are_read() -> None:
    body = (
        "leaderElection:\n  leaseDuration: 1m30s\n  renewDeadline: 1m\n  retryPeriod: 500ms\n"
        "  resourceName: crane-scheduler\n  resourceNamespace: crane-system\n"
        "clientConnection:\n  qps: 500\n  burst: 1000\n  kubeconfig: /k.conf\n"
        "parallelism: 8\npercentageOfNodesToScore: 5\npodInitialBackoffSeconds: 2\npodMaxBackoffSeconds: 20\n"
        "enableProfiling: false\ndelayCacheUntilActive: true\n"
    )
    config = load_config(doc(body))
    le = config.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (90.0, 60.0, 0.5)
    assert (le.resource_name, le.resource_namespace) == ("crane-scheduler", "crane-system")
    assert (config.client_connection.qps, config.client_connection.burst) == (500.0, 1000)
    assert (config.parallelism, config.percentage_of_nodes_to_score) == (8, 5)
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (2, 20)
    # Contention profiling follows profiling unless set.
    assert not config.enable_profiling and not config.enable_contention_profiling
    assert config.delay_cache_until_active


def test_profile_percentage_overrides_the_global_one() -> None:
    config = load_config(
        doc(
            "percentageOfNodesToScore: 30\nprofiles:\n- schedulerName: a\n  percentageOfNodesToScore: 7\n- schedulerName: b\n"
        )
    )
    assert config.percentage_of_nodes_to_score_for(config.profile("a")) == 7
    assert config.percentage_of_nodes_to_score_for(config.profile("b")) == 30


def test_extenders_are_kept_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    body = (
        "extenders:\n- urlPrefix: http://127.0.0.1:8888/sched\n  filterVerb: filter\n  prioritizeVerb: prioritize\n"
        "  weight: 2\n  enableHTTPS: false\n  httpTimeout: 30s\n  nodeCacheCapable: true\n"
        "  managedResources: [{name: example.com/foo, ignoredByScheduler: true}]\n"
    )
    caplog.set_level(logging.WARNING, logger="kubesched.scheduler.config")
    config = load_config(doc(body))
    (ext,) = config.extenders
    assert (ext.url_prefix, ext.filter_verb, ext.weight, ext.http_timeout) == (
        "http://127.0.0.1:8888/sched",
        "filter",
        2,
        30.0,
    )
    assert (
        ext.managed_resources[0].name == "example.com/foo" and ext.managed_resources[0].ignored_by_scheduler
    )
    assert config.warnings == (
        "extenders[0] (http://127.0.0.1:8888/sched): accepted, but kubesched does not call scheduler extenders",
    )
    assert "does not call scheduler extenders" in caplog.text


def test_args_for_plugins_not_enabled_or_not_registered_are_warnings() -> None:
    body = (
        "profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: NodeAffinity}]\n"
        "  pluginConfig:\n  - name: NodeAffinity\n    args: {}\n  - name: Mystery\n    args: {a: 1}\n"
    )
    config = load_config(doc(body))
    assert config.warnings == (
        "profiles[0].pluginConfig[0]: plugin 'NodeAffinity' is not enabled in profile 'default-scheduler'; its args have no effect",
        "profiles[0].pluginConfig[1]: plugin 'Mystery' is not in the plugin registry; its args are ignored",
    )
    assert "NodeAffinity" not in config.profiles[0].plugin_args


def test_partial_args_are_completed_with_defaults() -> None:
    body = (
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated}}\n"
        "  - name: DefaultPreemption\n    args: {minCandidateNodesAbsolute: 50}\n"
        "  - name: NodeResourcesBalancedAllocation\n    args: {resources: [{name: cpu}, {name: example.com/gpu, weight: 0}]}\n"
    )
    profile = load_config(doc(body)).profiles[0]
    fit = profile.args("NodeResourcesFit").scoring_strategy
    assert fit.type == "MostAllocated" and [r.name for r in fit.resources] == ["cpu", "memory"]
    preemption = profile.args("DefaultPreemption")
    assert (preemption.min_candidate_nodes_percentage, preemption.min_candidate_nodes_absolute) == (10, 50)
    balanced = profile.args("NodeResourcesBalancedAllocation")
    assert [(r.name, r.weight) for r in balanced.resources] == [("cpu", 1), ("example.com/gpu", 1)]


# --- documents and sources ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n",
            'apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta1": supported values: '
            '"kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3", "kubescheduler.config.k8s.io/v1beta2"',
        ),
        (
            "kind: KubeSchedulerConfiguration\n",
            "apiVersion: Required value: supported versions: kubescheduler.config.k8s.io/v1",
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Pod\n",
            'kind: Unsupported value: "Pod": supported values: "KubeSchedulerConfiguration"',
        ),
        (
            "apiVersion: v1\nkind: KubeSchedulerConfiguration\nprofiles:\n  - a: b\n   c: d\n",
            "Malformed document: line 5, column",
        ),
        (
            "apiVersion: x\napiVersion: y\n",
            'Malformed document: line 2, column 1: key "apiVersion" already set in map',
        ),
        ("", "Malformed document: the document is empty"),
        (
            "- a\n- b\n",
            "Malformed document: expected a KubeSchedulerConfiguration object (a mapping), found a list",
        ),
        ('{"apiVersion": "x",\n "kind": }', "Malformed document: line 2, column 10: Expecting value"),
        ('{"kind": "a", "kind": "b"}', 'Malformed document: key "kind" already set in object'),
    ],
)
def test_bad_documents(text: str, expected: str) -> None:
    messages = errors_of(text)
    assert messages[0].startswith(expected), messages


def test_sources_path_text_bytes_and_json(tmp_path: Path) -> None:
    text = doc("parallelism: 4\n")
    path = tmp_path / "sched.yaml"
    path.write_text(text)
    assert load_config(path).parallelism == 4
    assert load_config(str(path)).parallelism == 4
    assert load_config(text).parallelism == 4
    assert load_config(text.encode()).parallelism == 4
    as_json = '{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "parallelism": 4}'
    assert load_config(as_json).parallelism == 4
    with pytest.raises(ConfigError, match="config file does not exist"):
        load_config(str(tmp_path / "missing.yaml"))


def test_default_config_rejects_unknown_versions() -> None:
    assert default_config(version=V1BETA3).api_version == V1BETA3
    with pytest.raises(ConfigError, match='Unsupported value: "v1alpha1"'):
        default_config(version="v1alpha1")


def test_configuration_is_immutable() -> None:
    config = default_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.parallelism = 1  # type: ignore[misc]
    assert isinstance(config, SchedulerConfiguration)


def test_profile_plugins_fields_cover_every_extension_point() -> None:
    assert [f.name for f in dataclasses.fields(ProfilePlugins)] == [
        point_attribute(p) for p in EXTENSION_POINTS
    ]
    plugins = default_config().profiles[0].plugins
    assert plugins["preFilter"] is plugins.pre_filter
    with pytest.raises(KeyError):
        plugins["normalizeScore"]


def test_in_tree_catalogue_is_the_in_tree_set() -> None:
    known = in_tree_catalogue()
    assert set(known) == {
        "PrioritySort", "SchedulingGates", "NodeName", "NodePorts", "NodeUnschedulable", "NodeResourcesFit",
        "NodeResourcesBalancedAllocation", "NodeAffinity", "TaintToleration", "PodTopologySpread",
        "InterPodAffinity", "ImageLocality", "DynamicResources", "DefaultPreemption", "DefaultBinder",
        "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone",
    }  # fmt: skip
    assert known["DynamicResources"].extension_points == {
        P.PRE_ENQUEUE, P.PRE_FILTER, P.FILTER, P.POST_FILTER, P.SCORE, P.RESERVE, P.PRE_BIND,
    }  # fmt: skip
    assert known["TaintToleration"].extension_points == {P.FILTER, P.PRE_SCORE, P.SCORE}
    assert known["DefaultBinder"].extension_points == {P.BIND}


# --- durations -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0), ("1m30s", 90.0), ("5m", 300.0), ("1h", 3600.0), ("2h45m", 9900.0), ("1.5h", 5400.0),
        ("300ms", 0.3), ("0", 0.0), ("-1.5s", -1.5), ("+2s", 2.0), (".5s", 0.5), ("1.s", 1.0),
        ("10us", 1e-5), ("10µs", 1e-5), ("1ns", 1e-9), ("1h1m1s1ms1us1ns", 3661.001001001),
    ],
)  # fmt: skip
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize("text", ["", "s", "1", ".", "-", "1x", "1 s", "s1", "1.2.3s", "9999999999h", "0.s5"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_duration_format_parse_round_trip(ns: int) -> None:
    assert parse_duration_ns(format_duration_ns(ns)) == ns


@given(
    st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 10_000),
)  # fmt: skip
def test_duration_components_add_up(h: int, m: int, s: int, ms: int) -> None:
    expected = ((h * 60 + m) * 60 + s) * 10**9 + ms * 10**6
    assert parse_duration_ns(f"{h}h{m}m{s}s{ms}ms") == expected


@given(st.text(max_size=12))
def test_parse_duration_never_fails_unexpectedly(text: str) -> None:
    try:
        parse_duration_ns(text)
    except DurationError:
        pass


# --- merge properties ------------------------------------------------------------------------------------------

PLUGIN_NAMES = [f"P{i}" for i in range(8)]
plugin_entries = st.builds(
    PluginEntry, st.sampled_from(PLUGIN_NAMES), st.one_of(st.none(), st.integers(1, 100))
)
unique_entries = st.lists(plugin_entries, max_size=6, unique_by=lambda e: e.name)


@given(
    default=unique_entries,
    custom=unique_entries,
    disabled=st.lists(st.sampled_from([*PLUGIN_NAMES, "*"]), max_size=3),
)
def test_merge_plugin_set_properties(
    default: list[PluginEntry], custom: list[PluginEntry], disabled: list[str]
) -> None:
    merged = merge_plugin_set(PluginSet(tuple(default)), PluginSet(tuple(custom), tuple(disabled)))
    out = list(merged.enabled)
    custom_by_name = {e.name: e for e in custom}
    if "*" in disabled:
        assert out == custom
        return
    kept_defaults = [e for e in default if e.name not in disabled]
    # Kept defaults come first, in default order, replaced in place by a custom entry of the same name.
    assert out[: len(kept_defaults)] == [custom_by_name.get(e.name, e) for e in kept_defaults]
    # Then the remaining custom plugins, in the user's order.
    kept_names = {e.name for e in kept_defaults}
    assert out[len(kept_defaults) :] == [e for e in custom if e.name not in kept_names]
    assert set(disabled) <= set(merged.disabled)


point_sets = st.frozensets(st.sampled_from([P.FILTER, P.SCORE, P.BIND]), min_size=1)


@given(
    capabilities=st.fixed_dictionaries({name: point_sets for name in PLUGIN_NAMES}),
    multi=unique_entries,
    score=unique_entries,
    score_disabled=st.lists(st.sampled_from([*PLUGIN_NAMES, "*"]), max_size=3),
)
def test_multi_point_expansion_properties(
    capabilities: dict[str, frozenset[str]],
    multi: list[PluginEntry],
    score: list[PluginEntry],
    score_disabled: list[str],
) -> None:
    score = [e for e in score if P.SCORE in capabilities[e.name]]
    merged = {"multiPoint": PluginSet(tuple(multi)), P.SCORE: PluginSet(tuple(score), tuple(score_disabled))}
    plugins, duplicates = expand_multi_point(merged, lambda name: capabilities[name])
    assert duplicates == []
    result = plugins.score
    result_names = names(result)
    assert len(result_names) == len(set(result_names))
    specific = [e.name for e in score]
    if "*" in score_disabled:
        assert result_names == specific
    else:
        from_multi = [
            e.name
            for e in multi
            if P.SCORE in capabilities[e.name] and e.name not in score_disabled and e.name not in specific
        ]
        overrides = [n for n in specific if n in {e.name for e in multi} and n not in score_disabled]
        rest = [n for n in specific if n not in overrides]
        assert result_names == overrides + from_multi + rest
    multi_weights = {e.name: e.weight for e in multi}
    for ref in result:
        explicit = (
            next((e.weight for e in score if e.name == ref.name), None) if ref.name in specific else None
        )
        expected = (explicit if ref.name in specific else multi_weights[ref.name]) or 1
        assert ref.weight == expected
    # Points other than score only see multiPoint plugins that implement them.
    for name in names(plugins.filter):
        assert P.FILTER in capabilities[name]
