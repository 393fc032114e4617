"""The fallback gateway end to end: the real LiteLLM proxy, run with the config gpufarm generates.

Real processes on loopback (see conftest.py): the proxy from `.venv-gateway`, a vLLM stand-in
that the test kills with SIGKILL mid-run and starts again, and a Bedrock runtime stand-in.
The scenario runs once, in module fixtures that build on each other (vLLM up, then killed under
load, then back, then answering 503); each test asserts one behaviour of what they recorded.
A second proxy, for a tier with a guardrail and a token cap, shows what reaches Bedrock.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import ModelConfig, build_tier, merge
from gpufarm.k8s.gateway import bedrock_deployment_id, vllm_deployment_id

from .conftest import (
    COOLDOWN_SECONDS,
    LOOPBACK,
    REQUEST_TIMEOUT,
    Gateway,
    Reply,
    StandIn,
    chat,
    free_port,
    poc_document,
)
from .stand_ins import BEDROCK_TEXT, VLLM_TEXT

REQUESTS = 40
"""Requests in the steady stream during which vLLM is killed."""
CLIENTS = 4
"""Concurrent clients sending the steady stream (REQUESTS / CLIENTS each, back to back)."""
STREAM_DEADLINE_SECONDS = 120
"""Clients send nothing new after this long (about 5 s are needed; a hung gateway fails, not hangs)."""
KILL_AFTER = 8
"""Replies that arrive before the kill; it then waits for vLLM to be answering a request."""
RECOVERED_IN_A_ROW = 5
"""Consecutive vLLM replies that show traffic is back."""
RECOVERY_SLACK_SECONDS = 30
"""Time beyond the cooldown for the first vLLM reply (a busy CI machine included)."""
GUARDRAIL = ("gr-e2e-guardrail", "3")
"""(identifier, version) of the guardrail as deployed, handed to the gateway pods' environment."""
MAX_TOKENS = 256


def _model(gateway: Gateway) -> ModelConfig:
    return gateway.tier.models[0]


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


@dataclass(frozen=True)
class Outage:
    """The steady stream during which vLLM was killed, and what followed while it stayed down."""

    replies: list[Reply]
    kill_sent: float
    """When SIGKILL was sent to the vLLM stand-in."""
    killed_at: float
    """When the stand-in was gone (reaped)."""
    bedrock_before: dict[str, Any]
    bedrock_after: dict[str, Any]
    stream: Reply
    """A streamed request sent while vLLM was down."""

    @property
    def before(self) -> list[Reply]:
        """Replies complete before the kill."""
        return [r for r in self.replies if r.received < self.kill_sent]

    @property
    def in_flight(self) -> list[Reply]:
        """Requests sent before the kill and answered after it."""
        return [r for r in self.replies if r.sent < self.kill_sent < r.received]

    @property
    def after(self) -> list[Reply]:
        """Requests sent after the kill."""
        return [r for r in self.replies if r.sent > self.killed_at]


@dataclass(frozen=True)
class Recovery:
    """Sequential requests after vLLM came back, until RECOVERED_IN_A_ROW came from it."""

    restarted_at: float
    replies: list[Reply]
    stream: Reply
    """A streamed request sent once traffic was back."""


@pytest.fixture(scope="module")
def while_up(gateway: Gateway) -> tuple[Reply, Reply]:
    """A JSON and a streamed request while vLLM is up."""
    name = _model(gateway).api_model_name
    return chat(gateway.port, name), chat(gateway.port, name, stream=True)


