"""The vCPU quota check: the EC2 vCPU quotas, the instances each node group and pool may run, and
the rows comparing their vCPUs with the account's quotas.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpufarm.aws.preflight.calls import InstanceInfo, _quota_value
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import CapacityType, NodePoolConfig, TierConfig
from gpufarm.config.model import Provisioning, ReservationKind
from gpufarm.core.fleets import fleets
from gpufarm.core.instances import quota_class
from gpufarm.core.pools import instances_for, pool_instance_types, pool_loads

# --------------------------------------------------------------------------- quotas


@dataclass(frozen=True, kw_only=True)
class VcpuQuota:
    """An EC2 vCPU quota in Service Quotas (service code `ec2`)."""

    code: str
    name: str
    instance_class: str
    """'G' (G and VT families) or 'P'."""
    capacity_type: CapacityType
    """On-demand or spot."""


VCPU_QUOTAS: tuple[VcpuQuota, ...] = (
    VcpuQuota(
        code="L-DB2E81BA",
        name="Running On-Demand G and VT instances",
        instance_class="G",
        capacity_type=CapacityType.ON_DEMAND,
    ),
    VcpuQuota(
        code="L-417A185B",
        name="Running On-Demand P instances",
        instance_class="P",
        capacity_type=CapacityType.ON_DEMAND,
    ),
    VcpuQuota(
        code="L-3819A6DF",
        name="All G and VT Spot Instance Requests",
        instance_class="G",
        capacity_type=CapacityType.SPOT,
    ),
    VcpuQuota(
        code="L-7212CCBC",
        name="All P Spot Instance Requests",
        instance_class="P",
        capacity_type=CapacityType.SPOT,
    ),
)
"""The vCPU quotas GPU instances count against (values are vCPUs, per region)."""


def quota_for(instance_type: str, capacity_type: CapacityType) -> VcpuQuota | None:
    """The vCPU quota an instance of this type and capacity type counts against, if any."""
    wanted = quota_class(instance_type)
    return next(
        (q for q in VCPU_QUOTAS if q.instance_class == wanted and q.capacity_type is capacity_type), None
    )


# --------------------------------------------------------------------------- demand (pure)


@dataclass(frozen=True, kw_only=True)
class VcpuDemand:
    """Instances one node group or pool may run, of one type and capacity type."""

    source: str
    """'node group <name>' or 'pool <name>'."""
    instance_type: str
    capacity_type: CapacityType
    vcpus_per_instance: int
    instances: int
    """Instances for the models at their most replicas."""
    limit_instances: int
    """Instances at the pool's GPU limit (for a node group: its nodes)."""

    @property
    def vcpus(self) -> int:
        """vCPUs for the models at their most replicas."""
        return self.instances * self.vcpus_per_instance

    @property
    def limit_vcpus(self) -> int:
        """vCPUs at the pool's GPU limit."""
        return self.limit_instances * self.vcpus_per_instance


class PodShape(Protocol):
    """What a node must hold for one pod: a model's (or share's) pod, or a :class:`PodSet`'s."""

    @property
    def gpus(self) -> int: ...

    @property
    def cpu(self) -> float: ...

    @property
    def memory_gib(self) -> int: ...


def fits(pod: PodShape, info: InstanceInfo) -> bool:
    """Whether one pod fits an instance: GPUs, CPU and memory requests.

    The node keeps some CPU and memory for itself, so the requests must be strictly below the
    instance's vCPUs and memory.
    """
    return info.gpus >= pod.gpus and info.vcpus > pod.cpu and info.memory_gib > pod.memory_gib


def instance_for(pod: PodShape, candidates: Iterable[str], info: Mapping[str, InstanceInfo]) -> str | None:
    """The smallest candidate (fewest GPUs, then vCPUs) one pod fits, roughly as Karpenter picks;
    None when no candidate with known facts fits."""
    usable = [info[t] for t in candidates if t in info and fits(pod, info[t])]
    if not usable:
        return None
    return min(usable, key=lambda i: (i.gpus, i.vcpus, i.memory_gib)).instance_type


def _quota_capacity_types(pool: NodePoolConfig) -> list[CapacityType]:
    """Quota capacity types a pool's nodes count against (reserved instances count as on-demand)."""
    out = []
    if CapacityType.ON_DEMAND in pool.capacity_types or CapacityType.RESERVED in pool.capacity_types:
        out.append(CapacityType.ON_DEMAND)
    if CapacityType.SPOT in pool.capacity_types:
        out.append(CapacityType.SPOT)
    return out


