"""DynamicSchedulerPolicy: crane's default, crane's spelling, errors naming the field, duration parsing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.loadaware.policy import (
    API_VERSION,
    DEFAULT_POLICY_DOCUMENT,
    DEFAULT_POLICY_PATH,
    KIND,
    PolicyError,
    default_policy,
    load_policy,
    parse_policy,
    policy_for,
)
from kubesched.scheduler.config import DurationError, parse_duration

# crane's deploy/manifests/dynamic/policy.yaml, as shipped (comments included).
CRANE_POLICY_YAML = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy:
    ##cpu usage
    - name: cpu_usage_avg_5m
      period: 3m
    - name: cpu_usage_max_avg_1h
      period: 15m
    - name: cpu_usage_max_avg_1d
      period: 3h
    ##memory usage
    - name: mem_usage_avg_5m
      period: 3m
    - name: mem_usage_max_avg_1h
      period: 15m
    - name: mem_usage_max_avg_1d
      period: 3h

  predicate:
    ##cpu usage
    - name: cpu_usage_avg_5m
      maxLimitPecent: 0.65
    - name: cpu_usage_max_avg_1h
      maxLimitPecent: 0.75
    ##memory usage
    - name: mem_usage_avg_5m
      maxLimitPecent: 0.65
    - name: mem_usage_max_avg_1h
      maxLimitPecent: 0.75

  priority:
    ##cpu usage
    - name: cpu_usage_avg_5m
      weight: 0.2
    - name: cpu_usage_max_avg_1h
      weight: 0.3
    - name: cpu_usage_max_avg_1d
      weight: 0.5
    ##memory usage
    - name: mem_usage_avg_5m
      weight: 0.2
    - name: mem_usage_max_avg_1h
      weight: 0.3
    - name: mem_usage_max_avg_1d
      weight: 0.5

  hotValue:
    - timeRange: 5m
      count: 5
    - timeRange: 1m
      count: 2
"""


def doc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "spec": spec}


def fields(exc: pytest.ExceptionInfo[PolicyError]) -> list[str]:
    return [e.field for e in exc.value.errors]


def test_default_policy_is_cranes() -> None:
    spec = default_policy().spec
    assert [(s.name, s.period) for s in spec.sync_policy] == [
        ("cpu_usage_avg_5m", 180.0),
        ("cpu_usage_max_avg_1h", 900.0),
        ("cpu_usage_max_avg_1d", 10800.0),
        ("mem_usage_avg_5m", 180.0),
        ("mem_usage_max_avg_1h", 900.0),
        ("mem_usage_max_avg_1d", 10800.0),
    ]
    assert [(p.name, p.max_limit_percent) for p in spec.predicate] == [
        ("cpu_usage_avg_5m", 0.65),
        ("cpu_usage_max_avg_1h", 0.75),
        ("mem_usage_avg_5m", 0.65),
        ("mem_usage_max_avg_1h", 0.75),
    ]
    assert [(p.name, p.weight) for p in spec.priority] == [
        ("cpu_usage_avg_5m", 0.2),
        ("cpu_usage_max_avg_1h", 0.3),
        ("cpu_usage_max_avg_1d", 0.5),
        ("mem_usage_avg_5m", 0.2),
        ("mem_usage_max_avg_1h", 0.3),
        ("mem_usage_max_avg_1d", 0.5),
    ]
    assert [(h.time_range, h.count) for h in spec.hot_value] == [(300.0, 5), (60.0, 2)]
    assert default_policy().warnings == ()


def test_cranes_shipped_file_equals_the_default() -> None:
    policy = parse_policy(CRANE_POLICY_YAML, source="policy.yaml")
    assert policy == default_policy()
    assert policy.active_duration("cpu_usage_avg_5m") == 480.0
    assert policy.active_duration("mem_usage_max_avg_1h") == 1200.0
    assert policy.active_duration("cpu_usage_max_avg_1d") == 3 * 3600 + 300
    assert policy.active_duration("gpu_usage") is None
    assert policy.max_hot_value_range == 300.0
    assert policy.metrics[0] == "cpu_usage_avg_5m" and len(policy.metrics) == 6


