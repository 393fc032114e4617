"""The deploy-rules plugin gates synth the way cdk-nag does, and cannot be bypassed by a pack choice."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

from gpufarm.app import new_app
from gpufarm.constructs import enable_compliance_checks
from gpufarm.deploy_rules import RULES
from gpufarm.deploy_rules.plugin import PLUGIN_NAME


def _app_with_target_group(tmp_path: Path, attributes: dict[str, str]) -> cdk.App:
    app = new_app(outdir=str(tmp_path))
    stack = cdk.Stack(app, "S")
    elbv2.CfnTargetGroup(
        stack,
        "Tg",
        port=8000,
        protocol="HTTP",
        target_type="ip",
        vpc_id="vpc-0123456789abcdef0",
        target_group_attributes=[
            elbv2.CfnTargetGroup.TargetGroupAttributeProperty(key=k, value=v) for k, v in attributes.items()
        ],
    )
    enable_compliance_checks(app)
    return app


def test_lor_with_slow_start_fails_synth(tmp_path: Path) -> None:
    app = _app_with_target_group(
        tmp_path,
        {"load_balancing.algorithm.type": "least_outstanding_requests", "slow_start.duration_seconds": "60"},
    )
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (plugin,) = [p for p in report["pluginReports"] if p["pluginName"] == PLUGIN_NAME]
    assert plugin["conclusion"] == "failure"
    (violation,) = plugin["violations"]
    assert violation["ruleName"] == "ELBV2-TG-LOR-SLOW-START"
    assert violation["ruleMetadata"]["doc"].startswith("https://docs.aws.amazon.com/elasticloadbalancing/")
    assert [c["constructPath"] for c in violation["violatingConstructs"]] == ["S/Tg"]


def test_a_kept_rule_passes_synth(tmp_path: Path) -> None:
    app = _app_with_target_group(
        tmp_path,
        {"load_balancing.algorithm.type": "least_outstanding_requests", "slow_start.duration_seconds": "0"},
    )
    assembly = app.synth()
    assert [s.stack_name for s in assembly.stacks] == ["S"]


def test_plugin_lists_every_rule() -> None:
    from gpufarm.deploy_rules import DeployRulesPlugin

    assert DeployRulesPlugin().rule_ids == [r.id for r in RULES]
