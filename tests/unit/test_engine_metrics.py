"""Each engine's Prometheus series (gpufarm/data/engine_metrics.yaml) and the features built on them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config import ConfigError, load_preset
from gpufarm.config.model import Engine
from gpufarm.constructs.dashboard import PROMQL_QUERIES, promql_queries
from gpufarm.constructs.grafana_dashboards import model_dashboard
from gpufarm.core.engine_metrics import (
    Role,
    all_engine_metrics,
    engine_metrics,
    metric_name,
    missing_for_scaling,
    models_by_engine,
)
from gpufarm.k8s import autoscaling
from gpufarm.k8s.alerting import FallbackModel, ModelObjective, alert_rule_groups, fallback_rate_expression
from gpufarm.k8s.observability import scrape_configuration
from gpufarm.k8s.promql import Expression, metric_names
from tests.promtool import check_rules, expressions_file
from tests.unit.factories import make_production, production_document, production_model

SUFFIXES = ("_bucket", "_sum", "_count")
SELECTOR_NAME = re.compile(r"^[A-Za-z_:][\w:]*")


def _known(engine: str, name: str) -> bool:
    """A name the engine exposes: listed, or a listed histogram's bucket/sum/count series."""
    metrics = engine_metrics(engine).metrics
    return name in metrics or any(name.endswith(s) and name.removesuffix(s) in metrics for s in SUFFIXES)


def _models(*changes: dict[str, Any]) -> dict[str, Any]:
    """An override of the production preset's models, model i updated with changes[i]."""
    models = production_document()["models"]
    return {"models": [{**model, **change} for model, change in zip(models, changes, strict=True)]}


def _issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_production(*parts)
    return [str(issue) for issue in caught.value.issues]


@pytest.mark.parametrize("engine", [e.value for e in Engine])
def test_every_name_an_engine_is_queried_by_is_in_its_metric_list(engine: str) -> None:
    metrics = engine_metrics(engine)
    names = [n for n in metrics.roles.values() if n is not None]
    selectors = [s for s in (metrics.finished, metrics.failed, metrics.error_requests) if s is not None]
    names += [SELECTOR_NAME.match(s).group(0) for s in selectors]  # type: ignore[union-attr]
    assert names and all(_known(engine, n) for n in names), names
    # The scraper keeps exactly what the engine's queries read: every listed name matches the
    # keep regex (a histogram through its _bucket series), and another engine's names do not.
    keep = re.compile(metrics.name_pattern)
    for name in metrics.metrics:
        assert keep.fullmatch(name) or keep.fullmatch(name + "_bucket"), name
    for other in all_engine_metrics():
        if other.engine != engine:
            assert not any(keep.fullmatch(n) for n in other.metrics if n not in metrics.metrics), other.engine


def test_every_engine_names_its_source_and_release() -> None:
    for metrics in all_engine_metrics():
        assert metrics.version and len(metrics.source) > 40, metrics.engine
    image = load_preset("production").serving.vllm_image
    assert image.split("@")[0].rsplit(":v", 1)[1] == engine_metrics("vllm").version
    assert engine_metrics("sglang").requires_flags == ("--enable-metrics",)
    assert engine_metrics("trtllm").path == "/prometheus/metrics"
    assert engine_metrics("trtllm").unconfirmed is not None


def test_vllm_names_are_those_of_the_pinned_release() -> None:
    ref = Path(__file__).resolve().parents[3] / "shared" / "upstream-ref" / "vllm@0.31.0.json"
    if not ref.exists():
        pytest.skip(f"{ref} is not beside the repository")
    released = set(json.loads(ref.read_text(encoding="utf-8"))["metrics"])
    for name in engine_metrics("vllm").metrics:
        assert name in released or name.removesuffix("_total") in released, name


def test_an_engine_without_a_role_names_the_engine_and_role() -> None:
    assert metric_name("sglang", Role.WAITING) == "sglang:num_queue_reqs"
    with pytest.raises(
        ValueError, match=r"^trtllm 1\.2\.1 exports no waiting-requests \(queue depth\) metric$"
    ):
        metric_name("trtllm", Role.WAITING)
    with pytest.raises(ValueError, match=r"^'engine' must be one of vllm, sglang, trtllm, got 'tgi'$"):
        engine_metrics("tgi")


