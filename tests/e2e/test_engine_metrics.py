"""Each engine's series reach the queries gpufarm builds: a real Prometheus scrapes an engine stand-in.

For SGLang and TensorRT-LLM (trtllm-serve) a stand-in serves the engine's health path and its
Prometheus exposition (metrics path, series names and labels of the pinned release; see
`stand_ins.EngineHandler`). Debian's Prometheus scrapes it with the managed scraper's job for that
engine (:func:`gpufarm.k8s.observability.engine_scrape_job`), pod discovery replaced by the one
loopback target with the labels discovery would give. The test then evaluates, unchanged, the
queries the tier's KEDA triggers and alert rules run for a model on that engine, while requests
are held in flight and after they are answered. vLLM's own path is test_wake_from_zero's and
test_gateway_metrics'.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config.model import Engine, ModelConfig, TierConfig
from gpufarm.core.engine_metrics import engine_metrics
from gpufarm.k8s import autoscaling as k8s_autoscaling
from gpufarm.k8s.alerting import ModelObjective, alert_rule_groups, with_matcher
from gpufarm.k8s.observability import engine_scrape_job
from tests.e2e.conftest import LOOPBACK, StandIn, chat, free_port
from tests.e2e.test_wake_from_zero import PROMETHEUS, Prometheus, value_of, wait_for
from tests.unit.factories import make_production, production_document

NAMESPACE = "serving"
POD = "vllm-llama-3-3-70b-0"
HOLD_MS = 4000
"""How long the stand-in holds each completion: long enough for a scrape (1 s) to see it in flight."""


def engine_tier(engine: str) -> TierConfig:
    """The production preset with its first model on `engine`, and no KEDA settings that engine lacks."""
    models = production_document()["models"]
    first: dict[str, Any] = {**models[0], "engine": engine}
    if not engine_metrics(engine).has_error_ratio:  # trtllm 1.2.1: no queue or KV-cache series
        first["autoscaling"] = None
    if engine == "trtllm":  # trtllm-serve serves the checkpoint's own quantization (no option for it)
        first.pop("quantization", None)
    return make_production({"models": [first, models[1]]})


class EnginePrometheus(Prometheus):
    """Prometheus scraping one engine stand-in with the managed scraper's job for the engine."""

    def __init__(self, workdir: Path, model: ModelConfig, port: int) -> None:
        job = engine_scrape_job(model.engine, [model.name], serving_namespace=NAMESPACE)
        local_job = {
            "job_name": job["job_name"],
            "metrics_path": job["metrics_path"],
            "scheme": job["scheme"],
            "static_configs": [
                {
                    "targets": [f"{LOOPBACK}:{port}"],
                    # What the job's relabeling copies from the discovered pod.
                    "labels": {"namespace": NAMESPACE, "pod": POD, "model": model.name},
                }
            ],
            "metric_relabel_configs": job["metric_relabel_configs"],
        }
        config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [local_job]}
        config_file = workdir / f"prometheus-{model.engine.value}.yml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self.port = free_port()
        argv = [
            str(PROMETHEUS),
            f"--config.file={config_file}",
            f"--storage.tsdb.path={workdir / f'prometheus-data-{model.engine.value}'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
        ]
        super(Prometheus, self).__init__(
            "prometheus", argv, env={"PATH": "/usr/bin:/bin"}, log=workdir / "prometheus.log"
        )


@pytest.fixture(scope="module", params=[Engine.SGLANG.value, Engine.TRTLLM.value])
def engine(request: pytest.FixtureRequest) -> str:
    if not PROMETHEUS.exists():
        pytest.skip(f"{PROMETHEUS} not found (Debian's Prometheus): apt-get install prometheus")
    return str(request.param)


@pytest.fixture(scope="module")
def tier(engine: str) -> TierConfig:
    return engine_tier(engine)


