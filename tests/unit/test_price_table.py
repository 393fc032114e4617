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
    assert {
        "bedrock.models",
        "fsx_lustre.250",
        "fsx_lustre.500",
        "fsx_lustre.1000",
        "ec2.m6i.2xlarge",
        "ec2.m7i.2xlarge",
        "ec2.c6in.large",
        "vpc.gwlb_endpoint_per_az_hour",
    } <= set(figures)
    # The 2xlarge system sizes were not shown by a source: each is priced at twice its sourced xlarge.
    on_demand = PRICES.ec2.on_demand_per_hour
    assert (on_demand["m6i.2xlarge"], on_demand["m7i.2xlarge"]) == (2 * 0.192, 2 * 0.2016)
    assert ("0.192" in figures["ec2.m6i.2xlarge"], all(reason.strip() for reason in figures.values())) == (
        True,
        True,
    )


# --------------------------------------------------------------------------- the 2026-12-02 refresh

REFRESHED = ("ec2", "eks", "ebs", "vpc", "elb", "fsx_lustre", "waf", "bedrock")
"""The sections last read on 2026-07-20, read again (and their figures checked) on 2026-12-02."""


def test_the_refreshed_sections_are_dated_the_day_they_were_read_and_name_it() -> None:
    for name in REFRESHED:
        section = getattr(PRICES, name)
        assert (section.as_of, "2026-12-02" in " ".join(section.source.split())) == (
            dt.date(2026, 12, 2),
            True,
        ), name


def test_every_estimate_of_a_refreshed_section_names_one_of_its_figures() -> None:
    # An estimate key is the figure it flags: a field of the section, a key of its price map
    # (an instance type, a throughput tier), or "models" / "spot_discounts.<family>".
    maps = {
        "ec2": set(PRICES.ec2.on_demand_per_hour)
        | {f"spot_discounts.{k}" for k in PRICES.ec2.spot_discounts},
        "fsx_lustre": {str(k) for k in PRICES.fsx_lustre.persistent_2_per_gb_month},
    }
    for name in REFRESHED:
        section = getattr(PRICES, name)
        figures = set(type(section).model_fields) | maps.get(name, set())
        assert set(section.estimates) <= figures, name


def test_p6_b300_is_priced_from_its_us_east_1_list_price_not_estimated() -> None:
    # Listed for us-west-2 only when the table was dated 2026-07-20; the 2026-08-26 list data
    # gives the same price in us-east-1.
    assert (PRICES.on_demand("p6-b300.48xlarge"), "ec2.p6-b300.48xlarge" in PRICES.estimated_figures()) == (
        142.416,
        False,
    )


def test_figures_the_table_had_rounded_carry_the_lists_digits() -> None:
    on_demand = PRICES.ec2.on_demand_per_hour
    assert [
        on_demand[t]
        for t in (
            "g6e.12xlarge",
            "g6e.48xlarge",
            "g7e.2xlarge",
            "g7e.48xlarge",
            "p4d.24xlarge",
            "p4de.24xlarge",
        )
    ] == [10.49264, 30.13118, 3.36312, 33.14432, 21.957642, 27.44705]


def test_the_tables_date_is_its_oldest_sections() -> None:
    # pricing.py reads `as_of` as the date of the table's oldest section.
    assert PRICES.as_of == PRICES.oldest_as_of() == dt.date(2026, 12, 2)


def test_the_shipped_table_draws_no_warning_on_the_day_it_was_read_nor_90_days_on() -> None:
    read = dt.date(2026, 12, 2)
    assert (PRICES.staleness(read), PRICES.staleness(read + dt.timedelta(days=90))) == (None, None)
    assert PRICES.staleness(read + dt.timedelta(days=91)) is not None


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
