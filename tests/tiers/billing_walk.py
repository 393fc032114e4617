"""The resource-type walk: every type a synthesized tier holds is priced by `gpufarm cost` or free.

Shared by the tests that synthesize a tier (the presets, the integration apps, the variants), so
each template the suite builds is walked once, with no synthesis of its own.
"""

from __future__ import annotations

from typing import Any

from gpufarm.config import TierConfig
from gpufarm.config.model import TIER_METADATA_KEY
from gpufarm.estimate import monthly_cost
from gpufarm.estimate.billing import (
    FREE_KINDS,
    FREE_TYPES,
    PRICED_KINDS,
    PRICED_TYPES,
    kubernetes_kind,
    template_kinds,
    unaccounted,
    unpriced_lines,
)
from tests.tiers.helpers import manifests

TOKENS_PER_MONTH = 1e9
"""Tokens the walk prices a tier at, so that the fallback's lines (Bedrock, the Guardrail) appear."""


def costing_gaps(template: dict[str, Any]) -> list[str]:
    """What `gpufarm cost` misses in a tier's template: types in neither table, priced types
    whose line the tier's estimate lacks. Empty when every billed type has its line."""
    kinds = template_kinds(template)
    k8s = {kubernetes_kind(m) for m in manifests(template)}
    gaps = [
        f"{k}: neither in PRICED_TYPES nor in FREE_TYPES (gpufarm/estimate/billing.py)"
        for k in unaccounted(kinds, priced=PRICED_TYPES, free=FREE_TYPES)
    ]
    gaps += [
        f"Kubernetes {k}: neither in PRICED_KINDS nor in FREE_KINDS (gpufarm/estimate/billing.py)"
        for k in unaccounted(k8s, priced=PRICED_KINDS, free=FREE_KINDS)
    ]
    tier = TierConfig.model_validate(template["Metadata"][TIER_METADATA_KEY])
    share = 0.05 if tier.fallback.enabled else 0.0
    items = [
        line.item
        for line in monthly_cost(tier, fallback_share=share, tokens_per_month=TOKENS_PER_MONTH).lines
    ]
    gaps += [
        f"{k}: priced as {PRICED_TYPES[k]} but the estimate of {tier.name} has no such line"
        for k in unpriced_lines(kinds, items, priced=PRICED_TYPES)
    ]
    gaps += [
        f"Kubernetes {k}: priced as {PRICED_KINDS[k]} but the estimate of {tier.name} has no such line"
        for k in unpriced_lines(k8s, items, priced=PRICED_KINDS)
    ]
    return gaps
