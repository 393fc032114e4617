"""The presets' monthly totals, each number derived here from the preset YAML and the table's unit
prices with the reason for it, so a change in the table, the presets or the rules shows as a
change in one named figure. docs/poc-cost.md explains the poc figure; docs/cli.md lists all three."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufarm.config import load_preset
from gpufarm.estimate import (
    AMP_BYTES_PER_SAMPLE,
    AMP_RETENTION_MONTHS,
    DCGM_SERIES_PER_GPU,
    GIB,
    KEDA_QUERY_WINDOW_SECONDS,
    VLLM_SERIES_PER_REPLICA,
    CostLine,
    Usage,
    monthly_cost,
)
from gpufarm.pricing import load_prices

P = load_prices()
U = Usage()
DAYS = 365 / 12  # days in an average month
H = 730  # hours AWS bills in a month
OD = P.ec2.on_demand_per_hour
AUTO_MODE_FEE = P.eks.auto_mode_fee_share
SECONDS = H * 3600
REPO = Path(__file__).resolve().parents[2]


def hourly(rate: float, count: float = 1) -> float:
    return rate * count * H


# --------------------------------------------------------------------------- poc

POC = {
    # 1.35 is in standard support: $0.10 per cluster-hour.
    "EKS control plane": hourly(P.eks.cluster_per_hour),
    # qwen3-8b asks 1 GPU, 6 CPU and 48 GiB: a g6e.xlarge (4 vCPUs, 32 GiB) cannot hold it, the
    # g6e.2xlarge is the cheapest L40S that can; 1 fixed replica, on-demand.
    "GPU g6e.2xlarge": hourly(OD["g6e.2xlarge"]),
    # Auto Mode's management fee on that instance (12% of on-demand, an estimate).
    "Auto Mode fee, GPU": hourly(OD["g6e.2xlarge"] * AUTO_MODE_FEE),
    # Two m7i.xlarge nodes assumed in Auto Mode's built-in system and general-purpose pools.
    "System nodes": hourly(OD["m7i.xlarge"], 2),
    "Auto Mode fee, system nodes": hourly(OD["m7i.xlarge"] * AUTO_MODE_FEE, 2),
    # Three Auto Mode nodes with 80 GiB root volumes.
    "EBS": 3 * 80 * P.ebs.gp3_per_gb_month,
    # One NAT gateway (network.nat_gateways: 1), no data priced by default.
    "NAT gateway": hourly(P.vpc.nat_gateway_per_hour),
    # ecr.api, ecr.dkr, sts, logs + bedrock-runtime for the fallback, in 2 AZs.
    "Interface endpoints": hourly(P.vpc.interface_endpoint_per_az_hour, 5 * 2),
    # The internal ALB and 1 LCU an hour.
    "ALB": hourly(P.elb.alb_per_hour) + hourly(P.elb.alb_per_lcu_hour),
    # The NAT gateway's public address; the ALB is internal and has none.
    "Public IPv4": hourly(P.data_transfer.public_ipv4_per_hour),
    # Usage defaults: 10 GB of images per GPU node launch, the one GPU node launched once; the
    # weights come from S3 through the gateway endpoint, off NAT. 50 GB through the interface
    # endpoints.
    "NAT and endpoint data": U.image_gb_per_node_launch * P.vpc.nat_gateway_per_gb
    + U.interface_endpoint_gb * P.vpc.interface_endpoint_per_gb,
    # The logs key, the EKS secrets key and the alarm topic's key, each with 100,000 requests.
    "KMS": 3 * P.kms.key_per_month + 3 * U.kms_requests_per_key / 1e4 * P.kms.per_10k_requests,
    # Five control-plane log types at 5 GB each, kept without expiry (12 months at steady state),
    # and 10 GB of VPC flow logs kept 30 days.
    "CloudWatch Logs": 5 * U.control_plane_log_gb_per_type * P.cloudwatch.logs_ingest_per_gb
    + 5 * U.control_plane_log_gb_per_type * U.unexpiring_log_months * P.cloudwatch.logs_storage_per_gb_month
    + U.flow_log_gb_per_vpc * P.cloudwatch.logs_ingest_per_gb
    + U.flow_log_gb_per_vpc * (30 / DAYS) * P.cloudwatch.logs_storage_per_gb_month,
    # 5xx and error-rate alarms, p99 latency and unhealthy hosts for the model's and the gateway's
    # target groups; the dashboard.
    "CloudWatch alarms and dashboard": (2 + 2 * 2) * P.cloudwatch.alarm_per_month
    + P.cloudwatch.dashboard_per_month,
    # 10 million requests of 500 bytes of ALB access log, kept 90 days in S3 Standard.
    "S3 access logs": U.requests_per_month
    * U.access_log_bytes_per_request
    / 1e9
    * (90 / DAYS)
    * P.s3.standard_per_gb_month,
}


def test_poc_total_is_its_reasons() -> None:
    estimate = monthly_cost(load_preset("poc"))
    # Fixed replicas: base and peak are the same bill.
    assert (estimate.total_usd, estimate.peak_total_usd) == (
        pytest.approx(sum(POC.values())),
        pytest.approx(sum(POC.values())),
    )


def test_poc_is_below_the_tiers_band_by_the_figure_the_docs_give() -> None:
    total = sum(POC.values())
    assert 2_000 < total < 3_000  # one L40S on-demand: below the $3K-10K the poc tier is sold at
    doc = (REPO / "docs" / "poc-cost.md").read_text(encoding="utf-8")
    assert f"**${total:,.0f} a month**" in doc


def test_poc_doc_breaks_the_figure_down_line_by_line() -> None:
    doc = (REPO / "docs" / "poc-cost.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| ([^|]+?) \| \$([\d,.]+) \|", doc, re.M))
    assert {k: float(v.replace(",", "")) for k, v in rows.items()} == {
        k: pytest.approx(round(v, 2), abs=0.006) for k, v in POC.items()
    }


def test_a_second_poc_replica_reaches_the_band() -> None:
    # The docs' example: replicas 2 adds one g6e.2xlarge and its Auto Mode fee, one more 80 GiB
    # root volume, and that node's image pull through NAT.
    from .factories import make_tier, model_override

    tier = make_tier(model_override(replicas=2))
    extra = (
        hourly(OD["g6e.2xlarge"]) * (1 + AUTO_MODE_FEE)
        + 80 * P.ebs.gp3_per_gb_month
        + U.image_gb_per_node_launch * P.vpc.nat_gateway_per_gb
    )
    assert monthly_cost(tier).total_usd == pytest.approx(sum(POC.values()) + extra)
    doc = (REPO / "docs" / "poc-cost.md").read_text(encoding="utf-8")
    assert f"${sum(POC.values()) + extra:,.0f}" in doc


# --------------------------------------------------------------------------- production and enterprise


def amp(series: float, scrape_seconds: int = 30) -> float:
    """Collected, ingested and stored cost of `series` scraped every `scrape_seconds` for a month."""
    samples = series * SECONDS / scrape_seconds
    stored_gb = samples * AMP_BYTES_PER_SAMPLE * AMP_RETENTION_MONTHS / GIB
    return (
        samples / 1e7 * (P.amp.collect_per_10m_samples + P.amp.ingest_per_10m_samples)
        + stored_gb * P.amp.storage_per_gb_month
    )


def keda(reads: float) -> float:
    """Query cost of KEDA reading `reads` replica series, each over its window, every poll."""
    return reads * KEDA_QUERY_WINDOW_SECONDS / 30 / 1e9 * P.amp.query_per_billion_samples


def production(peak: bool) -> dict[str, float]:
    serving, batch, system = (6, 2, 4) if peak else (2, 0, 2)
    replicas, gpus = (6 + 4, 24 + 8) if peak else (2, 8)
    # KEDA: 2 triggers on llama (min 2, max 6), 1 on qwen (min 0 counted as 1, max 4), every 15 s.
    polls = SECONDS / 15
    reads = polls * (2 * (6 if peak else 2) + 1 * (4 if peak else 1))
    return {
        "EKS control plane": hourly(P.eks.cluster_per_hour),
        # llama-3-3-70b: 4 GPUs, 16 CPU, 160 GiB x 2..6 replicas; a g6e.12xlarge holds one pod (its
        # 4 GPUs) and is the cheapest per GPU of the pool's types (g6e.48xlarge, p5.48xlarge cost more).
        "GPU serving": hourly(OD["g6e.12xlarge"], serving),
        # qwen3-32b-batch: 2 GPUs x 0..4 replicas on spot, 2 pods per g6e.12xlarge, at the g6e
        # family's observed spot discount.
        "GPU batch": hourly(P.spot("g6e.12xlarge"), batch),
        "System nodes": hourly(OD["m7i.2xlarge"], system),
        # Root volumes: serving 300 GiB, batch 200 GiB, system 50 GiB each.
        "EBS": (300 * serving + 200 * batch + 50 * system) * P.ebs.gp3_per_gb_month,
        # The smallest PERSISTENT_2 file system, 1.2 TiB = 1,200 GB, at 250 MB/s/TiB.
        "FSx": 1200 * P.fsx_per_gb_month(250),
        "NAT gateways": hourly(P.vpc.nat_gateway_per_hour, 3),
        # 10 configured endpoints + bedrock-runtime, in 3 AZs.
        "Interface endpoints": hourly(P.vpc.interface_endpoint_per_az_hour, 11 * 3),
        # The internet-facing ALB and the gateway's internal NLB, 1 capacity unit an hour each.
        "Load balancers": hourly(P.elb.alb_per_hour + P.elb.alb_per_lcu_hour)
        + hourly(P.elb.nlb_per_hour + P.elb.nlb_per_lcu_hour),
        # A web ACL with rate limit, common rule set and known bad inputs.
        "WAF": P.waf.web_acl_per_month + 3 * P.waf.rule_per_month,
        "AMP collector": hourly(P.amp.collector_per_hour),
        "AMP samples": amp(VLLM_SERIES_PER_REPLICA * replicas + DCGM_SERIES_PER_GPU * gpus),
        "KEDA queries": keda(reads),
    }


def enterprise(peak: bool) -> dict[str, float]:
    burst, background, system, appliances = (1, 2, 6, 6) if peak else (0, 0, 3, 3)
    replicas = (1 + 4 + 4) if peak else (1 + 1 + 0)
    gpus = 24 + (8 + 8 if peak else 0)
    polls = SECONDS / 15
    reads = polls * (2 * (4 if peak else 1) + 1 * (4 if peak else 1))
    return {
        "EKS control plane": hourly(P.eks.cluster_per_hour),
        # Three reserved p5.48xlarge (h100-base 1, h100-multinode 2), billed used or not.
        "GPU node groups": hourly(OD["p5.48xlarge"], 3),
        # llama-3-3-70b bursts past its reserved base at peak: one on-demand p5.48xlarge.
        "GPU burst": hourly(OD["p5.48xlarge"], burst),
        "GPU background": hourly(P.spot("g6e.12xlarge"), background),
        "System nodes": hourly(OD["m7i.2xlarge"], system),
        # Root volumes: node groups and burst 1,000 GiB, background 300, system 100.
        "EBS": (1000 * (3 + burst) + 300 * background + 100 * system) * P.ebs.gp3_per_gb_month,
        "FSx": 1200 * P.fsx_per_gb_month(500),
        "NAT gateways": hourly(P.vpc.nat_gateway_per_hour, 3),
        "Interface endpoints": hourly(P.vpc.interface_endpoint_per_az_hour, 13 * 3),
        # ALB with 100 reserved LCUs; the PrivateLink and gateway NLBs at 1 NLCU an hour each.
        "Load balancers": hourly(P.elb.alb_per_hour + 100 * P.elb.alb_per_lcu_hour)
        + 2 * hourly(P.elb.nlb_per_hour + P.elb.nlb_per_lcu_hour),
        "WAF": P.waf.web_acl_per_month + 3 * P.waf.rule_per_month,
        # GWLB inspection: the load balancer, 1 GLCU, an endpoint per AZ, the c6in.large appliances
        # and three Systems Manager endpoints per AZ.
        "Inspection": hourly(P.elb.gwlb_per_hour + P.elb.gwlb_per_lcu_hour)
        + hourly(P.vpc.gwlb_endpoint_per_az_hour, 3)
        + hourly(OD["c6in.large"], appliances)
        + hourly(P.vpc.interface_endpoint_per_az_hour, 9),
        "AMP collector": hourly(P.amp.collector_per_hour),
        "AMP samples": amp(VLLM_SERIES_PER_REPLICA * replicas + DCGM_SERIES_PER_GPU * gpus),
        "KEDA queries": keda(reads),
    }


# Lines priced from usage assumptions and from the small services' sections: each is derived in
# tests/unit/test_estimate_lines.py. The test below names them, so a capacity line cannot hide
# among them.
USAGE_SECTIONS = {"cloudwatch", "kms", "secrets_manager", "ebs_performance", "data_transfer", "grafana", "s3"}
USAGE_LINES = {
    "production": {
        "EBS gp3 throughput above baseline",
        "Public IPv4 addresses",
        "NAT gateway data processed",
        "VPC interface endpoint data processed",
        "Cross-AZ reads from FSx for Lustre",
        "KMS keys",
        "KMS requests",
        "Secrets Manager secrets",
        "Secrets Manager API calls",
        "ECR storage",
        "AWS WAF requests",
        "AMP query samples",
        "CloudWatch Logs ingestion: EKS control-plane logs",
        "CloudWatch Logs storage: EKS control-plane logs",
        "CloudWatch Logs ingestion: VPC flow logs",
        "CloudWatch Logs storage: VPC flow logs",
        "CloudWatch Logs ingestion: WAF logs",
        "CloudWatch Logs storage: WAF logs",
        "CloudWatch alarms",
        "CloudWatch dashboard",
        "Managed Grafana editor license",
        "S3 access logs",
    },
}
USAGE_LINES["enterprise"] = USAGE_LINES["production"] | {
    "GWLB endpoint data processed",
    "CloudWatch Logs ingestion: inspection VPC flow logs",
    "CloudWatch Logs storage: inspection VPC flow logs",
    "Bedrock Guardrail text units",
}


def _usage_line(line: CostLine) -> bool:
    return (
        line.price_section in USAGE_SECTIONS
        or line.price_section == "bedrock_guardrails"
        or line.note.startswith("usage:")
        or line.item == "AMP query samples (rules)"
    )


def _name(item: str) -> str:
    """The line's item without what follows it in parentheses (a count, a size, a use)."""
    return item.split(" (")[0]


@pytest.mark.parametrize(
    ("tier", "figures"),
    [
        ("production", production),
        ("enterprise", enterprise),
    ],
)
def test_preset_totals_are_their_reasons(tier: str, figures: object) -> None:
    assert callable(figures)
    estimate = monthly_cost(load_preset(tier))
    usage = [line for line in estimate.lines if _usage_line(line)]
    assert {_name(line.item) for line in usage} == USAGE_LINES[tier]
    capacity = [line for line in estimate.lines if not _usage_line(line)]
    assert (sum(line.monthly_usd for line in capacity), sum(line.peak_monthly_usd for line in capacity)) == (
        pytest.approx(sum(figures(peak=False).values())),
        pytest.approx(sum(figures(peak=True).values())),
    )
