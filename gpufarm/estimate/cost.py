"""The monthly bill, line by line: GPU and system instances, reservations and commitments as
billed, the control plane, storage, network, ingress, observability and the Bedrock fallback,
each at floor, expected and ceiling.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from gpufarm.config.fsx_capacity import fsx_storage_capacity_gib
from gpufarm.config.model import (
    CapacityType,
    LoadBalancerKind,
    ModelAutoscalingConfig,
    ModelStoreKind,
    NodeGroupConfig,
    Provisioning,
    ReservationKind,
    TierConfig,
)
from gpufarm.core.endpoints import gateway_through_nlb
from gpufarm.core.pools import PodSet, Role, pod_sets, pool_loads, replica_bounds
from gpufarm.eks_support import Phase, support_status
from gpufarm.estimate.allocation import (
    AUTO_MODE_ROOT_VOLUME_GIB,
    GpuAllocation,
    gpu_allocations,
)
from gpufarm.estimate.billing import Commitment, Ec2Usage, apply_commitments, check_capacity_block_days
from gpufarm.estimate.report import CostEstimate, CostLine, EstimateError
from gpufarm.pricing import PRICE_SECTIONS, PriceTable, load_prices

LCUS_PER_HOUR = 1.0
"""Capacity units an ALB, NLB or GWLB is assumed to use each hour when none are reserved.

Inference traffic is few, long, streamed requests: one LCU covers 25 new connections/s,
3,000 active connections or 1 GB/h processed, more than a tier's token streams usually reach.
"""

AUTO_MODE_CPU_NODES = 2
"""CPU nodes assumed in Auto Mode's built-in pools (controllers and gateway pods, spread over two)."""

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

DEFAULT_BUSY_SHARE: float = ModelAutoscalingConfig.model_fields["expected_busy_share"].default
"""A model's share of the month at its most replicas unless its config says (0.5: no measurement)."""

_CATEGORY_ORDER = (
    "cluster",
    "gpu",
    "compute",
    "commitment",
    "storage",
    "network",
    "security",
    "observability",
    "fallback",
)

# --------------------------------------------------------------------------- cost


