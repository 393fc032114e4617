"""GPU placement for the estimate: the GPUs models hold on each pool and node group at base and at
peak, and the instances that carry them (the rules are in :mod:`gpufarm.estimate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpufarm.config.model import (
    CapacityType,
    ModelConfig,
    NodeGroupConfig,
    NodePoolConfig,
    Provisioning,
    TierConfig,
)
from gpufarm.core.instances import GPU_FAMILIES, gpus_in
from gpufarm.core.placement import placement_of
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
        return math.ceil(self.base_gpus / self.gpus_per_instance)

    @property
    def peak_instances(self) -> int:
        """Instances at peak."""
        if self.fixed_instances is not None:
            return self.fixed_instances
        return math.ceil(self.peak_gpus / self.gpus_per_instance)


def replicas(model: ModelConfig) -> tuple[int, int]:
    """(base, peak) replicas of a model: autoscaling min and max, else `replicas` (its shares' sum) twice."""
    if model.autoscaling is not None:
        return model.autoscaling.min_replicas, model.autoscaling.max_replicas
    return model.max_replicas, model.max_replicas


def gpus_per_replica(model: ModelConfig) -> int:
    """GPUs one replica holds: per node x nodes per replica."""
    return model.gpus * model.pipeline_parallel


def pool_capacity_type(pool: NodePoolConfig) -> str:
    """The capacity type a pool's GPUs count as: the first it allows in LAUNCH_PRIORITY."""
    return next(c.value for c in LAUNCH_PRIORITY if c in pool.capacity_types)


def pool_instance_types(pool: NodePoolConfig) -> list[str]:
    """Instance types a pool may launch: its `instance_types`, else every size of its families."""
    if pool.instance_types:
        return list(pool.instance_types)
    return [t for f in pool.instance_families if f in GPU_FAMILIES for t in GPU_FAMILIES[f].instance_types()]


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
    """Every node group, and every pool some model uses, with its GPUs at base and at peak."""
    prices = prices or load_prices()
    auto_mode = tier.cluster.provisioning is Provisioning.AUTO_MODE
    pools = {p.name: p for p in tier.node_pools}
    placed = tier.model_parts()
    node_gpus: dict[str, int] = {}
    for model in placed:
        for target in placement_of(tier, model):
            node_gpus[target.name] = max(node_gpus.get(target.name, 1), model.gpus)
            if model.prefill_decode is not None:
                prefill = model.prefill_decode.prefill_gpus_for(model.gpus)
                node_gpus[target.name] = max(node_gpus[target.name], prefill)
    out: dict[str, GpuAllocation] = {}
    for group in tier.node_groups:
        gpi = gpus_in(group.instance_type) or 0
        out[group.name] = GpuAllocation(
            target=group.name,
            kind="node group",
            instance_type=group.instance_type,
            gpus_per_instance=gpi,
            capacity_type=CapacityType.RESERVED.value,
            fixed_instances=group.nodes,
            root_volume_gib=group.disk_gib,
        )

    def allocation(name: str) -> GpuAllocation:
        if name not in out:
            pool = pools[name]
            itype = choose_instance_type(pool, node_gpus.get(name, 1), prices)
            out[name] = GpuAllocation(
                target=name,
                kind="pool",
                instance_type=itype,
                gpus_per_instance=gpus_in(itype) or 1,
                capacity_type=pool_capacity_type(pool),
                root_volume_gib=AUTO_MODE_ROOT_VOLUME_GIB if auto_mode else pool.root_volume_gib,
            )
        return out[name]

    room = {p.name: p.gpu_limit for p in tier.node_pools}
    held = {g.name: g.nodes * (gpus_in(g.instance_type) or 0) for g in tier.node_groups}
    for which in ("base", "peak"):
        free = dict(held) | dict(room)
        # Models bound to one pool or node group first; a class then spreads over what is left.
        for model in sorted(placed, key=lambda m: m.capacity_class is not None):
            # Prefill pods (prefill/decode models): their fixed count, or their autoscaling bounds.
            count = replicas(model)[0 if which == "base" else 1] * gpus_per_replica(model)
            count += model.prefill_gpus_at(peak=which == "peak")
            targets = placement_of(tier, model)
            ordered = [t for t in targets if isinstance(t, NodeGroupConfig)] + sorted(
                (t for t in targets if isinstance(t, NodePoolConfig)),
                key=lambda p: -p.nodepool_weight,
            )
            for i, target in enumerate(ordered):
                if count <= 0:
                    break
                # The last target takes what is left: an estimate never drops demand.
                take = count if i == len(ordered) - 1 else min(count, free[target.name])
                if take <= 0:
                    continue
                free[target.name] -= take
                count -= take
                alloc = out[target.name] if isinstance(target, NodeGroupConfig) else allocation(target.name)
                if which == "base":
                    alloc.base_gpus += take
                else:
                    alloc.peak_gpus += take
    ordered_names = [g.name for g in tier.node_groups] + [p.name for p in tier.node_pools]
    return [out[n] for n in ordered_names if n in out]


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
