"""Checks of the gateway and the models' Amazon Bedrock fallbacks."""

from __future__ import annotations

import math
from collections.abc import Iterator

from gpufarm.config.bedrock import (
    GLOBAL_PREFIX,
    PROFILE_GEOGRAPHIES,
    CapacityArn,
    CapacityKind,
    call_region,
    capacity_arn,
    profile_callable_from,
    profile_prefix,
)
from gpufarm.config.checks.common import _quoted
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import (
    BEDROCK_MODEL_ID,
    PROVISIONED_MODEL_RESOURCE,
    BedrockCommitment,
    BedrockTargetConfig,
    InterfaceEndpoint,
    TierConfig,
)
from gpufarm.core.demand import METRICS_PORT, exports_metrics
from gpufarm.core.gateway_sizing import resource_metrics_available

RESERVED_MODEL_NAMES = ("v1", "health", "metrics", "gateway")
"""Path prefixes of the gateway behind the default route (a model route `/<name>/*` would take
them over) and the gateway's own construct names."""


def _fallback(cfg: TierConfig) -> Iterator[ConfigIssue]:
    if cfg.fallback.enabled:
        for i, model in enumerate(cfg.models):
            if model.name in RESERVED_MODEL_NAMES:
                yield ConfigIssue(
                    path=f"models[{i}].name",
                    message=f"must not be one of {_quoted(RESERVED_MODEL_NAMES)} while fallback is "
                    "enabled (the gateway serves /v1, /health and /metrics behind the default "
                    f"route), got {model.name!r}",
                )
        attempts = cfg.fallback.num_retries + 1
        if attempts * cfg.fallback.request_timeout_seconds >= cfg.ingress.idle_timeout_seconds:
            yield ConfigIssue(
                path="fallback.request_timeout_seconds",
                message=f"must leave time to fall back before the load balancer's idle timeout: "
                f"(num_retries + 1) x request_timeout_seconds = {attempts} x "
                f"{cfg.fallback.request_timeout_seconds} must be below "
                f"ingress.idle_timeout_seconds ({cfg.ingress.idle_timeout_seconds}), got "
                f"{cfg.fallback.request_timeout_seconds}",
            )
        if exports_metrics(cfg) and cfg.fallback.port == METRICS_PORT:
            yield ConfigIssue(
                path="fallback.port",
                message=f"must not be {METRICS_PORT} while the gateway serves its metrics (Prometheus "
                f"is enabled or a model scales to zero; they are on {METRICS_PORT}), got {METRICS_PORT}",
            )
        if InterfaceEndpoint.BEDROCK_RUNTIME in cfg.network.interface_endpoints:
            yield ConfigIssue(
                path="network.interface_endpoints",
                message="must not list 'bedrock-runtime' while fallback is enabled (the gateway "
                "adds it, open to the cluster's nodes only, not the whole VPC), got it listed",
            )
    for i, model in enumerate(cfg.models):
        where = f"models[{i}].bedrock"
        if model.bedrock is None:
            if cfg.fallback.enabled:
                yield ConfigIssue(
                    path=where,
                    message="must name a Bedrock model ({model_id: ...}) or be 'none' to opt out, "
                    "while fallback.enabled is true; it is not set",
                )
            continue
        target = model.bedrock_target
        if target is not None:
            yield from _target(cfg, where, target)
    if cfg.fallback.guardrail.enabled and not any(m.bedrock_target for m in cfg.models):
        yield ConfigIssue(
            path="fallback.guardrail.enabled",
            message="needs at least one model with a Bedrock fallback (the guardrail applies on "
            "that path only), got true with none",
        )


CAPACITY_ARN_SHAPES = (
    "a provisioned-model ARN ('arn:aws:bedrock:<region>:<12-digit account>:provisioned-model/<12 "
    "characters>') or an application-inference-profile ARN ('arn:aws:bedrock:<region>:<12-digit "
    "account>:application-inference-profile/<id>')"
)
"""The two ARN shapes a fallback target may name (botocore's bedrock `ProvisionedModelArn` and
`InferenceProfileArn` patterns, with region and account required)."""


