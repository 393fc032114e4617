"""GatewayFleet on its own: routes given as data (what a SageMaker tier passes) reach the instances and
the role; the Bedrock grant stays the tier's."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from gpufarm.config import load_preset
from gpufarm.constructs.gateway_fleet import GatewayFleet, GatewayRoutes
from gpufarm.hosts import gateway as host_gateway
from tests.constructs.helpers import new_stack, new_vpc

ENDPOINT = "arn:aws:sagemaker:us-east-1:111122223333:endpoint/models"


def _fleet() -> tuple[cdk.Stack, GatewayFleet]:
    stack = new_stack()
    vpc = new_vpc(stack)
    tier = load_preset("ec2-poc")
    target_group = elbv2.CfnTargetGroup(
        stack, "Tg", port=4000, protocol="HTTP", target_type="instance", vpc_id=vpc.vpc_id
    )
    routes = GatewayRoutes(
        config={"model_list": [{"model_name": "m", "litellm_params": {"model": "sagemaker/models"}}]},
        environment={"GPUFARM_SAGEMAKER_ENDPOINT": "models"},
        statements=[
            iam.PolicyStatement(
                sid="InvokeEndpoint", actions=["sagemaker:InvokeEndpoint"], resources=[ENDPOINT]
            )
        ],
    )
    fleet = GatewayFleet(
        stack,
        "Gateway",
        tier=tier,
        routes=routes,
        image="ghcr.io/berriai/litellm@sha256:" + "0" * 64,
        vpc=vpc,
        subnets=vpc.private_subnets,
        security_group=ec2.SecurityGroup(stack, "Sg", vpc=vpc),
        target_group=target_group,
        log_group=logs.LogGroup(stack, "Logs"),
    )
    return stack, fleet


def _statements(template: Template) -> dict[str, dict[str, Any]]:
    (policy,) = template.find_resources("AWS::IAM::Policy").values()
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_the_routes_config_and_environment_reach_the_instances() -> None:
    _, fleet = _fleet()
    text = fleet.user_data
    assert "sagemaker/models" in text
    env = text.split(f"cat > {host_gateway.ENV_FILE} <<'GPUFARM_EOF'\n", 1)[1].split("\nGPUFARM_EOF", 1)[0]
    assert "GPUFARM_SAGEMAKER_ENDPOINT=models" in env.splitlines()
    # The EKS gateway's environment as well: no downloads at start.
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in env.splitlines()


def test_the_routes_statements_join_the_tiers_bedrock_grant() -> None:
    stack, _ = _fleet()
    statements = _statements(Template.from_stack(stack))
    assert statements["InvokeEndpoint"]["Resource"] == ENDPOINT
    assert statements["InvokeEndpoint"]["Action"] == "sagemaker:InvokeEndpoint"
    assert set(statements["InvokeModels"]["Action"]) == {
        "bedrock:InvokeModel",
        "bedrock:InvokeModelWithResponseStream",
    }


def test_the_group_serves_the_target_group_and_rolls_by_instance_refresh() -> None:
    stack, _ = _fleet()
    template = Template.from_stack(stack)
    (group,) = template.find_resources("AWS::AutoScaling::AutoScalingGroup").values()
    tier = load_preset("ec2-poc")
    assert (group["Properties"]["MinSize"], group["Properties"]["MaxSize"]) == (
        str(tier.ec2.gateway.min_instances),
        str(tier.ec2.gateway.max_instances),
    )
    (target_group,) = template.find_resources("AWS::ElasticLoadBalancingV2::TargetGroup")
    assert group["Properties"]["TargetGroupARNs"] == [{"Ref": target_group}]
    assert group["UpdatePolicy"]["AutoScalingInstanceRefresh"]["Preferences"]["MinHealthyPercentage"] == 100
    (launch,) = template.find_resources("AWS::EC2::LaunchTemplate").values()
    data = launch["Properties"]["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["BlockDeviceMappings"][0]["Ebs"]["Encrypted"] is True
