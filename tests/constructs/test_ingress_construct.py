"""InferenceAlb: scheme, listener, access logs, target groups and rules, SG rules, optimizer, WAF, auth."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from gpufarm.config import AccessLogsConfig, IngressConfig, LoadBalancerScheme, ModelConfig, ServingConfig
from gpufarm.config.model import (
    CognitoAuthConfig,
    OidcAuthConfig,
    TargetOptimizerConfig,
    WafConfig,
    default_route_priority,
)
from gpufarm.constructs import InferenceAlb, VllmServing, enable_compliance_checks
from gpufarm.constructs._util import construct_id
from gpufarm.constructs.ingress import RouterTarget, secret_reference
from gpufarm.k8s.binding import AUTO_MODE_TGB_API, LBC_TGB_API, target_group_binding
from gpufarm.k8s.serving import AGENT_CONTAINER
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import (
    AZS,
    CLUSTER_NAME,
    KUBERNETES_RESOURCE,
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
INTERNAL_CIDR = "10.1.0.0/16"
CLIENT_CIDRS = ["198.51.100.0/24", "203.0.113.0/24"]
LB = "AWS::ElasticLoadBalancingV2::LoadBalancer"
LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"
RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"
WEB_ACL = "AWS::WAFv2::WebACL"
OPTIMIZER = TargetOptimizerConfig(enabled=True, data_port=8080, control_port=3000)
VLLM_PORT = 8000
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


@dataclass(frozen=True)
class Built:
    alb: InferenceAlb
    template: Template
    vpc: ec2.Vpc
    pods: ec2.SecurityGroup | None = None
    bindings: dict[str, Any] | None = None
    after: cdk.CfnResource | None = None
    serving: VllmServing | None = None


@pytest.fixture(scope="module")
def internal() -> Built:
    """Internal HTTP, non-default timings and log retention, two models, bound to their Services."""
    stack = new_stack("InternalAlb")
    vpc = new_vpc(stack, INTERNAL_CIDR)
    config = IngressConfig(
        idle_timeout_seconds=900,
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
        config=IngressConfig(access_logs=AccessLogsConfig(enabled=False), waf=WafConfig(enabled=False)),
        model_names=["m1"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    return Built(alb, Template.from_stack(stack), vpc)


OPTIMIZED_MODELS = [
    ModelConfig(name="qwen3-8b", weights="Qwen/Qwen3-8B", max_num_seqs=32),
    ModelConfig(name="llama", weights="meta-llama/Llama-3.1-8B-Instruct", target_control_max_concurrency=4),
]


@pytest.fixture(scope="module")
def optimized() -> Built:
    """Target Optimizer on: vLLM on 8000, agent data 8080, control 3000; models served and bound."""
    stack = new_stack("OptimizedAlb")
    vpc = new_vpc(stack)
    cluster = imported_cluster(stack)
    serving_config = ServingConfig(namespace="inference", port=VLLM_PORT)
    serving = VllmServing(
        stack,
        "Serving",
        cluster=cluster,
        config=serving_config,
        models=OPTIMIZED_MODELS,
        default_pool="l40s",
        region=REGION,
        target_optimizer=OPTIMIZER,
    )
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=IngressConfig(access_logs=AccessLogsConfig(enabled=False), target_optimizer=OPTIMIZER),
        model_names=[m.name for m in OPTIMIZED_MODELS],
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
    )
    pods = ec2.SecurityGroup(stack, "Pods", vpc=vpc)
    alb.allow_targets_in(pods)
    bindings = alb.bind_services(
        cluster=cluster,
        namespace="inference",
        services={m.name: serving.service_of(m.name) for m in OPTIMIZED_MODELS},
        api_version=LBC_TGB_API,
        after=dict(serving.model_manifests),
    )
    return Built(alb, Template.from_stack(stack), vpc, pods, bindings, serving=serving)


def _authenticated(name: str, **auth: Any) -> Built:
    stack = new_stack(name)
    vpc = new_vpc(stack)
    config = IngressConfig(
        certificate_arn=CERTIFICATE,
        access_logs=AccessLogsConfig(enabled=False),
        waf=WafConfig(enabled=False),
        **auth,
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
def oidc() -> Built:
    """Internal HTTPS with OIDC authentication on every route."""
    return _authenticated("OidcAlb", oidc=OIDC)


@pytest.fixture(scope="module")
def cognito() -> Built:
    """Internal HTTPS with Cognito authentication on every route."""
    return _authenticated("CognitoAlb", cognito=COGNITO)


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
    ]


def test_target_group_defaults(public: Built) -> None:
    props = _props(public, public.alb.target_groups["m1"])
    assert props["Port"] == 8000
    assert props["HealthCheckIntervalSeconds"] == 15
    assert {a["Key"]: a["Value"] for a in props["TargetGroupAttributes"]} == {
        "load_balancing.algorithm.type": "least_outstanding_requests",
        "deregistration_delay.timeout_seconds": "300",
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


def test_optimizer_off_keeps_target_groups_and_bindings_as_they_were(internal: Built) -> None:
    assert internal.alb.control_port is None
    assert internal.alb.target_ports == [8080]
    for model, target_group in internal.alb.target_groups.items():
        assert target_group.node.id == "TargetGroup"
        assert "TargetControlPort" not in _props(internal, target_group)
        assert internal.bindings is not None
        assert internal.bindings[model].node.id == f"Binding{construct_id(model)}"
    assert internal.alb.binding_name("vllm-llama") == "vllm-llama"


# --------------------------------------------------------------------------- Target Optimizer


def _model_docs(built: Built, model: str) -> dict[str, dict[str, Any]]:
    assert built.serving is not None
    return {d["kind"]: d for d in manifest_of(built.template, built.serving.model_manifests[model])}


def _agent_env(built: Built, model: str) -> dict[str, str]:
    pod = _model_docs(built, model)["Deployment"]["spec"]["template"]["spec"]
    [agent] = [c for c in pod["initContainers"] if c["name"] == AGENT_CONTAINER]
    return {e["name"]: e["value"] for e in agent["env"]}


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


OPTIMIZED_NAMES = [m.name for m in OPTIMIZED_MODELS]


@pytest.mark.parametrize("model", OPTIMIZED_NAMES)
def test_target_group_port_is_the_agent_data_port(optimized: Built, model: str) -> None:
    props = _props(optimized, optimized.alb.target_groups[model])
    data_address = _agent_env(optimized, model)["TARGET_CONTROL_DATA_ADDRESS"]
    assert props["Port"] == _port(data_address) == OPTIMIZER.data_port == optimized.alb.target_port
    # Health checks pass through the agent, so a broken agent takes its target out.
    assert props["HealthCheckPort"] == "traffic-port"


@pytest.mark.parametrize("model", OPTIMIZED_NAMES)
def test_target_control_port_is_the_agent_control_port(optimized: Built, model: str) -> None:
    props = _props(optimized, optimized.alb.target_groups[model])
    control_address = _agent_env(optimized, model)["TARGET_CONTROL_CONTROL_ADDRESS"]
    assert props["TargetControlPort"] == _port(control_address) == OPTIMIZER.control_port


@pytest.mark.parametrize("model", OPTIMIZED_NAMES)
def test_agent_forwards_to_the_vllm_port(optimized: Built, model: str) -> None:
    deployment = _model_docs(optimized, model)["Deployment"]
    [vllm] = deployment["spec"]["template"]["spec"]["containers"]
    vllm_port = int(vllm["args"][vllm["args"].index("--port") + 1])
    assert _port(_agent_env(optimized, model)["TARGET_CONTROL_DESTINATION_ADDRESS"]) == vllm_port == VLLM_PORT
    assert optimized.alb.app_port == VLLM_PORT


@pytest.mark.parametrize(("model", "concurrency"), [("qwen3-8b", "32"), ("llama", "4")])
def test_agent_max_concurrency_comes_from_the_model(optimized: Built, model: str, concurrency: str) -> None:
    assert _agent_env(optimized, model)["TARGET_CONTROL_MAX_CONCURRENCY"] == concurrency


@pytest.mark.parametrize("model", OPTIMIZED_NAMES)
def test_binding_names_the_service_port_that_reaches_the_agent(optimized: Built, model: str) -> None:
    assert optimized.bindings is not None
    [binding] = manifest_of(optimized.template, optimized.bindings[model])
    service = _model_docs(optimized, model)["Service"]
    [data] = [p for p in service["spec"]["ports"] if p["port"] == binding["spec"]["serviceRef"]["port"]]
    assert data["targetPort"] == OPTIMIZER.data_port
    assert binding["spec"]["serviceRef"]["name"] == service["metadata"]["name"]
    assert binding["spec"]["targetGroupARN"] == ref(optimized.alb.target_groups[model])
    assert binding["apiVersion"] == LBC_TGB_API


def test_optimizer_ports_name_the_target_groups_and_bindings(optimized: Built) -> None:
    assert optimized.bindings is not None
    for model, target_group in optimized.alb.target_groups.items():
        # A new construct ID: CloudFormation creates the new target group before deleting the old.
        assert target_group.node.id == "TargetGroupData8080Control3000"
        assert optimized.bindings[model].node.id.endswith("Data8080Control3000")
        [binding] = manifest_of(optimized.template, optimized.bindings[model])
        assert binding["metadata"]["name"] == f"vllm-{model}-8080-3000"


def _rules(built: Built, type_: str) -> list[dict[str, Any]]:
    found = resources(built.template, type_)
    return sorted(
        ({k: v for k, v in r["Properties"].items() if k != "Description"} for r in found.values()),
        key=json.dumps,
    )


def test_optimizer_opens_data_and_control_ports_from_the_load_balancer_only(optimized: Built) -> None:
    assert optimized.pods is not None
    alb_sg = {"Fn::GetAtt": [logical_id(optimized.alb.security_group), "GroupId"]}
    pods_sg = {"Fn::GetAtt": [logical_id(optimized.pods), "GroupId"]}
    assert optimized.alb.target_ports == [8080, 3000]
    assert _rules(optimized, "AWS::EC2::SecurityGroupIngress") == sorted(
        (
            {
                "GroupId": pods_sg,
                "SourceSecurityGroupId": alb_sg,
                "IpProtocol": "tcp",
                "FromPort": p,
                "ToPort": p,
            }
            for p in (8080, 3000)
        ),
        key=json.dumps,
    )
    assert _rules(optimized, "AWS::EC2::SecurityGroupEgress") == sorted(
        (
            {
                "GroupId": alb_sg,
                "DestinationSecurityGroupId": pods_sg,
                "IpProtocol": "tcp",
                "FromPort": p,
                "ToPort": p,
            }
            for p in (8080, 3000)
        ),
        key=json.dumps,
    )


# --------------------------------------------------------------------------- WAF


def test_waf_is_associated_with_the_load_balancer(public: Built) -> None:
    assert public.alb.waf is not None
    public.template.resource_count_is(WEB_ACL, 1)
    public.template.has_resource_properties(
        "AWS::WAFv2::WebACLAssociation",
        {
            "ResourceArn": ref(public.alb.load_balancer),
            "WebACLArn": {"Fn::GetAtt": [logical_id(public.alb.waf.web_acl), "Arn"]},
        },
    )


def test_no_waf_when_disabled(fallback: Built) -> None:
    assert fallback.alb.waf is None
    fallback.template.resource_count_is(WEB_ACL, 0)


# --------------------------------------------------------------------------- authentication


def _actions(built: Built) -> list[dict[str, Any]]:
    (rule,) = resources(built.template, RULE).values()
    actions: list[dict[str, Any]] = rule["Properties"]["Actions"]
    return actions


def test_oidc_authenticates_before_forwarding(oidc: Built) -> None:
    assert _actions(oidc) == [
        {
            "Type": "authenticate-oidc",
            "Order": 1,
            "AuthenticateOidcConfig": {
                "Issuer": OIDC.issuer,
                "AuthorizationEndpoint": OIDC.authorization_endpoint,
                "TokenEndpoint": OIDC.token_endpoint,
                "UserInfoEndpoint": OIDC.user_info_endpoint,
                "ClientId": OIDC.client_id,
                "ClientSecret": "{{resolve:secretsmanager:gpufarm/oidc-client:SecretString}}",
                "OnUnauthenticatedRequest": "deny",
            },
        },
        {"Type": "forward", "Order": 2, "TargetGroupArn": ref(oidc.alb.target_groups["m1"])},
    ]


def test_oidc_client_secret_appears_only_as_a_dynamic_reference(oidc: Built) -> None:
    text = json.dumps(oidc.template.to_json())
    assert text.count(OIDC.client_secret) == 1
    assert "{{resolve:secretsmanager:" + OIDC.client_secret + ":SecretString}}" in text


def test_secret_reference_takes_an_arn_as_well() -> None:
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gpufarm/oidc-AbCdEf"
    assert secret_reference(arn) == f"{{{{resolve:secretsmanager:{arn}:SecretString}}}}"


def test_cognito_authenticates_before_forwarding(cognito: Built) -> None:
    assert _actions(cognito) == [
        {
            "Type": "authenticate-cognito",
            "Order": 1,
            "AuthenticateCognitoConfig": {
                "UserPoolArn": COGNITO.user_pool_arn,
                "UserPoolClientId": COGNITO.user_pool_client_id,
                "UserPoolDomain": COGNITO.user_pool_domain,
                "OnUnauthenticatedRequest": "deny",
            },
        },
        {"Type": "forward", "Order": 2, "TargetGroupArn": ref(cognito.alb.target_groups["m1"])},
    ]


@pytest.mark.parametrize("which", ["oidc", "cognito"])
def test_authentication_lets_the_load_balancer_reach_the_identity_provider(
    which: str, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    egress = _props(built, built.alb.security_group)["SecurityGroupEgress"]
    assert [{k: v for k, v in r.items() if k != "Description"} for r in egress] == [
        {"CidrIp": "0.0.0.0/0", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"}
    ]


def test_routes_without_authentication_only_forward(internal: Built) -> None:
    for rule in resources(internal.template, RULE).values():
        [action] = rule["Properties"]["Actions"]
        assert action["Type"] == "forward"
        assert "Order" not in action


# --------------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            IngressConfig(target_optimizer=TargetOptimizerConfig(enabled=True, data_port=8000)),
            "'target_optimizer.data_port' must differ from 'target_port' (the agent and vLLM share "
            "the pod's network), got 8000 for both",
        ),
        (
            IngressConfig(target_optimizer=TargetOptimizerConfig(enabled=True, control_port=8000)),
            "'target_optimizer.control_port' must differ from 'target_port' (the agent and vLLM share "
            "the pod's network), got 8000 for both",
        ),
        (
            IngressConfig(
                target_optimizer=TargetOptimizerConfig(enabled=True, data_port=3000, control_port=3000)
            ),
            "'target_optimizer.control_port' must differ from 'target_optimizer.data_port' (the agent and "
            "vLLM share the pod's network), got 3000 for both",
        ),
        (
            IngressConfig(oidc=OIDC),
            "'oidc' needs 'certificate_arn' (load balancer authentication works on HTTPS listeners only), "
            "got no certificate",
        ),
        (
            IngressConfig(cognito=COGNITO),
            "'cognito' needs 'certificate_arn' (load balancer authentication works on HTTPS listeners "
            "only), got no certificate",
        ),
        (
            IngressConfig(certificate_arn=CERTIFICATE, oidc=OIDC, cognito=COGNITO),
            "'cognito' must be empty when 'oidc' is set (one authentication action per route), got a "
            "Cognito user pool",
        ),
        (
            IngressConfig(slow_start_seconds=30),
            "'slow_start_seconds' must be 0: the target groups route by least outstanding requests, "
            "which the ELB API does not allow together with slow start, got 30",
        ),
    ],
    ids=[
        "data-port",
        "control-port",
        "data-equals-control",
        "oidc-http",
        "cognito-http",
        "two-auths",
        "lor-with-slow-start",
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(config: IngressConfig, message: str) -> None:
    stack = new_stack("Invalid")
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=AZS)
    with pytest.raises(ValueError) as excinfo:
        InferenceAlb(
            stack, "Ingress", vpc=vpc, config=config, model_names=["m1"], target_port=8000, cluster_name="c"
        )
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- compliance gates


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Internet-facing HTTPS with WAF, the Target Optimizer and OIDC, synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("alb-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "AlbNag", env=cdk.Environment(region=REGION))
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
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        allowed_cidrs=CLIENT_CIDRS,
        target_optimizer=OPTIMIZER,
        oidc=OIDC,
    )
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        model_names=["m1", "m2"],
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
        logs_key=kms.Key(stack, "LogsKey", enable_key_rotation=True),
    )
    alb.allow_targets_in(ec2.SecurityGroup.from_security_group_id(stack, "Pods", "sg-0123456789abcdef0"))
    alb.bind_services(
        cluster=imported_cluster(stack), namespace="inference", services={"m1": "vllm-m1", "m2": "vllm-m2"}
    )
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return outdir / "AlbNag.template.json"


def test_hardened_alb_passes_cdk_nag(compliant_template: Path) -> None:
    # The fixture's synth raises on an unacknowledged finding; the report must be empty too.
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_hardened_alb_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    assert cfn_lint_errors(compliant_template) == []


# ----------------------------------------------------------------------------- default route (gateway)

GATEWAY_PORT = 4000


def _gateway_alb(config: IngressConfig) -> tuple[InferenceAlb, Template, ec2.SecurityGroup, Any]:
    stack = new_stack()
    vpc = new_vpc(stack)
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        model_names=["qwen3-8b"],
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
    )
    alb.route_default_to(port=GATEWAY_PORT, health_check_path="/health/liveliness")
    pods = ec2.SecurityGroup(stack, "Pods", vpc=vpc)
    alb.allow_targets_in(pods)
    binding = alb.bind_default(
        cluster=imported_cluster(stack), namespace="gpufarm", service="gateway", api_version=LBC_TGB_API
    )
    return alb, Template.from_stack(stack), pods, binding


@pytest.fixture(scope="module")
def gateway_route() -> tuple[InferenceAlb, Template, ec2.SecurityGroup, Any]:
    return _gateway_alb(IngressConfig(waf=WafConfig(enabled=False)))


def test_default_route_forwards_to_the_gateway_target_group(
    gateway_route: tuple[InferenceAlb, Template, ec2.SecurityGroup, Any],
) -> None:
    alb, template, _, _ = gateway_route
    assert alb.default_target_group is not None
    gateway_tg = logical_id(alb.default_target_group)
    (listener,) = resources(template, LISTENER).values()
    assert listener["Properties"]["DefaultActions"] == [
        {"Type": "forward", "TargetGroupArn": ref(alb.default_target_group)}
    ]
    props = resources(template, TARGET_GROUP)[gateway_tg]["Properties"]
    assert (props["Port"], props["TargetType"], props["HealthCheckPath"]) == (
        GATEWAY_PORT,
        "ip",
        "/health/liveliness",
    )
    attributes = {a["Key"]: a["Value"] for a in props["TargetGroupAttributes"]}
    assert attributes["load_balancing.algorithm.type"] == "least_outstanding_requests"
    assert "slow_start.duration_seconds" not in attributes


def test_model_routes_stay_next_to_the_default_route(
    gateway_route: tuple[InferenceAlb, Template, ec2.SecurityGroup, Any],
) -> None:
    alb, template, _, _ = gateway_route
    (rule,) = resources(template, RULE).values()
    assert rule["Properties"]["Actions"] == [
        {"Type": "forward", "TargetGroupArn": ref(alb.target_groups["qwen3-8b"])}
    ]


def test_gateway_port_is_opened_from_the_load_balancer_only(
    gateway_route: tuple[InferenceAlb, Template, ec2.SecurityGroup, Any],
) -> None:
    alb, template, pods, _ = gateway_route
    ingress = [
        r["Properties"]
        for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [logical_id(pods), "GroupId"]}
    ]
    assert sorted((r["FromPort"], r["ToPort"]) for r in ingress) == [
        (GATEWAY_PORT, GATEWAY_PORT),
        (8000, 8000),
    ]
    assert {json.dumps(r["SourceSecurityGroupId"]) for r in ingress} == {
        json.dumps({"Fn::GetAtt": [logical_id(alb.security_group), "GroupId"]})
    }


def test_gateway_binding_targets_the_default_group(
    gateway_route: tuple[InferenceAlb, Template, ec2.SecurityGroup, Any],
) -> None:
    alb, template, _, construct = gateway_route
    assert alb.default_target_group is not None
    (binding,) = manifest_of(template, construct)
    assert (binding["kind"], binding["metadata"]["name"]) == ("TargetGroupBinding", "gateway")
    assert binding["spec"]["serviceRef"] == {"name": "gateway", "port": GATEWAY_PORT}
    assert binding["spec"]["targetGroupARN"] == ref(alb.default_target_group)


def test_default_route_authenticates_first_when_configured() -> None:
    config = IngressConfig(certificate_arn=CERTIFICATE, oidc=OIDC, waf=WafConfig(enabled=False))
    alb, template, _, _ = _gateway_alb(config)
    assert alb.default_target_group is not None
    (listener,) = resources(template, LISTENER).values()
    auth, forward = listener["Properties"]["DefaultActions"]
    assert (auth["Type"], auth["Order"]) == ("authenticate-oidc", 1)
    assert auth["AuthenticateOidcConfig"]["ClientSecret"] == secret_reference(OIDC.client_secret)
    assert auth["AuthenticateOidcConfig"]["OnUnauthenticatedRequest"] == "deny"
    assert forward == {
        "Type": "forward",
        "Order": 2,
        "TargetGroupArn": ref(alb.default_target_group),
    }


def test_second_default_route_is_rejected(
    gateway_route: tuple[InferenceAlb, Template, ec2.SecurityGroup, Any],
) -> None:
    alb, _, _, _ = gateway_route
    with pytest.raises(
        ValueError, match=r"^route_default_to\(\) was already called: the listener has one default route$"
    ):
        alb.route_default_to(port=4001, health_check_path="/")


def test_binding_the_default_needs_a_default_route() -> None:
    stack = new_stack()
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=new_vpc(stack),
        config=IngressConfig(waf=WafConfig(enabled=False)),
        model_names=["m"],
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
    )
    with pytest.raises(
        ValueError,
        match=r"^bind_default\(\) needs route_default_to\(\) first: there is no default target group$",
    ):
        alb.bind_default(cluster=imported_cluster(stack), namespace="gpufarm", service="gateway")


# ----------------------------------------------------------------------------- LCU reservation


def test_lcu_reservation_sets_the_minimum_load_balancer_capacity() -> None:
    stack = new_stack("ReservedAlb")
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=new_vpc(stack),
        config=IngressConfig(lcu_reservation=250, waf=WafConfig(enabled=False)),
        model_names=["m1"],
        target_port=VLLM_PORT,
        cluster_name=CLUSTER_NAME,
    )
    props = Template.from_stack(stack).to_json()["Resources"][logical_id(alb.load_balancer)]["Properties"]
    assert props["MinimumLoadBalancerCapacity"] == {"CapacityUnits": 250}


def test_no_capacity_is_reserved_by_default(internal: Built) -> None:
    assert "MinimumLoadBalancerCapacity" not in _props(internal, internal.alb.load_balancer)


def test_routed_models_cannot_be_combined_with_the_target_optimizer() -> None:
    stack = new_stack()
    with pytest.raises(
        ValueError,
        match=r"^'routed' must be empty with the Target Optimizer enabled \(both choose the pod\), "
        r"got \['m'\]$",
    ):
        InferenceAlb(
            stack,
            "Ingress",
            vpc=new_vpc(stack),
            config=IngressConfig(target_optimizer=OPTIMIZER, waf=WafConfig(enabled=False)),
            model_names=["m"],
            target_port=VLLM_PORT,
            cluster_name=CLUSTER_NAME,
            routed={"m": RouterTarget(port=8081, health_check_port=19001, health_check_path="/ready")},
        )