@pytest.mark.parametrize(
    ("engine", "flags", "missing"),
    [
        ("vllm", {"queue_target": True, "kv_cache_target": True, "to_zero": True, "capped": True}, []),
        ("sglang", {"queue_target": True, "kv_cache_target": True, "to_zero": True, "capped": True}, []),
        (
            "trtllm",
            {"queue_target": True, "kv_cache_target": False, "to_zero": True, "capped": False},
            [("queue_target", Role.WAITING), ("min_replicas", Role.RUNNING), ("min_replicas", Role.WAITING)],
        ),
        (
            "trtllm",
            {"queue_target": False, "kv_cache_target": True, "to_zero": False, "capped": True},
            [
                ("kv_cache_target", Role.KV_CACHE_USAGE),
                ("max_concurrency", Role.RUNNING),
                ("max_concurrency", Role.WAITING),
            ],
        ),
    ],
)
def test_missing_for_scaling(engine: str, flags: dict[str, bool], missing: list[tuple[str, Role]]) -> None:
    assert missing_for_scaling(engine, **flags) == missing


TRT = "runs engine trtllm 1.2.1, which exports no"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        pytest.param(
            # trtllm-serve has no quantization option: the llama checkpoint's own FP8 is served.
            production_model(0, engine="trtllm", quantization=None),
            [
                "models[0].autoscaling.queue_target: queue_target 5.0 needs a queue-depth KEDA trigger, "
                f"but model 'llama-3-3-70b' {TRT} waiting-requests (queue depth) metric (remove "
                "queue_target, or choose another engine)",
                "models[0].autoscaling.kv_cache_target: kv_cache_target 0.8 needs a KV-cache KEDA "
                f"trigger, but model 'llama-3-3-70b' {TRT} KV-cache usage metric (remove "
                "kv_cache_target, or choose another engine)",
                "models[0].autoscaling: autoscaling with ingress.target_optimizer.enabled true needs the "
                f"Target Optimizer's in-flight KEDA trigger, but model 'llama-3-3-70b' {TRT} "
                "running-requests or waiting-requests (queue depth) metric (turn "
                "ingress.target_optimizer off, or choose another engine)",
            ],
            id="trtllm-queue-kv-capped",
        ),
        pytest.param(
            [production_model(1, engine="trtllm"), {"ingress": {"target_optimizer": {"enabled": False}}}],
            [
                "models[1].autoscaling.queue_target: queue_target 10.0 needs a queue-depth KEDA trigger, "
                f"but model 'qwen3-32b-batch' {TRT} waiting-requests (queue depth) metric (remove "
                "queue_target, or choose another engine)",
                "models[1].autoscaling.min_replicas: min_replicas 0 needs the in-flight KEDA trigger (it "
                f"keeps a replica while one serves), but model 'qwen3-32b-batch' {TRT} running-requests "
                "or waiting-requests (queue depth) metric (set min_replicas to 1, or choose another engine)",
            ],
            id="trtllm-scale-to-zero",
        ),
    ],
)
def test_a_scaling_setting_the_engine_has_no_series_for_is_refused(
    override: dict[str, Any] | list[dict[str, Any]], expected: list[str]
) -> None:
    parts = override if isinstance(override, list) else [override]
    assert _issues_of(*parts) == expected


def test_sglang_and_trtllm_without_keda_settings_are_accepted() -> None:
    tier = make_production(
        _models({"engine": "sglang"}, {"engine": "trtllm", "autoscaling": None}),
    )
    assert models_by_engine(tier) == {Engine.SGLANG: ["llama-3-3-70b"], Engine.TRTLLM: ["qwen3-32b-batch"]}


def test_keda_reads_sglang_series_by_the_pod_label() -> None:
    tier = make_production(_models({"engine": "sglang"}, {"engine": "vllm"}))
    model = tier.models[0]
    assert (
        autoscaling.queue_query(model, "serving")
        == 'sum(sglang:num_queue_reqs{namespace="serving",model="llama-3-3-70b"})'
    )
    assert (
        autoscaling.kv_cache_query(model, "serving")
        == 'sum(sglang:token_usage{namespace="serving",model="llama-3-3-70b"})'
    )
    scaled = autoscaling.scaled_object(
        model, namespace="serving", query_endpoint="https://amp", region="us-east-1", capped=True
    )
    queries = {t["name"]: t["metadata"]["query"] for t in scaled["spec"]["triggers"]}
    assert queries["in-flight"] == (
        '(sum(sglang:num_running_reqs{namespace="serving",model="llama-3-3-70b"}) + '
        'sum(sglang:num_queue_reqs{namespace="serving",model="llama-3-3-70b"}))'
    )
    # vLLM's keep selecting by the served name vLLM labels them with.
    vllm = tier.models[1]
    assert autoscaling.queue_query(vllm, "serving").startswith(
        'sum(vllm:num_requests_waiting{namespace="serving",model_name="Qwen/Qwen3-32B"})'
    )


