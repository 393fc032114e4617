"""A model split into shares, construct by construct: VllmServing, InferenceAlb weights, alarms per share.

InferenceNlb's `weights` are covered in test_nlb_construct.py; the tier wiring in
tests/tiers/test_shares.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from gpufarm.config import AccessLogsConfig, IngressConfig, LoadBalancerScheme, ModelConfig, ServingConfig
from gpufarm.config.model import AlarmsConfig, ModelShareConfig, OidcAuthConfig, TargetOptimizerConfig
from gpufarm.constructs import InferenceAlb, VllmServing, enable_compliance_checks
from gpufarm.constructs.ingress import RouterTarget
from gpufarm.constructs.observability import InferenceAlarms
from gpufarm.k8s.binding import LBC_TGB_API, target_group_binding
from gpufarm.k8s.labels import CAPACITY_CLASS_LABEL, NODEPOOL_LABEL, SHARE_LABEL
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

TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"
RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"
KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
ALARM = "AWS::CloudWatch::Alarm"
OPTIMIZER = TargetOptimizerConfig(enabled=True, data_port=8080, control_port=3000)
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
OIDC = OidcAuthConfig(
    issuer="https://idp.example.com",
    authorization_endpoint="https://idp.example.com/authorize",
    token_endpoint="https://idp.example.com/token",
    user_info_endpoint="https://idp.example.com/userinfo",
    client_id="gpufarm",
    client_secret="gpufarm/oidc-client",
)
SPLIT = ModelConfig(
    name="llama",
    weights="meta-llama/Llama-3.3-70B-Instruct",
    gpus=4,
    shares=[
        ModelShareConfig(capacity_class="h100", replicas=2, weight=3),
        ModelShareConfig(name="l40s", node_pool="l40s-pool", replicas=1, gpus=2, weight=1),
    ],
)
WHOLE = ModelConfig(name="qwen3-8b", weights="Qwen/Qwen3-8B")
WEIGHTS = {"llama": {"h100": 3, "l40s": 1}}


@dataclass(frozen=True)
class Built:
    alb: InferenceAlb
    serving: VllmServing
    template: Template
    bindings: dict[str, Any]


@pytest.fixture(scope="module")
def built() -> Built:
    """A split model and a whole one, served and bound behind an ALB with the Target Optimizer."""
    stack = new_stack("SharesAlb")
    vpc = new_vpc(stack)
    cluster = imported_cluster(stack)
    serving = VllmServing(
        stack,
        "Serving",
        cluster=cluster,
        config=ServingConfig(namespace="inference"),
        models=[SPLIT, WHOLE],
        default_pool="l40s-pool",
        region=REGION,
        target_optimizer=OPTIMIZER,
        node_selectors={"llama/h100": {CAPACITY_CLASS_LABEL: "h100"}},
    )
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=IngressConfig(access_logs=AccessLogsConfig(enabled=False), target_optimizer=OPTIMIZER),
        model_names=["llama", "qwen3-8b"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
        weights=WEIGHTS,
    )
    bindings = alb.bind_services(
        cluster=cluster,
        namespace="inference",
        services={
            "llama": {share: serving.service_of("llama", share) for share in ("h100", "l40s")},
            "qwen3-8b": serving.service_of("qwen3-8b"),
        },
        api_version=LBC_TGB_API,
        after=dict(serving.model_manifests),
    )
    return Built(alb, serving, Template.from_stack(stack), bindings)


def _props(built: Built, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = built.template.to_json()["Resources"][logical_id(construct)]["Properties"]
    return found


# --------------------------------------------------------------------------- VllmServing


def _docs(built: Built, model: str) -> dict[str, dict[str, Any]]:
    return {
        f"{d['kind']}/{d['metadata']['name']}": d
        for d in manifest_of(built.template, built.serving.model_manifests[model])
    }


def test_a_split_model_is_one_manifest_with_a_deployment_and_service_per_share(built: Built) -> None:
    assert sorted(_docs(built, "llama")) == [
        "Deployment/vllm-llama-h100",
        "Deployment/vllm-llama-l40s",
        "Service/vllm-llama-h100",
        "Service/vllm-llama-l40s",
    ]
    assert built.serving.model_manifests["llama"].node.id == "ModelLlama"
    assert sorted(_docs(built, "qwen3-8b")) == ["Deployment/vllm-qwen3-8b", "Service/vllm-qwen3-8b"]


def test_each_share_runs_with_its_own_placement_replicas_and_gpus(built: Built) -> None:
    docs = _docs(built, "llama")
    h100 = docs["Deployment/vllm-llama-h100"]["spec"]
    l40s = docs["Deployment/vllm-llama-l40s"]["spec"]
    assert h100["template"]["spec"]["nodeSelector"] == {CAPACITY_CLASS_LABEL: "h100"}
    assert l40s["template"]["spec"]["nodeSelector"] == {NODEPOOL_LABEL: "gpu-l40s-pool"}
    assert (h100["replicas"], l40s["replicas"]) == (2, 1)
    gpus = [
        d["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] for d in (h100, l40s)
    ]
    assert gpus == ["4", "2"]
    # The Target Optimizer's agent joins every share's pods, and each Service exposes its port.
    for name in ("h100", "l40s"):
        service = docs[f"Service/vllm-llama-{name}"]
        assert service["spec"]["selector"][SHARE_LABEL] == name
        assert [p["name"] for p in service["spec"]["ports"]] == ["http", "data"]


# --------------------------------------------------------------------------- InferenceAlb weights


def test_a_weighted_model_gets_a_target_group_per_share(built: Built) -> None:
    groups = built.alb.weighted_target_groups["llama"]
    assert sorted(groups) == ["h100", "l40s"]
    assert [groups[g].node.id for g in ("h100", "l40s")] == [
        "TargetGroupH100Data8080Control3000",
        "TargetGroupL40sData8080Control3000",
    ]
    for group in groups.values():
        props = _props(built, group)
        assert (props["Port"], props["TargetControlPort"], props["HealthCheckPath"]) == (
            8080,
            3000,
            "/health",
        )
    # The unweighted model keeps its one target group and ID.
    assert list(built.alb.target_groups) == ["qwen3-8b"]
    assert built.alb.target_groups["qwen3-8b"].node.id == "TargetGroupData8080Control3000"
    built.template.resource_count_is(TARGET_GROUP, 3)


def test_the_models_rule_forwards_to_its_shares_by_weight(built: Built) -> None:
    groups = built.alb.weighted_target_groups["llama"]
    (rule,) = [
        r["Properties"]
        for r in resources(built.template, RULE).values()
        if r["Properties"]["Conditions"][0]["PathPatternConfig"]["Values"] == ["/llama/*"]
    ]
    assert rule["Actions"] == [
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


@pytest.mark.parametrize("share", ["h100", "l40s"])
def test_each_share_service_is_bound_to_its_target_group(built: Built, share: str) -> None:
    binding = built.bindings[f"llama/{share}"]
    assert manifest_of(built.template, binding) == [
        target_group_binding(
            name=f"vllm-llama-{share}-8080-3000",
            namespace="inference",
            service_name=f"vllm-llama-{share}",
            service_port=8080,
            target_group_arn=ref(built.alb.weighted_target_groups["llama"][share]),  # type: ignore[arg-type]
            api_version=LBC_TGB_API,
        )
    ]
    assert binding.node.id == f"BindingLlama{share.capitalize()}Data8080Control3000"
    depends = resources(built.template, KUBERNETES_RESOURCE)[logical_id(binding)]["DependsOn"]
    assert logical_id(built.serving.model_manifests["llama"]) in depends


def test_weighted_routes_authenticate_first() -> None:
    stack = new_stack("SharesOidc")
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=new_vpc(stack),
        config=IngressConfig(
            certificate_arn=CERTIFICATE, oidc=OIDC, access_logs=AccessLogsConfig(enabled=False)
        ),
        model_names=["llama"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
        weights=WEIGHTS,
    )
    (rule,) = resources(Template.from_stack(stack), RULE).values()
    auth, forward = rule["Properties"]["Actions"]
    assert (auth["Type"], auth["Order"]) == ("authenticate-oidc", 1)
    groups = alb.weighted_target_groups["llama"]
    assert forward == {
        "Type": "forward",
        "Order": 2,
        "ForwardConfig": {
            "TargetGroups": [
                {"TargetGroupArn": ref(groups["h100"]), "Weight": 3},
                {"TargetGroupArn": ref(groups["l40s"]), "Weight": 1},
            ]
        },
    }


def _alb(**kwargs: Any) -> InferenceAlb:
    stack = new_stack("Invalid")
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=AZS)
    args: dict[str, Any] = {"model_names": ["m1"], "target_port": 8000, "cluster_name": "c", **kwargs}
    return InferenceAlb(stack, "Ingress", vpc=vpc, config=IngressConfig(), **args)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"weights": {"m2": {"a": 1}}},
            "'weights' names model 'm2', which has no route; models: m1",
        ),
        ({"weights": {"m1": {}}}, "'weights' of model 'm1' must name at least one target group, got none"),
        (
            {"weights": {"m1": {f"g{i}": 1 for i in range(6)}}},
            "'weights' of model 'm1' must name at most 5 target groups (one forward action), got 6",
        ),
        (
            {"weights": {"m1": {"H100": 1}}},
            "'weights' of model 'm1': group names must be lowercase DNS labels (a-z, 0-9, '-', starting "
            "with a letter, at most 40 characters), got 'H100'",
        ),
        ({"weights": {"m1": {"a": 1000}}}, "'weights' of model 'm1': group 'a' must weigh 0-999, got 1000"),
        (
            {"weights": {"m1": {"a": 0, "b": 0}}},
            "'weights' of model 'm1' must give at least one group a weight above 0 (else the route "
            "forwards nowhere), got all 0",
        ),
        (
            {
                "weights": {"m1": {"a": 1, "b": 1}},
                "routed": {
                    "m1": RouterTarget(port=8081, health_check_port=19000, health_check_path="/ready")
                },
            },
            "'weights' must not name a routed model (its router chooses among one target group's pods), "
            "got 'm1' in both",
        ),
    ],
    ids=["unknown-model", "no-groups", "six-groups", "group-name", "weight-1000", "all-zero", "routed"],
)
def test_invalid_weights_are_rejected_with_an_exact_message(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        _alb(**kwargs)
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    ("services", "message"),
    [
        (
            {"m1": "vllm-m1"},
            "bind_services() needs a Service per target group of weighted model 'm1' (groups: a, b), "
            "got 'vllm-m1'",
        ),
        (
            {"m1": {"a": "vllm-m1-a"}},
            "bind_services() needs a Service per target group of weighted model 'm1' (groups: a, b), got a",
        ),
        (
            {"m2": {"a": "vllm-m2-a"}},
            "bind_services() needs one Service name for model 'm2' (it has no weights), got a mapping of 1",
        ),
        ({"m3": "vllm-m3"}, "bind_services() got model 'm3', which has no route; models: m2, m1"),
    ],
    ids=["name-for-weighted", "missing-group", "mapping-for-unweighted", "unknown-model"],
)
def test_bind_services_needs_a_service_per_share(services: dict[str, Any], message: str) -> None:
    alb = _alb(model_names=["m1", "m2"], weights={"m1": {"a": 1, "b": 1}}, vpc_cidr="10.0.0.0/16")
    stack = cdk.Stack.of(alb)
    with pytest.raises(ValueError) as excinfo:
        alb.bind_services(cluster=imported_cluster(stack), namespace="inference", services=services)
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- alarms per share


def test_each_share_target_group_gets_its_alarms() -> None:
    stack = new_stack("SharesAlarms")
    alarms = InferenceAlarms(
        stack,
        "Alarms",
        load_balancer_full_name="app/gpufarm/0123456789abcdef",
        target_groups={
            "qwen3-8b": "targetgroup/qwen/0000000000000001",
            "llama/h100": "targetgroup/llama-h100/0000000000000002",
            "llama/l40s": "targetgroup/llama-l40s/0000000000000003",
        },
        config=AlarmsConfig(),
        target_optimizer=False,
    )
    assert sorted(k for k in alarms.alarms if k.startswith("p99:")) == [
        "p99:llama/h100",
        "p99:llama/l40s",
        "p99:qwen3-8b",
    ]
    unhealthy = alarms.alarms["unhealthy:llama/l40s"]
    assert unhealthy.node.path == "SharesAlarms/Alarms/Llama/L40s/UnhealthyHosts"
    assert alarms.alarms["p99:qwen3-8b"].node.path == "SharesAlarms/Alarms/Qwen38b/P99ResponseTime"
    props = resources(Template.from_stack(stack), ALARM)[logical_id(unhealthy)]["Properties"]
    assert {d["Name"]: d["Value"] for d in props["Dimensions"]}["TargetGroup"] == (
        "targetgroup/llama-l40s/0000000000000003"
    )
    assert props["AlarmDescription"].startswith("llama/l40s: ")


# --------------------------------------------------------------------------- compliance gates


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Internet-facing HTTPS with WAF and a weighted model, synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("shares-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "SharesNag", env=cdk.Environment(region=REGION))
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr_block="10.0.0.0/16",
        availability_zones=AZS,
        public_subnet_ids=["subnet-0123456789abcdef2", "subnet-0123456789abcdef3"],
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    )
    alb = InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=IngressConfig(
            scheme=LoadBalancerScheme.INTERNET_FACING,
            certificate_arn=CERTIFICATE,
            allowed_cidrs=["198.51.100.0/24"],
        ),
        model_names=["llama", "qwen3-8b"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
        logs_key=kms.Key(stack, "LogsKey", enable_key_rotation=True),
        weights=WEIGHTS,
    )
    alb.allow_targets_in(ec2.SecurityGroup.from_security_group_id(stack, "Pods", "sg-0123456789abcdef0"))
    alb.bind_services(
        cluster=imported_cluster(stack),
        namespace="inference",
        services={
            "llama": {"h100": "vllm-llama-h100", "l40s": "vllm-llama-l40s"},
            "qwen3-8b": "vllm-qwen3-8b",
        },
    )
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return outdir / "SharesNag.template.json"


def test_weighted_alb_passes_cdk_nag(compliant_template: Path) -> None:
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_weighted_alb_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    assert cfn_lint_errors(compliant_template) == []
