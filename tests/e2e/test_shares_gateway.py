"""The gateway in front of a model split into shares, end to end: the real LiteLLM proxy, as generated.

The poc model runs as two shares, `l40s` (weight 3) and `l4` (weight 1), each Service answered by
its own vLLM stand-in on loopback. The scenario runs once in module fixtures that build on each
other: both shares up, then `l40s` killed, then `l4` killed too; each test asserts one behaviour.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufarm.config import ModelConfig, TierConfig, build_tier, merge
from gpufarm.k8s.gateway import bedrock_deployment_id, vllm_deployment_id
from gpufarm.k8s.labels import workload_name

from .conftest import Gateway, Reply, StandIn, chat, poc_document
from .stand_ins import BEDROCK_TEXT, VLLM_TEXT

SHARES = {"l40s": 3, "l4": 1}
"""Share -> weight."""
SPLIT_REQUESTS = 60
"""Requests while both shares are up: enough that a 3:1 split shows (P(l4 >= l40s) ~ 1e-5)."""
SETTLE_REQUESTS = 30
"""Requests after a kill: the dead share is cooled down within them."""
SETTLED = 10
"""The last requests of a phase, sent once the gateway has settled."""
COOLDOWN = 300
"""A dead share stays cooled down for the rest of the scenario, however slow the machine."""


def shares_tier() -> TierConfig:
    """The poc tier with a second Auto Mode pool and its model split over both pools."""
    document = poc_document()
    document["node_pools"].append({"name": "l4", "instance_families": ["g6"], "gpu_limit": 2})
    model = document["models"][0]
    model.pop("replicas")
    model["shares"] = [{"node_pool": name, "weight": weight} for name, weight in SHARES.items()]
    return build_tier(merge(document, {"fallback": {"cooldown_seconds": COOLDOWN}}))


@dataclass(frozen=True)
class Scenario:
    tier: TierConfig
    gateway: Gateway
    vllm: dict[str, StandIn]
    bedrock: StandIn

    @property
    def model(self) -> ModelConfig:
        return self.tier.models[0]

    def send(self, count: int) -> list[Reply]:
        return [chat(self.gateway.port, self.model.api_model_name) for _ in range(count)]


@pytest.fixture(scope="module")
def scenario(litellm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    workdir = tmp_path_factory.mktemp("gateway-shares")
    tier = shares_tier()
    model = tier.models[0]
    stand_ins = {name: StandIn("vllm", workdir / name, f"--model={model.api_model_name}") for name in SHARES}
    bedrock = StandIn("bedrock", workdir)
    started: list[StandIn] = []
    try:
        for stand_in in [*stand_ins.values(), bedrock]:
            stand_in.log.parent.mkdir(exist_ok=True)
            stand_in.start()
            started.append(stand_in)
        gateway = Gateway(
            tier,
            workdir,
            litellm=litellm,
            vllm_url=stand_ins["l40s"].base_url,
            bedrock_url=bedrock.base_url,
            vllm_services={workload_name(model.name, n): s.base_url for n, s in stand_ins.items()},
        )
        gateway.start()
        try:
            yield Scenario(tier, gateway, stand_ins, bedrock)
        finally:
            gateway.stop()
    finally:
        for stand_in in started:
            stand_in.stop()


@pytest.fixture(scope="module")
def both_up(scenario: Scenario) -> list[Reply]:
    return scenario.send(SPLIT_REQUESTS)


@pytest.fixture(scope="module")
def one_down(scenario: Scenario, both_up: list[Reply]) -> list[Reply]:
    scenario.vllm["l40s"].kill()
    return scenario.send(SETTLE_REQUESTS)


@pytest.fixture(scope="module")
def both_down(scenario: Scenario, one_down: list[Reply]) -> list[Reply]:
    scenario.vllm["l4"].kill()
    return scenario.send(SETTLE_REQUESTS)


def _backends(replies: list[Reply]) -> Counter[str | None]:
    return Counter(r.backend for r in replies)


def test_the_config_lists_one_deployment_per_share(scenario: Scenario) -> None:
    entries = [
        e for e in scenario.gateway.config["model_list"] if e["model_name"] == scenario.model.api_model_name
    ]
    assert [(e["model_info"]["id"], e["litellm_params"]["weight"]) for e in entries] == [
        (vllm_deployment_id(scenario.model, name), weight) for name, weight in SHARES.items()
    ]


def test_both_shares_answer_in_about_their_weights(scenario: Scenario, both_up: list[Reply]) -> None:
    assert {(r.status, r.text) for r in both_up} == {(200, VLLM_TEXT)}
    backends = _backends(both_up)
    l40s, l4 = (backends[vllm_deployment_id(scenario.model, n)] for n in SHARES)
    assert (l40s + l4, l4 > 0, l40s > l4) == (SPLIT_REQUESTS, True, True), backends
    # Each share's Service reached its own stand-in, and only that one.
    assert [scenario.vllm[n].count("chat") for n in SHARES] == [l40s, l4]


def test_a_dead_share_loses_no_request_and_the_other_takes_over(
    scenario: Scenario, one_down: list[Reply]
) -> None:
    assert [r.status for r in one_down] == [200] * SETTLE_REQUESTS
    l4 = vllm_deployment_id(scenario.model, "l4")
    assert {r.backend for r in one_down[-SETTLED:]} == {l4}, _backends(one_down)
    assert vllm_deployment_id(scenario.model, "l40s") not in _backends(one_down)


def test_with_every_share_down_bedrock_answers(scenario: Scenario, both_down: list[Reply]) -> None:
    assert [r.status for r in both_down] == [200] * SETTLE_REQUESTS
    assert {(r.text, r.backend) for r in both_down[-SETTLED:]} == {
        (BEDROCK_TEXT, bedrock_deployment_id(scenario.model))
    }
