"""`SageMakerEndpoint`: the endpoint, one inference component per model, their scaling and the IAM.

Built once from the `sagemaker-poc` preset plus a model with `s3://` weights, in a small stack with
cdk-nag on; each test asserts one behaviour of that template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

from gpufarm.config import TierConfig, load_preset
from gpufarm.config.model import ModelConfig
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs._util import acknowledge, private_subnets
from gpufarm.constructs.sagemaker_endpoint import SageMakerEndpoint
from gpufarm.core import sagemaker as sm
from gpufarm.deploy_rules.catalog import check_template
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import REGION, logical_id, new_stack, new_vpc

S3_WEIGHTS = "s3://gpufarm-models-123456789012/llama-3-1-8b/"


def _tier() -> TierConfig:
    tier = load_preset("sagemaker-poc")
    extra = ModelConfig(
        name="llama-8b", weights=S3_WEIGHTS, gpus=2, replicas=1, memory_gib=64, bedrock="none"
    )
    return tier.model_copy(update={"models": [*tier.models, extra]})


TIER = _tier()
COMPONENTS = sm.components_of(TIER)


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    outdir = tmp_path_factory.mktemp("sagemaker-endpoint")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "SageMakerEndpoint", env=cdk.Environment(region=REGION))
    vpc = new_vpc(stack)
    acknowledge(vpc, "AwsSolutions-VPC7", "test scaffolding: the VPC only places the endpoint's instances")
    endpoint = SageMakerEndpoint(
        stack,
        "Endpoint",
        endpoint_name=sm.endpoint_name(TIER),
        config=TIER.sagemaker,
        components=COMPONENTS,
        region=REGION,
        vpc=vpc,
        subnets=private_subnets(vpc),
    )
    caller = iam.Role(stack, "Gateway", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    endpoint.grant_invoke(caller)
    app.synth()  # raises on an unacknowledged cdk-nag finding
    path = outdir / "SageMakerEndpoint.template.json"
    return path, json.loads(path.read_text())


@pytest.fixture(scope="module")
def template(synthesized: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    return synthesized[1]


def of_type(template: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == type_]


def by_logical_id(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    resource: dict[str, Any] = template["Resources"][logical_id]
    return resource


def test_one_endpoint_named_after_the_tier_on_one_config(template: dict[str, Any]) -> None:
    (endpoint,) = of_type(template, "AWS::SageMaker::Endpoint")
    assert endpoint["EndpointName"] == "gpufarm-sagemaker-poc"
    (config_id,) = [
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::SageMaker::EndpointConfig"
    ]
    assert endpoint["EndpointConfigName"] == {"Fn::GetAtt": [config_id, "EndpointConfigName"]}


def test_the_variant_runs_the_instance_type_with_managed_instance_scaling(template: dict[str, Any]) -> None:
    (config,) = of_type(template, "AWS::SageMaker::EndpointConfig")
    (variant,) = config["ProductionVariants"]
    assert variant == {
        "VariantName": "AllTraffic",
        "InstanceType": "ml.g6.12xlarge",
        "InitialInstanceCount": 1,
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 2},
        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
    }
    # An endpoint of inference components is created with a role; no name, no KMS key (NVMe storage).
    assert "ExecutionRoleArn" in config
    assert "EndpointConfigName" not in config and "KmsKeyId" not in config


def test_each_model_is_a_component_with_its_gpus_memory_and_copies(template: dict[str, Any]) -> None:
    components = {
        c["InferenceComponentName"]: c for c in of_type(template, "AWS::SageMaker::InferenceComponent")
    }
    assert sorted(components) == sorted(c.name for c in COMPONENTS)
    llama = components["sagemaker-poc-llama-8b"]
    assert llama["VariantName"] == "AllTraffic"
    assert llama["RuntimeConfig"] == {"CopyCount": 1}
    assert llama["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 2,
        "MinMemoryRequiredInMb": 64 * 1024,
    }
    assert llama["Specification"]["StartupParameters"] == {
        "ModelDataDownloadTimeoutInSeconds": 1800,
        "ContainerStartupHealthCheckTimeoutInSeconds": 1800,
    }
    model_ref = llama["Specification"]["ModelName"]["Fn::GetAtt"]
    assert by_logical_id(template, model_ref[0])["Type"] == "AWS::SageMaker::Model"


def test_models_run_the_pinned_lmi_image_with_their_weights_and_tensor_parallel_degree(
    template: dict[str, Any],
) -> None:
    containers = {
        m["PrimaryContainer"]["Environment"]["HF_MODEL_ID"]: m
        for m in of_type(template, "AWS::SageMaker::Model")
    }
    llama = containers[S3_WEIGHTS]
    assert llama["PrimaryContainer"]["Image"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.38.0-lmi29.0.0-cu130"
    )
    assert llama["PrimaryContainer"]["Environment"] == {
        "HF_MODEL_ID": S3_WEIGHTS,
        "OPTION_ROLLING_BATCH": "vllm",
        "OPTION_TENSOR_PARALLEL_DEGREE": "2",
        "OPTION_MAX_MODEL_LEN": "8192",
        "OPTION_GPU_MEMORY_UTILIZATION": "0.9",
    }
    assert "VpcConfig" in llama and "ModelName" not in llama


def test_every_component_scales_on_concurrent_requests_per_copy(template: dict[str, Any]) -> None:
    targets = {t["ResourceId"]: t for t in of_type(template, "AWS::ApplicationAutoScaling::ScalableTarget")}
    assert targets["inference-component/sagemaker-poc-qwen3-8b"]["MinCapacity"] == 1
    assert targets["inference-component/sagemaker-poc-qwen3-4b"]["MinCapacity"] == 0
    assert {t["ScalableDimension"] for t in targets.values()} == {
        "sagemaker:inference-component:DesiredCopyCount"
    }
    tracking = [
        p
        for p in of_type(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
        if p["PolicyType"] == "TargetTrackingScaling"
    ]
    assert len(tracking) == len(COMPONENTS)
    assert {
        p["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"]["PredefinedMetricType"]
        for p in tracking
    } == {"SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"}
    assert {p["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] for p in tracking} == {4}


def test_only_the_component_that_scales_to_zero_has_a_wake_alarm(template: dict[str, Any]) -> None:
    alarms = of_type(template, "AWS::CloudWatch::Alarm")
    assert [a["Dimensions"] for a in alarms] == [
        [{"Name": "InferenceComponentName", "Value": "sagemaker-poc-qwen3-4b"}]
    ]
    (alarm,) = alarms
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/SageMaker",
        "NoCapacityInvocationFailures",
        "Sum",
    )
    (step,) = [
        p
        for p in of_type(template, "AWS::ApplicationAutoScaling::ScalingPolicy")
        if p["PolicyType"] == "StepScaling"
    ]
    assert step["StepScalingPolicyConfiguration"]["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}
    ]


def _statements(template: dict[str, Any], role_policy_name: str) -> list[dict[str, Any]]:
    for role in of_type(template, "AWS::IAM::Role"):
        for policy in role.get("Policies", []):
            if policy["PolicyName"] == role_policy_name:
                statements: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
                return statements
    raise AssertionError(f"no role policy {role_policy_name}")


def test_the_execution_role_reads_only_the_weights_prefix_and_pulls_only_the_lmi_repository(
    template: dict[str, Any],
) -> None:
    statements = {s.get("Sid"): s for s in _statements(template, "Endpoint")}
    read = json.dumps(statements["ReadWeights"])
    assert "gpufarm-models-123456789012/llama-3-1-8b/*" in read
    assert statements["ReadWeights"]["Action"] == "s3:GetObject"
    pull = json.dumps(statements["PullLmiImage"]["Resource"])
    assert ":763104351884:repository/djl-inference" in pull
    listing = [s for s in _statements(template, "Endpoint") if s.get("Action") == "s3:ListBucket"]
    assert [s["Condition"] for s in listing] == [{"StringLike": {"s3:prefix": ["llama-3-1-8b/*"]}}]


def test_the_caller_may_invoke_exactly_this_endpoint(template: dict[str, Any]) -> None:
    policies = [p for p in of_type(template, "AWS::IAM::Policy") if "Gateway" in json.dumps(p["Roles"])]
    (statement,) = policies[0]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sagemaker:InvokeEndpoint"
    assert json.dumps(statement["Resource"]).endswith(':endpoint/gpufarm-sagemaker-poc"]]}')


def test_passes_cdk_nag_cfn_lint_and_the_deploy_rules(synthesized: tuple[Path, dict[str, Any]]) -> None:
    path, template = synthesized
    assert nag_violations(path.parent, annotations=False) == {}
    assert cfn_lint_errors(path) == []
    assert [v.render() for v in check_template(template)] == []


def _logical_ids(tier: TierConfig, instance_type: str) -> dict[str, str]:
    stack = new_stack()
    vpc = new_vpc(stack)
    config = tier.sagemaker.model_copy(update={"instance_type": instance_type, "max_instance_count": 3})
    endpoint = SageMakerEndpoint(
        stack,
        "Endpoint",
        endpoint_name=sm.endpoint_name(tier),
        config=config,
        components=sm.components_of(tier),
        region=REGION,
        vpc=vpc,
        subnets=private_subnets(vpc),
    )
    ids = {"endpoint": logical_id(endpoint.endpoint)}
    ids.update({name: logical_id(c) for name, c in endpoint.inference_components.items()})
    return ids


def test_the_endpoint_and_components_keep_their_logical_ids_under_routine_edits() -> None:
    # Another instance type, more instances, one more model: the endpoint and the existing models'
    # components are updated in place, never replaced.
    before = _logical_ids(load_preset("sagemaker-poc"), "ml.g6.12xlarge")
    after = _logical_ids(TIER, "ml.g5.12xlarge")
    assert {k: after[k] for k in before} == before
    assert set(after) - set(before) == {"llama-8b"}
