"""GPU placement for the estimate: the GPUs models hold on each pool and node group at base and at
peak, and the instances that carry them (the rules are in :mod:`gpufarm.estimate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpufarm.config.model import (
    AmiFamily,
    CapacityType,
    NodeGroupAmiType,
    NodeGroupConfig,
    NodePoolConfig,
    Provisioning,
    TierConfig,
)
from gpufarm.core.instances import Host, gpus_in, host_of
from gpufarm.core.pools import instances_for, pool_instance_types, pool_loads
from gpufarm.estimate.report import EstimateError
from gpufarm.k8s.karpenter import BOTTLEROCKET_OS_VOLUME_GIB
from gpufarm.pricing import CAPACITY_TYPES, PriceNotFoundError, PriceTable, load_prices

LAUNCH_PRIORITY = (CapacityType.RESERVED, CapacityType.SPOT, CapacityType.ON_DEMAND)
"""Karpenter's order among the capacity types a NodePool allows."""

AUTO_MODE_ROOT_VOLUME_GIB = 80
"""Ephemeral storage of an Auto Mode node (the default NodeClass's `ephemeralStorage.size`)."""


def _pool_ebs_gib(pool: NodePoolConfig) -> int:
    """EBS of one Karpenter node: `root_volume_gib`, plus the OS volume on Bottlerocket
    (`k8s.karpenter.block_device_mappings` lists both)."""
    extra = BOTTLEROCKET_OS_VOLUME_GIB if pool.ami_family is AmiFamily.BOTTLEROCKET else 0
    return pool.root_volume_gib + extra


# --------------------------------------------------------------------------- what a node can hold
# A pod lands on a node whose *allocatable* CPU and memory hold its requests: the instance's
# vCPUs and memory less what the node keeps for itself. Karpenter publishes the allocatable of
# every type it launches (aws/karpenter-provider-aws, website/content/en/docs/reference/
# instance-types.md, "the resources available ... after the instance overhead has been
# subtracted", AL2023). The rules below reproduce its figures: CPU 3920m of 4 vCPUs, 7910m of 8,
# 15890m of 16, 47810m of 48, 191450m of 192; memory 59627Mi of an i7ie.2xlarge's 65536Mi
# (x 0.925, less 11 MiB x 58 pods + 255 MiB, less 100 MiB). Auto Mode's own reserve is not
# published; it is taken to be Karpenter's.

VM_MEMORY_OVERHEAD = 0.075
"""Share of an instance's memory the hypervisor and kernel keep (Karpenter's `vmMemoryOverheadPercent`)."""

KUBE_RESERVED_MIB_PER_POD = 11
KUBE_RESERVED_MIB_BASE = 255
EVICTION_MIB = 100
MAX_PODS = 110
"""Pods per node the memory reserve is computed for: the kubelet's default `--max-pods`
("--max-pods int32 Default: 110", the kubelet's flag reference); Karpenter uses each type's
ENI-limited count, so the largest types keep a few GiB more than this, of several hundred."""

DAEMONSET_CPU = 0.5
DAEMONSET_MEMORY_GIB = 1.0
"""CPU and memory the node's DaemonSet pods are assumed to request (CNI, kube-proxy, Pod Identity
agent, NVIDIA device plugin, DCGM exporter, log and CSI node agents): an estimate, gpufarm does
not render every add-on's pods."""

SIDECAR_CPU = 0.5
SIDECAR_MEMORY_GIB = 0.5
"""CPU and memory of gpufarm's own sidecars next to vLLM, at most: the target control agent
(250m, 128Mi: `k8s/serving.target_control_agent`) and the prefill/decode routing sidecar (250m,
256Mi: `k8s/prefill_decode.py`). Counted for every pod, used or not."""


def kube_reserved_cpu(vcpus: int) -> float:
    """vCPUs the kubelet keeps on a node of `vcpus`: 6% of the first, 1% of the second, 0.5% of
    the next two, 0.25% of the rest."""
    bands = ((1, 0.06), (1, 0.01), (2, 0.005), (math.inf, 0.0025))
    left, reserved = float(vcpus), 0.0
    for width, share in bands:
        take = min(left, width)
        reserved += take * share
        left -= take
    return reserved


