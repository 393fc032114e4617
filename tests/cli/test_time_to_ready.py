"""`gpufarm cost` and `gpufarm plan` print each model's time to ready, its terms and its warnings."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpufarm.cli.main import app
from gpufarm.config import ModelConfig, load_preset
from gpufarm.core.cold_start import tier_times_to_ready, time_to_ready, wake_gap_seconds

LLAMA_70B = [
    "--params-b",
    "70",
    "--precision",
    "fp8",
    "--layers",
    "80",
    "--kv-heads",
    "8",
    "--head-dim",
    "128",
]
PLAN = [*LLAMA_70B, "--concurrency", "10", "--target-tokens-per-s", "20"]


@pytest.fixture(autouse=True)
def fixed_day(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpufarm.cli.cost.today", lambda: dt.date(2026, 12, 1))


def _run(*args: str, columns: int = 300) -> Any:
    return CliRunner(env={"COLUMNS": str(columns)}).invoke(app, list(args))


def test_cost_json_carries_each_models_time_to_ready() -> None:
    result = _run("cost", "--tier", "production", "--json")
    assert result.exit_code == 0, result.stderr
    (estimate,) = json.loads(result.stdout)["estimates"]
    tier = load_preset("production")
    expected = []
    for ready in tier_times_to_ready(tier):
        model = next(m for m in tier.models if m.name == ready.model)
        gap = wake_gap_seconds(tier, model, ready)
        expected.append({**ready.to_json(), "wake_gap_seconds": None if gap is None else math.ceil(gap)})
    assert estimate["time_to_ready"] == expected
    assert [e["wake_gap_seconds"] is not None for e in expected] == [False, True]  # the batch model parks


def test_cost_table_shows_every_term_and_fits_80_columns() -> None:
    result = _run("cost", "--tier", "production", columns=80)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    section = out[out.index("gpufarm-production: time to ready") :]
    assert all(len(line) <= 80 for line in section.splitlines())
    for term in ("node launch", "image pull", "weight load", "engine", "wake gap"):
        assert term in section
    tier = load_preset("production")
    total = tier_times_to_ready(tier)[0].seconds
    assert total is not None and f"{math.ceil(total):,}" in section


def test_cost_warns_about_a_cooldown_shorter_than_a_wake(tmp_path: Path) -> None:
    file = tmp_path / "tier.yaml"
    file.write_text(
        "extends: production\nname: team-a\nmodels:\n"
        + "".join(f"  - {json.dumps(m)}\n" for m in _production_models(cooldown_seconds=120)),
        encoding="utf-8",
    )
    result = _run("cost", "--tier-file", str(file), "--json")
    assert result.exit_code == 0, result.stderr
    warnings = json.loads(result.stdout)["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith(
        "models[1].autoscaling.cooldown_seconds: 120 s is shorter than "
        "'qwen3-32b-batch''s expected time to ready"
    )
    assert "warning: models[1].autoscaling.cooldown_seconds: 120 s" in " ".join(result.stderr.split())


def _production_models(*, cooldown_seconds: int) -> list[dict[str, Any]]:
    import yaml

    from gpufarm.config.loader import PRESET_DIR

    models: list[dict[str, Any]] = yaml.safe_load((PRESET_DIR / "production.yaml").read_text())["models"]
    models[1]["autoscaling"]["cooldown_seconds"] = cooldown_seconds
    return models


def test_plan_prints_the_planned_models_time_to_ready_on_its_preset() -> None:
    result = _run("plan", *PLAN, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    tier = load_preset(data["tier"])
    # The planned model joins the preset's first pool and reads from the preset's store.
    model = ModelConfig(
        name="planned",
        weights="s3://planned-model/weights/",
        gpus=data["layout"]["gpus_per_replica"],
        weights_gib=data["memory"]["weights_bytes"] / 2**30,
        node_pool=tier.node_pools[0].name,
    )
    ready = time_to_ready(tier, model)
    assert data["time_to_ready"]["seconds"] == math.ceil(ready.seconds or 0)
    assert set(data["time_to_ready"]["terms"]) == {
        "node launch",
        "image pull",
        "weight load",
        "engine warm-up",
    }


def test_plan_table_fits_80_columns() -> None:
    result = _run("plan", *PLAN, columns=80)
    assert result.exit_code == 0, result.stderr
    section = result.stdout[result.stdout.index("Time to ready on") : result.stdout.index("Notes")]
    assert "weight load" in section
    assert all(len(line) <= 80 for line in section.splitlines())


def test_plan_with_write_times_the_model_in_the_written_tier(tmp_path: Path) -> None:
    from gpufarm.config import load_tier_file

    target = tmp_path / "t.yaml"
    result = _run(
        "plan",
        *PLAN,
        "--write",
        str(target),
        "--weights",
        "org/model",
        "--public-weights",
        "--no-fallback",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    tier = load_tier_file(target)
    (model,) = [m for m in tier.models if m.name == "model"]
    if model.weights_gib is None:  # the plan's weight memory sizes the download
        model = model.model_copy(update={"weights_gib": data["memory"]["weights_bytes"] / 2**30})
    ready = time_to_ready(tier, model)
    assert ready.seconds is not None
    assert data["time_to_ready"]["model"] == "model"
    assert data["time_to_ready"]["seconds"] == math.ceil(ready.seconds or 0)
    # Hugging Face weights: the load term is the Hub's rate, not the preset's store.
    assert data["time_to_ready"]["terms"]["weight load"]["formula"].endswith("(hugging-face)")
