"""GPU capacity and monthly cost of a tier, from its config and a dated price table.

Pure: no AWS call, no CDK. The rules, in the order they are applied:

* **Replicas.** A model runs `autoscaling.min_replicas` replicas at *base* and
  `autoscaling.max_replicas` at *peak*; a model with fixed `replicas` runs that many at both.
  A replica holds `gpus x pipeline_parallel` GPUs. The *base* bill is what runs all month at the
  fewest replicas; the *peak* bill is every model at its most replicas all month, an upper bound.
  :attr:`CostEstimate.total_usd` is the base bill, :attr:`CostEstimate.peak_total_usd` the peak.
* **Placement.** A model runs on its `node_pool` (a pool or a reserved node group), or on its
  `capacity_class`, whose reserved node groups fill first and whose pools take the rest, the
  highest NodePool weight first, each up to its `gpu_limit`. A model split into `shares` is
  placed share by share: each with its own replicas and GPUs per replica, on its own pool or
  class (the load balancer weights split traffic, not GPUs, and cost nothing here).
* **Instances.** A pool's GPUs from every model placed on it are packed together:
  instances = ceil(GPUs / GPUs per instance). The instance type is the one of the pool's types
  (its `instance_types`, else every size of its families) that holds the largest replica's
  per-node GPUs at the lowest price per GPU (fewer GPUs on a tie). A reserved node group is
  always its `nodes` instances of its `instance_type`, used or not.
* **Capacity type.** Node groups are `reserved`. A pool's GPUs count as the first capacity type
  it allows in Karpenter's launch priority, reserved > spot > on-demand ("if a NodePool is
  compatible with multiple capacity types, Karpenter will prioritize reserved capacity,
  followed by spot, then finally on-demand"): a spot + on-demand batch pool counts as spot, the
  on-demand fallback while spot is short is not costed.
* **Prices.** on-demand: the table's on-demand price; spot: the measured spot price, else
  on-demand x (1 - `ec2.spot_discount`); reserved (ODCRs, Capacity Blocks, reserved pools):
  on-demand x (1 - `reserved_discount`), the rate a Reserved Instance or Savings Plan brings.

Figures that rest on assumptions rather than on the configuration are the module constants
below (load balancer capacity units, Prometheus series per target, Bedrock token mix); each
line built from one says so in its `note`.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

from gpufarm.config.fsx_capacity import fsx_storage_capacity_gib
from gpufarm.config.model import (
    CapacityType,
    LoadBalancerKind,
    ModelConfig,
    ModelStoreKind,
    NodeGroupConfig,
    NodePoolConfig,
    Provisioning,
    TierConfig,
)
from gpufarm.core.instances import GPU_FAMILIES, gpus_in
from gpufarm.core.placement import placement_of
from gpufarm.eks_support import Phase, support_status
from gpufarm.pricing import CAPACITY_TYPES, PriceNotFoundError, PriceTable, load_prices

LAUNCH_PRIORITY = (CapacityType.RESERVED, CapacityType.SPOT, CapacityType.ON_DEMAND)
"""Karpenter's order among the capacity types a NodePool allows."""

LCUS_PER_HOUR = 1.0
"""Capacity units an ALB, NLB or GWLB is assumed to use each hour when none are reserved.

Inference traffic is few, long, streamed requests: one LCU covers 25 new connections/s,
3,000 active connections or 1 GB/h processed, more than a tier's token streams usually reach.
"""

AUTO_MODE_CPU_NODES = 2
"""CPU nodes assumed in Auto Mode's built-in pools (controllers and gateway pods, spread over two)."""

AUTO_MODE_ROOT_VOLUME_GIB = 80
"""Ephemeral storage of an Auto Mode node (the default NodeClass's `ephemeralStorage.size`)."""

VLLM_SERIES_PER_REPLICA = 600
"""Prometheus series one vLLM replica exposes (counters, gauges and latency histograms)."""

DCGM_SERIES_PER_GPU = 40
"""Prometheus series the DCGM exporter exposes per GPU with its default counters."""

