"""GPU capacity and monthly cost of the presets, each line checked against the dated price table.

Expected figures are worked out here from the preset YAML and the table's unit prices, not by
calling the estimate's own helpers.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from gpufarm.config import build_tier, load_preset
from gpufarm.estimate import (
    CostEstimate,
    EstimateError,
    gpu_capacity,
    instance_types_of,
    monthly_cost,
    pool_capacity_type,
)
from gpufarm.pricing import CAPACITY_TYPES, PriceNotFoundError, PriceTableError, load_prices

from .cost_lines import items, line
from .factories import make_enterprise, make_tier, pool_override, production_document, share, split

PRICES = load_prices()
H = 730  # hours in the table's month
OD = PRICES.ec2.on_demand_per_hour
SPOT = 1 - 0.4  # the table's spot discount for a family without an observed one
SPOT_G6E = 1 - 0.60  # the table's observed spot discount of the g6e family


@pytest.fixture(scope="module")
def production() -> CostEstimate:
    return monthly_cost(load_preset("production"))


@pytest.fixture(scope="module")
def enterprise() -> CostEstimate:
    return monthly_cost(load_preset("enterprise"), fallback_share=0.05, tokens_per_month=2e9)


@pytest.fixture(scope="module")
def poc() -> CostEstimate:
    return monthly_cost(load_preset("poc"))


# --------------------------------------------------------------------------- the table


def test_table_is_dated_and_for_us_east_1() -> None:
    assert (PRICES.as_of.isoformat(), PRICES.region, PRICES.hours_per_month) == (
        "2026-12-02",
        "us-east-1",
        730,
    )


def test_table_gpu_prices_match_the_dated_facts() -> None:
    assert (OD["g6e.12xlarge"], OD["p5.48xlarge"], OD["p5en.48xlarge"]) == (10.49264, 55.04, 63.296)


def test_every_section_names_a_source() -> None:
    sections = ("ec2", "eks", "ebs", "vpc", "elb", "fsx_lustre", "amp", "waf", "bedrock")
    assert all(getattr(PRICES, s).source.strip() for s in sections)


def test_unsourced_figures_are_marked_as_estimates() -> None:
    assert {
        "ec2.spot_discount",
        "ec2.spot_discounts.g6e",
        "eks.auto_mode_fee_share",
        "bedrock.models",
        "fsx_lustre.500",
    } <= set(PRICES.estimated_figures())


def test_bedrock_price_of_an_inference_profile_is_its_models() -> None:
    price = PRICES.bedrock_model("us.meta.llama3-3-70b-instruct-v1:0")
    assert (price.input_per_million, price.output_per_million) == (0.72, 0.72)


def test_instance_hourly_by_capacity_type() -> None:
    on_demand = PRICES.on_demand("g6e.12xlarge")
    assert PRICES.instance_hourly("g6e.12xlarge", "on-demand", reserved_discount=0.3) == on_demand
    assert PRICES.instance_hourly("g6e.12xlarge", "spot", reserved_discount=0.3) == PRICES.spot(
        "g6e.12xlarge"
    )
    assert PRICES.instance_hourly("g6e.12xlarge", "reserved", reserved_discount=0.3) == pytest.approx(
        on_demand * 0.7
    )


def test_instance_monthly_is_every_capacity_type_for_the_instances() -> None:
    on_demand = PRICES.on_demand("g6e.12xlarge")
    got = PRICES.instance_monthly("g6e.12xlarge", 3, reserved_discount=0.25)
    assert list(got) == list(CAPACITY_TYPES) == ["reserved", "on-demand", "spot"]
    assert got == pytest.approx(
        {
            "reserved": on_demand * 0.75 * 3 * 730,
            "on-demand": on_demand * 3 * 730,
            "spot": PRICES.spot("g6e.12xlarge") * 3 * 730,
        }
    )


def test_bedrock_price_key_is_the_foundation_model_the_config_parser_names() -> None:
    # One parser (gpufarm.config.bedrock): 'eu.model' is a model ID of provider 'eu', not a
    # profile, so its price is looked up under the whole ID.
    with pytest.raises(PriceNotFoundError) as raised:
        PRICES.bedrock_model("eu.model")
    assert raised.value.key == "eu.model"
    assert str(raised.value) == (
        "no Amazon Bedrock price for 'eu.model' in the price table "
        "(add it under bedrock.models in a --prices file)"
    )


def test_bedrock_prices_of_the_preset_models() -> None:
    got = {k: (v.input_per_million, v.output_per_million) for k, v in PRICES.bedrock.models.items()}
    assert {
        "meta.llama3-1-8b-instruct-v1:0": (0.22, 0.22),
        "meta.llama3-3-70b-instruct-v1:0": (0.72, 0.72),
        "meta.llama3-1-405b-instruct-v1:0": (2.40, 2.40),
    }.items() <= got.items()


def test_spot_without_a_measured_price_applies_the_discount() -> None:
    # p5: no observed spot discount in the table, so the flat fallback applies.
    assert PRICES.spot("p5.48xlarge") == pytest.approx(55.04 * SPOT)


def test_spot_without_a_measured_price_applies_the_familys_observed_discount() -> None:
    assert PRICES.spot("g6e.12xlarge") == pytest.approx(10.49264 * SPOT_G6E)


def test_measured_spot_price_wins() -> None:
    live = PRICES.with_ec2(
        on_demand_per_hour={},
        spot_per_hour={"g6e.12xlarge": 3.0},
        region="us-east-1",
        source="x",
        as_of=PRICES.as_of,
    )
    assert live.spot("g6e.12xlarge") == 3.0


def test_prices_file_merges_over_the_table(tmp_path: Path) -> None:
    file = tmp_path / "prices.yaml"
    file.write_text("ec2:\n  spot_discount: 0.7\n  on_demand_per_hour:\n    g6e.12xlarge: 9.0\n")
    merged = load_prices(file)
    assert (merged.ec2.spot_discount, merged.on_demand("g6e.12xlarge"), merged.on_demand("p5.48xlarge")) == (
        0.7,
        9.0,
        55.04,
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- 1\n- 2\n", "must hold a mapping, got a list"),
        (
            "ec2:\n  spot_discount: 1.5\n",
            "is not a valid price table: ec2.spot_discount: Input should be less than 1",
        ),
        ("ec2:\n  colour: red\n", "is not a valid price table: ec2.colour: Extra inputs are not permitted"),
        ("ec2: [\n", "is not valid YAML"),
    ],
)
def test_invalid_prices_file(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "prices.yaml"
    file.write_text(content)
    with pytest.raises(PriceTableError) as info:
        load_prices(file)
    assert str(file) in str(info.value) and message in str(info.value)


def test_missing_prices_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"
    with pytest.raises(PriceTableError, match=r"cannot read the price file .*none\.yaml.*: No such file"):
        load_prices(missing)


# --------------------------------------------------------------------------- production


def test_production_control_plane(production: CostEstimate) -> None:
    assert line(production, "EKS control plane").monthly_usd == pytest.approx(0.10 * H)


def test_without_a_day_the_control_plane_is_priced_at_the_standard_rate() -> None:
    # 1.34 is in extended support from 2026-12-02, but no day asks for the calendar.
    got = line(monthly_cost(make_tier({"cluster": {"kubernetes_version": "1.34"}})), "EKS control plane")
    assert (got.monthly_usd, got.note) == (pytest.approx(0.10 * H), "")


def test_a_version_in_extended_support_bills_the_extended_rate() -> None:
    tier = make_tier({"cluster": {"kubernetes_version": "1.34"}})
    estimate = monthly_cost(tier, day=dt.date(2026, 12, 2))
    got = line(estimate, "EKS control plane")
    assert (got.unit_price, got.monthly_usd) == (pytest.approx(0.60 * H), pytest.approx(0.60 * H))
    assert (
        got.note
        == "Kubernetes 1.34 in extended support since 2026-12-02: $0.60 instead of $0.10 per cluster-hour"
    )
    assert [n for n in estimate.notes if n.startswith("Kubernetes")] == [
        "Kubernetes 1.34 is in EKS extended support (standard support ended 2026-12-02, extended support "
        "ends 2027-12-02); the cluster bills at the extended-support rate per cluster hour: set "
        "cluster.kubernetes_version to a version in standard support and upgrade the cluster"
    ]


def test_a_version_near_extended_support_keeps_the_standard_rate_with_a_note() -> None:
    estimate = monthly_cost(load_preset("poc"), day=dt.date(2027, 2, 1))  # 1.35: 54 days left
    got = line(estimate, "EKS control plane")
    assert (got.monthly_usd, got.note) == (
        pytest.approx(0.10 * H),
        "Kubernetes 1.35 leaves standard support on 2027-03-27: then $0.60 per cluster-hour",
    )
    assert any(
        n.startswith("Kubernetes 1.35 leaves EKS standard support on 2027-03-27 (in 54 days)")
        for n in estimate.notes
    )


def test_a_version_in_standard_support_has_no_note() -> None:
    estimate = monthly_cost(load_preset("poc"), day=dt.date(2026, 12, 1))
    assert line(estimate, "EKS control plane").note == ""
    assert not [n for n in estimate.notes if n.startswith("Kubernetes")]


def test_production_serving_pool_base(production: CostEstimate) -> None:
    # llama-3-3-70b: 4 GPUs x min 2 replicas = 8 GPUs -> 2 x g6e.12xlarge (4 GPUs, cheapest per GPU).
    got = line(production, "GPU pool serving: g6e.12xlarge")
    assert (got.capacity_type, got.quantity, got.monthly_usd) == (
        "on-demand",
        2,
        pytest.approx(2 * 10.49264 * H),
    )


def test_production_serving_pool_peak(production: CostEstimate) -> None:
    # 4 GPUs x max 6 replicas = 24 GPUs -> 6 instances.
    got = line(production, "GPU pool serving")
    assert (got.peak_quantity, got.peak_monthly_usd) == (6, pytest.approx(6 * 10.49264 * H))


def test_production_batch_pool_is_spot(production: CostEstimate) -> None:
    # qwen3-32b-batch: 2 GPUs x 0..4 replicas on a spot + on-demand pool: spot first.
    got = line(production, "GPU pool batch: g6e.12xlarge")
    assert (got.capacity_type, got.quantity, got.peak_quantity, got.peak_monthly_usd, got.note) == (
        "spot",
        0,
        2,
        pytest.approx(2 * 10.49264 * SPOT_G6E * H),
        "observed spot discount of the g6e family: 60% off on-demand",
    )


def test_production_system_nodes(production: CostEstimate) -> None:
    got = line(production, "System nodes: m7i.2xlarge")
    assert (got.quantity, got.peak_quantity, got.monthly_usd) == (2, 4, pytest.approx(2 * 0.4032 * H))


def test_bottlerocket_nodes_add_their_os_volume_to_the_ebs_line() -> None:
    # Bottlerocket boots from a 4 GiB OS volume beside the data volume the config sizes
    # (k8s.karpenter.block_device_mappings, constructs.reserved_capacity): a reserved group of
    # nodes switched to Bottlerocket bills 4 GiB more per node, always on.
    al2023 = make_enterprise()
    groups = [g.model_dump(mode="json") for g in al2023.node_groups]
    bottlerocket = make_enterprise(
        {"node_groups": [g | {"ami_type": "BOTTLEROCKET_x86_64_NVIDIA"} for g in groups]}
    )
    nodes = sum(g.nodes for g in al2023.node_groups)
    before = line(monthly_cost(al2023), "EBS gp3 node volumes")
    after = line(monthly_cost(bottlerocket), "EBS gp3 node volumes")
    assert after.quantity - before.quantity == 4 * nodes
    assert after.peak_quantity - before.peak_quantity == 4 * nodes


def test_production_node_volumes(production: CostEstimate) -> None:
    # The GPU pools run Bottlerocket: each node has its data volume and a 4 GiB OS volume.
    # base: 2 serving x (300 + 4) + 2 system x 50; peak: 6 x 304 + 2 batch x 204 + 4 system x 50.
    got = line(production, "EBS gp3 node volumes")
    assert (got.quantity, got.peak_quantity, got.monthly_usd) == (708, 2432, pytest.approx(708 * 0.08))


def test_production_fsx(production: CostEstimate) -> None:
    # (132 + 62) GiB x 1.3 headroom = 252 GiB -> the 1,200 GiB minimum, at 250 MB/s/TiB.
    got = line(production, "FSx for Lustre PERSISTENT_2 (250 MB/s/TiB)")
    assert (got.quantity, got.monthly_usd) == (1200, pytest.approx(1200 * 0.21))


def test_production_nat_gateway_per_az(production: CostEstimate) -> None:
    assert line(production, "NAT gateways").monthly_usd == pytest.approx(3 * 0.045 * H)


def test_production_interface_endpoints(production: CostEstimate) -> None:
    # 10 configured + bedrock-runtime for the gateway, in each of 3 AZs.
    assert line(production, "VPC interface endpoints").monthly_usd == pytest.approx(11 * 3 * 0.01 * H)


def test_production_alb(production: CostEstimate) -> None:
    assert line(production, "Application Load Balancer").monthly_usd == pytest.approx(0.0225 * H)


def test_production_alb_capacity_units(production: CostEstimate) -> None:
    assert line(production, "ALB capacity units").monthly_usd == pytest.approx(1 * 0.008 * H)


def test_production_waf(production: CostEstimate) -> None:
    # One web ACL; rate limit, common rule set and known bad inputs.
    waf = line(production, "AWS WAF web ACL").monthly_usd + line(production, "AWS WAF rules").monthly_usd
    assert waf == pytest.approx(5 + 3 * 1)


def test_production_amp_ingestion(production: CostEstimate) -> None:
    # base series: 600 x 2 vLLM replicas + 40 x 8 GPUs = 1,520, every 30 s for 730 h.
    samples = 1520 * H * 3600 / 30
    assert line(production, "AMP samples ingested").monthly_usd == pytest.approx(samples / 1e7 * 0.90)


def test_production_amp_collector(production: CostEstimate) -> None:
    assert line(production, "AMP managed collector").monthly_usd == pytest.approx(0.04 * H)


def test_production_has_no_bedrock_cost_without_a_share(production: CostEstimate) -> None:
    assert not [x for x in production.lines if x.category == "fallback"]


def test_production_total_is_the_sum_of_its_lines(production: CostEstimate) -> None:
    assert production.to_json()["total_usd"] == round(sum(x.monthly_usd for x in production.lines), 2)


def test_production_gpu_capacity_at_peak() -> None:
    assert gpu_capacity(load_preset("production")) == {"reserved": 0, "on-demand": 24, "spot": 8}


def test_production_gpu_capacity_at_base() -> None:
    assert gpu_capacity(load_preset("production"), peak=False) == {"reserved": 0, "on-demand": 8, "spot": 0}


def test_production_cost_by_capacity_type_at_peak(production: CostEstimate) -> None:
    expected = {
        "reserved": 0.0,
        "on-demand": 6 * 10.49264 * H + 4 * 0.4032 * H,
        "spot": 2 * 10.49264 * SPOT_G6E * H,
    }
    assert production.by_capacity_type(peak=True) == pytest.approx(expected)


# --------------------------------------------------------------------------- poc


def test_poc_gpu_pool(poc: CostEstimate) -> None:
    # qwen3-8b: 1 GPU, 6 CPU and 48 GiB x 1 replica. A g6e.xlarge (4 vCPUs, 32 GiB) cannot hold
    # the pod; the g6e.2xlarge (8 vCPUs, 64 GiB) is the cheapest L40S that can.
    got = line(poc, "GPU pool l40s: g6e.2xlarge")
    assert (got.capacity_type, got.quantity, got.monthly_usd) == ("on-demand", 1, pytest.approx(2.24208 * H))


def test_poc_auto_mode_fee(poc: CostEstimate) -> None:
    assert line(poc, "EKS Auto Mode fee: l40s").monthly_usd == pytest.approx(2.24208 * 0.12 * H)


def test_poc_system_nodes_in_auto_mode(poc: CostEstimate) -> None:
    got = line(poc, "System nodes: m7i.xlarge")
    assert (got.quantity, got.monthly_usd) == (2, pytest.approx(2 * 0.2016 * H))


def test_poc_single_nat_gateway(poc: CostEstimate) -> None:
    assert line(poc, "NAT gateways").monthly_usd == pytest.approx(1 * 0.045 * H)


def test_poc_interface_endpoints(poc: CostEstimate) -> None:
    # ecr.api, ecr.dkr, sts, logs + bedrock-runtime, in 2 AZs.
    assert line(poc, "VPC interface endpoints").monthly_usd == pytest.approx(5 * 2 * 0.01 * H)


def test_poc_has_no_fsx_amp_or_waf(poc: CostEstimate) -> None:
    assert not [i for i in items(poc) if i.startswith(("FSx", "AMP", "AWS WAF"))]


def test_poc_gpu_capacity() -> None:
    assert gpu_capacity(load_preset("poc")) == {"reserved": 0, "on-demand": 1, "spot": 0}


# --------------------------------------------------------------------------- enterprise


def test_enterprise_reserved_node_groups_bill_the_on_demand_rate(enterprise: CostEstimate) -> None:
    # An ODCR bills the on-demand rate; no commitment is given, so nothing lowers it.
    base = line(enterprise, "GPU node group h100-base: p5.48xlarge")
    assert (base.capacity_type, base.quantity, base.monthly_usd) == (
        "reserved",
        1,
        pytest.approx(1 * 55.04 * H),
    )
    multinode = line(enterprise, "GPU node group h100-multinode: p5.48xlarge")
    assert (multinode.capacity_type, multinode.quantity) == ("reserved", 2)


def test_enterprise_burst_pool_above_the_reserved_base(enterprise: CostEstimate) -> None:
    # Class h100 holds the 8 GPUs of h100-base (the 405B has a group of its own). Base: the 70B's
    # 1 x 4 GPUs fit the reserved node -> no burst instance. Peak: 4 x 4 = 16 -> 8 burst GPUs =
    # 1 x p5.48xlarge.
    got = line(enterprise, "GPU pool h100-burst: p5.48xlarge")
    assert (got.capacity_type, got.quantity, got.peak_quantity, got.monthly_usd) == (
        "on-demand",
        0,
        1,
        pytest.approx(0.0),
    )


def test_enterprise_background_pool_is_spot(enterprise: CostEstimate) -> None:
    got = line(enterprise, "GPU pool background: g6e.12xlarge")
    assert (got.capacity_type, got.peak_quantity, got.peak_monthly_usd) == (
        "spot",
        2,
        pytest.approx(2 * 10.49264 * SPOT_G6E * H),
    )


def test_enterprise_reserved_lcus(enterprise: CostEstimate) -> None:
    assert line(enterprise, "ALB capacity units").monthly_usd == pytest.approx(100 * 0.008 * H)


def test_enterprise_private_link_nlb(enterprise: CostEstimate) -> None:
    assert line(enterprise, "PrivateLink Network Load Balancer").monthly_usd == pytest.approx(0.0225 * H)


def test_the_gateway_nlb_is_priced_on_internet_facing_alb_tiers(
    production: CostEstimate, enterprise: CostEstimate
) -> None:
    """ADR 0050: the gateway calls an internet-facing ALB through an internal NLB of its own."""
    for estimate in (production, enterprise):
        assert line(estimate, "Gateway Network Load Balancer").monthly_usd == pytest.approx(0.0225 * H)
        assert line(estimate, "Gateway NLB capacity units").monthly_usd == pytest.approx(0.006 * H)
    poc = monthly_cost(load_preset("poc"))
    assert not [x for x in poc.lines if x.item.startswith("Gateway N")]


def test_enterprise_gateway_load_balancer(enterprise: CostEstimate) -> None:
    assert line(enterprise, "Gateway Load Balancer").monthly_usd == pytest.approx(0.0125 * H)


def test_enterprise_gwlb_endpoints(enterprise: CostEstimate) -> None:
    assert line(enterprise, "GWLB endpoints").monthly_usd == pytest.approx(3 * 0.01 * H)


def test_enterprise_inspection_appliances(enterprise: CostEstimate) -> None:
    got = line(enterprise, "Inspection appliances: c6in.large")
    assert (got.quantity, got.peak_quantity, got.monthly_usd) == (3, 6, pytest.approx(3 * 0.1134 * H))


def test_enterprise_interface_endpoints(enterprise: CostEstimate) -> None:
    # 12 configured + bedrock-runtime, 3 AZs; the inspection VPC adds 3 SSM endpoints per AZ.
    app = line(enterprise, "VPC interface endpoints").monthly_usd
    inspection = line(enterprise, "Inspection VPC interface endpoints").monthly_usd
    assert (app, inspection) == (pytest.approx(13 * 3 * 0.01 * H), pytest.approx(9 * 0.01 * H))


def test_enterprise_fsx(enterprise: CostEstimate) -> None:
    # (410 + 132 + 62) x 1.3 = 785 GiB -> 1,200 GiB at 500 MB/s/TiB.
    assert line(enterprise, "FSx for Lustre PERSISTENT_2 (500 MB/s/TiB)").monthly_usd == pytest.approx(
        1200 * 0.34
    )


def test_enterprise_bedrock_405b_input(enterprise: CostEstimate) -> None:
    # 2e9 tokens x 5% x (16 of 40 peak GPUs) x 75% input = 30M tokens at $2.40.
    got = line(enterprise, "Bedrock fallback llama-3-1-405b: meta.llama3-1-405b-instruct-v1:0 input")
    assert (got.quantity, got.monthly_usd) == (pytest.approx(30), pytest.approx(72))


def test_enterprise_bedrock_70b_output(enterprise: CostEstimate) -> None:
    # 2e9 x 5% x 16/40 x 25% output = 10M tokens at $0.72.
    got = line(enterprise, "Bedrock fallback llama-3-3-70b: us.meta.llama3-3-70b-instruct-v1:0 output")
    assert got.monthly_usd == pytest.approx(7.2)


def test_enterprise_model_without_bedrock_pays_nothing(enterprise: CostEstimate) -> None:
    assert any("No Bedrock cost for qwen3-32b-batch" in n for n in enterprise.notes)


def test_enterprise_cost_per_million_tokens(enterprise: CostEstimate) -> None:
    assert enterprise.usd_per_million_tokens == pytest.approx(enterprise.total_usd / 2000)


def test_enterprise_gpu_capacity() -> None:
    # Reserved: both node groups (8 + 16); on-demand: one burst p5 at peak; spot: the batch model.
    assert gpu_capacity(load_preset("enterprise")) == {"reserved": 24, "on-demand": 8, "spot": 8}


# --------------------------------------------------------------------------- a model split into shares


@pytest.fixture(scope="module")
def split_tier() -> CostEstimate:
    # The enterprise tier with an L40S pool (g6e.12xlarge only) and llama-3-3-70b split into
    # 2 x 4 GPUs on class h100 and 1 x 4 GPUs on l40s (fixed replicas: base = peak).
    return monthly_cost(make_enterprise(split()), fallback_share=0.05, tokens_per_month=2e9)


def test_a_share_on_its_own_pool_is_costed_on_that_pools_instance_type(split_tier: CostEstimate) -> None:
    got = line(split_tier, "GPU pool l40s: g6e.12xlarge")
    assert (got.capacity_type, got.quantity, got.peak_quantity, got.monthly_usd) == (
        "on-demand",
        1,
        1,
        pytest.approx(10.49264 * H),
    )


def test_a_share_on_a_class_fills_its_reserved_base_first(split_tier: CostEstimate) -> None:
    # The H100 share's 8 GPUs fit the one reserved h100-base node: no burst instance at all.
    assert not [i for i in items(split_tier) if i.startswith("GPU pool h100-burst")]
    assert line(split_tier, "GPU node group h100-base: p5.48xlarge").quantity == 1
    assert gpu_capacity(make_enterprise(split())) == {"reserved": 24, "on-demand": 4, "spot": 8}


def test_a_larger_share_bursts_within_its_class() -> None:
    # 3 x 4 = 12 GPUs on class h100: 8 on the base node, 4 on one burst p5.48xlarge.
    got = line(monthly_cost(make_enterprise(share(0, replicas=3))), "GPU pool h100-burst: p5.48xlarge")
    assert (got.quantity, got.peak_quantity) == (1, 1)


def test_share_gpus_weigh_the_models_bedrock_tokens(split_tier: CostEstimate) -> None:
    # 70B: 2 x 4 + 1 x 4 = 12 of 36 peak GPUs (405B 16, batch 8): 2e9 x 5% x 12/36 x 25% output
    # = 8.33M tokens at $0.72.
    got = line(split_tier, "Bedrock fallback llama-3-3-70b: us.meta.llama3-3-70b-instruct-v1:0 output")
    assert got.monthly_usd == pytest.approx(2e9 * 0.05 * 12 / 36 * 0.25 / 1e6 * 0.72)


# --------------------------------------------------------------------------- rules


def test_pool_with_reserved_capacity_counts_as_reserved() -> None:
    doc = production_document()
    doc["node_pools"][0] |= {
        "capacity_types": ["reserved", "on-demand"],
        "reservation_ids": ["cr-0123456789abcdef0"],
    }
    assert pool_capacity_type(build_tier(doc).node_pools[0]) == "reserved"


def test_pool_narrowed_to_one_type_uses_it() -> None:
    doc = production_document()
    doc["node_pools"][0]["instance_types"] = ["p5.48xlarge"]
    got = line(monthly_cost(build_tier(doc)), "GPU pool serving")
    # 8 base GPUs fit one 8-GPU p5.48xlarge.
    assert (got.item, got.quantity) == ("GPU pool serving: p5.48xlarge", 1)


def test_measured_spot_price_prices_a_spot_pool() -> None:
    live = PRICES.with_ec2(
        on_demand_per_hour={},
        spot_per_hour={"g6e.12xlarge": 4.0},
        region="us-east-1",
        source="x",
        as_of=PRICES.as_of,
    )
    got = line(monthly_cost(load_preset("production"), prices=live), "GPU pool batch")
    assert got.unit_price == pytest.approx(4.0 * H)


def test_type_without_a_price_is_reported() -> None:
    # p5e.48xlarge: large enough for the poc model's pod, absent from the price table (no source
    # showed an on-demand price for it).
    tier = make_tier(pool_override(instance_families=["p5e"], instance_types=["p5e.48xlarge"], gpu_limit=8))
    with pytest.raises(PriceNotFoundError) as info:
        monthly_cost(tier)
    assert str(info.value) == (
        "no EC2 on-demand price for 'p5e.48xlarge' in the price table (pool 'l40s' may launch "
        "p5e.48xlarge; add one under ec2.on_demand_per_hour in a --prices file)"
    )


def test_other_region_is_noted() -> None:
    doc = production_document()
    doc["environment"] = {
        "region": "us-west-2",
        "availability_zones": ["us-west-2a", "us-west-2b", "us-west-2c"],
    }
    doc["ingress"]["certificate_arn"] = (
        "arn:aws:acm:us-west-2:111122223333:certificate/00000000-0000-4000-8000-000000000000"
    )
    for key in ("docker_hub_credential_arn", "github_credential_arn"):
        doc["images"][key] = doc["images"][key].replace("us-east-1", "us-west-2")
    notes = monthly_cost(build_tier(doc)).notes
    assert notes[0] == (
        "Prices are for us-east-1; the tier deploys to us-west-2 (use --live --region to price it there)."
    )


def test_nat_data_is_priced_per_gb() -> None:
    got = line(monthly_cost(load_preset("poc"), nat_gb_per_month=500), "NAT gateway data processed")
    assert got.monthly_usd == pytest.approx(500 * 0.045)


def test_instance_types_for_a_live_lookup() -> None:
    assert instance_types_of(load_preset("production")) == [
        "g6e.12xlarge",
        "g6e.16xlarge",
        "g6e.24xlarge",
        "g6e.2xlarge",
        "g6e.48xlarge",
        "g6e.4xlarge",
        "g6e.8xlarge",
        "g6e.xlarge",
        "m7i.2xlarge",
        "p5.48xlarge",
    ]


def test_json_document_carries_totals_and_lines(production: CostEstimate) -> None:
    doc = production.to_json()
    assert (doc["tier"], doc["prices"]["as_of"], len(doc["lines"])) == (
        "production",
        "2026-12-02",
        len(production.lines),
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"busy_share": -0.1}, "busy_share must be a share from 0 to 1, got -0.1"),
        ({"busy_share": 1.5}, "busy_share must be a share from 0 to 1, got 1.5"),
        (
            {"capacity_block_days": 15},
            "capacity_block_days must be 1 to 14 days, or a multiple of 7 up to 182 (the durations AWS "
            "sells), got 15",
        ),
        (
            {"capacity_block_days": 189},
            "capacity_block_days must be 1 to 14 days, or a multiple of 7 up to 182 (the durations AWS "
            "sells), got 189",
        ),
        (
            {"capacity_block_days": 0},
            "capacity_block_days must be 1 to 14 days, or a multiple of 7 up to 182 (the durations AWS "
            "sells), got 0",
        ),
        (
            {"fallback_share": 1.5, "tokens_per_month": 1e9},
            "fallback_share must be a share from 0 to 1, got 1.5",
        ),
        ({"tokens_per_month": 0}, "tokens_per_month must be a number of tokens above 0, got 0"),
        (
            {"fallback_share": 0.05},
            "fallback_share 0.05 needs tokens_per_month (the tokens the tier serves in a month)",
        ),
        ({"nat_gb_per_month": -1}, "nat_gb_per_month must be at least 0, got -1"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(EstimateError) as info:
        monthly_cost(load_preset("poc"), **kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_unknown_fsx_throughput_is_reported() -> None:
    with pytest.raises(PriceNotFoundError, match="no FSx for Lustre PERSISTENT_2 price for '200 MB/s/TiB'"):
        PRICES.fsx_per_gb_month(200)


# --------------------------------------------------------------------------- the docs


def _cost_docs() -> str:
    """The `gpufarm cost` section of docs/cli.md."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "## `gpufarm cost`" in text, "docs/cli.md has no `gpufarm cost` section"
    return text.split("## `gpufarm cost`", 1)[1]