def test_constructs_refuse_keda_for_an_engine_without_the_series() -> None:
    tier = make_production(production_model(1, engine="trtllm", autoscaling=None))
    model = tier.models[1].model_copy(update={"autoscaling": tier.models[0].autoscaling})
    with pytest.raises(ValueError) as caught:
        autoscaling.scaled_object(model, namespace="s", query_endpoint="https://amp", region="us-east-1")
    assert str(caught.value) == (
        "model 'qwen3-32b-batch': 'queue_target' needs the engine's waiting-requests (queue depth) metric, "
        "which trtllm 1.2.1 does not export; model 'qwen3-32b-batch': 'kv_cache_target' needs the "
        "engine's KV-cache usage metric, which trtllm 1.2.1 does not export"
    )


def test_each_engine_gets_its_own_scrape_job_with_the_same_labels() -> None:
    text = scrape_configuration(
        scrape_interval_seconds=30,
        serving_namespace="serving",
        dcgm_namespace="dcgm",
        engine_models={Engine.SGLANG: ["b", "a"], Engine.TRTLLM: ["t"], Engine.VLLM: ["v"]},
    )
    jobs = {job["job_name"]: job for job in yaml.safe_load(text)["scrape_configs"]}
    assert list(jobs) == ["vllm", "sglang", "trtllm", "dcgm-exporter"]
    model_label = "__meta_kubernetes_pod_label_gpufarm_io_model"
    # The vLLM job leaves the other engines' pods to their jobs.
    assert jobs["vllm"]["relabel_configs"][0] == {
        "source_labels": [model_label],
        "regex": "a|b|t",
        "action": "drop",
    }
    assert jobs["sglang"]["relabel_configs"][0] == {
        "source_labels": [model_label],
        "regex": "a|b",
        "action": "keep",
    }
    assert jobs["trtllm"]["metrics_path"] == "/prometheus/metrics"
    assert jobs["sglang"]["metric_relabel_configs"] == [
        {"source_labels": ["__name__"], "regex": "sglang:.+", "action": "keep"}
    ]
    targets = {
        name: {r["target_label"] for r in job["relabel_configs"] if r["action"] == "replace"}
        for name, job in jobs.items()
        if name != "dcgm-exporter"
    }
    assert targets == {name: {"namespace", "pod", "model", "role"} for name in ("vllm", "sglang", "trtllm")}


def test_a_vllm_only_tier_scrapes_as_before() -> None:
    kwargs: dict[str, Any] = {"scrape_interval_seconds": 30, "serving_namespace": "s", "dcgm_namespace": "d"}
    assert scrape_configuration(**kwargs) == scrape_configuration(
        **kwargs, engine_models={Engine.VLLM: ["v"]}
    )


def _rules(objectives: list[ModelObjective]) -> list[dict[str, Any]]:
    groups = alert_rule_groups(objectives, error_rate_percent=5)
    return [rule for group in groups for rule in group["rules"]]