AMP_BYTES_PER_SAMPLE = 2.0
"""Stored bytes per sample ("typically 1 or 2 bytes", AMP pricing; metadata not counted)."""

AMP_RETENTION_MONTHS = 150 / (365 / 12)
"""AMP keeps samples 150 days: at steady state the workspace holds this many months of them."""

KEDA_QUERY_WINDOW_SECONDS = 120
"""Range each KEDA query reads per replica series (a rate over the last two minutes)."""

BEDROCK_INPUT_TOKEN_SHARE = 0.75
"""Share of fallback tokens that are input (prompt) tokens: a 3:1 input:output mix."""

GIB = 2**30

_CATEGORY_ORDER = ("cluster", "gpu", "compute", "storage", "network", "security", "observability", "fallback")


class EstimateError(ValueError):
    """The arguments to :func:`monthly_cost` are out of range."""


@dataclass(frozen=True, kw_only=True)
class CostLine:
    """One billed item: `monthly_usd = quantity x unit_price` at base, likewise at peak."""

    item: str
    capacity_type: str | None
    quantity: float
    unit: str
    unit_price: float
    monthly_usd: float
    peak_quantity: float
    peak_monthly_usd: float
    category: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        """The line as a JSON-ready mapping."""
        return {
            "item": self.item,
            "capacity_type": self.capacity_type,
            "category": self.category,
            "quantity": self.quantity,
            "unit": self.unit,
            "unit_price": self.unit_price,
            "monthly_usd": round(self.monthly_usd, 2),
            "peak_quantity": self.peak_quantity,
            "peak_monthly_usd": round(self.peak_monthly_usd, 2),
            "note": self.note,
        }


