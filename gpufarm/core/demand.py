"""Which models the gateway counts requests for, and on which port it serves the count.

A model that scales to zero wakes on the gateway's per-model request counter (see
`gpufarm/k8s/demand.py` and docs/decisions/0049-wake-scale-from-zero.md). The validator and the
manifests both ask here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpufarm.config.model import ModelConfig, TierConfig

METRICS_PORT = 9090
"""Port of the gateway's metrics server (`--prometheus_metrics_port`), beside `fallback.port`."""


def scales_to_zero(model: ModelConfig) -> bool:
    """True when KEDA may remove every replica of the model (`autoscaling.min_replicas: 0`)."""
    return model.autoscaling is not None and model.autoscaling.min_replicas == 0


def demand_models(tier: TierConfig) -> list[ModelConfig]:
    """The models the gateway counts requests for: those that scale to zero, in config order."""
    return [m for m in tier.models if scales_to_zero(m)]


def counts_demand(tier: TierConfig) -> bool:
    """Whether the gateway exports the demand counter: it runs, and some model scales to zero."""
    return tier.fallback.enabled and bool(demand_models(tier))


def exports_metrics(tier: TierConfig) -> bool:
    """Whether the gateway runs its metrics server (:data:`METRICS_PORT`) and gpufarm's callback.

    When the gateway runs and either Amazon Managed Prometheus scrapes it (the fallback rate and
    Bedrock's tokens, for every model) or some model scales to zero (the demand counter).
    """
    return tier.fallback.enabled and (tier.observability.prometheus.enabled or bool(demand_models(tier)))
