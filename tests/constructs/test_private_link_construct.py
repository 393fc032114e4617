"""InferencePrivateLink: endpoint service on the tier's NLB, or on an NLB chained in front of the ALB."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk.assertions import Template

from gpufarm.config import AccessLogsConfig, IngressConfig
from gpufarm.config.model import NlbConfig, PrivateLinkConfig, WafConfig
from gpufarm.constructs import InferenceAlb, enable_compliance_checks
from gpufarm.constructs.nlb import InferenceNlb
from gpufarm.constructs.private_link import InferencePrivateLink
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import (
    AZS,
    CLUSTER_NAME,
    REGION,
    logical_id,
    new_stack,
    new_vpc,
    ref,
    resources,
)

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
PRINCIPALS = ["arn:aws:iam::123456789012:root", "arn:aws:iam::210987654321:role/inference-consumer"]
LB = "AWS::ElasticLoadBalancingV2::LoadBalancer"
LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"
SERVICE = "AWS::EC2::VPCEndpointService"
PERMISSIONS = "AWS::EC2::VPCEndpointServicePermissions"
NO_WAF = WafConfig(enabled=False)


@dataclass(frozen=True)
class OnNlb:
    link: InferencePrivateLink
    nlb: InferenceNlb
    template: Template


@dataclass(frozen=True)
class OnAlb:
    link: InferencePrivateLink
    alb: InferenceAlb
    template: Template
    vpc: ec2.Vpc


@pytest.fixture(scope="module")
def on_nlb() -> OnNlb:
    """The tier's internal TCP NLB offered through PrivateLink, acceptance required (default)."""
    stack = new_stack("NlbLink")
    vpc = new_vpc(stack)
    config = IngressConfig(
        kind="nlb",
        waf=NO_WAF,
        nlb=NlbConfig(tls=False),
        private_link=PrivateLinkConfig(enabled=True, allowed_principals=PRINCIPALS),
    )
    nlb = InferenceNlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        listeners={"m1": 8080},
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    link = InferencePrivateLink(
        stack, "PrivateLink", config=config.private_link, load_balancer=nlb.load_balancer
    )
    return OnNlb(link, nlb, Template.from_stack(stack))


