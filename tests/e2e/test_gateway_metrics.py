"""The gateway's answers by backend and Bedrock's tokens, read from its real metrics server.

The production preset's gateway runs as a LiteLLM process (its generated config, arguments and
environment, on loopback). The batch model is served by the vLLM stand-in. The 70B model's
Service points at a loopback port nothing listens on (a Service without endpoints), so the
gateway falls back and the Bedrock stand-in answers it (5 input tokens, 3 output tokens, see
stand_ins.py). The test reads the metrics port the managed scraper reads, before and after, and
keeps only what the scraper's `gateway` job keeps. See docs/fallback.md ("Metrics").

It runs once per engine of the batch model (`models[].engine`): vLLM, SGLang and trtllm-serve,
each behind its own stand-in (stand_ins.py `EngineHandler`). TensorRT-LLM 1.2.1 has no series
for the in-flight trigger of a model parked at zero, so there the batch model keeps fixed
replicas and the gateway counts no demand for it.
"""

from __future__ import annotations

import re
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
from gpufarm.config.model import Engine, ModelConfig
from gpufarm.core.demand import scales_to_zero
from gpufarm.k8s import demand
from gpufarm.k8s import gateway as k8s_gateway
from gpufarm.k8s.observability import scrape_configuration
from tests.e2e.conftest import (
    COOLDOWN_SECONDS,
    LOOPBACK,
    Gateway,
    StandIn,
    chat,
    free_port,
    gateway_with_refusing_models,
)

FALLS_BACK = "llama-3-3-70b"
"""The preset's model with a Bedrock fallback; its vLLM Service has no endpoints here."""
SERVED = "qwen3-32b-batch"
"""The preset's model the vLLM stand-in answers."""
BEDROCK_INPUT_TOKENS, BEDROCK_OUTPUT_TOKENS = 5, 3
"""The usage the Bedrock stand-in reports for each answer."""
COUNT_TIMEOUT = 30.0
"""How long an answer may take to reach the counters (the success callback runs after the reply)."""
SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(?P<key>[A-Za-z_][A-Za-z0-9_]*)="(?P<value>[^"]*)"')


def metrics_tier(engine: str = Engine.VLLM.value) -> TierConfig:
    """The production preset, its batch model on `engine`; no master key (the test client sends
    none), short cooldown."""
    document: dict[str, Any] = yaml.safe_load((PRESET_DIR / "production.yaml").read_text(encoding="utf-8"))
    batch = next(m for m in document["models"] if m["name"] == SERVED)
    batch["engine"] = engine
    if engine == Engine.TRTLLM.value:
        batch["autoscaling"] = None  # no running/waiting series: it cannot scale to zero
    return build_tier(
        merge(document, {"fallback": {"master_key_secret": None, "cooldown_seconds": COOLDOWN_SECONDS}})
    )


def model(tier: TierConfig, name: str) -> ModelConfig:
    return next(m for m in tier.models if m.name == name)


def kept_regex(tier: TierConfig) -> str:
    """The metric-name filter of the managed scraper's `gateway` job, as gpufarm builds it."""
    managed = yaml.safe_load(
        scrape_configuration(
            scrape_interval_seconds=tier.observability.prometheus.scrape_interval_seconds,
            serving_namespace=tier.serving.namespace,
            dcgm_namespace="dcgm-exporter",
            gateway_namespace=tier.serving.namespace,
        )
    )
    (job,) = [j for j in managed["scrape_configs"] if j["job_name"] == demand.SCRAPE_JOB]
    (rule,) = job["metric_relabel_configs"]
    assert rule["action"] == "keep" and rule["source_labels"] == ["__name__"]
    regex: str = rule["regex"]
    return regex


