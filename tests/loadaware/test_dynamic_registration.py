"""Dynamic registered with the configuration loader and the plugin registry: the founding document's profile
(v1beta2, and the same as v1) loads, builds a Framework and schedules with Dynamic's Filter, Score and
PostBind, in cases worked out from crane's formulas."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from la_helpers import CPU5, NOW, cluster, crane, loads, node, pod

from kubesched import loadaware
from kubesched.catalogue import full_catalogue
from kubesched.loadaware import PLUGIN, Dynamic, DynamicArgs
from kubesched.loadaware.policy import DEFAULT_POLICY_DOCUMENT
from kubesched.scheduler.cache import Cache
from kubesched.scheduler.config import load_config
from kubesched.scheduler.framework import Catalogue, CycleState, Framework, Handle
from kubesched.scheduler.plugins import in_tree_catalogue

# The KubeSchedulerConfiguration of the founding document, verbatim.
FOUNDING_V1BETA2 = """\
apiVersion: kubescheduler.config.k8s.io/v1beta2
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  #resourceName: crane-scheduler-lock   #默认就是竞争kube-scheduler锁
  resourceLock: leases
  #resourceNamespace: kube-system       #默认锁就是位于kube-system命名空间下
profiles:
  #- schedulerName: local-scheduler
  - schedulerName: default-scheduler #名字设置为defaulte-scheduler
    plugins:
      score:
        enabled:
          - name: Dynamic
            weight: 3
      postBind:
        enabled:
          - name: Dynamic
    pluginConfig:
      - name: Dynamic
        args:
          promeAddr: "http://prometheus.crane-system.svc.cluster.local:9090"
          metricsUpdatePeriodBySeconds: 5m
          clusterName: "cs-test-2"
          policyConfigPath: /etc/kubernetes/policy.yaml
"""
FOUNDING_V1 = FOUNDING_V1BETA2.replace("config.k8s.io/v1beta2", "config.k8s.io/v1")
# The same with Dynamic's Filter enabled too (as crane's shipped configuration does).
WITH_FILTER_V1 = FOUNDING_V1.replace(
    "    plugins:\n", "    plugins:\n      filter:\n        enabled:\n          - name: Dynamic\n"
)


def registry() -> Catalogue:
    return full_catalogue()


ETC_POLICY = "/etc/kubernetes/policy.yaml"
_POLICY_DIR = Path(tempfile.mkdtemp(prefix="kubesched-dynamic-test-"))


def with_default_policy_file(text: str) -> str:
    """``text`` with crane's default policy at the path the founding documents name (it must exist)."""
    file = _POLICY_DIR / "policy.yaml"
    if not file.exists():
        file.write_text(yaml.safe_dump(DEFAULT_POLICY_DOCUMENT))
    return text.replace(ETC_POLICY, str(file))


def framework(text: str, cache: Cache, *, as_is: bool = False) -> Framework:
    text = text if as_is else with_default_policy_file(text)
    profile = load_config(text, catalogue=registry()).profiles[0]
    fw = Framework.from_profile(profile, registry(), Handle(cache=cache), seed=7)
    fw.plugin("Dynamic").clock = lambda: NOW
    return fw


def schedule(fw: Framework, cache: Cache, name: str = "p", **kw: Any) -> Any:
    return fw.schedule(CycleState(), cache.pod_info(pod(name, **kw)), record_scores=True)


def test_definition_and_catalogue() -> None:
    assert PLUGIN.name == "Dynamic" and PLUGIN.args is DynamicArgs
    assert PLUGIN.extension_points == {"filter", "score", "postBind"}  # read off the class
    reg = in_tree_catalogue().extended(PLUGIN)
    assert "Dynamic" in reg and "Dynamic" in full_catalogue() and "Dynamic" not in in_tree_catalogue()
    with pytest.raises(ValueError, match="already registered"):
        reg.extended(PLUGIN)
    assert isinstance(reg.create("Dynamic", None, Handle(cache=Cache())), Dynamic)


