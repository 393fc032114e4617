"""The Grafana dashboards: what each shows, and that every PromQL expression parses and reads
only series that exist upstream (vLLM 0.31.0, the DCGM exporter's default counters)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config import load_preset
from gpufarm.config.model import LoadBalancerKind, TierConfig
from gpufarm.constructs.grafana_dashboards import (
    CLOUDWATCH_UID,
    GATEWAY_UID,
    GPU_FLEET_UID,
    MODELS_UID,
    PROMETHEUS_UID,
    GatewayTargets,
    bedrock_model_ids,
    dashboard_expressions,
    gateway_dashboard,
    gateway_expressions,
    gpu_fleet_dashboard,
    model_dashboard,
    pool_pods,
    tier_dashboards,
)
from gpufarm.k8s.alerting import ModelObjective, alert_rule_groups, gateway_objective
from tests.unit.factories import make_tier

UPSTREAM = Path(__file__).resolve().parents[3] / "shared" / "upstream-ref"
TIERS = ("poc", "production", "enterprise")
TARGETS = GatewayTargets(
    kind=LoadBalancerKind.ALB,
    load_balancer="app/gpufarm/0123456789abcdef",
    gateway="targetgroup/gateway/0123456789abcdef",
    models={"llama": "targetgroup/llama/0123456789abcdef"},
)


def _upstream_names() -> set[str]:
    vllm = json.loads((UPSTREAM / "vllm@0.31.0.json").read_text(encoding="utf-8"))["metrics"]
    dcgm = json.loads((UPSTREAM / "dcgm-exporter@4.6.0-metrics.json").read_text(encoding="utf-8"))
    return set(vllm) | set(dcgm["default_counters"])


def _titles(board: dict[str, Any]) -> list[str]:
    return [panel["title"] for panel in board["panels"]]


def _exprs(board: dict[str, Any], title: str) -> list[str]:
    (panel,) = [p for p in board["panels"] if p["title"] == title]
    return [t["expr"] for t in panel["targets"]]


@pytest.fixture(scope="module", params=TIERS)
def tier(request: pytest.FixtureRequest) -> TierConfig:
    return load_preset(request.param)


def test_model_dashboard_has_the_kpis_per_model(tier: TierConfig) -> None:
    board = model_dashboard(tier)
    assert board["uid"] == MODELS_UID
    assert _titles(board) == [
        "Time to first token (p50, p99)",
        "Time per output token (p50, p99)",
        "Tokens per second",
        "Queue: waiting and running requests per replica",
        "KV cache usage and prefix-cache hit rate",
        "Replicas serving",
    ]
    (variable,) = board["templating"]["list"]
    assert variable["name"] == "model"
    assert variable["query"] == ",".join(m.name for m in tier.models)
    for expr in dashboard_expressions(tier)[:11]:
        assert 'model=~"$model"' in expr
    assert _exprs(board, "Time to first token (p50, p99)")[0] == (
        "histogram_quantile(0.99, sum by (model, le) "
        '(rate(vllm:time_to_first_token_seconds_bucket{model=~"$model"}[5m])))'
    )


def test_every_panel_reads_the_provisioned_data_sources(tier: TierConfig) -> None:
    for board in tier_dashboards(tier, targets=TARGETS):
        for panel in board["panels"]:
            for target in panel["targets"]:
                assert target["datasource"] in (
                    {"type": "prometheus", "uid": PROMETHEUS_UID},
                    {"type": "cloudwatch", "uid": CLOUDWATCH_UID},
                )


def test_gpu_fleet_dashboard_by_node_and_by_pool() -> None:
    tier = load_preset("enterprise")
    board = gpu_fleet_dashboard(tier)
    assert board["uid"] == GPU_FLEET_UID
    assert _titles(board) == [
        "GPU utilization by node",
        "GPU utilization by pool",
        "GPU temperature by node",
        "GPU temperature by pool",
        "GPU memory used by node",
        "GPU memory used by pool",
        "XID errors by node and GPU",
    ]
    assert _exprs(board, "GPU utilization by node") == ["avg by (node) (DCGM_FI_DEV_GPU_UTIL)"]
    assert _exprs(board, "XID errors by node and GPU") == ["max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0"]
    (panel,) = [p for p in board["panels"] if p["title"] == "GPU utilization by pool"]
    assert [t["legendFormat"] for t in panel["targets"]] == sorted(pool_pods(tier))


def test_a_pool_selects_only_its_own_models_pods() -> None:
    tier = load_preset("production")
    pools = pool_pods(tier)
    for model in tier.models:
        from gpufarm.core.placement import placement_of

        for target in placement_of(tier, model):
            pattern = re.compile(pools[target.name])
            assert pattern.fullmatch(f"vllm-{model.name}-7d9f8c6b5-x2k4q")
            assert pattern.fullmatch(f"vllm-{model.name}-0-1")
            # Another model whose name extends this one's is not taken for it.
            assert not pattern.fullmatch(f"vllm-{model.name}-b-7d9f8c6b5-x2k4q")
            assert not pattern.fullmatch(f"vllm-{model.name}-router-7d9f8c6b5-x2k4q")


def test_gateway_dashboard_reads_the_gateway_counters_like_its_alerts() -> None:
    """With Prometheus, fallback rate and spend come from the gateway's counters, in the same
    expressions the FallbackRateHigh and BedrockSpendHigh alerts evaluate."""
    tier = load_preset("production")
    board = gateway_dashboard(tier, targets=TARGETS)
    assert board["uid"] == GATEWAY_UID
    assert _titles(board) == [
        "Fallback rate by model (% of answers from Bedrock)",
        "Bedrock spend over the last hour (USD, list prices)",
        "Time to first byte: gateway route against the direct routes (p99)",
        "Bedrock tokens per minute",
        "Bedrock charges, month to date (USD)",
    ]
    objective = gateway_objective(tier)
    assert objective is not None
    groups = alert_rule_groups(
        [ModelObjective(name=m.name, ttft_p99_seconds=2) for m in tier.models],
        error_rate_percent=5,
        gateway=objective,
    )
    (gateway_group,) = [g for g in groups if g["name"] == "gpufarm-gateway"]
    alerts = {r["alert"]: r["expr"] for r in gateway_group["rules"]}
    (rate,) = _exprs(board, "Fallback rate by model (% of answers from Bedrock)")
    assert alerts["FallbackRateHigh"] == f"{rate} > 5"
    (spend,) = _exprs(board, "Bedrock spend over the last hour (USD, list prices)")
    assert alerts["BedrockSpendHigh"] == f"{spend} > 20"
    # The preset's batch model has no Bedrock fallback: no fallback-rate series for it.
    assert 'model="qwen3-32b-batch"' not in rate
    latency = board["panels"][2]["targets"]
    assert [(t["statistic"], t["dimensions"]["TargetGroup"]) for t in latency] == [
        ("p99", TARGETS.gateway),
        ("p99", TARGETS.models["llama"]),
    ]
    assert board["panels"][4]["targets"][0]["region"] == "us-east-1"


def test_without_prometheus_the_fallback_rate_comes_from_cloudwatch() -> None:
    """No gateway counters to read: Bedrock invocations over the gateway route's requests."""
    tier = make_tier()  # poc: no Prometheus, so no gateway counters
    assert gateway_objective(tier) is None
    board = gateway_dashboard(tier, targets=TARGETS)
    assert _titles(board) == [
        "Fallback rate",
        "Time to first byte: gateway route against the direct routes (p99)",
        "Bedrock tokens per minute",
        "Bedrock charges, month to date (USD)",
    ]
    fallback = board["panels"][0]["targets"]
    ids = bedrock_model_ids(tier)
    assert [t["dimensions"] for t in fallback[: len(ids)]] == [{"ModelId": i} for i in ids]
    assert all(t["hide"] for t in fallback[:-1])
    assert fallback[-2]["dimensions"] == {
        "LoadBalancer": TARGETS.load_balancer,
        "TargetGroup": TARGETS.gateway,
    }
    assert fallback[-1]["expression"] == "100 * (" + " + ".join(f"b{i}" for i in range(len(ids))) + ") / g"
    assert gateway_expressions(tier) == []


