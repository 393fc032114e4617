"""Node labels that place a model's pods, shared by the placement answers and the manifests."""

from __future__ import annotations

POOL_LABEL = "gpufarm.io/pool"
"""Node label naming the gpufarm pool or node group a node belongs to."""

NODEPOOL_LABEL = "karpenter.sh/nodepool"
"""Label Karpenter (and EKS Auto Mode) puts on every node it launches: the NodePool's name."""

CAPACITY_CLASS_LABEL = "gpufarm.io/capacity-class"
"""Node label naming the capacity class (reserved base, burst, background) models select."""


def nodepool_name(pool_name: str) -> str:
    """Name of the Kubernetes NodePool behind a gpufarm pool."""
    return f"gpu-{pool_name}"
