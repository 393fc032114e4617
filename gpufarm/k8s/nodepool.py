"""NodePool manifests for GPU pools."""

from __future__ import annotations

from collections.abc import Mapping
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

AUTO_MODE_LABEL_DOMAIN = "eks.amazonaws.com"
"""Prefix of the instance labels (`<domain>/instance-family`, ...) on Auto Mode nodes."""


def gpu_requirements(pool: NodePoolConfig, *, label_domain: str) -> list[dict[str, Any]]:
    """NodePool requirements for one GPU pool: families, capacity types, amd64, NVIDIA GPUs, sizes.

    `label_domain` is the provider's prefix of the instance labels: `eks.amazonaws.com` on
    Auto Mode, `karpenter.k8s.aws` with self-managed Karpenter.
    """
    requirements: list[dict[str, Any]] = [
        {
            "key": f"{label_domain}/instance-family",
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
            "key": f"{label_domain}/instance-gpu-manufacturer",
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
    return requirements


def gpu_nodepool(
    pool: NodePoolConfig,
    *,
    node_class_ref: Mapping[str, str],
    label_domain: str,
    node_labels: Mapping[str, str],
    weight: int | None = None,
) -> dict[str, Any]:
    """A `karpenter.sh/v1` NodePool for one GPU pool, on any NodeClass (Auto Mode or Karpenter's).

    Nodes carry `node_labels` and the taint `nvidia.com/gpu:NoSchedule`; the pool is capped at
    `gpu_limit` GPUs and consolidated only when a node is empty. `weight` (1-100) orders pools
    for the scheduler; None leaves it out (weight 0).
    """
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(node_labels)},
            "spec": {
                "nodeClassRef": dict(node_class_ref),
                "requirements": gpu_requirements(pool, label_domain=label_domain),
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
    }
    if weight is not None:
        spec["weight"] = weight
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": nodepool_name(pool.name),
            "labels": {**common_labels("gpu-nodepool"), POOL_LABEL: pool.name},
        },
        "spec": spec,
    }


def auto_mode_gpu_nodepool(pool: NodePoolConfig, *, node_class: str = AUTO_MODE_NODECLASS) -> dict[str, Any]:
    """A `karpenter.sh/v1` NodePool on the EKS Auto Mode NodeClass for one GPU pool.

    GPU nodes are tainted `nvidia.com/gpu:NoSchedule` so only pods that tolerate it land there;
    consolidation is `WhenEmpty` so a node serving a model is never drained to pack pods tighter.
    """
    return gpu_nodepool(
        pool,
        node_class_ref={"group": "eks.amazonaws.com", "kind": "NodeClass", "name": node_class},
        label_domain=AUTO_MODE_LABEL_DOMAIN,
        node_labels={POOL_LABEL: pool.name},
    )