def test_both_spellings_of_the_limit() -> None:
    crane = parse_policy(doc(predicate=[{"name": "a", "maxLimitPecent": 0.6}]))
    correct = parse_policy(doc(predicate=[{"name": "a", "maxLimitPercent": 0.6}]))
    both = parse_policy(doc(predicate=[{"name": "a", "maxLimitPecent": 0.6, "maxLimitPercent": 0.6}]))
    assert crane.spec == correct.spec == both.spec
    assert crane.spec.predicate[0].max_limit_percent == 0.6
    with pytest.raises(PolicyError) as exc:
        parse_policy(doc(predicate=[{"name": "a", "maxLimitPecent": 0.6, "maxLimitPercent": 0.7}]))
    assert fields(exc) == ["spec.predicate[0]"]
    assert "disagree" in str(exc.value)


def test_errors_name_each_field_as_written() -> None:
    bad = doc(
        syncPolicy=[
            {"name": "a", "period": "3x"},
            {"name": "b", "period": 60},
            {"name": "c", "period": "0s"},
        ],
        predicate=[{"name": "a", "maxLimitPecent": 65}, {"name": "b", "maxLimitPercent": -0.1}],
        priority=[{"name": "a", "weight": -1}, {"name": "b", "wieght": 1}],
        hotValue=[{"timeRange": "5m", "count": 0}, {"timeRange": "1m"}],
    )
    with pytest.raises(PolicyError) as exc:
        parse_policy(bad, source="/etc/kubernetes/policy.yaml")
    assert fields(exc) == [
        "spec.syncPolicy[0].period",
        "spec.syncPolicy[1].period",
        "spec.syncPolicy[2].period",
        "spec.predicate[0].maxLimitPecent",
        "spec.predicate[1].maxLimitPercent",
        "spec.priority[0].weight",
        "spec.priority[1].weight",
        "spec.priority[1].wieght",
        "spec.hotValue[0].count",
        "spec.hotValue[1].count",
    ]
    text = str(exc.value)
    assert text.startswith("invalid DynamicSchedulerPolicy (/etc/kubernetes/policy.yaml):")
    assert 'spec.syncPolicy[0].period: Invalid value: "3x": time: unknown unit "x" in duration "3x"' in text
    assert 'must be a duration string such as "3m"' in text
    assert "spec.predicate[0].maxLimitPecent: Invalid value: 65: must be in [0, 1]" in text
    assert "spec.priority[1].wieght: Unknown field" in text


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"kind": KIND, "spec": {}}, ["apiVersion"]),
        ({"apiVersion": "v1", "kind": KIND, "spec": {}}, ["apiVersion"]),
        ({"apiVersion": API_VERSION, "kind": "Policy", "spec": {}}, ["kind"]),
        ({"apiVersion": API_VERSION, "kind": KIND}, ["spec"]),
        ({"apiVersion": API_VERSION, "kind": KIND, "spec": {}, "extra": 1}, ["extra"]),
        (doc(syncPolicy=[{"name": "", "period": "1m"}]), ["spec.syncPolicy[0].name"]),
        (
            doc(syncPolicy=[{"name": "a", "period": "1m"}, {"name": "a", "period": "2m"}]),
            ["spec.syncPolicy[1].name"],
        ),
        (doc(priority=[{"name": "a", "weight": "0.2"}]), ["spec.priority[0].weight"]),
        (doc(priority=[{"name": "a", "weight": True}]), ["spec.priority[0].weight"]),
        (doc(hotValue=[{"timeRange": "-1m", "count": 1}]), ["spec.hotValue[0].timeRange"]),
        (doc(hotValue=[{"timeRange": "1m", "count": 1.5}]), ["spec.hotValue[0].count"]),
        (doc(predicate="cpu"), ["spec.predicate"]),
        (doc(predicate=[{"name": f"m{i}", "maxLimitPecent": 0.5} for i in range(33)]), ["spec.predicate"]),
    ],
)
def test_more_errors(document: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(PolicyError) as exc:
        parse_policy(document)
    assert fields(exc) == expected


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "key: [unclosed\n"])
def test_not_a_policy_document(text: str) -> None:
    with pytest.raises(PolicyError, match="Malformed document"):
        parse_policy(text)


def test_empty_sections_and_null_lists() -> None:
    policy = parse_policy(f"apiVersion: {API_VERSION}\nkind: {KIND}\nspec:\n  predicate:\n  priority: []\n")
    assert policy.spec.predicate == () and policy.spec.priority == () and policy.metrics == ()
    assert policy.max_hot_value_range == 0.0


def test_metadata_is_allowed() -> None:
    assert parse_policy({**doc(), "metadata": {"name": "p"}}).spec.sync_policy == ()