def scrape(port: int, keep: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The metrics server's samples the scrape job keeps: (name, labels) -> value."""
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        if not re.fullmatch(keep, match["name"]):
            continue
        labels = frozenset((m["key"], m["value"]) for m in LABEL.finditer(match["labels"] or ""))
        samples[(match["name"], labels)] = float(match["value"])
    return samples


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


@pytest.fixture(scope="module", params=[e.value for e in Engine])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def tier(engine: str) -> TierConfig:
    return metrics_tier(engine)


@pytest.fixture(scope="module")
def vllm(workdir: Path, engine: str) -> Iterator[StandIn]:
    """The batch model's engine stand-in (named `vllm` as the gateway helpers call its backend)."""
    stand_in = StandIn(engine, workdir, "--model=qwen3-8b", "--delay-ms=100")
    stand_in.start()
    try:
        yield stand_in
    finally:
        stand_in.stop()


@pytest.fixture(scope="module")
def metrics_gateway(
    litellm: Path, workdir: Path, vllm: StandIn, bedrock: StandIn, tier: TierConfig
) -> Iterator[Gateway]:
    """The real proxy with the production tier's config; the 70B model's Service refuses connections."""
    proxy = gateway_with_refusing_models(
        tier,
        workdir,
        litellm=litellm,
        vllm=vllm,
        bedrock=bedrock,
        refusing=[FALLS_BACK],
        refusing_url=f"http://{LOOPBACK}:{free_port()}",
    )
    assert proxy.metrics_port is not None, "the gateway of a tier with Prometheus must serve metrics"
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def test_answers_are_counted_by_backend_and_bedrocks_tokens_by_direction(
    metrics_gateway: Gateway, tier: TierConfig, bedrock: StandIn
) -> None:
    assert metrics_gateway.metrics_port is not None
    keep = kept_regex(tier)
    served, falls_back = model(tier, SERVED).api_model_name, model(tier, FALLS_BACK).api_model_name
    responses, tokens = demand.RESPONSES_METRIC, demand.BEDROCK_TOKENS_METRIC

    # Before any request: every configured model's series exist at 0 (Bedrock's only where a
    # model has a Bedrock fallback), and nothing else the job keeps besides the demand counter.
    idle = scrape(metrics_gateway.metrics_port, keep)
    assert {k: v for k, v in idle.items() if k[0] != demand.METRIC} == {
        key(responses, model_name=served, backend="vllm"): 0.0,
        key(responses, model_name=falls_back, backend="vllm"): 0.0,
        key(responses, model_name=falls_back, backend="bedrock"): 0.0,
        key(tokens, model_name=falls_back, direction="input"): 0.0,
        key(tokens, model_name=falls_back, direction="output"): 0.0,
    }

    answered_by_vllm = chat(metrics_gateway.port, served)
    assert answered_by_vllm.status == 200, answered_by_vllm.text
    assert answered_by_vllm.backend == k8s_gateway.vllm_deployment_id(model(tier, SERVED))
    before = bedrock.count("converse")
    answered_by_bedrock = chat(metrics_gateway.port, falls_back)
    assert answered_by_bedrock.status == 200, answered_by_bedrock.text
    assert answered_by_bedrock.backend == k8s_gateway.bedrock_deployment_id(model(tier, FALLS_BACK))
    assert bedrock.count("converse") == before + 1

    expected = {
        key(responses, model_name=served, backend="vllm"): 1.0,
        key(responses, model_name=falls_back, backend="vllm"): 0.0,
        key(responses, model_name=falls_back, backend="bedrock"): 1.0,
        key(tokens, model_name=falls_back, direction="input"): float(BEDROCK_INPUT_TOKENS),
        key(tokens, model_name=falls_back, direction="output"): float(BEDROCK_OUTPUT_TOKENS),
    }
    deadline = time.monotonic() + COUNT_TIMEOUT
    while True:
        now = {k: v for k, v in scrape(metrics_gateway.metrics_port, keep).items() if k[0] != demand.METRIC}
        if now == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert now == expected

    # A model name the config does not hold is answered by nobody and adds no series.
    stray = chat(metrics_gateway.port, "no-such-model")
    assert stray.status != 200
    time.sleep(1)
    final = scrape(metrics_gateway.metrics_port, keep)
    assert {k for k in final if k[0] != demand.METRIC} == set(expected)
    # The demand counter keeps its meaning: the parked-able batch model's request counted once.
    if scales_to_zero(model(tier, SERVED)):
        assert final[key(demand.METRIC, model_name=served)] == 1.0
    else:
        assert key(demand.METRIC, model_name=served) not in final
