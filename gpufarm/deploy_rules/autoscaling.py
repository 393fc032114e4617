"""Amazon EC2 Auto Scaling: rules the Auto Scaling API enforces on groups and scaling policies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.checks import is_set, size_order_problems
from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str

GROUP = "AWS::AutoScaling::AutoScalingGroup"
POLICY = "AWS::AutoScaling::ScalingPolicy"

_API = "https://docs.aws.amazon.com/autoscaling/ec2/APIReference/"


def _sizes(resource: Resource, _: Template) -> Iterator[str]:
    # CreateAutoScalingGroup, DesiredCapacity: "This number must be greater than or equal to the
    # minimum size of the group and less than or equal to the maximum size of the group."
    yield from size_order_problems(resource.properties, ("MinSize", "DesiredCapacity", "MaxSize"))


# PutScalingPolicy: TargetTrackingConfiguration "Required if the policy type is
# TargetTrackingScaling", StepAdjustments "Required if the policy type is StepScaling",
# ScalingAdjustment "Required if the policy type is SimpleScaling", PredictiveScalingConfiguration
# "Required if the policy type is PredictiveScaling"; each is "Valid only if" its type.
_POLICY_PROPERTY = {
    "SimpleScaling": "ScalingAdjustment",
    "StepScaling": "StepAdjustments",
    "TargetTrackingScaling": "TargetTrackingConfiguration",
    "PredictiveScaling": "PredictiveScalingConfiguration",
}


def _policy_properties(resource: Resource, _: Template) -> Iterator[str]:
    kind = literal_str(resource.prop("PolicyType")) or "SimpleScaling"
    if kind not in _POLICY_PROPERTY:
        return
    needed = _POLICY_PROPERTY[kind]
    if not is_set(resource.prop(needed)):
        yield f"a {kind} policy needs {needed}"
    for other_kind, prop in _POLICY_PROPERTY.items():
        if other_kind != kind and is_set(resource.prop(prop)):
            yield f"{prop} is only valid for {other_kind} policies, not {kind}"


def _group(**props: Any) -> dict[str, Any]:
    base = {
        "MinSize": "1",
        "MaxSize": "3",
        "LaunchTemplate": {"LaunchTemplateId": "lt-0123456789abcdef0", "Version": "1"},
        "VPCZoneIdentifier": ["subnet-0123456789abcdef0"],
    }
    return {"Asg": {"Type": GROUP, "Properties": {**base, **props}}}


def _policy(**props: Any) -> dict[str, Any]:
    return {"Policy": {"Type": POLICY, "Properties": {"AutoScalingGroupName": "appliances", **props}}}


_CPU = {
    "PredefinedMetricSpecification": {"PredefinedMetricType": "ASGAverageCPUUtilization"},
    "TargetValue": 60,
}

RULES: tuple[Rule, ...] = (
    Rule(
        id="ASG-GROUP-SIZES",
        resource_type=GROUP,
        title="MinSize <= DesiredCapacity <= MaxSize",
        doc_url=_API + "API_CreateAutoScalingGroup.html",
        check=_sizes,
        bad=_group(DesiredCapacity="5"),
        good=_group(DesiredCapacity="3"),
    ),
    Rule(
        id="ASG-POLICY-TYPE-PROPERTIES",
        resource_type=POLICY,
        title="A scaling policy has the configuration of its type and no other",
        doc_url=_API + "API_PutScalingPolicy.html",
        check=_policy_properties,
        bad=_policy(PolicyType="TargetTrackingScaling", ScalingAdjustment=1),
        good=_policy(PolicyType="TargetTrackingScaling", TargetTrackingConfiguration=_CPU),
    ),
)
