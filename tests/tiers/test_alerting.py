"""Alerting in every tier: AMP rules and alert manager (production, enterprise), the 5xx percentage
alarm (every ALB tier), and every PromQL expression of every template parsed by promtool with its
metric names checked against the pinned upstream releases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config.loader import load_preset
from gpufarm.config.sections.ingress import LoadBalancerKind
from gpufarm.constructs.dashboard import PROMQL_QUERIES
from gpufarm.k8s import demand
from gpufarm.k8s.promql import Expression, flatten, metric_names, template_expressions
from tests.promtool import check_rules, expressions_file
from tests.unit.upstream_ref import (
    dcgm_metric_issues,
    engine_metric_issues,
    engine_series,
    vllm_metric_issues,
)

from .helpers import manifests, only, resources

TIERS = ("poc", "production", "enterprise")
PROMQL_TIERS = ("production", "enterprise")
"""The tiers with a Prometheus workspace; poc watches with CloudWatch only and carries no PromQL
(test_poc_carries_no_promql)."""
VLLM = "0.31.0"
DCGM = "4.6.0"

SERIES_FROM_OTHER_SOURCES: dict[str, str] = {
    demand.METRIC: "gpufarm/k8s/demand.py CALLBACK_SOURCE: the gateway's request counter for models that "
    "scale to zero (the KEDA wake trigger; docs/decisions/0049-wake-scale-from-zero.md)",
    demand.RESPONSES_METRIC: "gpufarm/k8s/demand.py CALLBACK_SOURCE: the gateway's answers by model and "
    "backend (the fallback-rate alert; docs/fallback.md, Metrics)",
    demand.BEDROCK_TOKENS_METRIC: "gpufarm/k8s/demand.py CALLBACK_SOURCE: the tokens of Bedrock's answers "
    "by model and direction (the Bedrock-spend alert; docs/fallback.md, Metrics)",
}
"""Metric name -> where it is defined (repository@ref and path), for series that come from neither
vLLM nor the DCGM exporter (a gateway's own metrics, say). A query reading such a series must add
it here with its source; the vLLM and DCGM names are checked against ../shared/upstream-ref."""


@pytest.fixture(scope="module")
def templates(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    return {tier: request.getfixturevalue(f"{tier}_template") for tier in TIERS}


def _statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    return list(policy["PolicyDocument"]["Statement"] if "PolicyDocument" in policy else policy["Statement"])


@pytest.mark.parametrize("tier", ["production", "enterprise"])
def test_amp_rules_and_alert_manager_send_to_the_alarm_topic(templates: dict[str, Any], tier: str) -> None:
    template = templates[tier]
    workspace_id, workspace = only(template, "AWS::APS::Workspace")
    _, rules = only(template, "AWS::APS::RuleGroupsNamespace")
    assert rules["Properties"]["Name"] == "gpufarm-slo"
    assert rules["Properties"]["Workspace"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
    topic_id, _ = only(template, "AWS::SNS::Topic")
    definition = flatten(workspace["Properties"]["AlertManagerDefinition"])
    assert definition is not None
    config = yaml.safe_load(yaml.safe_load(definition)["alertmanager_config"])
    (receiver,) = config["receivers"]
    (sns,) = receiver["sns_configs"]
    assert sns["topic_arn"] == "TOKEN" and sns["sigv4"] == {"region": load_preset(tier).environment.region}
    # The token is the alarm topic: the definition joins a Ref to it.
    assert {"Ref": topic_id} in workspace["Properties"]["AlertManagerDefinition"]["Fn::Join"][1]
    (policy,) = resources(template, "AWS::SNS::TopicPolicy").values()
    aps = [s for s in _statements(policy["Properties"]) if s.get("Sid") == "PrometheusAlertsPublish"]
    assert len(aps) == 1
    assert aps[0]["Principal"] == {"Service": "aps.amazonaws.com"}
    assert sorted(aps[0]["Action"]) == ["sns:GetTopicAttributes", "sns:Publish"]
    assert aps[0]["Condition"]["ArnEquals"] == {"aws:SourceArn": {"Fn::GetAtt": [workspace_id, "Arn"]}}
    keys = [
        s
        for key in resources(template, "AWS::KMS::Key").values()
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Sid") == "PrometheusAlertsEncrypt"
    ]
    assert len(keys) == 1 and sorted(keys[0]["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]


@pytest.mark.parametrize("tier", TIERS)
def test_error_rate_alarm_is_a_percentage_of_requests(templates: dict[str, Any], tier: str) -> None:
    alarms = [
        a
        for a in resources(templates[tier], "AWS::CloudWatch::Alarm").values()
        if "5xx responses above" in a["Properties"]["AlarmDescription"]
    ]
    if load_preset(tier).ingress.kind == LoadBalancerKind.NLB:
        # An NLB publishes no HTTP codes, so there is nothing to divide.
        assert alarms == []
        return
    (alarm,) = alarms
    props = alarm["Properties"]
    assert props["Threshold"] == 5 and props["ComparisonOperator"] == "GreaterThanThreshold"
    queries = {q["Id"]: q for q in props["Metrics"]}
    assert queries["errorRate"]["Expression"] == "100 * (FILL(elb, 0) + FILL(target, 0)) / requests"
    assert queries["requests"]["MetricStat"]["Metric"]["MetricName"] == "RequestCount"
    assert props["TreatMissingData"] == "notBreaching"


# --------------------------------------------------------------------------- every PromQL expression


@pytest.fixture(scope="module")
def expressions(templates: dict[str, Any]) -> dict[str, list[Expression]]:
    return {tier: template_expressions(template) for tier, template in templates.items()}


def test_the_collector_finds_rules_and_scaled_objects(expressions: dict[str, list[Expression]]) -> None:
    """The checks below cannot pass on nothing: production carries both kinds of query."""
    sources = [e.source for e in expressions["production"]]
    assert any("ScaledObject/" in s for s in sources), sources
    assert sum("gpufarm-" in s for s in sources) >= 19, sources


def test_poc_carries_no_promql(templates: dict[str, Any], expressions: dict[str, list[Expression]]) -> None:
    """poc keeps CloudWatch only (issue 14): no AMP workspace or rules, no KEDA ScaledObject, no
    Grafana dashboards, and its CloudWatch dashboard shows no PromQL, so there is nothing to parse."""
    poc = templates["poc"]
    assert resources(poc, "AWS::APS::Workspace") == {}
    assert resources(poc, "AWS::APS::RuleGroupsNamespace") == {}
    assert resources(poc, "Custom::GrafanaDashboards") == {}
    assert [m["metadata"]["name"] for m in manifests(poc) if m["kind"] == "ScaledObject"] == []
    (dashboard,) = resources(poc, "AWS::CloudWatch::Dashboard").values()
    body = flatten(dashboard["Properties"]["DashboardBody"])
    assert body is not None and "Amazon Managed Prometheus" not in body
    assert [query for _, query in PROMQL_QUERIES if query in body] == []
    assert expressions["poc"] == []


@pytest.mark.parametrize("tier", PROMQL_TIERS)
def test_every_rules_file_passes_promtool(templates: dict[str, Any], tier: str, tmp_path: Path) -> None:
    for logical_id, namespace in resources(templates[tier], "AWS::APS::RuleGroupsNamespace").items():
        data = flatten(namespace["Properties"]["Data"])
        assert data is not None
        path = tmp_path / f"{logical_id}.yml"
        path.write_text(data, encoding="utf-8")
        result = check_rules(path)
        assert result.returncode == 0, f"{tier} {logical_id}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("tier", PROMQL_TIERS)
def test_every_expression_parses(expressions: dict[str, list[Expression]], tier: str, tmp_path: Path) -> None:
    assert expressions[tier], f"{tier} has a Prometheus workspace but the collector found no PromQL"
    result = check_rules(expressions_file(expressions[tier], tmp_path / "expressions.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("tier", PROMQL_TIERS)
def test_every_metric_name_exists_upstream_or_is_recorded(
    templates: dict[str, Any], expressions: dict[str, list[Expression]], tier: str
) -> None:
    recorded = {
        str(rule["record"])
        for namespace in resources(templates[tier], "AWS::APS::RuleGroupsNamespace").values()
        for group in yaml.safe_load(flatten(namespace["Properties"]["Data"]) or "")["groups"]
        for rule in group["rules"]
        if "record" in rule
    }
    names = {name for e in expressions[tier] for name in metric_names(e.expr)} - recorded
    engines = {model.engine.value for model in load_preset(tier).models}
    vllm = {n for n in names if n.startswith("vllm:")}
    dcgm = {n for n in names if n.startswith("DCGM_")}
    elsewhere = names & set(SERIES_FROM_OTHER_SOURCES)
    other_engines = {n for n in names - vllm if engine_series(n, engines - {"vllm"}) is not None}
    assert names == vllm | dcgm | elsewhere | other_engines, (
        f"series from no pinned source: {sorted(names - vllm - dcgm - elsewhere - other_engines)} "
        "(add each to SERIES_FROM_OTHER_SOURCES with its source)"
    )
    assert engine_metric_issues(vllm | other_engines, engines) == []
    assert vllm_metric_issues(vllm, VLLM) == []
    assert dcgm_metric_issues(dcgm, DCGM) == []


def test_the_cloudwatch_dashboards_promql_parses_and_reads_pinned_series(tmp_path: Path) -> None:
    """The CloudWatch dashboard shows PromQL as text (CloudWatch cannot graph AMP): same checks."""
    queries = [Expression(f"dashboard: {title}", query) for title, query in PROMQL_QUERIES]
    result = check_rules(expressions_file(queries, tmp_path / "dashboard.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    names = {name for q in queries for name in metric_names(q.expr)}
    assert vllm_metric_issues({n for n in names if n.startswith("vllm:")}, VLLM) == []
    assert dcgm_metric_issues({n for n in names if n.startswith("DCGM_")}, DCGM) == []
    assert all(n.startswith(("vllm:", "DCGM_")) for n in names), names
