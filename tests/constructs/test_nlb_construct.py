"""InferenceNlb: placement and Elastic IPs, TLS/TCP listeners, weights, target groups, SG rules, bindings."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from gpufarm.config import AccessLogsConfig, IngressConfig, LoadBalancerScheme
from gpufarm.config.model import (
    CognitoAuthConfig,
    NlbConfig,
    OidcAuthConfig,
    PrivateLinkConfig,
    TargetOptimizerConfig,
    WafConfig,
)
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.nlb import AlpnPolicy, InferenceNlb
from gpufarm.k8s.binding import LBC_TGB_API
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import (
    AZS,
    CLUSTER_NAME,
    REGION,
    imported_cluster,
    logical_id,
    manifest_of,
    new_stack,
    new_vpc,
    ref,
    resources,
)

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
CLIENT_CIDRS = ["198.51.100.0/24", "203.0.113.0/24"]
INTERNAL_CIDR = "10.1.0.0/16"
VLLM_PORT = 8000
GATEWAY_PORT = 4000
LB = "AWS::ElasticLoadBalancingV2::LoadBalancer"
LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"
EIP = "AWS::EC2::EIP"
PRIVATE_LINK = PrivateLinkConfig(enabled=True, allowed_principals=["arn:aws:iam::123456789012:root"])
WEIGHTS = {"llama": {"h100": 3, "l40s": 1}}
NO_WAF = WafConfig(enabled=False)
"""AWS WAF attaches to ALBs only; an NLB config must turn it off."""
LLAMA_SERVICES = {"h100": "vllm-llama-h100", "l40s": "vllm-llama-l40s"}


@dataclass(frozen=True)
class Built:
    nlb: InferenceNlb
    template: Template
    vpc: ec2.Vpc
    pods: ec2.SecurityGroup | None = None
    bindings: dict[str, Any] | None = None
    gateway_binding: Any = None
    after: cdk.CfnResource | None = None


@pytest.fixture(scope="module")
def public() -> Built:
    """Internet-facing TLS with static IPs and PrivateLink; 'llama' weighted over two pools; gateway."""
    stack = new_stack("PublicNlb")
    vpc = new_vpc(stack)
    config = IngressConfig(
        kind="nlb",
        waf=NO_WAF,
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        allowed_cidrs=CLIENT_CIDRS,
        private_link=PRIVATE_LINK,
    )
    nlb = InferenceNlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        listeners={"qwen3-8b": 8443, "llama": 9443},
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
        weights=WEIGHTS,
    )
    nlb.route_default_to(port=GATEWAY_PORT, health_check_path="/health/liveliness")
    pods = ec2.SecurityGroup(stack, "Pods", vpc=vpc)
    nlb.allow_targets_in(pods)
    cluster = imported_cluster(stack)
    after = cdk.CfnWaitConditionHandle(stack, "LlamaServices")
    bindings = nlb.bind_services(
        cluster=cluster,
        namespace="inference",
        services={"qwen3-8b": "vllm-qwen3-8b", "llama": LLAMA_SERVICES},
        after={"llama": after},
    )
    gateway = nlb.bind_default(
        cluster=cluster, namespace="inference", service="gateway", api_version=LBC_TGB_API
    )
    return Built(nlb, Template.from_stack(stack), vpc, pods, bindings, gateway, after)


@pytest.fixture(scope="module")
def internal() -> Built:
    """Internal TCP, no cross-zone, non-default timings and log retention; gateway on port 80."""
    stack = new_stack("InternalNlb")
    vpc = new_vpc(stack, INTERNAL_CIDR)
    config = IngressConfig(
        kind="nlb",
        waf=NO_WAF,
        nlb=NlbConfig(tls=False, cross_zone=False),
        idle_timeout_seconds=900,
        deregistration_delay_seconds=120,
        health_check_interval_seconds=10,
        access_logs=AccessLogsConfig(retention_days=30),
    )
    nlb = InferenceNlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        listeners={"qwen3-8b": 8080},
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
        vpc_cidr=INTERNAL_CIDR,
    )
    nlb.route_default_to(port=GATEWAY_PORT, health_check_path="/health/liveliness")
    return Built(nlb, Template.from_stack(stack), vpc)


@pytest.fixture(scope="module")
def dynamic() -> Built:
    """Internet-facing without static IPs or logs, no client CIDRs, ALPN HTTP/2 preferred."""
    stack = new_stack("DynamicNlb")
    vpc = new_vpc(stack)
    config = IngressConfig(
        kind="nlb",
        waf=NO_WAF,
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        nlb=NlbConfig(static_ips=False),
        access_logs=AccessLogsConfig(enabled=False),
    )
    nlb = InferenceNlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        listeners={"m1": 443},
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
        alpn_policy=AlpnPolicy.HTTP2_PREFERRED,
    )
    return Built(nlb, Template.from_stack(stack), vpc)


def _props(built: Built, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = built.template.to_json()["Resources"][logical_id(construct)]["Properties"]
    return found


def _attributes(props: dict[str, Any], key: str = "LoadBalancerAttributes") -> dict[str, Any]:
    return {a["Key"]: a["Value"] for a in props[key]}


def _sorted(items: list[Any]) -> list[Any]:
    return sorted(items, key=json.dumps)


def _group_id(construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(construct), "GroupId"]}


def _small(
    listeners: dict[str, int | None], weights: dict[str, dict[str, int]] | None = None
) -> InferenceNlb:
    """An internal TCP NLB in a stack of its own (not synthesized)."""
    stack = new_stack("Small")
    return InferenceNlb(
        stack,
        "Ingress",
        vpc=new_vpc(stack),
        config=IngressConfig(kind="nlb", waf=NO_WAF, nlb=NlbConfig(tls=False)),
        listeners=listeners,
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
        weights=weights,
    )


# --------------------------------------------------------------------------- placement and addresses


def test_internet_facing_nlb_maps_one_elastic_ip_per_az(public: Built) -> None:
    props = _props(public, public.nlb.load_balancer)
    assert (props["Type"], props["Scheme"]) == ("network", "internet-facing")
    assert "Subnets" not in props
    assert len(public.nlb.elastic_ips) == len(AZS)
    assert _sorted(props["SubnetMappings"]) == _sorted(
        [
            {"SubnetId": ref(subnet), "AllocationId": {"Fn::GetAtt": [logical_id(eip), "AllocationId"]}}
            for subnet, eip in zip(public.vpc.public_subnets, public.nlb.elastic_ips, strict=True)
        ]
    )


def test_elastic_ips_are_vpc_addresses_named_after_their_az(public: Built) -> None:
    assert [eip.node.id for eip in public.nlb.elastic_ips] == ["ElasticIpUsEast1a", "ElasticIpUsEast1b"]
    for eip, az in zip(public.nlb.elastic_ips, AZS, strict=True):
        assert _props(public, eip) == {
            "Domain": "vpc",
            "Tags": [{"Key": "Name", "Value": f"PublicNlb/Ingress/{az}"}],
        }


def test_internal_nlb_in_private_subnets_without_elastic_ips(internal: Built) -> None:
    props = _props(internal, internal.nlb.load_balancer)
    assert props["Scheme"] == "internal"
    assert _sorted(props["Subnets"]) == _sorted([ref(s) for s in internal.vpc.private_subnets])
    assert "SubnetMappings" not in props
    internal.template.resource_count_is(EIP, 1)  # the VPC's NAT gateway only
    assert internal.nlb.elastic_ips == []


def test_internet_facing_without_static_ips_uses_the_public_subnets(dynamic: Built) -> None:
    props = _props(dynamic, dynamic.nlb.load_balancer)
    assert _sorted(props["Subnets"]) == _sorted([ref(s) for s in dynamic.vpc.public_subnets])
    assert dynamic.nlb.elastic_ips == []


def test_security_group_is_attached(public: Built) -> None:
    props = _props(public, public.nlb.load_balancer)
    assert props["SecurityGroups"] == [_group_id(public.nlb.security_group)]


def test_private_link_traffic_skips_the_client_cidr_rules_only_with_private_link(
    public: Built, internal: Built
) -> None:
    assert (
        _props(public, public.nlb.load_balancer)["EnforceSecurityGroupInboundRulesOnPrivateLinkTraffic"]
        == "off"
    )
    assert "EnforceSecurityGroupInboundRulesOnPrivateLinkTraffic" not in _props(
        internal, internal.nlb.load_balancer
    )


@pytest.mark.parametrize(("which", "enabled"), [("public", "true"), ("internal", "false")])
def test_cross_zone_follows_the_config(which: str, enabled: str, request: pytest.FixtureRequest) -> None:
    built: Built = request.getfixturevalue(which)
    attributes = _attributes(_props(built, built.nlb.load_balancer))
    assert attributes["load_balancing.cross_zone.enabled"] == enabled


# --------------------------------------------------------------------------- access logs


def test_access_logs_go_to_the_bucket_under_the_nlb_prefix(internal: Built) -> None:
    bucket = internal.nlb.access_logs_bucket
    assert bucket is not None
    attributes = _attributes(_props(internal, internal.nlb.load_balancer))
    assert (
        attributes["access_logs.s3.enabled"],
        attributes["access_logs.s3.bucket"],
        attributes["access_logs.s3.prefix"],
    ) == ("true", ref(bucket), "nlb")


def test_access_logs_bucket_is_sse_s3_private_retained_and_expires(internal: Built) -> None:
    internal.template.has_resource(
        "AWS::S3::Bucket",
        {
            "Properties": {
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [
                        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                    ]
                },
                "PublicAccessBlockConfiguration": {
                    "BlockPublicAcls": True,
                    "BlockPublicPolicy": True,
                    "IgnorePublicAcls": True,
                    "RestrictPublicBuckets": True,
                },
                "LifecycleConfiguration": {"Rules": [{"ExpirationInDays": 30, "Status": "Enabled"}]},
            },
            "DeletionPolicy": "Retain",
        },
    )


def test_log_delivery_may_write_under_the_prefix(internal: Built) -> None:
    bucket = internal.nlb.access_logs_bucket
    assert bucket is not None
    internal.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": ref(bucket),
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "s3:PutObject",
                                "Principal": {"Service": "delivery.logs.amazonaws.com"},
                                "Condition": {"StringEquals": {"s3:x-amz-acl": "bucket-owner-full-control"}},
                            }
                        )
                    ]
                )
            },
        },
    )


def test_access_logs_disabled_creates_no_bucket(dynamic: Built) -> None:
    dynamic.template.resource_count_is("AWS::S3::Bucket", 0)
    assert dynamic.nlb.access_logs_bucket is None


# --------------------------------------------------------------------------- listeners


def test_one_listener_per_model_and_one_for_the_gateway(public: Built) -> None:
    ports = sorted(p["Properties"]["Port"] for p in resources(public.template, LISTENER).values())
    assert ports == [443, 8443, 9443]
    assert public.nlb.listener_ports == {"qwen3-8b": 8443, "llama": 9443}


def test_tls_listener_has_the_certificate_tls12_policy_and_alpn(public: Built) -> None:
    props = _props(public, public.nlb.listeners["qwen3-8b"])
    assert props["Protocol"] == "TLS"
    assert props["Certificates"] == [{"CertificateArn": CERTIFICATE}]
    assert props["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"
    assert props["AlpnPolicy"] == ["HTTP2Optional"]
    assert props["LoadBalancerArn"] == ref(public.nlb.load_balancer)


def test_alpn_policy_can_be_chosen(dynamic: Built) -> None:
    assert _props(dynamic, dynamic.nlb.listeners["m1"])["AlpnPolicy"] == ["HTTP2Preferred"]


def test_tcp_listener_carries_the_idle_timeout_and_no_tls(internal: Built) -> None:
    props = _props(internal, internal.nlb.listeners["qwen3-8b"])
    assert (props["Protocol"], props["Port"]) == ("TCP", 8080)
    assert props["ListenerAttributes"] == [{"Key": "tcp.idle_timeout.seconds", "Value": "900"}]
    assert not {"Certificates", "SslPolicy", "AlpnPolicy"} & set(props)


def test_unweighted_listener_forwards_to_its_target_group(public: Built) -> None:
    props = _props(public, public.nlb.listeners["qwen3-8b"])
    assert props["DefaultActions"] == [
        {"Type": "forward", "TargetGroupArn": ref(public.nlb.target_groups["qwen3-8b"])}
    ]


def test_weighted_listener_forwards_to_each_group_by_weight(public: Built) -> None:
    groups = public.nlb.weighted_target_groups["llama"]
    props = _props(public, public.nlb.listeners["llama"])
    assert props["DefaultActions"] == [
        {
            "Type": "forward",
            "ForwardConfig": {
                "TargetGroups": [
                    {"TargetGroupArn": ref(groups["h100"]), "Weight": 3},
                    {"TargetGroupArn": ref(groups["l40s"]), "Weight": 1},
                ]
            },
        }
    ]


def test_weighted_groups_have_ids_from_their_names(public: Built) -> None:
    groups = public.nlb.weighted_target_groups["llama"]
    assert {g: tg.node.path for g, tg in groups.items()} == {
        "h100": "PublicNlb/Ingress/Llama/TargetGroupH100",
        "l40s": "PublicNlb/Ingress/Llama/TargetGroupL40s",
    }
    assert "llama" not in public.nlb.target_groups


def test_base_urls_name_the_model_port(public: Built, internal: Built) -> None:
    stack = cdk.Stack.of(public.nlb)
    dns = stack.resolve(public.nlb.dns_name)
    assert stack.resolve(public.nlb.base_url("llama")) == {"Fn::Join": ["", ["https://", dns, ":9443/v1"]]}
    assert stack.resolve(public.nlb.base_url_default()) == {"Fn::Join": ["", ["https://", dns, "/v1"]]}
    internal_stack = cdk.Stack.of(internal.nlb)
    assert internal_stack.resolve(internal.nlb.base_url("qwen3-8b")) == {
        "Fn::Join": ["", ["http://", internal_stack.resolve(internal.nlb.dns_name), ":8080/v1"]]
    }


def test_full_name_is_the_load_balancers(public: Built) -> None:
    stack = cdk.Stack.of(public.nlb)
    assert stack.resolve(public.nlb.load_balancer_full_name) == {
        "Fn::GetAtt": [logical_id(public.nlb.load_balancer), "LoadBalancerFullName"]
    }


# --------------------------------------------------------------------------- target groups


def test_every_target_group_is_tagged_for_auto_mode(public: Built) -> None:
    found = resources(public.template, TARGET_GROUP)
    assert len(found) == 4  # qwen3-8b, llama x2, gateway
    for props in found.values():
        assert props["Properties"]["Tags"] == [{"Key": "eks:eks-cluster-name", "Value": CLUSTER_NAME}]


def test_target_group_settings(internal: Built) -> None:
    props = _props(internal, internal.nlb.target_groups["qwen3-8b"])
    assert {k: v for k, v in props.items() if k not in ("TargetGroupAttributes", "Tags")} == {
        "TargetType": "ip",
        "Protocol": "TCP",
        "Port": VLLM_PORT,
        "VpcId": ref(internal.vpc),
        "HealthCheckEnabled": True,
        "HealthCheckProtocol": "HTTP",
        "HealthCheckPath": "/health",
        "HealthCheckPort": "traffic-port",
        "HealthCheckIntervalSeconds": 10,
        "HealthCheckTimeoutSeconds": 5,
        "HealthyThresholdCount": 2,
        "UnhealthyThresholdCount": 3,
        "Matcher": {"HttpCode": "200"},
    }


def test_target_groups_drain_then_close_and_do_not_preserve_client_ips(internal: Built) -> None:
    props = _props(internal, internal.nlb.target_groups["qwen3-8b"])
    assert _attributes(props, "TargetGroupAttributes") == {
        "deregistration_delay.timeout_seconds": "120",
        "deregistration_delay.connection_termination.enabled": "true",
        "preserve_client_ip.enabled": "false",
    }


def test_weighted_groups_share_the_model_settings(public: Built) -> None:
    groups = public.nlb.weighted_target_groups["llama"]
    single = _props(public, public.nlb.target_groups["qwen3-8b"])
    for target_group in groups.values():
        assert _props(public, target_group) == single


# --------------------------------------------------------------------------- security groups


def _ingress(built: Built) -> list[dict[str, Any]]:
    group = built.template.to_json()["Resources"][logical_id(built.nlb.security_group)]["Properties"]
    rules: list[dict[str, Any]] = group.get("SecurityGroupIngress", [])
    return rules


def test_clients_reach_only_the_listener_ports_from_allowed_cidrs(public: Built) -> None:
    assert sorted(
        (r["CidrIp"], r["FromPort"], r["ToPort"], r["IpProtocol"]) for r in _ingress(public)
    ) == sorted((cidr, port, port, "tcp") for cidr in CLIENT_CIDRS for port in (443, 8443, 9443))


def test_clients_default_to_the_vpc_cidr(internal: Built, dynamic: Built) -> None:
    assert sorted((r["CidrIp"], r["FromPort"]) for r in _ingress(internal)) == [
        (INTERNAL_CIDR, 80),
        (INTERNAL_CIDR, 8080),
    ]
    (rule,) = _ingress(dynamic)
    assert rule["CidrIp"] == {"Fn::GetAtt": [logical_id(dynamic.vpc), "CidrBlock"]}


def test_no_egress_until_targets_are_allowed(internal: Built) -> None:
    # CDK's placeholder rule for "no egress": ICMP type 252 to 255.255.255.255/32 matches nothing.
    group = internal.template.to_json()["Resources"][logical_id(internal.nlb.security_group)]["Properties"]
    assert [r["CidrIp"] for r in group["SecurityGroupEgress"]] == ["255.255.255.255/32"]
    assert not [
        r
        for r in resources(internal.template, "AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"]["GroupId"] == _group_id(internal.nlb.security_group)
    ]


def test_allow_targets_in_opens_the_target_and_gateway_ports_from_the_nlb_only(public: Built) -> None:
    assert public.pods is not None
    ingress = [
        r["Properties"]
        for r in resources(public.template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == _group_id(public.pods)
    ]
    assert sorted((r["FromPort"], r["ToPort"]) for r in ingress) == [
        (GATEWAY_PORT, GATEWAY_PORT),
        (VLLM_PORT, VLLM_PORT),
    ]
    assert all(r["SourceSecurityGroupId"] == _group_id(public.nlb.security_group) for r in ingress)
    egress = [
        r["Properties"]
        for r in resources(public.template, "AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"]["GroupId"] == _group_id(public.nlb.security_group)
    ]
    assert sorted(r["FromPort"] for r in egress) == [GATEWAY_PORT, VLLM_PORT]


# --------------------------------------------------------------------------- bindings


def test_bind_services_registers_an_unweighted_service_in_its_target_group(public: Built) -> None:
    assert public.bindings is not None
    (binding,) = manifest_of(public.template, public.bindings["qwen3-8b"])
    assert binding["kind"] == "TargetGroupBinding"
    assert binding["metadata"]["name"] == "vllm-qwen3-8b"
    assert binding["spec"] == {
        "serviceRef": {"name": "vllm-qwen3-8b", "port": VLLM_PORT},
        "targetGroupARN": ref(public.nlb.target_groups["qwen3-8b"]),
        "targetType": "ip",
    }


@pytest.mark.parametrize("group", ["h100", "l40s"])
def test_each_weighted_group_binds_its_own_service(public: Built, group: str) -> None:
    assert public.bindings is not None
    (binding,) = manifest_of(public.template, public.bindings[f"llama/{group}"])
    assert binding["spec"]["serviceRef"] == {"name": LLAMA_SERVICES[group], "port": VLLM_PORT}
    assert binding["spec"]["targetGroupARN"] == ref(public.nlb.weighted_target_groups["llama"][group])


def test_bindings_wait_for_their_services(public: Built) -> None:
    assert public.bindings is not None and public.after is not None
    found = public.template.to_json()["Resources"]
    for key in ("llama/h100", "llama/l40s"):
        assert logical_id(public.after) in found[logical_id(public.bindings[key])].get("DependsOn", [])
    assert logical_id(public.after) not in found[logical_id(public.bindings["qwen3-8b"])].get("DependsOn", [])


def test_bind_services_rejects_mismatched_services() -> None:
    nlb = _small({"qwen3-8b": 8080, "llama": 8081}, weights=WEIGHTS)
    cluster = imported_cluster(cdk.Stack.of(nlb))
    cases = [
        (
            {"other": "svc"},
            "bind_services() got model 'other', which has no listener; models: qwen3-8b, llama",
        ),
        (
            {"llama": "vllm-llama"},
            "bind_services() needs a Service per target group of weighted model 'llama' (groups: h100, "
            "l40s), got 'vllm-llama'",
        ),
        (
            {"llama": {"h100": "a"}},
            "bind_services() needs a Service per target group of weighted model 'llama' (groups: h100, "
            "l40s), got h100",
        ),
        (
            {"qwen3-8b": {"a": "b"}},
            "bind_services() needs one Service name for model 'qwen3-8b' (it has no weights), got a "
            "mapping of 1",
        ),
    ]
    for services, message in cases:
        with pytest.raises(ValueError) as excinfo:
            nlb.bind_services(cluster=cluster, namespace="inference", services=services)
        assert str(excinfo.value) == message


# --------------------------------------------------------------------------- default route (gateway)


def test_default_route_listens_on_443_with_tls_and_forwards_to_the_gateway(public: Built) -> None:
    nlb = public.nlb
    assert nlb.default_listener is not None and nlb.default_target_group is not None
    props = _props(public, nlb.default_listener)
    assert (props["Port"], props["Protocol"]) == (443, "TLS")
    assert props["DefaultActions"] == [{"Type": "forward", "TargetGroupArn": ref(nlb.default_target_group)}]
    target_group = _props(public, nlb.default_target_group)
    assert (target_group["Port"], target_group["Protocol"], target_group["HealthCheckPath"]) == (
        GATEWAY_PORT,
        "TCP",
        "/health/liveliness",
    )


def test_default_route_listens_on_80_with_tcp(internal: Built) -> None:
    assert internal.nlb.default_listener is not None
    props = _props(internal, internal.nlb.default_listener)
    assert (props["Port"], props["Protocol"]) == (80, "TCP")


def test_gateway_binding_targets_the_default_group(public: Built) -> None:
    assert public.nlb.default_target_group is not None
    (binding,) = manifest_of(public.template, public.gateway_binding)
    assert (binding["apiVersion"], binding["metadata"]["name"]) == (LBC_TGB_API, "gateway")
    assert binding["spec"]["serviceRef"] == {"name": "gateway", "port": GATEWAY_PORT}
    assert binding["spec"]["targetGroupARN"] == ref(public.nlb.default_target_group)


def test_second_default_route_is_rejected(public: Built) -> None:
    with pytest.raises(
        ValueError,
        match=r"^route_default_to\(\) was already called: the load balancer has one default route$",
    ):
        public.nlb.route_default_to(port=4001, health_check_path="/")


def test_default_route_needs_its_port_free() -> None:
    nlb = _small({"m1": 80})
    with pytest.raises(ValueError) as excinfo:
        nlb.route_default_to(port=GATEWAY_PORT, health_check_path="/")
    assert (
        str(excinfo.value)
        == "route_default_to() needs listener port 80 for the gateway, got it taken by model 'm1'"
    )


def test_binding_the_default_needs_a_default_route() -> None:
    nlb = _small({"m1": 8080})
    with pytest.raises(
        ValueError,
        match=r"^bind_default\(\) needs route_default_to\(\) first: there is no default target group$",
    ):
        nlb.bind_default(cluster=imported_cluster(cdk.Stack.of(nlb)), namespace="gpufarm", service="gateway")


# --------------------------------------------------------------------------- invalid input

OIDC = OidcAuthConfig(
    issuer="https://idp.example.com",
    authorization_endpoint="https://idp.example.com/authorize",
    token_endpoint="https://idp.example.com/token",
    user_info_endpoint="https://idp.example.com/userinfo",
    client_id="gpufarm",
    client_secret="gpufarm/oidc-client",
)
COGNITO = CognitoAuthConfig(
    user_pool_arn="arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_AbCdEfGhI",
    user_pool_client_id="1example23456789",
    user_pool_domain="gpufarm-auth",
)
TCP = NlbConfig(tls=False)
MANY_CIDRS = [f"10.{i}.0.0/16" for i in range(30)]


@pytest.mark.parametrize(
    ("config", "listeners", "weights", "message"),
    [
        (
            IngressConfig(kind="nlb", waf=NO_WAF),
            {"m1": 443},
            {},
            "'nlb.tls' needs 'certificate_arn' (a TLS listener presents an ACM certificate), got no "
            "certificate; set nlb.tls to false for TCP listeners",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, scheme=LoadBalancerScheme.INTERNET_FACING, nlb=TCP),
            {"m1": 80},
            {},
            "'nlb.tls' must be true when 'scheme' is 'internet-facing' (prompts must not cross the internet "
            "in clear text), got false",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, certificate_arn=CERTIFICATE, oidc=OIDC),
            {"m1": 443},
            {},
            "'oidc' must be empty with ingress kind 'nlb' (a Network Load Balancer cannot authenticate "
            "requests), got an identity provider",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, certificate_arn=CERTIFICATE, cognito=COGNITO),
            {"m1": 443},
            {},
            "'cognito' must be empty with ingress kind 'nlb' (a Network Load Balancer cannot authenticate "
            "requests), got an identity provider",
        ),
        (
            IngressConfig(
                kind="nlb", waf=NO_WAF, nlb=TCP, target_optimizer=TargetOptimizerConfig(enabled=True)
            ),
            {"m1": 80},
            {},
            "'target_optimizer.enabled' must be false with ingress kind 'nlb' (the Target Optimizer and "
            "AWS WAF attach to Application Load Balancers only), got true",
        ),
        (
            IngressConfig(kind="nlb", nlb=TCP),
            {"m1": 80},
            {},
            "'waf.enabled' must be false with ingress kind 'nlb' (the Target Optimizer and AWS WAF attach "
            "to Application Load Balancers only), got true",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP, lcu_reservation=1000),
            {"m1": 80},
            {},
            "'lcu_reservation' applies only with ingress kind 'alb' (ALB capacity units), got 1000 with "
            "'nlb'",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {},
            {},
            "'listeners' must name at least one model, got none",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 80, "m2": None},
            {},
            "'listener_port' of model 'm2' must be set with ingress kind 'nlb' (each model has its own "
            "listener), got none",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 0},
            {},
            "'listener_port' of model 'm1' must be 1-65535, got 0",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 8080, "m2": 8080},
            {},
            "'listener_port' of model 'm2' must differ from model 'm1''s (one listener per port), got 8080 "
            "for both",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 80},
            {"m2": {"a": 1}},
            "'weights' names model 'm2', which has no listener; models: m1",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 80},
            {"m1": {}},
            "'weights' of model 'm1' must name at least one target group, got none",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 80},
            {"m1": {f"g{i}": 1 for i in range(6)}},
            "'weights' of model 'm1' must name at most 5 target groups (one forward action), got 6",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 80},
            {"m1": {"H100": 1}},
            "'weights' of model 'm1': group names must be lowercase DNS labels (a-z, 0-9, '-', starting "
            "with a letter, at most 40 characters), got 'H100'",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 80},
            {"m1": {"h100": 1000}},
            "'weights' of model 'm1': group 'h100' must weigh 0-999, got 1000",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP),
            {"m1": 80},
            {"m1": {"h100": 0, "l40s": 0}},
            "'weights' of model 'm1' must give at least one group a weight above 0 (else the listener "
            "forwards nowhere), got all 0",
        ),
        (
            IngressConfig(kind="nlb", waf=NO_WAF, nlb=TCP, allowed_cidrs=MANY_CIDRS),
            {"m1": 8080, "m2": 8081},
            {},
            "'allowed_cidrs' times listener ports (plus the gateway's) must be at most 60 security-group "
            "rules, got 30 x 3 = 90",
        ),
    ],
    ids=[
        "tls-without-certificate",
        "internet-facing-tcp",
        "oidc",
        "cognito",
        "target-optimizer",
        "waf",
        "lcu-reservation",
        "no-listeners",
        "missing-listener-port",
        "port-out-of-range",
        "duplicate-port",
        "weights-unknown-model",
        "weights-no-groups",
        "weights-too-many-groups",
        "weights-bad-group-name",
        "weight-above-999",
        "weights-all-zero",
        "too-many-sg-rules",
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(
    config: IngressConfig, listeners: dict[str, int | None], weights: dict[str, dict[str, int]], message: str
) -> None:
    stack = new_stack("Invalid")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0123456789abcdef0", vpc_cidr_block="10.0.0.0/16", availability_zones=AZS
    )
    with pytest.raises(ValueError) as excinfo:
        InferenceNlb(
            stack,
            "Ingress",
            vpc=vpc,
            config=config,
            listeners=listeners,
            target_port=VLLM_PORT,
            cluster_name="c",
            weights=weights,
        )
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- compliance gates


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Internet-facing TLS with static IPs, weights, a gateway and bindings, synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("nlb-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "NlbNag", env=cdk.Environment(region=REGION))
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr_block="10.0.0.0/16",
        availability_zones=AZS,
        public_subnet_ids=["subnet-0123456789abcdef2", "subnet-0123456789abcdef3"],
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    )
    config = IngressConfig(
        kind="nlb",
        waf=NO_WAF,
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        allowed_cidrs=CLIENT_CIDRS,
        private_link=PRIVATE_LINK,
    )
    nlb = InferenceNlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        listeners={"m1": 8443, "llama": 9443},
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
        weights=WEIGHTS,
    )
    nlb.route_default_to(port=GATEWAY_PORT, health_check_path="/health/liveliness")
    nlb.allow_targets_in(ec2.SecurityGroup.from_security_group_id(stack, "Pods", "sg-0123456789abcdef0"))
    cluster = imported_cluster(stack)
    nlb.bind_services(
        cluster=cluster, namespace="inference", services={"m1": "vllm-m1", "llama": LLAMA_SERVICES}
    )
    nlb.bind_default(cluster=cluster, namespace="inference", service="gateway")
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return outdir / "NlbNag.template.json"


def test_hardened_nlb_passes_cdk_nag(compliant_template: Path) -> None:
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_hardened_nlb_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    # cfn-lint checks the weighted ForwardConfig of an NLB listener against CloudFormation's schema.
    assert cfn_lint_errors(compliant_template) == []
