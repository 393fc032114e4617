"""Pools: which instance types each pool may launch, and the GPUs each pool and node group holds.

One answer for the validator, the cost estimate and preflight:

- :func:`pool_instance_types`: the instance types a Karpenter pool may launch (its
  `instance_types`, else every catalog size of its `instance_families`), and
  :func:`gpu_instance_types`, every type the tier's pools and node groups may launch;
- :func:`pod_sets`: the pods a tier runs, as :class:`PodSet` values: one per model or share, one
  more for the prefill pods of a prefill/decode model (their own GPUs and replicas), a multi-node
  replica counted as `pipeline_parallel` pods of `gpus` each;
- :func:`pool_loads`: the GPUs those pods hold on each node group and pool at base and at peak,
  as :class:`PoolLoad` values, and :meth:`PoolLoad.instances`, the instances that carry them.

The rules, in the order they apply:

* **Replicas.** A model runs `autoscaling.min_replicas` replicas at *base* and
  `autoscaling.max_replicas` at *peak*; a model with fixed `replicas` runs that many at both.
  Prefill pods run their `prefill_autoscaling` bounds, else `prefill_replicas` at both.
* **Placement.** Pods go to the targets :func:`gpufarm.core.placement.placement_of` names: the
  reserved node groups first, then the pools, the highest NodePool weight first, each up to its
  free GPUs (a node group's nodes x GPUs, a pool's `gpu_limit`); the last target takes what is
  left, so demand is never dropped. Pods bound to one pool or node group are placed before those
  of a capacity class, which spread over what is left.
* **On-premises first.** Pods of the hybrid nodes' class (`hybrid_nodes.capacity_class`) take
  the on-premises GPUs (`hybrid_nodes.gpus`) before any cloud target of the class; AWS bills no
  instance for them (the hybrid nodes fee is per vCPU, :mod:`gpufarm.estimate`).
* **Instances.** A pool's GPUs are packed onto instances of one size:
  ceil(GPUs / GPUs per instance). A node group always runs its `nodes`.

Which instance type a pool's pods get is the consumer's choice: the estimate takes the cheapest
per GPU, preflight the smallest one the pod fits by EC2's own figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from gpufarm.core.hybrid import runs_on_prem
from gpufarm.core.instances import GPU_FAMILIES, gpus_in
from gpufarm.core.placement import placement_of

if TYPE_CHECKING:
    # Annotations only: gpufarm.config.validate imports this module (see core/placement.py).
    from gpufarm.config.model import ModelConfig, NodeGroupConfig, NodePoolConfig, TierConfig


def pool_instance_types(pool: NodePoolConfig) -> list[str]:
    """Instance types a pool may launch: its `instance_types`, else every catalog size of its
    families (smallest first; a family outside the catalog adds none)."""
    if pool.instance_types:
        return list(pool.instance_types)
    return [t for f in pool.instance_families if f in GPU_FAMILIES for t in GPU_FAMILIES[f].instance_types()]


def gpu_instance_types(tier: TierConfig) -> list[str]:
    """Every instance type the tier's node groups and pools may launch, sorted."""
    types = {g.instance_type for g in tier.node_groups}
    for pool in tier.node_pools:
        types.update(pool_instance_types(pool))
    return sorted(types)


class Role(StrEnum):
    """Which pods of a model a :class:`PodSet` is."""

    SERVE = "serve"
    """The model's (or share's) own pods: for a prefill/decode model, its decode pods."""
    PREFILL = "prefill"
    """The prefill pods of a prefill/decode model."""


@dataclass(frozen=True, kw_only=True)
class PodSet:
    """Pods of one model, share or prefill/decode role, with where they may land."""

    model: ModelConfig
    """The model or share they serve (its CPU and memory requests, its placement)."""
    role: Role
    gpus: int
    """GPUs of one pod."""
    pods_per_replica: int
    """Pods (and nodes) of one replica: `pipeline_parallel` for a multi-node model, else 1."""
    base_replicas: int
    peak_replicas: int
    targets: tuple[NodeGroupConfig | NodePoolConfig, ...]
    """Where the pods may land, in the order they fill: node groups, then pools by weight."""

    @property
    def cpu(self) -> float:
        """vCPUs one pod requests."""
        return self.model.cpu

    @property
    def memory_gib(self) -> int:
        """Memory (GiB) one pod requests."""
        return self.model.memory_gib

    def gpus_at(self, *, peak: bool) -> int:
        """GPUs the pods hold at their fewest replicas (base) or their most (`peak`)."""
        replicas = self.peak_replicas if peak else self.base_replicas
        return replicas * self.pods_per_replica * self.gpus


def replica_bounds(model: ModelConfig) -> tuple[int, int]:
    """(base, peak) replicas of a model: autoscaling min and max, else `replicas` (its shares' sum) twice."""
    if model.autoscaling is not None:
        return model.autoscaling.min_replicas, model.autoscaling.max_replicas
    return model.max_replicas, model.max_replicas


def fill_order(
    targets: list[NodePoolConfig | NodeGroupConfig],
) -> tuple[NodeGroupConfig | NodePoolConfig, ...]:
    """Targets in the order pods fill them: node groups as placed, then pools by weight (highest first)."""
    # Imported here: the config model imports nothing of the core, but loading it at import time
    # would start gpufarm.config (and so the validator) before this module is defined.
    from gpufarm.config.model import NodeGroupConfig, NodePoolConfig

    groups = [t for t in targets if isinstance(t, NodeGroupConfig)]
    pools = sorted((t for t in targets if isinstance(t, NodePoolConfig)), key=lambda p: -p.nodepool_weight)
    return (*groups, *pools)