def partition_of(region: str) -> str:
    """The AWS partition of a region ('aws-us-gov' for 'us-gov-west-1', 'aws-cn' for 'cn-north-1'...)."""
    for prefix, partition in (("us-gov-", "aws-us-gov"), ("cn-", "aws-cn"), ("us-isob-", "aws-iso-b")):
        if region.startswith(prefix):
            return partition
    return "aws-iso" if region.startswith("us-iso-") else "aws"


def _target(cfg: TierConfig, where: str, target: BedrockTargetConfig) -> Iterator[ConfigIssue]:
    """The checks of one model's Bedrock target: a model or profile ID, or a capacity ARN."""
    arn = capacity_arn(target.model_id)
    if arn is None:
        if target.model_id.startswith("arn:"):
            yield ConfigIssue(
                path=f"{where}.model_id",
                message=f"must be {CAPACITY_ARN_SHAPES}, got {target.model_id!r}",
            )
            return
        if not BEDROCK_MODEL_ID.match(target.model_id):
            yield ConfigIssue(
                path=f"{where}.model_id",
                message="must be a Bedrock model ID such as 'anthropic.claude-3-5-haiku-20241022-v1:0', "
                "an inference-profile ID such as 'us.meta.llama3-3-70b-instruct-v1:0', or a "
                f"provisioned-model or application-inference-profile ARN, got {target.model_id!r}",
            )
            return
        for field in ("base_model_id", "provisioned"):
            if getattr(target, field) is not None:
                yield ConfigIssue(
                    path=f"{where}.{field}",
                    message="applies only when model_id is a provisioned-model or "
                    f"application-inference-profile ARN, got it set with model_id {target.model_id!r}",
                )
        yield from _routing(where, target, "model_id", call_region(target, cfg.environment.region))
        return
    yield from _capacity_arn(cfg, where, target, arn)


def _capacity_arn(
    cfg: TierConfig, where: str, target: BedrockTargetConfig, arn: CapacityArn
) -> Iterator[ConfigIssue]:
    """A provisioned-model or application-inference-profile ARN: its shape, region, account and base model."""
    provisioned = arn.kind is CapacityKind.PROVISIONED_MODEL
    resource = "a Provisioned Throughput" if provisioned else "an application inference profile"
    an_arn = "a provisioned-model ARN" if provisioned else "an application-inference-profile ARN"
    if provisioned and not PROVISIONED_MODEL_RESOURCE.match(arn.resource):
        yield ConfigIssue(
            path=f"{where}.model_id",
            message="must end in 'provisioned-model/' and the 12 lowercase letters and digits Bedrock "
            f"names a Provisioned Throughput with, got {target.model_id!r}",
        )
    calling = target.region or cfg.environment.region
    if arn.region != calling:
        yield ConfigIssue(
            path=f"{where}.model_id",
            message=f"must be in the calling region {calling!r} (bedrock.region, else "
            f"environment.region): Bedrock serves {resource} in its own region only, got an ARN in "
            f"{arn.region!r}",
        )
    elif arn.partition != partition_of(arn.region):
        yield ConfigIssue(
            path=f"{where}.model_id",
            message=f"must name the partition of its region {arn.region!r} "
            f"('arn:{partition_of(arn.region)}:...'), got {target.model_id!r}",
        )
    account = cfg.environment.account
    if account is not None and arn.account != account:
        yield ConfigIssue(
            path=f"{where}.model_id",
            message=f"must be in the tier's account {account!r} (environment.account): the gateway's "
            f"role invokes {resource} of its own account, got an ARN in account {arn.account!r}",
        )
    base = target.base_model_id
    behind = (
        "the foundation model the Provisioned Throughput was bought for"
        if provisioned
        else "the model or system inference profile the profile copies"
    )
    if base is None:
        yield ConfigIssue(
            path=f"{where}.base_model_id",
            message=f"is required when model_id is {an_arn} ({behind}: the gateway's IAM and "
            "the cost read it); it is not set",
        )
    elif base.startswith("arn:"):
        yield ConfigIssue(
            path=f"{where}.base_model_id",
            message=f"must be a model ID, not an ARN ({behind}; the ARN goes in model_id), got {base!r}",
        )
    elif not BEDROCK_MODEL_ID.match(base):
        yield ConfigIssue(
            path=f"{where}.base_model_id",
            message=f"must be a Bedrock model ID such as 'meta.llama3-3-70b-instruct-v1:0' ({behind}), "
            f"got {base!r}",
        )
    elif provisioned and profile_prefix(base) is not None:
        yield ConfigIssue(
            path=f"{where}.base_model_id",
            message="must be a foundation-model ID for a provisioned-model ARN (Provisioned Throughput "
            f"is bought for a model, not an inference profile), got {base!r}",
        )
    else:
        yield from _routing(where, target, "base_model_id", arn.region)
    if provisioned and target.provisioned is None:
        yield ConfigIssue(
            path=f"{where}.provisioned",
            message="is required when model_id is a provisioned-model ARN ({model_units: N, "
            "commitment: one-month | six-months}: the cost prices its model units); it is not set",
        )
    elif provisioned and target.provisioned is not None:
        if target.provisioned.commitment is BedrockCommitment.NONE:
            yield ConfigIssue(
                path=f"{where}.provisioned.commitment",
                message="must be 'one-month' or 'six-months' for a foundation model: Bedrock sells "
                "Provisioned Throughput without commitment for custom models only, got 'none'",
            )
    elif target.provisioned is not None:
        yield ConfigIssue(
            path=f"{where}.provisioned",
            message="applies only to a provisioned-model ARN in model_id, got it set for an "
            "application-inference-profile ARN",
        )


