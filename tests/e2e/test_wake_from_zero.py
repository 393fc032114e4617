"""A model parked at zero wakes on its first request: the real gateway, a real Prometheus, the exact query.

The production preset's gateway runs as a LiteLLM process (its generated config, arguments and
environment, hosts and ports on loopback) with two models parked at zero replicas: the preset's
batch model (`bedrock: none`) and a copy of it with a Bedrock fallback. A parked model's Service
has no endpoints, so its backend is a loopback port nothing listens on (a refused connection, as
kube-proxy answers for a Service without endpoints). The critical model is served by a vLLM
stand-in. A real Prometheus (Debian's `prometheus`) scrapes the gateway's metrics server with
the metric filter of the managed scraper's `gateway` job, every second, and the test evaluates
the `wake` trigger queries of the ScaledObjects gpufarm builds for the tier, unchanged, through
Prometheus's HTTP API, against each trigger's own `activationThreshold` (KEDA wakes a model when
the value is strictly above it). See docs/decisions/0049-wake-scale-from-zero.md.
"""

from __future__ import annotations

import copy
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config import TierConfig, build_tier, merge
from gpufarm.config.loader import PRESET_DIR
from gpufarm.config.model import ModelConfig
from gpufarm.k8s import autoscaling as k8s_autoscaling
from gpufarm.k8s import demand
from gpufarm.k8s import gateway as k8s_gateway
from gpufarm.k8s.observability import scrape_configuration
from tests.e2e.conftest import (
    COOLDOWN_SECONDS,
    LOOPBACK,
    Gateway,
    Process,
    StandIn,
    chat,
    free_port,
    gateway_with_refusing_models,
)

PROMETHEUS = Path("/usr/bin/prometheus")
SCRAPE_INTERVAL = "1s"
"""Prometheus' scrape interval here (the managed scraper's minimum is 30 s; the query is not changed)."""
PROMETHEUS_START_TIMEOUT = 60.0
SIGNAL_TIMEOUT = 30.0
"""How long a query may take to reflect a request: a scrape (1 s) and a busy 2-core machine."""
AMP = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-00000000-0000-0000-0000-000000000000"
BATCH = "qwen3-32b-batch"
"""The production preset's model that scales to zero and has no Bedrock fallback."""
BURST = "qwen3-32b-burst"
"""A copy of it with a Bedrock fallback (added here: the presets have none)."""


def wake_tier() -> TierConfig:
    """The production preset, plus BURST; no master key (the test client sends none), short cooldown."""
    document: dict[str, Any] = yaml.safe_load((PRESET_DIR / "production.yaml").read_text(encoding="utf-8"))
    batch = next(m for m in document["models"] if m["name"] == BATCH)
    burst = copy.deepcopy(batch)
    burst.update(
        name=BURST,
        served_model_name="Qwen/Qwen3-32B-burst",
        bedrock={"model_id": "us.meta.llama3-3-70b-instruct-v1:0"},
    )
    document["models"].append(burst)
    return build_tier(
        merge(document, {"fallback": {"master_key_secret": None, "cooldown_seconds": COOLDOWN_SECONDS}})
    )


def model(tier: TierConfig, name: str) -> ModelConfig:
    return next(m for m in tier.models if m.name == name)


def wake_trigger(tier: TierConfig, name: str) -> dict[str, Any]:
    """The `wake` trigger of the model's ScaledObject, built as the stack builds it."""
    scaled = k8s_autoscaling.scaled_object(
        model(tier, name),
        namespace=tier.serving.namespace,
        query_endpoint=AMP,
        region=tier.environment.region,
        capped=tier.ingress.target_optimizer.enabled,
        scrape_interval_seconds=tier.observability.prometheus.scrape_interval_seconds,
    )
    (trigger,) = [t for t in scaled["spec"]["triggers"] if t["name"] == "wake"]
    return trigger


