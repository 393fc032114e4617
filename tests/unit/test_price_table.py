"""The dated price table: its sources and dates, observed spot discounts, and when it is stale."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from gpufarm.pricing import (
    PRICE_SECTIONS,
    STALE_AFTER_DAYS,
    PriceTable,
    PriceTableError,
    load_prices,
    shipped_prices_path,
)

PRICES = load_prices()


def test_every_section_has_its_own_source_and_date() -> None:
    for name in PRICE_SECTIONS:
        section = getattr(PRICES, name)
        assert (bool(section.source.strip()), isinstance(section.as_of, dt.date)) == (True, True), name


@pytest.mark.parametrize("field", ["source", "as_of"])
def test_a_section_without_its_source_or_date_is_refused(field: str) -> None:
    document = yaml.safe_load(shipped_prices_path().read_text(encoding="utf-8"))
    del document["amp"][field]
    with pytest.raises(ValidationError) as info:
        PriceTable.model_validate(document)
    assert [(e["loc"], e["msg"]) for e in info.value.errors()] == [(("amp", field), "Field required")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "amp:\n  source: ''\n",
            "is not a valid price table: amp.source: String should have at least 1 character",
        ),
        (
            "ec2:\n  spot_discounts:\n    g6e: 1.2\n",
            "is not a valid price table: ec2.spot_discounts.g6e: Input should be less than 1",
        ),
        (
            "ec2:\n  spot_discounts:\n    g6e: -0.1\n",
            "is not a valid price table: ec2.spot_discounts.g6e: Input should be greater than or equal to 0",
        ),
    ],
)
def test_invalid_source_or_spot_discount_in_a_prices_file(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "prices.yaml"
    file.write_text(content)
    with pytest.raises(PriceTableError) as info:
        load_prices(file)
    assert str(info.value) == f"{file} {message}"


# --------------------------------------------------------------------------- figures fixed in this table


def test_the_managed_collector_is_billed_at_its_listed_rates() -> None:
    # $0.04 per collector-hour and $0.03 per 10M samples collected (AWS Price List API, us-east-1),
    # no longer the $0.10 per 10M the table had; both are now sourced, not estimates.
    assert (PRICES.amp.collector_per_hour, PRICES.amp.collect_per_10m_samples) == (0.04, 0.03)
    assert not {"amp.collector_per_hour", "amp.collect_per_10m_samples"} & set(PRICES.estimated_figures())


def test_every_priced_gpu_type_is_in_the_catalog() -> None:
    # p6-b300.48xlarge had a price and no catalog entry: no pool could launch it.
    from gpufarm.core.instances import gpus_in

    gpu_types = [t for t in PRICES.ec2.on_demand_per_hour if t.startswith(("g", "p"))]
    assert [t for t in gpu_types if gpus_in(t) is None] == []


def test_every_size_the_preset_pools_may_launch_is_priced() -> None:
    from gpufarm.config import load_preset
    from gpufarm.core.pools import pool_instance_types

    unpriced = {
        t
        for name in ("poc", "production", "enterprise")
        for pool in load_preset(name).node_pools
        for t in pool_instance_types(pool)
        if t not in PRICES.ec2.on_demand_per_hour
    }
    assert unpriced == set()


def test_unconfirmed_figures_say_why() -> None:
    figures = PRICES.estimated_figures()
    assert {"ec2.p6-b300.48xlarge", "bedrock.models", "fsx_lustre.500", "fsx_lustre.1000"} <= set(figures)
    assert "us-west-2" in figures["ec2.p6-b300.48xlarge"]


# --------------------------------------------------------------------------- spot


@pytest.mark.parametrize(
    ("instance_type", "discount", "basis"),
    [
        # A family with an observed discount: the table's g6e figure.
        ("g6e.12xlarge", 0.60, "observed spot discount of the g6e family: 60% off on-demand"),
        ("p5en.48xlarge", 0.52, "observed spot discount of the p5en family: 52% off on-demand"),
        # None observed for p5: the flat fallback.
        ("p5.48xlarge", 0.4, "estimate: ec2.spot_discount, 40% off on-demand"),
    ],
)
def test_spot_discount_by_family_else_the_fallback(instance_type: str, discount: float, basis: str) -> None:
    assert (PRICES.spot_discount(instance_type), PRICES.spot_basis(instance_type)) == (discount, basis)
    assert PRICES.spot(instance_type) == pytest.approx(PRICES.on_demand(instance_type) * (1 - discount))


def test_a_types_own_discount_wins_over_its_familys(tmp_path: Path) -> None:
    file = tmp_path / "prices.yaml"
    file.write_text("ec2:\n  spot_discounts:\n    g6e.12xlarge: 0.7\n")
    table = load_prices(file)
    assert (table.spot_discount("g6e.12xlarge"), table.spot_discount("g6e.48xlarge")) == (0.7, 0.60)
    assert table.spot_basis("g6e.12xlarge") == "observed spot discount of g6e.12xlarge: 70% off on-demand"


def test_a_measured_spot_price_wins_over_any_discount() -> None:
    live = PRICES.with_ec2(
        on_demand_per_hour={},
        spot_per_hour={"p5en.48xlarge": 20.0},
        region="us-east-1",
        source="x",
        as_of=PRICES.as_of,
    )
    assert (live.spot("p5en.48xlarge"), live.spot_basis("p5en.48xlarge")) == (20.0, "measured spot price")


# --------------------------------------------------------------------------- stale


def test_the_table_is_as_old_as_its_oldest_section() -> None:
    oldest = min(getattr(PRICES, name).as_of for name in PRICE_SECTIONS)
    assert (PRICES.oldest_as_of(), PRICES.age_days(oldest + dt.timedelta(days=10))) == (oldest, 10)


def test_a_table_exactly_90_days_old_is_not_stale() -> None:
    day = PRICES.oldest_as_of() + dt.timedelta(days=STALE_AFTER_DAYS)
    assert PRICES.staleness(day) is None


def test_a_table_91_days_old_is_stale_and_names_its_old_sections() -> None:
    oldest = PRICES.oldest_as_of()
    day = oldest + dt.timedelta(days=STALE_AFTER_DAYS + 1)
    old = sorted(
        name for name in PRICE_SECTIONS if (day - getattr(PRICES, name).as_of).days > STALE_AFTER_DAYS
    )
    assert PRICES.staleness(day) == (
        f"the price table is 91 days old on {day.isoformat()} (read {oldest.isoformat()}; more than 90 "
        f"days: {', '.join(old)}); list prices may have changed: refresh them with --prices FILE, or "
        "--live for EC2"
    )


def test_a_live_lookup_renews_only_the_ec2_sections_date() -> None:
    day = PRICES.oldest_as_of() + dt.timedelta(days=200)
    live = PRICES.with_ec2(on_demand_per_hour={}, spot_per_hour={}, region="us-east-1", source="x", as_of=day)
    assert live.staleness(day) is not None
    assert "ec2" not in str(live.staleness(day)).split("days: ", 1)[1]
