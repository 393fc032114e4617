"""The tier stack: everything a tier config describes, in one CloudFormation stack."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from gpufarm.config.fsx_capacity import fsx_storage_capacity_gib
from gpufarm.config.model import (
    TIER_METADATA_KEY,
    InterfaceEndpoint,
    LoadBalancerKind,
    ModelStoreKind,
    Provisioning,
    TierConfig,
)
from gpufarm.config.placeholders import find_placeholders
from gpufarm.constructs import (
    AutoModeGpuNodePool,
    EfaDevicePlugin,
    FallbackGateway,
    FsxModelStore,
    InferenceAlarms,
    InferenceAlb,
    InferenceCluster,
    InferenceDashboard,
    InferenceNetwork,
    InferenceNlb,
    InferencePrivateLink,
    Karpenter,
    KedaAutoscaling,
    KvCacheRouting,
    LogsKey,
    MultiNodeServing,
    NvidiaDevicePlugin,
    PrometheusMonitoring,
    ReservedGpuNodeGroup,
    S3ModelStore,
    ServingNetworkPolicies,
    TrafficInspection,
    VllmServing,
)
from gpufarm.constructs._util import cdk_removal_policy, construct_id, private_subnets
from gpufarm.constructs.alerting import PrometheusAlerts
from gpufarm.constructs.compliance import require_compliance_pack
from gpufarm.constructs.grafana import ManagedGrafana
from gpufarm.constructs.grafana_dashboards import GatewayTargets, tier_dashboards
from gpufarm.constructs.image_cache import ImageCache, image_cache_credentials
from gpufarm.constructs.load_balancer import GATEWAY_TARGET_GROUP, LoadBalancer
from gpufarm.constructs.model_replica import ModelReplica
from gpufarm.constructs.placeholders import refuse_placeholders
from gpufarm.constructs.regional_record import RegionalRecord
from gpufarm.core.demand import exports_metrics
from gpufarm.core.endpoints import GATEWAY_LISTENER_PORT, Endpoint, GatewayRoute, endpoints_of, gateway_route
from gpufarm.core.engine_metrics import models_by_engine
from gpufarm.core.placement import (
    efa_node_groups,
    node_selectors,
    placement_of,
    prefill_decode_efa_devices,
)
from gpufarm.k8s.alerting import ModelObjective, gateway_objective
from gpufarm.k8s.binding import binding_api, readiness_gates, rollout_min_ready_seconds
from gpufarm.k8s.gateway import READINESS_PATH
from gpufarm.k8s.security import level_for
from gpufarm.k8s.storage import FSX_CLAIM


def tier_metadata(config: TierConfig) -> dict[str, Any]:
    """The tier config as template metadata: JSON, with numbers that are not integers as strings.

    CloudFormation's Metadata takes strings, integers, booleans, objects and arrays, not
    decimals. `TierConfig.model_validate` reads the strings back as numbers.
    """

    def convert(value: Any) -> Any:
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    converted: dict[str, Any] = convert(config.model_dump(mode="json"))
    return converted


class GpuFarmStack(cdk.Stack):
    """A gpufarm tier: network, EKS cluster, GPU pools, vLLM models, load balancer and monitoring.

    Construct IDs below are public API: they fix the logical IDs of stateful and traffic-bearing
    resources, so renaming one replaces the resource.
    """

    def __init__(
        self,
        scope: Construct,
        *,
        config: TierConfig,
        model_source_bucket: str | None = None,
        **kwargs: object,
    ) -> None:
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
        self.auto_mode = config.cluster.provisioning is Provisioning.AUTO_MODE
        self.binding_api = binding_api(config)
        cdk.Tags.of(self).add("gpufarm:tier", config.name)
        # The tier travels with its template, so `gpufarm cost --assembly` and `gpufarm review`
        # can read what was synthesized without the source file.
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
        self.inspection: TrafficInspection | None = None
        if config.ingress.inspection.enabled:
            # Before the cluster: routes through the appliances exist before anything uses the VPC.
            self.inspection = TrafficInspection(
                self,
                "Inspection",
                app_vpc=self.network.vpc,
                config=config.ingress.inspection,
                availability_zones=config.environment.availability_zones,
                logs_key=self.logs_key,
                flow_log_retention_days=config.network.flow_logs.retention_days,
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
        self.cluster = InferenceCluster(
            self,
            "Cluster",
            vpc=self.network.vpc,
            image_digests=config.images.digests,
            # Rules only (the first deploy): the cache exists, the images still come from upstream.
            image_cache=None if config.images.cache_rules_only else self.image_cache,
            config=config.cluster,
            cluster_name=config.stack_name,
            removal_policy=self.removal,
            logs_key=self.logs_key,
        )
        if self.image_cache is not None:
            # Every pod pulls through the rules: they exist before the cluster does.
            self.cluster.cluster.node.add_dependency(*self.image_cache.rules.values())
            if config.images.cache_rules_only:
                # The nodes' first-pull grant stays in place across the switch to the cache.
                self.image_cache.grant_pull(self.cluster.node_role)
        self._node_pools()
        self._serving()
        # The load balancer before the gateway: a gateway that calls the models' routes needs
        # its address (gpufarm.core.endpoints.gateway_route).
        self._load_balancer()
        self._gateway()
        # Default deny in the serving namespace, then the flows the workloads above need.
        self.network_policies = ServingNetworkPolicies(
            self,
            "NetworkPolicies",
            cluster=self.cluster.icluster,
            tier=config,
            after=self.serving.namespace_manifest,
        )
        self._ingress()
        self._monitoring()
        self._outputs()
        self._regions(model_source_bucket)
        for pack in config.compliance_packs:
            require_compliance_pack(self, pack)
        refuse_placeholders(self, find_placeholders(config))

    @property
    def availability_zones(self) -> list[str]:
        """The configured AZs: synth never asks AWS which zones exist."""
        return list(self.config.environment.availability_zones)

    # ------------------------------------------------------------------------ parts

    def _node_pools(self) -> None:
        cfg = self.config
        cluster = self.cluster.icluster
        self.karpenter: Karpenter | None = None
        self.node_pools: dict[str, Construct] = {}
        self.node_groups: dict[str, ReservedGpuNodeGroup] = {}
        if self.auto_mode:
            for pool in cfg.node_pools:
                self.node_pools[pool.name] = AutoModeGpuNodePool(
                    self, f"GpuPool{construct_id(pool.name)}", cluster=cluster, pool=pool
                ).resource
            return
        self.karpenter = Karpenter(
            self,
            "Karpenter",
            cluster=cluster,
            config=cfg.karpenter,
            subnets=private_subnets(self.network.vpc),
            security_groups=[self.cluster.cluster_security_group],
            discovery_value=cfg.stack_name,
        )
        if self.image_cache is not None:
            self.image_cache.grant_pull(self.karpenter.node_role)
        self.device_plugin = NvidiaDevicePlugin(
            self,
            "NvidiaDevicePlugin",
            cluster=cluster,
            image_digests=cfg.images.digests,
            chart_version=cfg.karpenter.nvidia_device_plugin_chart_version,
        )
        # EKS creates the cluster security group, so CloudFormation cannot tag it for discovery:
        # the NodeClasses name it by ID, and GPU pods share it with the rest of the cluster.
        cluster_sg = self.cluster.cluster_security_group.security_group_id
        for pool in cfg.node_pools:
            self.node_pools[pool.name] = self.karpenter.add_gpu_node_pool(
                f"GpuPool{construct_id(pool.name)}", scope=self, pool=pool, security_group_ids=[cluster_sg]
            ).resource
        self._node_groups(cluster_sg)

    def _node_groups(self, cluster_sg: str) -> None:
        """The reserved base: a managed node group per entry of `node_groups`."""
        cfg = self.config
        for group in cfg.node_groups:
            built = ReservedGpuNodeGroup(
                self,
                f"NodeGroup{construct_id(group.name)}",
                cluster=self.cluster.icluster,
                vpc=self.network.vpc,
                config=group,
                cluster_security_group_id=cluster_sg,
            )
            self.node_groups[group.name] = built
            if self.image_cache is not None:
                self.image_cache.grant_pull(built.node_role)
            self.node_pools[group.name] = built.nodegroup
        if any(g.efa for g in cfg.node_groups):
            EfaDevicePlugin(
                self, "EfaDevicePlugin", cluster=self.cluster.icluster, image_digests=cfg.images.digests
            )

    def _serving(self) -> None:
        cfg = self.config
        cluster = self.cluster.icluster
        fsx = cfg.model_store.kind is ModelStoreKind.FSX_LUSTRE
        streamed = cfg.model_store.kind is ModelStoreKind.RUNAI_STREAMER
        optimizer = cfg.ingress.target_optimizer if cfg.ingress.target_optimizer.enabled else None
        single = [m for m in cfg.models if m.pipeline_parallel == 1]
        multi = [m for m in cfg.models if m.pipeline_parallel > 1]
        selectors = node_selectors(cfg)
        pd_efa = {m.name: prefill_decode_efa_devices(cfg, m) for m in single if m.prefill_decode is not None}
        multi_efa = {m.name for m in multi if efa_node_groups(cfg, m)}
        self.serving = VllmServing(
            self,
            "Serving",
            cluster=cluster,
            config=cfg.serving,
            models=single,
            default_pool=cfg.node_pools[0].name,
            region=cfg.environment.region,
            termination_grace_seconds=cfg.ingress.deregistration_delay_seconds,
            target_optimizer=optimizer,
            fsx_claim=FSX_CLAIM if fsx else None,
            fsx_import_path=cfg.model_store.fsx.import_path if fsx else None,
            node_selectors=selectors,
            efa_devices=pd_efa,
            readiness_gates=readiness_gates(self.binding_api),
            min_ready_seconds=rollout_min_ready_seconds(cfg),
            pod_security=level_for(efa_engines=bool(multi_efa) or any(any(d) for d in pd_efa.values())),
            kubernetes_version=cfg.cluster.kubernetes_version,
            streamer=cfg.model_store.streamer if streamed else None,
        )
        self.model_manifests: dict[str, Construct] = dict(self.serving.model_manifests)
        self.multi_node: MultiNodeServing | None = None
        if multi:
            self.multi_node = MultiNodeServing(
                self,
                "MultiNode",
                cluster=cluster,
                image_digests=cfg.images.digests,
                serving=cfg.serving,
                models=multi,
                node_selectors={m.name: selectors[m.name] for m in multi},
                region=cfg.environment.region,
                after=self.serving.namespace_manifest,
                fsx_claim=FSX_CLAIM if fsx else None,
                fsx_import_path=cfg.model_store.fsx.import_path if fsx else None,
                efa_models=multi_efa,
                termination_grace_seconds=cfg.ingress.deregistration_delay_seconds,
                target_optimizer=optimizer,
            )
            self.model_manifests.update(self.multi_node.model_manifests)
        for model in cfg.models:
            for target in placement_of(cfg, model):
                self.model_manifests[model.name].node.add_dependency(self.node_pools[target.name])
        s3_sources = [m.weights for m in cfg.models if m.is_s3]
        self.model_store: Construct | None = None
        if fsx:
            store = FsxModelStore(
                self,
                "ModelStore",
                vpc=self.network.vpc,
                cluster=cluster,
                config=cfg.model_store.fsx,
                storage_capacity_gib=fsx_storage_capacity_gib(cfg),
                client_security_groups=[self.cluster.pod_security_group],
                namespaces=[cfg.serving.namespace],
                removal_policy=cdk.RemovalPolicy.RETAIN,
                after=self.serving.namespace_manifest,
            )
            store.add_consumers(*self.model_manifests.values())
            self.model_store = store
        elif s3_sources and not streamed:
            # The streamer needs no store of its own: the vLLM pods read S3 with their own role.
            self.model_store = S3ModelStore(self, "ModelStore", cluster=cluster, s3_uris=s3_sources)
        routed = [m for m in cfg.models if m.routed]
        self.routing: KvCacheRouting | None = None
        if routed:
            # The load balancer (and the gateway) reach these models through their routers.
            self.routing = KvCacheRouting(
                self,
                "KvCacheRouting",
                cluster=cluster,
                serving=cfg.serving,
                models=routed,
                after=self.serving.namespace_manifest,
                model_manifests=self.model_manifests,
                node_selector=self.cluster.system_node_label or None,
            )
            self.model_manifests = self.routing.fronting(self.model_manifests)

    def _gateway(self) -> None:
        cfg = self.config
        self.gateway: FallbackGateway | None = None
        if not cfg.fallback.enabled:
            return
        load_balancer_url: str | None = None
        if gateway_route(cfg) is GatewayRoute.LOAD_BALANCER:
            load_balancer_url = self.ingress.add_gateway_listener(
                port=GATEWAY_LISTENER_PORT, callers=self.cluster.pod_security_group
            )
        self.gateway = FallbackGateway(
            self,
            "Gateway",
            cluster=self.cluster.icluster,
            tier=cfg,
            namespace=cfg.serving.namespace,
            after=self.serving.namespace_manifest,
            load_balancer_url=load_balancer_url,
        )
        # Fallback traffic to Bedrock stays in the VPC; only the nodes may use the endpoint.
        self.network.add_interface_endpoint(
            InterfaceEndpoint.BEDROCK_RUNTIME, allow_from=[self.cluster.cluster_security_group]
        )

    def _load_balancer(self) -> None:
        cfg = self.config
        self.endpoints: list[Endpoint] = endpoints_of(cfg)
        """The Service in front of each model (each share's, a router's): what the load balancer binds."""
        self.ingress: LoadBalancer
        if cfg.ingress.kind is LoadBalancerKind.NLB:
            self.ingress = InferenceNlb(
                self,
                "Ingress",
                vpc=self.network.vpc,
                config=cfg.ingress,
                endpoints=self.endpoints,
                target_port=cfg.serving.port,
                cluster_name=self.cluster.cluster_name,
                vpc_cidr=cfg.network.cidr,
                deletion_protection=cfg.termination_protection,
            )
        else:
            self.ingress = InferenceAlb(
                self,
                "Ingress",
                vpc=self.network.vpc,
                config=cfg.ingress,
                endpoints=self.endpoints,
                target_port=cfg.serving.port,
                cluster_name=self.cluster.cluster_name,
                vpc_cidr=cfg.network.cidr,
                logs_key=self.logs_key,
                removal_policy=self.removal,
                deletion_protection=cfg.termination_protection,
            )

    def _ingress(self) -> None:
        cfg = self.config
        if self.gateway is not None:
            self.ingress.route_default_to(port=self.gateway.port, health_check_path=READINESS_PATH)
        self.ingress.allow_targets_in(self.cluster.pod_security_group)
        after: dict[str, Construct] = dict(self.model_manifests)
        # Single-node models' bindings first, then multi-node ones': the construct order (and so
        # the template's resource order) they were always created in.
        multi_node = {m.name for m in cfg.models if m.pipeline_parallel > 1}
        bindings = self.ingress.bind_endpoints(
            cluster=self.cluster.icluster,
            endpoints=sorted(self.endpoints, key=lambda e: e.model in multi_node),
            api_version=self.binding_api,
            after=after,
        )
        all_bindings = list(bindings.values())
        if self.gateway is not None:
            gateway_binding = self.ingress.bind_default(
                cluster=self.cluster.icluster,
                namespace=cfg.serving.namespace,
                service=self.gateway.service_name,
                api_version=self.binding_api,
                after=self.gateway.manifest,
            )
            all_bindings.append(gateway_binding)
        controller = self.cluster.load_balancer_controller
        if controller is not None:
            for binding in all_bindings:
                binding.node.add_dependency(controller)
        self.private_link: InferencePrivateLink | None = None
        link = cfg.ingress.private_link
        if link.enabled:
            self.private_link = self.ingress.private_link(
                self,
                "PrivateLink",
                config=link,
                vpc=self.network.vpc,
                deletion_protection=cfg.termination_protection,
            )

    def _monitoring(self) -> None:
        cfg = self.config
        obs = cfg.observability
        self.monitoring: PrometheusMonitoring | None = None
        if obs.prometheus.enabled:
            self.monitoring = PrometheusMonitoring(
                self,
                "Monitoring",
                cluster=self.cluster.icluster,
                config=obs.prometheus,
                subnets=private_subnets(self.network.vpc),
                security_groups=[self.cluster.cluster_security_group],
                serving_namespace=cfg.serving.namespace,
                gateway_namespace=cfg.serving.namespace if exports_metrics(cfg) else None,
                engine_models=models_by_engine(cfg),
                removal_policy=self.removal,
            )
        autoscaled = [
            m
            for m in cfg.models
            if m.autoscaling is not None
            or (m.prefill_decode is not None and m.prefill_decode.prefill_autoscaling is not None)
        ]
        self.autoscaling: KedaAutoscaling | None = None
        if autoscaled and self.monitoring is not None:
            self.autoscaling = KedaAutoscaling(
                self,
                "Autoscaling",
                cluster=self.cluster.icluster,
                image_digests=cfg.images.digests,
                config=cfg.autoscaling,
                workspace_arn=self.monitoring.workspace_arn,
                query_endpoint=self.monitoring.query_endpoint,
                region=cfg.environment.region,
                models=autoscaled,
                serving_namespace=cfg.serving.namespace,
                after={m.name: self.model_manifests[m.name] for m in autoscaled},
                node_selector=self.cluster.system_node_label or None,
                target_optimizer=cfg.ingress.target_optimizer.enabled,
                scrape_interval_seconds=obs.prometheus.scrape_interval_seconds,
            )
        # By model or share, and the gateway's (its latency includes any fallback to Bedrock).
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
        self.alerts: PrometheusAlerts | None = None
        if self.monitoring is not None and self.alarms is not None and obs.prometheus.alerts:
            self.alerts = PrometheusAlerts(
                self,
                "Alerts",
                workspace=self.monitoring.workspace,
                topic=self.alarms.topic,
                key=self.alarms.key,
                models=[
                    ModelObjective(name=m.name, ttft_p99_seconds=m.ttft_p99_seconds, engine=m.engine.value)
                    for m in cfg.models
                ],
                error_rate_percent=obs.alarms.error_rate_percent,
                gateway=gateway_objective(cfg),
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
                workspace_query=self.monitoring is not None,
                kind=self.ingress.kind,
                engines=[engine.value for engine in models_by_engine(cfg)],
            )
        self.grafana: ManagedGrafana | None = None
        if obs.grafana.enabled and self.monitoring is not None:
            self._grafana(self.monitoring, target_groups, lb_name)

    def _grafana(self, monitoring: PrometheusMonitoring, target_groups: dict[str, str], lb_name: str) -> None:
        cfg = self.config
        gateway = target_groups.get(GATEWAY_TARGET_GROUP)
        targets = None
        if gateway is not None:
            models = {k: v for k, v in target_groups.items() if k != GATEWAY_TARGET_GROUP}
            targets = GatewayTargets(
                kind=self.ingress.kind, load_balancer=lb_name, gateway=gateway, models=models
            )
        self.grafana = ManagedGrafana(
            self,
            "Grafana",
            config=cfg.observability.grafana,
            prometheus_workspace_arn=monitoring.workspace_arn,
            prometheus_query_endpoint=monitoring.query_endpoint,
            region=cfg.environment.region,
            dashboards=tier_dashboards(cfg, targets=targets),
            vpc=self.network.vpc,
            subnets=private_subnets(self.network.vpc),
            logs_key=self.logs_key,
            removal_policy=self.removal,
        )
        cdk.CfnOutput(
            self,
            "GrafanaUrl",
            value=self.grafana.url,
            description="Amazon Managed Grafana: models, GPU fleet and gateway dashboards (folder gpufarm)",
        )

    def _regions(self, model_source_bucket: str | None) -> None:
        """With `regions`: this region's Route 53 record, and in a secondary region the model
        bucket's replica (`model_source_bucket` is the tier's model bucket, which it replicates)."""
        cfg = self.config
        regions = cfg.regions
        if not regions.enabled or regions.dns_name is None or regions.hosted_zone_id is None:
            return
        secondary = cfg.secondary_region
        self.dns_record = RegionalRecord(
            self,
            "DnsRecord",
            dns_name=regions.dns_name,
            hosted_zone_id=regions.hosted_zone_id,
            routing=regions.routing,
            primary=secondary is None,
            region=cfg.environment.region,
            kind=self.ingress.kind,
            load_balancer_dns_name=self.ingress.dns_name,
            load_balancer_zone_id=self.ingress.load_balancer.load_balancer_canonical_hosted_zone_id,
            load_balancer_full_name=self.ingress.load_balancer_full_name,
            gateway_target_group=self.ingress.target_group_full_names()[GATEWAY_TARGET_GROUP],
            evaluation_minutes=regions.alarm_evaluation_minutes,
            alarm_topic_arn=self.alarms.topic.topic_arn if self.alarms is not None else None,
        )
        cdk.CfnOutput(
            self,
            "DnsHealthCheckId",
            value=self.dns_record.health_check.attr_health_check_id,
            description="This region's Route 53 health check (invert it to hold traffic elsewhere: "
            "docs/operations.md, 'A second region')",
        )
        cdk.CfnOutput(
            self,
            "DnsName",
            value=regions.dns_name,
            description=f"The tier's name in Route 53 ({regions.routing.value} across its regions)",
        )
        if secondary is None or secondary.model_bucket is None or model_source_bucket is None:
            return
        self.model_replica = ModelReplica(
            self, "ModelReplica", source_bucket=model_source_bucket, bucket_name=secondary.model_bucket
        )
        cdk.CfnOutput(
            self,
            "ModelReplicationConfiguration",
            value=self.model_replica.configuration,
            description=f"Put on s3://{model_source_bucket} (aws s3api put-bucket-replication "
            "--replication-configuration): replicates it to this region's model bucket",
        )

    def _outputs(self) -> None:
        cfg = self.config
        cdk.CfnOutput(self, "LoadBalancerDnsName", value=self.ingress.dns_name)
        cdk.CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        if self.private_link is not None:
            cdk.CfnOutput(
                self,
                "PrivateLinkServiceName",
                value=self.private_link.service_name,
                description="VPC endpoint service that consumers in other VPCs or accounts connect to",
            )
        cdk.CfnOutput(
            self,
            "KubeconfigCommand",
            value=f"aws eks update-kubeconfig --region {cfg.environment.region} "
            f"--name {self.cluster.cluster_name}",
        )
        if self.gateway is not None:
            cdk.CfnOutput(
                self,
                "GatewayBaseUrl",
                value=self.ingress.base_url_default(),
                description="OpenAI base_url of the gateway: every model by its name, with Bedrock fallback",
            )
        for model in cfg.models:
            cdk.CfnOutput(
                self,
                f"ModelRoute{construct_id(model.name)}",
                value=self.ingress.base_url(model.name),
                description=f"OpenAI base_url of {model.name} (request model: {model.api_model_name})",
            )
