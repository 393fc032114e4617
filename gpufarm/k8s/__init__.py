"""Pure functions that return Kubernetes manifests as dicts (no CDK import, unit-testable)."""

from gpufarm.core.s3 import split_s3_uri
from gpufarm.k8s.autoscaling import keda_values, scaled_object, trigger_authentication
from gpufarm.k8s.binding import AUTO_MODE_TGB_API, LBC_TGB_API, target_group_binding
from gpufarm.k8s.karpenter import (
    ec2_nodeclass,
    karpenter_gpu_nodepool,
    karpenter_values,
    nvidia_device_plugin_values,
)
from gpufarm.k8s.labels import common_labels, model_selector, nodepool_name, workload_name
from gpufarm.k8s.nodepool import AUTO_MODE_NODECLASS, auto_mode_gpu_nodepool
from gpufarm.k8s.serving import (
    SERVICE_ACCOUNT,
    namespace,
    service_account,
    vllm_args,
    vllm_deployment,
    vllm_service,
)
from gpufarm.k8s.storage import (
    FSX_CLAIM,
    fsx_sub_path,
    fsx_weights_volume,
    s3_weights_volume,
    weights_claim_name,
)

__all__ = [
    "AUTO_MODE_NODECLASS",
    "AUTO_MODE_TGB_API",
    "FSX_CLAIM",
    "LBC_TGB_API",
    "SERVICE_ACCOUNT",
    "auto_mode_gpu_nodepool",
    "common_labels",
    "ec2_nodeclass",
    "fsx_sub_path",
    "fsx_weights_volume",
    "karpenter_gpu_nodepool",
    "karpenter_values",
    "keda_values",
    "model_selector",
    "namespace",
    "nodepool_name",
    "nvidia_device_plugin_values",
    "s3_weights_volume",
    "scaled_object",
    "service_account",
    "split_s3_uri",
    "target_group_binding",
    "trigger_authentication",
    "vllm_args",
    "vllm_deployment",
    "vllm_service",
    "weights_claim_name",
    "workload_name",
]