def _routing(where: str, target: BedrockTargetConfig, field: str, calling: str) -> Iterator[ConfigIssue]:
    """A model or profile ID (`model_id`, or `base_model_id` behind an ARN): callable from `calling`."""
    model_id = getattr(target, field)
    prefix = profile_prefix(model_id)
    if prefix is not None and not profile_callable_from(prefix, calling, target.destination_regions):
        yield ConfigIssue(
            path=f"{where}.{field}",
            message=f"must be an inference profile of the calling region {calling!r}: a "
            f"{prefix!r} profile is called from {_profile_sources(prefix, target)}, got {model_id!r}",
        )
    if target.destination_regions and prefix in (None, "global"):
        yield ConfigIssue(
            path=f"{where}.destination_regions",
            message="applies only to geographic inference profiles "
            f"({', '.join(repr(p + '.') for p in PROFILE_GEOGRAPHIES)}), got "
            f"{target.destination_regions!r} for {model_id!r}",
        )


def _profile_sources(prefix: str, target: BedrockTargetConfig) -> str:
    """The regions a profile of `prefix` is called from, for a message."""
    if prefix == GLOBAL_PREFIX:
        return "a commercial region (not 'us-gov-' or 'cn-')"
    regions = target.destination_regions or PROFILE_GEOGRAPHIES[prefix]
    return f"its geography's regions ({_quoted(list(regions))})"


def _gateway_scaling(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """The gateway's workers and HorizontalPodAutoscaler bounds (gpufarm.core.gateway_sizing)."""
    fb = cfg.fallback
    if not fb.enabled:
        return
    cores = math.ceil(fb.cpu)
    if fb.workers > cores:
        yield ConfigIssue(
            path="fallback.workers",
            message=f"must be at most the CPU cores requested, rounded up ({cores} for fallback.cpu "
            f"{fb.cpu:g}): each worker is one single-threaded process, and workers beyond the cores "
            f"only take turns on them, got {fb.workers}",
        )
    if fb.max_replicas is None:
        return
    if fb.max_replicas < fb.replicas:
        yield ConfigIssue(
            path="fallback.max_replicas",
            message=f"must be at least fallback.replicas ({fb.replicas}), got {fb.max_replicas}",
        )
    elif fb.max_replicas > fb.replicas and not resource_metrics_available(cfg):
        yield ConfigIssue(
            path="fallback.max_replicas",
            message=f"must equal fallback.replicas ({fb.replicas}) where the cluster serves no "
            "resource metrics for a HorizontalPodAutoscaler (they need karpenter provisioning with "
            f"'metrics-server' in cluster.core_addons), got {fb.max_replicas}",
        )
