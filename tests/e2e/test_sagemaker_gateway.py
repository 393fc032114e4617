"""The gateway of a `provisioning: sagemaker` tier end to end: the real LiteLLM proxy with the config
gpufarm generates for the `sagemaker-poc` preset, a SageMaker runtime stand-in on loopback in place
of the regional runtime host (what the VPC's `sagemaker.runtime` interface endpoint answers), and
the Bedrock stand-in for the fallback.

The scenario runs once per module: both models answered by their own inference components, then
the runtime answering 503 (every request goes to Bedrock), then the runtime killed. Streaming is
not exercised: with the runtime URL replaced (`sagemaker_base_url`), LiteLLM 1.102.1 sends a
stream to the same `/invocations` URL, which the real runtime does not serve as a stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import TierConfig, load_preset
from gpufarm.core import sagemaker as sm
from gpufarm.k8s.gateway import bedrock_deployment_id, sagemaker_deployment_id

from .conftest import COOLDOWN_SECONDS, Gateway, Reply, StandIn, chat
from .stand_ins import BEDROCK_TEXT, SAGEMAKER_TEXT


def sagemaker_tier() -> TierConfig:
    """The sagemaker-poc preset with a short gateway cooldown."""
    tier = load_preset("sagemaker-poc")
    return tier.model_copy(
        update={"fallback": tier.fallback.model_copy(update={"cooldown_seconds": COOLDOWN_SECONDS})}
    )


@pytest.fixture(scope="module")
def tier() -> TierConfig:
    return sagemaker_tier()


@pytest.fixture(scope="module")
def runtime(workdir: Path, tier: TierConfig) -> Iterator[StandIn]:
    """The SageMaker runtime stand-in, hosting the preset's inference components."""
    components = [f"--model={c.name}" for c in sm.components_of(tier)]
    stand_in = StandIn("sagemaker", workdir, *components)
    stand_in.start()
    try:
        yield stand_in
    finally:
        stand_in.stop()


@pytest.fixture(scope="module")
def gateway(
    litellm: Path, workdir: Path, tier: TierConfig, runtime: StandIn, bedrock: StandIn
) -> Iterator[Gateway]:
    proxy = Gateway(
        tier,
        workdir,
        litellm=litellm,
        vllm_url=runtime.base_url,
        bedrock_url=bedrock.base_url,
        sagemaker_url=runtime.base_url,
    )
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


@dataclass(frozen=True)
class Run:
    """What the scenario recorded, phase by phase."""

    healthy: dict[str, Reply]
    """One reply per model while the runtime answers."""
    healthy_stats: dict[str, Any]
    """The runtime stand-in's stats after the healthy phase."""
    failing: dict[str, Reply]
    """One reply per model while the runtime answers 503."""
    failing_stats: dict[str, Any]
    bedrock_models: dict[str, int]
    """Bedrock stand-in: requests per model ID after the failing phase."""
    killed: dict[str, Reply]
    """One reply per model after the runtime process was killed."""


@pytest.fixture(scope="module")
def run(gateway: Gateway, runtime: StandIn, bedrock: StandIn, tier: TierConfig) -> Run:
    names = [m.api_model_name for m in tier.models]
    healthy = {name: chat(gateway.port, name) for name in names}
    healthy_stats = runtime.stats()
    runtime.fail(503)
    failing = {name: chat(gateway.port, name) for name in names}
    failing_stats = runtime.stats()
    bedrock_models = dict(bedrock.stats()["models"])
    runtime.kill()
    killed = {name: chat(gateway.port, name) for name in names}
    return Run(healthy, healthy_stats, failing, failing_stats, bedrock_models, killed)


def test_each_model_is_answered_by_its_own_inference_component(run: Run, tier: TierConfig) -> None:
    for model in tier.models:
        reply = run.healthy[model.api_model_name]
        assert (reply.status, reply.text) == (200, SAGEMAKER_TEXT), reply
        assert reply.backend == sagemaker_deployment_id(model)
    # One InvokeEndpoint per model, each naming that model's component in the header.
    assert run.healthy_stats["models"] == {c.name: 1 for c in sm.components_of(tier)}


def test_the_call_is_invoke_endpoint_on_the_tiers_endpoint_signed_for_sagemaker(
    run: Run, tier: TierConfig
) -> None:
    last = run.healthy_stats["last"]
    assert last["endpoint"] == sm.endpoint_name(tier) == "gpufarm-sagemaker-poc"
    assert last["component"] == sm.inference_component_name(tier, tier.models[-1])
    # The OpenAI chat body reaches the container as is (LMI's chat schema on /invocations).
    assert last["body"]["messages"] == [{"role": "user", "content": "Which backend answers?"}]
    assert run.healthy_stats["counts"].get("unsigned", 0) == 0
    assert run.healthy_stats["counts"]["signed"] >= len(tier.models)


def test_a_runtime_answering_503_falls_back_to_each_models_bedrock_target(run: Run, tier: TierConfig) -> None:
    for model in tier.models:
        reply = run.failing[model.api_model_name]
        assert (reply.status, reply.text) == (200, BEDROCK_TEXT), reply
        assert reply.backend == bedrock_deployment_id(model)
        assert reply.fallbacks >= 1
    assert run.failing_stats["counts"]["failed"] >= len(tier.models)
    expected = {m.bedrock_target.model_id for m in tier.models if m.bedrock_target}
    assert set(run.bedrock_models) == expected


def test_a_runtime_that_is_gone_falls_back_too(run: Run, tier: TierConfig) -> None:
    for model in tier.models:
        reply = run.killed[model.api_model_name]
        assert (reply.status, reply.text) == (200, BEDROCK_TEXT), reply
        assert reply.backend == bedrock_deployment_id(model)
