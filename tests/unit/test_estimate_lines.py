"""The usage-billed lines of the estimate and the usage file (docs/cli.md, "Usage-billed lines").

Each expected figure is worked out here from the preset YAML, the table's unit prices and the
usage defaults, as the comment above it shows; none is copied from the estimate's output.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gpufarm.config import ConfigError, load_preset
from gpufarm.estimate import CostEstimate, monthly_cost
from gpufarm.estimate.usage import USAGE_KEYS, Usage, build_usage, load_usage
from gpufarm.pricing import PRICE_SECTIONS, PriceTable, load_prices

from .cost_lines import items, line
from .factories import make_production, make_tier, model_override

H = 730  # hours in the table's month
MONTH_DAYS = 365 / 12
GIB_IN_GB = 2**30 / 1e9


@pytest.fixture(scope="module")
def poc() -> CostEstimate:
    return monthly_cost(load_preset("poc"))


@pytest.fixture(scope="module")
def production() -> CostEstimate:
    return monthly_cost(load_preset("production"))


@pytest.fixture(scope="module")
def enterprise() -> CostEstimate:
    return monthly_cost(load_preset("enterprise"), fallback_share=0.05, tokens_per_month=2e9)


# --------------------------------------------------------------------------- CloudWatch Logs


def test_control_plane_logs_are_every_enabled_type_kept_a_year(enterprise: CostEstimate) -> None:
    # 5 log types x 5 GB = 25 GB at $0.50; EKS sets no retention: 12 months x 25 GB at $0.03.
    ingest = line(enterprise, "CloudWatch Logs ingestion: EKS control-plane logs")
    stored = line(enterprise, "CloudWatch Logs storage: EKS control-plane logs")
    assert (ingest.quantity, ingest.monthly_usd) == (25, pytest.approx(12.50))
    assert (stored.quantity, stored.monthly_usd) == (300, pytest.approx(9.00))


def test_enterprise_flow_logs_are_kept_365_days(enterprise: CostEstimate) -> None:
    # 10 GB a month kept 365 days: 12 months of 10 GB at $0.03.
    stored = line(enterprise, "CloudWatch Logs storage: VPC flow logs")
    assert (stored.quantity, stored.monthly_usd) == (pytest.approx(120), pytest.approx(3.60))
    assert line(enterprise, "CloudWatch Logs ingestion: VPC flow logs").monthly_usd == pytest.approx(5.00)


def test_production_flow_logs_follow_their_90_day_retention(production: CostEstimate) -> None:
    # 90 days = 90 / 30.42 months of 10 GB.
    stored = line(production, "CloudWatch Logs storage: VPC flow logs")
    assert stored.quantity == pytest.approx(10 * 90 / MONTH_DAYS)


def test_inspection_vpc_has_its_own_flow_logs(enterprise: CostEstimate) -> None:
    assert line(enterprise, "CloudWatch Logs ingestion: inspection VPC flow logs").quantity == 10


def test_waf_logs_record_every_request(production: CostEstimate) -> None:
    # 10M requests x 1,500 bytes = 15 GB at $0.50, kept 90 days.
    ingest = line(production, "CloudWatch Logs ingestion: WAF logs")
    stored = line(production, "CloudWatch Logs storage: WAF logs")
    assert (ingest.quantity, ingest.monthly_usd) == (pytest.approx(15), pytest.approx(7.50))
    assert stored.quantity == pytest.approx(15 * 90 / MONTH_DAYS)


def test_no_logs_lines_for_what_a_tier_turns_off() -> None:
    tier = make_tier({"network": {"flow_logs": {"enabled": False}}, "cluster": {"control_plane_logging": []}})
    assert [i for i in items(monthly_cost(tier)) if i.startswith("CloudWatch Logs")] == []


# --------------------------------------------------------------------------- addresses, keys, secrets


def test_public_ipv4_counts_nat_gateways_and_an_internet_facing_alb(production: CostEstimate) -> None:
    # 3 NAT gateways + 3 ALB nodes (one per AZ) x $0.005 x 730 h.
    got = line(production, "Public IPv4 addresses")
    assert (got.quantity, got.monthly_usd) == (6, pytest.approx(6 * 0.005 * H))


def test_an_internal_alb_has_no_public_address(poc: CostEstimate) -> None:
    # The poc's ALB is internal: only its one NAT gateway's address.
    assert line(poc, "Public IPv4 addresses").quantity == 1


def test_kms_keys_and_requests(production: CostEstimate) -> None:
    # Logs, EKS secrets, alarm topic and file system keys: 4 x $1; 4 x 100,000 requests at $0.03 per 10,000.
    assert line(production, "KMS keys").monthly_usd == pytest.approx(4.0)
    assert line(production, "KMS requests").monthly_usd == pytest.approx(40 * 0.03)


def test_secrets_manager_bills_the_secrets_the_tier_reads(production: CostEstimate) -> None:
    # The gateway's master key secret and the image cache's Docker Hub and GHCR credentials:
    # 3 x $0.40, and 3 x 10,000 calls at $0.05 per 10,000.
    assert line(production, "Secrets Manager secrets (3 referenced)").monthly_usd == pytest.approx(1.20)
    assert line(production, "Secrets Manager API calls").monthly_usd == pytest.approx(0.15)


def test_a_hugging_face_token_is_a_secret_too(poc: CostEstimate) -> None:
    # The poc gateway names no master key secret: no secret until a model reads a token.
    assert not [i for i in items(poc) if i.startswith("Secrets Manager")]
    tier = make_tier(model_override(hf_token_secret="gpufarm/hf-token"))
    assert line(monthly_cost(tier), "Secrets Manager secrets").quantity == 1


# --------------------------------------------------------------------------- EBS performance


def test_gpu_root_volume_throughput_above_the_baseline(production: CostEstimate) -> None:
    # 500 MiB/s provisioned - 125 included = 375 MiB/s per GPU node at $0.04; 2 nodes at base
    # (the serving pool's 2 g6e.12xlarge), 8 at peak (6 serving, 2 batch).
    got = line(production, "EBS gp3 throughput above baseline")
    assert (got.quantity, got.peak_quantity) == (2 * 375, 8 * 375)
    assert got.monthly_usd == pytest.approx(2 * 375 * 0.04)


def test_iops_at_the_baseline_add_no_line(production: CostEstimate) -> None:
    assert not [i for i in items(production) if i.startswith("EBS gp3 IOPS")]


def test_auto_mode_volumes_have_no_performance_line(poc: CostEstimate) -> None:
    assert not [i for i in items(poc) if i.startswith("EBS gp3 throughput")]


# --------------------------------------------------------------------------- data


def test_nat_data_is_the_images_each_gpu_node_pulls(poc: CostEstimate) -> None:
    # 1 GPU node, replaced once a month, pulls 10 GB of images through NAT: $0.045 per GB.
    got = line(poc, "NAT gateway data processed")
    assert (got.quantity, got.monthly_usd) == (10, pytest.approx(10 * 0.045))
    assert "no weights_gib for qwen3-8b" in got.note


def test_nat_data_adds_hugging_face_weights_per_pod_start() -> None:
    # The poc model's 16 GiB of Hugging Face weights, one pod start a month, plus 10 GB of images.
    got = line(monthly_cost(make_tier(model_override(weights_gib=16))), "NAT gateway data processed")
    assert got.quantity == pytest.approx(10 + 16 * GIB_IN_GB)


def test_nat_data_at_peak_adds_the_daily_scale_ups() -> None:
    # Without the image cache. S3 weights stay off NAT. Base: 2 nodes x 1 launch x 10 GB. Peak: 8
    # nodes x 1 launch and the 6 above base launched 30 more times: (8 + 6 x 30) x 10 GB.
    got = line(
        monthly_cost(make_production({"images": {"pull_through_cache": False}})), "NAT gateway data processed"
    )
    assert (got.quantity, got.peak_quantity) == (20, (8 + 6 * 30) * 10)


def test_with_the_cache_rules_only_images_still_cross_the_nat() -> None:
    # The first deploy (rules created, pods still pulling upstream): the 20 GB of the base stay.
    tier = make_production({"images": {"cache_rules_only": True}})
    assert line(monthly_cost(tier), "NAT gateway data processed").quantity == 20


def test_through_the_image_cache_no_image_crosses_the_nat(production: CostEstimate) -> None:
    # Nodes pull from ECR through the VPC endpoints; ECR fetches from the upstream itself. The
    # production weights are on S3 behind the gateway endpoint: nothing is left on NAT.
    got = line(production, "NAT gateway data processed")
    assert (got.quantity, got.peak_quantity) == (0, 0)
    # The cache stores what one GPU node runs, 10 GB by default, at $0.10 per GB-month.
    cache = line(production, "ECR storage (image cache)")
    assert (cache.quantity, cache.monthly_usd) == (10, pytest.approx(1.00))


def test_a_given_nat_volume_replaces_the_derived_one() -> None:
    got = line(monthly_cost(load_preset("poc"), nat_gb_per_month=500), "NAT gateway data processed")
    assert (got.quantity, got.note) == (500, "given with --nat-gb-per-month")


def test_interface_endpoint_and_waf_request_data(production: CostEstimate) -> None:
    # 50 GB at $0.01; 10M requests at $0.60 per million.
    assert line(production, "VPC interface endpoint data processed").monthly_usd == pytest.approx(0.50)
    assert line(production, "AWS WAF requests").monthly_usd == pytest.approx(6.00)


def test_gwlb_endpoints_process_every_request(enterprise: CostEstimate) -> None:
    # 10M requests x 16 KiB = 163.84 GB at $0.0035.
    got = line(enterprise, "GWLB endpoint data processed")
    assert (got.quantity, got.monthly_usd) == (pytest.approx(163.84), pytest.approx(163.84 * 0.0035))


def test_cross_az_reads_from_a_single_az_file_system(production: CostEstimate) -> None:
    # Base: the 70B model's 2 pod starts read 132 GiB; 2 of 3 AZs are not the file system's.
    # Billed $0.01 on each side.
    got = line(production, "Cross-AZ reads from FSx for Lustre")
    gb = 2 * 132 * GIB_IN_GB * 2 / 3
    assert (got.quantity, got.unit_price) == (pytest.approx(gb), pytest.approx(0.02))


# --------------------------------------------------------------------------- monitoring, fallback


def test_alarms_dashboard_grafana_and_access_logs(production: CostEstimate) -> None:
    # 9 alarms: 5xx, error rate, p99 + unhealthy for 2 models and the gateway, optimizer rejects.
    assert line(production, "CloudWatch alarms (9)").monthly_usd == pytest.approx(0.90)
    assert line(production, "CloudWatch dashboard").monthly_usd == pytest.approx(3.0)
    assert line(production, "Managed Grafana editor license").monthly_usd == pytest.approx(9.0)
    # 10M requests x 500 bytes = 5 GB a month, kept 365 days: 12 months at $0.023.
    assert line(production, "S3 access logs").quantity == pytest.approx(5 * 12)


def test_guardrail_screens_the_fallback_tokens(enterprise: CostEstimate) -> None:
    # 5% of 2e9 tokens x 4 characters = 4e8 characters = 400 thousand text units at $0.15.
    got = line(enterprise, "Bedrock Guardrail text units")
    assert (got.quantity, got.monthly_usd) == (pytest.approx(400), pytest.approx(60.0))


def test_guardrail_without_fallback_traffic_is_zero_and_says_why() -> None:
    got = line(monthly_cost(load_preset("enterprise")), "Bedrock Guardrail text units")
    assert (got.monthly_usd, got.note) == (
        0,
        "nothing screened without --fallback-share and --tokens-per-month",
    )


def test_usage_changes_the_lines_it_drives() -> None:
    base = monthly_cost(load_preset("production"))
    busy = monthly_cost(load_preset("production"), usage=Usage(requests_per_month=50_000_000))
    assert line(busy, "AWS WAF requests").monthly_usd == pytest.approx(
        5 * line(base, "AWS WAF requests").monthly_usd
    )


# --------------------------------------------------------------------------- the usage file


def test_usage_file_sets_some_keys_and_keeps_the_rest(tmp_path: Path) -> None:
    file = tmp_path / "usage.yaml"
    file.write_text("requests_per_month: 50000000\ncontrol_plane_log_gb_per_type: 12\n")
    got = load_usage(file)
    assert (got.requests_per_month, got.control_plane_log_gb_per_type, got.flow_log_gb_per_vpc) == (
        5e7,
        12,
        10,
    )


def test_the_docs_usage_example_loads(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    block = text.split("$ cat usage.yaml\n", 1)[1].split("$ gpufarm cost", 1)[0]
    file = tmp_path / "usage.yaml"
    file.write_text(block)
    assert load_usage(file).requests_per_month == 50_000_000


def test_the_docs_list_every_usage_key_with_its_default() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    defaults = Usage().to_json()
    for key in USAGE_KEYS:
        assert f"| `{key}` | {defaults[key]:,.0f} |" in text, key


KEYS = ", ".join(USAGE_KEYS)


@pytest.mark.parametrize(
    ("content", "issue"),
    [
        ("request_per_month: 5\n", f"request_per_month: unknown key; the keys are {KEYS}"),
        ("requests_per_month: -1\n", "requests_per_month: must be a number of at least 0, got -1"),
        ("requests_per_month: lots\n", "requests_per_month: must be a number of at least 0, got 'lots'"),
        ("requests_per_month: true\n", "requests_per_month: must be a number of at least 0, got true"),
        ("requests_per_month: .nan\n", "requests_per_month: must be a number of at least 0, got nan"),
        ("flow_log_gb_per_vpc: .inf\n", "flow_log_gb_per_vpc: must be a number of at least 0, got inf"),
        ("- 1\n", "must hold a mapping of usage keys, got a list"),
        ("a: [\n", "is not valid YAML"),
    ],
)
def test_invalid_usage_file(tmp_path: Path, content: str, issue: str) -> None:
    file = tmp_path / "usage.yaml"
    file.write_text(content)
    with pytest.raises(ConfigError) as caught:
        load_usage(file)
    assert str(caught.value).startswith(f"invalid usage file {str(file)!r}:\n  - {issue}")


def test_every_problem_in_a_usage_document_is_reported() -> None:
    with pytest.raises(ConfigError) as caught:
        build_usage({"kib_per_request": -2, "scale_ups_per_month": "daily"})
    assert str(caught.value) == (
        "invalid usage:\n"
        "  - kib_per_request: must be a number of at least 0, got -2\n"
        "  - scale_ups_per_month: must be a number of at least 0, got 'daily'"
    )


def test_missing_usage_file(tmp_path: Path) -> None:
    file = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match="cannot be read: No such file or directory"):
        load_usage(file)


def test_an_empty_usage_file_keeps_every_default(tmp_path: Path) -> None:
    file = tmp_path / "usage.yaml"
    file.write_text("")
    assert load_usage(file) == Usage()


# --------------------------------------------------------------------------- the new table sections

NEW_SECTIONS = (
    "cloudwatch",
    "kms",
    "secrets_manager",
    "ebs_performance",
    "data_transfer",
    "bedrock_guardrails",
    "grafana",
    "s3",
)


def test_every_section_is_listed_sourced_and_dated() -> None:
    prices = load_prices()
    assert set(NEW_SECTIONS) <= set(PRICE_SECTIONS)
    assert set(PRICE_SECTIONS) == set(PriceTable.model_fields) - {
        "as_of",
        "region",
        "currency",
        "hours_per_month",
    }
    for name in NEW_SECTIONS:
        section = getattr(prices, name)
        assert (bool(section.source.strip()), section.as_of) == (True, dt.date(2026, 12, 2)), name


def test_figures_no_primary_source_showed_are_marked_as_estimates() -> None:
    assert {
        "cloudwatch.vended_logs_ingest_per_gb",
        "cloudwatch.logs_storage_per_gb_month",
        "data_transfer.gwlb_endpoint_per_gb",
        "kms.key_per_month",
    } <= set(load_prices().estimated_figures())


def test_every_estimate_of_a_new_section_names_one_of_its_figures() -> None:
    prices = load_prices()
    for name in NEW_SECTIONS:
        section = getattr(prices, name)
        assert set(section.estimates) <= set(type(section).model_fields), name
