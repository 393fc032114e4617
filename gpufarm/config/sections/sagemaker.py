"""Settings of `cluster.provisioning: sagemaker`: the SageMaker endpoint and its inference components.

One real-time endpoint holds every model of the tier, each as an inference component (its own
copies, GPUs and memory) on the endpoint's instances. A model's `gpus` is its copy's GPUs and the
Large Model Inference container's tensor-parallel degree, `memory_gib` its copy's memory,
`replicas` its copies at deploy; `scaling` sets the copies Application Auto Scaling keeps each
model between (min 0: scale to zero). The checks of these fields are in
`gpufarm/config/checks/sagemaker.py`.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field

from gpufarm.config.sections.values import _Model

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


_ENGINES = ("vllm", "trtllm")
"""The engines of the Large Model Inference images (`gpufarm.core.sagemaker.LMI_ENGINES`)."""


def _digests(value: dict[str, str]) -> dict[str, str]:
    for engine, digest in value.items():
        if engine not in _ENGINES:
            raise ValueError(f"must name the engines 'vllm', 'trtllm', got {engine!r}")
        if not _DIGEST.match(digest):
            raise ValueError(
                f"{engine!r} must be an image digest 'sha256:' followed by 64 hex digits, got {digest!r}"
            )
    return value


LmiImageDigests = Annotated[dict[str, str], AfterValidator(_digests)]
"""Engine -> digest of its Large Model Inference image tag."""


class RoutingStrategy(StrEnum):
    """How the endpoint spreads requests over the instances (and copies) that can serve them.

    The values `AWS::SageMaker::EndpointConfig` `RoutingConfig.RoutingStrategy` accepts
    (cfn-lint's us-east-1 schema; the SageMaker API also lists `KV_AWARE`, which CloudFormation
    does not accept and which works only with SageMaker's own vLLM container).
    """

    LEAST_OUTSTANDING_REQUESTS = "LEAST_OUTSTANDING_REQUESTS"
    RANDOM = "RANDOM"
    PREFIX_AWARE = "PREFIX_AWARE"


class ComponentScalingConfig(_Model):
    """The copies Application Auto Scaling keeps one model's inference component between."""

    model: str = Field(description="The model's `name`.")
    min_copies: int = Field(
        1, ge=0, le=100, description="Fewest copies; 0 scales the model to zero when idle."
    )
    max_copies: int = Field(1, ge=1, le=100, description="Most copies.")


class SageMakerConfig(_Model):
    """Settings of `cluster.provisioning: sagemaker`: the SageMaker endpoint and its inference components."""

    instance_type: str = Field(
        "ml.g6e.xlarge",
        description="`ml.*` instance type of the endpoint: one SageMaker offers for hosting, with "
        "NVIDIA GPUs (gpufarm/data/sagemaker.yaml).",
    )
    initial_instance_count: int = Field(1, ge=1, description="Instances the endpoint starts with.")
    min_instance_count: int = Field(
        1,
        ge=0,
        description="Fewest instances managed instance scaling keeps; 0 lets the endpoint scale to "
        "zero once every model's copies are at zero.",
    )
    max_instance_count: int = Field(2, ge=1, description="Most instances managed instance scaling may run.")
    routing_strategy: RoutingStrategy = Field(
        RoutingStrategy.LEAST_OUTSTANDING_REQUESTS,
        description="How the endpoint routes requests to instances and copies.",
    )
    target_concurrent_requests_per_copy: float = Field(
        4,
        gt=0,
        le=1000,
        description="Target tracking value: concurrent requests per inference component copy "
        "(`SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution`).",
    )
    scale_in_cooldown_seconds: int = Field(
        300, ge=0, le=86400, description="Seconds after a scale-in before another may start."
    )
    scale_out_cooldown_seconds: int = Field(
        60, ge=0, le=86400, description="Seconds after a scale-out before another may start."
    )
    model_download_timeout_seconds: int = Field(
        1800, ge=60, le=3600, description="Time a copy may take to download its weights."
    )
    startup_health_check_timeout_seconds: int = Field(
        1800, ge=60, le=3600, description="Time a copy may take to pass its first health check."
    )
    scaling: list[ComponentScalingConfig] = Field(
        [],
        description="Copies per model (default: each model fixed at its `replicas`).",
    )
    image_digests: LmiImageDigests = Field(
        {},
        description="Engine ('vllm', 'trtllm') -> digest of its Large Model Inference image tag in "
        "the tier's region; an engine without one runs its image pinned by tag only "
        "(gpufarm/data/sagemaker.yaml says why).",
    )