def test_docs_preset_totals_are_current() -> None:
    rows = re.findall(
        r"^\| (poc|production|enterprise) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| "
        r"([\d.]+%) \| (\d+) / (\d+) / (\d+) \|$",
        _cost_docs(),
        re.M,
    )
    got = {
        name: (floor, expected, peak, on_demand, saving, (int(r), int(o), int(s)))
        for name, floor, expected, peak, on_demand, saving, r, o, s in rows
    }
    want = {}
    for name in ("poc", "production", "enterprise"):
        tier = load_preset(name)
        estimate = monthly_cost(tier)
        gpus = gpu_capacity(tier)
        want[name] = (
            f"{estimate.total_usd:,.0f}",
            f"{estimate.expected_total_usd:,.0f}",
            f"{estimate.peak_total_usd:,.0f}",
            f"{estimate.all_on_demand_at('ceiling'):,.0f}",
            f"{estimate.saving_at('ceiling'):.1%}",
            (gpus["reserved"], gpus["on-demand"], gpus["spot"]),
        )
    expected = want
    assert got == expected


def test_docs_prices_example_loads(tmp_path: Path) -> None:
    block = _cost_docs().split("```yaml\n", 1)[1].split("```", 1)[0]
    file = tmp_path / "prices.yaml"
    file.write_text(block)
    assert load_prices(file).on_demand("p5.48xlarge") == 39.80
