"""Checks of the gateway and the models' Amazon Bedrock fallbacks."""

from __future__ import annotations

import math
from collections.abc import Iterator

from gpufarm.config.bedrock import (
    GLOBAL_PREFIX,
    PROFILE_GEOGRAPHIES,
    call_region,
    profile_callable_from,
    profile_prefix,
)
from gpufarm.config.checks.common import _quoted
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import BEDROCK_MODEL_ID, BedrockTargetConfig, InterfaceEndpoint, TierConfig
from gpufarm.core.demand import METRICS_PORT, exports_metrics
from gpufarm.core.gateway_sizing import resource_metrics_available

RESERVED_MODEL_NAMES = ("v1", "health", "metrics", "gateway")
"""Path prefixes of the gateway behind the default route (a model route `/<name>/*` would take
them over) and the gateway's own construct names."""


def _fallback(cfg: TierConfig) -> Iterator[ConfigIssue]:
    region = cfg.environment.region
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
        if target is None:
            continue
        if not BEDROCK_MODEL_ID.match(target.model_id):
            yield ConfigIssue(
                path=f"{where}.model_id",
                message="must be a Bedrock model ID such as 'anthropic.claude-3-5-haiku-20241022-v1:0' "
                f"or an inference-profile ID such as 'us.meta.llama3-3-70b-instruct-v1:0', "
                f"got {target.model_id!r}",
            )
            continue
        prefix = profile_prefix(target.model_id)
        calling = call_region(target, region)
        if prefix is not None and not profile_callable_from(prefix, calling, target.destination_regions):
            yield ConfigIssue(
                path=f"{where}.model_id",
                message=f"must be an inference profile of the calling region {calling!r}: a "
                f"{prefix!r} profile is called from {_profile_sources(prefix, target)}, got "
                f"{target.model_id!r}",
            )
        if target.destination_regions and prefix in (None, "global"):
            yield ConfigIssue(
                path=f"{where}.destination_regions",
                message="applies only to geographic inference profiles "
                f"({', '.join(repr(p + '.') for p in PROFILE_GEOGRAPHIES)}), got "
                f"{target.destination_regions!r} for {target.model_id!r}",
            )
    if cfg.fallback.guardrail.enabled and not any(m.bedrock_target for m in cfg.models):
        yield ConfigIssue(
            path="fallback.guardrail.enabled",
            message="needs at least one model with a Bedrock fallback (the guardrail applies on "
            "that path only), got true with none",
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
