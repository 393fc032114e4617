"""Amazon Managed Grafana in the tier templates: production and enterprise have the workspace and
its provisioning, poc has neither; what the workspace may read and how it is provisioned."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufarm.config import load_preset
from gpufarm.constructs.grafana_dashboards import (
    CLOUDWATCH_UID,
    FOLDER_UID,
    PROMETHEUS_UID,
    dashboard_expressions,
)
from gpufarm.k8s.promql import template_expressions

WORKSPACE = "AWS::Grafana::Workspace"
DASHBOARDS = "Custom::GrafanaDashboards"


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {lid: body for lid, body in template["Resources"].items() if body["Type"] == kind}


def _one(template: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    (found,) = _of_type(template, kind).items()
    return found


def test_poc_has_no_grafana(poc_template: dict[str, Any]) -> None:
    assert _of_type(poc_template, WORKSPACE) == {}
    assert _of_type(poc_template, DASHBOARDS) == {}
    assert "GrafanaUrl" not in poc_template["Outputs"]


@pytest.fixture(params=["production", "enterprise"])
def template(request: pytest.FixtureRequest) -> dict[str, Any]:
    found: dict[str, Any] = request.getfixturevalue(f"{request.param}_template")
    return found


def test_workspace_is_customer_managed_with_identity_center(template: dict[str, Any]) -> None:
    _, workspace = _one(template, WORKSPACE)
    props = workspace["Properties"]
    assert props["AccountAccessType"] == "CURRENT_ACCOUNT"
    assert props["PermissionType"] == "CUSTOMER_MANAGED"
    assert props["AuthenticationProviders"] == ["AWS_SSO"]
    assert props["GrafanaVersion"] == "10.4"
    assert "DataSources" not in props  # console-only with SERVICE_MANAGED
    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    role = template["Resources"][role_id]
    principal = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
    assert principal == {"Service": "grafana.amazonaws.com"}


def test_workspace_role_queries_only_the_tiers_amp_workspace(template: dict[str, Any]) -> None:
    _, workspace = _one(template, WORKSPACE)
    role_id = workspace["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    amp_id, _ = _one(template, "AWS::APS::Workspace")
    policies = [
        body
        for body in _of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in body["Properties"]["Roles"]
    ]
    (policy,) = policies
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_action = {tuple(sorted(s["Action"])): s["Resource"] for s in statements}
    assert by_action[("aps:GetLabels", "aps:GetMetricMetadata", "aps:GetSeries", "aps:QueryMetrics")] == {
        "Fn::GetAtt": [amp_id, "Arn"]
    }
    cloudwatch = [a for a in by_action if a[0].startswith("cloudwatch:")]
    assert cloudwatch and all(not any(x.startswith("cloudwatch:Put") for x in a) for a in cloudwatch)


def test_dashboards_are_provisioned_into_the_workspace(template: dict[str, Any]) -> None:
    workspace_id, _ = _one(template, WORKSPACE)
    _, provisioning = _one(template, DASHBOARDS)
    props = provisioning["Properties"]
    assert props["WorkspaceId"] == {"Fn::GetAtt": [workspace_id, "Id"]}
    assert props["WorkspaceEndpoint"] == {"Fn::GetAtt": [workspace_id, "Endpoint"]}
    assert (props["PrometheusUid"], props["CloudWatchUid"], props["FolderUid"]) == (
        PROMETHEUS_UID,
        CLOUDWATCH_UID,
        FOLDER_UID,
    )
    assert props["TokenSeconds"] == "900"
    # The dashboards travel as one JSON string: the gateway's holds the load balancer's names as
    # CloudFormation references, joined in.
    dashboards = props["Dashboards"]
    text = json.dumps(dashboards)
    for uid in ("gpufarm-models", "gpufarm-gpu-fleet", "gpufarm-gateway"):
        assert uid in text


def test_provisioner_may_only_manage_service_accounts_of_its_workspace(template: dict[str, Any]) -> None:
    workspace_id, _ = _one(template, WORKSPACE)
    grants = [
        s
        for body in _of_type(template, "AWS::IAM::Policy").values()
        for s in body["Properties"]["PolicyDocument"]["Statement"]
        if any(
            str(a).startswith("grafana:")
            for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        )
    ]
    (grant,) = grants
    assert sorted(grant["Action"]) == [
        "grafana:CreateWorkspaceServiceAccount",
        "grafana:CreateWorkspaceServiceAccountToken",
        "grafana:DeleteWorkspaceServiceAccount",
        "grafana:DeleteWorkspaceServiceAccountToken",
        "grafana:ListWorkspaceServiceAccounts",
    ]
    assert {"Fn::GetAtt": [workspace_id, "Id"]} in grant["Resource"]["Fn::Join"][1]


def test_provisioner_runs_in_the_vpc_with_https_out_only(template: dict[str, Any]) -> None:
    groups = {
        lid: body for lid, body in _of_type(template, "AWS::EC2::SecurityGroup").items() if "Grafana" in lid
    }
    ((group_id, group),) = groups.items()
    assert group["Properties"]["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "Grafana APIs over HTTPS",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]
    assert "SecurityGroupIngress" not in group["Properties"]
    functions = [
        body for lid, body in _of_type(template, "AWS::Lambda::Function").items() if lid.startswith("Grafana")
    ]
    (function,) = functions  # the handler alone: it answers CloudFormation without a provider framework
    assert {"Fn::GetAtt": [group_id, "GroupId"]} in function["Properties"]["VpcConfig"]["SecurityGroupIds"]


def test_cloudformation_invokes_the_provisioner_itself(template: dict[str, Any]) -> None:
    _, provisioning = _one(template, DASHBOARDS)
    (function_id,) = [
        lid
        for lid, body in _of_type(template, "AWS::Lambda::Function").items()
        if body["Properties"].get("Handler") == "index.on_event"
    ]
    assert provisioning["Properties"]["ServiceToken"] == {"Fn::GetAtt": [function_id, "Arn"]}
    assert [lid for lid in template["Resources"] if lid.startswith("GrafanaProvider")] == []


def test_grafana_url_is_an_output(template: dict[str, Any]) -> None:
    workspace_id, _ = _one(template, WORKSPACE)
    assert template["Outputs"]["GrafanaUrl"]["Value"] == {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [workspace_id, "Endpoint"]}]]
    }


def test_workspace_is_kept_like_the_amp_workspace(template: dict[str, Any]) -> None:
    """Removed per the tier's removal_policy: both presets retain it, with the metrics it reads."""
    _, workspace = _one(template, WORKSPACE)
    _, amp = _one(template, "AWS::APS::Workspace")
    assert workspace["DeletionPolicy"] == amp["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("preset", ["production", "enterprise"])
def test_the_promql_collector_reads_every_dashboard_expression(
    preset: str, request: pytest.FixtureRequest
) -> None:
    """The template-wide PromQL collector (promtool and upstream names, tests/tiers/test_alerting.py)
    sees exactly the dashboards' expressions in the provisioning resource."""
    template: dict[str, Any] = request.getfixturevalue(f"{preset}_template")
    provisioning_id, _ = _one(template, DASHBOARDS)
    collected = [e.expr for e in template_expressions(template) if e.source.startswith(f"{provisioning_id}:")]
    assert collected == dashboard_expressions(load_preset(preset))