@pytest.fixture(scope="module")
def outage(gateway: Gateway, vllm: StandIn, bedrock: StandIn, while_up: tuple[Reply, Reply]) -> Outage:
    """CLIENTS clients send REQUESTS requests; vLLM is SIGKILLed while it answers some of them."""
    name = _model(gateway).api_model_name
    replies: list[Reply] = []
    lock = threading.Lock()
    stop_sending = time.monotonic() + STREAM_DEADLINE_SECONDS

    def client() -> None:
        for _ in range(REQUESTS // CLIENTS):
            if time.monotonic() > stop_sending:
                return  # the requests never sent count as lost
            reply = chat(gateway.port, name)
            with lock:
                replies.append(reply)
            time.sleep(0.02)

    def answered() -> int:
        with lock:
            return len(replies)

    bedrock_before = bedrock.stats()
    threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    _wait_for(lambda: answered() >= KILL_AFTER, timeout=60)
    # Kill while the stand-in holds accepted requests, so some are lost mid-answer on the vLLM side.
    _wait_for(lambda: vllm.stats()["active"] > 0, timeout=10)
    kill_sent = time.monotonic()
    vllm.kill()
    killed_at = time.monotonic()
    for thread in threads:
        thread.join(timeout=STREAM_DEADLINE_SECONDS + REQUEST_TIMEOUT)
    stream = chat(gateway.port, name, stream=True)
    with lock:
        sent = list(replies)
    return Outage(sent, kill_sent, killed_at, bedrock_before, bedrock.stats(), stream)


@pytest.fixture(scope="module")
def recovery(gateway: Gateway, vllm: StandIn, outage: Outage) -> Recovery:
    """vLLM starts again on its port; requests every 0.1 s until RECOVERED_IN_A_ROW come from it."""
    name = _model(gateway).api_model_name
    vllm_id = vllm_deployment_id(_model(gateway))
    vllm.start()
    restarted_at = time.monotonic()
    replies: list[Reply] = []
    deadline = restarted_at + COOLDOWN_SECONDS + RECOVERY_SLACK_SECONDS
    while time.monotonic() < deadline:
        replies.append(chat(gateway.port, name))
        if len(replies) >= RECOVERED_IN_A_ROW and all(
            r.backend == vllm_id for r in replies[-RECOVERED_IN_A_ROW:]
        ):
            break
        time.sleep(0.1)
    return Recovery(restarted_at, replies, chat(gateway.port, name, stream=True))


@pytest.fixture(scope="module")
def server_error(gateway: Gateway, vllm: StandIn, recovery: Recovery) -> tuple[Reply, int]:
    """vLLM answers 503 to one request: the reply, and how often the gateway asked vLLM."""
    failed_before = vllm.count("failed")
    vllm.fail(503)
    try:
        reply = chat(gateway.port, _model(gateway).api_model_name)
    finally:
        vllm.fail(None)
    return reply, vllm.count("failed") - failed_before


@dataclass(frozen=True)
class Guarded:
    """One request through a gateway whose tier has a guardrail and a token cap, vLLM unreachable."""

    reply: Reply
    request: dict[str, Any]
    """The Converse request the Bedrock stand-in received: operation, model_id, body."""


@pytest.fixture(scope="module")
def guarded(litellm: Path, tmp_path_factory: pytest.TempPathFactory) -> Guarded:
    """A second proxy: guardrail on, `bedrock.max_tokens` set, and nothing listening for vLLM.

    No retries, so the request goes to Bedrock without LiteLLM's retry back-off.
    """
    workdir = tmp_path_factory.mktemp("gateway-guardrail")
    document = merge(poc_document(), {"fallback": {"guardrail": {"enabled": True}, "num_retries": 0}})
    document["models"][0]["bedrock"]["max_tokens"] = MAX_TOKENS
    tier = build_tier(document)
    bedrock = StandIn("bedrock", workdir)
    bedrock.start()
    try:
        proxy = Gateway(
            tier,
            workdir,
            litellm=litellm,
            vllm_url=f"http://{LOOPBACK}:{free_port()}",
            bedrock_url=bedrock.base_url,
            guardrail=GUARDRAIL,
        )
        proxy.start()
        try:
            reply = chat(proxy.port, tier.models[0].api_model_name)
        finally:
            proxy.stop()
        request: dict[str, Any] = bedrock.stats()["last"]
    finally:
        bedrock.stop()
    return Guarded(reply, request)


def _served(replies: list[Reply]) -> list[tuple[int, str, str | None]]:
    return [(r.status, r.text, r.backend) for r in replies]


# --------------------------------------------------------------------------- (1) vLLM up


def test_vllm_serves_while_it_is_up(gateway: Gateway, while_up: tuple[Reply, Reply]) -> None:
    reply, _ = while_up
    assert (reply.status, reply.text, reply.backend, reply.fallbacks) == (
        200,
        VLLM_TEXT,
        vllm_deployment_id(_model(gateway)),
        0,
    )


# --------------------------------------------------------------------------- (2) vLLM killed mid-run


def test_every_request_of_the_stream_succeeds_across_the_kill(outage: Outage) -> None:
    failed = [r for r in outage.replies if r.status != 200]
    assert (len(outage.replies), failed) == (REQUESTS, [])


def test_replies_before_the_kill_come_from_vllm(gateway: Gateway, outage: Outage) -> None:
    served = {(r.text, r.backend) for r in outage.before}
    assert (len(outage.before) >= KILL_AFTER, served) == (
        True,
        {(VLLM_TEXT, vllm_deployment_id(_model(gateway)))},
    )


def test_requests_in_flight_at_the_kill_are_answered(outage: Outage) -> None:
    served = _served(outage.in_flight)
    assert served and all(status == 200 and text in (VLLM_TEXT, BEDROCK_TEXT) for status, text, _ in served)


def test_requests_after_the_kill_are_served_by_bedrock(gateway: Gateway, outage: Outage) -> None:
    expected = (200, BEDROCK_TEXT, bedrock_deployment_id(_model(gateway)))
    assert outage.after and _served(outage.after) == [expected] * len(outage.after)


def test_bedrock_answered_each_fallen_back_request_once(outage: Outage) -> None:
    served_by_bedrock = sum(r.text == BEDROCK_TEXT for r in outage.replies)
    answered = outage.bedrock_after["counts"].get("converse", 0) - outage.bedrock_before["counts"].get(
        "converse", 0
    )
    assert answered == served_by_bedrock


def test_bedrock_is_called_with_the_configured_model_signed(gateway: Gateway, bedrock: StandIn) -> None:
    target = _model(gateway).bedrock_target
    assert target is not None
    stats = bedrock.stats()
    assert (set(stats["models"]), stats["counts"].get("unsigned", 0)) == ({target.model_id}, 0)


def test_fallback_is_reported_in_the_attempted_fallbacks_header(outage: Outage) -> None:
    assert {r.fallbacks for r in outage.after} == {1}


# --------------------------------------------------------------------------- (3) vLLM back


def test_traffic_returns_to_vllm_after_the_cooldown(gateway: Gateway, recovery: Recovery) -> None:
    vllm_id = vllm_deployment_id(_model(gateway))
    last = recovery.replies[-RECOVERED_IN_A_ROW:]
    assert _served(last) == [(200, VLLM_TEXT, vllm_id)] * RECOVERED_IN_A_ROW, _served(recovery.replies)


def test_traffic_returns_within_the_cooldown_and_slack(gateway: Gateway, recovery: Recovery) -> None:
    vllm_id = vllm_deployment_id(_model(gateway))
    first = next((r for r in recovery.replies if r.backend == vllm_id), None)
    assert first is not None, _served(recovery.replies)
    assert first.sent - recovery.restarted_at <= COOLDOWN_SECONDS + RECOVERY_SLACK_SECONDS


def test_no_request_fails_while_vllm_comes_back(recovery: Recovery) -> None:
    assert [r for r in recovery.replies if r.status != 200] == []


# --------------------------------------------------------------------------- (4) streaming


def test_streaming_from_vllm(gateway: Gateway, while_up: tuple[Reply, Reply]) -> None:
    _, stream = while_up
    assert (stream.status, stream.text, stream.backend, stream.chunks > 1, stream.done) == (
        200,
        VLLM_TEXT,
        vllm_deployment_id(_model(gateway)),
        True,
        True,
    )


def test_streaming_from_bedrock_while_vllm_is_down(gateway: Gateway, outage: Outage) -> None:
    stream = outage.stream
    assert (stream.status, stream.text, stream.backend, stream.chunks > 1, stream.done) == (
        200,
        BEDROCK_TEXT,
        bedrock_deployment_id(_model(gateway)),
        True,
        True,
    )


def test_bedrock_streams_through_converse_stream(outage: Outage) -> None:
    streams = outage.bedrock_after["counts"].get("converse-stream", 0)
    assert streams - outage.bedrock_before["counts"].get("converse-stream", 0) == 1


def test_streaming_from_vllm_again_after_recovery(gateway: Gateway, recovery: Recovery) -> None:
    stream = recovery.stream
    assert (stream.text, stream.backend, stream.done) == (
        VLLM_TEXT,
        vllm_deployment_id(_model(gateway)),
        True,
    )


# --------------------------------------------------------------------------- 5xx and retry budget


def test_vllm_server_error_falls_back_to_bedrock(gateway: Gateway, server_error: tuple[Reply, int]) -> None:
    reply, _ = server_error
    assert (reply.status, reply.text, reply.backend) == (
        200,
        BEDROCK_TEXT,
        bedrock_deployment_id(_model(gateway)),
    )


def test_vllm_is_retried_num_retries_times_before_falling_back(
    gateway: Gateway, server_error: tuple[Reply, int]
) -> None:
    _, vllm_attempts = server_error
    assert vllm_attempts == gateway.tier.fallback.num_retries + 1


# --------------------------------------------------------------------------- offline, as generated


def test_gateway_reaches_for_nothing_beyond_loopback(gateway: Gateway, recovery: Recovery) -> None:
    """A download attempt (cost map, tokenizer, ...) logs its URL; only loopback URLs may appear.

    The start banner's link to LiteLLM's issue tracker is printed, never fetched.
    """
    urls = set(re.findall(r"https?://[^\s\"'\\)\x1b]+", gateway.log.read_text(errors="replace")))
    outside = {u for u in urls if not u.startswith("http://127.0.0.1:")}
    assert outside <= {"https://github.com/BerriAI/litellm/issues/new"}


def test_only_hosts_and_ports_differ_from_the_generated_config(gateway: Gateway) -> None:
    def leaves(node: Any, path: str = "") -> dict[str, Any]:
        if isinstance(node, dict):
            return {k: v for key in node for k, v in leaves(node[key], f"{path}/{key}").items()}
        if isinstance(node, list):
            return {k: v for i, item in enumerate(node) for k, v in leaves(item, f"{path}/{i}").items()}
        return {path: node}

    generated, run = leaves(gateway.config), leaves(gateway.loopback_config)
    changed = {path for path in generated if generated[path] != run.get(path)}
    assert (run.keys() == generated.keys(), {p.rsplit("/", 1)[1] for p in changed}) == (True, {"api_base"})


# --------------------------------------------------------------------------- guardrail and token cap


def test_guardrail_applies_on_the_fallback_path(guarded: Guarded) -> None:
    identifier, version = GUARDRAIL
    assert (guarded.reply.text, guarded.request["body"].get("guardrailConfig")) == (
        BEDROCK_TEXT,
        {"guardrailIdentifier": identifier, "guardrailVersion": version},
    )


def test_max_tokens_caps_answers_on_the_fallback_path(guarded: Guarded) -> None:
    assert guarded.request["body"].get("inferenceConfig", {}).get("maxTokens") == MAX_TOKENS
