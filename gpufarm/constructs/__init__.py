"""Reusable L3 constructs for GPU inference on EKS, EC2 and SageMaker; each takes an existing VPC or
cluster where it can.

Example::

    from gpufarm.constructs import AutoModeGpuNodePool
    from gpufarm.config import NodePoolConfig

    AutoModeGpuNodePool(self, "Gpus", cluster=my_cluster, pool=NodePoolConfig(name="l40s"))
"""

from gpufarm.constructs.alerting import PrometheusAlerts
from gpufarm.constructs.autoscaling import KedaAutoscaling
from gpufarm.constructs.cluster import InferenceCluster
from gpufarm.constructs.compliance import enable_compliance_checks
from gpufarm.constructs.fsx_model_store import FsxModelStore
from gpufarm.constructs.gateway import FallbackGateway
from gpufarm.constructs.gateway_fleet import GatewayFleet, GatewayRoutes
from gpufarm.constructs.gateway_nlb import GatewayNlb
from gpufarm.constructs.gpu_fleet import GpuFleet
from gpufarm.constructs.gpu_node_pool import AutoModeGpuNodePool
from gpufarm.constructs.hybrid_nodes import HybridNodes
from gpufarm.constructs.ingress import InferenceAlb, route_prefix
from gpufarm.constructs.inspection import TrafficInspection
from gpufarm.constructs.karpenter import (
    GpuNodePoolOptions,
    Karpenter,
    KarpenterGpuNodePool,
    NvidiaDevicePlugin,
)
from gpufarm.constructs.kv_cache_routing import KvCacheRouting
from gpufarm.constructs.lb_controller import AwsLoadBalancerController
from gpufarm.constructs.logs_key import LogsKey
from gpufarm.constructs.lws import LeaderWorkerSetController, MultiNodeServing
from gpufarm.constructs.model_replica import ModelReplica
from gpufarm.constructs.model_store import S3ModelStore
from gpufarm.constructs.network import InferenceNetwork
from gpufarm.constructs.network_policy import ServingNetworkPolicies
from gpufarm.constructs.nlb import AlpnPolicy, InferenceNlb
from gpufarm.constructs.observability import InferenceAlarms, InferenceDashboard, PrometheusMonitoring
from gpufarm.constructs.private_link import InferencePrivateLink
from gpufarm.constructs.regional_record import RegionalRecord
from gpufarm.constructs.reserved_capacity import EfaDevicePlugin, ReservedGpuNodeGroup
from gpufarm.constructs.sagemaker_endpoint import SageMakerEndpoint
from gpufarm.constructs.serving import VllmServing
from gpufarm.constructs.waf import InferenceWaf

__all__ = [
    "AlpnPolicy",
    "AutoModeGpuNodePool",
    "AwsLoadBalancerController",
    "EfaDevicePlugin",
    "FallbackGateway",
    "FsxModelStore",
    "GatewayFleet",
    "GatewayNlb",
    "GatewayRoutes",
    "GpuFleet",
    "GpuNodePoolOptions",
    "HybridNodes",
    "InferenceAlarms",
    "InferenceAlb",
    "InferenceCluster",
    "InferenceDashboard",
    "InferenceNetwork",
    "InferenceNlb",
    "InferencePrivateLink",
    "InferenceWaf",
    "Karpenter",
    "KarpenterGpuNodePool",
    "KedaAutoscaling",
    "KvCacheRouting",
    "LeaderWorkerSetController",
    "LogsKey",
    "ModelReplica",
    "MultiNodeServing",
    "NvidiaDevicePlugin",
    "PrometheusAlerts",
    "PrometheusMonitoring",
    "RegionalRecord",
    "ReservedGpuNodeGroup",
    "S3ModelStore",
    "SageMakerEndpoint",
    "ServingNetworkPolicies",
    "TrafficInspection",
    "VllmServing",
    "enable_compliance_checks",
    "route_prefix",
]
