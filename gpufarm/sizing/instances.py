"""Pod requests on the GPU instance types `gpufarm plan` may choose.

The instances' vCPUs and memory come from the instance catalog
(:data:`gpufarm.core.instances.HOSTS`); a type without them there is not a candidate for a plan.
"""

from __future__ import annotations

import math

from gpufarm.core.instances import instance_spec
from gpufarm.estimate.allocation import SIDECAR_CPU, SIDECAR_MEMORY_GIB, allocatable

SYSTEM_RESERVED_VCPUS = 1
"""vCPUs left per pod for the kubelet, system reservations and DaemonSets (CNI, device plugin, exporters)."""

SYSTEM_RESERVED_MEMORY_SHARE = 0.15
"""Share of a pod's memory left for the kubelet's reservation and DaemonSets."""


def pod_requests(instance_type: str, *, gpus_per_pod: int, gpus_per_instance: int) -> tuple[int, int]:
    """(cpu, memory_gib) a pod holding `gpus_per_pod` of the instance's GPUs may request.

    The pod's share of the instance (its GPUs over the instance's) of vCPUs and memory, less
    SYSTEM_RESERVED_VCPUS and SYSTEM_RESERVED_MEMORY_SHARE; and no more than its share of what
    the node allocates once the kubelet, the DaemonSets and gpufarm's sidecars have theirs
    (:func:`gpufarm.estimate.allocation.allocatable`, the rule `gpufarm cost` and `preflight`
    place pods by), so that the pods of every replica the instance holds are scheduled on it: a
    whole 96-vCPU instance leaves 94 vCPUs to its one pod, not 95. At least 1 vCPU and 4 GiB.
    """
    host = instance_spec(instance_type).host
    if host is None:
        raise ValueError(f"instance type {instance_type!r} has no vCPUs and memory in the instance catalog")
    share = gpus_per_pod / gpus_per_instance
    pods = gpus_per_instance // gpus_per_pod
    node_cpu, node_memory = allocatable(host)
    cpu = min(int(host.vcpus * share) - SYSTEM_RESERVED_VCPUS, math.floor(node_cpu / pods - SIDECAR_CPU))
    memory = min(
        int(host.memory_gib * share * (1 - SYSTEM_RESERVED_MEMORY_SHARE)),
        math.floor(node_memory / pods - SIDECAR_MEMORY_GIB),
    )
    return max(1, cpu), max(4, memory)
