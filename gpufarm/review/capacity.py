"""GPU capacity and monthly cost of the tier a template carries in its metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from gpufarm.config import TierConfig
from gpufarm.config.model import TIER_METADATA_KEY
from gpufarm.review.templates import StackTemplate


@dataclass(frozen=True, kw_only=True)
class TierFacts:
    """GPU capacity and monthly cost of the tier a template was synthesized from."""

    tier: str | None = None
    gpus: dict[str, int] = field(default_factory=dict)
    """GPUs by capacity type at peak (every model at its most replicas)."""
    monthly_usd: float | None = None
    """The floor bill (models at their fewest replicas all month)."""
    peak_monthly_usd: float | None = None
    """The ceiling bill (models at their most replicas all month)."""
    expected_monthly_usd: float | None = None
    """The expected bill (each model's `expected_busy_share` of the month at its most replicas)."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "tier": self.tier,
            "gpus": dict(self.gpus),
            "monthly_usd": self.monthly_usd,
            "peak_monthly_usd": self.peak_monthly_usd,
            "expected_monthly_usd": self.expected_monthly_usd,
            "note": self.note,
        }


def tier_facts(stack: StackTemplate) -> TierFacts:
    """GPU capacity and cost from `Metadata["gpufarm:tier"]`; a note when the template has none."""
    metadata = (stack.template.get("Metadata") or {}).get(TIER_METADATA_KEY)
    if metadata is None:
        return TierFacts(note="no gpufarm tier metadata in the template")
    try:
        tier = TierConfig.model_validate(metadata)
    except ValidationError as exc:
        return TierFacts(
            note=f"the tier metadata does not match this gpufarm version ({exc.error_count()} error(s))"
        )
    from gpufarm.estimate import EstimateError, gpu_capacity, monthly_cost
    from gpufarm.pricing import PriceNotFoundError

    try:
        # The pools' instance types are chosen on price and on the pods' CPU and memory: either can fail.
        gpus = gpu_capacity(tier)
    except (PriceNotFoundError, EstimateError) as exc:
        return TierFacts(tier=tier.name, note=f"no cost estimate: {exc}")
    try:
        cost = monthly_cost(tier)
    except (PriceNotFoundError, EstimateError) as exc:
        return TierFacts(tier=tier.name, gpus=gpus, note=f"no cost estimate: {exc}")
    return TierFacts(
        tier=tier.name,
        gpus=gpus,
        monthly_usd=cost.total_usd,
        peak_monthly_usd=cost.peak_total_usd,
        expected_monthly_usd=cost.expected_total_usd,
    )
