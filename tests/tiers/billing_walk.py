"""The resource-type walk: every type a synthesized tier holds is priced by `gpufarm cost` or free.

Shared by the tests that synthesize a tier (the presets, the integration apps, the variants), so
each template the suite builds is walked once, with no synthesis of its own.
"""

from __future__ import annotations

from typing import Any

from gpufarm.config import TierConfig
from gpufarm.config.model import TIER_METADATA_KEY
from gpufarm.estimate import monthly_cost
from gpufarm.estimate.resource_types import (
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
        f"{k}: neither in PRICED_TYPES nor in FREE_TYPES (gpufarm/estimate/resource_types.py)"
        for k in unaccounted(kinds, priced=PRICED_TYPES, free=FREE_TYPES)
    ]
    gaps += [
        f"Kubernetes {k}: neither in PRICED_KINDS nor in FREE_KINDS (gpufarm/estimate/resource_types.py)"
        for k in unaccounted(k8s, priced=PRICED_KINDS, free=FREE_KINDS)
    ]
    tier = TierConfig.model_validate(template["Metadata"][TIER_METADATA_KEY])
    share = 0.05 if tier.fallback.enabled else 0.0
    lines = monthly_cost(tier, fallback_share=share, tokens_per_month=TOKENS_PER_MONTH).lines
    items = [line.item for line in lines]
    gaps += [
        f"{k}: priced as {PRICED_TYPES[k]} but the estimate of {tier.name} has no such line"
        for k in unpriced_lines(kinds, items, priced=PRICED_TYPES)
    ]
    gaps += [
        f"Kubernetes {k}: priced as {PRICED_KINDS[k]} but the estimate of {tier.name} has no such line"
        for k in unpriced_lines(k8s, items, priced=PRICED_KINDS)
    ]
    gaps += _count_gaps(template, {line.item: line.quantity for line in lines})
    return gaps


COUNTED = {
    "AWS::CloudWatch::Alarm": "CloudWatch alarms",
    "AWS::KMS::Key": "KMS keys",
}
"""Types whose line counts them one by one: the line's quantity must equal the template's count."""


def _count_gaps(template: dict[str, Any], quantities: dict[str, float]) -> list[str]:
    resources = (template.get("Resources") or {}).values()
    gaps = []
    for resource_type, item in COUNTED.items():
        count = sum(1 for r in resources if r.get("Type") == resource_type)
        priced = sum(q for i, q in quantities.items() if i.startswith(item))
        if count and priced != count:
            gaps.append(f"{resource_type}: the template has {count}, the line {item!r} counts {priced:g}")
    # Every Elastic IP is a public address; the line also counts the load balancer nodes'.
    eips = sum(1 for r in resources if r.get("Type") == "AWS::EC2::EIP")
    addresses = sum(q for i, q in quantities.items() if i.startswith("Public IPv4 addresses"))
    if addresses < eips:
        gaps.append(f"AWS::EC2::EIP: the template has {eips}, the public IPv4 line counts {addresses:g}")
    return gaps
