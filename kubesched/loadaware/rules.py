"""crane-scheduler's Prometheus recording rules, as data.

crane's README asks Prometheus to record, from node-exporter's series, the node load metrics its annotator
reads (values in percent, 0-100):

    cpu_usage_active      100 - avg by (instance) (irate(node_cpu_seconds_total{mode="idle"}[30s])) * 100
    mem_usage_active      100 * (1 - MemAvailable / MemTotal)
    cpu_usage_avg_5m      avg_over_time(cpu_usage_active[5m])        and mem_usage_avg_5m likewise
    cpu_usage_max_avg_1h  max_over_time(cpu_usage_avg_5m[1h])        and the _1d, mem_ variants likewise

The groups and their intervals (30s, 1m, 5m) are crane's. ``rules_yaml(interval=1)`` evaluates every group
each second instead, so a test sees the whole chain within seconds. Note ``irate(...[30s])`` needs two scrapes
within 30 s: scrape at least every 15 s (crane's README: "less than 30 seconds").
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

IDLE_RATE = 'irate(node_cpu_seconds_total{mode="idle"}[30s])'


@dataclass(frozen=True, slots=True)
class RecordingRule:
    record: str
    expr: str


@dataclass(frozen=True, slots=True)
class RuleGroup:
    name: str
    interval: float  # seconds
    rules: tuple[RecordingRule, ...]


CRANE_RULE_GROUPS: tuple[RuleGroup, ...] = (
    RuleGroup(
        "cpu_mem_usage_active",
        30,
        (
            RecordingRule("cpu_usage_active", f"100 - (avg by (instance) ({IDLE_RATE}) * 100)"),
            RecordingRule(
                "mem_usage_active", "100*(1-node_memory_MemAvailable_bytes/node_memory_MemTotal_bytes)"
            ),
        ),
    ),
    RuleGroup(
        "cpu-usage-1m", 60, (RecordingRule("cpu_usage_avg_5m", "avg_over_time(cpu_usage_active[5m])"),)
    ),
    RuleGroup(
        "cpu-usage-5m",
        300,
        (
            RecordingRule("cpu_usage_max_avg_1h", "max_over_time(cpu_usage_avg_5m[1h])"),
            RecordingRule("cpu_usage_max_avg_1d", "max_over_time(cpu_usage_avg_5m[1d])"),
        ),
    ),
    RuleGroup(
        "mem-usage-1m", 60, (RecordingRule("mem_usage_avg_5m", "avg_over_time(mem_usage_active[5m])"),)
    ),
    RuleGroup(
        "mem-usage-5m",
        300,
        (
            RecordingRule("mem_usage_max_avg_1h", "max_over_time(mem_usage_avg_5m[1h])"),
            RecordingRule("mem_usage_max_avg_1d", "max_over_time(mem_usage_avg_5m[1d])"),
        ),
    ),
)

# Every series the rules record, in rule order.
RECORDED_METRICS: tuple[str, ...] = tuple(r.record for g in CRANE_RULE_GROUPS for r in g.rules)
# The series the annotator syncs (the policy's metric names).
LOAD_METRICS: tuple[str, ...] = tuple(m for m in RECORDED_METRICS if not m.endswith("_active"))


def duration_text(seconds: float) -> str:
    """A Prometheus duration string ("30s", "1m", "1500ms")."""
    ms = round(seconds * 1000)
    if ms <= 0:
        raise ValueError(f"interval must be positive, got {seconds}")
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def rules_document(interval: float | None = None) -> dict[str, object]:
    """The rule file as a mapping; ``interval`` (seconds) replaces every group's own interval."""
    return {
        "groups": [
            {
                "name": g.name,
                "interval": duration_text(g.interval if interval is None else interval),
                "rules": [{"record": r.record, "expr": r.expr} for r in g.rules],
            }
            for g in CRANE_RULE_GROUPS
        ]
    }


def rules_yaml(interval: float | None = None) -> str:
    """The rule file Prometheus loads (``rule_files:``)."""
    return yaml.safe_dump(rules_document(interval), sort_keys=False, width=200)


__all__ = [
    "CRANE_RULE_GROUPS",
    "LOAD_METRICS",
    "RECORDED_METRICS",
    "RecordingRule",
    "RuleGroup",
    "duration_text",
    "rules_document",
    "rules_yaml",
]
