"""The hot path: clients on the model's route with `gpufarm.client`'s transport, the gateway only on refusal.

The poc tier's load balancer is the `alb` stand-in (tests/e2e/stand_ins.py, `AlbHandler`: least
outstanding requests, the Target Optimizer's per-target cap, an immediate 503 when every target is
full) in front of three vLLM stand-ins of unequal speed, each with its own cap. It has two
listeners on the same targets and caps, as the tier's ALB has (ADR 0050): the clients' listener,
whose `/<model>/v1` is the model's route, and the gateway's (port 8088 in the tier), which the real
LiteLLM proxy calls with the config and pod environment gpufarm builds for the tier. A second
`alb` stand-in with no targets is the route of a model parked at zero replicas (the load balancer
answers 503 when a target group has no registered target).

The client is `httpx` with :class:`gpufarm.client.FallbackTransport` (and the async transport) on
the model's route and the gateway's base URL, as docs/client.md shows. Each test asserts one
behaviour; p50/p99 of the hot path and of the same load through the gateway are printed
(`pytest -s`). See docs/decisions/0051-gateway-off-the-hot-path.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpufarm.client import FALLBACK_HEADER, AsyncFallbackTransport, FallbackTransport
from gpufarm.config import ModelConfig, TierConfig
from gpufarm.k8s.gateway import BACKEND_HEADER, bedrock_deployment_id, vllm_deployment_id

from .conftest import GATEWAY_VENV, LOOPBACK, REPO, REQUEST_TIMEOUT, Gateway, StandIn, chat, e2e_tier
from .stand_ins import BEDROCK_TEXT, VLLM_TEXT


@dataclass(frozen=True)
class Replica:
    name: str
    delay_ms: int
    """How long the stand-in takes per answer."""
    cap: int
    """Its Target Optimizer agent's maximum concurrency."""


REPLICAS = (Replica("fast-a", 100, 2), Replica("fast-b", 100, 3), Replica("slow", 400, 2))
SUM_OF_CAPS = sum(r.cap for r in REPLICAS)
BELOW_CAPS = (40, SUM_OF_CAPS - 3)
"""(requests, concurrency) below the sum of the caps: a target always has room, with a margin for
the stand-in releasing a target's slot just after the answer left (the client may be quicker)."""
ABOVE_CAPS = (112, 4 * SUM_OF_CAPS)
"""(requests, concurrency) far above the sum of the caps."""
STREAMS_ABOVE_CAPS = (56, 3 * SUM_OF_CAPS)
COOLDOWN_SECONDS = 2


@dataclass(frozen=True)
class Answer:
    """One request as the client saw it."""

    status: int
    text: str
    fallback: str | None
    """The transport's `x-gpufarm-fallback` header (None: the route answered)."""
    backend: str | None
    """The gateway's `x-litellm-model-id` (None on the route's own answers)."""
    done: bool
    """A stream ended with `data: [DONE]` (False for JSON)."""
    seconds: float


def _request_body(model: ModelConfig, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model.api_model_name, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
    return body


def _text(payload: bytes, stream: bool) -> tuple[str, bool]:
    if not stream:
        return json.loads(payload)["choices"][0]["message"]["content"], False
    parts, done = [], False
    for line in payload.decode().splitlines():
        data = line.removeprefix("data:").strip()
        if not line.startswith("data:"):
            continue
        if data == "[DONE]":
            done = True
            continue
        for choice in json.loads(data).get("choices", []):
            parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts), done


def _answer(status: int, headers: httpx.Headers, payload: bytes, stream: bool, sent: float) -> Answer:
    text, done = _text(payload, stream) if status == 200 else (payload.decode(errors="replace"), False)
    return Answer(
        status, text, headers.get(FALLBACK_HEADER), headers.get(BACKEND_HEADER), done, time.monotonic() - sent
    )


def send(client: httpx.Client, model: ModelConfig, *, stream: bool = False) -> Answer:
    sent = time.monotonic()
    with client.stream("POST", "/chat/completions", json=_request_body(model, stream)) as response:
        payload = response.read()
    return _answer(response.status_code, response.headers, payload, stream, sent)


async def send_async(client: httpx.AsyncClient, model: ModelConfig, *, stream: bool = False) -> Answer:
    sent = time.monotonic()
    async with client.stream("POST", "/chat/completions", json=_request_body(model, stream)) as response:
        payload = await response.aread()
    return _answer(response.status_code, response.headers, payload, stream, sent)


