"""Helpers for reading synthesized templates: resources by type, manifests, logical IDs."""

from __future__ import annotations

import json
from typing import Any

STATEFUL_TYPES = (
    "AWS::EC2::VPC",
    "AWS::EKS::Cluster",
    "AWS::KMS::Key",
    "AWS::S3::Bucket",
    "AWS::Logs::LogGroup",
    "AWS::ElasticLoadBalancingV2::LoadBalancer",
    "AWS::ElasticLoadBalancingV2::TargetGroup",
    "AWS::FSx::FileSystem",
    "AWS::APS::Workspace",
)
"""Resources whose replacement loses data or drops traffic: their logical IDs are API."""

KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"


def resources(template: dict[str, Any], type_name: str) -> dict[str, dict[str, Any]]:
    """Logical ID -> resource, for every resource of a type."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_name}


def only(template: dict[str, Any], type_name: str) -> tuple[str, dict[str, Any]]:
    """The single resource of a type (fails when there are none or several)."""
    found = resources(template, type_name)
    assert len(found) == 1, f"expected one {type_name}, got {sorted(found)}"
    return next(iter(found.items()))


def flatten(value: Any) -> str:
    """A manifest property as text; CloudFormation tokens become '<Ref:ID>' / '<GetAtt:ID.Attr>'."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(flatten(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<Ref:{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"<GetAtt:{'.'.join(value['Fn::GetAtt'])}>"
    raise AssertionError(f"unexpected token in manifest: {value!r}")


def manifests(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Kubernetes object the stack applies through the kubectl provider."""
    out: list[dict[str, Any]] = []
    for resource in resources(template, KUBERNETES_RESOURCE).values():
        out += json.loads(flatten(resource["Properties"]["Manifest"]))
    return out


def manifest_of(template: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    """One Kubernetes object by kind and name."""
    found = [m for m in manifests(template) if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, got {len(found)}"
    return found[0]


def stateful_logical_ids(template: dict[str, Any]) -> dict[str, list[str]]:
    """Type -> sorted logical IDs of the stateful resources."""
    return {t: sorted(resources(template, t)) for t in STATEFUL_TYPES if resources(template, t)}


def default_target_group(template: dict[str, Any]) -> str | None:
    """Logical ID of the target group the listener's default action forwards to (the gateway's)."""
    # The tier's own ALB listener (a PrivateLink NLB in front of it has listeners of its own).
    (listener,) = [
        v
        for k, v in resources(template, "AWS::ElasticLoadBalancingV2::Listener").items()
        if k.startswith("Ingress")
    ]
    forwards = [a for a in listener["Properties"]["DefaultActions"] if a["Type"] == "forward"]
    return forwards[0]["TargetGroupArn"]["Ref"] if forwards else None


def model_target_groups(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Target groups of the per-model routes: every target group but the default route's."""
    gateway = default_target_group(template)
    groups = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup")
    return {k: v for k, v in groups.items() if k != gateway}
