"""A tier with `regions` on the command line: one estimate and one preflight report per region's stack."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpufarm.cli.main import app
from tests.unit.factories import second_region

runner = CliRunner(env={"COLUMNS": "300"})


def _tier_file(tmp_path: Path) -> Path:
    file = tmp_path / "two-regions.yaml"
    file.write_text(yaml.safe_dump({"extends": "enterprise", **second_region()}), encoding="utf-8")
    return file


def test_cost_prints_an_estimate_per_regional_stack(tmp_path: Path) -> None:
    result = runner.invoke(app, ["cost", "--tier-file", str(_tier_file(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    estimates = json.loads(result.stdout)["estimates"]
    assert [e["stack"] for e in estimates] == ["gpufarm-enterprise", "gpufarm-enterprise-us-west-2"]
    items = [{line["item"] for line in e["lines"]} for e in estimates]
    assert "S3 model replica" in items[1] and "S3 model replica" not in items[0]
    assert all("Route 53 health checks" in i for i in items)


def test_preflight_offline_checks_each_region(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["preflight", "--tier-file", str(_tier_file(tmp_path)), "--offline", "--json"]
    )
    data = json.loads(result.stdout)
    assert data["region"] == "us-east-1"
    assert [r["region"] for r in data["regions"]] == ["us-west-2"]
    assert data["regions"][0]["region_source"] == "regions.secondary"
    # The example values of both regions fail the placeholder check: exit 1.
    assert result.exit_code == 1