def _quantile(values: list[float], q: float) -> float:
    """The `q` quantile of `values` (nearest rank); 0 for none."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


@dataclass(frozen=True)
class Counts:
    """What the stand-ins counted: each listener's forwarded and rejected requests, Bedrock's answers."""

    route_forwarded: int
    route_rejected: int
    gateway_forwarded: int
    gateway_rejected: int
    bedrock: int

    def __sub__(self, other: Counts) -> Counts:
        return Counts(*(a - b for a, b in zip(self.__dict__.values(), other.__dict__.values(), strict=True)))


@dataclass(frozen=True)
class Phase:
    name: str
    answers: list[Answer]
    counts: Counts
    """What the stand-ins counted during the phase."""
    resent: int
    """The transport's count of re-sent requests during the phase."""

    def report(self) -> str:
        ok = [a.seconds for a in self.answers if a.status == 200]
        return (
            f"{self.name}: {len(self.answers)} requests, statuses "
            f"{dict(Counter(a.status for a in self.answers))}, re-sent to the gateway {self.resent}, "
            f"{self.counts}; p50 {_quantile(ok, 0.5) * 1000:.0f} ms, p99 {_quantile(ok, 0.99) * 1000:.0f} ms"
        )


@dataclass
class Scenario:
    tier: TierConfig
    gateway: Gateway
    alb: StandIn
    parked: StandIn
    """The route of a model parked at zero: an `alb` stand-in with no targets."""
    replicas: dict[str, StandIn]
    bedrock: StandIn

    @property
    def model(self) -> ModelConfig:
        return self.tier.models[0]

    @property
    def route_url(self) -> str:
        return f"{self.alb.base_url}/{self.model.name}/v1"

    @property
    def gateway_url(self) -> str:
        return f"http://{LOOPBACK}:{self.gateway.port}/v1"

    @property
    def gateway_listener(self) -> int:
        (port,) = self.alb.other_ports
        return port

    def counts(self) -> Counts:
        route = self.alb.stats()["counts"]
        gateway_stats = httpx.get(f"http://{LOOPBACK}:{self.gateway_listener}/_stand_in/stats").json()[
            "counts"
        ]
        return Counts(
            route.get("forwarded", 0),
            route.get("rejected", 0),
            gateway_stats.get("forwarded", 0),
            gateway_stats.get("rejected", 0),
            sum(self.bedrock.stats()["counts"].get(op, 0) for op in ("converse", "converse-stream")),
        )

    def run(
        self, name: str, load: tuple[int, int], *, stream: bool = False, asynchronous: bool = False
    ) -> Phase:
        requests, concurrency = load
        before = self.counts()
        if asynchronous:
            answers, resent = asyncio.run(self._run_async(requests, concurrency, stream))
        else:
            transport = FallbackTransport(self.route_url, self.gateway_url)
            with (
                httpx.Client(base_url=self.route_url, transport=transport, timeout=REQUEST_TIMEOUT) as client,
                ThreadPoolExecutor(max_workers=concurrency) as pool,
            ):
                answers = list(pool.map(lambda _: send(client, self.model, stream=stream), range(requests)))
            resent = transport.fallbacks
        phase = Phase(name, answers, self.counts() - before, resent)
        print(f"\n{phase.report()}")
        return phase

    async def _run_async(self, requests: int, concurrency: int, stream: bool) -> tuple[list[Answer], int]:
        transport = AsyncFallbackTransport(self.route_url, self.gateway_url)
        gate = asyncio.Semaphore(concurrency)
        async with httpx.AsyncClient(
            base_url=self.route_url, transport=transport, timeout=REQUEST_TIMEOUT
        ) as client:

            async def one() -> Answer:
                async with gate:
                    return await send_async(client, self.model, stream=stream)

            answers = await asyncio.gather(*(one() for _ in range(requests)))
        return list(answers), transport.fallbacks