def allocatable(host: Host) -> tuple[float, float]:
    """(vCPUs, GiB) a node of `host` offers pods after its own reserve and its DaemonSets."""
    cpu = host.vcpus - kube_reserved_cpu(host.vcpus) - DAEMONSET_CPU
    reserved_mib = KUBE_RESERVED_MIB_PER_POD * MAX_PODS + KUBE_RESERVED_MIB_BASE + EVICTION_MIB
    memory = host.memory_gib * (1 - VM_MEMORY_OVERHEAD) - reserved_mib / 1024 - DAEMONSET_MEMORY_GIB
    return cpu, memory


def pods_per_node(instance_type: str, pod_gpus: int, cpu: float = 0.0, memory_gib: float = 0.0) -> int:
    """Pods of `pod_gpus` GPUs, `cpu` vCPUs and `memory_gib` GiB one instance holds.

    GPUs alone when the pod asks no CPU or memory, or when the catalog has no host figures for
    the type (:data:`gpufarm.core.instances.HOSTS`); else also the node's :func:`allocatable`
    CPU and memory, less :data:`SIDECAR_CPU` and :data:`SIDECAR_MEMORY_GIB` per pod.
    """
    by_gpus = (gpus_in(instance_type) or 0) // max(pod_gpus, 1)
    host = host_of(instance_type)
    if host is None or not (cpu or memory_gib):
        return by_gpus
    node_cpu, node_memory = allocatable(host)
    by_cpu = math.floor(node_cpu / (cpu + SIDECAR_CPU)) if cpu else by_gpus
    by_memory = math.floor(node_memory / (memory_gib + SIDECAR_MEMORY_GIB)) if memory_gib else by_gpus
    return max(min(by_gpus, by_cpu, by_memory), 0)


# --------------------------------------------------------------------------- GPU placement


@dataclass(kw_only=True)
class GpuAllocation:
    """The GPUs models hold on one pool or node group, and the instances that carry them."""

    target: str
    kind: str  # "node group" or "pool"
    instance_type: str
    gpus_per_instance: int
    capacity_type: str
    base_gpus: int = 0
    peak_gpus: int = 0
    fixed_instances: int | None = None  # node groups: always this many
    root_volume_gib: int = 0
    """EBS of one instance, GiB: its root (AL2023) or data volume, plus Bottlerocket's OS volume."""
    usable_gpus_per_instance: int | None = None
    """GPUs of one instance its pods can use when their CPU or memory fills it first (None: all)."""

    @property
    def _packed(self) -> int:
        return self.usable_gpus_per_instance or self.gpus_per_instance

    @property
    def base_instances(self) -> int:
        """Instances at base."""
        if self.fixed_instances is not None:
            return self.fixed_instances
        return instances_for(self.base_gpus, self._packed)

    @property
    def peak_instances(self) -> int:
        """Instances at peak."""
        if self.fixed_instances is not None:
            return self.fixed_instances
        return instances_for(self.peak_gpus, self._packed)


def pool_capacity_type(pool: NodePoolConfig) -> str:
    """The capacity type a pool's GPUs count as: the first it allows in LAUNCH_PRIORITY."""
    return next(c.value for c in LAUNCH_PRIORITY if c in pool.capacity_types)


def choose_instance_type(
    pool: NodePoolConfig,
    node_gpus: int,
    prices: PriceTable,
    *,
    cpu: float = 0.0,
    memory_gib: float = 0.0,
) -> str:
    """The pool's type that holds a pod of `node_gpus` GPUs, `cpu` vCPUs and `memory_gib` GiB at
    the lowest price per GPU its pods can use (fewer GPUs on a tie).

    As Karpenter and Auto Mode launch for a pending pod, a type must hold the pod's GPUs *and* its
    CPU and memory requests within the node's allocatable (:func:`pods_per_node`; default 0: GPUs
    only). Types without a price in the table are skipped. EstimateError when no type holds the
    pod, PriceNotFoundError when none of those that do is priced.
    """
    types = pool_instance_types(pool)
    fitting = [t for t in types if pods_per_node(t, node_gpus, cpu, memory_gib) >= 1]
    if not fitting:
        asks = f"{node_gpus} GPU(s)" + (f", {cpu:g} CPU and {memory_gib:g} GiB" if cpu or memory_gib else "")
        raise EstimateError(
            f"pool {pool.name!r}: none of its instance types ({', '.join(types) or 'none'}) holds a pod "
            f"of {asks} once the node keeps its reserve (the kubelet's, {DAEMONSET_CPU:g} CPU and "
            f"{DAEMONSET_MEMORY_GIB:g} GiB for DaemonSets, {SIDECAR_CPU:g} CPU and "
            f"{SIDECAR_MEMORY_GIB:g} GiB for gpufarm's sidecars): allow a larger size"
        )
    priced = [t for t in fitting if t in prices.ec2.on_demand_per_hour]
    if not priced:
        raise PriceNotFoundError(
            "EC2 on-demand",
            fitting[0],
            f"pool {pool.name!r} may launch {', '.join(fitting)}; add one "
            "under ec2.on_demand_per_hour in a --prices file",
        )

    def per_usable_gpu(itype: str) -> tuple[float, int]:
        usable = pods_per_node(itype, node_gpus, cpu, memory_gib) * node_gpus
        return prices.on_demand(itype) / usable, gpus_in(itype) or 0

    return min(priced, key=per_usable_gpu)


