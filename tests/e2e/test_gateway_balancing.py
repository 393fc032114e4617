"""The gateway keeps the load balancer's balancing, end to end: the real LiteLLM proxy, as generated.

The poc tier's gateway calls each model's route on the tier's internal ALB
(`gpufarm.core.endpoints.gateway_route`). Here that ALB is the `alb` stand-in (tests/e2e/
stand_ins.py, `AlbHandler`: least outstanding requests, the Target Optimizer's per-target cap and
its immediate 503 when every target is full, as AWS documents them), in front of three vLLM
stand-ins of unequal speed, each with its own cap. The proxy runs with the config and pod
environment gpufarm builds for the tier; only the load balancer's address is loopback.

The scenario runs once, in module fixtures that build on each other: a load below the sum of the
caps through the gateway, a load above it through the gateway, then the same two loads on the
direct route (`/<model>/v1` on the load balancer, no gateway). Each test asserts one behaviour of what
they recorded; the request share per replica and the p50/p99 latencies are printed (`pytest -s`)
and kept in the report of every test (`-rA`).
"""

from __future__ import annotations

import http.client
import json
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import ModelConfig, TierConfig
from gpufarm.core.endpoints import GatewayRoute, gateway_route
from gpufarm.k8s.gateway import (
    BACKEND_HEADER,
    bedrock_deployment_id,
    route_api_base,
    route_env_name,
    vllm_deployment_id,
)

from .conftest import LOOPBACK, REQUEST_TIMEOUT, Gateway, Reply, StandIn, chat, e2e_tier
from .stand_ins import BEDROCK_TEXT, VLLM_TEXT


@dataclass(frozen=True)
class Replica:
    name: str
    delay_ms: int
    """How long the stand-in takes per answer."""
    cap: int
    """Its Target Optimizer agent's maximum concurrency."""


REPLICAS = (Replica("fast-a", 300, 2), Replica("fast-b", 300, 3), Replica("slow", 1200, 2))
"""Two fast replicas with different caps and a slow one (4x the time per answer)."""
SUM_OF_CAPS = sum(r.cap for r in REPLICAS)
BELOW_CAPS = (60, SUM_OF_CAPS - 1)
"""(requests, concurrency) under the sum of the caps: a target always has room."""
ABOVE_CAPS = (240, 4 * SUM_OF_CAPS)
"""(requests, concurrency) far above the sum of the caps: every target is full most of the time."""
COOLDOWN_SECONDS = 2
"""The tier's `fallback.cooldown_seconds` here: a model cooled down by at-cap 503s comes back soon."""


@dataclass(frozen=True)
class Phase:
    """What one load recorded."""

    name: str
    replies: list[Reply]
    served: dict[str, int]
    """Replica -> requests the load balancer sent it during the phase."""
    rejected: int
    """Requests the load balancer answered 503 because every target was at its cap."""
    seconds: float

    def share(self, replica: str) -> float:
        total = sum(self.served.values())
        return self.served[replica] / total if total else 0.0

    def backends(self) -> Counter[str | None]:
        return Counter(r.backend for r in self.replies)

    def report(self) -> str:
        ok = sorted(r.seconds for r in self.replies if r.status == 200)
        statuses = Counter(r.status for r in self.replies)
        shares = ", ".join(f"{n} {self.served[n]} ({self.share(n):.0%})" for n in self.served)
        return (
            f"{self.name}: {len(self.replies)} requests in {self.seconds:.1f} s, statuses "
            f"{dict(sorted(statuses.items()))}, backends {dict(self.backends())}; "
            f"per replica: {shares}; load balancer 503s (all targets at cap): {self.rejected}; "
            f"latency of the 200s p50 {_quantile(ok, 0.50) * 1000:.0f} ms, "
            f"p99 {_quantile(ok, 0.99) * 1000:.0f} ms"
        )


def _quantile(values: list[float], q: float) -> float:
    """The `q` quantile of sorted `values` (nearest rank); 0 for none."""
    if not values:
        return 0.0
    return values[min(len(values) - 1, max(0, round(q * len(values) + 0.5) - 1))]