@pytest.mark.parametrize("text", [FOUNDING_V1BETA2, FOUNDING_V1], ids=["v1beta2", "v1"])
def test_founding_profile_loads_and_scores_by_load(text: str) -> None:
    if not Path("/etc/kubernetes/policy.yaml").exists():
        # The file the founding document names is absent here: the plugin refuses to start, as crane's does.
        c = cluster(node("a", loads(0.1)))
        with pytest.raises(ValueError, match=r"^Dynamic: policyConfigPath: .*does not exist$"):
            framework(text, c, as_is=True)
    text = with_default_policy_file(text)
    config = load_config(text, catalogue=full_catalogue())
    profile = config.profiles[0]
    assert profile.scheduler_name == "default-scheduler"
    assert profile.plugins.score[-1] == ("Dynamic", 3)
    assert [r.name for r in profile.plugins.post_bind] == ["Dynamic"]
    assert "Dynamic" not in [r.name for r in profile.plugins.filter]
    assert profile.args("Dynamic").metrics_update_period_by_seconds == 300.0

    c = cluster(node("busy", loads(0.6)), node("idle", loads(0.1)), node("mid", loads(0.3)))
    fw = framework(text, c)
    # crane's default policy, from the file.
    assert fw.plugin("Dynamic").policy == loadaware.default_policy()
    result = schedule(fw, c)
    assert result.node == "idle"
    assert {n: s["Dynamic"] for n, s in result.scores.items()} == {"busy": 120, "idle": 270, "mid": 210}


def test_filter_rejects_the_hot_node() -> None:
    c = cluster(node("hot", loads(0.1, **{CPU5: 0.7})), node("cool", loads(0.5)))
    fw = framework(WITH_FILTER_V1, c)
    result = schedule(fw, c)
    assert result.node == "cool"
    assert result.filtered == {"hot": ["Load[cpu_usage_avg_5m] of node[hot] is too high"]}

    alone = cluster(node("hot", loads(0.1, **{CPU5: 0.7})))
    result = schedule(framework(WITH_FILTER_V1, alone), alone)
    assert result.node is None
    assert (
        result.status.message()
        == "0/1 nodes are available: 1 Load[cpu_usage_avg_5m] of node[hot] is too high."
    )
    # A DaemonSet pod is not filtered.
    assert schedule(framework(WITH_FILTER_V1, alone), alone, owner_kind="DaemonSet").node == "hot"


def test_stale_load_passes_the_filter() -> None:
    c = cluster(node("was-hot", {CPU5: crane(0.95, age=8 * 60)}))  # 3m period + 5m: expired
    result = schedule(framework(WITH_FILTER_V1, c), c)
    assert result.node == "was-hot"


def test_score_ordering_with_stale_and_missing_data() -> None:
    c = cluster(
        node("fresh-idle", loads(0.2)),  # 80
        node("stale", loads(0.0, age=3 * 3600 + 300)),  # every value expired: 0
        node("unannotated"),  # 0
        node("half", loads(0.5)),  # 50
    )
    result = schedule(framework(FOUNDING_V1, c), c)
    assert result.node == "fresh-idle"
    dynamic = {n: s["Dynamic"] // 3 for n, s in result.scores.items()}
    assert dynamic == {"fresh-idle": 80, "stale": 0, "unannotated": 0, "half": 50}


def test_hot_value_after_postbind_spreads_a_burst() -> None:
    c = cluster(node("a", loads(0.2)), node("b", loads(0.2)))
    fw = framework(FOUNDING_V1, c)
    first = schedule(fw, c, "web-0")
    other = "b" if first.node == "a" else "a"
    assert first.scores[first.node]["Dynamic"] == first.scores[other]["Dynamic"] == 240
    for i in range(2):  # two replicas bound to the same node within a minute: hot value 1
        fw.run_post_bind(CycleState(), c.pod_info(pod(f"web-{i}")), first.node)
    after = schedule(fw, c, "web-2")
    assert after.node == other
    assert after.scores[first.node]["Dynamic"] == 210 and after.scores[other]["Dynamic"] == 240


def test_shipped_config_with_a_policy_file(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: scheduler.policy.crane.io/v1alpha1\nkind: DynamicSchedulerPolicy\nspec:\n"
        "  syncPolicy: [{name: cpu_usage_avg_5m, period: 1m}]\n"
        "  predicate: [{name: cpu_usage_avg_5m, maxLimitPercent: 0.3}]\n"
        "  priority: [{name: cpu_usage_avg_5m, weight: 1}]\n"
    )
    text = (
        "apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: default-scheduler\n  plugins:\n"
        "    filter:\n      enabled: [{name: Dynamic}]\n"
        "    score:\n      enabled: [{name: Dynamic, weight: 3}]\n"
        f"  pluginConfig:\n  - name: Dynamic\n    args:\n      policyConfigPath: {policy}\n"
    )
    c = cluster(node("a", {CPU5: crane(0.35)}), node("b", {CPU5: crane(0.25, age=359)}))
    result = schedule(framework(text, c), c)
    assert result.filtered == {"a": ["Load[cpu_usage_avg_5m] of node[a] is too high"]}
    assert result.node == "b"
    c.on_node_update(None, node("b", {CPU5: crane(0.25, age=360)}))  # 1m + 5m: now stale, still passes
    assert schedule(framework(text, c), c).node == "b"
