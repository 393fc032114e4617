"""`gpufarm cost --usage FILE`: the usage assumptions of the usage-billed lines, from a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from gpufarm.cli.main import app
from gpufarm.estimate.usage import Usage

runner = CliRunner(env={"COLUMNS": "300"})


def run(*args: str) -> Result:
    return runner.invoke(app, ["cost", *args])


def estimate_of(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def line(estimate: dict[str, Any], item: str) -> dict[str, Any]:
    (found,) = [x for x in estimate["lines"] if x["item"].startswith(item)]
    return found


def test_a_usage_file_drives_the_lines_it_names(tmp_path: Path) -> None:
    file = tmp_path / "usage.yaml"
    file.write_text("requests_per_month: 50000000\n")
    doc = estimate_of(run("--tier", "production", "--usage", str(file), "--json"))
    # 50M requests at $0.60 per million.
    assert line(doc["estimates"][0], "AWS WAF requests")["monthly_usd"] == 30.0
    assert doc["usage"] == {**Usage().to_json(), "requests_per_month": 50_000_000}


def test_without_a_usage_file_the_json_shows_the_defaults() -> None:
    assert estimate_of(run("--tier", "poc", "--json"))["usage"] == Usage().to_json()


def test_an_invalid_usage_file_exits_2_naming_the_key_and_value(tmp_path: Path) -> None:
    file = tmp_path / "usage.yaml"
    file.write_text("requests_per_month: -3\nrequests: 5\n")
    result = run("--tier", "poc", "--usage", str(file))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:3] == [
        f"invalid usage file {str(file)!r}:",
        "  - requests_per_month: must be a number of at least 0, got -3",
        "  - requests: unknown key; the keys are " + ", ".join(Usage().to_json()),
    ]


def test_a_missing_usage_file_exits_2(tmp_path: Path) -> None:
    result = run("--tier", "poc", "--usage", str(tmp_path / "absent.yaml"))
    assert (result.exit_code, result.stderr.splitlines()[1]) == (
        2,
        "  - cannot be read: No such file or directory",
    )
