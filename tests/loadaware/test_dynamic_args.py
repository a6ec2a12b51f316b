"""DynamicArgs (through the scheduler's configuration loader) and the PromQL helpers behind the new fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kubesched.catalogue import full_catalogue
from kubesched.loadaware.args import DEFAULT_QUERY_TIMEOUT, DynamicArgs
from kubesched.loadaware.promql import (
    InstanceMatch,
    check_template,
    parse_instance_match,
    render_query,
    selectors,
)
from kubesched.scheduler.config import ConfigError, load_config

ARGS_PATH = "profiles[0].pluginConfig[0].args"


def load(args: dict[str, Any], version: str = "v1") -> Any:
    text = yaml.safe_dump(
        {
            "apiVersion": f"kubescheduler.config.k8s.io/{version}",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "plugins": {"score": {"enabled": [{"name": "Dynamic", "weight": 3}]}},
                    "pluginConfig": [{"name": "Dynamic", "args": args}],
                }
            ],
        }
    )
    return load_config(text, catalogue=full_catalogue()).profiles[0].args("Dynamic")


def errors(args: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load(args)
    return [str(e) for e in exc.value.errors]


def test_founding_document_args_are_accepted_unchanged() -> None:
    args = load(
        {
            "promeAddr": "http://prometheus.crane-system.svc.cluster.local:9090",
            "metricsUpdatePeriodBySeconds": "5m",
            "clusterName": "cs-test-2",
            "policyConfigPath": "/etc/kubernetes/policy.yaml",
        },
        version="v1beta2",
    )
    assert isinstance(args, DynamicArgs)
    assert args.prome_addr == "http://prometheus.crane-system.svc.cluster.local:9090"
    assert args.metrics_update_period_by_seconds == 300.0
    assert args.cluster_name == "cs-test-2"
    assert args.policy_config_path == "/etc/kubernetes/policy.yaml"
    # defaults of the additions
    assert args.load_source == "annotations" and args.instance_match == "auto"
    assert args.prome_query_timeout == DEFAULT_QUERY_TIMEOUT == 10.0
    assert args.prome_query_template == "$metric{$selector} / 100"


@pytest.mark.parametrize(
    ("given_", "seconds"), [("5m", 300.0), (300, 300.0), ("300", 300.0), (2.5, 2.5), ("1m30s", 90.0)]
)
def test_update_period_is_a_duration_or_seconds(given_: Any, seconds: float) -> None:
    assert load({"metricsUpdatePeriodBySeconds": given_}).metrics_update_period_by_seconds == seconds


@pytest.mark.parametrize("bad", ["0", 0, -5, "5x", True, "-1m", [5]])
def test_bad_update_periods(bad: Any) -> None:
    (error,) = errors({"metricsUpdatePeriodBySeconds": bad})
    assert error.startswith(f"{ARGS_PATH}.metricsUpdatePeriodBySeconds: Invalid value")


def test_no_plugin_config_gives_default_args() -> None:
    text = (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins:\n    score:\n      enabled: [{name: Dynamic, weight: 3}]\n"
    )
    args = load_config(text, catalogue=full_catalogue()).profiles[0].args("Dynamic")
    assert args == DynamicArgs()
    assert args.policy_config_path is None


def test_all_additions() -> None:
    args = load(
        {
            "promeAddr": "https://prom.example:9090",
            "loadSource": "prometheus",
            "annotationTimeZone": "UTC",
            "promeBasicAuth": {"username": "u", "passwordFile": "/secrets/p"},
            "promeCAFile": "/etc/ca.pem",
            "promeInsecureSkipVerify": True,
            "promeQueryTimeout": "30s",
            "promeQueryTemplate": "avg_over_time($metric{$selector}[5m])",
            "promeQueryTemplates": {"cpu_usage_avg_5m": "$metric{$selector}"},
            "instanceMatch": "label:node",
        }
    )
    assert args.load_source == "prometheus" and args.annotation_time_zone == "UTC"
    assert args.prome_basic_auth.username == "u" and args.prome_basic_auth.password_file == "/secrets/p"
    assert args.prome_ca_file == "/etc/ca.pem" and args.prome_insecure_skip_verify is True
    assert args.prome_query_timeout == 30.0
    assert args.prome_query_templates == {"cpu_usage_avg_5m": "$metric{$selector}"}


def test_secrets_stay_out_of_repr_and_errors() -> None:
    args = load({"promeBearerToken": "s3cret-token"})
    assert args.prome_bearer_token.get_secret_value() == "s3cret-token"
    assert "s3cret-token" not in repr(args)
    problems = errors({"promeBasicAuth": {"username": "u", "password": "hunter2", "passwordFile": "/p"}})
    assert problems == [
        f"{ARGS_PATH}.promeBasicAuth: Forbidden: give exactly one of password and passwordFile"
    ]
    assert "hunter2" not in " ".join(problems)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"policyConfigPaht": "/x"}, f"{ARGS_PATH}.policyConfigPaht: Unknown field"),
        (
            {"promeAddr": "prometheus:9090"},
            f'{ARGS_PATH}.promeAddr: Invalid value: "prometheus:9090": must be',
        ),
        ({"loadSource": "magic"}, f'{ARGS_PATH}.loadSource: Unsupported value: "magic"'),
        ({"loadSource": "prometheus"}, f"{ARGS_PATH}.promeAddr: Required value"),
        (
            {"annotationTimeZone": "Mars/Olympus"},
            f'{ARGS_PATH}.annotationTimeZone: Invalid value: "Mars/Olympus"',
        ),
        (
            {"promeBearerToken": "t", "promeBearerTokenFile": "/t"},
            f"{ARGS_PATH}.promeBearerTokenFile: Forbidden",
        ),
        (
            {"promeBearerTokenFile": "/t", "promeBasicAuth": {"username": "u", "password": "p"}},
            f"{ARGS_PATH}.promeBasicAuth: Forbidden: cannot be combined with a bearer token",
        ),
        (
            {"instanceMatch": "hostname"},
            f'{ARGS_PATH}.instanceMatch: Invalid value: "hostname": must be one of',
        ),
        ({"instanceMatch": "label:1bad"}, f'{ARGS_PATH}.instanceMatch: Invalid value: "label:1bad"'),
        ({"promeQueryTemplate": "$metrc{$selector}"}, f"{ARGS_PATH}.promeQueryTemplate: Invalid value"),
        ({"promeQueryTemplates": {"m": "up"}}, f"{ARGS_PATH}.promeQueryTemplates[m]: Invalid value"),
        ({"promeQueryTimeout": "0s"}, f"{ARGS_PATH}.promeQueryTimeout: Invalid value"),
        ({"promeInsecureSkipVerify": "yes"}, f"{ARGS_PATH}.promeInsecureSkipVerify: Invalid value"),
    ],
)
def test_arg_errors(args: dict[str, Any], expected: str) -> None:
    problems = errors(args)
    assert any(p.startswith(expected) for p in problems), problems


def test_an_invalid_policy_file_fails_the_configuration(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: scheduler.policy.crane.io/v1alpha1\nkind: DynamicSchedulerPolicy\n"
        "spec:\n  predicate:\n  - {name: cpu_usage_avg_5m, maxLimitPecent: 65}\n"
    )
    (problem,) = errors({"policyConfigPath": str(policy)})
    assert problem.startswith(
        f'{ARGS_PATH}.policyConfigPath: Invalid value: "{policy}": invalid DynamicSchedulerPolicy'
    )
    assert "spec.predicate[0].maxLimitPecent: Invalid value: 65" in problem


def test_a_missing_policy_file_is_not_a_configuration_error(tmp_path: Path) -> None:
    assert load({"policyConfigPath": str(tmp_path / "nowhere.yaml")}).policy_config_path.endswith(
        "nowhere.yaml"
    )


# --- PromQL helpers -----------------------------------------------------------------------------------------


def test_auto_matching_follows_cranes_order() -> None:
    assert selectors(InstanceMatch("auto"), "node-1", "10.0.0.1") == [
        'instance="10.0.0.1"',
        'instance=~"10\\\\.0\\\\.0\\\\.1:[0-9]+"',
        'instance="node-1"',
    ]
    # no InternalIP: crane uses the node name as the address
    assert selectors(parse_instance_match("auto"), "node-1") == [
        'instance="node-1"',
        'instance=~"node-1:[0-9]+"',
    ]


def test_other_modes_and_cluster() -> None:
    assert selectors(parse_instance_match("ip"), "n", "10.0.0.1", "prod") == [
        'instance="10.0.0.1",cluster="prod"'
    ]
    assert selectors(parse_instance_match("nodename"), "n", "10.0.0.1") == ['instance="n"']
    assert selectors(parse_instance_match("label:node"), "n", "10.0.0.1") == ['node="n"']
    assert selectors(parse_instance_match("ip:port"), "n", "fd00::1") == [
        'instance=~"\\\\[fd00::1\\\\]:[0-9]+"'
    ]
    assert selectors(parse_instance_match("nodename"), 'we"ird', "") == ['instance="we\\"ird"']


def test_render_query() -> None:
    (selector,) = selectors(parse_instance_match("ip"), "n", "10.0.0.1")
    assert render_query("$metric{$selector} / 100", "cpu_usage_avg_5m", selector) == (
        'cpu_usage_avg_5m{instance="10.0.0.1"} / 100'
    )
    assert render_query('${metric}_x{node="$node",c="$cluster"} $$', "m", "", node="n", cluster="c") == (
        'm_x{node="n",c="c"} $'
    )


@pytest.mark.parametrize("template", ["up", "$metric{$nope}", "$metric{$", "${metric"])
def test_bad_templates(template: str) -> None:
    with pytest.raises(ValueError):
        check_template(template)


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=30))
def test_selector_values_are_quoted_safely(name: str) -> None:
    (sel,) = selectors(parse_instance_match("nodename"), name)
    body = sel[len('instance="') : -1]
    # every quote inside is escaped, and unescaping gives the name back
    assert body.replace('\\"', "").count('"') == 0
    assert body.replace('\\"', '"').replace("\\\\", "\\") == name
