"""enable_compliance_checks: cdk-nag findings fail synth unless acknowledged on their resource."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs._util import acknowledge, acknowledge_all
from tests.conftest import cdk_context
from tests.constructs.helpers import REGION

# An s3.Bucket with neither enforce_ssl nor server access logs breaks exactly these two rules.
BUCKET_RULES = ["AwsSolutions-S1", "AwsSolutions-S10"]
REASON = "Test bucket: acknowledged to prove acknowledgements reach the validation plugin."


def _synth(outdir: Path, *, acknowledged: list[str], on_sibling: tuple[str, ...] | list[str] = ()) -> None:
    """Synthesize an app holding one offending bucket (and a compliant sibling)."""
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "Nag", env=cdk.Environment(region=REGION))
    bucket = s3.Bucket(stack, "Offending")
    sibling = s3.Bucket(stack, "Sibling", enforce_ssl=True)
    acknowledge(sibling, "AwsSolutions-S1", "Sibling bucket: access logs not needed in this test.")
    for rule in acknowledged:
        acknowledge(bucket, rule, REASON)
    for rule in on_sibling:
        acknowledge(sibling, rule, REASON)
    app.synth()


def _violations(outdir: Path) -> dict[str, list[str]]:
    """Rule name -> construct paths, from the validation report."""
    report = json.loads((outdir / "validation-report.json").read_text())
    return {
        v["ruleName"]: sorted(c["constructPath"] for c in v["violatingConstructs"])
        for plugin in report["pluginReports"]
        for v in plugin["violations"]
    }


def test_unacknowledged_findings_fail_synth(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        _synth(tmp_path, acknowledged=[])
    assert _violations(tmp_path) == {rule: ["Nag/Offending/Resource"] for rule in BUCKET_RULES}


def test_acknowledging_the_reported_rules_on_the_resource_passes(tmp_path: Path) -> None:
    _synth(tmp_path, acknowledged=BUCKET_RULES)
    assert (tmp_path / "Nag.template.json").exists()


def test_an_acknowledgement_covers_only_its_own_rule(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        _synth(tmp_path, acknowledged=["AwsSolutions-S1"])
    assert _violations(tmp_path) == {"AwsSolutions-S10": ["Nag/Offending/Resource"]}


def test_an_acknowledgement_covers_only_its_own_resource(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        _synth(tmp_path, acknowledged=[], on_sibling=BUCKET_RULES)
    assert _violations(tmp_path) == {rule: ["Nag/Offending/Resource"] for rule in BUCKET_RULES}


def _batched_synth(outdir: Path, findings: dict[str, str]) -> None:
    """As _synth, with the offending bucket's findings acknowledged in one acknowledge_all call."""
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "Nag", env=cdk.Environment(region=REGION))
    bucket = s3.Bucket(stack, "Offending")
    acknowledge_all(bucket, findings)
    app.synth()


def test_acknowledging_several_rules_in_one_call_passes(tmp_path: Path) -> None:
    _batched_synth(tmp_path, dict.fromkeys(BUCKET_RULES, REASON))
    assert (tmp_path / "Nag.template.json").exists()


def test_one_call_acknowledges_only_the_rules_it_names(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        _batched_synth(tmp_path, {"AwsSolutions-S10": REASON})
    assert _violations(tmp_path) == {"AwsSolutions-S1": ["Nag/Offending/Resource"]}


def _acknowledged_rules(construct: s3.Bucket) -> list[object]:
    return [
        entry.data
        for entry in construct.node.metadata
        if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    ]


def test_one_call_records_what_one_call_per_rule_records() -> None:
    stack = cdk.Stack(cdk.App(), "Nag")
    one_by_one, batched = s3.Bucket(stack, "OneByOne"), s3.Bucket(stack, "Batched")
    findings = {"AwsSolutions-S1": "first reason", "AwsSolutions-S10": "second reason"}
    for rule, reason in findings.items():
        acknowledge(one_by_one, rule, reason)
    acknowledge_all(batched, findings)
    # One entry per rule, in order. aws-cdk-lib files an ID without a plugin prefix it knows under
    # "Annotation::" (Validations.acknowledge: "If an ID has no well-known prefix, it is assumed to
    # be an annotation rule"); cdk-nag matches the rule name after the prefix.
    expected = [
        {"Annotation::AwsSolutions-S1": "first reason"},
        {"Annotation::AwsSolutions-S10": "second reason"},
    ]
    assert _acknowledged_rules(one_by_one) == _acknowledged_rules(batched) == expected
