"""GPU placement for the estimate: the GPUs models hold on each pool and node group at base and at
peak, and the instances that carry them (the rules are in :mod:`gpufarm.estimate`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufarm.config.model import (
    CapacityType,
    NodeGroupConfig,
    NodePoolConfig,
    Provisioning,
    TierConfig,
)
from gpufarm.core.instances import gpus_in
from gpufarm.core.pools import instances_for, pool_instance_types, pool_loads
from gpufarm.pricing import CAPACITY_TYPES, PriceNotFoundError, PriceTable, load_prices

LAUNCH_PRIORITY = (CapacityType.RESERVED, CapacityType.SPOT, CapacityType.ON_DEMAND)
"""Karpenter's order among the capacity types a NodePool allows."""

AUTO_MODE_ROOT_VOLUME_GIB = 80
"""Ephemeral storage of an Auto Mode node (the default NodeClass's `ephemeralStorage.size`)."""

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

    @property
    def base_instances(self) -> int:
        """Instances at base."""
        if self.fixed_instances is not None:
            return self.fixed_instances
        return instances_for(self.base_gpus, self.gpus_per_instance)

    @property
    def peak_instances(self) -> int:
        """Instances at peak."""
        if self.fixed_instances is not None:
            return self.fixed_instances
        return instances_for(self.peak_gpus, self.gpus_per_instance)


def pool_capacity_type(pool: NodePoolConfig) -> str:
    """The capacity type a pool's GPUs count as: the first it allows in LAUNCH_PRIORITY."""
    return next(c.value for c in LAUNCH_PRIORITY if c in pool.capacity_types)


def choose_instance_type(pool: NodePoolConfig, node_gpus: int, prices: PriceTable) -> str:
    """The pool's type holding `node_gpus` GPUs at the lowest price per GPU (fewer GPUs on a tie).

    Types without a price in the table are skipped; PriceNotFoundError when none is priced.
    """
    fitting = [t for t in pool_instance_types(pool) if (gpus_in(t) or 0) >= node_gpus]
    priced = [t for t in fitting if t in prices.ec2.on_demand_per_hour]
    if not priced:
        wanted = fitting[0] if fitting else f"{pool.name} (no type holds {node_gpus} GPUs)"
        raise PriceNotFoundError(
            "EC2 on-demand",
            wanted,
            f"pool {pool.name!r} may launch {', '.join(fitting) or 'none of its types'}; add one "
            "under ec2.on_demand_per_hour in a --prices file",
        )
    return min(priced, key=lambda t: (prices.on_demand(t) / (gpus_in(t) or 1), gpus_in(t) or 0))


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
                    root_volume_gib=target.disk_gib,
                )
            )
            continue
        if not load.base_gpus and not load.peak_gpus:
            continue  # named by a capacity class whose other targets hold all its GPUs
        itype = choose_instance_type(target, load.pod_gpus, prices)
        out.append(
            GpuAllocation(
                target=target.name,
                kind="pool",
                instance_type=itype,
                gpus_per_instance=gpus_in(itype) or 1,
                capacity_type=pool_capacity_type(target),
                base_gpus=load.base_gpus,
                peak_gpus=load.peak_gpus,
                root_volume_gib=AUTO_MODE_ROOT_VOLUME_GIB if auto_mode else target.root_volume_gib,
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