@pytest.fixture(scope="module")
def scenario(litellm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    workdir = tmp_path_factory.mktemp("hot-path")
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
        alb = StandIn("alb", workdir, f"--model={model.name}", "--gateway-listener", *targets)
        parked_dir = workdir / "parked"
        parked_dir.mkdir()
        parked = StandIn("alb", parked_dir, f"--model={model.name}")
        for stand_in in (alb, parked):
            stand_in.start()
            started.append(stand_in)
        gateway = Gateway(
            tier,
            workdir,
            litellm=litellm,
            vllm_url=alb.base_url,
            bedrock_url=bedrock.base_url,
            load_balancer_url=f"http://{LOOPBACK}:{alb.other_ports[0]}",
        )
        gateway.start()
        try:
            yield Scenario(tier, gateway, alb, parked, replicas, bedrock)
        finally:
            gateway.stop()
    finally:
        for stand_in in started:
            stand_in.stop()


@pytest.fixture(scope="module")
def below_caps(scenario: Scenario) -> Phase:
    return scenario.run("hot path, below the caps", BELOW_CAPS)


@pytest.fixture(scope="module")
def through_gateway(scenario: Scenario, below_caps: Phase) -> tuple[float, float]:
    """The same load sent to the gateway's base URL (the one-URL route), for comparison: (p50, p99) s."""
    requests, concurrency = BELOW_CAPS
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        replies = list(
            pool.map(lambda _: chat(scenario.gateway.port, scenario.model.api_model_name), range(requests))
        )
    assert {(r.status, r.text) for r in replies} == {(200, VLLM_TEXT)}
    seconds = [r.seconds for r in replies]
    return _quantile(seconds, 0.5), _quantile(seconds, 0.99)


@pytest.fixture(scope="module")
def above_caps(scenario: Scenario, through_gateway: tuple[float, float]) -> Phase:
    return scenario.run("hot path, above the caps", ABOVE_CAPS)


@pytest.fixture(scope="module")
def streams_above_caps(scenario: Scenario, above_caps: Phase) -> Phase:
    return scenario.run("hot path, streams above the caps", STREAMS_ABOVE_CAPS, stream=True)


@pytest.fixture(scope="module")
def async_above_caps(scenario: Scenario, streams_above_caps: Phase) -> Phase:
    return scenario.run("hot path, async transport, above the caps", ABOVE_CAPS, asynchronous=True)


@pytest.fixture(scope="module")
def async_streams_above_caps(scenario: Scenario, async_above_caps: Phase) -> Phase:
    return scenario.run(
        "hot path, async transport, streams above the caps",
        STREAMS_ABOVE_CAPS,
        stream=True,
        asynchronous=True,
    )


def test_below_the_caps_vllm_answers_everything_and_the_gateway_gets_nothing(
    below_caps: Phase, through_gateway: tuple[float, float]
) -> None:
    assert {(a.status, a.text, a.fallback) for a in below_caps.answers} == {(200, VLLM_TEXT, None)}
    assert below_caps.resent == 0
    requests = len(below_caps.answers)
    # Every request went through the clients' listener to a replica, and the gateway, which reaches
    # vLLM only through its own listener and Bedrock directly, called neither.
    assert below_caps.counts == Counts(requests, 0, 0, 0, 0), below_caps.report()
    hot = [a.seconds for a in below_caps.answers]
    hot_ms = _quantile(hot, 0.5) * 1000, _quantile(hot, 0.99) * 1000
    gateway_ms = through_gateway[0] * 1000, through_gateway[1] * 1000
    print(
        f"\nconcurrency {BELOW_CAPS[1]}, {requests} requests: hot path p50 {hot_ms[0]:.0f} ms, "
        f"p99 {hot_ms[1]:.0f} ms; through the gateway p50 {gateway_ms[0]:.0f} ms, p99 {gateway_ms[1]:.0f} ms"
    )


@pytest.mark.parametrize(
    "phase", ["above_caps", "streams_above_caps", "async_above_caps", "async_streams_above_caps"]
)
def test_above_the_caps_every_request_is_answered_and_only_refusals_are_resent(
    phase: str, scenario: Scenario, request: pytest.FixtureRequest
) -> None:
    recorded: Phase = request.getfixturevalue(phase)
    model = scenario.model
    assert {a.status for a in recorded.answers} == {200}, recorded.report()
    kinds = Counter((a.fallback, a.backend, a.text) for a in recorded.answers)
    # The route's own answers, and the gateway's after the route's 503: vLLM through the gateway's
    # listener when a replica had room by then, else Bedrock.
    assert set(kinds) <= {
        (None, None, VLLM_TEXT),
        ("503", vllm_deployment_id(model), VLLM_TEXT),
        ("503", bedrock_deployment_id(model), BEDROCK_TEXT),
    }, kinds
    resent = sum(1 for a in recorded.answers if a.fallback is not None)
    assert resent == recorded.resent == recorded.counts.route_rejected > 0, recorded.report()
    # Every request the route did not refuse was forwarded to a replica and answered there.
    assert kinds[(None, None, VLLM_TEXT)] == recorded.counts.route_forwarded
    if "streams" in phase:
        assert all(a.done for a in recorded.answers), recorded.report()


def test_no_replica_ever_exceeds_its_cap(scenario: Scenario, async_streams_above_caps: Phase) -> None:
    """Each replica's own record of its peak concurrency, over every load, both listeners together."""
    peaks = {r.name: scenario.replicas[r.name].stats()["max_active"] for r in REPLICAS}
    caps = {r.name: r.cap for r in REPLICAS}
    assert all(peaks[n] <= caps[n] for n in caps), (peaks, caps)
    assert peaks == caps, (peaks, caps)  # the loads did fill every replica to its cap


def test_a_parked_model_s_requests_go_to_the_gateway(scenario: Scenario) -> None:
    """No registered target: the route answers 503, the transport re-sends to the gateway (whose
    demand counter is the wake signal, ADR 0049), and the gateway answers, JSON or streamed."""
    route = f"{scenario.parked.base_url}/{scenario.model.name}/v1"
    transport = FallbackTransport(route, scenario.gateway_url)
    rejected = scenario.parked.count("rejected")
    with httpx.Client(base_url=route, transport=transport, timeout=REQUEST_TIMEOUT) as client:
        answers = [send(client, scenario.model, stream=stream) for stream in (False, True)]
    assert [(a.status, a.fallback) for a in answers] == [(200, "503"), (200, "503")]
    assert {a.text for a in answers} <= {VLLM_TEXT, BEDROCK_TEXT}
    assert transport.fallbacks == scenario.parked.count("rejected") - rejected == 2


def test_the_openai_sdk_uses_the_transport(scenario: Scenario, async_streams_above_caps: Phase) -> None:
    """The OpenAI SDK (the release the gateway's lock pins) with the transport, JSON and streamed,
    on the live route and on the parked one; run by the gateway's interpreter, which has `openai`."""
    script = textwrap.dedent(
        """
        import asyncio, json, sys
        import httpx
        from openai import OpenAI
        from gpufarm.client import FALLBACK_HEADER, async_openai_client, openai_client, FallbackTransport

        live, parked, gateway, model = sys.argv[1:]
        out = {}
        for name, route in (("live", live), ("parked", parked)):
            client = OpenAI(
                base_url=route, api_key="unused", max_retries=0,
                http_client=httpx.Client(transport=FallbackTransport(route, gateway)),
            )
            messages = [{"role": "user", "content": "hi"}]
            raw = client.chat.completions.with_raw_response.create(model=model, messages=messages)
            text = raw.parse().choices[0].message.content
            with client.chat.completions.with_streaming_response.create(
                model=model, messages=messages, stream=True
            ) as streamed:
                chunks = "".join(c.choices[0].delta.content or "" for c in streamed.parse() if c.choices)
                why = [raw.headers.get(FALLBACK_HEADER), streamed.headers.get(FALLBACK_HEADER)]
                out[name] = [text, why[0], chunks, why[1]]

        helper = openai_client(parked, gateway, max_retries=0)
        reply = helper.chat.completions.create(model=model, messages=messages)
        out["helper"] = reply.choices[0].message.content

        async def main():
            client = async_openai_client(parked, gateway, max_retries=0)
            stream = await client.chat.completions.create(model=model, messages=messages, stream=True)
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        out["async"] = asyncio.run(main())
        print(json.dumps(out))
        """
    )
    parked = f"{scenario.parked.base_url}/{scenario.model.name}/v1"
    done = subprocess.run(
        [
            str(GATEWAY_VENV / "bin" / "python"),
            "-c",
            script,
            scenario.route_url,
            parked,
            scenario.gateway_url,
            scenario.model.api_model_name,
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["live"] == [VLLM_TEXT, None, VLLM_TEXT, None], out
    text, why, chunks, stream_why = out["parked"]
    assert (why, stream_why) == ("503", "503") and {text, chunks} <= {VLLM_TEXT, BEDROCK_TEXT}, out
    assert {out["helper"], out["async"]} <= {VLLM_TEXT, BEDROCK_TEXT}, out
