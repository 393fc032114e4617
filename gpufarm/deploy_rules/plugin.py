"""The deploy-rules gate as a CDK validation plugin, run beside the cdk-nag packs on every synth."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import jsii

from gpufarm.deploy_rules.catalog import RULES, check_template
from gpufarm.deploy_rules.rule import Violation

PLUGIN_NAME = "gpufarm-deploy-rules"
PLUGIN_VERSION = "1"


def _report_violation(template_path: str, violations: list[Violation]) -> cdk.PolicyViolation:
    rule = violations[0].rule
    return cdk.PolicyViolation(
        rule_name=rule.id,
        description=f"{rule.title}. " + "; ".join(sorted({v.message for v in violations})),
        fix=f"See {rule.doc_url}",
        rule_metadata={"doc": rule.doc_url, "resourceType": rule.resource_type},
        severity="error",
        violating_resources=[
            cdk.PolicyViolatingResource(
                resource_logical_id=v.logical_id,
                template_path=template_path,
                locations=[f"Resources/{v.logical_id}"],
            )
            for v in violations
        ],
    )


@jsii.implements(cdk.IPolicyValidationPlugin)
class DeployRulesPlugin:
    """Fails synth on any template that breaks a rule an AWS API enforces at deploy time.

    The rules cannot be acknowledged: the API refuses the resource whatever the reason. The report
    names the resource, the rule and its AWS documentation (docs/deploy-rules.md lists them).
    """

    @property
    def name(self) -> str:
        return PLUGIN_NAME

    @property
    def version(self) -> str:
        return PLUGIN_VERSION

    @property
    def rule_ids(self) -> list[str]:
        return [rule.id for rule in RULES]

    def validate(self, context: cdk.IPolicyValidationContext) -> cdk.PolicyValidationPluginReport:
        report: list[cdk.PolicyViolation] = []
        for path in context.template_paths:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
            by_rule: dict[str, list[Violation]] = {}
            for violation in check_template(document):
                by_rule.setdefault(violation.rule.id, []).append(violation)
            report += [_report_violation(path, vs) for _, vs in sorted(by_rule.items())]
        return cdk.PolicyValidationPluginReport(
            success=not report, violations=report, plugin_version=PLUGIN_VERSION
        )