def test_alerts_span_every_engine_and_leave_out_what_an_engine_lacks(tmp_path: Path) -> None:
    rules = _rules(
        [
            ModelObjective(name="v", ttft_p99_seconds=2),
            ModelObjective(name="s", ttft_p99_seconds=2, engine="sglang"),
            ModelObjective(name="t", ttft_p99_seconds=3, engine="trtllm"),
        ]
    )
    by_name = {r.get("alert") or r["record"]: r for r in rules}
    ttft = [r["expr"] for r in rules if r.get("alert") == "TimeToFirstTokenP99High"]
    assert [e.split("(rate(")[1].split("{")[0] for e in ttft] == [
        "sglang:time_to_first_token_seconds_bucket",
        "time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_bucket",
    ]
    assert by_name["QueueDepthHigh"]["expr"] == (
        "(avg by (model) (sum by (model, pod) (vllm:num_requests_waiting)) or avg by (model) "
        "(sum by (model, pod) (sglang:num_queue_reqs))) > 10"
    )
    # TensorRT-LLM 1.2.1 tells no errors: the error ratio reads vLLM's and SGLang's only.
    ratio = by_name["model:vllm_request_errors:ratio_rate5m"]["expr"]
    assert "sglang:http_responses_total" in ratio and "vllm:request_success_total" in ratio
    assert "request_success_total{" not in ratio.replace("vllm:request_success_total{", "")
    assert by_name["model:vllm_prefix_cache_hit:ratio_rate30m"]["expr"].endswith(
        "or avg by (model) (avg_over_time(sglang:cache_hit_rate[30m])))"
    )
    expressions = [Expression(str(r.get("alert") or r["record"]), r["expr"]) for r in rules]
    result = check_rules(expressions_file(expressions, tmp_path / "rules.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    engines = {"v": "vllm", "s": "sglang", "t": "trtllm"}
    for expression in expressions:
        for name in metric_names(expression.expr):
            if name.startswith(("DCGM_", "model:")):
                continue
            assert any(_known(e, name) for e in engines.values()), name


def test_a_trtllm_only_tier_has_no_error_queue_or_cache_alerts() -> None:
    names = {
        r.get("alert") or r["record"]
        for r in _rules([ModelObjective(name="t", ttft_p99_seconds=2, engine="trtllm")])
    }
    assert names == {
        "TimeToFirstTokenP99High",
        "GpuUtilizationLow",
        "GpuUtilizationSaturated",
        "GpuXidCritical",
        "GpuXid",
    }


def test_the_fallback_rate_counts_each_engines_finished_requests() -> None:
    assert 'sum(rate(sglang:num_requests_total{model="s"}[15m]))' in fallback_rate_expression(
        FallbackModel(name="s", api_name="S", engine="sglang")
    )
    assert 'sum(rate(request_success_total{model="t"}[15m]))' in fallback_rate_expression(
        FallbackModel(name="t", api_name="T", engine="trtllm")
    )


def test_dashboards_have_a_target_per_engine_and_say_what_is_missing() -> None:
    tier = make_production(_models({"engine": "sglang"}, {"engine": "trtllm", "autoscaling": None}))
    panels = {p["title"]: p for p in model_dashboard(tier)["panels"]}
    ttft = [t["expr"] for t in panels["Time to first token (p50, p99)"]["targets"]]
    assert [t["refId"] for t in panels["Time to first token (p50, p99)"]["targets"]] == ["A", "B", "C", "D"]
    assert "(rate(sglang:time_to_first_token_seconds_bucket" in ttft[0]
    assert "(rate(time_to_first_token_seconds_bucket" in ttft[2]
    queue = panels["Queue: waiting and running requests per replica"]
    assert len(queue["targets"]) == 2 and queue["description"].endswith(
        "Not exported by trtllm 1.2.1 (docs/operations.md)."
    )
    assert "sglang:cache_hit_rate" in panels["KV cache usage and prefix-cache hit rate"]["targets"][1]["expr"]


def test_the_cloudwatch_dashboard_lists_each_engines_queries() -> None:
    assert promql_queries(("vllm",)) == PROMQL_QUERIES
    titles = [title for title, _ in promql_queries(("vllm", "sglang", "trtllm"))]
    assert "Requests waiting, per model (sglang)" in titles
    assert not any("trtllm" in t for t in titles)


def test_the_template_name_check_catches_a_query_aimed_at_the_wrong_engine() -> None:
    from tests.unit.upstream_ref import engine_metric_issues

    assert (
        engine_metric_issues(["vllm:num_requests_waiting", "sglang:num_queue_reqs"], ["vllm", "sglang"]) == []
    )
    assert engine_metric_issues(
        ["sglang:num_queue_reqs", "sglang:num_queue_requests", "time_to_first_token_seconds_bucket"], ["vllm"]
    ) == [
        "'sglang:num_queue_reqs' is sglang's, but no model of the tier runs sglang",
        "sglang: unknown metric 'sglang:num_queue_requests' (not in gpufarm/data/engine_metrics.yaml)",
        "'time_to_first_token_seconds_bucket' is trtllm's, but no model of the tier runs trtllm",
    ]


def test_every_query_of_a_mixed_engine_tier_passes_promtool_and_names_its_engines_series(
    tmp_path: Path,
) -> None:
    from gpufarm.constructs.grafana_dashboards import dashboard_expressions
    from tests.unit.upstream_ref import engine_metric_issues, engine_series

    tier = make_production(_models({"engine": "sglang"}, {"engine": "trtllm", "autoscaling": None}))
    sglang = tier.models[0]
    scaled = autoscaling.scaled_object(
        sglang, namespace="serving", query_endpoint="https://amp", region="us-east-1", capped=True
    )
    expressions = [
        Expression(f"ScaledObject/{t['name']}", t["metadata"]["query"]) for t in scaled["spec"]["triggers"]
    ]
    expressions += [Expression(f"dashboard {i}", e) for i, e in enumerate(dashboard_expressions(tier))]
    objectives = [
        ModelObjective(name=m.name, ttft_p99_seconds=m.ttft_p99_seconds, engine=m.engine.value)
        for m in tier.models
    ]
    rules = [r for g in alert_rule_groups(objectives, error_rate_percent=5) for r in g["rules"]]
    expressions += [Expression(str(r.get("alert") or r["record"]), r["expr"]) for r in rules]
    result = check_rules(expressions_file(expressions, tmp_path / "mixed.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    names = {n for e in expressions for n in metric_names(e.expr) if not n.startswith(("DCGM_", "model:"))}
    assert {n.split(":")[0] for n in names if ":" in n} == {"sglang"}
    assert engine_metric_issues(names, ["sglang", "trtllm"]) == []
    # TensorRT-LLM's names carry no prefix: each unprefixed one (but the gateway's) must be its.
    unprefixed = {n for n in names if ":" not in n and not n.startswith("gpufarm_gateway_")}
    assert unprefixed and all(engine_series(n, ["trtllm"]) == "trtllm" for n in unprefixed), unprefixed