class Prometheus(Process):
    """Debian's Prometheus on a loopback port, its data in `workdir`, scraping the gateway's metrics server.

    The job is the managed scraper's `gateway` job with the pod discovery replaced by the one
    loopback target: same metrics path and scheme, same metric filter, and the `namespace` label
    the discovery would copy from the pod (the serving namespace, where the gateway runs).
    """

    def __init__(self, workdir: Path, tier: TierConfig, metrics_port: int) -> None:
        managed = yaml.safe_load(
            scrape_configuration(
                scrape_interval_seconds=tier.observability.prometheus.scrape_interval_seconds,
                serving_namespace=tier.serving.namespace,
                dcgm_namespace="dcgm-exporter",
                gateway_namespace=tier.serving.namespace,
            )
        )
        (job,) = [j for j in managed["scrape_configs"] if j["job_name"] == demand.SCRAPE_JOB]
        local_job = {
            "job_name": job["job_name"],
            "metrics_path": job["metrics_path"],
            "scheme": job["scheme"],
            "static_configs": [
                {
                    "targets": [f"{LOOPBACK}:{metrics_port}"],
                    "labels": {"namespace": tier.serving.namespace, "pod": "gateway-0"},
                }
            ],
            "metric_relabel_configs": job["metric_relabel_configs"],
        }
        config = {"global": {"scrape_interval": SCRAPE_INTERVAL}, "scrape_configs": [local_job]}
        config_file = workdir / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self.port = free_port()
        argv = [
            str(PROMETHEUS),
            f"--config.file={config_file}",
            f"--storage.tsdb.path={workdir / 'prometheus-data'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
        ]
        super().__init__("prometheus", argv, env={"PATH": "/usr/bin:/bin"}, log=workdir / "prometheus.log")

    def start(self) -> None:
        """Start and wait until `/-/ready` answers 200."""
        super().start()
        self.wait_until_ready(self.port, "/-/ready", PROMETHEUS_START_TIMEOUT)

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The instant vector `expression` evaluates to now (`/api/v1/query`, as KEDA calls it)."""
        url = f"http://{LOOPBACK}:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        assert body["data"]["resultType"] == "vector", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result


def value_of(prometheus: Prometheus, expression: str) -> float | None:
    """The single element's value, as KEDA's scaler reads it; None when the answer is empty."""
    result = prometheus.query(expression)
    assert len(result) <= 1, f"KEDA needs at most one element, got {result}"
    return float(result[0]["value"][1]) if result else None


def wait_for(prometheus: Prometheus, expression: str, accept: Any, what: str) -> float:
    """Poll `expression` until `accept(value)`; fail naming `what` and the last value after SIGNAL_TIMEOUT."""
    deadline = time.monotonic() + SIGNAL_TIMEOUT
    value: float | None = None
    while time.monotonic() < deadline:
        value = value_of(prometheus, expression)
        if value is not None and accept(value):
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what}: {expression} read {value} after {SIGNAL_TIMEOUT:.0f} s")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def prometheus_binary() -> Path:
    if not PROMETHEUS.exists():
        pytest.skip(f"{PROMETHEUS} not found (Debian's Prometheus): apt-get install prometheus")
    return PROMETHEUS


@pytest.fixture(scope="module")
def tier() -> TierConfig:
    return wake_tier()


@pytest.fixture(scope="module")
def parked_port() -> int:
    """Where the parked models' Services point on loopback: a port nothing listens on (yet)."""
    return free_port()


