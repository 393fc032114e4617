"""Pod requests on the GPU instance types `gpufarm plan` may choose.

The instances' vCPUs and memory come from the instance catalog
(:data:`gpufarm.core.instances.HOSTS`); a type without them there is not a candidate for a plan.
"""

from __future__ import annotations

from gpufarm.core.instances import instance_spec

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
    host = instance_spec(instance_type).host
    if host is None:
        raise ValueError(f"instance type {instance_type!r} has no vCPUs and memory in the instance catalog")
    share = gpus_per_pod / gpus_per_instance
    cpu = max(1, int(host.vcpus * share) - SYSTEM_RESERVED_VCPUS)
    memory = max(4, int(host.memory_gib * share * (1 - SYSTEM_RESERVED_MEMORY_SHARE)))
    return cpu, memory
