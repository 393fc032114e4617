"""The estimate's result: a billed line and a tier's bill at base and at peak."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpufarm.pricing import CAPACITY_TYPES


class EstimateError(ValueError):
    """The arguments to :func:`monthly_cost` are out of range."""


@dataclass(frozen=True, kw_only=True)
class CostLine:
    """One billed item: `monthly_usd = quantity x unit_price` at base, likewise at peak."""

    item: str
    capacity_type: str | None
    quantity: float
    unit: str
    unit_price: float
    monthly_usd: float
    peak_quantity: float
    peak_monthly_usd: float
    category: str
    note: str = ""
    price_section: str | None = None
    """The price table section the unit price comes from (its source and date are the estimate's
    `price_sources` and `price_dates`), None for a line priced from no section."""

    def to_json(self) -> dict[str, Any]:
        """The line as a JSON-ready mapping."""
        return {
            "item": self.item,
            "capacity_type": self.capacity_type,
            "category": self.category,
            "quantity": self.quantity,
            "unit": self.unit,
            "unit_price": self.unit_price,
            "monthly_usd": round(self.monthly_usd, 2),
            "peak_quantity": self.peak_quantity,
            "peak_monthly_usd": round(self.peak_monthly_usd, 2),
            "note": self.note,
            "price_section": self.price_section,
        }


@dataclass(frozen=True, kw_only=True)
class CostEstimate:
    """A tier's monthly bill, line by line, at base and at peak (see the module docstring)."""

    tier: str
    region: str
    price_region: str
    prices_as_of: str
    price_sources: dict[str, str]
    reserved_discount: float
    fallback_share: float
    tokens_per_month: float | None
    lines: list[CostLine]
    notes: list[str] = field(default_factory=list)
    price_dates: dict[str, str] = field(default_factory=dict)
    """The date each price table section was read (ISO), by section name."""

    def sections_used(self) -> list[str]:
        """The price table sections the lines are priced from, in the order they first appear."""
        return list(dict.fromkeys(line.price_section for line in self.lines if line.price_section))

    @property
    def total_usd(self) -> float:
        """The base monthly bill, USD."""
        return sum(line.monthly_usd for line in self.lines)

    @property
    def peak_total_usd(self) -> float:
        """The monthly bill with every model at its most replicas all month, USD."""
        return sum(line.peak_monthly_usd for line in self.lines)

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Base bill per million tokens served in a month (None without a token volume)."""
        if not self.tokens_per_month:
            return None
        return self.total_usd / (self.tokens_per_month / 1e6)

    @property
    def peak_usd_per_million_tokens(self) -> float | None:
        """Peak bill per million tokens served in a month (None without a token volume)."""
        if not self.tokens_per_month:
            return None
        return self.peak_total_usd / (self.tokens_per_month / 1e6)

    def by_capacity_type(self, *, peak: bool = False) -> dict[str, float]:
        """GPU and CPU instance cost by capacity type (every key of CAPACITY_TYPES present)."""
        out = dict.fromkeys(CAPACITY_TYPES, 0.0)
        for line in self.lines:
            if line.capacity_type in out:
                out[line.capacity_type] += line.peak_monthly_usd if peak else line.monthly_usd
        return out

    def by_category(self, *, peak: bool = False) -> dict[str, float]:
        """Cost by category (cluster, gpu, compute, storage, network, security, ...)."""
        out: dict[str, float] = {}
        for line in self.lines:
            out[line.category] = out.get(line.category, 0.0) + (
                line.peak_monthly_usd if peak else line.monthly_usd
            )
        return out

    def to_json(self) -> dict[str, Any]:
        """The estimate as a JSON-ready mapping (the `gpufarm cost --json` document of one tier)."""

        def money(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "tier": self.tier,
            "region": self.region,
            "prices": {
                "region": self.price_region,
                "as_of": self.prices_as_of,
                "sources": self.price_sources,
                "dates": self.price_dates,
            },
            "reserved_discount": self.reserved_discount,
            "fallback_share": self.fallback_share,
            "tokens_per_month": self.tokens_per_month,
            "lines": [line.to_json() for line in self.lines],
            "total_usd": round(self.total_usd, 2),
            "peak_total_usd": round(self.peak_total_usd, 2),
            "usd_per_million_tokens": money(self.usd_per_million_tokens),
            "peak_usd_per_million_tokens": money(self.peak_usd_per_million_tokens),
            "by_capacity_type": {k: round(v, 2) for k, v in self.by_capacity_type().items()},
            "peak_by_capacity_type": {k: round(v, 2) for k, v in self.by_capacity_type(peak=True).items()},
            "notes": list(self.notes),
        }
