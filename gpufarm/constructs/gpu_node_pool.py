"""GPU node pools: Kubernetes NodePools that provision GPU instances on demand."""

from __future__ import annotations

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from gpufarm.config.model import NodePoolConfig
from gpufarm.k8s.nodepool import AUTO_MODE_NODECLASS, auto_mode_gpu_nodepool


class AutoModeGpuNodePool(Construct):
    """A GPU NodePool on the EKS Auto Mode NodeClass of an existing Auto Mode cluster.

    Defaults (from :class:`NodePoolConfig`): g6e instances, on-demand, tainted
    `nvidia.com/gpu:NoSchedule`, at most 8 GPUs, nodes removed only when empty for 30 minutes
    (never consolidated while serving), one node disrupted at a time, replaced after 14 days.
    Auto Mode installs the NVIDIA driver and device plugin itself.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        pool: NodePoolConfig,
        node_class: str = AUTO_MODE_NODECLASS,
    ) -> None:
        super().__init__(scope, id)
        self.pool = pool
        self.manifest = auto_mode_gpu_nodepool(pool, node_class=node_class)
        self.node_pool_name: str = self.manifest["metadata"]["name"]
        self.resource = eks.KubernetesManifest(
            self, "Resource", cluster=cluster, manifest=[self.manifest], overwrite=True
        )
