"""`gpufarm cost` for a fallback that names a Provisioned Throughput: the rate comes from --prices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from gpufarm.cli.main import app
from tests.unit.factories import poc_document

runner = CliRunner(env={"COLUMNS": "300"})
LLAMA_8B = "meta.llama3-1-8b-instruct-v1:0"
PROVISIONED = "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123def456"


def tier_file(tmp_path: Path) -> Path:
    document = poc_document()
    document["models"][0]["bedrock"] = {
        "model_id": PROVISIONED,
        "base_model_id": LLAMA_8B,
        "provisioned": {"model_units": 2, "commitment": "one-month"},
    }
    path = tmp_path / "tier.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_without_a_rate_the_cost_names_the_key_to_give_and_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["cost", "--tier-file", str(tier_file(tmp_path))])
    assert result.exit_code == 2
    assert " ".join(result.stderr.split()) == (
        "gpufarm-poc: no Amazon Bedrock Provisioned Throughput price for "
        f"'{LLAMA_8B} (one-month)' in the price table (add bedrock_provisioned.per_model_unit_hour."
        f"{LLAMA_8B}.one-month in a --prices file, at the hourly rate per model unit the Bedrock "
        "console showed when you bought it)"
    )


def test_the_rate_from_prices_bills_every_hour_of_the_month(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        yaml.safe_dump({"bedrock_provisioned": {"per_model_unit_hour": {LLAMA_8B: {"one-month": 20.5}}}}),
        encoding="utf-8",
    )
    result = runner.invoke(
        app, ["cost", "--tier-file", str(tier_file(tmp_path)), "--prices", str(prices), "--json"]
    )
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    [estimate] = data["estimates"]
    [line] = [x for x in estimate["lines"] if x["item"].startswith("Bedrock Provisioned Throughput")]
    # 2 model units x $20.50 an hour x 730 hours, the same at floor, expected and ceiling.
    assert (line["item"], line["quantity"], line["unit_price"], line["price_section"]) == (
        f"Bedrock Provisioned Throughput qwen3-8b: {LLAMA_8B} (one-month)",
        2,
        20.5 * 730,
        "bedrock_provisioned",
    )
    assert line["monthly_usd"] == line["expected_monthly_usd"] == line["peak_monthly_usd"] == 2 * 20.5 * 730