def gpu_allocations(tier: TierConfig, prices: PriceTable | None = None) -> list[GpuAllocation]:
    """Every node group, and every pool some model uses, with its GPUs at base and at peak.

    The GPUs per target are :func:`gpufarm.core.pools.pool_loads`; the estimate picks each pool's
    instance type (:func:`choose_instance_type`) for the largest pod placed on it.
    """
    prices = prices or load_prices()
    auto_mode = tier.cluster.provisioning is Provisioning.AUTO_MODE
    out: list[GpuAllocation] = []
    for load in pool_loads(tier):
        target = load.target
        if isinstance(target, NodeGroupConfig):
            out.append(
                GpuAllocation(
                    target=target.name,
                    kind="node group",
                    instance_type=target.instance_type,
                    gpus_per_instance=gpus_in(target.instance_type) or 0,
                    capacity_type=CapacityType.RESERVED.value,
                    base_gpus=load.base_gpus,
                    peak_gpus=load.peak_gpus,
                    fixed_instances=target.nodes,
                    root_volume_gib=target.disk_gib
                    + (
                        BOTTLEROCKET_OS_VOLUME_GIB
                        if target.ami_type is NodeGroupAmiType.BOTTLEROCKET_NVIDIA
                        else 0
                    ),
                )
            )
            continue
        if not load.base_gpus and not load.peak_gpus:
            continue  # named by a capacity class whose other targets hold all its GPUs
        cpu = max((p.pods.cpu for p in load.placed), default=0.0)
        memory = max((p.pods.memory_gib for p in load.placed), default=0)
        itype = choose_instance_type(target, load.pod_gpus, prices, cpu=cpu, memory_gib=memory)
        gpus = gpus_in(itype) or 1
        usable = pods_per_node(itype, load.pod_gpus, cpu, memory) * load.pod_gpus
        out.append(
            GpuAllocation(
                target=target.name,
                kind="pool",
                instance_type=itype,
                gpus_per_instance=gpus,
                usable_gpus_per_instance=usable if 0 < usable < gpus else None,
                capacity_type=pool_capacity_type(target),
                base_gpus=load.base_gpus,
                peak_gpus=load.peak_gpus,
                root_volume_gib=AUTO_MODE_ROOT_VOLUME_GIB if auto_mode else _pool_ebs_gib(target),
            )
        )
    return out


def gpu_capacity(tier: TierConfig, *, prices: PriceTable | None = None, peak: bool = True) -> dict[str, int]:
    """GPUs provisioned by capacity type ("reserved", "on-demand", "spot"; all keys present).

    Reserved: every GPU of the node groups. On-demand and spot: the instances the models'
    placement needs (see the module docstring), times GPUs per instance, at peak (every model
    at its most replicas) unless `peak` is False. `prices` picks the pools' instance types
    (default: the shipped table).
    """
    out = dict.fromkeys(CAPACITY_TYPES, 0)
    for alloc in gpu_allocations(tier, prices):
        instances = alloc.peak_instances if peak else alloc.base_instances
        out[alloc.capacity_type] += instances * alloc.gpus_per_instance
    return out


def instance_types_of(tier: TierConfig) -> list[str]:
    """Every EC2 instance type the tier may run, sorted: what a live price lookup must cover."""
    types: set[str] = {g.instance_type for g in tier.node_groups}
    for pool in tier.node_pools:
        types.update(t for t in pool_instance_types(pool) if gpus_in(t) is not None)
    types.add(tier.cluster.system_nodes.instance_types[0])
    if tier.ingress.inspection.enabled:
        types.add(tier.ingress.inspection.appliances.instance_type)
    return sorted(types)