@pytest.fixture(scope="module")
def wake_gateway(
    litellm: Path, workdir: Path, vllm: StandIn, bedrock: StandIn, tier: TierConfig, parked_port: int
) -> Iterator[Gateway]:
    """The real proxy with the production tier's config; the parked models' Services refuse connections."""
    proxy = gateway_with_refusing_models(
        tier,
        workdir,
        litellm=litellm,
        vllm=vllm,
        bedrock=bedrock,
        refusing=[BATCH, BURST],
        refusing_url=f"http://{LOOPBACK}:{parked_port}",
    )
    assert proxy.metrics_port is not None, "the gateway of a tier with a parked model must serve metrics"
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def prometheus(
    prometheus_binary: Path, workdir: Path, tier: TierConfig, wake_gateway: Gateway
) -> Iterator[Prometheus]:
    assert wake_gateway.metrics_port is not None
    server = Prometheus(workdir, tier, wake_gateway.metrics_port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- tests


def test_parked_models_wake_on_their_first_request(
    prometheus: Prometheus, wake_gateway: Gateway, tier: TierConfig, bedrock: StandIn
) -> None:
    batch, burst = wake_trigger(tier, BATCH), wake_trigger(tier, BURST)
    for trigger in (batch, burst):
        assert trigger["metadata"]["ignoreNullValues"] == "false"
    batch_query, burst_query = batch["metadata"]["query"], burst["metadata"]["query"]
    batch_threshold = float(batch["metadata"]["activationThreshold"])
    burst_threshold = float(burst["metadata"]["activationThreshold"])

    # Before any request: each query answers one element (the counter exists at zero, so KEDA's
    # ignoreNullValues: "false" does not fail) at or below its activation threshold.
    for query, threshold in ((batch_query, batch_threshold), (burst_query, burst_threshold)):
        idle = wait_for(prometheus, query, lambda v: True, "the idle wake query never answered")
        assert idle <= threshold, f"{query} read {idle} before any request"

    # Traffic for another model does not wake a parked one.
    served = chat(wake_gateway.port, model(tier, "llama-3-3-70b").api_model_name)
    assert served.status == 200, served.text
    time.sleep(3)  # three scrapes
    still = value_of(prometheus, batch_query)
    assert still is not None and still <= batch_threshold, (
        f"{batch_query} read {still} after another model's request"
    )

    # The first request for the parked batch model (bedrock: none): the gateway answers an error
    # at once (nothing serves the model yet) and the wake query rises above the threshold.
    waking = chat(wake_gateway.port, model(tier, BATCH).api_model_name)
    print(f"\nwaking request, bedrock: none -> HTTP {waking.status} in {waking.seconds:.2f} s")
    assert waking.status == 500, f"a parked model without Bedrock gets the gateway's 500, got {waking.status}"
    assert waking.seconds < tier.fallback.request_timeout_seconds
    woke = wait_for(prometheus, batch_query, lambda v: v > batch_threshold, "the batch model did not wake")
    assert woke <= k8s_autoscaling.WAKE_THRESHOLD, f"the wake query must be capped at 1, read {woke}"
    print(f"wake query for {BATCH}: {woke:g} > activationThreshold {batch_threshold:g}")

    # The first request for the parked model with a Bedrock fallback: Bedrock answers it, and it wakes.
    before = bedrock.count("converse")
    answered = chat(wake_gateway.port, model(tier, BURST).api_model_name)
    assert answered.status == 200, answered.text
    assert answered.backend == k8s_gateway.bedrock_deployment_id(model(tier, BURST))
    assert bedrock.count("converse") == before + 1
    woke = wait_for(prometheus, burst_query, lambda v: v > burst_threshold, "the burst model did not wake")
    print(f"waking request, Bedrock fallback -> HTTP 200 from {answered.backend} in {answered.seconds:.2f} s")
    print(f"wake query for {BURST}: {woke:g} > activationThreshold {burst_threshold:g}")


def test_a_model_name_the_gateway_does_not_count_makes_no_series(
    prometheus: Prometheus, wake_gateway: Gateway
) -> None:
    """The counter's labels come from the config only: a made-up model name adds no series."""
    reply = chat(wake_gateway.port, "no-such-model")
    assert reply.status != 200
    time.sleep(2)
    names = {s["metric"][demand.MODEL_LABEL] for s in prometheus.query(demand.METRIC)}
    assert names == {"Qwen/Qwen3-32B", "Qwen/Qwen3-32B-burst"}