@pytest.fixture(scope="module")
def on_alb() -> OnAlb:
    """An internal HTTPS ALB fronted by a PrivateLink NLB on 443; connections accepted automatically."""
    stack = new_stack("AlbLink")
    vpc = new_vpc(stack)
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=IngressConfig(
            certificate_arn=CERTIFICATE,
            access_logs=AccessLogsConfig(enabled=False),
            waf=WafConfig(enabled=False),
        ),
        model_names=["m1"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    link = InferencePrivateLink(
        stack,
        "PrivateLink",
        config=PrivateLinkConfig(enabled=True, allowed_principals=PRINCIPALS[:1], acceptance_required=False),
        vpc=vpc,
        alb=alb.load_balancer,
        ports={alb.listener_port: elbv2.ApplicationProtocol.HTTPS},
    )
    return OnAlb(link, alb, Template.from_stack(stack), vpc)


def _props(template: Template, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = template.to_json()["Resources"][logical_id(construct)]["Properties"]
    return found


def _group_id(construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(construct), "GroupId"]}


# --------------------------------------------------------------------------- endpoint service


def test_endpoint_service_is_backed_by_the_tiers_nlb(on_nlb: OnNlb) -> None:
    props = _props(on_nlb.template, on_nlb.link.service)
    assert props["NetworkLoadBalancerArns"] == [ref(on_nlb.nlb.load_balancer)]
    on_nlb.template.resource_count_is(LB, 1)
    assert on_nlb.link.nlb is None
    assert on_nlb.link.load_balancer is on_nlb.nlb.load_balancer


@pytest.mark.parametrize(("which", "required"), [("on_nlb", True), ("on_alb", False)])
def test_acceptance_follows_the_config(which: str, required: bool, request: pytest.FixtureRequest) -> None:
    built: OnNlb | OnAlb = request.getfixturevalue(which)
    assert _props(built.template, built.link.service)["AcceptanceRequired"] is required


def test_allowed_principals_come_from_the_config(on_nlb: OnNlb) -> None:
    (permissions,) = resources(on_nlb.template, PERMISSIONS).values()
    assert permissions["Properties"] == {
        "ServiceId": ref(on_nlb.link.service),
        "AllowedPrincipals": PRINCIPALS,
    }


def test_service_name_is_the_regional_vpce_name(on_nlb: OnNlb) -> None:
    stack = cdk.Stack.of(on_nlb.link)
    assert stack.resolve(on_nlb.link.service_name) == {
        "Fn::Join": ["", [f"com.amazonaws.vpce.{REGION}.", ref(on_nlb.link.service)]]
    }
    assert stack.resolve(on_nlb.link.service_id) == ref(on_nlb.link.service)


# --------------------------------------------------------------------------- NLB in front of the ALB


def test_an_internal_nlb_fronts_the_alb_in_the_private_subnets(on_alb: OnAlb) -> None:
    nlb = on_alb.link.nlb
    assert nlb is not None
    props = _props(on_alb.template, nlb)
    assert (props["Type"], props["Scheme"]) == ("network", "internal")
    assert sorted(s["Ref"] for s in props["Subnets"]) == sorted(
        ref(s)["Ref"] for s in on_alb.vpc.private_subnets
    )
    assert _props(on_alb.template, on_alb.link.service)["NetworkLoadBalancerArns"] == [ref(nlb)]


def test_tcp_listener_on_the_alb_port_forwards_to_an_alb_target_group(on_alb: OnAlb) -> None:
    target_group = on_alb.link.target_groups[443]
    nlb = on_alb.link.nlb
    assert nlb is not None
    listeners = [
        r["Properties"]
        for r in resources(on_alb.template, LISTENER).values()
        if r["Properties"]["LoadBalancerArn"] == ref(nlb)
    ]
    assert listeners == [
        {
            "LoadBalancerArn": ref(nlb),
            "Port": 443,
            "Protocol": "TCP",
            "DefaultActions": [{"Type": "forward", "TargetGroupArn": ref(target_group)}],
        }
    ]


def test_alb_target_group_registers_the_alb_on_its_listener_port(on_alb: OnAlb) -> None:
    props = _props(on_alb.template, on_alb.link.target_groups[443])
    assert (props["TargetType"], props["Protocol"], props["Port"]) == ("alb", "TCP", 443)
    assert props["Targets"] == [{"Id": ref(on_alb.alb.load_balancer), "Port": 443}]
    assert "TargetGroupAttributes" not in props  # an alb target group's attributes cannot be changed


def test_alb_target_group_health_checks_the_alb_over_its_protocol(on_alb: OnAlb) -> None:
    props = _props(on_alb.template, on_alb.link.target_groups[443])
    assert (props["HealthCheckProtocol"], props["HealthCheckPath"], props["Matcher"]) == (
        "HTTPS",
        "/",
        {"HttpCode": "200-499"},
    )


def test_alb_target_group_waits_for_the_alb_listener(on_alb: OnAlb) -> None:
    found = on_alb.template.to_json()["Resources"][logical_id(on_alb.link.target_groups[443])]
    assert found["DependsOn"] == [logical_id(on_alb.alb.listener)]


def test_only_private_link_traffic_reaches_the_fronting_nlb(on_alb: OnAlb) -> None:
    nlb = on_alb.link.nlb
    assert nlb is not None
    props = _props(on_alb.template, nlb)
    assert props["EnforceSecurityGroupInboundRulesOnPrivateLinkTraffic"] == "off"
    (group,) = nlb.connections.security_groups
    assert "SecurityGroupIngress" not in _props(on_alb.template, group)


def test_the_alb_admits_the_fronting_nlb_on_its_listener_port(on_alb: OnAlb) -> None:
    nlb = on_alb.link.nlb
    assert nlb is not None
    (nlb_group,) = nlb.connections.security_groups
    ingress = [
        r["Properties"]
        for r in resources(on_alb.template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == _group_id(on_alb.alb.security_group)
    ]
    assert [(r["FromPort"], r["ToPort"], r["SourceSecurityGroupId"]) for r in ingress] == [
        (443, 443, _group_id(nlb_group))
    ]
    egress = [
        r["Properties"]
        for r in resources(on_alb.template, "AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"]["GroupId"] == _group_id(nlb_group)
    ]
    assert [(r["FromPort"], r["DestinationSecurityGroupId"]) for r in egress] == [
        (443, _group_id(on_alb.alb.security_group))
    ]


# --------------------------------------------------------------------------- invalid input

ENABLED = PrivateLinkConfig(enabled=True, allowed_principals=PRINCIPALS)


@pytest.mark.parametrize(
    ("config", "backing", "ports", "message"),
    [
        (
            PrivateLinkConfig(allowed_principals=PRINCIPALS),
            "nlb",
            {},
            "'private_link.enabled' must be true to build an endpoint service, got false",
        ),
        (
            PrivateLinkConfig(enabled=True),
            "nlb",
            {},
            "'private_link.allowed_principals' must name at least one principal (an endpoint service no "
            "one may connect to serves no one), got none",
        ),
        (ENABLED, "both", {}, "give exactly one of 'load_balancer' (an NLB) or 'alb', got both"),
        (ENABLED, "neither", {}, "give exactly one of 'load_balancer' (an NLB) or 'alb', got neither"),
        (ENABLED, "alb", {}, "'ports' must list the ALB's listener ports to forward, got none"),
        (
            ENABLED,
            "alb-without-vpc",
            {443: elbv2.ApplicationProtocol.HTTPS},
            "'vpc' (the ALB's) is needed to build the NLB in front of the ALB, got none",
        ),
        (
            ENABLED,
            "nlb",
            {443: elbv2.ApplicationProtocol.HTTPS},
            "'ports' applies only in front of an ALB (an NLB's listeners already exist), got 443",
        ),
        (ENABLED, "alb", {0: elbv2.ApplicationProtocol.HTTP}, "'ports' must be 1-65535, got 0"),
    ],
    ids=[
        "disabled",
        "no-principals",
        "both",
        "neither",
        "alb-without-ports",
        "alb-without-vpc",
        "ports-with-nlb",
        "bad-port",
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(
    config: PrivateLinkConfig,
    backing: str,
    ports: dict[int, elbv2.ApplicationProtocol],
    message: str,
) -> None:
    stack = new_stack("Invalid")
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=AZS)
    arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/{}/x/0123456789abcdef"
    nlb = elbv2.NetworkLoadBalancer.from_network_load_balancer_attributes(
        stack, "Nlb", load_balancer_arn=arn.format("net")
    )
    alb = elbv2.ApplicationLoadBalancer.from_application_load_balancer_attributes(
        stack, "Alb", load_balancer_arn=arn.format("app"), security_group_id="sg-0123456789abcdef0"
    )
    with pytest.raises(ValueError) as excinfo:
        InferencePrivateLink(
            stack,
            "PrivateLink",
            config=config,
            vpc=None if backing == "alb-without-vpc" else vpc,
            load_balancer=nlb if backing in ("nlb", "both") else None,
            alb=alb if backing in ("alb", "alb-without-vpc", "both") else None,
            ports=ports,
        )
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- compliance gates


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both variants (on an NLB, in front of an ALB) in one stack, synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("private-link-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "PrivateLinkNag", env=cdk.Environment(region=REGION))
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr_block="10.0.0.0/16",
        availability_zones=AZS,
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    )
    config = IngressConfig(
        kind="nlb",
        waf=NO_WAF,
        certificate_arn=CERTIFICATE,
        private_link=PrivateLinkConfig(enabled=True, allowed_principals=PRINCIPALS),
    )
    nlb = InferenceNlb(
        stack,
        "Nlb",
        vpc=vpc,
        config=config,
        listeners={"m1": 8443},
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    InferencePrivateLink(
        stack, "NlbLink", config=config.private_link, vpc=vpc, load_balancer=nlb.load_balancer
    )
    alb = InferenceAlb(
        stack,
        "Alb",
        vpc=vpc,
        config=IngressConfig(certificate_arn=CERTIFICATE),
        model_names=["m1"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    InferencePrivateLink(
        stack,
        "AlbLink",
        config=config.private_link,
        vpc=vpc,
        alb=alb.load_balancer,
        ports={443: elbv2.ApplicationProtocol.HTTPS},
    )
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return outdir / "PrivateLinkNag.template.json"


def test_private_link_passes_cdk_nag(compliant_template: Path) -> None:
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_private_link_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    # cfn-lint checks the 'alb' target type and its TCP protocol against CloudFormation's schema.
    assert cfn_lint_errors(compliant_template) == []
