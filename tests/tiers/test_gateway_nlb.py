"""On the internet-facing tiers the gateway calls the models' routes through an internal NLB (ADR 0050).

Production and enterprise put the ALB in the public subnets; its DNS name resolves to public
addresses. Their gateway reaches the ALB's gateway listener through an internal NLB whose target
group of type `alb` registers the ALB on that port, and the web ACL's rate rule no longer counts
the VPC's addresses.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import load_preset
from gpufarm.core.endpoints import GATEWAY_LISTENER_PORT, GatewayRoute, gateway_route, gateway_through_nlb
from gpufarm.k8s.gateway import route_env_name
from tests.tiers.helpers import (
    application_load_balancer,
    client_listener,
    gateway_listener,
    manifest_of,
    only,
    resources,
    rules_of,
)

LOAD_BALANCER = "AWS::ElasticLoadBalancingV2::LoadBalancer"
LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"
TIERS = ("production", "enterprise")


@pytest.fixture(params=TIERS)
def tier(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    return request.param, request.getfixturevalue(f"{request.param}_template")


def _application_lb(template: dict[str, Any]) -> str:
    return application_load_balancer(template)[0]


def _gateway_nlb(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, v)
        for k, v in resources(template, LOAD_BALANCER).items()
        if k.startswith("IngressGatewayRouteNlb")
    ]
    return found


def _sg_of(template: dict[str, Any], load_balancer: str) -> Any:
    (group,) = template["Resources"][load_balancer]["Properties"]["SecurityGroups"]
    return group


def _ingress_on_port(template: dict[str, Any], group: Any) -> list[Any]:
    return [
        r["Properties"]["SourceSecurityGroupId"]
        for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == group and r["Properties"]["FromPort"] == GATEWAY_LISTENER_PORT
    ]


def test_the_presets_take_the_load_balancer_route_through_an_nlb() -> None:
    for name in TIERS:
        preset = load_preset(name)
        assert gateway_route(preset) is GatewayRoute.LOAD_BALANCER
        assert gateway_through_nlb(preset)


def test_an_internal_nlb_in_the_private_subnets_forwards_the_gateway_port_to_the_alb(
    tier: tuple[str, dict[str, Any]],
) -> None:
    _, template = tier
    alb = _application_lb(template)
    nlb_id, nlb = _gateway_nlb(template)
    props = nlb["Properties"]
    assert (props["Type"], props["Scheme"]) == ("network", "internal")
    subnets = {s["Ref"] for s in props["Subnets"]}
    assert subnets and all("PrivateSubnet" in s for s in subnets)
    (listener,) = [
        v["Properties"]
        for v in resources(template, LISTENER).values()
        if v["Properties"]["LoadBalancerArn"] == {"Ref": nlb_id}
    ]
    assert (listener["Protocol"], listener["Port"]) == ("TCP", GATEWAY_LISTENER_PORT)
    (action,) = listener["DefaultActions"]
    group_id = action["TargetGroupArn"]["Ref"]
    group = template["Resources"][group_id]
    assert {
        k: group["Properties"][k]
        for k in ("TargetType", "Protocol", "Port", "HealthCheckProtocol", "Targets")
    } == {
        "TargetType": "alb",
        "Protocol": "TCP",
        "Port": GATEWAY_LISTENER_PORT,
        "HealthCheckProtocol": "HTTP",
        "Targets": [{"Id": {"Ref": alb}, "Port": GATEWAY_LISTENER_PORT}],
    }
    assert "TargetGroupAttributes" not in group["Properties"]
    # The ALB listens on the port before it is registered there.
    gateway_id, gateway = gateway_listener(template) or ("", {})
    assert gateway["Properties"]["LoadBalancerArn"] == {"Ref": alb}
    assert gateway_id in group["DependsOn"]


def test_the_alb_gateway_listener_has_the_client_listeners_model_routes(
    tier: tuple[str, dict[str, Any]],
) -> None:
    _, template = tier
    found = gateway_listener(template)
    assert found is not None
    listener_id, listener = found
    assert (listener["Properties"]["Protocol"], listener["Properties"]["Port"]) == (
        "HTTP",
        GATEWAY_LISTENER_PORT,
    )
    same = ("Conditions", "Transforms", "Priority")
    client = sorted(
        ({k: r["Properties"][k] for k in same} for r in rules_of(template, client_listener(template)[0])),
        key=lambda r: r["Priority"],
    )
    gateway = sorted(
        ({k: r["Properties"][k] for k in same} for r in rules_of(template, listener_id)),
        key=lambda r: r["Priority"],
    )
    assert gateway == client
    # Forward to the same target groups, without the client listener's authentication (if any).
    for rule in rules_of(template, listener_id):
        assert [a["Type"] for a in rule["Properties"]["Actions"]] == ["forward"]


def test_only_the_pods_reach_the_nlb_and_only_the_nlb_reaches_the_alb_gateway_port(
    tier: tuple[str, dict[str, Any]],
) -> None:
    _, template = tier
    alb_sg = _sg_of(template, _application_lb(template))
    nlb_id, _ = _gateway_nlb(template)
    nlb_sg = _sg_of(template, nlb_id)
    cluster_sg = {"Fn::GetAtt": [only(template, "AWS::EKS::Cluster")[0], "ClusterSecurityGroupId"]}
    # The NLB's group holds its two rules inline: the pods in, the ALB's group out, on the port.
    group = template["Resources"][nlb_sg["Fn::GetAtt"][0]]["Properties"]
    assert [
        (r["SourceSecurityGroupId"], r["IpProtocol"], r["FromPort"], r["ToPort"])
        for r in group["SecurityGroupIngress"]
    ] == [(cluster_sg, "tcp", GATEWAY_LISTENER_PORT, GATEWAY_LISTENER_PORT)]
    assert [
        (r["DestinationSecurityGroupId"], r["IpProtocol"], r["FromPort"], r["ToPort"])
        for r in group["SecurityGroupEgress"]
    ] == [(alb_sg, "tcp", GATEWAY_LISTENER_PORT, GATEWAY_LISTENER_PORT)]
    assert _ingress_on_port(template, nlb_sg) == []
    # The ALB's gateway port admits the NLB's group only (its public addresses see no pod).
    assert _ingress_on_port(template, alb_sg) == [nlb_sg]


def test_the_gateway_pods_call_each_model_on_the_nlb(tier: tuple[str, dict[str, Any]]) -> None:
    name, template = tier
    nlb_id, _ = _gateway_nlb(template)
    container = manifest_of(template, "Deployment", "gateway")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    for model in load_preset(name).models:
        assert (
            env[route_env_name(model)]
            == f"http://<GetAtt:{nlb_id}.DNSName>:{GATEWAY_LISTENER_PORT}/{model.name}/v1"
        )


def test_the_rate_rule_does_not_count_the_vpc(tier: tuple[str, dict[str, Any]]) -> None:
    name, template = tier
    (ip_set_id, ip_set) = only(template, "AWS::WAFv2::IPSet")
    assert ip_set["Properties"]["Addresses"] == [load_preset(name).network.cidr]
    assert (ip_set["Properties"]["Scope"], ip_set["Properties"]["IPAddressVersion"]) == ("REGIONAL", "IPV4")
    _, acl = only(template, "AWS::WAFv2::WebACL")
    (rate,) = [r for r in acl["Properties"]["Rules"] if "RateBasedStatement" in r["Statement"]]
    assert rate["Statement"]["RateBasedStatement"]["ScopeDownStatement"] == {
        "NotStatement": {
            "Statement": {"IPSetReferenceStatement": {"Arn": {"Fn::GetAtt": [ip_set_id, "Arn"]}}}
        }
    }
    # The managed rule groups still inspect every request, the gateway's included.
    assert all(
        "ScopeDownStatement" not in r["Statement"].get("ManagedRuleGroupStatement", {})
        for r in acl["Properties"]["Rules"]
    )


def test_enterprise_alb_is_the_target_of_two_nlbs_privatelink_and_the_gateways(
    enterprise_template: dict[str, Any],
) -> None:
    alb = _application_lb(enterprise_template)
    groups = {
        k
        for k, v in resources(enterprise_template, TARGET_GROUP).items()
        if v["Properties"].get("TargetType") == "alb" and v["Properties"]["Targets"][0]["Id"] == {"Ref": alb}
    }
    nlbs = {
        v["Properties"]["LoadBalancerArn"]["Ref"]
        for v in resources(enterprise_template, LISTENER).values()
        if any(a.get("TargetGroupArn", {}).get("Ref") in groups for a in v["Properties"]["DefaultActions"])
    }
    assert len(nlbs) == 2
    assert {n.startswith("IngressGatewayRouteNlb") for n in nlbs} == {True, False}
