"""Amazon EC2 Auto Scaling: rules the Auto Scaling API enforces on groups, scaling policies and warm pools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.checks import is_set, items, size_order_problems
from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str, ref_target

GROUP = "AWS::AutoScaling::AutoScalingGroup"
POLICY = "AWS::AutoScaling::ScalingPolicy"
WARM_POOL = "AWS::AutoScaling::WarmPool"

HOOK_TIMEOUT_RANGE = (30, 7200)
"""PutLifecycleHook, HeartbeatTimeout: "The range is from 30 to 7200 seconds."""

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


def _launch_source(resource: Resource, _: Template) -> Iterator[str]:
    # MixedInstancesPolicy: "When you create your Auto Scaling group, you can specify a launch
    # configuration or template as a parameter for the top-level object, or you can specify a
    # mixed instances policy, but not both at the same time."
    if is_set(resource.prop("MixedInstancesPolicy")):
        for prop in ("LaunchTemplate", "LaunchConfigurationName"):
            if is_set(resource.prop(prop)):
                yield f"{prop} and MixedInstancesPolicy are both set; a group takes one"


def _hook_timeouts(resource: Resource, _: Template) -> Iterator[str]:
    low, high = HOOK_TIMEOUT_RANGE
    for hook in items(resource.prop("LifecycleHookSpecificationList")):
        if not isinstance(hook, dict):
            continue
        timeout = literal_int(hook.get("HeartbeatTimeout"))
        if timeout is not None and not low <= timeout <= high:
            name = hook.get("LifecycleHookName", "?")
            yield f"lifecycle hook {name!r} has HeartbeatTimeout {timeout}; the API takes {low} to {high} s"


def _group_named(template: Template, value: Any) -> Resource | None:
    """The group a policy or warm pool names: by `Ref`, or by its literal AutoScalingGroupName."""
    target = template.get(ref_target(value))
    if target is not None and target.type == GROUP:
        return target
    name = literal_str(value)
    if name is None:
        return None
    return next(
        (g for g in template.of_type(GROUP) if literal_str(g.prop("AutoScalingGroupName")) == name), None
    )


def _warm_pool_without_spot(resource: Resource, template: Template) -> Iterator[str]:
    # PutWarmPool: "This operation cannot be called on an Auto Scaling group that has a mixed
    # instances policy or a launch template or launch configuration that requests Spot Instances."
    group = _group_named(template, resource.prop("AutoScalingGroupName"))
    if group is not None and is_set(group.prop("MixedInstancesPolicy")):
        yield f"group {group.logical_id} has a mixed instances policy, which a warm pool cannot join"


def _resource_label(resource: Resource, template: Template) -> Iterator[str]:
    # PredefinedMetricSpecification, ResourceLabel: "You can't specify a resource label unless the
    # target group is attached to the Auto Scaling group."
    config = resource.prop("TargetTrackingConfiguration")
    spec = config.get("PredefinedMetricSpecification") if isinstance(config, dict) else None
    if not isinstance(spec, dict) or not is_set(spec.get("ResourceLabel")):
        return
    group = _group_named(template, resource.prop("AutoScalingGroupName"))
    if group is not None and not items(group.prop("TargetGroupARNs")):
        yield f"the policy names a target group (ResourceLabel); group {group.logical_id} has none attached"


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


_MIXED = {
    "LaunchTemplate": {
        "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-0123456789abcdef0", "Version": "1"}
    },
    "InstancesDistribution": {"OnDemandBaseCapacity": 1},
}

_REQUESTS = {
    "PredefinedMetricSpecification": {
        "PredefinedMetricType": "ALBRequestCountPerTarget",
        "ResourceLabel": "app/lb/0123456789abcdef/targetgroup/tg/0123456789abcdef",
    },
    "TargetValue": 100,
}

_CPU = {
    "PredefinedMetricSpecification": {"PredefinedMetricType": "ASGAverageCPUUtilization"},
    "TargetValue": 60,
}


def _with_group(group: dict[str, Any], **other: Any) -> dict[str, Any]:
    return {"Asg": group["Asg"], **other}


RULES: tuple[Rule, ...] = (
    Rule(
        id="ASG-LAUNCH-SOURCE",
        resource_type=GROUP,
        title="A launch template (or configuration) or a mixed instances policy, not both",
        doc_url=_API + "API_MixedInstancesPolicy.html",
        check=_launch_source,
        bad=_group(MixedInstancesPolicy=_MIXED),
        good=_with_group(
            {
                "Asg": {
                    "Type": GROUP,
                    "Properties": {"MinSize": "1", "MaxSize": "3", "MixedInstancesPolicy": _MIXED},
                }
            }
        ),
    ),
    Rule(
        id="ASG-HOOK-TIMEOUT",
        resource_type=GROUP,
        title="A lifecycle hook's HeartbeatTimeout is 30 to 7200 seconds",
        doc_url=_API + "API_PutLifecycleHook.html",
        check=_hook_timeouts,
        bad=_group(
            LifecycleHookSpecificationList=[
                {
                    "LifecycleHookName": "drain",
                    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                    "HeartbeatTimeout": 9000,
                }
            ]
        ),
        good=_group(
            LifecycleHookSpecificationList=[
                {
                    "LifecycleHookName": "drain",
                    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                    "HeartbeatTimeout": 600,
                }
            ]
        ),
    ),
    Rule(
        id="ASG-WARM-POOL-NO-MIXED",
        resource_type=WARM_POOL,
        title="A warm pool only on a group without a mixed instances policy (no spot)",
        doc_url=_API + "API_PutWarmPool.html",
        check=_warm_pool_without_spot,
        bad={
            "Asg": {
                "Type": GROUP,
                "Properties": {
                    "AutoScalingGroupName": "gpus",
                    "MinSize": "1",
                    "MaxSize": "3",
                    "MixedInstancesPolicy": _MIXED,
                },
            },
            "Warm": {"Type": WARM_POOL, "Properties": {"AutoScalingGroupName": "gpus", "MinSize": 1}},
        },
        good={
            **_group(AutoScalingGroupName="gpus"),
            "Warm": {"Type": WARM_POOL, "Properties": {"AutoScalingGroupName": "gpus", "MinSize": 1}},
        },
    ),
    Rule(
        id="ASG-POLICY-RESOURCE-LABEL",
        resource_type=POLICY,
        title="A policy's ResourceLabel names a target group attached to its group",
        doc_url=_API + "API_PredefinedMetricSpecification.html",
        check=_resource_label,
        bad={
            **_group(AutoScalingGroupName="gpus"),
            "Policy": {
                "Type": POLICY,
                "Properties": {
                    "AutoScalingGroupName": "gpus",
                    "PolicyType": "TargetTrackingScaling",
                    "TargetTrackingConfiguration": _REQUESTS,
                },
            },
        },
        good={
            **_group(AutoScalingGroupName="gpus", TargetGroupARNs=["arn:aws:elasticloadbalancing:tg"]),
            "Policy": {
                "Type": POLICY,
                "Properties": {
                    "AutoScalingGroupName": "gpus",
                    "PolicyType": "TargetTrackingScaling",
                    "TargetTrackingConfiguration": _REQUESTS,
                },
            },
        },
    ),
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