def direct_chat(port: int, model: ModelConfig) -> Reply:
    """One chat completion on the model's direct route, `/<model>/v1/...` on the load balancer."""
    body = {"model": model.api_model_name, "messages": [{"role": "user", "content": "Which backend?"}]}
    sent = time.monotonic()
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=REQUEST_TIMEOUT)
    try:
        path = f"/{model.name}/v1/chat/completions"
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read().decode(errors="replace")
        text = json.loads(raw)["choices"][0]["message"]["content"] if resp.status == 200 else raw
        return Reply(resp.status, text, resp.getheader(BACKEND_HEADER), 0, 0, False, sent, time.monotonic())
    except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
        return Reply(0, f"{type(exc).__name__}: {exc}", None, 0, 0, False, sent, time.monotonic())
    finally:
        conn.close()


@dataclass(frozen=True)
class Scenario:
    tier: TierConfig
    gateway: Gateway
    alb: StandIn
    replicas: dict[str, StandIn]
    bedrock: StandIn

    @property
    def model(self) -> ModelConfig:
        return self.tier.models[0]

    def targets(self) -> list[dict[str, Any]]:
        targets: list[dict[str, Any]] = self.alb.stats()["targets"]
        return targets

    def run(self, name: str, load: tuple[int, int], *, direct: bool = False) -> Phase:
        requests, concurrency = load
        before = [t["served"] for t in self.targets()]
        rejected = self.alb.count("rejected")
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            if direct:
                replies = list(pool.map(lambda _: direct_chat(self.alb.port, self.model), range(requests)))
            else:
                replies = list(
                    pool.map(lambda _: chat(self.gateway.port, self.model.api_model_name), range(requests))
                )
        seconds = time.monotonic() - start
        served = {r.name: t["served"] - b for r, t, b in zip(REPLICAS, self.targets(), before, strict=True)}
        phase = Phase(name, replies, served, self.alb.count("rejected") - rejected, seconds)
        print(f"\n{phase.report()}")
        return phase


