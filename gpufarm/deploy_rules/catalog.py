"""Every deploy rule gpufarm checks, and the function that checks a template against them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpufarm.deploy_rules import (  # one service per line, alphabetical
    appscaling,
    aps,
    autoscaling,
    awslambda,
    bedrock,
    cloudwatch,
    custom,
    ec2,
    ecr,
    eks,
    elbv2,
    events,
    fsx,
    grafana,
    iam,
    kms,
    kubernetes,
    logs,
    route53,
    s3,
    sagemaker,
    sns,
    sqs,
    ssm,
    wafv2,
)
from gpufarm.deploy_rules.rule import Rule, Template, Violation

RULES: tuple[Rule, ...] = (
    *aps.RULES,
    *appscaling.RULES,
    *autoscaling.RULES,
    *awslambda.RULES,
    *bedrock.RULES,
    *cloudwatch.RULES,
    *custom.RULES,
    *ec2.RULES,
    *ecr.RULES,
    *eks.RULES,
    *elbv2.RULES,
    *events.RULES,
    *fsx.RULES,
    *grafana.RULES,
    *iam.RULES,
    *kms.RULES,
    *kubernetes.RULES,
    *logs.RULES,
    *route53.RULES,
    *s3.RULES,
    *sagemaker.RULES,
    *sns.RULES,
    *sqs.RULES,
    *ssm.RULES,
    *wafv2.RULES,
)
"""The catalogue, grouped by service; each module lists its rules with their documentation."""


def _index(rules: Iterable[Rule]) -> dict[str, tuple[Rule, ...]]:
    by_type: dict[str, list[Rule]] = {}
    for rule in rules:
        by_type.setdefault(rule.resource_type, []).append(rule)
    return {t: tuple(rs) for t, rs in by_type.items()}


_BY_TYPE = _index(RULES)


def check_template(document: Mapping[str, Any], rules: Iterable[Rule] | None = None) -> list[Violation]:
    """The breaches of `rules` (default: the whole catalogue) in one template document."""
    by_type = _BY_TYPE if rules is None else _index(rules)
    template = Template.of(document)
    return [
        Violation(rule=rule, logical_id=resource.logical_id, message=message)
        for resource in template.resources.values()
        for rule in by_type.get(resource.type, ())
        for message in rule.check(resource, template)
    ]


def covered_types() -> frozenset[str]:
    """The resource types at least one rule checks."""
    return frozenset(_BY_TYPE)
