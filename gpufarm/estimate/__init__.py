"""GPU capacity and monthly cost of a tier, from its config and a dated price table.

Pure: no AWS call, no CDK. The rules, in the order they are applied:

* **Replicas.** A model runs `autoscaling.min_replicas` replicas at *base* and
  `autoscaling.max_replicas` at *peak*; a model with fixed `replicas` runs that many at both.
  A replica holds `gpus x pipeline_parallel` GPUs. The *base* (floor) bill is what runs all month
  at the fewest replicas; the *peak* (ceiling) bill is every model at its most replicas all month,
  an upper bound; the *expected* bill has each autoscaled model at its most replicas for its
  `autoscaling.expected_busy_share` of the month. :attr:`CostEstimate.total_usd` is the floor,
  :attr:`CostEstimate.expected_total_usd` the expected and :attr:`CostEstimate.peak_total_usd` the
  ceiling; :meth:`CostEstimate.figures` sets each beside the same capacity all on-demand.
* **Placement.** A model runs on its `node_pool` (a pool or a reserved node group), or on its
  `capacity_class`, whose reserved node groups fill first and whose pools take the rest, the
  highest NodePool weight first, each up to its `gpu_limit`. A model split into `shares` is
  placed share by share: each with its own replicas and GPUs per replica, on its own pool or
  class (the load balancer weights split traffic, not GPUs, and cost nothing here).
* **Instances.** A pool's GPUs from every model placed on it are packed together:
  instances = ceil(GPUs / GPUs its pods can use per instance). The instance type is the one of
  the pool's types (its `instance_types`, else every size of its families) that holds the
  largest pod placed on it, its GPUs *and* its CPU and memory requests, within the node's
  allocatable (the instance less the kubelet's reserve, the DaemonSets and gpufarm's sidecars:
  :func:`pods_per_node`), at the lowest price per usable GPU (fewer GPUs on a tie), as Karpenter
  and Auto Mode choose for a pending pod. Where CPU or memory fills an instance before its GPUs
  do, only the GPUs its pods can use count. A reserved node group is always its `nodes`
  instances of its `instance_type`, used or not.
* **Capacity type.** Node groups are `reserved`. A pool's GPUs count as the first capacity type
  it allows in Karpenter's launch priority, reserved > spot > on-demand ("if a NodePool is
  compatible with multiple capacity types, Karpenter will prioritize reserved capacity,
  followed by spot, then finally on-demand"): a spot + on-demand batch pool counts as spot, the
  on-demand fallback while spot is short is not costed.
* **Prices.** on-demand: the table's on-demand price; spot: the measured spot price, else
  on-demand x (1 - the type's or family's observed discount in `ec2.spot_discounts`, else
  `ec2.spot_discount`); reserved: an On-Demand Capacity Reservation (node groups,
  reserved pools) at the on-demand rate, used or not, its spare instances on a line of their own;
  a Capacity Block at its own rate (`capacity_blocks`) for its duration. Savings Plans and
  Reserved Instances are commitments given to :func:`monthly_cost`, applied to the usage they
  cover (:mod:`.billing`).

Replicas, placement and GPUs per pool are :mod:`gpufarm.core.pools`, shared with preflight
and the validator; the estimate adds the instance type, capacity type and price. Figures that
rest on assumptions rather than on the configuration are the constants of
:mod:`gpufarm.estimate.cost` (load balancer capacity units, Prometheus series per target,
Bedrock token mix); each line built from one says so in its `note`.

The package is split by job: :mod:`.allocation` (GPUs and instances per pool and node group),
:mod:`.billing` (reservations and commitments as AWS bills them), :mod:`.cost` (the bill's lines),
:mod:`.usage` (the usage the usage-billed lines assume), :mod:`.resource_types` (which resource
types bill, and the line that prices each) and :mod:`.report` (the bill itself). Every public name is
importable from ``gpufarm.estimate`` itself.
"""

from __future__ import annotations

from gpufarm.core.pools import pool_instance_types
from gpufarm.estimate.allocation import (
    AUTO_MODE_ROOT_VOLUME_GIB,
    DAEMONSET_CPU,
    DAEMONSET_MEMORY_GIB,
    LAUNCH_PRIORITY,
    SIDECAR_CPU,
    SIDECAR_MEMORY_GIB,
    GpuAllocation,
    allocatable,
    choose_instance_type,
    gpu_allocations,
    gpu_capacity,
    instance_types_of,
    kube_reserved_cpu,
    pods_per_node,
    pool_capacity_type,
)
from gpufarm.estimate.billing import Commitment, CommitmentKind, parse_commitment
from gpufarm.estimate.cost import (
    AMP_BYTES_PER_SAMPLE,
    AMP_RETENTION_MONTHS,
    AUTO_MODE_CPU_NODES,
    BEDROCK_INPUT_TOKEN_SHARE,
    DCGM_SERIES_PER_GPU,
    GIB,
    KEDA_QUERY_WINDOW_SECONDS,
    LCUS_PER_HOUR,
    VLLM_SERIES_PER_REPLICA,
    monthly_cost,
)
from gpufarm.estimate.report import CostEstimate, CostLine, EstimateError
from gpufarm.estimate.resource_types import FREE_TYPES, PRICED_TYPES
from gpufarm.estimate.usage import Usage, load_usage

__all__ = [
    "AMP_BYTES_PER_SAMPLE",
    "AMP_RETENTION_MONTHS",
    "AUTO_MODE_CPU_NODES",
    "AUTO_MODE_ROOT_VOLUME_GIB",
    "BEDROCK_INPUT_TOKEN_SHARE",
    "DAEMONSET_CPU",
    "DAEMONSET_MEMORY_GIB",
    "DCGM_SERIES_PER_GPU",
    "FREE_TYPES",
    "GIB",
    "KEDA_QUERY_WINDOW_SECONDS",
    "LAUNCH_PRIORITY",
    "LCUS_PER_HOUR",
    "PRICED_TYPES",
    "SIDECAR_CPU",
    "SIDECAR_MEMORY_GIB",
    "VLLM_SERIES_PER_REPLICA",
    "Commitment",
    "CommitmentKind",
    "CostEstimate",
    "CostLine",
    "EstimateError",
    "GpuAllocation",
    "Usage",
    "allocatable",
    "choose_instance_type",
    "gpu_allocations",
    "gpu_capacity",
    "instance_types_of",
    "kube_reserved_cpu",
    "load_usage",
    "monthly_cost",
    "parse_commitment",
    "pods_per_node",
    "pool_capacity_type",
    "pool_instance_types",
]
