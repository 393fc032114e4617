"""InferenceAlb: scheme, listener, access logs, one target group and path rule per model, SG rules."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from gpufarm.config import AccessLogsConfig, IngressConfig, LoadBalancerScheme
from gpufarm.config.model import default_route_priority
from gpufarm.constructs import InferenceAlb
from gpufarm.k8s.binding import AUTO_MODE_TGB_API, target_group_binding
from tests.constructs.helpers import (
    CLUSTER_NAME,
    KUBERNETES_RESOURCE,
    imported_cluster,
    logical_id,
    manifest_of,
    new_stack,
    new_vpc,
    ref,
    resources,
)

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
INTERNAL_CIDR = "10.1.0.0/16"
CLIENT_CIDRS = ["198.51.100.0/24", "203.0.113.0/24"]
LB = "AWS::ElasticLoadBalancingV2::LoadBalancer"
LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"
RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"


@dataclass(frozen=True)
class Built:
    alb: InferenceAlb
    template: Template
    vpc: ec2.Vpc
    pods: ec2.SecurityGroup | None = None
    bindings: dict[str, Any] | None = None
    after: cdk.CfnResource | None = None


@pytest.fixture(scope="module")
def internal() -> Built:
    """Internal HTTP, non-default timings and log retention, two models, bound to their Services."""
    stack = new_stack("InternalAlb")
    vpc = new_vpc(stack, INTERNAL_CIDR)
    config = IngressConfig(
        idle_timeout_seconds=900,
        slow_start_seconds=30,
        deregistration_delay_seconds=120,
        health_check_interval_seconds=10,
        access_logs=AccessLogsConfig(retention_days=30),
    )
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        model_names=["qwen3-8b", "llama"],
        target_port=8080,
        cluster_name=CLUSTER_NAME,
        vpc_cidr=INTERNAL_CIDR,
        rule_priorities={"qwen3-8b": 10},
    )
    pods = ec2.SecurityGroup(stack, "Pods", vpc=vpc)
    alb.allow_targets_in(pods)
    after = cdk.CfnWaitConditionHandle(stack, "LlamaService")
    bindings = alb.bind_services(
        cluster=imported_cluster(stack),
        namespace="inference",
        services={"qwen3-8b": "vllm-qwen3-8b", "llama": "vllm-llama"},
        after={"llama": after},
    )
    return Built(alb, Template.from_stack(stack), vpc, pods, bindings, after)


@pytest.fixture(scope="module")
def public() -> Built:
    """Internet-facing HTTPS for two client CIDRs, no access logs, one model."""
    stack = new_stack("PublicAlb")
    vpc = new_vpc(stack)
    config = IngressConfig(
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        allowed_cidrs=CLIENT_CIDRS,
        access_logs=AccessLogsConfig(enabled=False),
    )
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        model_names=["m1"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    return Built(alb, Template.from_stack(stack), vpc)


@pytest.fixture(scope="module")
def fallback() -> Built:
    """Internal, no allowed CIDRs and no literal VPC CIDR given."""
    stack = new_stack("FallbackAlb")
    vpc = new_vpc(stack)
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=IngressConfig(access_logs=AccessLogsConfig(enabled=False)),
        model_names=["m1"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    return Built(alb, Template.from_stack(stack), vpc)


def _props(built: Built, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = built.template.to_json()["Resources"][logical_id(construct)]["Properties"]
    return found


def _sorted_refs(items: list[Any]) -> list[Any]:
    return sorted(items, key=json.dumps)


# --------------------------------------------------------------------------- load balancer


def test_internal_alb_in_private_subnets(internal: Built) -> None:
    internal.template.resource_count_is(LB, 1)
    props = _props(internal, internal.alb.load_balancer)
    assert props["Scheme"] == "internal"
    assert props["Type"] == "application"
    assert _sorted_refs(props["Subnets"]) == _sorted_refs([ref(s) for s in internal.vpc.private_subnets])
    assert props["SecurityGroups"] == [{"Fn::GetAtt": [logical_id(internal.alb.security_group), "GroupId"]}]


def test_internet_facing_alb_in_public_subnets(public: Built) -> None:
    props = _props(public, public.alb.load_balancer)
    assert props["Scheme"] == "internet-facing"
    assert _sorted_refs(props["Subnets"]) == _sorted_refs([ref(s) for s in public.vpc.public_subnets])


@pytest.mark.parametrize(("which", "idle"), [("internal", "900"), ("public", "600")])
def test_idle_timeout_and_invalid_headers_dropped(
    which: str, idle: str, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    built.template.has_resource_properties(
        LB,
        {
            "LoadBalancerAttributes": Match.array_with(
                [
                    {"Key": "idle_timeout.timeout_seconds", "Value": idle},
                    {"Key": "routing.http.drop_invalid_header_fields.enabled", "Value": "true"},
                ]
            )
        },
    )


# --------------------------------------------------------------------------- access logs


def test_access_logs_go_to_the_bucket_under_a_prefix(internal: Built) -> None:
    bucket = internal.alb.access_logs_bucket
    assert bucket is not None
    internal.template.has_resource_properties(
        LB,
        {
            "LoadBalancerAttributes": Match.array_with(
                [
                    {"Key": "access_logs.s3.enabled", "Value": "true"},
                    {"Key": "access_logs.s3.bucket", "Value": ref(bucket)},
                    {"Key": "access_logs.s3.prefix", "Value": "alb"},
                ]
            )
        },
    )


def test_access_logs_bucket_is_sse_s3_private_and_expires(internal: Built) -> None:
    internal.template.resource_count_is("AWS::S3::Bucket", 1)
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


def test_access_logs_bucket_denies_requests_without_tls(internal: Built) -> None:
    bucket = internal.alb.access_logs_bucket
    assert bucket is not None
    internal.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": ref(bucket),
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Action": "s3:*",
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            "Effect": "Deny",
                            "Principal": {"AWS": "*"},
                            "Resource": Match.any_value(),
                        }
                    ]
                )
            },
        },
    )


def test_access_logs_disabled_creates_no_bucket(public: Built) -> None:
    assert public.alb.access_logs_bucket is None
    public.template.resource_count_is("AWS::S3::Bucket", 0)
    attributes = _props(public, public.alb.load_balancer)["LoadBalancerAttributes"]
    assert not [a for a in attributes if a["Key"].startswith("access_logs.")]


# --------------------------------------------------------------------------- listener


def test_http_listener_on_80_without_a_certificate(internal: Built) -> None:
    internal.template.resource_count_is(LISTENER, 1)
    props = _props(internal, internal.alb.listener)
    assert props["Port"] == 80
    assert props["Protocol"] == "HTTP"
    assert props["LoadBalancerArn"] == ref(internal.alb.load_balancer)
    assert "Certificates" not in props and "SslPolicy" not in props
    assert internal.alb.scheme == "http"


def test_https_listener_on_443_with_certificate_and_tls12_policy(public: Built) -> None:
    public.template.resource_count_is(LISTENER, 1)
    public.template.has_resource_properties(
        LISTENER,
        {
            "Port": 443,
            "Protocol": "HTTPS",
            "Certificates": [{"CertificateArn": CERTIFICATE}],
            "SslPolicy": "ELBSecurityPolicy-TLS13-1-2-2021-06",
        },
    )
    assert public.alb.scheme == "https"


@pytest.mark.parametrize("which", ["internal", "public"])
def test_default_action_is_a_json_404(which: str, request: pytest.FixtureRequest) -> None:
    built: Built = request.getfixturevalue(which)
    (action,) = _props(built, built.alb.listener)["DefaultActions"]
    assert action["Type"] == "fixed-response"
    config = action["FixedResponseConfig"]
    assert config["StatusCode"] == "404"
    assert config["ContentType"] == "application/json"
    body = json.loads(config["MessageBody"])
    assert body["error"]["type"] == "not_found"
    assert "/<model>/v1" in body["error"]["message"]


def test_base_url_names_the_model_prefix(public: Built) -> None:
    stack = cdk.Stack.of(public.alb)
    assert stack.resolve(public.alb.base_url("m1")) == {
        "Fn::Join": [
            "",
            ["https://", {"Fn::GetAtt": [logical_id(public.alb.load_balancer), "DNSName"]}, "/m1/v1"],
        ]
    }


# --------------------------------------------------------------------------- target groups and rules


def test_one_target_group_per_model(internal: Built, public: Built) -> None:
    internal.template.resource_count_is(TARGET_GROUP, 2)
    public.template.resource_count_is(TARGET_GROUP, 1)
    assert list(internal.alb.target_groups) == ["qwen3-8b", "llama"]


@pytest.mark.parametrize("model", ["qwen3-8b", "llama"])
def test_target_group_settings(internal: Built, model: str) -> None:
    props = _props(internal, internal.alb.target_groups[model])
    assert props["TargetType"] == "ip"
    assert props["Protocol"] == "HTTP"
    assert props["Port"] == 8080
    assert props["VpcId"] == ref(internal.vpc)
    assert props["HealthCheckPath"] == "/health"
    assert props["HealthCheckIntervalSeconds"] == 10
    assert props["Matcher"] == {"HttpCode": "200"}
    assert props["Tags"] == [{"Key": "eks:eks-cluster-name", "Value": CLUSTER_NAME}]
    assert props["TargetGroupAttributes"] == [
        {"Key": "load_balancing.algorithm.type", "Value": "least_outstanding_requests"},
        {"Key": "deregistration_delay.timeout_seconds", "Value": "120"},
        {"Key": "slow_start.duration_seconds", "Value": "30"},
    ]


def test_target_group_defaults(public: Built) -> None:
    props = _props(public, public.alb.target_groups["m1"])
    assert props["Port"] == 8000
    assert props["HealthCheckIntervalSeconds"] == 15
    assert {a["Key"]: a["Value"] for a in props["TargetGroupAttributes"]} == {
        "load_balancing.algorithm.type": "least_outstanding_requests",
        "deregistration_delay.timeout_seconds": "300",
        "slow_start.duration_seconds": "60",
    }


# qwen3-8b has an explicit priority; llama's is derived from its name, not its list position.
@pytest.mark.parametrize(
    ("model", "priority"), [("qwen3-8b", 10), ("llama", default_route_priority("llama"))]
)
def test_path_rule_rewrites_and_forwards_to_the_models_target_group(
    internal: Built, model: str, priority: int
) -> None:
    internal.template.resource_count_is(RULE, 2)
    internal.template.has_resource_properties(
        RULE,
        {
            "ListenerArn": ref(internal.alb.listener),
            "Priority": priority,
            "Conditions": [{"Field": "path-pattern", "PathPatternConfig": {"Values": [f"/{model}/*"]}}],
            "Transforms": [
                {
                    "Type": "url-rewrite",
                    "UrlRewriteConfig": {"Rewrites": [{"Regex": f"^/{model}/(.*)$", "Replace": "/$1"}]},
                }
            ],
            "Actions": [{"Type": "forward", "TargetGroupArn": ref(internal.alb.target_groups[model])}],
        },
    )


# --------------------------------------------------------------------------- security groups


def _ingress(built: Built) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = _props(built, built.alb.security_group)["SecurityGroupIngress"]
    return [{k: v for k, v in r.items() if k != "Description"} for r in rules]


def test_clients_reach_only_the_listener_port_from_allowed_cidrs(internal: Built, public: Built) -> None:
    assert _ingress(internal) == [
        {"CidrIp": INTERNAL_CIDR, "FromPort": 80, "ToPort": 80, "IpProtocol": "tcp"}
    ]
    assert _ingress(public) == [
        {"CidrIp": cidr, "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"} for cidr in CLIENT_CIDRS
    ]


def test_clients_default_to_the_vpc_cidr(fallback: Built) -> None:
    assert _ingress(fallback) == [
        {
            "CidrIp": {"Fn::GetAtt": [logical_id(fallback.vpc), "CidrBlock"]},
            "FromPort": 80,
            "ToPort": 80,
            "IpProtocol": "tcp",
        }
    ]


def test_no_egress_until_targets_are_allowed(public: Built) -> None:
    egress = _props(public, public.alb.security_group)["SecurityGroupEgress"]
    assert [{k: v for k, v in r.items() if k != "Description"} for r in egress] == [
        {"CidrIp": "255.255.255.255/32", "FromPort": 252, "ToPort": 86, "IpProtocol": "icmp"}
    ]
    public.template.resource_count_is("AWS::EC2::SecurityGroupEgress", 0)


def test_allow_targets_in_opens_the_target_port_only(internal: Built) -> None:
    assert internal.pods is not None
    alb_sg = {"Fn::GetAtt": [logical_id(internal.alb.security_group), "GroupId"]}
    pods_sg = {"Fn::GetAtt": [logical_id(internal.pods), "GroupId"]}
    internal.template.resource_count_is("AWS::EC2::SecurityGroupEgress", 1)
    internal.template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {
            "GroupId": alb_sg,
            "DestinationSecurityGroupId": pods_sg,
            "IpProtocol": "tcp",
            "FromPort": 8080,
            "ToPort": 8080,
        },
    )
    internal.template.resource_count_is("AWS::EC2::SecurityGroupIngress", 1)
    internal.template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "GroupId": pods_sg,
            "SourceSecurityGroupId": alb_sg,
            "IpProtocol": "tcp",
            "FromPort": 8080,
            "ToPort": 8080,
        },
    )
    # The load balancer's group keeps no inline egress once the target rule exists.
    assert "SecurityGroupEgress" not in _props(internal, internal.alb.security_group)


# --------------------------------------------------------------------------- target group bindings


@pytest.mark.parametrize("model", ["qwen3-8b", "llama"])
def test_bind_services_registers_each_service_in_its_target_group(internal: Built, model: str) -> None:
    assert internal.bindings is not None
    internal.template.resource_count_is(KUBERNETES_RESOURCE, 2)
    docs = manifest_of(internal.template, internal.bindings[model])
    assert docs == [
        target_group_binding(
            name=f"vllm-{model}",
            namespace="inference",
            service_name=f"vllm-{model}",
            service_port=8080,
            target_group_arn=ref(internal.alb.target_groups[model]),  # type: ignore[arg-type]
            api_version=AUTO_MODE_TGB_API,
        )
    ]


def test_bindings_wait_for_their_service(internal: Built) -> None:
    assert internal.bindings is not None and internal.after is not None
    found = resources(internal.template, KUBERNETES_RESOURCE)
    assert logical_id(internal.after) in found[logical_id(internal.bindings["llama"])]["DependsOn"]
    assert "DependsOn" not in found[logical_id(internal.bindings["qwen3-8b"])]
