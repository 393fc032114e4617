"""NodePool manifests for GPU pools."""

from __future__ import annotations

from typing import Any

from gpufarm.config.model import NodePoolConfig
from gpufarm.k8s.labels import (
    GPU_RESOURCE,
    GPU_TAINT_KEY,
    POOL_LABEL,
    common_labels,
    nodepool_name,
)

AUTO_MODE_NODECLASS = "default"
"""The NodeClass EKS Auto Mode creates and manages."""


def auto_mode_gpu_nodepool(pool: NodePoolConfig, *, node_class: str = AUTO_MODE_NODECLASS) -> dict[str, Any]:
    """A `karpenter.sh/v1` NodePool on the EKS Auto Mode NodeClass for one GPU pool.

    GPU nodes are tainted `nvidia.com/gpu:NoSchedule` so only pods that tolerate it land there;
    consolidation is `WhenEmpty` so a node serving a model is never drained to pack pods tighter.
    """
    requirements: list[dict[str, Any]] = [
        {
            "key": "eks.amazonaws.com/instance-family",
            "operator": "In",
            "values": list(pool.instance_families),
        },
        {
            "key": "karpenter.sh/capacity-type",
            "operator": "In",
            "values": [c.value for c in pool.capacity_types],
        },
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {
            "key": "eks.amazonaws.com/instance-gpu-manufacturer",
            "operator": "In",
            "values": ["nvidia"],
        },
    ]
    if pool.instance_types:
        requirements.append(
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": list(pool.instance_types),
            }
        )
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": nodepool_name(pool.name),
            "labels": {**common_labels("gpu-nodepool"), POOL_LABEL: pool.name},
        },
        "spec": {
            "template": {
                "metadata": {"labels": {POOL_LABEL: pool.name}},
                "spec": {
                    "nodeClassRef": {
                        "group": "eks.amazonaws.com",
                        "kind": "NodeClass",
                        "name": node_class,
                    },
                    "requirements": requirements,
                    "taints": [{"key": GPU_TAINT_KEY, "effect": "NoSchedule"}],
                    "expireAfter": pool.expire_after,
                },
            },
            "limits": {GPU_RESOURCE: str(pool.gpu_limit)},
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": pool.consolidate_after,
                "budgets": [{"nodes": pool.disruption_budget_nodes}],
            },
        },
    }
