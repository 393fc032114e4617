"""CDK's own custom resources outside EKS: what the AWS APIs they call refuse."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str, ref_target
from gpufarm.deploy_rules.shapes import resource

RESTRICT_DEFAULT_SG = "Custom::VpcRestrictDefaultSG"

_VPC_RETURN_VALUES = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-ec2-vpc.html"
)


def _default_group(res: Resource, template: Template) -> Iterator[str]:
    # The handler revokes the rules of `DefaultSecurityGroupId` with the EC2 API, which takes a
    # security group ID ("sg-..."). AWS::EC2::VPC returns its default group as the attribute
    # DefaultSecurityGroup; any other attribute, or a group of another type, is not that group.
    value = res.prop("DefaultSecurityGroupId")
    literal = literal_str(value)
    if literal is not None and not re.fullmatch(r"sg-[0-9a-f]{8,17}", literal):
        yield f"DefaultSecurityGroupId {literal!r} is not a security group ID"
        return
    getatt = value.get("Fn::GetAtt") if isinstance(value, dict) else None
    target = template.get(ref_target(value)) if value is not None and literal is None else None
    if target is None:
        return
    attribute = getatt[1] if isinstance(getatt, list) and len(getatt) == 2 else None
    if target.type != "AWS::EC2::VPC" or attribute != "DefaultSecurityGroup":
        yield (
            f"DefaultSecurityGroupId points at {target.logical_id} ({target.type}"
            f"{f', {attribute}' if attribute else ''}), not a VPC's DefaultSecurityGroup"
        )


def _restrict(group: Any) -> dict[str, Any]:
    return resource(
        RESTRICT_DEFAULT_SG,
        ServiceToken="arn:aws:lambda:us-east-1:123456789012:function:restrict",
        DefaultSecurityGroupId=group,
        Account="123456789012",
    )


_VPC = resource("AWS::EC2::VPC", CidrBlock="10.0.0.0/16")

RULES: tuple[Rule, ...] = (
    Rule(
        id="CUSTOM-RESTRICT-DEFAULT-SG",
        resource_type=RESTRICT_DEFAULT_SG,
        title="The group whose rules are revoked is a VPC's default security group",
        doc_url=_VPC_RETURN_VALUES,
        check=_default_group,
        bad={"Vpc": _VPC, "Restrict": _restrict({"Fn::GetAtt": ["Vpc", "CidrBlock"]})},
        good={"Vpc": _VPC, "Restrict": _restrict({"Fn::GetAtt": ["Vpc", "DefaultSecurityGroup"]})},
    ),
)