class _Lines:
    """Collects lines; every quantity is per month, `unit_price` per unit per month."""

    def __init__(self, *, busy_share: float = DEFAULT_BUSY_SHARE) -> None:
        self.lines: list[CostLine] = []
        self.busy_share = busy_share
        """The share between base and peak a line's expected quantity lies at, unless it says."""
        self.ec2_usage: list[tuple[str, float, float, float]] = []
        """EC2 instances billed at the on-demand rate (commitments may cover them): type and
        instances at floor, expected and ceiling."""

    def expected(self, base: float, peak: float) -> float:
        """The expected quantity between `base` and `peak` at the tier's busy share."""
        return base + self.busy_share * (peak - base)

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
        expected_quantity: float | None = None,
        on_demand_unit_price: float | None = None,
    ) -> None:
        peak = quantity if peak_quantity is None else peak_quantity
        if expected_quantity is None and peak != quantity:
            expected_quantity = self.expected(quantity, peak)
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
                expected_quantity=expected_quantity,
                on_demand_unit_price=on_demand_unit_price,
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
    commitments: Sequence[Commitment] = (),
    busy_share: float | None = None,
    capacity_block_days: int | None = None,
    fallback_share: float = 0.0,
    tokens_per_month: float | None = None,
    nat_gb_per_month: float = 0.0,
    day: dt.date | None = None,
) -> CostEstimate:
    """The tier's monthly bill from `prices` (default: the shipped table), line by line, at floor,
    expected and ceiling.

    Reserved capacity is billed as AWS bills it (:mod:`gpufarm.estimate.billing`): a node group
    on an On-Demand Capacity Reservation at the on-demand rate, with the reservation's instances
    beyond the group's nodes as their own "reserved, unused" line; a node group on a Capacity
    Block at the block's rate (`capacity_blocks` in the table) for `capacity_block_days`
    (default: none, blocks bought back to back all month). `commitments` (default: none) are
    Savings Plans and Reserved Instances the account holds, applied to the on-demand-rate EC2
    usage they cover, each with its fee and the usage it covers as lines. `busy_share` (0 to 1,
    default: each model's `autoscaling.expected_busy_share`) replaces every model's busy share
    for the expected figure.
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
    if busy_share is not None:
        _check_share("busy_share", busy_share, below_one=False)
    if capacity_block_days is not None:
        check_capacity_block_days(capacity_block_days)
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
    out = _Lines(busy_share=tier_busy_share(tier, busy_share))
    notes: list[str] = []
    if prices.region != tier.environment.region:
        notes.append(
            f"Prices are for {prices.region}; the tier deploys to {tier.environment.region} "
            "(use --live --region to price it there)."
        )

    _control_plane(tier, prices, out, notes, day)

    allocations = gpu_allocations(tier, prices)
    shares = busy_shares(tier, busy_share)
    usage = out.ec2_usage
    ebs_base = 0.0
    ebs_peak = 0.0
    for alloc in allocations:
        group = next((g for g in tier.node_groups if g.name == alloc.target), None)
        block = group is not None and group.capacity.kind is ReservationKind.CAPACITY_BLOCK
        on_demand = prices.on_demand(alloc.instance_type)
        share = shares.get(alloc.target, 0.0)
        expected = alloc.base_instances + share * (alloc.peak_instances - alloc.base_instances)
        item = f"GPU {alloc.kind} {alloc.target}: {alloc.instance_type}"
        if block:
            block_hours = hours if capacity_block_days is None else min(capacity_block_days * 24, hours)
            rate = prices.capacity_block(alloc.instance_type)
            note = "Capacity Block reservation fee, prepaid at its own rate; " + (
                "blocks bought back to back all month"
                if capacity_block_days is None
                else f"a {capacity_block_days}-day block ({block_hours:g} h of the month)"
            )
            out.add(
                item=f"{item} (Capacity Block)",
                category="gpu",
                capacity_type=alloc.capacity_type,
                quantity=alloc.base_instances,
                expected_quantity=expected,
                peak_quantity=alloc.peak_instances,
                unit="instance-month",
                unit_price=rate * block_hours,
                on_demand_unit_price=on_demand * block_hours,
                note=note,
            )
        else:
            rate = prices.instance_hourly(alloc.instance_type, alloc.capacity_type, reserved_discount=0.0)
            note = ""
            if alloc.kind == "node group":
                note = "an On-Demand Capacity Reservation: the on-demand rate whether or not models use it"
            elif alloc.capacity_type == CapacityType.RESERVED.value:
                note = (
                    "in the pool's reservations: the on-demand rate (an ODCR; a Capacity Block bills its own)"
                )
            out.add(
                item=item,
                category="gpu",
                capacity_type=alloc.capacity_type,
                quantity=alloc.base_instances,
                expected_quantity=expected,
                peak_quantity=alloc.peak_instances,
                unit="instance-month",
                unit_price=rate * hours,
                on_demand_unit_price=on_demand * hours,
                note=note,
            )
            if alloc.capacity_type != CapacityType.SPOT.value:
                usage.append((alloc.instance_type, alloc.base_instances, expected, alloc.peak_instances))
        if group is not None:
            _unused_reservation(group, prices, out, usage, notes)
        if auto_mode:
            out.add(
                item=f"EKS Auto Mode fee: {alloc.target} ({alloc.instance_type})",
                category="cluster",
                capacity_type=None,
                quantity=alloc.base_instances,
                expected_quantity=expected,
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
    usage.append((system_type, base_nodes, out.expected(base_nodes, peak_nodes), peak_nodes))
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

    _commitments(list(commitments), prices, out)
    _reservation_notes(tier, commitments, notes)
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
        price_sources={name: getattr(prices, name).source for name in PRICE_SECTIONS},
        commitments=[c.to_json() for c in commitments],
        busy_share=busy_share,
        capacity_block_days=capacity_block_days,
        fallback_share=fallback_share,
        tokens_per_month=tokens_per_month,
        lines=lines,
        notes=notes,
    )


def _pods_share(pods: PodSet, override: float | None) -> float:
    """The busy share of a set of pods: the model's, or for prefill pods their own scaling's."""
    if override is not None:
        return override
    autoscaling = pods.model.autoscaling
    if pods.role is Role.PREFILL:
        pd = pods.model.prefill_decode
        autoscaling = pd.prefill_autoscaling if pd is not None else None
    return DEFAULT_BUSY_SHARE if autoscaling is None else autoscaling.expected_busy_share


def busy_shares(tier: TierConfig, override: float | None = None) -> dict[str, float]:
    """The busy share of each pool and node group: its models' shares, weighted by the GPUs each
    adds there between base and peak (a target no model scales on gets the tier's share)."""
    out: dict[str, float] = {}
    for load in pool_loads(tier):
        weights = [(p.peak_gpus - p.base_gpus, _pods_share(p.pods, override)) for p in load.placed]
        total = sum(w for w, _ in weights)
        out[load.name] = sum(w * s for w, s in weights) / total if total else tier_busy_share(tier, override)
    return out


def tier_busy_share(tier: TierConfig, override: float | None = None) -> float:
    """The tier's busy share: every model's, weighted by the GPUs it adds between base and peak.

    Lines other than GPU instances (system nodes, volumes, samples) take their expected quantity
    at this share between base and peak.
    """
    if override is not None:
        return override
    weights = [
        (pods.gpus_at(peak=True) - pods.gpus_at(peak=False), _pods_share(pods, None))
        for pods in pod_sets(tier)
    ]
    total = sum(w for w, _ in weights)
    return sum(w * s for w, s in weights) / total if total else DEFAULT_BUSY_SHARE


def _unused_reservation(
    group: NodeGroupConfig,
    prices: PriceTable,
    out: _Lines,
    usage: list[tuple[str, float, float, float]],
    notes: list[str],
) -> None:
    """The instances an ODCR gpufarm creates holds beyond the group's nodes, billed used or not."""
    capacity = group.capacity
    if capacity.kind is not ReservationKind.CREATE or capacity.instance_count is None:
        return
    spare = capacity.instance_count - group.nodes
    if spare <= 0:
        return
    out.add(
        item=f"GPU node group {group.name}: {group.instance_type} reserved, unused",
        category="gpu",
        capacity_type=CapacityType.RESERVED.value,
        quantity=spare,
        unit="instance-month",
        unit_price=prices.on_demand(group.instance_type) * prices.hours_per_month,
        on_demand_unit_price=0.0,
        note=f"the reservation holds {capacity.instance_count} instances, the group runs {group.nodes}: "
        "AWS bills the rest as unused reservation at the on-demand rate",
    )
    usage.append((group.instance_type, spare, spare, spare))


def _commitments(commitments: list[Commitment], prices: PriceTable, out: _Lines) -> None:
    """Each commitment's fee and the on-demand-rate usage it covers, at floor, expected and ceiling."""
    if not commitments:
        return
    hours = prices.hours_per_month
    by_level = []
    for level in range(3):
        usage = [
            Ec2Usage(instance_type=t, on_demand_per_hour=prices.on_demand(t), instances=row[level])
            for t, *row in out.ec2_usage
        ]
        by_level.append(apply_commitments(usage, commitments, prices.on_demand))
    for floor, expected, ceiling in zip(*by_level, strict=True):
        name = floor.commitment.describe()
        out.add(
            item=f"Commitment: {name}",
            category="commitment",
            quantity=1,
            unit="commitment-month",
            unit_price=floor.fee_per_hour * hours,
            on_demand_unit_price=0.0,
            note="not created by this stack: billed whether or not usage fills it",
        )
        out.add(
            item=f"Usage covered by the commitment: {name}",
            category="commitment",
            quantity=floor.covered_per_hour * hours,
            expected_quantity=expected.covered_per_hour * hours,
            peak_quantity=ceiling.covered_per_hour * hours,
            unit="USD at on-demand rates",
            unit_price=-1.0,
            on_demand_unit_price=0.0,
            note="not created by this stack: the on-demand charge of the usage it covers, taken off; "
            "expected: applied to the month's average usage",
        )


def _reservation_notes(tier: TierConfig, commitments: Sequence[Commitment], notes: list[str]) -> None:
    existing = [g.name for g in tier.node_groups if g.capacity.kind is ReservationKind.ODCR]
    if existing:
        notes.append(
            f"Existing On-Demand Capacity Reservations ({', '.join(existing)}): their instances beyond "
            "the groups' nodes bill whether or not this stack runs; their size is not in the config, "
            "so they are not counted."
        )
    if not commitments:
        notes.append(
            "No commitment applied: reserved capacity bills at the on-demand rate. Give the Savings "
            "Plans or Reserved Instances the account holds with --commitment."
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
    if ing.kind is not LoadBalancerKind.NLB:  # WAF and the NLBs in front (PrivateLink, gateway): ALB only
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
        if tier.fallback.enabled and gateway_through_nlb(tier):
            # The gateway reaches an internet-facing ALB through an internal NLB (ADR 0050).
            out.add(
                item="Gateway Network Load Balancer",
                category="network",
                quantity=1,
                unit="LB-month",
                unit_price=prices.elb.nlb_per_hour * hours,
            )
            out.add(
                item="Gateway NLB capacity units",
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
        out.ec2_usage.append(
            (
                appliances.instance_type,
                appliances.min_size,
                out.expected(appliances.min_size, appliances.max_size),
                appliances.max_size,
            )
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
    base_replicas = sum(replica_bounds(m)[0] for m in tier.model_parts())
    peak_replicas = sum(replica_bounds(m)[1] for m in tier.model_parts())
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
    for pods in pod_sets(tier):  # a model's shares and prefill pods count with the model
        weights[pods.model.name] = weights.get(pods.model.name, 0) + pods.gpus_at(peak=True)
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
