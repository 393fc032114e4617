"""Application Auto Scaling: what RegisterScalableTarget and PutScalingPolicy refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.checks import is_set
from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str
from gpufarm.deploy_rules.shapes import resource

TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
POLICY = "AWS::ApplicationAutoScaling::ScalingPolicy"

_API = "https://docs.aws.amazon.com/autoscaling/application/APIReference/"

_ZERO_MINIMUM = ("sagemaker",)
"""Namespaces of the resources gpufarm scales whose minimum may be 0 (RegisterScalableTarget,
MinCapacity: "For the following resources, the minimum value allowed is 0 ... SageMaker endpoint
variants, SageMaker inference components ...")."""

# PutScalingPolicy: TargetTrackingScalingPolicyConfiguration "is required if you are creating a
# policy and the policy type is TargetTrackingScaling"; StepScalingPolicyConfiguration "is
# required if ... the policy type is StepScaling".
_POLICY_PROPERTY = {
    "TargetTrackingScaling": "TargetTrackingScalingPolicyConfiguration",
    "StepScaling": "StepScalingPolicyConfiguration",
}


def _capacity(res: Resource, _: Template) -> Iterator[str]:
    low, high = literal_int(res.prop("MinCapacity")), literal_int(res.prop("MaxCapacity"))
    if low is not None and high is not None and low > high:
        yield f"MinCapacity {low} is above MaxCapacity {high}"
    namespace = literal_str(res.prop("ServiceNamespace"))
    if low is not None and low < 1 and namespace not in _ZERO_MINIMUM:
        yield f"MinCapacity {low}: only some namespaces allow 0, not {namespace!r}"


def _policy_configuration(res: Resource, _: Template) -> Iterator[str]:
    kind = literal_str(res.prop("PolicyType"))
    if kind not in _POLICY_PROPERTY:
        return
    needed = _POLICY_PROPERTY[kind]
    if not is_set(res.prop(needed)):
        yield f"a {kind} policy needs {needed}"


def _target(**props: Any) -> dict[str, Any]:
    base = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "inference-component/poc-qwen3-8b",
        "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
        "MinCapacity": 0,
        "MaxCapacity": 2,
    }
    return {"T": resource(TARGET, **{**base, **props})}


RULES: tuple[Rule, ...] = (
    Rule(
        id="APPSCALING-TARGET-CAPACITY",
        resource_type=TARGET,
        title="A scalable target's minimum is at most its maximum, and 0 only where the API allows it",
        doc_url=f"{_API}API_RegisterScalableTarget.html",
        check=_capacity,
        bad=_target(MinCapacity=3),
        good=_target(),
    ),
    Rule(
        id="APPSCALING-POLICY-CONFIGURATION",
        resource_type=POLICY,
        title="A target tracking or step policy carries its configuration",
        doc_url=f"{_API}API_PutScalingPolicy.html",
        check=_policy_configuration,
        bad={"P": resource(POLICY, PolicyName="p", PolicyType="StepScaling", ScalingTargetId="t")},
        good={
            "P": resource(
                POLICY,
                PolicyName="p",
                PolicyType="StepScaling",
                ScalingTargetId="t",
                StepScalingPolicyConfiguration={
                    "AdjustmentType": "ChangeInCapacity",
                    "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
                },
            )
        },
    ),
)