def vcpu_demands(tier: TierConfig, info: Mapping[str, InstanceInfo]) -> list[VcpuDemand]:
    """The instances each node group and pool may run, from the GPUs the pods hold at peak.

    Node groups on an On-Demand Capacity Reservation (`create`, `odcr`) count against the
    On-Demand quota with all their nodes; Capacity Blocks are paid ahead and are not counted.
    The GPUs each pool holds are :func:`gpufarm.core.pools.pool_loads` at peak (models, shares
    and prefill pods; reserved node groups first, then pools by weight up to their GPU limits).
    Each set of pods gets the smallest of the pool's types it fits (:func:`instance_for`); the
    GPUs on one type are packed onto ceil(GPUs / GPUs per instance) instances. Pools count
    against On-Demand and Spot quotas for every capacity type they allow.
    """
    if tier.cluster.provisioning is Provisioning.EC2:
        return _fleet_demands(tier, info)
    demands: list[VcpuDemand] = []
    for group in tier.node_groups:
        known = info.get(group.instance_type)
        if known is None or group.capacity.kind is ReservationKind.CAPACITY_BLOCK:
            continue
        demands.append(
            VcpuDemand(
                source=f"node group {group.name}",
                instance_type=group.instance_type,
                capacity_type=CapacityType.ON_DEMAND,
                vcpus_per_instance=known.vcpus,
                instances=group.nodes,
                limit_instances=group.nodes,
            )
        )
    loads = {load.name: load for load in pool_loads(tier) if not load.is_node_group}
    for pool in tier.node_pools:
        candidates = pool_instance_types(pool)
        gpus: dict[str, int] = {}
        unit: str | None = None
        load = loads.get(pool.name)
        for placed in load.placed if load is not None else ():
            chosen = instance_for(placed.pods, candidates, info)
            if chosen is None:
                continue
            gpus[chosen] = gpus.get(chosen, 0) + placed.peak_gpus
            if unit is None or info[chosen].gpus > info[unit].gpus:
                unit = chosen
        if unit is None:
            facts = [info[t] for t in candidates if t in info]
            if not facts:
                continue
            unit = min(facts, key=lambda i: (i.gpus, i.vcpus)).instance_type
        limit = math.ceil(pool.gpu_limit / max(1, info[unit].gpus))
        nodes = {t: instances_for(held, info[t].gpus) for t, held in gpus.items()}
        nodes.setdefault(unit, 0)
        for capacity_type in _quota_capacity_types(pool):
            for instance_type, count in sorted(nodes.items()):
                demands.append(
                    VcpuDemand(
                        source=f"pool {pool.name}",
                        instance_type=instance_type,
                        capacity_type=capacity_type,
                        vcpus_per_instance=info[instance_type].vcpus,
                        instances=count,
                        limit_instances=limit if instance_type == unit else 0,
                    )
                )
    return demands


def _fleet_demands(tier: TierConfig, info: Mapping[str, InstanceInfo]) -> list[VcpuDemand]:
    """`cluster.provisioning: ec2`: each GPU Auto Scaling group at its MaxSize.

    The on-demand base (:attr:`gpufarm.core.fleets.Fleet.on_demand_base`) counts against the
    On-Demand quota, the rest against the Spot one; a warm pool's stopped instances count against
    neither (a running-instances quota). The group's smallest fitting type stands for its
    instances (a spot group may also launch the larger fitting types).
    """
    demands = []
    for fleet in fleets(tier):
        types = [t for t in fleet.instance_types() if t in info]
        if not types:
            continue
        unit = types[0]
        on_demand = min(fleet.on_demand_base, fleet.max_instances)
        split = [(CapacityType.ON_DEMAND, on_demand), (CapacityType.SPOT, fleet.max_instances - on_demand)]
        for capacity_type, count in split:
            if count or (capacity_type is CapacityType.ON_DEMAND and not fleet.spot):
                demands.append(
                    VcpuDemand(
                        source=f"group {fleet.name}",
                        instance_type=unit,
                        capacity_type=capacity_type,
                        vcpus_per_instance=info[unit].vcpus,
                        instances=count,
                        limit_instances=count,
                    )
                )
    return demands


# --------------------------------------------------------------------------- check: quotas


def _describe(demands: list[VcpuDemand], *, at_limit: bool) -> str:
    parts = []
    for d in demands:
        count = d.limit_instances if at_limit else d.instances
        if count:
            parts.append(f"{d.source}: {count} x {d.instance_type}")
    return "; ".join(parts)


def check_vcpu_quotas(
    tier: TierConfig, *, region: str, info: Mapping[str, InstanceInfo], quotas: Any
) -> list[CheckResult]:
    """One row per vCPU quota the tier's instances count against.

    pass: the quota covers the pools at their GPU limits; warn: it covers the models at their most
    replicas only; fail: it does not cover the models.
    """
    by_quota: dict[str, list[VcpuDemand]] = defaultdict(list)
    for demand in vcpu_demands(tier, info):
        quota = quota_for(demand.instance_type, demand.capacity_type)
        if quota is not None:
            by_quota[quota.code].append(demand)
    rows = []
    for quota in VCPU_QUOTAS:
        demands = by_quota.get(quota.code)
        if not demands:
            continue
        need = sum(d.vcpus for d in demands)
        need_limit = max(need, sum(d.limit_vcpus for d in demands))
        value = _quota_value(quotas, quota.code)
        have = int(value)
        subject = f"{quota.name} ({quota.code})"
        request = (
            f"request an increase to at least {{}} vCPUs: aws service-quotas "
            f"request-service-quota-increase --service-code ec2 --quota-code {quota.code} "
            f"--desired-value {{}} --region {region}"
        )
        if value >= need_limit:
            rows.append(
                CheckResult(
                    check=Check.QUOTA,
                    subject=subject,
                    status=Status.PASS,
                    message=f"{have} vCPUs cover the {need_limit} the tier may use at its pools' GPU limits",
                )
            )
        elif value >= need:
            rows.append(
                CheckResult(
                    check=Check.QUOTA,
                    subject=subject,
                    status=Status.WARN,
                    message=f"{have} vCPUs cover the models at their most replicas ({need}) but not "
                    f"the pools at their GPU limits ({need_limit}: {_describe(demands, at_limit=True)})",
                    fix=request.format(need_limit, need_limit),
                )
            )
        else:
            rows.append(
                CheckResult(
                    check=Check.QUOTA,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"{have} vCPUs, but the models at their most replicas need {need} "
                    f"({_describe(demands, at_limit=False)})",
                    fix=request.format(need_limit, need_limit),
                )
            )
    return rows