@dataclass(frozen=True, kw_only=True)
class CostEstimate:
    """A tier's monthly bill, line by line, at base and at peak (see the module docstring)."""

    tier: str
    region: str
    price_region: str
    prices_as_of: str
    price_sources: dict[str, str]
    reserved_discount: float
    fallback_share: float
    tokens_per_month: float | None
    lines: list[CostLine]
    notes: list[str] = field(default_factory=list)

    @property
    def total_usd(self) -> float:
        """The base monthly bill, USD."""
        return sum(line.monthly_usd for line in self.lines)

    @property
    def peak_total_usd(self) -> float:
        """The monthly bill with every model at its most replicas all month, USD."""
        return sum(line.peak_monthly_usd for line in self.lines)

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Base bill per million tokens served in a month (None without a token volume)."""
        if not self.tokens_per_month:
            return None
        return self.total_usd / (self.tokens_per_month / 1e6)

    @property
    def peak_usd_per_million_tokens(self) -> float | None:
        """Peak bill per million tokens served in a month (None without a token volume)."""
        if not self.tokens_per_month:
            return None
        return self.peak_total_usd / (self.tokens_per_month / 1e6)

    def by_capacity_type(self, *, peak: bool = False) -> dict[str, float]:
        """GPU and CPU instance cost by capacity type (every key of CAPACITY_TYPES present)."""
        out = dict.fromkeys(CAPACITY_TYPES, 0.0)
        for line in self.lines:
            if line.capacity_type in out:
                out[line.capacity_type] += line.peak_monthly_usd if peak else line.monthly_usd
        return out

    def by_category(self, *, peak: bool = False) -> dict[str, float]:
        """Cost by category (cluster, gpu, compute, storage, network, security, ...)."""
        out: dict[str, float] = {}
        for line in self.lines:
            out[line.category] = out.get(line.category, 0.0) + (
                line.peak_monthly_usd if peak else line.monthly_usd
            )
        return out

    def to_json(self) -> dict[str, Any]:
        """The estimate as a JSON-ready mapping (the `gpufarm cost --json` document of one tier)."""

        def money(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "tier": self.tier,
            "region": self.region,
            "prices": {
                "region": self.price_region,
                "as_of": self.prices_as_of,
                "sources": self.price_sources,
            },
            "reserved_discount": self.reserved_discount,
            "fallback_share": self.fallback_share,
            "tokens_per_month": self.tokens_per_month,
            "lines": [line.to_json() for line in self.lines],
            "total_usd": round(self.total_usd, 2),
            "peak_total_usd": round(self.peak_total_usd, 2),
            "usd_per_million_tokens": money(self.usd_per_million_tokens),
            "peak_usd_per_million_tokens": money(self.peak_usd_per_million_tokens),
            "by_capacity_type": {k: round(v, 2) for k, v in self.by_capacity_type().items()},
            "peak_by_capacity_type": {k: round(v, 2) for k, v in self.by_capacity_type(peak=True).items()},
            "notes": list(self.notes),
        }


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


# --------------------------------------------------------------------------- cost


class _Lines:
    """Collects lines; every quantity is per month, `unit_price` per unit per month."""

    def __init__(self) -> None:
        self.lines: list[CostLine] = []

    def add(
        self,
        *,
        item: str,
        category: str,
        quantity: float,
        unit: str,
        unit_price: float,
        peak_quantity: float | None = None,
        capacity_type: str | None = None,
        note: str = "",
    ) -> None:
        peak = quantity if peak_quantity is None else peak_quantity
        self.lines.append(
            CostLine(
                item=item,
                capacity_type=capacity_type,
                quantity=quantity,
                unit=unit,
                unit_price=unit_price,
                monthly_usd=quantity * unit_price,
                peak_quantity=peak,
                peak_monthly_usd=peak * unit_price,
                category=category,
                note=note,
            )
        )


def _check_share(name: str, value: float, *, below_one: bool) -> None:
    upper = value >= 1 if below_one else value > 1
    if value < 0 or upper or math.isnan(value):
        bound = "to below 1" if below_one else "to 1"
        raise EstimateError(f"{name} must be a share from 0 {bound}, got {value:g}")


def _control_plane(
    tier: TierConfig, prices: PriceTable, out: _Lines, notes: list[str], day: dt.date | None
) -> None:
    """The EKS control-plane line, at the extended-support rate when the version is in it on `day`."""
    version = tier.cluster.kubernetes_version
    status = support_status(version, day) if day is not None else None
    rate, note = prices.eks.cluster_per_hour, ""
    if status is not None and status.phase in (Phase.EXTENDED, Phase.ENDED):
        rate = prices.eks.extended_support_cluster_per_hour
        note = (
            f"Kubernetes {version} in extended support since {status.standard_support_end}: "
            f"${rate:.2f} instead of ${prices.eks.cluster_per_hour:.2f} per cluster-hour"
        )
    elif status is not None and status.phase is Phase.ENDING:
        note = (
            f"Kubernetes {version} leaves standard support on {status.standard_support_end}: then "
            f"${prices.eks.extended_support_cluster_per_hour:.2f} per cluster-hour"
        )
    if status is not None and (warning := status.warning()):
        notes.append(warning)
    out.add(
        item="EKS control plane",
        category="cluster",
        quantity=1,
        unit="cluster-month",
        unit_price=rate * prices.hours_per_month,
        note=note,
    )


def monthly_cost(
    tier: TierConfig,
    *,
    prices: PriceTable | None = None,
    reserved_discount: float = 0.0,
    fallback_share: float = 0.0,
    tokens_per_month: float | None = None,
    nat_gb_per_month: float = 0.0,
    day: dt.date | None = None,
) -> CostEstimate:
    """The tier's monthly bill from `prices` (default: the shipped table), line by line.

    `reserved_discount` (0 to below 1, default 0) lowers reserved capacity (node groups, pools
    with the reserved capacity type) to what a Reserved Instance or Savings Plan charges.
    `fallback_share` (0 to 1, default 0) of `tokens_per_month` is answered by each model's
    Bedrock fallback; tokens are spread over the models by their peak GPUs, and a model without
    a Bedrock target pays nothing for its share. `tokens_per_month` (default: none) also gives
    the cost per million tokens; a fallback share above 0 needs it. `nat_gb_per_month` (default 0)
    is traffic through the NAT gateways. `day` (default: none) prices the control plane by the
    EKS support calendar on that date: a Kubernetes version in extended support bills at
    `eks.extended_support_cluster_per_hour`, and one within 60 days of it gets a note; with no
    `day`, the standard-support rate. Raises EstimateError for arguments out of range and
    PriceNotFoundError when the table lacks a price the tier needs.
    """
    _check_share("reserved_discount", reserved_discount, below_one=True)
    _check_share("fallback_share", fallback_share, below_one=False)
    if tokens_per_month is not None and not tokens_per_month > 0:
        raise EstimateError(f"tokens_per_month must be a number of tokens above 0, got {tokens_per_month:g}")
    if fallback_share > 0 and tokens_per_month is None and tier.fallback.enabled:
        raise EstimateError(
            f"fallback_share {fallback_share:g} needs tokens_per_month "
            "(the tokens the tier serves in a month)"
        )
    if nat_gb_per_month < 0:
        raise EstimateError(f"nat_gb_per_month must be at least 0, got {nat_gb_per_month:g}")
    prices = prices or load_prices()
    hours = prices.hours_per_month
    auto_mode = tier.cluster.provisioning is Provisioning.AUTO_MODE
    out = _Lines()
    notes: list[str] = []
    if prices.region != tier.environment.region:
        notes.append(
            f"Prices are for {prices.region}; the tier deploys to {tier.environment.region} "
            "(use --live --region to price it there)."
        )

    _control_plane(tier, prices, out, notes, day)

    allocations = gpu_allocations(tier, prices)
    ebs_base = 0.0
    ebs_peak = 0.0
    for alloc in allocations:
        rate = prices.instance_hourly(
            alloc.instance_type, alloc.capacity_type, reserved_discount=reserved_discount
        )
        item = f"GPU {alloc.kind} {alloc.target}: {alloc.instance_type}"
        note = ""
        if alloc.kind == "node group":
            note = "reserved capacity is billed whether or not models use it"
        out.add(
            item=item,
            category="gpu",
            capacity_type=alloc.capacity_type,
            quantity=alloc.base_instances,
            peak_quantity=alloc.peak_instances,
            unit="instance-month",
            unit_price=rate * hours,
            note=note,
        )
        if auto_mode:
            out.add(
                item=f"EKS Auto Mode fee: {alloc.target} ({alloc.instance_type})",
                category="cluster",
                capacity_type=None,
                quantity=alloc.base_instances,
                peak_quantity=alloc.peak_instances,
                unit="instance-month",
                unit_price=prices.on_demand(alloc.instance_type) * prices.eks.auto_mode_fee_share * hours,
                note="estimate: eks.auto_mode_fee_share of the on-demand price",
            )
        ebs_base += alloc.base_instances * alloc.root_volume_gib
        ebs_peak += alloc.peak_instances * alloc.root_volume_gib

    system = tier.cluster.system_nodes
    system_type = system.instance_types[0]
    if auto_mode:
        base_nodes = peak_nodes = AUTO_MODE_CPU_NODES
        system_note = f"estimate: {AUTO_MODE_CPU_NODES} nodes in Auto Mode's built-in CPU pools"
        disk = AUTO_MODE_ROOT_VOLUME_GIB
    else:
        base_nodes, peak_nodes = system.desired_size, system.max_size
        system_note = ""
        disk = system.disk_gib
    out.add(
        item=f"System nodes: {system_type}",
        category="compute",
        capacity_type=CapacityType.ON_DEMAND.value,
        quantity=base_nodes,
        peak_quantity=peak_nodes,
        unit="instance-month",
        unit_price=prices.on_demand(system_type) * hours,
        note=system_note,
    )
    if auto_mode:
        out.add(
            item=f"EKS Auto Mode fee: system nodes ({system_type})",
            category="cluster",
            quantity=base_nodes,
            unit="instance-month",
            unit_price=prices.on_demand(system_type) * prices.eks.auto_mode_fee_share * hours,
            note="estimate: eks.auto_mode_fee_share of the on-demand price",
        )
    ebs_base += base_nodes * disk
    ebs_peak += peak_nodes * disk
    out.add(
        item="EBS gp3 node volumes",
        category="storage",
        quantity=ebs_base,
        peak_quantity=ebs_peak,
        unit="GB-month",
        unit_price=prices.ebs.gp3_per_gb_month,
        note="IOPS and throughput above the gp3 baseline not included",
    )

    _network(tier, prices, out, nat_gb_per_month)
    _ingress(tier, prices, out)
    if tier.model_store.kind is ModelStoreKind.FSX_LUSTRE:
        fsx = tier.model_store.fsx
        out.add(
            item=f"FSx for Lustre PERSISTENT_2 ({fsx.throughput_per_tib} MB/s/TiB)",
            category="storage",
            quantity=fsx_storage_capacity_gib(tier),
            unit="GB-month",
            unit_price=prices.fsx_per_gb_month(fsx.throughput_per_tib),
        )
    if tier.observability.prometheus.enabled:
        _prometheus(tier, prices, out, allocations)
    if tier.fallback.enabled and fallback_share > 0 and tokens_per_month:
        _bedrock(tier, prices, out, fallback_share, tokens_per_month, notes)

    notes.append(
        "Not included: data transfer, CloudWatch (logs, metrics, alarms, dashboard), S3, KMS, "
        "WAF requests, Secrets Manager."
    )
    lines = sorted(out.lines, key=lambda line: _CATEGORY_ORDER.index(line.category))
    return CostEstimate(
        tier=tier.name,
        region=tier.environment.region,
        price_region=prices.region,
        prices_as_of=prices.as_of.isoformat(),
        price_sources={
            name: getattr(prices, name).source
            for name in ("ec2", "eks", "ebs", "vpc", "elb", "fsx_lustre", "amp", "waf", "bedrock")
        },
        reserved_discount=reserved_discount,
        fallback_share=fallback_share,
        tokens_per_month=tokens_per_month,
        lines=lines,
        notes=notes,
    )


def _interface_endpoints(tier: TierConfig) -> int:
    endpoints = {e.value for e in tier.network.interface_endpoints}
    if tier.fallback.enabled:
        endpoints.add("bedrock-runtime")  # the gateway reaches Bedrock through the VPC
    return len(endpoints)


def _network(tier: TierConfig, prices: PriceTable, out: _Lines, nat_gb_per_month: float) -> None:
    hours = prices.hours_per_month
    zones = len(tier.environment.availability_zones)
    if tier.network.nat_gateways:
        out.add(
            item="NAT gateways",
            category="network",
            quantity=tier.network.nat_gateways,
            unit="gateway-month",
            unit_price=prices.vpc.nat_gateway_per_hour * hours,
        )
        if nat_gb_per_month:
            out.add(
                item="NAT gateway data processed",
                category="network",
                quantity=nat_gb_per_month,
                unit="GB",
                unit_price=prices.vpc.nat_gateway_per_gb,
            )
    endpoints = _interface_endpoints(tier)
    if endpoints:
        out.add(
            item=f"VPC interface endpoints ({endpoints} services x {zones} AZs)",
            category="network",
            quantity=endpoints * zones,
            unit="endpoint-AZ-month",
            unit_price=prices.vpc.interface_endpoint_per_az_hour * hours,
        )


def _ingress(tier: TierConfig, prices: PriceTable, out: _Lines) -> None:
    hours = prices.hours_per_month
    ing = tier.ingress
    zones = len(tier.environment.availability_zones)
    lcu_note = f"estimate: {LCUS_PER_HOUR:g} capacity unit(s) per hour"
    nlb = ing.kind is LoadBalancerKind.NLB
    name, short = ("Network", "NLB") if nlb else ("Application", "ALB")
    per_hour = prices.elb.nlb_per_hour if nlb else prices.elb.alb_per_hour
    per_lcu_hour = prices.elb.nlb_per_lcu_hour if nlb else prices.elb.alb_per_lcu_hour
    out.add(
        item=f"{name} Load Balancer",
        category="network",
        quantity=1,
        unit="LB-month",
        unit_price=per_hour * hours,
    )
    lcus, note = (
        (ing.lcu_reservation, "reserved capacity units") if ing.lcu_reservation else (LCUS_PER_HOUR, lcu_note)
    )
    out.add(
        item=f"{short} capacity units",
        category="network",
        quantity=lcus,
        unit="NLCU-month" if nlb else "LCU-month",
        unit_price=per_lcu_hour * hours,
        note=note,
    )
    if ing.kind is not LoadBalancerKind.NLB:  # WAF and the NLB in front for PrivateLink: ALB only
        if ing.private_link.enabled:
            # An endpoint service needs an NLB: gpufarm puts one in front of the ALB.
            out.add(
                item="PrivateLink Network Load Balancer",
                category="network",
                quantity=1,
                unit="LB-month",
                unit_price=prices.elb.nlb_per_hour * hours,
            )
            out.add(
                item="PrivateLink NLB capacity units",
                category="network",
                quantity=LCUS_PER_HOUR,
                unit="NLCU-month",
                unit_price=prices.elb.nlb_per_lcu_hour * hours,
                note=lcu_note,
            )
        if ing.waf.enabled:
            rules = 1 + int(ing.waf.common_rule_set) + int(ing.waf.known_bad_inputs)
            out.add(
                item="AWS WAF web ACL",
                category="security",
                quantity=1,
                unit="ACL-month",
                unit_price=prices.waf.web_acl_per_month,
            )
            out.add(
                item="AWS WAF rules",
                category="security",
                quantity=rules,
                unit="rule-month",
                unit_price=prices.waf.rule_per_month,
            )
    if ing.inspection.enabled:
        appliances = ing.inspection.appliances
        out.add(
            item="Gateway Load Balancer (inspection)",
            category="security",
            quantity=1,
            unit="LB-month",
            unit_price=prices.elb.gwlb_per_hour * hours,
        )
        out.add(
            item="GWLB capacity units",
            category="security",
            quantity=LCUS_PER_HOUR,
            unit="GLCU-month",
            unit_price=prices.elb.gwlb_per_lcu_hour * hours,
            note=lcu_note,
        )
        out.add(
            item=f"GWLB endpoints ({zones} AZs)",
            category="security",
            quantity=zones,
            unit="endpoint-month",
            unit_price=prices.vpc.gwlb_endpoint_per_az_hour * hours,
        )
        out.add(
            item=f"Inspection appliances: {appliances.instance_type}",
            category="security",
            capacity_type=CapacityType.ON_DEMAND.value,
            quantity=appliances.min_size,
            peak_quantity=appliances.max_size,
            unit="instance-month",
            unit_price=prices.on_demand(appliances.instance_type) * hours,
        )
        # The appliances' subnets reach Systems Manager through three endpoints per AZ.
        out.add(
            item=f"Inspection VPC interface endpoints (3 services x {zones} AZs)",
            category="security",
            quantity=3 * zones,
            unit="endpoint-AZ-month",
            unit_price=prices.vpc.interface_endpoint_per_az_hour * hours,
        )


def _prometheus(tier: TierConfig, prices: PriceTable, out: _Lines, allocations: list[GpuAllocation]) -> None:
    prom = tier.observability.prometheus
    seconds = prices.hours_per_month * 3600
    base_replicas = sum(replicas(m)[0] for m in tier.model_parts())
    peak_replicas = sum(replicas(m)[1] for m in tier.model_parts())
    series_base = VLLM_SERIES_PER_REPLICA * base_replicas
    series_peak = VLLM_SERIES_PER_REPLICA * peak_replicas
    if prom.dcgm_exporter:
        series_base += DCGM_SERIES_PER_GPU * sum(a.base_instances * a.gpus_per_instance for a in allocations)
        series_peak += DCGM_SERIES_PER_GPU * sum(a.peak_instances * a.gpus_per_instance for a in allocations)
    per_series = seconds / prom.scrape_interval_seconds
    samples_base = series_base * per_series
    samples_peak = series_peak * per_series
    note = (
        f"estimate: {VLLM_SERIES_PER_REPLICA} series per vLLM replica"
        + (f", {DCGM_SERIES_PER_GPU} per GPU" if prom.dcgm_exporter else "")
        + f", scraped every {prom.scrape_interval_seconds}s"
    )
    out.add(
        item="AMP managed collector",
        category="observability",
        quantity=1,
        unit="collector-month",
        unit_price=prices.amp.collector_per_hour * prices.hours_per_month,
    )
    out.add(
        item="AMP samples collected",
        category="observability",
        quantity=samples_base / 1e7,
        peak_quantity=samples_peak / 1e7,
        unit="10M samples",
        unit_price=prices.amp.collect_per_10m_samples,
        note=note,
    )
    out.add(
        item="AMP samples ingested",
        category="observability",
        quantity=samples_base / 1e7,
        peak_quantity=samples_peak / 1e7,
        unit="10M samples",
        unit_price=prices.amp.ingest_per_10m_samples,
        note=note,
    )
    stored = AMP_BYTES_PER_SAMPLE * AMP_RETENTION_MONTHS / GIB
    out.add(
        item="AMP storage (150-day retention)",
        category="observability",
        quantity=samples_base * stored,
        peak_quantity=samples_peak * stored,
        unit="GB-month",
        unit_price=prices.amp.storage_per_gb_month,
        note=f"estimate: {AMP_BYTES_PER_SAMPLE:g} bytes per sample, steady state",
    )
    query_base = query_peak = 0.0
    for model in tier.models:
        scaling = model.autoscaling
        if scaling is None:
            continue
        triggers = int(scaling.queue_target is not None) + int(scaling.kv_cache_target is not None)
        queries = triggers * seconds / scaling.polling_interval_seconds
        window = KEDA_QUERY_WINDOW_SECONDS / prom.scrape_interval_seconds
        query_base += queries * max(scaling.min_replicas, 1) * window
        query_peak += queries * scaling.max_replicas * window
    if query_base or query_peak:
        out.add(
            item="AMP query samples (KEDA)",
            category="observability",
            quantity=query_base / 1e9,
            peak_quantity=query_peak / 1e9,
            unit="billion samples",
            unit_price=prices.amp.query_per_billion_samples,
            note=f"estimate: each KEDA query reads {KEDA_QUERY_WINDOW_SECONDS}s of every replica's series",
        )


def _bedrock(
    tier: TierConfig,
    prices: PriceTable,
    out: _Lines,
    fallback_share: float,
    tokens_per_month: float,
    notes: list[str],
) -> None:
    weights: dict[str, int] = {}
    for part in tier.model_parts():  # a model split into shares: its shares' GPUs together
        gpus = replicas(part)[1] * gpus_per_replica(part) + part.prefill_gpu_demand
        weights[part.name] = weights.get(part.name, 0) + gpus
    total = sum(weights.values()) or 1
    skipped: list[str] = []
    for model in tier.models:
        target = model.bedrock_target
        tokens = tokens_per_month * fallback_share * weights[model.name] / total
        if target is None:
            skipped.append(model.name)
            continue
        price = prices.bedrock_model(target.model_id)
        millions = tokens / 1e6
        for kind, share, rate in (
            ("input", BEDROCK_INPUT_TOKEN_SHARE, price.input_per_million),
            ("output", 1 - BEDROCK_INPUT_TOKEN_SHARE, price.output_per_million),
        ):
            out.add(
                item=f"Bedrock fallback {model.name}: {target.model_id} {kind} tokens",
                category="fallback",
                quantity=millions * share,
                unit="1M tokens",
                unit_price=rate,
                note=f"{fallback_share:g} of the model's tokens; estimate: "
                f"{BEDROCK_INPUT_TOKEN_SHARE:.0%} of tokens are input",
            )
    if skipped:
        notes.append(
            f"No Bedrock cost for {', '.join(skipped)}: no Bedrock target, so its share of "
            "fallback traffic waits for GPUs instead."
        )
