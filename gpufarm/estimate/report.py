"""The estimate's result: a billed line and a tier's bill at floor, expected and ceiling, next to the
same capacity all on-demand.

The three figures of a month: the *floor* (`quantity`, "base": every model at its fewest
replicas all month), the *expected* (`expected_quantity`: each autoscaled model at its most
replicas for its `expected_busy_share` of the month) and the *ceiling* (`peak_quantity`, "peak":
every model at its most replicas all month).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gpufarm.pricing import CAPACITY_TYPES


class EstimateError(ValueError):
    """The arguments to :func:`monthly_cost` are out of range."""


Level = Literal["floor", "expected", "ceiling"]
"""One of the three figures of a month."""

LEVELS: tuple[Level, ...] = ("floor", "expected", "ceiling")


@dataclass(frozen=True, kw_only=True)
class CostLine:
    """One billed item: `monthly_usd = quantity x unit_price` at base, likewise at expected and peak.

    `expected_quantity` (default: none, the line does not scale: the base `quantity`) is the
    month's average. `on_demand_unit_price` (default: none, the `unit_price`) is the price of the
    same capacity bought on demand, for the all-on-demand comparison: on-demand for spot and
    Capacity Block instances, 0 for what only reserving or committing bills (unused reserved
    instances, a commitment's fee and the usage it covers).
    """

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
    expected_quantity: float | None = None
    on_demand_unit_price: float | None = None

    @property
    def expected(self) -> float:
        """The quantity on average over the month."""
        return self.quantity if self.expected_quantity is None else self.expected_quantity

    @property
    def expected_monthly_usd(self) -> float:
        """The line's expected monthly cost, USD."""
        return self.expected * self.unit_price

    def at(self, level: Level) -> float:
        """The line's monthly cost at `level`, USD."""
        return {
            "floor": self.monthly_usd,
            "expected": self.expected_monthly_usd,
            "ceiling": self.peak_monthly_usd,
        }[level]

    def on_demand_at(self, level: Level) -> float:
        """The monthly cost at `level` of the same capacity bought on demand, USD."""
        price = self.unit_price if self.on_demand_unit_price is None else self.on_demand_unit_price
        quantity = {"floor": self.quantity, "expected": self.expected, "ceiling": self.peak_quantity}[level]
        return quantity * price

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
            "expected_quantity": self.expected,
            "expected_monthly_usd": round(self.expected_monthly_usd, 2),
            "peak_quantity": self.peak_quantity,
            "peak_monthly_usd": round(self.peak_monthly_usd, 2),
            "on_demand_unit_price": self.unit_price
            if self.on_demand_unit_price is None
            else self.on_demand_unit_price,
            "note": self.note,
            "price_section": self.price_section,
        }


@dataclass(frozen=True, kw_only=True)
class CostEstimate:
    """A tier's monthly bill, line by line, at floor, expected and ceiling (see the module docstring).

    `commitments` are the Savings Plans and Reserved Instances applied (JSON-ready, each "not
    created by this stack"); `busy_share` the `--busy-share` that replaced every model's
    `expected_busy_share` (None: each model's own); `capacity_block_days` the Capacity Block
    duration priced (None: blocks bought back to back all month).
    """

    tier: str
    region: str
    price_region: str
    prices_as_of: str
    price_sources: dict[str, str]
    fallback_share: float
    tokens_per_month: float | None
    lines: list[CostLine]
    notes: list[str] = field(default_factory=list)
    price_dates: dict[str, str] = field(default_factory=dict)
    """The date each price table section was read (ISO), by section name."""
    commitments: list[dict[str, Any]] = field(default_factory=list)
    busy_share: float | None = None
    capacity_block_days: int | None = None

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
    def expected_total_usd(self) -> float:
        """The expected monthly bill (each model's busy share of the month at its most replicas), USD."""
        return sum(line.expected_monthly_usd for line in self.lines)

    def total_at(self, level: Level) -> float:
        """The monthly bill at `level`, USD."""
        return sum(line.at(level) for line in self.lines)

    def all_on_demand_at(self, level: Level) -> float:
        """The same capacity at `level` bought on demand: no spot, reservation or commitment, USD."""
        return sum(line.on_demand_at(level) for line in self.lines)

    def saving_at(self, level: Level) -> float:
        """The bill's saving against all-on-demand at `level`, a share (negative: it costs more)."""
        on_demand = self.all_on_demand_at(level)
        return 0.0 if not on_demand else 1 - self.total_at(level) / on_demand

    def figures(self) -> dict[str, dict[str, float]]:
        """Floor, expected and ceiling: the bill, the same capacity all on-demand and the saving."""
        return {
            level: {
                "total_usd": round(self.total_at(level), 2),
                "all_on_demand_usd": round(self.all_on_demand_at(level), 2),
                "saving_share": round(self.saving_at(level), 4),
            }
            for level in LEVELS
        }

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Base bill per million tokens served in a month (None without a token volume)."""
        if not self.tokens_per_month:
            return None
        return self.total_usd / (self.tokens_per_month / 1e6)

    @property
    def expected_usd_per_million_tokens(self) -> float | None:
        """Expected bill per million tokens served in a month (None without a token volume)."""
        if not self.tokens_per_month:
            return None
        return self.expected_total_usd / (self.tokens_per_month / 1e6)

    @property
    def peak_usd_per_million_tokens(self) -> float | None:
        """Peak bill per million tokens served in a month (None without a token volume)."""
        if not self.tokens_per_month:
            return None
        return self.peak_total_usd / (self.tokens_per_month / 1e6)

    def by_capacity_type(self, *, peak: bool = False, expected: bool = False) -> dict[str, float]:
        """GPU and CPU instance cost by capacity type (every key of CAPACITY_TYPES present), at
        base, or at peak, or `expected`."""
        level: Level = "ceiling" if peak else "expected" if expected else "floor"
        out = dict.fromkeys(CAPACITY_TYPES, 0.0)
        for line in self.lines:
            if line.capacity_type in out:
                out[line.capacity_type] += line.at(level)
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
            "commitments": list(self.commitments),
            "busy_share": self.busy_share,
            "capacity_block_days": self.capacity_block_days,
            "fallback_share": self.fallback_share,
            "tokens_per_month": self.tokens_per_month,
            "lines": [line.to_json() for line in self.lines],
            "total_usd": round(self.total_usd, 2),
            "expected_total_usd": round(self.expected_total_usd, 2),
            "peak_total_usd": round(self.peak_total_usd, 2),
            "figures": self.figures(),
            "usd_per_million_tokens": money(self.usd_per_million_tokens),
            "peak_usd_per_million_tokens": money(self.peak_usd_per_million_tokens),
            "expected_usd_per_million_tokens": money(self.expected_usd_per_million_tokens),
            "by_capacity_type": {k: round(v, 2) for k, v in self.by_capacity_type().items()},
            "expected_by_capacity_type": {
                k: round(v, 2) for k, v in self.by_capacity_type(expected=True).items()
            },
            "peak_by_capacity_type": {k: round(v, 2) for k, v in self.by_capacity_type(peak=True).items()},
            "notes": list(self.notes),
        }
