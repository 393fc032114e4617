"""The AMP alerting rules and alert manager definition, checked and evaluated by the real promtool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.k8s.alerting import (
    BURN_RATES,
    XID_DRAIN,
    ModelObjective,
    alert_manager_definition,
    alert_rule_groups,
    rules_document,
)
from gpufarm.k8s.promql import Expression, metric_names, rules_expressions, template_expressions
from tests.promtool import check_rules, test_rules

MODELS = [
    ModelObjective(name="chat", ttft_p99_seconds=2.0),
    ModelObjective(name="batch", ttft_p99_seconds=8.5),
]


def _rules(**kwargs: Any) -> list[dict[str, Any]]:
    groups = alert_rule_groups(MODELS, error_rate_percent=5, **kwargs)
    return [rule for group in groups for rule in group["rules"]]


def _alerts(name: str) -> list[dict[str, Any]]:
    return [r for r in _rules() if r.get("alert") == name]


def test_one_ttft_alert_per_model_at_its_own_objective() -> None:
    exprs = sorted(r["expr"] for r in _alerts("TimeToFirstTokenP99High"))
    assert exprs == [
        "histogram_quantile(0.99, sum by (model, le) (rate(vllm:time_to_first_token_seconds_bucket"
        '{model="batch"}[5m]))) > 8.5',
        "histogram_quantile(0.99, sum by (model, le) (rate(vllm:time_to_first_token_seconds_bucket"
        '{model="chat"}[5m]))) > 2',
    ]


def test_burn_rate_alerts_pair_a_long_and_a_short_window_at_the_workbook_factors() -> None:
    by_name = {r["alert"]: r for r in _rules() if r.get("alert", "").startswith("ErrorBudgetBurn")}
    assert by_name["ErrorBudgetBurnFast"]["expr"] == (
        "model:vllm_request_errors:ratio_rate1h > (14.4 * 0.001) and "
        "model:vllm_request_errors:ratio_rate5m > (14.4 * 0.001)"
    )
    assert [(n, w, s, f) for n, w, s, f, _ in BURN_RATES] == [
        ("fast", "1h", "5m", 14.4),
        ("slow", "6h", "30m", 6.0),
        ("drift", "3d", "6h", 1.0),
    ]
    assert {r["labels"]["severity"] for r in by_name.values()} == {"page", "ticket"}
    recorded = {r["record"] for r in _rules() if "record" in r}
    for name, long, short, _, _ in BURN_RATES:
        assert {
            f"model:vllm_request_errors:ratio_rate{long}",
            f"model:vllm_request_errors:ratio_rate{short}",
        } <= recorded, name


@pytest.mark.parametrize(
    ("models", "error_rate", "message"),
    [
        ([], 5, "'models' must name at least one model, got none"),
        (MODELS, 0, "'error_rate_percent' must be above 0 and at most 100, got 0"),
        (MODELS, 101, "'error_rate_percent' must be above 0 and at most 100, got 101"),
    ],
)
def test_invalid_rule_inputs(models: list[ModelObjective], error_rate: float, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        alert_rule_groups(models, error_rate_percent=error_rate)
    assert str(caught.value) == message


def test_promtool_accepts_the_rules_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(rules_document(alert_rule_groups(MODELS, error_rate_percent=5)), encoding="utf-8")
    result = check_rules(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 19 rules found" in result.stdout + result.stderr


def test_promtool_refuses_a_broken_expression(tmp_path: Path) -> None:
    """The check can fail: promtool parses every expression, so a syntax error is reported."""
    groups = alert_rule_groups(MODELS, error_rate_percent=5)
    groups[0]["rules"][0]["expr"] = "sum by (model (vllm:num_requests_waiting)"
    path = tmp_path / "rules.yml"
    path.write_text(rules_document(groups), encoding="utf-8")
    result = check_rules(path)
    assert result.returncode != 0
    assert "parse error" in result.stdout + result.stderr


def _evaluate(tmp_path: Path, series: list[dict[str, str]], alerts: list[dict[str, Any]]) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_document(alert_rule_groups(MODELS, error_rate_percent=5)), encoding="utf-8")
    tests = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": alerts}],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(tests), encoding="utf-8")
    result = test_rules(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_xid_alert_names_the_node_and_pages_for_a_drain_code(tmp_path: Path) -> None:
    assert 79 in XID_DRAIN
    series = [
        {"series": 'DCGM_FI_DEV_XID_ERRORS{node="ip-10-0-1-7.ec2.internal", gpu="0"}', "values": "0 0 79x5"},
        {"series": 'DCGM_FI_DEV_XID_ERRORS{node="ip-10-0-2-9.ec2.internal", gpu="0"}', "values": "0x7"},
    ]
    critical = {
        "exp_labels": {"severity": "page", "node": "ip-10-0-1-7.ec2.internal"},
        "exp_annotations": {
            "summary": "ip-10-0-1-7.ec2.internal: GPU XID 79, drain and replace the node",
            "description": "Node ip-10-0-1-7.ec2.internal reported XID 79: the GPU cannot be trusted. "
            "Cordon and drain ip-10-0-1-7.ec2.internal; node repair (or the on-call) replaces it.",
        },
    }
    _evaluate(
        tmp_path,
        series,
        [
            {"eval_time": "1m", "alertname": "GpuXidCritical", "exp_alerts": []},
            {"eval_time": "3m", "alertname": "GpuXidCritical", "exp_alerts": [critical]},
        ],
    )


def test_an_application_xid_is_a_ticket_not_a_page(tmp_path: Path) -> None:
    series = [{"series": 'DCGM_FI_DEV_XID_ERRORS{node="n1"}', "values": "13x5"}]
    _evaluate(
        tmp_path,
        series,
        [
            {"eval_time": "2m", "alertname": "GpuXidCritical", "exp_alerts": []},
            {
                "eval_time": "2m",
                "alertname": "GpuXid",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "ticket", "node": "n1"},
                        "exp_annotations": {
                            "summary": "n1: GPU XID 13",
                            "description": "Node n1 reported XID 13; look the code up in NVIDIA's Xid "
                            "catalog (docs/operations.md, On call).",
                        },
                    }
                ],
            },
        ],
    )


def test_queue_depth_alerts_on_the_average_per_replica_after_five_minutes(tmp_path: Path) -> None:
    # Two replicas of chat wait 15 and 9 (average 12 > 10); batch's single replica waits 10 (not above).
    series = [
        {"series": 'vllm:num_requests_waiting{model="chat", pod="chat-a"}', "values": "15x10"},
        {"series": 'vllm:num_requests_waiting{model="chat", pod="chat-b"}', "values": "9x10"},
        {"series": 'vllm:num_requests_waiting{model="batch", pod="batch-a"}', "values": "10x10"},
    ]
    firing = {
        "exp_labels": {"severity": "page", "model": "chat"},
        "exp_annotations": {
            "summary": "chat: more than 10 requests waiting per replica",
            "description": "chat has 12 requests waiting per replica for 5 minutes: more replicas, "
            "or fewer requests.",
        },
    }
    _evaluate(
        tmp_path,
        series,
        [
            {"eval_time": "4m", "alertname": "QueueDepthHigh", "exp_alerts": []},
            {"eval_time": "6m", "alertname": "QueueDepthHigh", "exp_alerts": [firing]},
        ],
    )


def test_error_rate_is_a_percentage_of_finished_requests_and_ignores_aborts(tmp_path: Path) -> None:
    # chat: 10 errors and 90 stops a minute = 10% (> 5%); many aborts do not dilute or add to it.
    series = [
        {"series": 'vllm:request_success_total{model="chat", finished_reason="error"}', "values": "0+10x20"},
        {"series": 'vllm:request_success_total{model="chat", finished_reason="stop"}', "values": "0+90x20"},
        {"series": 'vllm:request_success_total{model="chat", finished_reason="abort"}', "values": "0+500x20"},
    ]
    _evaluate(
        tmp_path,
        series,
        [
            {
                "eval_time": "15m",
                "alertname": "ErrorRateHigh",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "page", "model": "chat"},
                        "exp_annotations": {
                            "summary": "chat: more than 5% of requests fail",
                            "description": "chat ends 10.0% of its requests in an engine error.",
                        },
                    }
                ],
            }
        ],
    )


def test_alert_manager_sends_every_alert_to_the_topic_with_a_region() -> None:
    outer = yaml.safe_load(
        alert_manager_definition(topic_arn="arn:aws:sns:eu-west-1:123456789012:t", region="eu-west-1")
    )
    assert set(outer) == {"alertmanager_config"}
    config = yaml.safe_load(outer["alertmanager_config"])
    assert config["route"]["receiver"] == "sns"
    (receiver,) = config["receivers"]
    assert receiver == {
        "name": "sns",
        "sns_configs": [
            {
                "topic_arn": "arn:aws:sns:eu-west-1:123456789012:t",
                "sigv4": {"region": "eu-west-1"},
                "subject": "[{{ .Status | toUpper }}] {{ .GroupLabels.alertname }}",
            }
        ],
    }


# --------------------------------------------------------------------------- the collector


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("vllm:num_requests_waiting", {"vllm:num_requests_waiting"}),
        ('sum by (model) (rate(a_total{x="y:z", le=~"1.*"}[5m] offset 1h))', {"a_total"}),
        ("x / on (model) group_left (pod) y > bool 2e3", {"x", "y"}),
        ('{__name__="vllm:kv_cache_usage_perc", model="m"}', {"vllm:kv_cache_usage_perc"}),
        ("max without (gpu) (DCGM_FI_DEV_GPU_UTIL) or vector(0)", {"DCGM_FI_DEV_GPU_UTIL"}),
        ('label_replace(up, "a", "$1", "b", "(.*)")', {"up"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_collector_reads_rules_scaled_objects_and_dashboards() -> None:
    rules = rules_document([{"name": "g", "rules": [{"record": "r", "expr": "up"}]}])
    scaled = [
        {
            "kind": "ScaledObject",
            "metadata": {"name": "chat"},
            "spec": {
                "triggers": [{"type": "prometheus", "metadata": {"query": "sum(vllm:num_requests_waiting)"}}]
            },
        },
        {"kind": "Deployment", "metadata": {"name": "chat"}, "spec": {}},
    ]
    dashboard = '{"panels": [{"targets": [{"expr": "avg(DCGM_FI_DEV_GPU_UTIL)"}]}]}'
    template = {
        "Resources": {
            "Rules": {"Type": "AWS::APS::RuleGroupsNamespace", "Properties": {"Data": rules}},
            "Keda": {
                "Type": "Custom::AWSCDK-EKS-KubernetesResource",
                "Properties": {"Manifest": {"Fn::Join": ["", [json.dumps(scaled)]]}},
            },
            "Dash": {
                "Type": "AWS::Grafana::Dashboard",
                "Properties": {"Body": {"Fn::Join": ["", [dashboard]]}},
            },
        }
    }
    assert template_expressions(template) == [
        Expression("Rules: g/r", "up"),
        Expression("Keda: ScaledObject/chat", "sum(vllm:num_requests_waiting)"),
        Expression("Dash: Body", "avg(DCGM_FI_DEV_GPU_UTIL)"),
    ]
    assert list(rules_expressions("x", rules)) == [Expression("x: g/r", "up")]