def test_nlb_gateway_dashboard_has_no_alb_panels() -> None:
    tier = load_preset("production")
    nlb = GatewayTargets(
        kind=LoadBalancerKind.NLB, load_balancer="net/x/1", gateway="targetgroup/g/1", models={}
    )
    assert _titles(gateway_dashboard(tier, targets=nlb)) == [
        "Fallback rate by model (% of answers from Bedrock)",
        "Bedrock spend over the last hour (USD, list prices)",
        "Bedrock tokens per minute",
        "Bedrock charges, month to date (USD)",
    ]


def test_no_gateway_dashboard_without_a_gateway() -> None:
    tier = load_preset("production")
    assert [b["uid"] for b in tier_dashboards(tier, targets=None)] == [MODELS_UID, GPU_FLEET_UID]


def test_dashboards_are_deterministic(tier: TierConfig) -> None:
    first = json.dumps(tier_dashboards(tier, targets=TARGETS), sort_keys=True)
    assert json.dumps(tier_dashboards(tier, targets=TARGETS), sort_keys=True) == first


_SUFFIX = re.compile(r"_(bucket|sum|count|total)$")
_NAME = re.compile(r"\b(vllm:[a-z_:]+|DCGM_[A-Z0-9_]+)")


def test_every_series_exists_upstream(tier: TierConfig) -> None:
    known = _upstream_names()
    used = {_SUFFIX.sub("", name) for expr in dashboard_expressions(tier) for name in _NAME.findall(expr)}
    assert used, "no series found: the name pattern is wrong"
    assert used <= known, (
        f"not in vLLM 0.31.0 or the DCGM exporter's default counters: {sorted(used - known)}"
    )


def test_the_name_check_catches_a_made_up_series() -> None:
    known = _upstream_names()
    assert "vllm:time_to_first_token_seconds" in known
    assert _SUFFIX.sub("", "vllm:gpu_cache_usage_perc") not in known


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (Debian: prometheus)")
def test_promtool_parses_every_expression(tier: TierConfig, tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "dashboards",
                "rules": [
                    {"record": f"gpufarm:dashboard_{i}", "expr": expr}
                    for i, expr in enumerate(dashboard_expressions(tier))
                ],
            }
        ]
    }
    path = tmp_path / "dashboards.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    run = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (Debian: prometheus)")
def test_promtool_refuses_a_broken_expression(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "x:y", "expr": 'up{pod=~"a\\-b"}'}]}]}),
        encoding="utf-8",
    )
    run = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert run.returncode != 0
