"""The ALB listener the gateway calls the models on: the same routes and target groups, pods only."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from gpufarm.config import AccessLogsConfig, IngressConfig, LoadBalancerScheme
from gpufarm.config.model import NlbConfig, OidcAuthConfig, WafConfig
from gpufarm.constructs import InferenceAlb, InferenceNlb
from tests.constructs.helpers import CLUSTER_NAME, logical_id, new_stack, new_vpc, ref, resources

LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
PORT = 8088


def _alb(name: str, config: IngressConfig) -> tuple[InferenceAlb, ec2.SecurityGroup]:
    stack = new_stack(name)
    vpc = new_vpc(stack)
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        model_names=["qwen3-8b", "llama"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
        rule_priorities={"qwen3-8b": 10, "llama": 20},
        weights={"llama": {"h100": 3, "l40s": 1}},
    )
    return alb, ec2.SecurityGroup(stack, "Pods", vpc=vpc)


@pytest.fixture(scope="module")
def built() -> tuple[InferenceAlb, ec2.SecurityGroup, str, Template]:
    """Internal, with OIDC on the client listener, one plain and one weighted model."""
    oidc = OidcAuthConfig(
        issuer="https://idp.example.com",
        authorization_endpoint="https://idp.example.com/authorize",
        token_endpoint="https://idp.example.com/token",
        user_info_endpoint="https://idp.example.com/userinfo",
        client_id="gpufarm",
        client_secret="gpufarm/oidc-client",
    )
    config = IngressConfig(
        certificate_arn=CERTIFICATE, oidc=oidc, access_logs=AccessLogsConfig(enabled=False)
    )
    alb, pods = _alb("GatewayListener", config)
    url = alb.add_gateway_listener(port=PORT, callers=pods)
    return alb, pods, url, Template.from_stack(alb.load_balancer.stack)


def _gateway_rules(alb: InferenceAlb, template: Template) -> dict[str, Any]:
    assert alb.gateway_listener is not None
    listener = logical_id(alb.gateway_listener)
    return {
        rule["Properties"]["Conditions"][0]["PathPatternConfig"]["Values"][0]: rule["Properties"]
        for rule in resources(template, RULE).values()
        if rule["Properties"]["ListenerArn"] == {"Ref": listener}
    }


def test_the_listener_is_plain_http_on_its_port_with_the_404(built: Any) -> None:
    alb, _, url, template = built
    props = template.to_json()["Resources"][logical_id(alb.gateway_listener)]["Properties"]
    assert (
        props["Port"],
        props["Protocol"],
        props["DefaultActions"][0]["FixedResponseConfig"]["StatusCode"],
    ) == (
        PORT,
        "HTTP",
        "404",
    )
    assert url == f"http://{alb.dns_name}:{PORT}"


def test_each_model_route_forwards_to_its_own_target_groups_without_authentication(built: Any) -> None:
    alb, _, _, template = built
    rules = _gateway_rules(alb, template)
    assert sorted(rules) == ["/llama/*", "/qwen3-8b/*"]
    assert rules["/qwen3-8b/*"]["Priority"] == 10
    assert rules["/qwen3-8b/*"]["Actions"] == [
        {"Type": "forward", "TargetGroupArn": ref(alb.target_groups["qwen3-8b"])}
    ]
    weighted = rules["/llama/*"]["Actions"][0]["ForwardConfig"]["TargetGroups"]
    groups = alb.weighted_target_groups["llama"]
    assert weighted == [
        {"TargetGroupArn": ref(groups["h100"]), "Weight": 3},
        {"TargetGroupArn": ref(groups["l40s"]), "Weight": 1},
    ]
    assert rules["/llama/*"]["Transforms"][0]["UrlRewriteConfig"]["Rewrites"] == [
        {"Regex": "^/llama/(.*)$", "Replace": "/$1"}
    ]


def test_only_the_callers_security_group_reaches_the_listener_port(built: Any) -> None:
    alb, pods, _, template = built
    sg = logical_id(alb.security_group)
    on_port = [
        r["Properties"]
        for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg, "GroupId"]}
        and r["Properties"]["FromPort"] == PORT
    ]
    inline = [
        r
        for r in template.to_json()["Resources"][sg]["Properties"].get("SecurityGroupIngress", [])
        if r["FromPort"] == PORT
    ]
    assert inline == []
    assert [(r["SourceSecurityGroupId"], r["ToPort"]) for r in on_port] == [
        ({"Fn::GetAtt": [logical_id(pods), "GroupId"]}, PORT)
    ]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("client-port", "'port' must differ from the client listener's port 80, got 80"),
        ("twice", "add_gateway_listener() was already called: the gateway has one listener"),
    ],
)
def test_invalid_use_is_refused_with_an_exact_message(case: str, message: str) -> None:
    config = IngressConfig(access_logs=AccessLogsConfig(enabled=False))
    alb, pods = _alb(f"Refused{case.title().replace('-', '')}", config)
    if case == "twice":
        alb.add_gateway_listener(port=PORT, callers=pods)
    with pytest.raises(ValueError) as excinfo:
        alb.add_gateway_listener(port=80 if case == "client-port" else PORT, callers=pods)
    assert str(excinfo.value) == message


def _vpc(alb: InferenceAlb) -> ec2.IVpc:
    vpc = alb.load_balancer.vpc
    assert vpc is not None
    return vpc


@pytest.fixture(scope="module")
def internet_facing() -> tuple[InferenceAlb, ec2.SecurityGroup, str, Template]:
    """Internet-facing behind WAF, as production: the gateway reaches the listener through an NLB."""
    config = IngressConfig(
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        allowed_cidrs=["192.0.2.0/24"],
        access_logs=AccessLogsConfig(enabled=False),
        waf=WafConfig(enabled=True),
    )
    alb, pods = _alb("GatewayListenerPublic", config)
    url = alb.add_gateway_listener(port=PORT, callers=pods)
    return alb, pods, url, Template.from_stack(alb.load_balancer.stack)


def test_an_internet_facing_alb_is_called_through_an_internal_nlb(internet_facing: Any) -> None:
    alb, _, url, template = internet_facing
    nlb = alb.gateway_nlb
    assert nlb is not None
    assert url == f"http://{nlb.dns_name}:{PORT}"
    resolved = alb.load_balancer.stack.resolve(url)
    assert resolved == {
        "Fn::Join": ["", ["http://", {"Fn::GetAtt": [logical_id(nlb.load_balancer), "DNSName"]}, f":{PORT}"]]
    }
    props = template.to_json()["Resources"][logical_id(nlb.load_balancer)]["Properties"]
    assert (props["Type"], props["Scheme"]) == ("network", "internal")
    assert {s["Ref"] for s in props["Subnets"]} == {
        alb.load_balancer.stack.resolve(s.subnet_id)["Ref"] for s in _vpc(alb).private_subnets
    }
    nlb_listener = template.to_json()["Resources"][logical_id(nlb.listener)]["Properties"]
    assert (nlb_listener["Protocol"], nlb_listener["Port"]) == ("TCP", PORT)
    assert nlb_listener["DefaultActions"] == [{"Type": "forward", "TargetGroupArn": ref(nlb.target_group)}]
    group = template.to_json()["Resources"][logical_id(nlb.target_group)]
    assert group["Properties"]["TargetType"] == "alb"
    assert group["Properties"]["Targets"] == [{"Id": ref(alb.load_balancer), "Port": PORT}]
    assert group["DependsOn"] == [logical_id(alb.gateway_listener)]


def test_on_an_internet_facing_alb_only_the_nlb_reaches_the_listener_and_only_the_pods_reach_the_nlb(
    internet_facing: Any,
) -> None:
    alb, pods, _, template = internet_facing
    assert alb.gateway_nlb is not None

    def sources(group: ec2.SecurityGroup) -> list[Any]:
        gid = {"Fn::GetAtt": [logical_id(group), "GroupId"]}
        return [
            r["Properties"]["SourceSecurityGroupId"]
            for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()
            if r["Properties"]["GroupId"] == gid and r["Properties"]["FromPort"] == PORT
        ]

    nlb_group = alb.gateway_nlb.group
    assert sources(alb.security_group) == [{"Fn::GetAtt": [logical_id(nlb_group), "GroupId"]}]
    props = template.to_json()["Resources"][logical_id(nlb_group)]["Properties"]
    assert [
        (r["SourceSecurityGroupId"], r["FromPort"], r["ToPort"]) for r in props["SecurityGroupIngress"]
    ] == [({"Fn::GetAtt": [logical_id(pods), "GroupId"]}, PORT, PORT)]
    assert [
        (r["DestinationSecurityGroupId"], r["FromPort"], r["ToPort"]) for r in props["SecurityGroupEgress"]
    ] == [({"Fn::GetAtt": [logical_id(alb.security_group), "GroupId"]}, PORT, PORT)]


def test_a_web_acl_stops_counting_the_vpc_once_the_gateway_calls_the_alb(internet_facing: Any) -> None:
    alb, _, _, template = internet_facing
    assert alb.waf is not None and alb.waf.exempt_ip_set is not None
    (ip_set,) = resources(template, "AWS::WAFv2::IPSet").values()
    assert ip_set["Properties"]["Addresses"] == [alb.load_balancer.stack.resolve(_vpc(alb).vpc_cidr_block)]
    (acl,) = resources(template, "AWS::WAFv2::WebACL").values()
    (rate,) = [r for r in acl["Properties"]["Rules"] if r["Name"] == "RateLimitPerIp"]
    assert "ScopeDownStatement" in rate["Statement"]["RateBasedStatement"]


def test_an_internal_alb_needs_no_nlb(built: Any) -> None:
    alb, _, _, template = built
    assert alb.gateway_nlb is None
    assert [
        r
        for r in resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
        if r["Properties"].get("Type") == "network"
    ] == []


def test_an_nlb_refuses_the_gateway_listener() -> None:
    stack = new_stack("GatewayListenerNlb")
    vpc = new_vpc(stack)
    nlb = InferenceNlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=IngressConfig(kind="nlb", waf=WafConfig(enabled=False), nlb=NlbConfig(tls=False)),
        listeners={"qwen3-8b": 8443},
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    with pytest.raises(ValueError) as excinfo:
        nlb.add_gateway_listener(port=PORT, callers=ec2.SecurityGroup(stack, "Pods", vpc=vpc))
    assert str(excinfo.value) == (
        "add_gateway_listener() needs an Application Load Balancer (an NLB balances connections, "
        "not outstanding requests), got kind 'nlb'"
    )
