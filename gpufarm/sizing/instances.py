"""vCPUs and memory of the GPU instance types `gpufarm plan` may choose, to size pod requests.

Figures from the instance table of AWS's SageMaker HyperPod CLI
(aws/sagemaker-hyperpod-cli, `INSTANCE_RESOURCES`; the `ml.` instances match the EC2 ones) and
its G7e addition (pull request 390); p6-b200.48xlarge from the OpenShift ROSA compute-type list
(192 vCPU, 2,048 GiB). A type missing here is not a candidate for a plan.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class InstanceShape:
    """vCPUs and memory (GiB) of one instance type."""

    vcpus: int
    memory_gib: int


INSTANCE_SHAPES: dict[str, InstanceShape] = {
    "g5.xlarge": InstanceShape(vcpus=4, memory_gib=16),
    "g5.12xlarge": InstanceShape(vcpus=48, memory_gib=192),
    "g5.48xlarge": InstanceShape(vcpus=192, memory_gib=768),
    "g6.xlarge": InstanceShape(vcpus=4, memory_gib=16),
    "g6.12xlarge": InstanceShape(vcpus=48, memory_gib=192),
    "g6.48xlarge": InstanceShape(vcpus=192, memory_gib=768),
    "g6e.xlarge": InstanceShape(vcpus=4, memory_gib=32),
    "g6e.12xlarge": InstanceShape(vcpus=48, memory_gib=384),
    "g6e.48xlarge": InstanceShape(vcpus=192, memory_gib=1536),
    "g7e.2xlarge": InstanceShape(vcpus=8, memory_gib=64),
    "p4d.24xlarge": InstanceShape(vcpus=96, memory_gib=1152),
    "p4de.24xlarge": InstanceShape(vcpus=96, memory_gib=1152),
    "p5.4xlarge": InstanceShape(vcpus=16, memory_gib=256),
    "p5.48xlarge": InstanceShape(vcpus=192, memory_gib=2048),
    "p5en.48xlarge": InstanceShape(vcpus=192, memory_gib=2048),
    "p6-b200.48xlarge": InstanceShape(vcpus=192, memory_gib=2048),
}
"""Instance type -> vCPUs and memory."""

SYSTEM_RESERVED_VCPUS = 1
"""vCPUs left per pod for the kubelet, system reservations and DaemonSets (CNI, device plugin, exporters)."""

SYSTEM_RESERVED_MEMORY_SHARE = 0.15
"""Share of a pod's memory left for the kubelet's reservation and DaemonSets."""


def pod_requests(instance_type: str, *, gpus_per_pod: int, gpus_per_instance: int) -> tuple[int, int]:
    """(cpu, memory_gib) a pod holding `gpus_per_pod` of the instance's GPUs may request.

    The pod's share of the instance (its GPUs over the instance's) of vCPUs and memory, less
    SYSTEM_RESERVED_VCPUS and SYSTEM_RESERVED_MEMORY_SHARE, so that the pods of every replica
    the instance holds are scheduled on it. At least 1 vCPU and 4 GiB.
    """
    shape = INSTANCE_SHAPES[instance_type]
    share = gpus_per_pod / gpus_per_instance
    cpu = max(1, int(shape.vcpus * share) - SYSTEM_RESERVED_VCPUS)
    memory = max(4, int(shape.memory_gib * share * (1 - SYSTEM_RESERVED_MEMORY_SHARE)))
    return cpu, memory
