"""ManagedGrafana on its own: what it refuses, SAML, and the provisioning properties."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from gpufarm.config.sections.grafana import GrafanaConfig
from gpufarm.constructs.grafana import ManagedGrafana
from tests.conftest import REPO
from tests.constructs.helpers import new_stack, new_vpc

AMP_ARN = "arn:aws:aps:us-east-1:123456789012:workspace/ws-0123"
AMP_URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123"
BOARD = {"uid": "b", "title": "b", "panels": []}


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def grafana_resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    """Resources of `kind` that this construct made (the test VPC makes some of its own)."""
    return {k: v for k, v in resources(template, kind).items() if k.startswith("Grafana")}


def build(config: GrafanaConfig) -> dict[str, Any]:
    stack = new_stack()
    vpc = new_vpc(stack)
    ManagedGrafana(
        stack,
        "Grafana",
        config=config,
        prometheus_workspace_arn=AMP_ARN,
        prometheus_query_endpoint=AMP_URL,
        region="us-east-1",
        dashboards=[BOARD],
        vpc=vpc,
        subnets=vpc.private_subnets,
    )
    found: dict[str, Any] = Template.from_stack(stack).to_json()
    return found


def test_refuses_a_disabled_config() -> None:
    stack = new_stack()
    vpc = new_vpc(stack)
    with pytest.raises(
        ValueError, match=r"^'config.enabled' must be true to build ManagedGrafana, got False$"
    ):
        ManagedGrafana(
            stack,
            "Grafana",
            config=GrafanaConfig(),
            prometheus_workspace_arn=AMP_ARN,
            prometheus_query_endpoint=AMP_URL,
            region="us-east-1",
            dashboards=[],
            vpc=vpc,
            subnets=vpc.private_subnets,
        )


def test_refuses_a_version_without_service_accounts() -> None:
    stack = new_stack()
    vpc = new_vpc(stack)
    with pytest.raises(
        ValueError, match=r"^'config.grafana_version' must be one of 9.4, 10.4, 12.4, got '8.4'$"
    ):
        ManagedGrafana(
            stack,
            "Grafana",
            config=GrafanaConfig(enabled=True, grafana_version="8.4"),
            prometheus_workspace_arn=AMP_ARN,
            prometheus_query_endpoint=AMP_URL,
            region="us-east-1",
            dashboards=[],
            vpc=vpc,
            subnets=vpc.private_subnets,
        )


def test_saml_configuration_maps_roles() -> None:
    config = GrafanaConfig.model_validate(
        {
            "enabled": True,
            "authentication": ["SAML"],
            "saml": {
                "idp_metadata_url": "https://idp.example.com/metadata",
                "admin_role_values": ["grafana-admins"],
                "editor_role_values": ["sre"],
            },
        }
    )
    template = build(config)
    ((_, workspace),) = resources(template, "AWS::Grafana::Workspace").items()
    assert workspace["Properties"]["AuthenticationProviders"] == ["SAML"]
    assert workspace["Properties"]["SamlConfiguration"] == {
        "IdpMetadata": {"Url": "https://idp.example.com/metadata"},
        "AssertionAttributes": {"Role": "role"},
        "RoleValues": {"Admin": ["grafana-admins"], "Editor": ["sre"]},
        "LoginValidityDuration": 60,
    }


def test_provisioning_carries_the_dashboards_and_the_token_lifetime() -> None:
    template = build(GrafanaConfig(enabled=True, provisioning_token_seconds=600))
    ((_, provisioning),) = resources(template, "Custom::GrafanaDashboards").items()
    props = provisioning["Properties"]
    assert json.loads(props["Dashboards"]) == [BOARD]
    assert props["TokenSeconds"] == "600"
    assert props["PrometheusUrl"] == f"{AMP_URL}/"
    (function,) = [
        f
        for f in resources(template, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "index.on_event"
    ]
    assert function["Properties"]["Runtime"] == "python3.14"


def test_same_input_same_template() -> None:
    config = GrafanaConfig(enabled=True)
    assert json.dumps(build(config), sort_keys=True) == json.dumps(build(config), sort_keys=True)


def test_the_handler_is_the_service_token_without_the_provider_framework() -> None:
    template = build(GrafanaConfig(enabled=True))
    ((_, provisioning),) = resources(template, "Custom::GrafanaDashboards").items()
    ((function_id, function),) = grafana_resources(template, "AWS::Lambda::Function").items()
    assert function["Properties"]["Handler"] == "index.on_event"
    assert provisioning["Properties"]["ServiceToken"] == {"Fn::GetAtt": [function_id, "Arn"]}
    # CloudFormation waits at most 1200 s: three 300 s attempts and Lambda's 60 s + 120 s retry delays.
    assert provisioning["Properties"]["ServiceTimeout"] == "1200"
    assert function["Properties"]["Timeout"] == 300
    # One role and one policy for the handler, one of each for the workspace: no framework's.
    assert len(grafana_resources(template, "AWS::IAM::Role")) == 2
    assert len(grafana_resources(template, "AWS::IAM::Policy")) == 2


def test_the_handler_depends_on_its_grants_but_not_redundantly_on_its_role() -> None:
    template = build(GrafanaConfig(enabled=True))
    ((_, function),) = grafana_resources(template, "AWS::Lambda::Function").items()
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    (policy_id,) = [
        lid
        for lid, body in grafana_resources(template, "AWS::IAM::Policy").items()
        if {"Ref": role_id} in body["Properties"]["Roles"]
    ]
    assert policy_id in function["DependsOn"]
    assert role_id not in function["DependsOn"]
    # The VPC's routes out stay: the handler must reach the Grafana APIs when it first runs.
    assert any("DefaultRoute" in dep for dep in function["DependsOn"])


def test_cfn_lint_finds_nothing_in_the_grafana_resources(tmp_path: Path) -> None:
    """No error and no warning (W3005, the redundant DependsOn, included) on this construct's
    resources; the test VPC's own findings are not this construct's."""
    template = build(GrafanaConfig(enabled=True))
    path = tmp_path / "grafana.template.json"
    path.write_text(json.dumps(template))
    result = subprocess.run(
        [str(REPO / ".venv" / "bin" / "cfn-lint"), "--format", "json", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    ours = [
        f"{f['Rule']['Id']} {f['Message']}"
        for f in findings
        if f["Location"]["Path"][:2] and str(f["Location"]["Path"][1]).startswith("Grafana")
    ]
    assert ours == []
    assert findings, "cfn-lint ran (the test VPC's hard-coded zones are always reported)"
