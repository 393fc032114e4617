"""The template rule that refuses to deploy a tier still holding documentation values."""

from __future__ import annotations

import aws_cdk as cdk

from gpufarm.config.placeholders import Placeholder

PLACEHOLDER_WARNING_ID = "gpufarm:placeholder"
"""ID of the warning a stack gets for each documentation value left in its tier."""

PLACEHOLDER_RULE_ID = "GpufarmPlaceholders"
"""Logical ID of the template rule that refuses to deploy a tier holding documentation values."""

PLACEHOLDER_PARAMETER_ID = "GpufarmPlaceholdersReplaced"
"""Logical ID of the parameter that rule reads; its only allowed value is 'no'."""


def refuse_placeholders(stack: cdk.Stack, placeholders: list[Placeholder]) -> None:
    """Warn about each documentation value in the tier and make the template refuse to deploy.

    The refusal is a template rule whose assertion cannot hold: it asks the parameter
    `GpufarmPlaceholdersReplaced`, whose only allowed value is 'no', to be 'yes'. CloudFormation
    evaluates rules, with the parameter values, "before CloudFormation creates or updates any
    resources" (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/rules-section-structure.html),
    so `cdk deploy` fails with the assertion's description and nothing is created. The rule reads
    a parameter, as every documented rule does, because the documentation describes rules as
    validating parameter values and says nothing of a rule that reads none. No placeholders: no
    rule and no parameter, so a clean tier's template is unchanged.
    """
    if not placeholders:
        return
    annotations = cdk.Annotations.of(stack)
    for placeholder in placeholders:
        annotations.add_warning_v2(PLACEHOLDER_WARNING_ID, placeholder.describe())
    replaced = cdk.CfnParameter(
        stack,
        PLACEHOLDER_PARAMETER_ID,
        type="String",
        default="no",
        allowed_values=["no"],
        description="Whether the tier's documentation values were replaced: they were not "
        "(see the template rule GpufarmPlaceholders).",
    )
    # One condition for every assertion: each renders the same {"Fn::Equals": [...]}.
    never_holds = cdk.Fn.condition_equals(replaced.value_as_string, "yes")
    cdk.CfnRule(
        stack,
        PLACEHOLDER_RULE_ID,
        assertions=[
            cdk.CfnRuleAssertion(
                assert_=never_holds,
                assert_description=f"{p.path} holds {p.kind} ({p.why}); replace it "
                "in the tier file and synthesize again",
            )
            for p in placeholders
        ],
    )
