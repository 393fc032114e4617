"""The control-tower pack: AWS Control Tower's proactive controls gate the stacks that ask for them.

The controls are the guard rules bundled in cdklabs.cdk-validator-cfnguard, run by the cfn-guard
binary the same package ships. An sqs.Queue without a dead-letter queue breaks CT.SQS.PR.1
("Require any Amazon SQS queue to have a dead-letter queue configured") and nothing else; a KMS
key without a statement denying grants outside AWS services breaks CT.KMS.PR.3.
"""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs

from gpufarm.config.model import CompliancePack
from gpufarm.constructs._util import acknowledge, limit_grants_to_aws_services
from gpufarm.constructs.compliance import (
    CONTROL_TOWER_PLUGIN,
    control_tower_rule,
    control_tower_violations,
    require_compliance_pack,
)
from tests.conftest import cdk_context
from tests.constructs.helpers import REGION

REASON = "Test queue: acknowledged to prove the acknowledgement reaches the Control Tower pack."
SQS_DLQ = "CT.SQS.PR.1"


def _queue_stack(app: cdk.App, name: str, *, pack: bool) -> tuple[sqs.Queue, sqs.Queue]:
    """A stack with a queue that breaks CT.SQS.PR.1 and a sibling that breaks it too."""
    stack = cdk.Stack(app, name, env=cdk.Environment(region=REGION))
    queue = sqs.Queue(stack, "Queue", encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True)
    sibling = sqs.Queue(stack, "Sibling", encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True)
    acknowledge(sibling, control_tower_rule(SQS_DLQ), "Sibling queue: not what these tests look at.")
    if pack:
        require_compliance_pack(stack, CompliancePack.CONTROL_TOWER)
    return queue, sibling


def _violations(outdir: Path) -> dict[str, list[str]]:
    """Control Tower rule -> construct paths it reported unacknowledged."""
    report = json.loads((outdir / "validation-report.json").read_text())
    return {
        v["ruleName"]: sorted(c["constructPath"] for c in v["violatingConstructs"])
        for plugin in report["pluginReports"]
        if plugin["pluginName"] == CONTROL_TOWER_PLUGIN
        for v in plugin["violations"]
    }


def test_acknowledgement_ids_name_the_plugin_and_the_control() -> None:
    assert control_tower_rule("CT.S3.PR.2") == "ControlTower::CT.S3.PR.2"


def test_a_finding_fails_synth_naming_the_control_and_its_documentation(tmp_path: Path) -> None:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    _queue_stack(app, "Ct", pack=True)
    with pytest.raises(RuntimeError, match="ValidationFailed") as excinfo:
        app.synth()
    assert SQS_DLQ in str(excinfo.value)
    assert _violations(tmp_path) == {SQS_DLQ: ["Ct/Queue/Resource"]}
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (violation,) = next(p for p in report["pluginReports"] if p["pluginName"] == CONTROL_TOWER_PLUGIN)[
        "violations"
    ]
    assert violation["ruleMetadata"] == {
        "DocumentationUrl": "https://docs.aws.amazon.com/controltower/latest/userguide/"
        "sqs-rules.html#ct-sqs-pr-1-description"
    }


def test_acknowledging_the_control_on_the_resource_passes(tmp_path: Path) -> None:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    queue, _ = _queue_stack(app, "Ct", pack=True)
    acknowledge(queue, control_tower_rule(SQS_DLQ), REASON)
    app.synth()
    assert _violations(tmp_path) == {}


def test_an_acknowledgement_covers_only_its_own_control(tmp_path: Path) -> None:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    queue, _ = _queue_stack(app, "Ct", pack=True)
    acknowledge(queue, control_tower_rule("CT.SQS.PR.2"), REASON)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert _violations(tmp_path) == {SQS_DLQ: ["Ct/Queue/Resource"]}


def test_the_pack_gates_only_the_stacks_that_ask_for_it(tmp_path: Path) -> None:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    _queue_stack(app, "Asks", pack=True)
    _queue_stack(app, "DoesNotAsk", pack=False)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert _violations(tmp_path) == {SQS_DLQ: ["Asks/Queue/Resource"]}


def test_no_stack_asks_no_control_runs(tmp_path: Path) -> None:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    _queue_stack(app, "DoesNotAsk", pack=False)
    app.synth()
    # No validation plugin at all: aws-cdk-lib writes no report.
    assert not (tmp_path / "validation-report.json").exists()


# --------------------------------------------------------------------------- KMS grants (fix)


def _key_findings(tmp_path: Path, *, limited: bool) -> dict[str, list[str]]:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    stack = cdk.Stack(app, "Keys", env=cdk.Environment(region=REGION))
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    if limited:
        limit_grants_to_aws_services(key)
    template = tmp_path / "keys.json"
    template.write_text(json.dumps(app.synth().get_stack_by_name("Keys").template))
    return {
        v.rule_name: [r.resource_logical_id for r in v.violating_resources]
        for v in control_tower_violations(str(template))
    }


def test_a_key_without_the_grant_limit_breaks_ct_kms_pr_3(tmp_path: Path) -> None:
    assert _key_findings(tmp_path, limited=False) == {"CT.KMS.PR.3": ["Key961B73FD"]}


def test_limiting_grants_to_aws_services_meets_ct_kms_pr_3(tmp_path: Path) -> None:
    assert _key_findings(tmp_path, limited=True) == {}


def test_the_grant_limit_denies_only_grants_no_aws_service_asks_for() -> None:
    stack = cdk.Stack(cdk.App(), "Keys")
    key = limit_grants_to_aws_services(kms.Key(stack, "Key"))
    statements = stack.resolve(key.node.default_child.key_policy)["Statement"]  # type: ignore[union-attr]
    assert statements[-1] == {
        "Sid": "DenyGrantsOutsideAwsServices",
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": "kms:CreateGrant",
        "Resource": "*",
        "Condition": {
            "BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}
        },
    }


def test_platforms_without_a_bundled_cfn_guard_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("platform.system", lambda: "Windows")
    monkeypatch.setattr("platform.machine", lambda: "AMD64")
    with pytest.raises(RuntimeError) as excinfo:
        control_tower_violations("unused.template.json")
    assert str(excinfo.value) == (
        "cdklabs.cdk-validator-cfnguard ships cfn-guard for Linux and macOS on x86_64 and arm64 "
        "only, not Windows AMD64"
    )
