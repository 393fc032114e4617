"""`gpufarm cost`: where each line's price comes from, and the warning for a stale price table."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from gpufarm.cli.main import app
from gpufarm.pricing import STALE_AFTER_DAYS, load_prices

runner = CliRunner(env={"COLUMNS": "300"})
OLDEST = load_prices().oldest_as_of()


def run(day: dt.date, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.setattr("gpufarm.cli.cost.today", lambda: day)
    return runner.invoke(app, ["cost", *args])


def document(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def said(text: str) -> str:
    return " ".join(text.split())


def test_a_table_90_days_old_draws_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    day = OLDEST + dt.timedelta(days=STALE_AFTER_DAYS)
    result = run(day, monkeypatch, "--tier", "poc", "--json")
    assert document(result)["price_table"] == {
        "as_of": OLDEST.isoformat(),
        "age_days": 90,
        "stale_after_days": 90,
        "stale": False,
        "warning": None,
    }
    assert "price table is" not in result.stderr


def test_a_table_91_days_old_is_flagged_in_the_json_and_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    day = OLDEST + dt.timedelta(days=STALE_AFTER_DAYS + 1)
    result = run(day, monkeypatch, "--tier", "poc", "--json")
    table = document(result)["price_table"]
    assert (table["age_days"], table["stale"]) == (91, True)
    assert table["warning"].startswith(f"the price table is 91 days old on {day.isoformat()}")
    assert said(result.stderr) == said(f"warning: {table['warning']}")


def test_the_text_output_warns_too(monkeypatch: pytest.MonkeyPatch) -> None:
    day = OLDEST + dt.timedelta(days=STALE_AFTER_DAYS + 1)
    result = run(day, monkeypatch, "--tier", "poc")
    assert result.exit_code == 0
    assert said(result.stderr).startswith(f"warning: the price table is 91 days old on {day.isoformat()}")


def test_every_line_names_the_section_its_price_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    estimate = document(run(OLDEST, monkeypatch, "--tier", "production", "--json"))["estimates"][0]
    sections = {line["item"]: line["price_section"] for line in estimate["lines"]}
    assert {
        "EKS control plane": "eks",
        "GPU pool serving: g6e.12xlarge": "ec2",
        "EBS gp3 node volumes": "ebs",
        "FSx for Lustre PERSISTENT_2 (250 MB/s/TiB)": "fsx_lustre",
        "NAT gateways": "vpc",
        "Application Load Balancer": "elb",
        "AWS WAF web ACL": "waf",
        "AMP managed collector": "amp",
    }.items() <= sections.items()
    assert None not in sections.values()
    table = load_prices()
    assert estimate["prices"]["dates"] == {
        name: getattr(table, name).as_of.isoformat() for name in estimate["prices"]["sources"]
    }


def test_the_text_output_lists_the_sections_it_priced_from(monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(OLDEST, monkeypatch, "--tier", "poc")
    # The sources table ends where the time-to-ready table begins.
    text = result.stdout.split("where the prices come from", 1)[1].split(": time to ready", 1)[0]
    cells = [row.split("│")[1:3] for row in text.splitlines() if row.startswith("│ ")]
    rows = [(name, read) for name, read in cells if name.strip()]  # a wrapped source leaves it blank
    listed = {name.strip(): read.strip() for name, read in rows}
    # The poc tier has no FSx, Prometheus, WAF, Grafana or Bedrock line, no secret and no GPU root
    # volume above the gp3 baseline: those sections are not listed. Its logs (cloudwatch), the NAT
    # gateway's public address (data_transfer), its keys (kms) and the ALB's access-log bucket (s3)
    # are.
    priced = ("eks", "ec2", "ebs", "vpc", "elb", "data_transfer", "kms", "cloudwatch", "s3")
    assert listed == {name: getattr(load_prices(), name).as_of.isoformat() for name in priced}


def test_a_spot_line_says_where_its_price_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    estimate = document(run(OLDEST, monkeypatch, "--tier", "production", "--json"))["estimates"][0]
    batch = next(x for x in estimate["lines"] if x["item"].startswith("GPU pool batch"))
    assert batch["note"] == "observed spot discount of the g6e family: 60% off on-demand"
