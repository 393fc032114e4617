"""Labels and names shared by every manifest gpufarm renders."""

from __future__ import annotations

from gpufarm.core.labels import CAPACITY_CLASS_LABEL as CAPACITY_CLASS_LABEL  # re-exported
from gpufarm.core.labels import NODEPOOL_LABEL as NODEPOOL_LABEL  # re-exported
from gpufarm.core.labels import POOL_LABEL as POOL_LABEL  # re-exported
from gpufarm.core.labels import nodepool_name as nodepool_name  # re-exported
from gpufarm.core.names import leader_service_name as leader_service_name  # re-exported
from gpufarm.core.names import router_name as router_name  # re-exported
from gpufarm.core.names import workload_name as workload_name  # re-exported

PART_OF = "gpufarm"
MODEL_LABEL = "gpufarm.io/model"
SHARE_LABEL = "gpufarm.io/share"
"""Pod label naming the share of a model a pod belongs to (only on models split into shares)."""
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
"""Extended resource the EFA device plugin advertises: EFA interfaces of the node."""
EFA_LABEL = "gpufarm.io/efa"
"""Node label (`"true"`) on nodes launched with EFA interfaces; the EFA device plugin runs there."""
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
"""Node label (`"true"`) on NVIDIA GPU nodes Karpenter did not launch (managed node groups)."""


def common_labels(component: str) -> dict[str, str]:
    """Labels every gpufarm object carries: what it is and that gpufarm manages it."""
    return {
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "gpufarm",
        "app.kubernetes.io/component": component,
    }


def model_selector(model_name: str) -> dict[str, str]:
    """Selector matching the pods of one model (stable across releases: never add to it)."""
    return {"app.kubernetes.io/name": "vllm", MODEL_LABEL: model_name}


def share_selector(model_name: str, share: str) -> dict[str, str]:
    """Selector matching the pods of one share of a model: the model's selector and the share."""
    return {**model_selector(model_name), SHARE_LABEL: share}
