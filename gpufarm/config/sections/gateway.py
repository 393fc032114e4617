"""The gateway in front of the models, and the Amazon Bedrock models it falls back to."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field

from gpufarm import images as image_table
from gpufarm.config.sections.values import ImageRef, Region, SecretRef, _Model

BEDROCK_MODEL_ID = re.compile(r"^[a-z0-9-]+\.[a-z0-9][a-z0-9.:-]*$")
"""A Bedrock foundation-model ID ('anthropic.claude-3-5-haiku-20241022-v1:0') or, with a
geography prefix, an inference-profile ID ('us.anthropic.claude-3-5-haiku-20241022-v1:0')."""

BEDROCK_CAPACITY_ARN = re.compile(
    r"^arn:(?P<partition>aws(?:-us-gov|-cn|-iso|-iso-b)?):bedrock:(?P<region>[a-z0-9-]{1,20}):"
    r"(?P<account>[0-9]{12}):(?P<kind>provisioned-model|application-inference-profile)/"
    r"(?P<resource>[a-zA-Z0-9.:-]+)$"
)
"""A provisioned-model ARN (`arn:aws:bedrock:<region>:<account>:provisioned-model/<12 characters>`)
or an application-inference-profile ARN (`...:application-inference-profile/<id>`): the union of
the `ProvisionedModelArn` and `InferenceProfileArn` patterns of the Bedrock API (botocore's
bedrock 2023-04-20 service model), with the region and account required."""

PROVISIONED_MODEL_RESOURCE = re.compile(r"^[a-z0-9]{12}$")
"""The resource part of a provisioned-model ARN (`ProvisionedModelArn`: `provisioned-model/[a-z0-9]{12}`)."""


class BedrockCommitment(StrEnum):
    """The term of a Provisioned Throughput purchase (the API's `commitmentDuration`)."""

    NONE = "none"
    ONE_MONTH = "one-month"
    SIX_MONTHS = "six-months"


class ProvisionedThroughputConfig(_Model):
    """The Provisioned Throughput a `provisioned-model` ARN names, as bought (for cost and preflight)."""

    model_units: int = Field(ge=1, le=1000, description="Model units bought (billed per unit and hour).")
    commitment: BedrockCommitment = Field(
        description="Commitment term: 'one-month' or 'six-months' ('none', hourly, exists for custom "
        "models only)."
    )


class BedrockTargetConfig(_Model):
    """The Amazon Bedrock model that answers for a model when its GPUs cannot."""

    model_id: str = Field(
        description="Foundation-model ID, inference-profile ID ('us.meta.llama3-3-70b-instruct-v1:0'), "
        "or the ARN of a Provisioned Throughput (provisioned-model) or application inference profile."
    )
    base_model_id: str | None = Field(
        None,
        description="For an ARN in model_id: the foundation model behind it (a provisioned model), or "
        "the model or system inference-profile ID the application profile copies (for IAM and price).",
    )
    provisioned: ProvisionedThroughputConfig | None = Field(
        None,
        description="For a provisioned-model ARN in model_id: its model units and commitment (priced "
        "per unit-hour).",
    )
    region: Region | None = Field(
        None, description="Region to call Bedrock in (default: the stack's region)."
    )
    destination_regions: list[Region] = Field(
        [],
        description="Regions a cross-region profile may route to (default: gpufarm's table for its prefix).",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="Default max_tokens on the fallback path (a request's own value wins).",
    )


class GuardrailConfig(_Model):
    """An Amazon Bedrock guardrail applied to requests answered by Bedrock."""

    enabled: bool = Field(False, description="Create a guardrail and apply it on the fallback path.")
    content_filter_strength: Literal["LOW", "MEDIUM", "HIGH"] = Field(
        "HIGH", description="Strength of the hate, insults, sexual, violence and misconduct filters."
    )
    prompt_attack_strength: Literal["NONE", "LOW", "MEDIUM", "HIGH"] = Field(
        "HIGH", description="Strength of the prompt-attack filter on inputs."
    )
    blocked_message: str = Field(
        "This request was blocked by the platform's content policy.",
        min_length=1,
        max_length=500,
        description="Text returned in place of a blocked prompt or answer.",
    )


class FallbackConfig(_Model):
    """The gateway in front of the models: vLLM first, Amazon Bedrock when vLLM cannot answer."""

    enabled: bool = Field(True, description="Run the LiteLLM gateway and route the default path to it.")
    image: ImageRef = Field(
        image_table.reference("litellm"), description="LiteLLM proxy image, pinned by digest."
    )
    replicas: int = Field(2, ge=2, le=20, description="Gateway pods (at least 2, spread over nodes).")
    cpu: float = Field(1, gt=0, le=16, description="CPU cores requested per gateway pod.")
    memory_gib: int = Field(2, ge=1, le=64, description="Memory per gateway pod, GiB.")
    workers: int = Field(
        1,
        ge=1,
        le=16,
        description="LiteLLM worker processes per gateway pod (at most the CPU cores requested, rounded up).",
    )
    max_replicas: int | None = Field(
        None,
        ge=2,
        le=20,
        description="Most gateway pods the HorizontalPodAutoscaler runs (empty: sized from the "
        "models' design concurrency and the gateway's measured ceiling; equal to replicas: no HPA).",
    )
    target_cpu_utilization: int = Field(
        60,
        ge=10,
        le=90,
        description="Average CPU use, percent of `cpu`, the HorizontalPodAutoscaler keeps the pods at.",
    )
    port: int = Field(4000, ge=1024, le=65535, description="Port the gateway listens on.")
    num_retries: int = Field(1, ge=0, le=5, description="Retries against vLLM before falling back.")
    request_timeout_seconds: int = Field(
        240,
        ge=5,
        le=3600,
        description="Longest a non-streamed request may take on one backend before the next is tried.",
    )
    stream_timeout_seconds: int = Field(
        60, ge=1, le=600, description="Longest gap between streamed chunks (the first included)."
    )
    allowed_fails: int = Field(
        3,
        ge=1,
        le=100,
        description="Failures of one kind (each within cooldown_seconds of the last) beyond which "
        "vLLM is put in cooldown.",
    )
    cooldown_seconds: int = Field(
        30, ge=1, le=3600, description="How long a failing vLLM backend is skipped before it is tried again."
    )
    master_key_secret: SecretRef | None = Field(
        None,
        description="Secrets Manager secret holding the gateway's master key (empty: no key required).",
    )
    guardrail: GuardrailConfig = Field(
        default_factory=GuardrailConfig, description="Bedrock guardrail on the fallback path."
    )