@pytest.fixture(scope="module")
def stand_in(engine: str, tier: TierConfig, workdir: Path) -> Iterator[StandIn]:
    process = StandIn(engine, workdir, f"--model={tier.models[0].api_model_name}", f"--delay-ms={HOLD_MS}")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def prometheus(tier: TierConfig, stand_in: StandIn, workdir: Path) -> Iterator[EnginePrometheus]:
    server = EnginePrometheus(workdir, tier.models[0], stand_in.port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _ttft_quantile(model: ModelConfig) -> str:
    groups = alert_rule_groups(
        [ModelObjective(name=model.name, ttft_p99_seconds=2, engine=model.engine.value)], error_rate_percent=5
    )
    (rule,) = [r for g in groups for r in g["rules"] if r.get("alert") == "TimeToFirstTokenP99High"]
    return str(rule["expr"]).rsplit(" > ", 1)[0]


def test_the_health_path_answers(engine: str, stand_in: StandIn) -> None:
    path = engine_metrics(engine).health_path
    with urllib.request.urlopen(f"{stand_in.base_url}{path}", timeout=10) as response:
        assert response.status == 200


def test_the_engines_series_reach_the_queries(
    engine: str, tier: TierConfig, stand_in: StandIn, prometheus: EnginePrometheus
) -> None:
    model = tier.models[0]
    metrics = engine_metrics(engine)
    finished = with_matcher(metrics.finished, f'model="{model.name}"')
    # A first scrape before any request, so rate() has a sample from before the answers.
    wait_for(prometheus, f"sum({finished})", lambda v: v == 0, "finished requests before any")
    held = [threading.Thread(target=chat, args=(stand_in.port, model.api_model_name)) for _ in range(3)]
    for thread in held:
        thread.start()
    try:
        if model.autoscaling is not None:
            # The KEDA triggers gpufarm builds for the model, as the stack builds them.
            scaled = k8s_autoscaling.scaled_object(
                model, namespace=NAMESPACE, query_endpoint="https://amp", region="us-east-1", capped=True
            )
            queries = {t["name"]: t["metadata"]["query"] for t in scaled["spec"]["triggers"]}
            # Three completions held: one running, two waiting, in the engine's own gauges.
            wait_for(prometheus, queries["in-flight"], lambda v: v == 3, "in-flight while 3 are held")
            wait_for(prometheus, queries["queue"], lambda v: v == 2, "queue while 3 are held")
            wait_for(prometheus, queries["kv-cache"], lambda v: v > 0, "KV cache while serving")
    finally:
        for thread in held:
            thread.join()
    wait_for(prometheus, f"sum({finished})", lambda v: v == 3, "finished requests after 3 answers")
    wait_for(prometheus, _ttft_quantile(model), lambda v: v > 0, "p99 time to first token")
    # Every series carries the labels the scraper gives, whatever the engine calls the model.
    (series,) = prometheus.query(f"sum by (model, pod, namespace) ({finished})")
    assert series["metric"] == {"model": model.name, "pod": POD, "namespace": NAMESPACE}
    # Only the engine's own series are kept (AMP bills per sample).
    assert prometheus.query("python_gc_objects_collected_total") == []


def test_errors_reach_the_error_ratio_where_the_engine_tells_them(
    engine: str, tier: TierConfig, stand_in: StandIn, prometheus: EnginePrometheus
) -> None:
    model = tier.models[0]
    groups = alert_rule_groups(
        [ModelObjective(name=model.name, ttft_p99_seconds=2, engine=engine)], error_rate_percent=5
    )
    ratios = [r["expr"] for g in groups for r in g["rules"] if r.get("record", "").endswith("rate5m")]
    if engine == "trtllm":
        # trtllm 1.2.1 tells no errors: its error ratio and alerts are left out (docs/operations.md).
        assert ratios == []
        return
    (ratio,) = ratios
    stand_in.fail(500)
    try:
        assert chat(stand_in.port, model.api_model_name).status == 500
    finally:
        stand_in.fail(None)
    # The counters' totals rather than their rates: a 5xx series born with the failure has no
    # earlier sample for rate() to compare with. One failure out of the answers so far.
    errors = ratio.replace("rate(", "(").replace("[5m]", "")
    wait_for(prometheus, errors, lambda v: v > 0, "error ratio after a 500")
    assert value_of(prometheus, errors) is not None
