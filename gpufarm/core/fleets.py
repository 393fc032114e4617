"""The GPU Auto Scaling groups of `cluster.provisioning: ec2`: one per node pool, one model each.

One answer for the config checks, the stack, the cost estimate and preflight:

- :func:`fleets`: each pool with the one model placed on it, as :class:`Fleet` values;
- :meth:`Fleet.instance_types`: the pool's instance types that carry exactly the model's GPUs
  (an instance runs one replica: `--gpus all`) and whose vCPUs and memory cover the model's
  `cpu` and `memory_gib` (types the catalog has no host figures for are kept), smallest first;
- :meth:`Fleet.min_instances` / :meth:`Fleet.max_instances`: the model's replicas, or its
  `autoscaling` bounds; :meth:`Fleet.on_demand_base`: the on-demand instances before spot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpufarm.core.instances import gpus_in, host_of
from gpufarm.core.placement import placement_of
from gpufarm.core.pools import pool_instance_types

if TYPE_CHECKING:
    # Annotations only: the validator imports this module (see core/placement.py).
    from gpufarm.config.model import ModelConfig, NodePoolConfig, TierConfig

SPOT = "spot"
ON_DEMAND = "on-demand"
RESERVED = "reserved"


@dataclass(frozen=True, kw_only=True)
class Fleet:
    """One GPU Auto Scaling group: a pool and the model it serves."""

    pool: NodePoolConfig
    model: ModelConfig
    on_demand_base_setting: int | None = None
    """`ec2.on_demand_base_instances` (None: the group's minimum size)."""

    @property
    def name(self) -> str:
        """The pool's name (the group's construct ID and name suffix)."""
        return self.pool.name

    def instance_types(self) -> list[str]:
        """Instance types the group may launch: the pool's, with exactly the model's GPUs, that fit it."""
        fitting = []
        for instance_type in pool_instance_types(self.pool):
            if gpus_in(instance_type) != self.model.gpus:
                continue
            host = host_of(instance_type)
            if host is not None and (host.vcpus < self.model.cpu or host.memory_gib < self.model.memory_gib):
                continue
            fitting.append(instance_type)
        return fitting

    @property
    def min_instances(self) -> int:
        """Instances at base: `autoscaling.min_replicas`, else `replicas`."""
        scaling = self.model.autoscaling
        return scaling.min_replicas if scaling is not None else self.model.replicas

    @property
    def max_instances(self) -> int:
        """Instances at peak: `autoscaling.max_replicas`, else `replicas`."""
        scaling = self.model.autoscaling
        return scaling.max_replicas if scaling is not None else self.model.replicas

    @property
    def spot(self) -> bool:
        """Whether the group may launch spot instances above its on-demand base."""
        return SPOT in {str(c) for c in self.pool.capacity_types}

    @property
    def reserved(self) -> bool:
        """Whether the group launches into the pool's capacity reservation."""
        return RESERVED in {str(c) for c in self.pool.capacity_types}

    @property
    def on_demand_base(self) -> int:
        """On-demand (or reserved) instances the group keeps before it adds spot ones."""
        if not self.spot:
            return self.max_instances
        if self.on_demand_base_setting is not None:
            return min(self.on_demand_base_setting, self.max_instances)
        return self.min_instances


def fleets(tier: TierConfig) -> list[Fleet]:
    """Every pool that a model is placed on, with that model, in pool order (the first model wins
    when the validator has not run: it refuses a pool with two)."""
    by_pool: dict[str, ModelConfig] = {}
    for model in tier.models:
        for target in placement_of(tier, model):
            by_pool.setdefault(target.name, model)
    base = tier.ec2.on_demand_base_instances
    return [
        Fleet(pool=pool, model=by_pool[pool.name], on_demand_base_setting=base)
        for pool in tier.node_pools
        if pool.name in by_pool
    ]


def models_by_pool(tier: TierConfig) -> dict[str, list[str]]:
    """Pool -> the models placed on it, for the check that allows one."""
    out: dict[str, list[str]] = {}
    for model in tier.models:
        for target in placement_of(tier, model):
            out.setdefault(target.name, []).append(model.name)
    return out
