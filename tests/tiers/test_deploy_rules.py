"""The three presets keep every deploy rule, and every resource type they emit has a rule.

The session fixtures synthesize each tier with the compliance gate on; this test checks the same
templates again directly, so a failure names the resource and the rule without the CDK's report.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.deploy_rules import check_template, covered_types

EXEMPT_TYPES = {
    # CDK's own analytics record: CloudFormation stores it in the template's metadata and calls
    # no AWS API for it, so there is nothing an API could refuse.
    "AWS::CDK::Metadata": "not an AWS API resource",
}

TEMPLATES = (
    "poc_template",
    "production_template",
    "enterprise_template",
    "ec2_poc_template",
    "sagemaker_poc_template",
)


@pytest.mark.parametrize("fixture", TEMPLATES)
def test_preset_keeps_every_deploy_rule(fixture: str, request: pytest.FixtureRequest) -> None:
    template: dict[str, Any] = request.getfixturevalue(fixture)
    assert [v.render() for v in check_template(template)] == []


@pytest.mark.parametrize("fixture", TEMPLATES)
def test_every_emitted_type_has_a_deploy_rule(fixture: str, request: pytest.FixtureRequest) -> None:
    template: dict[str, Any] = request.getfixturevalue(fixture)
    emitted = {body["Type"] for body in template["Resources"].values()}
    assert sorted(emitted - covered_types() - EXEMPT_TYPES.keys()) == []


def test_exemptions_have_no_rule() -> None:
    # An exempt type that a rule now covers is no longer exempt. (AWS::CDK::Metadata appears in
    # `cdk synth` output; the tier fixtures turn version reporting off, so it may be absent here.)
    assert not EXEMPT_TYPES.keys() & covered_types()