@pytest.fixture(scope="module")
def scenario(litellm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    workdir = tmp_path_factory.mktemp("gateway-balancing")
    tier = e2e_tier(COOLDOWN_SECONDS)
    model = tier.models[0]
    replicas = {
        r.name: StandIn(
            "vllm", workdir / r.name, f"--model={model.api_model_name}", f"--delay-ms={r.delay_ms}"
        )
        for r in REPLICAS
    }
    bedrock = StandIn("bedrock", workdir)
    started: list[StandIn] = []
    try:
        for stand_in in [*replicas.values(), bedrock]:
            stand_in.log.parent.mkdir(exist_ok=True)
            stand_in.start()
            started.append(stand_in)
        targets = [f"--target={replicas[r.name].base_url}@{r.cap}" for r in REPLICAS]
        alb = StandIn("alb", workdir, f"--model={model.name}", *targets)
        alb.start()
        started.append(alb)
        gateway = Gateway(
            tier,
            workdir,
            litellm=litellm,
            vllm_url=alb.base_url,
            bedrock_url=bedrock.base_url,
            load_balancer_url=alb.base_url,
        )
        gateway.start()
        try:
            yield Scenario(tier, gateway, alb, replicas, bedrock)
        finally:
            gateway.stop()
    finally:
        for stand_in in started:
            stand_in.stop()


@pytest.fixture(scope="module")
def below_caps(scenario: Scenario) -> Phase:
    return scenario.run("gateway, below the caps", BELOW_CAPS)


@pytest.fixture(scope="module")
def above_caps(scenario: Scenario, below_caps: Phase) -> Phase:
    return scenario.run("gateway, above the caps", ABOVE_CAPS)


@pytest.fixture(scope="module")
def direct_below_caps(scenario: Scenario, above_caps: Phase) -> Phase:
    # After the gateway's loads, so the replicas are idle again when it starts.
    return scenario.run("direct route, below the caps", BELOW_CAPS, direct=True)


@pytest.fixture(scope="module")
def direct(scenario: Scenario, direct_below_caps: Phase) -> Phase:
    return scenario.run("direct route, above the caps", ABOVE_CAPS, direct=True)


def test_the_poc_gateway_calls_the_model_route_on_the_load_balancer(scenario: Scenario) -> None:
    model = scenario.model
    assert gateway_route(scenario.tier) is GatewayRoute.LOAD_BALANCER
    vllm = [e for e in scenario.gateway.config["model_list"] if e["model_name"] == model.api_model_name]
    assert [(e["model_info"]["id"], e["litellm_params"]["api_base"]) for e in vllm] == [
        (vllm_deployment_id(model), f"os.environ/{route_env_name(model)}")
    ]
    # The pod's environment names the model's route; here only its address is loopback.
    assert scenario.gateway.env[route_env_name(model)] == route_api_base(model, scenario.alb.base_url)
    assert route_api_base(model, scenario.alb.base_url).endswith(f"/{model.name}/v1")


def test_below_the_caps_vllm_answers_everything_by_least_outstanding_requests(below_caps: Phase) -> None:
    assert {(r.status, r.text) for r in below_caps.replies} == {(200, VLLM_TEXT)}, below_caps.report()
    assert below_caps.rejected == 0, below_caps.report()
    assert sum(below_caps.served.values()) == len(below_caps.replies)


# Below the caps only. Above them the gateway's cooldown sends most requests to Bedrock, and how
# many still reach vLLM (43 of 240 in one run, 14 in another) depends on how the machine's load
# times the 503s against the cooldown: a share of a dozen requests is noise, not balancing. Above
# the caps the test that holds is that no replica exceeds its cap (below) and that every request
# is answered (test_above_the_caps_every_request_is_answered_by_vllm_or_bedrock).
@pytest.mark.parametrize("phase", ["below_caps", "direct_below_caps"])
def test_the_slow_replica_gets_a_smaller_share_than_each_fast_one(
    phase: str, request: pytest.FixtureRequest
) -> None:
    recorded: Phase = request.getfixturevalue(phase)
    slow = recorded.share("slow")
    assert all(slow < recorded.share(r.name) for r in REPLICAS if r.name != "slow"), recorded.report()


def test_no_replica_ever_exceeds_its_cap(scenario: Scenario, direct: Phase) -> None:
    """Every replica's own record of its peak concurrency, over all three loads."""
    peaks = {r.name: scenario.replicas[r.name].stats()["max_active"] for r in REPLICAS}
    caps = {r.name: r.cap for r in REPLICAS}
    assert all(peaks[n] <= caps[n] for n in caps), (peaks, caps)
    # The loads did fill them: the above-caps load ran every replica at its cap.
    assert peaks == caps, (peaks, caps)


def test_above_the_caps_every_request_is_answered_by_vllm_or_bedrock(
    scenario: Scenario, above_caps: Phase
) -> None:
    """At-cap requests get the load balancer's 503, which the gateway retries and then sends to Bedrock."""
    assert {r.status for r in above_caps.replies} == {200}, above_caps.report()
    model = scenario.model
    answers = Counter((r.backend, r.text) for r in above_caps.replies)
    assert set(answers) == {
        (vllm_deployment_id(model), VLLM_TEXT),
        (bedrock_deployment_id(model), BEDROCK_TEXT),
    }, answers
    assert above_caps.rejected > 0, above_caps.report()
    # Each vLLM answer went through the load balancer to a replica below its cap.
    assert answers[(vllm_deployment_id(model), VLLM_TEXT)] == sum(above_caps.served.values())


def test_below_the_caps_the_direct_route_answers_everything(direct_below_caps: Phase) -> None:
    assert {(r.status, r.text) for r in direct_below_caps.replies} == {(200, VLLM_TEXT)}
    assert direct_below_caps.rejected == 0, direct_below_caps.report()


def test_the_direct_route_answers_at_cap_requests_with_503(direct: Phase) -> None:
    """No gateway, no fallback: the load balancer's 503 reaches the client (the design's contrast)."""
    statuses = Counter(r.status for r in direct.replies)
    assert set(statuses) == {200, 503}, direct.report()
    assert statuses[503] == direct.rejected
