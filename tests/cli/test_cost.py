"""`gpufarm cost`: exit codes, messages, the table and the `--json` document."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from gpufarm.cli.cost import REMOVED_RESERVED_DISCOUNT
from gpufarm.cli.main import app
from gpufarm.config import load_preset
from gpufarm.pricing import PriceTable, load_prices
from tests.unit.factories import make_enterprise, split

REPO = Path(__file__).resolve().parents[2]
H = 730
runner = CliRunner(env={"COLUMNS": "300"})


@pytest.fixture(autouse=True)
def fixed_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test prices on one day (1.35 in standard support), so none moves with the calendar."""
    monkeypatch.setattr("gpufarm.cli.cost.today", lambda: dt.date(2026, 12, 1))


def run(*args: str) -> Result:
    return runner.invoke(app, ["cost", *args])


def said(text: str) -> str:
    """Text with its line wrapping undone."""
    return " ".join(text.split())


def document(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def line(estimate: dict[str, Any], item: str) -> dict[str, Any]:
    found = [x for x in estimate["lines"] if x["item"].startswith(item)]
    assert len(found) == 1
    return found[0]


def write_assembly(folder: Path, stacks: dict[str, dict[str, Any] | None]) -> Path:
    """A cloud assembly with one template per stack; None writes a stack without a gpufarm tier."""
    folder.mkdir(parents=True, exist_ok=True)
    artifacts: dict[str, Any] = {"Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}}}
    for name, tier in stacks.items():
        template: dict[str, Any] = {"Resources": {}}
        if tier is not None:
            template["Metadata"] = {"gpufarm:tier": tier}
        (folder / f"{name}.template.json").write_text(json.dumps(template))
        artifacts[name] = {
            "type": "aws:cloudformation:stack",
            "properties": {"templateFile": f"{name}.template.json"},
        }
    (folder / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": artifacts}))
    return folder


# --------------------------------------------------------------------------- success


def test_preset_json_document() -> None:
    doc = document(run("--tier", "production", "--json"))
    estimate = doc["estimates"][0]
    assert (estimate["stack"], estimate["tier"], estimate["prices"]["as_of"]) == (
        "gpufarm-production",
        "production",
        "2026-12-02",
    )


def test_json_gpu_line_is_priced_from_the_table() -> None:
    estimate = document(run("--tier", "production", "--json"))["estimates"][0]
    got = line(estimate, "GPU pool serving")
    assert (got["capacity_type"], got["quantity"], got["monthly_usd"]) == (
        "on-demand",
        2,
        round(2 * 10.49264 * H, 2),
    )


def test_json_total_is_the_sum_of_its_lines() -> None:
    estimate = document(run("--tier", "production", "--json"))["estimates"][0]
    assert estimate["total_usd"] == pytest.approx(sum(x["monthly_usd"] for x in estimate["lines"]), abs=0.05)


def test_json_lists_the_estimated_figures() -> None:
    doc = document(run("--tier", "poc", "--json"))
    assert "ec2.spot_discount" in doc["estimated_figures"]


def test_a_commitment_lowers_the_usage_it_covers() -> None:
    # An EC2 Instance Savings Plan of $33/h at 40% off covers $55/h of p5 usage (33 / 0.6): the
    # whole of one p5.48xlarge ($55.04/h) but 4 cents. The fee is paid every hour.
    spec = "kind=ec2-instance-savings-plan,family=p5,usd_per_hour=33,discount=0.4,term=3y"
    plain = document(run("--tier", "enterprise", "--json"))["estimates"][0]
    estimate = document(run("--tier", "enterprise", "--commitment", spec, "--json"))["estimates"][0]
    fee = line(estimate, "Commitment: EC2 Instance Savings Plan p5 $33/h, 3y, 40% off on-demand")
    covered = line(estimate, "Usage covered by the commitment: EC2 Instance Savings Plan p5")
    assert (fee["monthly_usd"], covered["monthly_usd"]) == (round(33 * H, 2), round(-55 * H, 2))
    assert estimate["total_usd"] == pytest.approx(plain["total_usd"] + 33 * H - 55 * H, abs=0.05)
    assert estimate["commitments"] == [
        {
            "kind": "ec2-instance-savings-plan",
            "term": "3y",
            "discount": 0.4,
            "usd_per_hour": 33.0,
            "family": "p5",
            "instance_type": None,
            "count": None,
            "created_by_stack": False,
        }
    ]
    # The all-on-demand comparison is the same with or without the plan; only the saving moves.
    figures = estimate["figures"]["floor"]
    assert figures["all_on_demand_usd"] == plain["figures"]["floor"]["all_on_demand_usd"]
    assert figures["saving_share"] == round(1 - figures["total_usd"] / figures["all_on_demand_usd"], 4)


def test_enterprise_prints_floor_expected_ceiling_and_the_all_on_demand_line() -> None:
    result = run("--tier", "enterprise")
    assert result.exit_code == 0
    totals = result.stdout[result.stdout.index("totals (USD)") :]
    for label in ("Floor", "Expected", "Ceiling", "Same capacity all on-demand", "Saving vs all on-demand"):
        assert label in totals
    # The preset buys no commitment and its ODCRs bill on-demand: no saving at the floor.
    assert re.search(r"Saving vs all on-demand\s*│\s*0\.0%", totals)


def test_busy_share_moves_the_expected_figure_between_floor_and_ceiling() -> None:
    def figures(share: str) -> dict[str, Any]:
        doc = document(run("--tier", "production", "--busy-share", share, "--json"))
        return dict(doc["estimates"][0]["figures"])

    zero, one, half = figures("0"), figures("1"), figures("0.5")
    assert zero["expected"]["total_usd"] == zero["floor"]["total_usd"]
    assert one["expected"]["total_usd"] == one["ceiling"]["total_usd"]
    assert half["expected"]["total_usd"] == pytest.approx(
        (half["floor"]["total_usd"] + half["ceiling"]["total_usd"]) / 2, abs=0.05
    )


def test_removed_reserved_discount_names_its_replacement() -> None:
    result = run("--tier", "enterprise", "--reserved-discount", "0.3")
    assert (result.exit_code, said(result.stderr)) == (2, REMOVED_RESERVED_DISCOUNT)
    assert "--commitment" in REMOVED_RESERVED_DISCOUNT


def test_fallback_share_adds_bedrock_and_cost_per_token() -> None:
    args = ("--tier", "enterprise", "--fallback-share", "0.05", "--tokens-per-month", "2000000000", "--json")
    estimate = document(run(*args))["estimates"][0]
    bedrock = [x for x in estimate["lines"] if x["item"].startswith("Bedrock fallback")]
    # Both figures are rounded from the unrounded total: they may differ in the last place.
    assert (len(bedrock), estimate["usd_per_million_tokens"]) == (
        4,
        pytest.approx(estimate["total_usd"] / 2000, abs=1e-4),
    )


def test_table_output_lists_lines_and_totals() -> None:
    result = run("--tier", "production")
    assert result.exit_code == 0
    shown = ("Item [unit]", "GPU pool serving: g6e.12xlarge [instance-month]", "Total", "Instances: spot")
    assert all(text in result.stdout for text in shown)


def test_tier_file(tmp_path: Path) -> None:
    file = tmp_path / "tier.yaml"
    file.write_text("extends: production\nname: team-a\nnetwork:\n  nat_gateways: 1\n")
    estimate = document(run("--tier-file", str(file), "--json"))["estimates"][0]
    assert (estimate["stack"], line(estimate, "NAT gateways")["quantity"]) == ("gpufarm-team-a", 1)


def test_a_tier_in_extended_support_is_priced_at_the_extended_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gpufarm.cli.cost.today", lambda: dt.date(2026, 12, 2))
    file = tmp_path / "tier.yaml"
    file.write_text("extends: poc\ncluster:\n  kubernetes_version: '1.34'\n")
    estimate = document(run("--tier-file", str(file), "--json"))["estimates"][0]
    control_plane = line(estimate, "EKS control plane")
    assert (control_plane["unit_price"], control_plane["note"]) == (
        pytest.approx(0.60 * H),
        "Kubernetes 1.34 in extended support since 2026-12-02: $0.60 instead of $0.10 per cluster-hour",
    )
    assert any(n.startswith("Kubernetes 1.34 is in EKS extended support") for n in estimate["notes"])
    text = run("--tier-file", str(file))
    assert "note: Kubernetes 1.34 is in EKS extended support" in said(text.stderr)


def test_a_tier_in_standard_support_is_priced_at_the_standard_rate() -> None:
    estimate = document(run("--tier", "poc", "--json"))["estimates"][0]
    assert line(estimate, "EKS control plane")["unit_price"] == pytest.approx(0.10 * H)


def test_assembly_gives_one_estimate_per_gpufarm_stack(tmp_path: Path) -> None:
    folder = write_assembly(
        tmp_path / "cdk.out",
        {
            "gpufarm-poc": load_preset("poc").model_dump(mode="json"),
            "gpufarm-production": load_preset("production").model_dump(mode="json"),
            "other-stack": None,
        },
    )
    doc = document(run("--assembly", str(folder), "--json"))
    assert [e["stack"] for e in doc["estimates"]] == ["gpufarm-poc", "gpufarm-production"]


def test_assembly_with_a_model_split_into_shares(tmp_path: Path) -> None:
    """The tier as a template carries it: each share's GPUs on its own pool's instance type."""
    tier = make_enterprise(split())
    folder = write_assembly(tmp_path / "cdk.out", {"gpufarm-enterprise": tier.model_dump(mode="json")})
    estimate = document(run("--assembly", str(folder), "--json"))["estimates"][0]
    got = line(estimate, "GPU pool l40s: g6e.12xlarge")
    assert (got["capacity_type"], got["quantity"], got["monthly_usd"]) == (
        "on-demand",
        1,
        round(10.49264 * H, 2),
    )
    assert not [x for x in estimate["lines"] if x["item"].startswith("GPU pool h100-burst")]


def test_assembly_follows_nested_assemblies(tmp_path: Path) -> None:
    outer = tmp_path / "cdk.out"
    write_assembly(outer / "assembly-Prod", {"gpufarm-poc": load_preset("poc").model_dump(mode="json")})
    manifest = {
        "version": "48.0.0",
        "artifacts": {
            "Prod": {"type": "cdk:cloud-assembly", "properties": {"directoryName": "assembly-Prod"}}
        },
    }
    (outer / "manifest.json").write_text(json.dumps(manifest))
    assert [e["stack"] for e in document(run("--assembly", str(outer), "--json"))["estimates"]] == [
        "gpufarm-poc"
    ]


def test_prices_file_overrides_the_table(tmp_path: Path) -> None:
    file = tmp_path / "prices.yaml"
    file.write_text("ec2:\n  spot_discounts:\n    g6e: 0.7\n")
    estimate = document(run("--tier", "production", "--prices", str(file), "--json"))["estimates"][0]
    assert line(estimate, "GPU pool batch")["unit_price"] == pytest.approx(10.49264 * 0.3 * H)


# --------------------------------------------------------------------------- --live


def test_live_without_credentials_falls_back_to_the_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # On a day the shipped table (every section read 2026-12-02) is 91 days old, the stale-table
    # warning comes first, before AWS is asked.
    monkeypatch.setattr("gpufarm.cli.cost.today", lambda: dt.date(2027, 3, 3))
    result = run("--tier", "poc", "--live", "--json")
    assert result.exit_code == 0
    assert said(result.stderr) == (
        "warning: the price table is 91 days old on 2027-03-03 (read 2026-12-02; more than 90 days: "
        "amp, bedrock, bedrock_guardrails, bedrock_provisioned, capacity_blocks, cloudwatch, "
        "data_transfer, ebs, ebs_performance, ec2, ecr, eks, elb, fsx_lustre, grafana, kms, route53, s3, "
        "sagemaker, secrets_manager, vpc, waf); "
        "list prices may have changed: refresh them with --prices FILE, or --live for EC2 "
        "warning: live prices unavailable (Unable to locate credentials); using the price table "
        "dated 2026-12-02"
    )


def test_live_fallback_is_reported_in_the_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufarm.aws import pricing as aws_pricing

    def refuse(*args: Any, **kwargs: Any) -> PriceTable:
        raise aws_pricing.LivePricingError("An error occurred (ThrottlingException)")

    monkeypatch.setattr(aws_pricing, "live_prices", refuse)
    doc = document(run("--tier", "poc", "--live", "--json"))
    assert doc["warnings"] == [
        "warning: live prices unavailable (An error occurred (ThrottlingException)); using the price "
        "table dated 2026-12-02"
    ]


def test_live_prices_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufarm.aws import pricing as aws_pricing

    asked: dict[str, Any] = {}

    def fake(region: str, instance_types: list[str], **kwargs: Any) -> PriceTable:
        asked.update(region=region, types=instance_types, zones=kwargs["availability_zones"])
        return load_prices().with_ec2(
            on_demand_per_hour={"g6e.2xlarge": 2.0},
            spot_per_hour={},
            region=region,
            source="live",
            as_of=load_prices().as_of,
        )

    monkeypatch.setattr(aws_pricing, "live_prices", fake)
    estimate = document(run("--tier", "poc", "--live", "--region", "us-west-2", "--json"))["estimates"][0]
    assert (line(estimate, "GPU pool l40s")["unit_price"], asked["region"], asked["zones"]) == (
        pytest.approx(2.0 * H),
        "us-west-2",
        None,
    )


def test_live_asks_for_the_tiers_instance_types_in_its_zones(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufarm.aws import pricing as aws_pricing

    asked: dict[str, Any] = {}

    def fake(region: str, instance_types: list[str], **kwargs: Any) -> PriceTable:
        asked.update(region=region, types=instance_types, zones=kwargs["availability_zones"])
        return load_prices()

    monkeypatch.setattr(aws_pricing, "live_prices", fake)
    document(run("--tier", "poc", "--live", "--json"))
    assert (asked["region"], asked["zones"], "g6e.xlarge" in asked["types"]) == (
        "us-east-1",
        ["us-east-1a", "us-east-1b"],
        True,
    )


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give exactly one of --tier, --tier-file or --assembly, got none"),
        (
            ("--tier", "poc", "--tier-file", "x.yaml"),
            "give exactly one of --tier, --tier-file or --assembly, got --tier and --tier-file",
        ),
        (
            ("--tier", "poc", "--tier-file", "x.yaml", "--assembly", "cdk.out"),
            "give exactly one of --tier, --tier-file or --assembly, got --tier, --tier-file and --assembly",
        ),
        (
            ("--tier", "staging"),
            "unknown tier 'staging': the presets are ec2-poc, enterprise, poc, production, sagemaker-poc",
        ),
        (
            ("--tier", "poc", "--reserved-discount", "0.3"),
            "--reserved-discount was removed: reserved capacity bills at the on-demand rate (an ODCR) "
            "or its Capacity Block rate; give the Savings Plan or Reserved Instance that lowers it with "
            "--commitment, such as --commitment kind=ec2-instance-savings-plan,family=p5,usd_per_hour=30,"
            "discount=0.4,term=3y (see docs/cli.md)",
        ),
        (
            ("--tier", "poc", "--busy-share", "1.5"),
            "--busy-share must be a share from 0 to 1 (such as 0.3), got 1.5",
        ),
        (
            ("--tier", "poc", "--capacity-block-days", "20"),
            "--capacity-block-days: capacity_block_days must be 1 to 14 days, or a multiple of 7 up to "
            "182 (the durations AWS sells), got 20",
        ),
        (
            ("--tier", "poc", "--commitment", "kind=savings-plan,term=1y"),
            "--commitment: commitment 'kind=savings-plan,term=1y': kind must be one of "
            "compute-savings-plan, ec2-instance-savings-plan, reserved-instance, got 'savings-plan'",
        ),
        (
            ("--tier", "poc", "--commitment", "kind=compute-savings-plan,term=1y,discount=0.2"),
            "--commitment: commitment 'kind=compute-savings-plan,term=1y,discount=0.2': "
            "compute-savings-plan needs usd_per_hour",
        ),
        (
            ("--tier", "poc", "--fallback-share", "1.5", "--tokens-per-month", "1e9"),
            "--fallback-share must be a share from 0 to 1 (such as 0.05), got 1.5",
        ),
        (
            ("--tier", "poc", "--fallback-share", "-0.05", "--tokens-per-month", "1e9"),
            "--fallback-share must be a share from 0 to 1 (such as 0.05), got -0.05",
        ),
        (
            ("--tier", "poc", "--fallback-share", "0.05"),
            "--fallback-share 0.05 needs --tokens-per-month (the tokens the tier serves in a month)",
        ),
        (
            ("--tier", "poc", "--tokens-per-month", "0"),
            "--tokens-per-month must be a number of tokens above 0, got 0",
        ),
        (("--tier", "poc", "--nat-gb-per-month", "-5"), "--nat-gb-per-month must be at least 0, got -5"),
        (
            ("--tier", "poc", "--region", "us-west-2"),
            "--region applies only with --live (the price table is for us-east-1)",
        ),
    ],
)
def test_bad_options(args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert (result.exit_code, said(result.stderr)) == (2, message)


def test_missing_assembly(tmp_path: Path) -> None:
    result = run("--assembly", str(tmp_path / "nothing"))
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"{str(tmp_path / 'nothing')!r} is not a folder",
    )


def test_assembly_without_a_gpufarm_stack(tmp_path: Path) -> None:
    folder = write_assembly(tmp_path / "cdk.out", {"other-stack": None})
    result = run("--assembly", str(folder))
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"cannot read the cloud assembly {str(folder)!r}: no stack carries Metadata 'gpufarm:tier' "
        "(synthesize it with this version of gpufarm)",
    )


def test_assembly_with_a_broken_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "cdk.out"
    folder.mkdir()
    (folder / "manifest.json").write_text("{not json")
    result = run("--assembly", str(folder))
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"cannot read {str(folder / 'manifest.json')!r}: not JSON (Expecting property "
        "name enclosed in double quotes at line 1 column 2)",
    )


