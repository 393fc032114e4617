"""Bedrock capacity the account owns, end to end: the real LiteLLM proxy with the config gpufarm
generates for a fallback target named by a provisioned-model or application-inference-profile ARN.

vLLM is unreachable and retries are off, so each request goes to the Bedrock runtime stand-in,
which records the request path: the ARN must arrive whole, percent-encoded as one path segment
of `/model/{modelId}/converse[-stream]`, as the Bedrock runtime API takes a provisioned model or
inference profile (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html,
`modelId`: "If you use a provisioned model, specify the ARN of the Provisioned Throughput").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from gpufarm.config import build_tier, merge
from gpufarm.k8s.gateway import bedrock_deployment_id, bedrock_model_name

from .conftest import LOOPBACK, Gateway, Reply, StandIn, chat, free_port, poc_document
from .stand_ins import BEDROCK_TEXT

PROVISIONED = "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123def456"
PROFILE = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/k2l3m4n5o6p7"
TARGETS = {
    "provisioned-model": {
        "model_id": PROVISIONED,
        "base_model_id": "meta.llama3-1-8b-instruct-v1:0",
        "provisioned": {"model_units": 1, "commitment": "one-month"},
    },
    "application-profile": {"model_id": PROFILE, "base_model_id": "us.meta.llama3-1-8b-instruct-v1:0"},
}


@dataclass(frozen=True)
class Sent:
    """A request through the gateway and the Converse request the Bedrock stand-in received for it."""

    reply: Reply
    request: dict[str, Any]


@dataclass(frozen=True)
class Run:
    arn: str
    fallback: Sent
    """The model's own name, vLLM unreachable: the gateway falls back."""
    direct_stream: Sent
    """`<name>@bedrock`, streamed: straight to Bedrock."""
    backend: str


@pytest.fixture(scope="module", params=sorted(TARGETS))
def run(request: pytest.FixtureRequest, litellm: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    target = TARGETS[request.param]
    workdir = tmp_path_factory.mktemp(f"gateway-{request.param}")
    document = merge(poc_document(), {"fallback": {"num_retries": 0}})
    document["models"][0]["bedrock"] = target
    tier = build_tier(document)
    model = tier.models[0]
    bedrock = StandIn("bedrock", workdir)
    bedrock.start()
    try:
        proxy = Gateway(
            tier,
            workdir,
            litellm=litellm,
            vllm_url=f"http://{LOOPBACK}:{free_port()}",
            bedrock_url=bedrock.base_url,
        )
        proxy.start()
        try:
            fallback = Sent(chat(proxy.port, model.api_model_name), bedrock.stats()["last"])
            direct = chat(proxy.port, bedrock_model_name(model), stream=True)
            direct_stream = Sent(direct, bedrock.stats()["last"])
        finally:
            proxy.stop()
    finally:
        bedrock.stop()
    return Run(str(target["model_id"]), fallback, direct_stream, bedrock_deployment_id(model))


def test_a_fallback_reaches_the_arn_through_converse(run: Run) -> None:
    assert (run.fallback.reply.status, run.fallback.reply.text, run.fallback.reply.backend) == (
        200,
        BEDROCK_TEXT,
        run.backend,
    )
    assert (run.fallback.request["operation"], run.fallback.request["model_id"]) == ("converse", run.arn)
    # Colons and the slash encoded: the ARN is one path segment, not a path of its own.
    assert run.fallback.request["path"] == f"/model/{quote(run.arn, safe='')}/converse"


def test_a_stream_to_the_bedrock_route_reaches_the_arn_through_converse_stream(run: Run) -> None:
    reply = run.direct_stream.reply
    assert (reply.status, reply.text, reply.done) == (200, BEDROCK_TEXT, True)
    assert run.direct_stream.request["path"] == f"/model/{quote(run.arn, safe='')}/converse-stream"
