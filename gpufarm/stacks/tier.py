"""The tier stack: everything a tier config describes, in one CloudFormation stack."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from gpufarm.config.model import TierConfig
from gpufarm.constructs import (
    AutoModeGpuNodePool,
    InferenceAlb,
    InferenceCluster,
    InferenceNetwork,
    S3ModelStore,
    VllmServing,
)
from gpufarm.constructs._util import cdk_removal_policy, construct_id


class GpuFarmStack(cdk.Stack):
    """A gpufarm tier: network, EKS cluster, GPU pools, vLLM models and their load balancer.

    Construct IDs below are public API: they fix the logical IDs of stateful and traffic-bearing
    resources, so renaming one replaces the resource.
    """

    def __init__(self, scope: Construct, *, config: TierConfig, **kwargs: object) -> None:
        env = cdk.Environment(region=config.environment.region, account=config.environment.account)
        super().__init__(
            scope,
            config.stack_name,
            env=env,
            description=config.description or f"gpufarm tier {config.name}",
            **kwargs,  # type: ignore[arg-type]
        )
        self.config = config
        removal = cdk_removal_policy(config.removal_policy)
        cdk.Tags.of(self).add("gpufarm:tier", config.name)

        logs_key = kms.Key(
            self,
            "LogsKey",
            description=f"gpufarm {config.name}: CloudWatch Logs encryption",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        logs_arn = f"arn:{self.partition}:logs:{self.region}:{self.account}:*"
        logs_key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                resources=["*"],
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": logs_arn}},
            )
        )
        self.network = InferenceNetwork(
            self,
            "Network",
            config=config.network,
            availability_zones=config.environment.availability_zones,
            logs_key=logs_key,
            removal_policy=removal,
        )
        vpc = self.network.vpc
        self.cluster = InferenceCluster(
            self,
            "Cluster",
            vpc=vpc,
            config=config.cluster,
            cluster_name=config.stack_name,
            removal_policy=removal,
        )
        cluster = self.cluster.icluster
        self.node_pools = {
            pool.name: AutoModeGpuNodePool(
                self, f"GpuPool{construct_id(pool.name)}", cluster=cluster, pool=pool
            )
            for pool in config.node_pools
        }
        s3_sources = [m.weights for m in config.models if m.is_s3]
        self.model_store = (
            S3ModelStore(self, "ModelStore", cluster=cluster, s3_uris=s3_sources) if s3_sources else None
        )
        self.serving = VllmServing(
            self,
            "Serving",
            cluster=cluster,
            config=config.serving,
            models=config.models,
            default_pool=config.node_pools[0].name,
            region=config.environment.region,
            termination_grace_seconds=config.ingress.deregistration_delay_seconds,
        )
        for model in config.models:
            pool = self.node_pools[config.pool_of(model).name]
            self.serving.model_manifests[model.name].node.add_dependency(pool.resource)
        self.ingress = InferenceAlb(
            self,
            "Ingress",
            vpc=vpc,
            config=config.ingress,
            model_names=[m.name for m in config.models],
            target_port=config.serving.port,
            cluster_name=self.cluster.cluster_name,
            vpc_cidr=config.network.cidr,
            rule_priorities={m.name: m.rule_priority for m in config.models},
        )
        self.ingress.allow_targets_in(self.cluster.cluster_security_group)
        self.ingress.bind_services(
            cluster=cluster,
            namespace=config.serving.namespace,
            services={m.name: self.serving.service_of(m.name) for m in config.models},
            after=dict(self.serving.model_manifests),
        )
        self._outputs()

    @property
    def availability_zones(self) -> list[str]:
        """The configured AZs: synth never asks AWS which zones exist."""
        return list(self.config.environment.availability_zones)

    def _outputs(self) -> None:
        cfg = self.config
        cdk.CfnOutput(self, "LoadBalancerDnsName", value=self.ingress.dns_name)
        cdk.CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        cdk.CfnOutput(
            self,
            "KubeconfigCommand",
            value=f"aws eks update-kubeconfig --region {cfg.environment.region} "
            f"--name {self.cluster.cluster_name}",
        )
        for model in cfg.models:
            cdk.CfnOutput(
                self,
                f"ModelRoute{construct_id(model.name)}",
                value=self.ingress.base_url(model.name),
                description=f"OpenAI base_url of {model.name} (request model: {model.api_model_name})",
            )