def pods_of(model: ModelConfig, targets: tuple[NodeGroupConfig | NodePoolConfig, ...] = ()) -> list[PodSet]:
    """The pods of one model (or share): its own, then its prefill pods if it has any.

    `targets` is where they may land (default: nowhere, for a count of GPUs alone).
    """
    base, peak = replica_bounds(model)
    out = [
        PodSet(
            model=model,
            role=Role.SERVE,
            gpus=model.gpus,
            pods_per_replica=model.pipeline_parallel,
            base_replicas=base,
            peak_replicas=peak,
            targets=targets,
        )
    ]
    pd = model.prefill_decode
    if pd is not None:
        # Prefill pods run where their model runs; a prefill/decode model is never multi-node.
        fewest, most = pd.prefill_replica_bounds
        out.append(
            PodSet(
                model=model,
                role=Role.PREFILL,
                gpus=pd.prefill_gpus_for(model.gpus),
                pods_per_replica=1,
                base_replicas=fewest,
                peak_replicas=most,
                targets=targets,
            )
        )
    return out


def pod_sets(tier: TierConfig) -> list[PodSet]:
    """The pods the tier runs: per model (each share apart), then its prefill pods if it has any."""
    return [
        pods for model in tier.model_parts() for pods in pods_of(model, fill_order(placement_of(tier, model)))
    ]


@dataclass(frozen=True, kw_only=True)
class Instances:
    """Instances at base and at peak."""

    base: int
    peak: int


def instances_for(gpus: int, gpus_per_instance: int) -> int:
    """Instances of `gpus_per_instance` GPUs that carry `gpus` GPUs: ceil(gpus / per instance)."""
    return math.ceil(gpus / gpus_per_instance)


@dataclass(frozen=True, kw_only=True)
class Placed:
    """The GPUs one set of pods holds on one node group or pool."""

    pods: PodSet
    base_gpus: int
    peak_gpus: int


@dataclass(frozen=True, kw_only=True)
class PoolLoad:
    """The GPUs pods hold on one node group or pool at base and at peak."""

    target: NodeGroupConfig | NodePoolConfig
    nodes: int | None
    """A node group's `nodes` (it always runs them all); None for a pool."""
    placed: tuple[Placed, ...]
    """Every set of pods whose placement names the target, in the order they were placed (with 0
    GPUs where the targets before it held them all)."""

    @property
    def name(self) -> str:
        """The node group's or pool's name."""
        return self.target.name

    @property
    def is_node_group(self) -> bool:
        """True for a reserved node group, False for a Karpenter pool."""
        return self.nodes is not None

    @property
    def base_gpus(self) -> int:
        """GPUs held at base."""
        return sum(p.base_gpus for p in self.placed)

    @property
    def peak_gpus(self) -> int:
        """GPUs held at peak."""
        return sum(p.peak_gpus for p in self.placed)

    @property
    def pod_gpus(self) -> int:
        """GPUs the largest pod placed here asks of one node (1 when none is placed)."""
        return max((p.pods.gpus for p in self.placed), default=1)

    def instances(self, gpus_per_instance: int) -> Instances:
        """Instances carrying the GPUs at base and at peak; a node group: always its `nodes`."""
        if self.nodes is not None:
            return Instances(base=self.nodes, peak=self.nodes)
        return Instances(
            base=instances_for(self.base_gpus, gpus_per_instance),
            peak=instances_for(self.peak_gpus, gpus_per_instance),
        )


def pool_loads(tier: TierConfig) -> list[PoolLoad]:
    """Every node group and pool with the GPUs its pods hold at base and at peak (module rules).

    Node groups come first, then pools, each in config order; a pool no pods name is left out.
    """
    sets = sorted(pod_sets(tier), key=lambda s: s.model.capacity_class is not None)
    taken: dict[str, dict[int, list[int]]] = {}
    for peak in (False, True):
        left = {g.name: g.nodes * (gpus_in(g.instance_type) or 0) for g in tier.node_groups}
        left |= {p.name: p.gpu_limit for p in tier.node_pools}
        on_prem_left = tier.hybrid_nodes.gpu_count
        for index, pods in enumerate(sets):
            count = pods.gpus_at(peak=peak)
            if runs_on_prem(tier, pods.model):
                # The hybrid nodes fill first; only what they cannot hold reaches the cloud targets
                # of the class (none: the pods wait for on-premises room).
                on_prem = min(count, on_prem_left)
                on_prem_left -= on_prem
                count -= on_prem
            for i, target in enumerate(pods.targets):
                row = taken.setdefault(target.name, {}).setdefault(index, [0, 0])
                # The last target takes what is left: demand is never dropped.
                take = count if i == len(pods.targets) - 1 else min(count, left[target.name])
                take = max(take, 0)
                left[target.name] -= take
                count -= take
                row[int(peak)] += take

    def placed(name: str) -> tuple[Placed, ...]:
        rows = sorted(taken.get(name, {}).items())
        return tuple(Placed(pods=sets[index], base_gpus=base, peak_gpus=peak) for index, (base, peak) in rows)

    groups = [PoolLoad(target=g, nodes=g.nodes, placed=placed(g.name)) for g in tier.node_groups]
    pools = [
        PoolLoad(target=p, nodes=None, placed=placed(p.name)) for p in tier.node_pools if p.name in taken
    ]
    return groups + pools