def test_assembly_with_an_invalid_tier(tmp_path: Path) -> None:
    tier = load_preset("poc").model_dump(mode="json") | {"colour": "red"}
    folder = write_assembly(tmp_path / "cdk.out", {"gpufarm-poc": tier})
    result = run("--assembly", str(folder))
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"cannot read the cloud assembly {str(folder)!r}: stack 'gpufarm-poc' carries a tier that is "
        "not valid (colour: Extra inputs are not permitted)",
    )


def test_assembly_with_a_missing_template(tmp_path: Path) -> None:
    folder = write_assembly(tmp_path / "cdk.out", {"gpufarm-poc": load_preset("poc").model_dump(mode="json")})
    (folder / "gpufarm-poc.template.json").unlink()
    result = run("--assembly", str(folder))
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"cannot read the template of 'gpufarm-poc' ({str(folder / 'gpufarm-poc.template.json')!r}): "
        "No such file or directory",
    )


def test_invalid_tier_file(tmp_path: Path) -> None:
    file = tmp_path / "tier.yaml"
    file.write_text("extends: poc\nnetwork:\n  nat_gateways: 9\n")
    result = run("--tier-file", str(file))
    assert (result.exit_code, "network.nat_gateways" in result.stderr) == (2, True)


def test_invalid_prices_file(tmp_path: Path) -> None:
    file = tmp_path / "prices.yaml"
    file.write_text("ec2:\n  spot_discount: 2\n")
    result = run("--tier", "poc", "--prices", str(file))
    assert (result.exit_code, said(result.stderr)) == (
        2,
        f"{file} is not a valid price table: ec2.spot_discount: Input should be less than 1",
    )


def test_tier_needing_an_unpriced_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpufarm.cli.cost.today", lambda: dt.date(2026, 8, 1))  # a fresh table: one message
    file = tmp_path / "tier.yaml"
    file.write_text(
        "extends: poc\nnode_pools:\n  - name: l40s\n    instance_families: [p5e]\n"
        "    instance_types: [p5e.48xlarge]\n    gpu_limit: 8\n    expire_after: 336h\n"
    )
    result = run("--tier-file", str(file), "--json")
    assert (result.exit_code, said(result.stderr)) == (
        2,
        "gpufarm-poc: no EC2 on-demand price for 'p5e.48xlarge' in the price table (pool 'l40s' may "
        "launch p5e.48xlarge; add one under ec2.on_demand_per_hour in a --prices file)",
    )
