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
    BedrockSpend,
    FallbackModel,
    GatewayObjective,
    ModelObjective,
    alert_manager_definition,
    alert_rule_groups,
    gateway_objective,
    rules_document,
)
from gpufarm.k8s.promql import Expression, metric_names, rules_expressions, template_expressions
from tests.promtool import check_rules, test_rules
from tests.unit.factories import make_production, make_tier

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


GATEWAY = GatewayObjective(
    fallback_rate_percent=5,
    bedrock_spend_per_hour=20,
    models=(
        FallbackModel(name="llama", api_name="meta-llama/Llama-3.3-70B-Instruct"),
        FallbackModel(name="chat", api_name="chat-small"),
    ),
    spend=(
        BedrockSpend(
            model_name="meta-llama/Llama-3.3-70B-Instruct", input_per_1k=0.00072, output_per_1k=0.00072
        ),
        BedrockSpend(model_name="chat-small", input_per_1k=0.00022, output_per_1k=0.00022),
    ),
)
"""Two models with a Bedrock fallback at the shipped Llama 3.3 70B and 3.1 8B prices ($ per 1k tokens)."""
LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
TOKENS = "gpufarm_gateway_bedrock_tokens_total"


def _evaluate_gateway(
    tmp_path: Path,
    series: list[dict[str, str]],
    alerts: list[dict[str, Any]],
    gateway: GatewayObjective = GATEWAY,
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(
        rules_document(alert_rule_groups(MODELS, error_rate_percent=5, gateway=gateway)), encoding="utf-8"
    )
    tests = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": alerts}],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(tests), encoding="utf-8")
    result = test_rules(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_gateway_group_exists_only_with_a_gateway_objective() -> None:
    assert "gpufarm-gateway" not in {g["name"] for g in alert_rule_groups(MODELS, error_rate_percent=5)}
    groups = alert_rule_groups(MODELS, error_rate_percent=5, gateway=GATEWAY)
    (gateway,) = [g for g in groups if g["name"] == "gpufarm-gateway"]
    # One fallback-rate alert per model with a Bedrock fallback, sorted by name, then the spend.
    assert [(r["alert"], r["labels"].get("model")) for r in gateway["rules"]] == [
        ("FallbackRateHigh", "chat"),
        ("FallbackRateHigh", "llama"),
        ("BedrockSpendHigh", None),
    ]
    # No priced Bedrock model: the fallback rate only.
    unpriced = GatewayObjective(fallback_rate_percent=5, bedrock_spend_per_hour=20, models=GATEWAY.models)
    (gateway,) = [
        g
        for g in alert_rule_groups(MODELS, error_rate_percent=5, gateway=unpriced)
        if g["name"] == "gpufarm-gateway"
    ]
    assert [r["alert"] for r in gateway["rules"]] == ["FallbackRateHigh", "FallbackRateHigh"]
    # No model falls back to Bedrock: no gateway group at all (an empty group is noise).
    none = GatewayObjective(fallback_rate_percent=5, bedrock_spend_per_hour=20)
    assert "gpufarm-gateway" not in {
        g["name"] for g in alert_rule_groups(MODELS, error_rate_percent=5, gateway=none)
    }


@pytest.mark.parametrize(
    ("gateway", "message"),
    [
        (
            GatewayObjective(fallback_rate_percent=0, bedrock_spend_per_hour=20),
            "'fallback_rate_percent' must be above 0 and at most 100, got 0",
        ),
        (
            GatewayObjective(fallback_rate_percent=101, bedrock_spend_per_hour=20),
            "'fallback_rate_percent' must be above 0 and at most 100, got 101",
        ),
        (
            GatewayObjective(fallback_rate_percent=5, bedrock_spend_per_hour=0),
            "'bedrock_spend_per_hour' must be above 0, got 0",
        ),
    ],
)
def test_invalid_gateway_objective(gateway: GatewayObjective, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        alert_rule_groups(MODELS, error_rate_percent=5, gateway=gateway)
    assert str(caught.value) == message


def test_promtool_accepts_the_rules_file_with_the_gateway_alerts(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(
        rules_document(alert_rule_groups(MODELS, error_rate_percent=5, gateway=GATEWAY)), encoding="utf-8"
    )
    result = check_rules(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 22 rules found" in result.stdout + result.stderr


def _answers(series: str, labels: str, per_minute: int) -> dict[str, str]:
    return {"series": f"{series}{{{labels}}}", "values": f"0+{per_minute}x40"}


VLLM_FINISHED = "vllm:request_success_total"
RESPONSES = "gpufarm_gateway_responses_total"


def test_fallback_rate_counts_every_answer_of_the_model_on_either_route(tmp_path: Path) -> None:
    """Bedrock's answers over all of a model's answers: vLLM's own (both routes) plus Bedrock's."""
    series = [
        # llama: vLLM finishes 90 a minute on two replicas (60 of them on its own route, the
        # gateway never sees those); the gateway answers 30 from vLLM (already in vLLM's 90)
        # and 10 from Bedrock, on two pods. Bedrock's share: 10 / (90 + 10) = 10%, above 5%.
        _answers(VLLM_FINISHED, 'model="llama",pod="vllm-llama-a",finished_reason="stop"', 40),
        _answers(VLLM_FINISHED, 'model="llama",pod="vllm-llama-b",finished_reason="length"', 50),
        # Aborts are the client's doing, not an answer: left out of the denominator.
        _answers(VLLM_FINISHED, 'model="llama",pod="vllm-llama-b",finished_reason="abort"', 400),
        _answers(RESPONSES, f'model_name="{LLAMA}",backend="vllm",pod="gw-a"', 30),
        _answers(RESPONSES, f'model_name="{LLAMA}",backend="bedrock",pod="gw-a"', 5),
        _answers(RESPONSES, f'model_name="{LLAMA}",backend="bedrock",pod="gw-b"', 5),
        # chat: its clients send the gateway only the load balancer's refusals, so every gateway
        # answer is Bedrock's (100% of the gateway's), but vLLM finishes 98 a minute on its
        # route: Bedrock's share of the model's answers is 2 / 100 = 2%, below 5%. No alert.
        _answers(VLLM_FINISHED, 'model="chat",pod="vllm-chat-a",finished_reason="stop"', 98),
        _answers(RESPONSES, 'model_name="chat-small",backend="bedrock",pod="gw-a"', 2),
        _answers(RESPONSES, 'model_name="chat-small",backend="vllm",pod="gw-a"', 0),
    ]
    firing = {
        "exp_labels": {"severity": "ticket", "model": "llama", "model_name": LLAMA},
        "exp_annotations": {
            "summary": "llama: Bedrock answers more than 5% of requests",
            "description": "llama: Amazon Bedrock answered 10.0% of its requests over 15m, for 15m: "
            "vLLM is down, saturated or failing.",
        },
    }
    _evaluate_gateway(
        tmp_path,
        series,
        [
            # Above the threshold from the first minutes, but not yet for 15 minutes.
            {"eval_time": "10m", "alertname": "FallbackRateHigh", "exp_alerts": []},
            {"eval_time": "30m", "alertname": "FallbackRateHigh", "exp_alerts": [firing]},
        ],
    )


def test_fallback_rate_of_a_model_whose_replicas_never_answered_is_100_percent(tmp_path: Path) -> None:
    """A model parked at zero (or down since start) has no vLLM series: Bedrock is all of it."""
    series = [
        _answers(RESPONSES, 'model_name="chat-small",backend="bedrock",pod="gw-a"', 3),
        _answers(RESPONSES, 'model_name="chat-small",backend="vllm",pod="gw-a"', 0),
    ]
    firing = {
        "exp_labels": {"severity": "ticket", "model": "chat", "model_name": "chat-small"},
        "exp_annotations": {
            "summary": "chat: Bedrock answers more than 5% of requests",
            "description": "chat: Amazon Bedrock answered 100.0% of its requests over 15m, for 15m: "
            "vLLM is down, saturated or failing.",
        },
    }
    _evaluate_gateway(
        tmp_path, series, [{"eval_time": "30m", "alertname": "FallbackRateHigh", "exp_alerts": [firing]}]
    )


def test_no_fallback_rate_alert_while_nothing_is_answered(tmp_path: Path) -> None:
    """The gateway's series start at 0: 0 / 0 is no value, not an alert."""
    series = [
        {"series": f'{RESPONSES}{{model_name="chat-small",backend="bedrock",pod="gw-a"}}', "values": "0x40"},
        {"series": f'{RESPONSES}{{model_name="chat-small",backend="vllm",pod="gw-a"}}', "values": "0x40"},
    ]
    _evaluate_gateway(
        tmp_path, series, [{"eval_time": "30m", "alertname": "FallbackRateHigh", "exp_alerts": []}]
    )


def test_bedrock_spend_alerts_above_the_dollars_per_hour(tmp_path: Path) -> None:
    # LLAMA: 500,000 input tokens a minute = 30 M an hour x $0.00072 per 1k = $21.60 an hour;
    # chat-small: 100,000 output tokens a minute = 6 M an hour x $0.00022 per 1k = $1.32. Total $22.92.
    series = [
        {
            "series": f'{TOKENS}{{model_name="{LLAMA}",direction="input",pod="gw-a"}}',
            "values": "0+500000x120",
        },
        {
            "series": f'{TOKENS}{{model_name="{LLAMA}",direction="output",pod="gw-a"}}',
            "values": "0x120",
        },
        {
            "series": f'{TOKENS}{{model_name="chat-small",direction="output",pod="gw-a"}}',
            "values": "0+100000x120",
        },
    ]
    firing = {
        "exp_labels": {"severity": "ticket"},
        "exp_annotations": {
            "summary": "Bedrock fallback spend above $20 per hour",
            "description": "The gateway's Bedrock answers cost $22.92 over the last hour (on-demand list "
            "prices), above $20, for 15 minutes.",
        },
    }
    _evaluate_gateway(
        tmp_path,
        series,
        [
            {"eval_time": "90m", "alertname": "BedrockSpendHigh", "exp_alerts": [firing]},
        ],
    )
    # The same traffic under a $25 limit does not alert.
    below = GatewayObjective(fallback_rate_percent=5, bedrock_spend_per_hour=25, spend=GATEWAY.spend)
    _evaluate_gateway(
        tmp_path,
        series,
        [{"eval_time": "90m", "alertname": "BedrockSpendHigh", "exp_alerts": []}],
        gateway=below,
    )


def test_the_tiers_gateway_objective_prices_each_bedrock_fallback_from_the_shipped_table() -> None:
    production = make_production({"observability": {"prometheus": {"bedrock_spend_per_hour": 7.5}}})
    objective = gateway_objective(production)
    assert objective is not None
    assert (objective.fallback_rate_percent, objective.bedrock_spend_per_hour) == (5, 7.5)
    # The preset's 70B model falls back to Llama 3.3 70B: $0.72 per million tokens each way
    # (gpufarm/data/prices.yaml); the batch model has no Bedrock fallback.
    assert [(s.model_name, round(s.input_per_1k, 8), round(s.output_per_1k, 8)) for s in objective.spend] == [
        ("meta-llama/Llama-3.3-70B-Instruct", 0.00072, 0.00072)
    ]
    assert objective.models == (
        FallbackModel(name="llama-3-3-70b", api_name="meta-llama/Llama-3.3-70B-Instruct"),
    )
    assert gateway_objective(make_tier()) is None  # poc: no Prometheus