def test_warnings_for_what_crane_silently_skips() -> None:
    policy = parse_policy(
        doc(
            syncPolicy=[{"name": "a", "period": "1m"}],
            predicate=[{"name": "a", "maxLimitPecent": 0}, {"name": "b", "maxLimitPecent": 0.5}],
            priority=[{"name": "c", "weight": 0}],
        )
    )
    assert len(policy.warnings) == 4
    assert "spec.predicate[0]: 'a' has limit 0" in policy.warnings[0]
    assert "spec.predicate[1]: 'b' has no syncPolicy period" in policy.warnings[1]
    assert "spec.priority[0]: 'c' has no syncPolicy period" in policy.warnings[2]
    assert "all weights are 0" in policy.warnings[3]


# --- files --------------------------------------------------------------------------------------------------


def test_load_policy_from_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(CRANE_POLICY_YAML)
    policy = load_policy(path)
    assert policy == default_policy() and policy.source == str(path)
    with pytest.raises(PolicyError, match="No such file"):
        load_policy(tmp_path / "missing.yaml")


def test_policy_for_refuses_a_named_missing_file_and_defaults_only_when_none_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # One rule for the scheduler's Dynamic plugin and the annotator (crane's both refuse to start without it).
    missing = tmp_path / "policy.yaml"
    with pytest.raises(PolicyError) as info:
        policy_for(str(missing))
    assert info.value.one_line() == (
        f'invalid DynamicSchedulerPolicy {missing}: Invalid value: "{missing}": '
        "the DynamicSchedulerPolicy file does not exist"
    )
    if not Path(DEFAULT_POLICY_PATH).exists():
        assert policy_for(None) == default_policy()
    custom = tmp_path / "custom.yaml"
    custom.write_text(CRANE_POLICY_YAML.replace("maxLimitPecent: 0.65", "maxLimitPecent: 0.5"))
    assert policy_for(str(custom)).spec.predicate[0].max_limit_percent == 0.5
    custom.write_text(CRANE_POLICY_YAML.replace("count: 5", "count: 0"))
    with pytest.raises(PolicyError, match=r"spec.hotValue\[0\].count"):
        policy_for(str(custom))


def test_default_document_is_not_shared_state() -> None:
    before = repr(DEFAULT_POLICY_DOCUMENT)
    default_policy()
    assert repr(DEFAULT_POLICY_DOCUMENT) == before


# --- durations (hypothesis) ---------------------------------------------------------------------------------

_PARTS = st.tuples(st.integers(0, 48), st.integers(0, 120), st.integers(0, 7200)).filter(any)


def _go(h: int, m: int, s: int) -> str:
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


@given(_PARTS, _PARTS)
def test_durations_parse_to_seconds(sync: tuple[int, int, int], hot: tuple[int, int, int]) -> None:
    policy = parse_policy(
        doc(
            syncPolicy=[{"name": "m", "period": _go(*sync)}],
            hotValue=[{"timeRange": _go(*hot), "count": 1}],
        )
    )
    seconds = sync[0] * 3600 + sync[1] * 60 + sync[2]
    assert policy.spec.sync_policy[0].period == seconds
    assert policy.active_duration("m") == seconds + 300
    assert policy.spec.hot_value[0].time_range == hot[0] * 3600 + hot[1] * 60 + hot[2]


@given(st.sampled_from(["1.5h", "90m", "5400s", "1h30m", "1h29m60s", "5400000ms"]))
def test_equivalent_spellings(text: str) -> None:
    assert parse_policy(doc(syncPolicy=[{"name": "m", "period": text}])).spec.sync_policy[0].period == 5400


@given(st.text(max_size=12))
def test_any_period_text_parses_or_names_the_field(text: str) -> None:
    try:
        expected = parse_duration(text)
    except DurationError:
        expected = None
    try:
        policy = parse_policy(doc(syncPolicy=[{"name": "m", "period": text}]))
    except PolicyError as exc:
        assert [e.field for e in exc.errors] == ["spec.syncPolicy[0].period"]
        assert expected is None or expected <= 0
        return
    assert expected is not None and expected > 0
    assert policy.spec.sync_policy[0].period == expected


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_limits_outside_zero_one_are_rejected(limit: float) -> None:
    try:
        policy = parse_policy(doc(predicate=[{"name": "m", "maxLimitPecent": limit}]))
    except PolicyError as exc:
        assert not 0 <= limit <= 1
        assert [e.field for e in exc.errors] == ["spec.predicate[0].maxLimitPecent"]
        return
    assert policy.spec.predicate[0].max_limit_percent == limit
