"""The EKS cluster: native CloudFormation (`aws_eks_v2`), Auto Mode, encrypted secrets, logging."""

from __future__ import annotations

import json
import typing

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer
from constructs import Construct

from gpufarm.config.model import ClusterConfig, ControlPlaneLog, EndpointAccess, Provisioning
from gpufarm.constructs._util import acknowledge, private_subnets

_LOG_TYPES = {
    ControlPlaneLog.API: eks.ClusterLoggingTypes.API,
    ControlPlaneLog.AUDIT: eks.ClusterLoggingTypes.AUDIT,
    ControlPlaneLog.AUTHENTICATOR: eks.ClusterLoggingTypes.AUTHENTICATOR,
    ControlPlaneLog.CONTROLLER_MANAGER: eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    ControlPlaneLog.SCHEDULER: eks.ClusterLoggingTypes.SCHEDULER,
}


_NODE_POLICIES = ("AmazonEKSWorkerNodeMinimalPolicy", "AmazonEC2ContainerRegistryPullOnly")
"""The least-privileged managed policies EKS documents for Auto Mode nodes."""

_MANAGED_POLICY = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"


def kubernetes_version(version: str) -> eks.KubernetesVersion:
    """The CDK version object for a 'major.minor' string."""
    return eks.KubernetesVersion.of(version)


class InferenceCluster(Construct):
    """An EKS cluster for GPU inference, built on an existing VPC.

    Defaults (from :class:`ClusterConfig`): Kubernetes 1.34, EKS Auto Mode with its `system` and
    `general-purpose` pools for CPU workloads, private API endpoint, every control-plane log
    type, Kubernetes secrets envelope-encrypted with a rotating customer-managed KMS key, nodes
    in the private subnets. The kubectl provider (which applies Kubernetes manifests during
    deploy) runs in the private subnets with kubectl 1.34, so it reaches a private endpoint.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        config: ClusterConfig,
        cluster_name: str | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        if config.provisioning is not Provisioning.AUTO_MODE:
            raise ValueError(
                f"'provisioning' must be 'auto-mode' for InferenceCluster, got {config.provisioning.value!r}"
            )
        self.secrets_key: kms.Key | None = None
        if config.secrets_encryption:
            self.secrets_key = kms.Key(
                self,
                "SecretsKey",
                description="Envelope encryption of Kubernetes secrets",
                enable_key_rotation=True,
                removal_policy=removal_policy,
            )
        self.node_role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="EKS Auto Mode nodes",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in _NODE_POLICIES
            ],
        )
        if config.endpoint_access is EndpointAccess.PRIVATE:
            endpoint = eks.EndpointAccess.PRIVATE
        else:
            endpoint = eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*config.public_access_cidrs)
        self.cluster = eks.Cluster(
            self,
            "Resource",
            cluster_name=cluster_name,
            version=kubernetes_version(config.kubernetes_version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=private_subnets(vpc))],
            default_capacity_type=eks.DefaultCapacityType.AUTOMODE,
            compute=eks.ComputeConfig(
                node_pools=[p.value for p in config.auto_mode_builtin_pools], node_role=self.node_role
            ),
            endpoint_access=endpoint,
            cluster_logging=[_LOG_TYPES[t] for t in config.control_plane_logging],
            secrets_encryption_key=self.secrets_key,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=KubectlV34Layer(self, "KubectlLayer"),
                private_subnets=private_subnets(vpc),
            ),
            output_config_command=False,
        )
        if config.admin_role_arn:
            self.cluster.grant_access(
                "AdminAccess",
                config.admin_role_arn,
                [
                    eks.AccessPolicy.from_access_policy_name(
                        "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )
        self._acknowledge(config)

    @property
    def icluster(self) -> eks.ICluster:
        """The cluster as the interface other constructs accept."""
        # jsii's Cluster implements ICluster; mypy cannot see it through the generated protocol.
        return typing.cast(eks.ICluster, self.cluster)

    @property
    def cluster_name(self) -> str:
        """Name of the EKS cluster."""
        return self.cluster.cluster_name

    @property
    def cluster_security_group(self) -> ec2.ISecurityGroup:
        """The EKS-managed security group that Auto Mode nodes and their pods use."""
        return self.cluster.cluster_security_group

    def _acknowledge(self, config: ClusterConfig) -> None:
        role = self.cluster.role
        for policy in (
            "AmazonEKSClusterPolicy",
            "AmazonEKSComputePolicy",
            "AmazonEKSBlockStoragePolicy",
            "AmazonEKSLoadBalancingPolicy",
            "AmazonEKSNetworkingPolicy",
        ):
            acknowledge(
                role,
                _MANAGED_POLICY.format(policy),
                f"EKS Auto Mode requires {policy} on the cluster role; AWS maintains it as the "
                "service's permissions change.",
            )
        for policy in _NODE_POLICIES:
            acknowledge(
                self.node_role,
                _MANAGED_POLICY.format(policy),
                f"EKS documents {policy} as the node role policy for Auto Mode nodes; it is the "
                "minimal managed policy for joining the cluster and pulling images.",
            )
        self._acknowledge_kubectl_provider()
        if config.endpoint_access is EndpointAccess.PUBLIC_AND_PRIVATE:
            acknowledge(
                self.cluster,
                "AwsSolutions-EKS1",
                "The public endpoint is enabled by cluster.endpoint_access and admits only "
                f"{', '.join(config.public_access_cidrs)}; nodes use the private endpoint.",
            )

    def _acknowledge_kubectl_provider(self) -> None:
        """Findings on the kubectl provider that aws_eks_v2 creates to apply manifests."""
        provider = self.cluster.kubectl_provider
        if provider is None:
            return
        stack = cdk.Stack.of(self)
        reason_policies = (
            "The kubectl provider Lambda functions that aws_eks_v2 creates use the AWS-managed "
            "Lambda execution policies ({}) for logging and VPC networking; the provider is "
            "part of aws-cdk-lib, not configurable here."
        )
        for policy in (
            "service-role/AWSLambdaBasicExecutionRole",
            "service-role/AWSLambdaVPCAccessExecutionRole",
            "AmazonEC2ContainerRegistryReadOnly",
        ):
            acknowledge(provider, _MANAGED_POLICY.format(policy), reason_policies.format(policy))
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
