"""/configz's document: the effective configuration, which loads back into the same configuration."""

from __future__ import annotations

import yaml

from kubesched.catalogue import full_catalogue
from kubesched.scheduler.config import load_config
from kubesched.scheduler.config.serialize import effective_document

MOST_ALLOCATED = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false, leaseDuration: 90s}
profiles:
- schedulerName: packer
  percentageOfNodesToScore: 40
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}]
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
- schedulerName: default-scheduler
"""


def test_configz_shows_the_scoring_strategy_and_loads_back() -> None:
    catalogue = full_catalogue()
    config = load_config(MOST_ALLOCATED, catalogue=catalogue)
    doc = effective_document(config)
    packer = doc["profiles"][0]
    fit = next(c["args"] for c in packer["pluginConfig"] if c["name"] == "NodeResourcesFit")
    assert fit["scoringStrategy"]["type"] == "MostAllocated"
    assert "NodeResourcesBalancedAllocation" not in [e["name"] for e in packer["plugins"]["score"]["enabled"]]
    assert packer["percentageOfNodesToScore"] == 40
    assert doc["leaderElection"]["leaseDuration"] == "1m30s"
    # The document is a valid configuration whose meaning is the same (idempotent through /configz).
    again = load_config(yaml.safe_dump(doc), catalogue=catalogue)
    assert again.profiles == config.profiles
    assert effective_document(again) == doc
