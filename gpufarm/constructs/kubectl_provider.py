"""The kubectl provider that `aws_eks_v2` creates to apply manifests and charts: its log groups
encrypted with the tier's logs key, and each finding cdk-nag raises on it acknowledged there."""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from gpufarm.constructs._util import acknowledge, acknowledge_all

_MANAGED_POLICY = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"


def kubectl_functions(cluster: eks.Cluster) -> dict[str, Construct]:
    """The kubectl provider's Lambda functions (L2 scopes) by their construct ID.

    'Handler' runs kubectl and helm; 'framework-onEvent' is the custom resource provider
    framework that CloudFormation calls and that calls the handler.
    """
    provider = cluster.kubectl_provider
    if provider is None:
        return {}
    return {
        child.node.scope.node.id: child.node.scope
        for child in provider.node.find_all()
        if isinstance(child, lambda_.CfnFunction) and isinstance(child.node.scope, Construct)
    }


def encrypt_kubectl_logs(cluster: eks.Cluster, logs_key: kms.IKey) -> None:
    """Encrypt the kubectl provider's log groups: the handler logs each request it gets."""
    provider = cluster.kubectl_provider
    if provider is None:
        return
    for child in provider.node.find_all():
        if isinstance(child, logs.CfnLogGroup):
            child.kms_key_id = logs_key.key_arn


def acknowledge_kubectl_provider(cluster: eks.Cluster) -> None:
    """Findings on the kubectl provider that aws_eks_v2 creates to apply manifests."""
    provider = cluster.kubectl_provider
    if provider is None:
        return
    _acknowledge_kubectl_functions(cluster)
    stack = cdk.Stack.of(cluster)
    reason_policies = (
        "The kubectl provider Lambda functions that aws_eks_v2 creates use the AWS-managed "
        "Lambda execution policies ({}) for logging and VPC networking; the provider is "
        "part of aws-cdk-lib, not configurable here."
    )
    policies = (
        "service-role/AWSLambdaBasicExecutionRole",
        "service-role/AWSLambdaVPCAccessExecutionRole",
        "AmazonEC2ContainerRegistryReadOnly",
    )
    acknowledge_all(
        provider, {_MANAGED_POLICY.format(policy): reason_policies.format(policy) for policy in policies}
    )
    for child in provider.node.find_all():
        if isinstance(child, cdk.CfnCondition) and child.node.id == "HasEcrPublic":
            policy_arn = {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly",
                    ],
                ]
            }
            condition = [stack.get_logical_id(child), policy_arn, {"Ref": "AWS::NoValue"}]
            ecr_public = json.dumps({"Fn::If": condition}, separators=(",", ":"))
            acknowledge(
                provider,
                f"AwsSolutions-IAM4[Policy::{ecr_public}]",
                reason_policies.format(
                    "AmazonElasticContainerRegistryPublicReadOnly, only in partitions with ECR Public"
                ),
            )
        if (
            isinstance(child, lambda_.CfnFunction)
            and child.node.scope is not None
            and (child.node.scope.node.id == "Handler")
        ):
            acknowledge(
                provider,
                f"AwsSolutions-IAM5[Resource::<{stack.get_logical_id(child)}.Arn>:*]",
                "The provider framework invokes any version of its own kubectl handler "
                "function; the wildcard is the version suffix of that one function.",
            )
    acknowledge(
        provider,
        "AwsSolutions-L1",
        "The kubectl handler's runtime is chosen by aws-cdk-lib to match the kubectl "
        "layer; it is upgraded with aws-cdk-lib, not pinned here.",
    )


def _acknowledge_kubectl_functions(cluster: eks.Cluster) -> None:
    """NIST 800-53 R5 findings on the two Lambda functions of the kubectl provider."""
    functions = kubectl_functions(cluster)
    concurrency = (
        "{} runs only while CloudFormation deploys this stack, once per Kubernetes manifest or "
        "Helm chart resource, and CloudFormation creates those in parallel: a concurrency cap "
        "would throttle a deploy into failure, and reserved concurrency would hold back part "
        "of the account's pool for a function that is idle between deploys."
    )
    handler = functions.get("Handler")
    if handler is not None:
        acknowledge(
            handler,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "aws_eks_v2 grants the kubectl handler's role eks:DescribeCluster on this cluster "
            "through the role's default inline policy; aws-cdk-lib creates and updates both.",
        )
        acknowledge(handler, "NIST.800.53.R5-LambdaConcurrency", concurrency.format("The kubectl handler"))
        acknowledge(
            handler,
            "NIST.800.53.R5-LambdaDLQ",
            "The provider framework function invokes the kubectl handler synchronously and "
            "reports its errors to CloudFormation, which fails the deploy with them; a "
            "dead-letter queue only ever receives failed asynchronous invocations.",
        )
    in_vpc = (
        "{} runs in the cluster VPC's private subnets with the cluster security group, which "
        "EKS creates: VpcConfig names it by Fn::GetAtt on the cluster, and the control's local "
        "check accepts only a literal ID or an AWS::EC2::SecurityGroup of this template "
        "(cdklabs.cdk-validator-cfnguard 0.0.62, rules/control-tower/cfn-guard/lambda/"
        "ct-lambda-pr-3.guard). The Control Tower hook sees the resolved ID at deploy."
    )
    for name, function in functions.items():
        what = "The kubectl handler" if name == "Handler" else "The custom resource framework function"
        acknowledge(function, "ControlTower::CT.LAMBDA.PR.3", in_vpc.format(what))
    framework = functions.get("framework-onEvent")
    if framework is not None:
        acknowledge(
            framework,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "The custom resource framework's role may only invoke and describe the kubectl "
            "handler function, through the default inline policy aws-cdk-lib creates with it.",
        )
        acknowledge(
            framework,
            "NIST.800.53.R5-LambdaConcurrency",
            concurrency.format("The custom resource framework function"),
        )
        acknowledge(
            framework,
            "NIST.800.53.R5-LambdaDLQ",
            "CloudFormation invokes the framework function asynchronously for each custom "
            "resource event, and the framework answers every event, failures included, on the "
            "request's response URL: a failure ends as a failed stack operation, not as a "
            "message to replay.",
        )
