"""The monthly bill, line by line: GPU and system instances, reservations and commitments as
billed, the control plane, storage, network, ingress, observability and the Bedrock fallback,
each at floor, expected and ceiling.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from gpufarm.config.bedrock import token_priced_model_id
from gpufarm.config.fsx_capacity import fsx_storage_capacity_gib
from gpufarm.config.model import (
    CapacityType,
    LoadBalancerKind,
    LoadBalancerScheme,
    ModelAutoscalingConfig,
    ModelConfig,
    ModelStoreKind,
    NodeGroupConfig,
    Provisioning,
    ReservationKind,
    TierConfig,
)
from gpufarm.core.endpoints import endpoints_of, gateway_through_nlb
from gpufarm.core.pools import PodSet, Role, pod_sets, pool_loads, replica_bounds
from gpufarm.eks_support import Phase, support_status
from gpufarm.estimate.allocation import (
    AUTO_MODE_ROOT_VOLUME_GIB,
    GpuAllocation,
    gpu_allocations,
)
from gpufarm.estimate.billing import Commitment, Ec2Usage, apply_commitments, check_capacity_block_days
from gpufarm.estimate.report import CostEstimate, CostLine, EstimateError
from gpufarm.estimate.sagemaker import sagemaker_endpoint_lines, sagemaker_wake_alarms
from gpufarm.estimate.usage import Usage
from gpufarm.k8s.karpenter import ROOT_VOLUME_IOPS, ROOT_VOLUME_THROUGHPUT_MIBPS
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
        section: str | None = None,
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
                price_section=section,
                expected_quantity=expected_quantity,
                on_demand_unit_price=on_demand_unit_price,
            )
        )


def _check_share(name: str, value: float, *, below_one: bool) -> None:
    upper = value >= 1 if below_one else value > 1
    if value < 0 or upper or math.isnan(value):
        bound = "to below 1" if below_one else "to 1"
        raise EstimateError(f"{name} must be a share from 0 {bound}, got {value:g}")


def _direct_hosts(
    tier: TierConfig, prices: PriceTable, out: _Lines, ebs_base: float, ebs_peak: float
) -> tuple[float, float]:
    """`cluster.provisioning: ec2`: the gateway's CPU instances and the warm pools' stopped GPU
    instances, in place of the system nodes. Returns the node volumes' GB at base and peak.

    A stopped instance bills no instance hours, only its EBS volumes (EC2 API reference,
    StartInstances: "When an instance is stopped, the compute resources are released and you are
    not billed for instance usage. However, your root partition Amazon EBS volume remains ... and
    you are charged for Amazon EBS volume usage",
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_StartInstances.html): a warm pool
    costs its root volumes.
    """
    from gpufarm.core.fleets import fleets

    hours = prices.hours_per_month
    gateway = tier.ec2.gateway
    if tier.fallback.enabled:
        out.add(
            item=f"Gateway instances: {gateway.instance_type}",
            category="compute",
            capacity_type=CapacityType.ON_DEMAND.value,
            quantity=gateway.min_instances,
            peak_quantity=gateway.max_instances,
            unit="instance-month",
            unit_price=prices.on_demand(gateway.instance_type) * hours,
            note="the LiteLLM gateway's CPU Auto Scaling group",
            section="ec2",
        )
        out.ec2_usage.append(
            (
                gateway.instance_type,
                gateway.min_instances,
                out.expected(gateway.min_instances, gateway.max_instances),
                gateway.max_instances,
            )
        )
        ebs_base += gateway.min_instances * gateway.volume_gib
        ebs_peak += gateway.max_instances * gateway.volume_gib
    warm = tier.ec2.warm_pool
    if warm.enabled and tier.cluster.provisioning is Provisioning.EC2:
        gib = sum(warm.min_size * f.pool.root_volume_gib for f in fleets(tier) if not f.spot)
        if gib:
            out.add(
                item="EBS gp3 warm pool volumes (stopped GPU instances)",
                category="storage",
                quantity=gib,
                unit="GB-month",
                unit_price=prices.ebs.gp3_per_gb_month,
                note=f"{warm.min_size} stopped instance(s) per group: no instance hours, the root volume",
                section="ebs",
            )
            perf = prices.ebs_performance
            extra = max(ROOT_VOLUME_THROUGHPUT_MIBPS - perf.gp3_baseline_throughput_mibps, 0)
            volumes = sum(warm.min_size for f in fleets(tier) if not f.spot)
            if extra:
                # Provisioned gp3 throughput bills per month whether the instance runs or not.
                out.add(
                    item="EBS gp3 throughput above baseline (warm pool volumes)",
                    category="storage",
                    quantity=volumes * extra,
                    unit="MiB/s-month",
                    unit_price=perf.gp3_throughput_per_mibps_month,
                    section="ebs_performance",
                )
    return ebs_base, ebs_peak


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
        section="eks",
    )


def _hybrid_nodes(tier: TierConfig, prices: PriceTable, out: _Lines, notes: list[str]) -> None:
    """The EKS Hybrid Nodes fee: every on-premises host's vCPUs, attached all month.

    AWS bills no instance for the on-premises GPUs; EKS bills the hosts' vCPU-hours while they are
    attached (EKS user guide, hybrid-nodes-overview). Without a rate in the table the line counts
    the vCPU-hours at $0 and says so.
    """
    hybrid = tier.hybrid_nodes
    if not hybrid.enabled or not hybrid.gpus:
        return
    vcpu_hours = hybrid.vcpus * prices.hours_per_month
    rate = prices.eks.hybrid_nodes_per_vcpu_hour
    hosts = ", ".join(
        f"{g.nodes} x {g.gpus_per_node} {g.gpu_type} GPUs, {g.vcpus_per_node} vCPUs ({g.name})"
        for g in hybrid.gpus
    )
    if rate is None:
        note = (
            f"{hosts}; unpriced: the table has no hybrid nodes rate "
            "(give eks.hybrid_nodes_per_vcpu_hour with --prices)"
        )
        notes.append(
            f"EKS Hybrid Nodes: {vcpu_hours:,.0f} vCPU-hours a month are not priced; the price table has "
            "no confirmed rate (give eks.hybrid_nodes_per_vcpu_hour from https://aws.amazon.com/eks/pricing/ "
            "with --prices)."
        )
    else:
        note = f"{hosts}; the on-premises GPUs themselves are not billed by AWS"
    out.add(
        item=f"EKS Hybrid Nodes: {hybrid.gpu_count} on-premises GPUs",
        category="cluster",
        quantity=vcpu_hours,
        unit="vCPU-hour",
        unit_price=rate or 0.0,
        note=note,
        section="eks",
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
    nat_gb_per_month: float | None = None,
    day: dt.date | None = None,
    usage: Usage | None = None,
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
    the cost per million tokens; a fallback share above 0 needs it. `nat_gb_per_month` (default:
    derived from the images and Hugging Face weights pulled per launch, see `usage`) is traffic
    through the NAT gateways. `usage` (default: :class:`Usage`'s documented figures) sets what
    the usage-billed lines assume: logs, requests, KMS and Secrets Manager calls, endpoint data.
    `day` (default: none) prices the control plane by the EKS support calendar on that date: a
    Kubernetes version in extended support bills at `eks.extended_support_cluster_per_hour`, and one
    within 60 days of it gets a note; with no `day`, the standard-support rate. Raises EstimateError
    for arguments out of range and PriceNotFoundError when the table lacks a price the tier needs.
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
    if nat_gb_per_month is not None and not nat_gb_per_month >= 0:
        raise EstimateError(f"nat_gb_per_month must be at least 0, got {nat_gb_per_month:g}")
    prices = prices or load_prices()
    assumed = usage or Usage()
    hours = prices.hours_per_month
    auto_mode = tier.cluster.provisioning is Provisioning.AUTO_MODE
    # No cluster: GPU groups (ec2) or a SageMaker endpoint, and the gateway's CPU group.
    direct = tier.cluster.provisioning in (Provisioning.EC2, Provisioning.SAGEMAKER)
    on_sagemaker = tier.cluster.provisioning is Provisioning.SAGEMAKER
    out = _Lines(busy_share=tier_busy_share(tier, busy_share))
    notes: list[str] = []
    if prices.region != tier.environment.region:
        notes.append(
            f"Prices are for {prices.region}; the tier deploys to {tier.environment.region} "
            "(use --live --region to price it there)."
        )

    if on_sagemaker:
        # The models' GPUs are the endpoint's instances.
        sagemaker_endpoint_lines(tier, prices, out)
    if not direct:
        _control_plane(tier, prices, out, notes, day)
    _hybrid_nodes(tier, prices, out, notes)

    allocations = [] if on_sagemaker else gpu_allocations(tier, prices)
    shares = busy_shares(tier, busy_share)
    ec2_usage = out.ec2_usage
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
                section="capacity_blocks",
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
            elif alloc.capacity_type == CapacityType.SPOT.value:
                note = prices.spot_basis(alloc.instance_type)
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
                section="ec2",
            )
            if alloc.capacity_type != CapacityType.SPOT.value:
                ec2_usage.append((alloc.instance_type, alloc.base_instances, expected, alloc.peak_instances))
        if group is not None:
            _unused_reservation(group, prices, out, ec2_usage, notes)
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
                section="eks",
            )
        ebs_base += alloc.base_instances * alloc.root_volume_gib
        ebs_peak += alloc.peak_instances * alloc.root_volume_gib

    if direct:
        ebs_base, ebs_peak = _direct_hosts(tier, prices, out, ebs_base, ebs_peak)
    else:
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
            section="ec2",
        )
        ec2_usage.append((system_type, base_nodes, out.expected(base_nodes, peak_nodes), peak_nodes))
        if auto_mode:
            out.add(
                item=f"EKS Auto Mode fee: system nodes ({system_type})",
                category="cluster",
                quantity=base_nodes,
                unit="instance-month",
                unit_price=prices.on_demand(system_type) * prices.eks.auto_mode_fee_share * hours,
                note="estimate: eks.auto_mode_fee_share of the on-demand price",
                section="eks",
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
        note="IOPS and throughput above the gp3 baseline are their own lines",
        section="ebs",
    )

    _network(tier, prices, out)
    _ingress(tier, prices, out)
    if tier.model_store.kind is ModelStoreKind.FSX_LUSTRE:
        fsx = tier.model_store.fsx
        out.add(
            item=f"FSx for Lustre PERSISTENT_2 ({fsx.throughput_per_tib} MB/s/TiB)",
            category="storage",
            quantity=fsx_storage_capacity_gib(tier),
            unit="GB-month",
            unit_price=prices.fsx_per_gb_month(fsx.throughput_per_tib),
            section="fsx_lustre",
        )
    if tier.observability.prometheus.enabled:
        _prometheus(tier, prices, out, allocations)
    if tier.fallback.enabled:
        _bedrock_provisioned(tier, prices, out)
    if tier.fallback.enabled and fallback_share > 0 and tokens_per_month:
        _bedrock(tier, prices, out, fallback_share, tokens_per_month, notes)
    if tier.fallback.enabled and tier.fallback.guardrail.enabled:
        _guardrail(tier, prices, out, fallback_share, tokens_per_month)
    _logs(tier, prices, out, assumed)
    _public_ipv4(tier, prices, out)
    _keys_and_secrets(tier, prices, out, assumed)
    _image_cache(tier, prices, out, assumed)
    _ebs_performance(tier, prices, out, allocations)
    _data_processing(tier, prices, out, assumed, allocations, nat_gb_per_month)
    _monitoring(tier, prices, out, assumed)
    _regions(tier, prices, out)

    _commitments(list(commitments), prices, out)
    _reservation_notes(tier, commitments, notes)
    notes.append(
        "Not included: data transfer out to the internet, S3 requests and the model bucket's "
        "storage, CloudWatch metric API calls and Logs Insights queries, and the account's free "
        "allowances (the usage-billed lines are priced before them)."
    )
    lines = sorted(out.lines, key=lambda line: _CATEGORY_ORDER.index(line.category))
    return CostEstimate(
        tier=tier.name,
        region=tier.environment.region,
        price_region=prices.region,
        prices_as_of=prices.as_of.isoformat(),
        price_sources={name: getattr(prices, name).source for name in PRICE_SECTIONS},
        price_dates={name: read.isoformat() for name, read in prices.section_dates().items()},
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
        section="ec2",
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


def _network(tier: TierConfig, prices: PriceTable, out: _Lines) -> None:
    hours = prices.hours_per_month
    zones = len(tier.environment.availability_zones)
    if tier.network.nat_gateways:
        out.add(
            item="NAT gateways",
            category="network",
            quantity=tier.network.nat_gateways,
            unit="gateway-month",
            unit_price=prices.vpc.nat_gateway_per_hour * hours,
            section="vpc",
        )
    endpoints = _interface_endpoints(tier)
    if endpoints:
        out.add(
            item=f"VPC interface endpoints ({endpoints} services x {zones} AZs)",
            category="network",
            quantity=endpoints * zones,
            unit="endpoint-AZ-month",
            unit_price=prices.vpc.interface_endpoint_per_az_hour * hours,
            section="vpc",
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
        section="elb",
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
        section="elb",
    )
    if ing.kind is not LoadBalancerKind.NLB:  # WAF and the NLBs in front (PrivateLink, gateway): ALB only
        if ing.private_link.enabled:
            # An endpoint service needs an NLB: gpufarm puts one in front of the ALB.
            _nlb_in_front(out, prices, label="PrivateLink", lcu_note=lcu_note)
        if tier.fallback.enabled and gateway_through_nlb(tier):
            # The gateway reaches an internet-facing ALB through an internal NLB (ADR 0050).
            _nlb_in_front(out, prices, label="Gateway", lcu_note=lcu_note)
        if ing.waf.enabled:
            rules = 1 + int(ing.waf.common_rule_set) + int(ing.waf.known_bad_inputs)
            out.add(
                item="AWS WAF web ACL",
                category="security",
                quantity=1,
                unit="ACL-month",
                unit_price=prices.waf.web_acl_per_month,
                section="waf",
            )
            out.add(
                item="AWS WAF rules",
                category="security",
                quantity=rules,
                unit="rule-month",
                unit_price=prices.waf.rule_per_month,
                section="waf",
            )
    if ing.inspection.enabled:
        appliances = ing.inspection.appliances
        out.add(
            item="Gateway Load Balancer (inspection)",
            category="security",
            quantity=1,
            unit="LB-month",
            unit_price=prices.elb.gwlb_per_hour * hours,
            section="elb",
        )
        out.add(
            item="GWLB capacity units",
            category="security",
            quantity=LCUS_PER_HOUR,
            unit="GLCU-month",
            unit_price=prices.elb.gwlb_per_lcu_hour * hours,
            note=lcu_note,
            section="elb",
        )
        out.add(
            item=f"GWLB endpoints ({zones} AZs)",
            category="security",
            quantity=zones,
            unit="endpoint-month",
            unit_price=prices.vpc.gwlb_endpoint_per_az_hour * hours,
            section="vpc",
        )
        out.add(
            item=f"Inspection appliances: {appliances.instance_type}",
            category="security",
            capacity_type=CapacityType.ON_DEMAND.value,
            quantity=appliances.min_size,
            peak_quantity=appliances.max_size,
            unit="instance-month",
            unit_price=prices.on_demand(appliances.instance_type) * hours,
            section="ec2",
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
            section="vpc",
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
        section="amp",
    )
    out.add(
        item="AMP samples collected",
        category="observability",
        quantity=samples_base / 1e7,
        peak_quantity=samples_peak / 1e7,
        unit="10M samples",
        unit_price=prices.amp.collect_per_10m_samples,
        note=note,
        section="amp",
    )
    out.add(
        item="AMP samples ingested",
        category="observability",
        quantity=samples_base / 1e7,
        peak_quantity=samples_peak / 1e7,
        unit="10M samples",
        unit_price=prices.amp.ingest_per_10m_samples,
        note=note,
        section="amp",
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
        section="amp",
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
            section="amp",
        )
    if prom.alerts:
        _amp_rules(tier, prices, out, series_base, series_peak)


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
        priced = token_priced_model_id(target)
        if priced is None:
            continue  # a Provisioned Throughput: its model units bill by the hour (_bedrock_provisioned)
        price = prices.bedrock_model(priced)
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
                section="bedrock",
            )
    if skipped:
        notes.append(
            f"No Bedrock cost for {', '.join(skipped)}: no Bedrock target, so its share of "
            "fallback traffic waits for GPUs instead."
        )


def _bedrock_provisioned(tier: TierConfig, prices: PriceTable, out: _Lines) -> None:
    """Each Provisioned Throughput a fallback names: its model units, billed every hour of the term.

    The commitment bills whether or not a request falls back, so the line stands at floor,
    expected and ceiling alike, and one Provisioned Throughput named by several models is billed
    once.
    """
    seen: set[str] = set()
    for model in tier.models:
        target = model.bedrock_target
        if target is None or token_priced_model_id(target) is not None or target.model_id in seen:
            continue
        seen.add(target.model_id)
        bought = target.provisioned
        base = target.base_model_id
        assert bought is not None and base is not None  # the config checks require both
        rate = prices.bedrock_model_unit_hour(base, bought.commitment.value)
        out.add(
            item=f"Bedrock Provisioned Throughput {model.name}: {base} ({bought.commitment.value})",
            category="fallback",
            quantity=bought.model_units,
            unit="model unit-month",
            unit_price=rate * prices.hours_per_month,
            note=f"a {bought.commitment.value} commitment: every hour of the term, used or not",
            section="bedrock_provisioned",
        )


# --------------------------------------------------------------------------- usage-billed lines
# Each function prices one area of the bill the templates create and the first estimate left
# out (docs/decisions/0053-every-billed-resource.md). Quantities a config cannot fix come from
# `Usage`, whose defaults are documented there and in docs/cli.md; each line's note names them.

GB = 1e9
"""Bytes in a GB as AWS bills data (decimal)."""

DAYS_PER_MONTH = 365 / 12
"""Days in an average month."""

CHARACTERS_PER_TOKEN = 4
"""Characters of English text per token, to turn fallback tokens into Guardrail text units."""

RULE_EVALUATIONS_PER_MONTH = 730 * 60
"""Evaluations of the AMP alerting rules in a month: once a minute."""

RULE_WINDOW_SECONDS = 300
"""Range each alerting rule reads per series (a five-minute window)."""


def _gib_to_gb(gib: float) -> float:
    return gib * GIB / GB


def _months_kept(retention_days: int) -> float:
    return retention_days / DAYS_PER_MONTH


def _log_lines(
    out: _Lines,
    prices: PriceTable,
    *,
    name: str,
    gb: float,
    months: float,
    vended: bool,
    note: str,
    peak_gb: float | None = None,
) -> None:
    """Ingestion and steady-state storage of one log group: `gb` a month, kept `months`."""
    ingest = prices.cloudwatch.vended_logs_ingest_per_gb if vended else prices.cloudwatch.logs_ingest_per_gb
    peak = gb if peak_gb is None else peak_gb
    out.add(
        item=f"CloudWatch Logs ingestion: {name}",
        category="observability",
        quantity=gb,
        peak_quantity=peak,
        unit="GB",
        unit_price=ingest,
        note=note,
        section="cloudwatch",
    )
    out.add(
        item=f"CloudWatch Logs storage: {name}",
        category="observability",
        quantity=gb * months,
        peak_quantity=peak * months,
        unit="GB-month",
        unit_price=prices.cloudwatch.logs_storage_per_gb_month,
        note=f"{months:.1f} months of data held at steady state",
        section="cloudwatch",
    )


def _logs(tier: TierConfig, prices: PriceTable, out: _Lines, usage: Usage) -> None:
    """CloudWatch Logs: control-plane, VPC flow, inspection flow and WAF logs, by their retention."""
    types = len(tier.cluster.control_plane_logging)
    if types and tier.cluster.provisioning not in (Provisioning.EC2, Provisioning.SAGEMAKER):
        _log_lines(
            out,
            prices,
            name="EKS control-plane logs",
            gb=types * usage.control_plane_log_gb_per_type,
            months=usage.unexpiring_log_months,
            vended=False,
            note=f"usage: {usage.control_plane_log_gb_per_type:g} GB per log type ({types} enabled); "
            "EKS creates the group without a retention",
        )
    flow = tier.network.flow_logs
    if flow.enabled:
        _log_lines(
            out,
            prices,
            name="VPC flow logs",
            gb=usage.flow_log_gb_per_vpc,
            months=_months_kept(flow.retention_days),
            vended=True,
            note=f"usage: {usage.flow_log_gb_per_vpc:g} GB per VPC; kept {flow.retention_days} days",
        )
    if tier.ingress.inspection.enabled:
        # The inspection VPC's flow logs keep the tier's flow-log retention (stacks/tier.py).
        _log_lines(
            out,
            prices,
            name="inspection VPC flow logs",
            gb=usage.flow_log_gb_per_vpc,
            months=_months_kept(flow.retention_days),
            vended=True,
            note=f"usage: {usage.flow_log_gb_per_vpc:g} GB per VPC; kept {flow.retention_days} days",
        )
    if tier.ingress.kind is not LoadBalancerKind.NLB and tier.ingress.waf.enabled:
        gb = usage.requests_per_month * usage.waf_log_bytes_per_request / GB
        _log_lines(
            out,
            prices,
            name="WAF logs",
            gb=gb,
            months=_months_kept(WAF_LOG_RETENTION_DAYS),
            vended=True,
            note=f"usage: {usage.requests_per_month:g} requests of {usage.waf_log_bytes_per_request:g} "
            f"bytes each; kept {WAF_LOG_RETENTION_DAYS} days",
        )


WAF_LOG_RETENTION_DAYS = 90
"""Days the WAF log group keeps records (`InferenceWaf`'s `log_retention_days` default)."""


def _public_ipv4(tier: TierConfig, prices: PriceTable, out: _Lines) -> None:
    """Public IPv4 addresses: NAT gateways' Elastic IPs, one per AZ of an internet-facing load balancer."""
    zones = len(tier.environment.availability_zones)
    internet_facing = tier.ingress.scheme is LoadBalancerScheme.INTERNET_FACING
    addresses = tier.network.nat_gateways + (zones if internet_facing else 0)
    if not addresses:
        return
    parts = [f"{tier.network.nat_gateways} NAT gateway(s)"]
    if internet_facing:
        parts.append(f"{zones} load balancer nodes, one per AZ")
    out.add(
        item=f"Public IPv4 addresses ({', '.join(parts)})",
        category="network",
        quantity=addresses,
        unit="address-month",
        unit_price=prices.data_transfer.public_ipv4_per_hour * prices.hours_per_month,
        section="data_transfer",
    )


def _image_cache(tier: TierConfig, prices: PriceTable, out: _Lines, usage: Usage) -> None:
    """ECR storage of the images the pull through cache and the NVIDIA mirrors hold (the mirrors
    are created outside the stack, and billed all the same)."""
    if not tier.images.pull_through_cache:
        return
    out.add(
        item="ECR storage (image cache)",
        category="storage",
        quantity=usage.image_gb_per_node_launch,
        unit="GB-month",
        unit_price=prices.ecr.storage_per_gb_month,
        note=f"usage: {usage.image_gb_per_node_launch:g} GB, the images a GPU node runs, cached "
        "once; the cache rules themselves bill nothing",
        section="ecr",
    )


def _kms_keys(tier: TierConfig) -> int:
    keys = 1  # the logs key, on every tier
    # The EKS secrets key; an ec2 or sagemaker tier has no cluster.
    keys += int(
        tier.cluster.secrets_encryption
        and tier.cluster.provisioning not in (Provisioning.EC2, Provisioning.SAGEMAKER)
    )
    keys += int(tier.observability.alarms.enabled)  # the alarm topic's key
    keys += int(tier.model_store.kind is ModelStoreKind.FSX_LUSTRE)
    return keys


def _secrets(tier: TierConfig) -> set[str]:
    """The Secrets Manager secrets the tier reads (created outside the stack, billed all the same)."""
    names = {m.hf_token_secret for m in tier.models if m.hf_token_secret}
    if tier.fallback.enabled and tier.fallback.master_key_secret:
        names.add(tier.fallback.master_key_secret)
    if tier.ingress.oidc is not None:
        names.add(tier.ingress.oidc.client_secret)
    if tier.images.pull_through_cache:
        # The cache rules' upstream credentials: ECR reads them on each upstream pull.
        names |= {a for a in (tier.images.docker_hub_credential_arn, tier.images.github_credential_arn) if a}
    return names


def _keys_and_secrets(tier: TierConfig, prices: PriceTable, out: _Lines, usage: Usage) -> None:
    """KMS keys and their requests; the Secrets Manager secrets the tier reads and their calls."""
    keys = _kms_keys(tier)
    out.add(
        item=f"KMS keys ({keys} customer managed)",
        category="security",
        quantity=keys,
        unit="key-month",
        unit_price=prices.kms.key_per_month,
        section="kms",
    )
    out.add(
        item="KMS requests",
        category="security",
        quantity=keys * usage.kms_requests_per_key / 1e4,
        unit="10K requests",
        unit_price=prices.kms.per_10k_requests,
        note=f"usage: {usage.kms_requests_per_key:g} requests per key; before the account's "
        "20,000 free requests",
        section="kms",
    )
    secrets = _secrets(tier)
    if secrets:
        out.add(
            item=f"Secrets Manager secrets ({len(secrets)} referenced)",
            category="security",
            quantity=len(secrets),
            unit="secret-month",
            unit_price=prices.secrets_manager.secret_per_month,
            note="created outside the stack; billed to the account that holds them",
            section="secrets_manager",
        )
        out.add(
            item="Secrets Manager API calls",
            category="security",
            quantity=len(secrets) * usage.secret_api_calls_per_secret / 1e4,
            unit="10K calls",
            unit_price=prices.secrets_manager.per_10k_api_calls,
            note=f"usage: {usage.secret_api_calls_per_secret:g} calls per secret",
            section="secrets_manager",
        )


def _ebs_performance(
    tier: TierConfig, prices: PriceTable, out: _Lines, allocations: list[GpuAllocation]
) -> None:
    """gp3 IOPS and throughput above the baseline on the GPU nodes' root volumes.

    Reserved node groups and Karpenter GPU pools provision `ROOT_VOLUME_THROUGHPUT_MIBPS` at
    `ROOT_VOLUME_IOPS` (gpufarm/k8s/karpenter.py, constructs/reserved_capacity.py); Auto Mode
    nodes keep the NodeClass defaults.
    """
    if tier.cluster.provisioning is Provisioning.AUTO_MODE:
        return
    perf = prices.ebs_performance
    extra_mibps = max(ROOT_VOLUME_THROUGHPUT_MIBPS - perf.gp3_baseline_throughput_mibps, 0)
    extra_iops = max(ROOT_VOLUME_IOPS - perf.gp3_baseline_iops, 0)
    base = sum(a.base_instances for a in allocations)
    peak = sum(a.peak_instances for a in allocations)
    if extra_mibps and (base or peak):
        out.add(
            item=f"EBS gp3 throughput above baseline ({ROOT_VOLUME_THROUGHPUT_MIBPS} MiB/s GPU root volumes)",
            category="storage",
            quantity=base * extra_mibps,
            peak_quantity=peak * extra_mibps,
            unit="MiB/s-month",
            unit_price=perf.gp3_throughput_per_mibps_month,
            note=f"{extra_mibps} MiB/s above the {perf.gp3_baseline_throughput_mibps} MiB/s "
            "baseline per GPU node",
            section="ebs_performance",
        )
    if extra_iops and (base or peak):
        out.add(
            item=f"EBS gp3 IOPS above baseline ({ROOT_VOLUME_IOPS} IOPS GPU root volumes)",
            category="storage",
            quantity=base * extra_iops,
            peak_quantity=peak * extra_iops,
            unit="IOPS-month",
            unit_price=perf.gp3_iops_per_month,
            section="ebs_performance",
        )


def _pod_starts(model: ModelConfig, usage: Usage) -> tuple[float, float]:
    """Times a month the model's pods start, at base and at peak: node replacement and daily scale-ups."""
    low, high = replica_bounds(model)
    base = low * usage.launches_per_base_node
    peak = high * usage.launches_per_base_node + (high - low) * usage.scale_ups_per_month
    return base, peak


def _nat_pull_gb(
    tier: TierConfig, allocations: list[GpuAllocation], usage: Usage
) -> tuple[float, float, str]:
    """GB a month through NAT: images on each GPU node launch, and weights that no endpoint serves."""
    nodes_base = sum(a.base_instances for a in allocations)
    nodes_peak = sum(a.peak_instances for a in allocations)
    launches_base = nodes_base * usage.launches_per_base_node
    launches_peak = (
        nodes_peak * usage.launches_per_base_node + (nodes_peak - nodes_base) * usage.scale_ups_per_month
    )
    # Through the image cache nodes pull from ECR (its endpoint, layers through the S3 gateway
    # endpoint), and ECR fetches from the upstream itself: no image byte crosses the NAT.
    cached = tier.images.pull_through_cache and not tier.images.cache_rules_only
    image_gb = 0.0 if cached else usage.image_gb_per_node_launch
    base = launches_base * image_gb
    peak = launches_peak * image_gb
    unsized: list[str] = []
    for model in tier.models:
        if model.weights.startswith("s3://") and (
            tier.network.s3_gateway_endpoint or tier.model_store.kind is ModelStoreKind.FSX_LUSTRE
        ):
            continue  # S3 through the gateway endpoint, or imported by the file system
        if model.weights_gib is None:
            unsized.append(model.name)
            continue
        starts_base, starts_peak = _pod_starts(model, usage)
        base += starts_base * _gib_to_gb(model.weights_gib)
        peak += starts_peak * _gib_to_gb(model.weights_gib)
    images = (
        "images from the ECR pull through cache, not through NAT"
        if cached
        else f"{usage.image_gb_per_node_launch:g} GB of images per GPU node launch"
    )
    note = (
        f"usage: {images}, "
        f"{usage.launches_per_base_node:g} launch(es) per base node, {usage.scale_ups_per_month:g} "
        "scale-ups; Hugging Face weights per pod start"
    )
    if unsized:
        note += f"; no weights_gib for {', '.join(unsized)}, so their weights are not counted"
    return base, peak, note


def _data_processing(
    tier: TierConfig,
    prices: PriceTable,
    out: _Lines,
    usage: Usage,
    allocations: list[GpuAllocation],
    nat_gb_per_month: float | None,
) -> None:
    """Data the tier moves: NAT pulls, interface endpoints, WAF requests, GWLB endpoints, FSx across AZs."""
    if tier.network.nat_gateways:
        if nat_gb_per_month is None:
            base, peak, note = _nat_pull_gb(tier, allocations, usage)
        else:
            base = peak = nat_gb_per_month
            note = "given with --nat-gb-per-month"
        out.add(
            item="NAT gateway data processed",
            category="network",
            quantity=base,
            peak_quantity=peak,
            unit="GB",
            unit_price=prices.vpc.nat_gateway_per_gb,
            note=note,
            section="vpc",
        )
    if _interface_endpoints(tier):
        out.add(
            item="VPC interface endpoint data processed",
            category="network",
            quantity=usage.interface_endpoint_gb,
            unit="GB",
            unit_price=prices.vpc.interface_endpoint_per_gb,
            note=f"usage: {usage.interface_endpoint_gb:g} GB",
            section="vpc",
        )
    request_gb = usage.requests_per_month * usage.kib_per_request * 1024 / GB
    if tier.ingress.kind is not LoadBalancerKind.NLB and tier.ingress.waf.enabled:
        out.add(
            item="AWS WAF requests",
            category="security",
            quantity=usage.requests_per_month / 1e6,
            unit="1M requests",
            unit_price=prices.waf.per_million_requests,
            note=f"usage: {usage.requests_per_month:g} requests",
            section="waf",
        )
    if tier.ingress.inspection.enabled:
        out.add(
            item="GWLB endpoint data processed",
            category="security",
            quantity=request_gb,
            unit="GB",
            unit_price=prices.data_transfer.gwlb_endpoint_per_gb,
            note=f"usage: {usage.requests_per_month:g} requests of {usage.kib_per_request:g} KiB",
            section="data_transfer",
        )
    if tier.model_store.kind is ModelStoreKind.FSX_LUSTRE:
        zones = len(tier.environment.availability_zones)
        share = (zones - 1) / zones
        base = peak = 0.0
        for model in tier.models:
            if not model.weights.startswith("s3://") or model.weights_gib is None:
                continue
            starts_base, starts_peak = _pod_starts(model, usage)
            base += starts_base * _gib_to_gb(model.weights_gib) * share
            peak += starts_peak * _gib_to_gb(model.weights_gib) * share
        out.add(
            item="Cross-AZ reads from FSx for Lustre",
            category="network",
            quantity=base,
            peak_quantity=peak,
            unit="GB",
            unit_price=2 * prices.data_transfer.inter_az_per_gb,
            note=f"the file system sits in one AZ: {zones - 1} of {zones} pod starts read weights from "
            "another, billed on both sides",
            section="data_transfer",
        )


def _nlb_in_front(out: _Lines, prices: PriceTable, *, label: str, lcu_note: str) -> None:
    """An internal NLB gpufarm puts in front of the ALB (PrivateLink's, the gateway's): its hours
    and LCUS_PER_HOUR capacity units."""
    hours = prices.hours_per_month
    out.add(
        item=f"{label} Network Load Balancer",
        category="network",
        quantity=1,
        unit="LB-month",
        unit_price=prices.elb.nlb_per_hour * hours,
        section="elb",
    )
    out.add(
        item=f"{label} NLB capacity units",
        category="network",
        quantity=LCUS_PER_HOUR,
        unit="NLCU-month",
        unit_price=prices.elb.nlb_per_lcu_hour * hours,
        note=lcu_note,
        section="elb",
    )


def _regions(tier: TierConfig, prices: PriceTable, out: _Lines) -> None:
    """With `regions`: this region's Route 53 health check and its alarm, and in a secondary
    region the model bucket's replica (the other regions' stacks are estimated on their own)."""
    if not tier.regions.enabled:
        return
    region = tier.environment.region
    out.add(
        item="Route 53 health checks",
        category="network",
        quantity=1,
        unit="health check-month",
        unit_price=prices.route53.health_check_per_month,
        note=f"{region}'s alarm health check (Route 53 lists 50 AWS-endpoint checks per account free); "
        "its alias record's queries are free",
        section="route53",
    )
    out.add(
        item="CloudWatch alarms (Route 53 health check)",
        category="network",
        quantity=1,
        unit="alarm-month",
        unit_price=prices.cloudwatch.alarm_per_month,
        note="the gateway's healthy hosts, read by the health check",
        section="cloudwatch",
    )
    secondary = tier.secondary_region
    if secondary is None or secondary.model_bucket is None:
        return
    gib = sum(m.weights_gib or 0 for m in tier.models if m.is_s3)
    out.add(
        item="S3 model replica",
        category="storage",
        quantity=gib * GIB / GB,
        unit="GB-month",
        unit_price=prices.s3.standard_per_gb_month,
        note=f"the models' weights in s3://{secondary.model_bucket} (more if the bucket holds more); "
        "replication's transfer is billed once per object written",
        section="s3",
    )


def _monitoring(tier: TierConfig, prices: PriceTable, out: _Lines, usage: Usage) -> None:
    """CloudWatch alarms and dashboard, Managed Grafana, the access-log bucket."""
    obs = tier.observability
    if obs.alarms.enabled:
        # A SageMaker tier's load balancer has one target group, the gateway's.
        models = 0 if tier.cluster.provisioning is Provisioning.SAGEMAKER else len(endpoints_of(tier))
        targets = models + int(tier.fallback.enabled)
        if tier.ingress.kind is LoadBalancerKind.NLB:
            alarms = targets + 1  # unhealthy hosts per target group, TCP resets
        else:  # 5xx and error rate, then p99 and unhealthy hosts per target group, optimizer rejects
            alarms = 2 + 2 * targets + int(tier.ingress.target_optimizer.enabled)
        alarms += sagemaker_wake_alarms(tier)
        out.add(
            item=f"CloudWatch alarms ({alarms})",
            category="observability",
            quantity=alarms,
            unit="alarm-month",
            unit_price=prices.cloudwatch.alarm_per_month,
            note="before the account's 10 free alarms",
            section="cloudwatch",
        )
    if obs.dashboard:
        out.add(
            item="CloudWatch dashboard",
            category="observability",
            quantity=1,
            unit="dashboard-month",
            unit_price=prices.cloudwatch.dashboard_per_month,
            note="before the account's 3 free dashboards",
            section="cloudwatch",
        )
    if obs.grafana.enabled:
        out.add(
            item="Managed Grafana editor license",
            category="observability",
            quantity=1,
            unit="license-month",
            unit_price=prices.grafana.editor_per_month,
            note="every workspace needs one editor license; add one per active editor",
            section="grafana",
        )
    logs = tier.ingress.access_logs
    if logs.enabled:
        gb = usage.requests_per_month * usage.access_log_bytes_per_request / GB
        months = _months_kept(logs.retention_days)
        out.add(
            item="S3 access logs (load balancer)",
            category="observability",
            quantity=gb * months,
            unit="GB-month",
            unit_price=prices.s3.standard_per_gb_month,
            note=f"usage: {usage.requests_per_month:g} requests of {usage.access_log_bytes_per_request:g} "
            f"bytes, kept {logs.retention_days} days",
            section="s3",
        )


def _amp_rules(
    tier: TierConfig, prices: PriceTable, out: _Lines, series_base: float, series_peak: float
) -> None:
    """AMP alerting rules: each evaluation reads the scraped series over its window."""
    prom = tier.observability.prometheus
    window = RULE_WINDOW_SECONDS / prom.scrape_interval_seconds
    out.add(
        item="AMP query samples (rules)",
        category="observability",
        quantity=series_base * window * RULE_EVALUATIONS_PER_MONTH / 1e9,
        peak_quantity=series_peak * window * RULE_EVALUATIONS_PER_MONTH / 1e9,
        unit="billion samples",
        unit_price=prices.amp.query_per_billion_samples,
        note=f"estimate: the alerting rules read every series over {RULE_WINDOW_SECONDS}s once a minute",
        section="amp",
    )


def _guardrail(
    tier: TierConfig, prices: PriceTable, out: _Lines, fallback_share: float, tokens_per_month: float | None
) -> None:
    """Bedrock Guardrail content filters on the fallback path: text units of prompts and completions."""
    guard = prices.bedrock_guardrails
    tokens = (tokens_per_month or 0.0) * fallback_share
    units = tokens * CHARACTERS_PER_TOKEN / guard.text_unit_characters
    out.add(
        item="Bedrock Guardrail text units",
        category="fallback",
        quantity=units / 1000,
        unit="1K text units",
        unit_price=guard.content_filter_per_1k_text_units,
        note=(
            f"{fallback_share:g} of the tokens at {CHARACTERS_PER_TOKEN} characters per token, "
            "prompts and completions both screened"
            if tokens
            else "nothing screened without --fallback-share and --tokens-per-month"
        ),
        section="bedrock_guardrails",
    )
