"""The tier stack without Kubernetes: GPU Auto Scaling groups behind the load balancer, or a
SageMaker endpoint behind the gateway.

`cluster.provisioning: ec2` builds this stack instead of :class:`gpufarm.stacks.GpuFarmStack`
(docs/decisions/0065-ec2-provisioning.md). What does not depend on the cluster is the same
construct under the same ID, so it keeps its logical IDs: the logs key, the network (VPC,
endpoints, flow logs), the image cache, the load balancer (access logs, WAF), the alarms and the
dashboard.

`cluster.provisioning: sagemaker` builds the same stack with a SageMaker endpoint
(:class:`gpufarm.constructs.sagemaker_endpoint.SageMakerEndpoint`, one inference component per
model) instead of the GPU groups: the load balancer then has only its default route, to the
gateway, which calls the endpoint through the VPC's `sagemaker.runtime` interface endpoint
(docs/decisions/0066-sagemaker-endpoint.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from gpufarm.config.model import TIER_METADATA_KEY, InterfaceEndpoint, ModelConfig, Provisioning, TierConfig
from gpufarm.config.placeholders import find_placeholders
from gpufarm.constructs import InferenceAlarms, InferenceAlb, InferenceDashboard, InferenceNetwork, LogsKey
from gpufarm.constructs._util import cdk_removal_policy, construct_id, private_subnets
from gpufarm.constructs.compliance import require_compliance_pack
from gpufarm.constructs.gateway_fleet import GatewayFleet, GatewayRoutes
from gpufarm.constructs.gpu_fleet import EngineSettings, GpuFleet
from gpufarm.constructs.image_cache import ImageCache, image_cache_credentials
from gpufarm.constructs.network import log_retention
from gpufarm.constructs.placeholders import refuse_placeholders
from gpufarm.core import sagemaker as sm
from gpufarm.core.endpoints import GATEWAY_LISTENER_PORT, endpoints_of
from gpufarm.core.engine_metrics import Role, metric_name, models_by_engine
from gpufarm.core.engines import engine_of
from gpufarm.core.fleets import Fleet, fleets
from gpufarm.hosts.engine import CONTAINER_HOME, TargetControlAgent
from gpufarm.k8s.gateway import READINESS_PATH
from gpufarm.k8s.serving import engine_args
from gpufarm.stacks.tier import tier_metadata

if TYPE_CHECKING:
    from gpufarm.constructs.sagemaker_endpoint import SageMakerEndpoint


def ecr_registry_of(image: str) -> str | None:
    """The ECR registry host of an image reference (`<account>.dkr.ecr.<region>.amazonaws.com`), else None."""
    host = image.split("/", 1)[0]
    return host if ".dkr.ecr." in host else None


class DirectTierStack(cdk.Stack):
    """A gpufarm tier on EC2 instances: network, load balancer, a GPU Auto Scaling group per pool,
    the gateway on a CPU Auto Scaling group, alarms and dashboard. No EKS cluster, Karpenter, Helm
    or Kubernetes manifests.

    Construct IDs below are public API (see :class:`GpuFarmStack`); those shared with it name the
    same resources there.
    """

    def __init__(self, scope: Construct, *, config: TierConfig, **kwargs: object) -> None:
        env = cdk.Environment(region=config.environment.region, account=config.environment.account)
        super().__init__(
            scope,
            config.stack_name,
            env=env,
            description=config.description or f"gpufarm tier {config.name}",
            termination_protection=config.termination_protection,
            **kwargs,  # type: ignore[arg-type]
        )
        self.config = config
        self.removal = cdk_removal_policy(config.removal_policy)
        cdk.Tags.of(self).add("gpufarm:tier", config.name)
        self.template_options.metadata = {TIER_METADATA_KEY: tier_metadata(config)}
        self.logs_key = LogsKey(
            self,
            "LogsKey",
            description=f"gpufarm {config.name}: CloudWatch Logs encryption",
            removal_policy=self.removal,
        )
        self.network = InferenceNetwork(
            self,
            "Network",
            config=config.network,
            availability_zones=config.environment.availability_zones,
            logs_key=self.logs_key,
            removal_policy=self.removal,
        )
        self.image_cache: ImageCache | None = None
        if config.images.pull_through_cache:
            self.image_cache = ImageCache(
                self,
                "ImageCache",
                prefix=config.image_cache_prefix,
                credentials=image_cache_credentials(config),
            )
        self.instance_logs = logs.LogGroup(
            self,
            "InstanceLogs",
            retention=log_retention(config.ec2.log_retention_days),
            encryption_key=self.logs_key,
            removal_policy=self.removal,
        )
        """The engines' and the gateway's container logs (`<model>/<instance>`, `gateway/<instance>`)."""
        vpc = self.network.vpc
        self.gpu_security_group = ec2.SecurityGroup(
            self,
            "GpuSecurityGroup",
            vpc=vpc,
            description="GPU instances: the load balancer in; ECR, S3, CloudWatch and SSM out",
            allow_all_outbound=True,
        )
        self.gateway_security_group = ec2.SecurityGroup(
            self,
            "GatewaySecurityGroup",
            vpc=vpc,
            description="Gateway instances: the load balancer in; the model routes and Bedrock out",
            allow_all_outbound=True,
        )
        self.on_sagemaker = config.cluster.provisioning is Provisioning.SAGEMAKER
        self.sagemaker: SageMakerEndpoint | None = None
        self._load_balancer()
        if self.on_sagemaker:
            self._sagemaker()
        else:
            self._gpu_fleets()
        self._gateway()
        self._monitoring()
        self._outputs()
        for pack in config.compliance_packs:
            require_compliance_pack(self, pack)
        refuse_placeholders(self, find_placeholders(config))

    @property
    def availability_zones(self) -> list[str]:
        """The configured AZs: synth never asks AWS which zones exist."""
        return list(self.config.environment.availability_zones)

    # ------------------------------------------------------------------------ parts

    def _image(self, reference: str) -> str:
        """`reference` as the instances pull it: through the image cache when it is on."""
        cache = self.image_cache
        if cache is None or self.config.images.cache_rules_only:
            return reference
        return cache.image(reference)

    def _load_balancer(self) -> None:
        cfg = self.config
        # A SageMaker tier's models have no target on the load balancer: the gateway calls the endpoint.
        self.endpoints = [] if self.on_sagemaker else endpoints_of(cfg)
        self.ingress = InferenceAlb(
            self,
            "Ingress",
            vpc=self.network.vpc,
            config=cfg.ingress,
            endpoints=self.endpoints,
            target_port=cfg.serving.port,
            cluster_name=cfg.stack_name,
            vpc_cidr=cfg.network.cidr,
            logs_key=self.logs_key,
            removal_policy=self.removal,
            deletion_protection=cfg.termination_protection,
            target_type="instance",
        )
        # Before the default route exists: the GPU instances get the model ports only.
        self.ingress.allow_targets_in(self.gpu_security_group)

    def _engine(self, model: ModelConfig) -> EngineSettings:
        cfg = self.config
        spec = engine_of(model)
        image = self._image(cfg.serving.engine_image(model.engine))
        optimizer = cfg.ingress.target_optimizer
        agent = (
            TargetControlAgent(
                image=self._image(optimizer.agent_image),
                data_port=optimizer.data_port,
                control_port=optimizer.control_port,
                max_concurrency=model.max_concurrency,
            )
            if optimizer.enabled
            else None
        )
        environment = {"HOME": CONTAINER_HOME}
        environment.update({name: value.format(home=CONTAINER_HOME) for name, value in spec.cache_env})
        return EngineSettings(
            image=image,
            command=spec.command,
            args=tuple(engine_args(model, cfg.serving)),
            port=cfg.serving.port,
            readiness_path=spec.readiness_path,
            metrics_path=spec.metrics_path,
            queue_metric=metric_name(model.engine, Role.WAITING),
            environment=environment,
            target_control=agent,
            registry=ecr_registry_of(image),
        )

    def _gpu_fleets(self) -> None:
        cfg = self.config
        self.fleets: dict[str, GpuFleet] = {}
        subnets = private_subnets(self.network.vpc)
        for fleet in fleets(cfg):
            built = GpuFleet(
                self,
                f"GpuPool{construct_id(fleet.name)}",
                fleet=fleet,
                group_name=self._group_name(fleet),
                vpc=self.network.vpc,
                subnets=subnets,
                security_group=self.gpu_security_group,
                target_group=self.ingress.target_groups[fleet.model.name],
                load_balancer_full_name=self.ingress.load_balancer_full_name,
                deregistration_delay_seconds=cfg.ingress.deregistration_delay_seconds,
                engine=self._engine(fleet.model),
                config=cfg.ec2,
                log_group=self.instance_logs,
                region=cfg.environment.region,
            )
            if self.image_cache is not None:
                self.image_cache.grant_pull(built.role)
            self.fleets[fleet.name] = built

    def _sagemaker(self) -> None:
        # Imported here: aws_cdk.aws_sagemaker takes about 0.3 s to import, which no other tier needs.
        from gpufarm.constructs.sagemaker_endpoint import SageMakerEndpoint

        cfg = self.config
        self.fleets = {}
        self.sagemaker = SageMakerEndpoint(
            self,
            "SageMaker",
            endpoint_name=sm.endpoint_name(cfg),
            config=cfg.sagemaker,
            components=sm.components_of(cfg),
            region=cfg.environment.region,
            vpc=self.network.vpc,
            subnets=private_subnets(self.network.vpc),
        )

    def _group_name(self, fleet: Fleet) -> str:
        """`<stack>-<pool>`: fixed, so the instances' role can name its own group."""
        return f"{self.config.stack_name}-{fleet.name}"

    def _gateway(self) -> None:
        cfg = self.config
        self.gateway: GatewayFleet | None = None
        if not cfg.fallback.enabled:
            return
        if self.sagemaker is None:
            url = self.ingress.add_gateway_listener(
                port=GATEWAY_LISTENER_PORT, callers=self.gateway_security_group
            )
            routes = GatewayRoutes.through_load_balancer(cfg, url)
        else:
            from gpufarm.constructs.sagemaker_endpoint import sagemaker_routes

            routes = sagemaker_routes(cfg, self.sagemaker)
        target_group = self.ingress.route_default_to(port=cfg.fallback.port, health_check_path=READINESS_PATH)
        self.ingress.connections.allow_to(
            self.gateway_security_group, ec2.Port.tcp(cfg.fallback.port), "Load balancer to the gateway"
        )
        image = self._image(cfg.fallback.image)
        self.gateway = GatewayFleet(
            self,
            "Gateway",
            tier=cfg,
            routes=routes,
            image=image,
            vpc=self.network.vpc,
            subnets=private_subnets(self.network.vpc),
            security_group=self.gateway_security_group,
            target_group=target_group,
            log_group=self.instance_logs,
            registry=ecr_registry_of(image),
        )
        if self.image_cache is not None:
            self.image_cache.grant_pull(self.gateway.role)
        # Fallback traffic to Bedrock stays in the VPC; only the gateway instances may use the endpoint.
        self.network.add_interface_endpoint(
            InterfaceEndpoint.BEDROCK_RUNTIME, allow_from=[self.gateway_security_group]
        )
        if self.sagemaker is not None:
            # The endpoint's invocations stay in the VPC too; only the gateway may call it.
            self.network.add_interface_endpoint(
                InterfaceEndpoint.SAGEMAKER_RUNTIME, allow_from=[self.gateway_security_group]
            )

    def _monitoring(self) -> None:
        cfg = self.config
        obs = cfg.observability
        target_groups = self.ingress.target_group_full_names()
        lb_name = self.ingress.load_balancer_full_name
        optimizer = cfg.ingress.target_optimizer.enabled
        self.alarms: InferenceAlarms | None = None
        if obs.alarms.enabled:
            self.alarms = InferenceAlarms(
                self,
                "Alarms",
                load_balancer_full_name=lb_name,
                target_groups=target_groups,
                config=obs.alarms,
                target_optimizer=optimizer,
                removal_policy=self.removal,
                kind=self.ingress.kind,
            )
        if obs.dashboard:
            InferenceDashboard(
                self,
                "Dashboard",
                name=cfg.stack_name,
                load_balancer_full_name=lb_name,
                target_groups=target_groups,
                region=cfg.environment.region,
                target_optimizer=optimizer,
                workspace_query=False,
                kind=self.ingress.kind,
                engines=[engine.value for engine in models_by_engine(cfg)],
            )

    def _outputs(self) -> None:
        cfg = self.config
        cdk.CfnOutput(self, "LoadBalancerDnsName", value=self.ingress.dns_name)
        for name, fleet in self.fleets.items():
            cdk.CfnOutput(
                self,
                f"GpuGroup{construct_id(name)}",
                value=fleet.group_name,
                description=f"Auto Scaling group of pool {name} (model {fleet.fleet.model.name})",
            )
        if self.gateway is not None:
            cdk.CfnOutput(
                self,
                "GatewayBaseUrl",
                value=self.ingress.base_url_default(),
                description="OpenAI base_url of the gateway: every model by its name, with Bedrock fallback",
            )
        if self.sagemaker is not None:
            cdk.CfnOutput(
                self,
                "SageMakerEndpointName",
                value=self.sagemaker.endpoint_name,
                description="SageMaker endpoint of the models (one inference component per model)",
            )
            return
        for model in cfg.models:
            cdk.CfnOutput(
                self,
                f"ModelRoute{construct_id(model.name)}",
                value=self.ingress.base_url(model.name),
                description=f"OpenAI base_url of {model.name} (request model: {model.api_model_name})",
            )
