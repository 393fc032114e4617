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
    "AWS::Grafana::Workspace",
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


def client_listener(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tier's own ALB listener that clients call: not a PrivateLink NLB's in front of it, and
    not the gateway's listener (`Ingress/Gateway-Route`, ADR 0050), which has only model rules."""
    (found,) = [
        (k, v)
        for k, v in resources(template, "AWS::ElasticLoadBalancingV2::Listener").items()
        if k.startswith("Ingress") and not k.startswith("IngressGatewayRoute")
    ]
    return found


def gateway_listener(template: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The listener the gateway calls the models on (`Ingress/Gateway-Route`), if the tier has one:
    the ALB's, not the internal NLB's in front of it (`Ingress/Gateway-Route/Nlb`)."""
    found = [
        (k, v)
        for k, v in resources(template, "AWS::ElasticLoadBalancingV2::Listener").items()
        if k.startswith("IngressGatewayRoute") and not k.startswith("IngressGatewayRouteNlb")
    ]
    assert len(found) <= 1, found
    return found[0] if found else None


def rules_of(template: dict[str, Any], listener_id: str) -> list[dict[str, Any]]:
    """The listener rules of one listener, in template order."""
    return [
        r
        for r in resources(template, "AWS::ElasticLoadBalancingV2::ListenerRule").values()
        if r["Properties"]["ListenerArn"] == {"Ref": listener_id}
    ]


def default_target_group(template: dict[str, Any]) -> str | None:
    """Logical ID of the target group the listener's default action forwards to (the gateway's)."""
    _, listener = client_listener(template)
    forwards = [a for a in listener["Properties"]["DefaultActions"] if a["Type"] == "forward"]
    return forwards[0]["TargetGroupArn"]["Ref"] if forwards else None


def model_target_groups(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Target groups of the per-model routes: every target group but the default route's and those
    of type `alb` (an NLB's in front of the ALB: PrivateLink's, the gateway's)."""
    gateway = default_target_group(template)
    groups = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup")
    return {k: v for k, v in groups.items() if k != gateway and v["Properties"].get("TargetType") != "alb"}


def application_load_balancer(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tier's ALB: not an NLB in front of it (PrivateLink's, the gateway's) nor a GWLB."""
    (found,) = [
        (k, v)
        for k, v in resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").items()
        if v["Properties"].get("Type", "application") == "application"
    ]
    return found


TOKEN_VALUES: dict[tuple[str, str], str] = {
    ("AWS::URLSuffix", ""): "amazonaws.com",
    ("AWS::Region", ""): "us-east-1",
    ("AWS::AccountId", ""): "123456789012",
    ("AWS::Partition", ""): "aws",
    ("AWS::EKS::Cluster", ""): "gpufarm",
    ("AWS::EKS::Cluster", "ClusterSecurityGroupId"): "sg-0123456789abcdef0",
    ("AWS::EC2::VPC", ""): "vpc-0123456789abcdef0",
    ("AWS::IAM::Role", ""): "gpufarm-node-role",
    ("AWS::SQS::Queue", "QueueName"): "gpufarm-interruption",
    ("AWS::ElasticLoadBalancingV2::TargetGroup", ""): (
        "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/vllm/0123456789abcdef"
    ),
    ("AWS::ElasticLoadBalancingV2::LoadBalancer", "DNSName"): (
        "internal-gpufarm-1234567890.us-east-1.elb.amazonaws.com"
    ),
    ("AWS::FSx::FileSystem", ""): "fs-0123456789abcdef0",
    ("AWS::FSx::FileSystem", "DNSName"): "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    ("AWS::FSx::FileSystem", "LustreMountName"): "abcdefgh",
    ("AWS::APS::Workspace", "WorkspaceId"): "ws-01234567-89ab-cdef-0123-456789abcdef",
    (
        "AWS::Bedrock::Guardrail",
        "GuardrailArn",
    ): "arn:aws:bedrock:us-east-1:123456789012:guardrail/abcdefghijkl",
    ("AWS::Bedrock::GuardrailVersion", "Version"): "1",
}
"""(resource type or pseudo parameter, attribute; '' for Ref) -> a value of the shape CloudFormation
resolves it to (the formats of the CloudFormation return values), for checks that need real values
where the template holds a token."""


def resolve(value: Any, template: dict[str, Any]) -> str:
    """A template string property with each token replaced by a value of its resolved shape."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(resolve(p, template) for p in parts)
    if isinstance(value, dict) and ("Ref" in value or "Fn::GetAtt" in value):
        logical_id, attribute = (value["Ref"], "") if "Ref" in value else value["Fn::GetAtt"]
        type_name = (
            template["Resources"][logical_id]["Type"] if logical_id in template["Resources"] else logical_id
        )
        assert (type_name, attribute) in TOKEN_VALUES, f"no sample value for {type_name} {attribute or 'Ref'}"
        return TOKEN_VALUES[(type_name, attribute)]
    raise AssertionError(f"unexpected token in manifest: {value!r}")


def resolved_manifests(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Kubernetes object the stack applies, with tokens replaced by values of their shape."""
    out: list[dict[str, Any]] = []
    for resource in resources(template, KUBERNETES_RESOURCE).values():
        out += json.loads(resolve(resource["Properties"]["Manifest"], template))
    return out


HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"


def helm_releases(template: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(chart, version, values) of every Helm release the stack pulls from a repository; tokens resolved.

    gpufarm's own CRD charts (shipped as assets, `ChartAssetURL`, no values) are not upstream
    releases and are left out.
    """
    return sorted(
        (
            p["Chart"],
            p["Version"],
            json.loads(resolve(p["Values"], template)) if "Values" in p else {},
        )
        for p in (r["Properties"] for r in resources(template, HELM_CHART).values())
        if "Chart" in p
    )
