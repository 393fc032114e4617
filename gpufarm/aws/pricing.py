"""Live EC2 prices: the AWS Price List API (on-demand) and the EC2 spot price history.

Only the EC2 section of the price table is refreshed; every other figure stays the dated
table's (see :mod:`gpufarm.pricing`). Any AWS failure raises :class:`LivePricingError`, so a
caller can fall back to the table.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from gpufarm.pricing import PriceTable, load_prices

PRICING_API_REGION = "us-east-1"
"""The Price List query API answers in us-east-1 (and a few others) for every region."""

LINUX_SPOT_PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
"""Spot price history product descriptions of Linux instances."""

REGION_LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "ca-central-1": "Canada (Central)",
    "eu-west-1": "EU (Ireland)",
    "eu-west-2": "EU (London)",
    "eu-west-3": "EU (Paris)",
    "eu-central-1": "EU (Frankfurt)",
    "eu-central-2": "EU (Zurich)",
    "eu-north-1": "EU (Stockholm)",
    "eu-south-1": "EU (Milan)",
    "eu-south-2": "EU (Spain)",
    "ap-south-1": "Asia Pacific (Mumbai)",
    "ap-south-2": "Asia Pacific (Hyderabad)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-northeast-2": "Asia Pacific (Seoul)",
    "ap-northeast-3": "Asia Pacific (Osaka)",
    "ap-southeast-1": "Asia Pacific (Singapore)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
    "ap-southeast-3": "Asia Pacific (Jakarta)",
    "ap-southeast-4": "Asia Pacific (Melbourne)",
    "ap-east-1": "Asia Pacific (Hong Kong)",
    "sa-east-1": "South America (Sao Paulo)",
    "me-south-1": "Middle East (Bahrain)",
    "me-central-1": "Middle East (UAE)",
    "af-south-1": "Africa (Cape Town)",
    "il-central-1": "Israel (Tel Aviv)",
}
"""Price List `location` names of commercial regions (others are matched by `regionCode`)."""


class LivePricingError(RuntimeError):
    """Live prices could not be read (no credentials, access denied, throttling, bad answer)."""


def _location_filter(region: str) -> dict[str, str]:
    location = REGION_LOCATIONS.get(region)
    if location is not None:
        return {"Type": "TERM_MATCH", "Field": "location", "Value": location}
    return {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}


def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """`pricing.get_products` filters for Linux, shared-tenancy, on-demand `instance_type` in `region`."""
    return [
        {"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type},
        _location_filter(region),
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]


def on_demand_price(price_list: Iterable[str]) -> float | None:
    """The hourly USD on-demand price in a `get_products` PriceList (None when it has none)."""
    for document in price_list:
        product: dict[str, Any] = json.loads(document)
        terms: dict[str, Any] = product.get("terms", {}).get("OnDemand", {})
        for term in terms.values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = dimension.get("pricePerUnit", {}).get("USD")
                if usd is not None and float(usd) > 0:
                    return float(usd)
    return None


def _on_demand_prices(client: Any, region: str, instance_types: Sequence[str]) -> dict[str, float]:
    prices: dict[str, float] = {}
    for instance_type in instance_types:
        answer: dict[str, Any] = client.get_products(
            ServiceCode="AmazonEC2",
            Filters=product_filters(instance_type, region),
            FormatVersion="aws_v1",
            MaxResults=10,
        )
        price = on_demand_price(answer.get("PriceList", []))
        if price is not None:
            prices[instance_type] = price
    return prices


def _spot_prices(
    client: Any, instance_types: Sequence[str], availability_zones: Sequence[str] | None
) -> dict[str, float]:
    """The latest spot price of each type in each AZ, averaged over the AZs."""
    latest: dict[tuple[str, str], tuple[dt.datetime, float]] = {}
    kwargs: dict[str, Any] = {
        "InstanceTypes": list(instance_types),
        "ProductDescriptions": list(LINUX_SPOT_PRODUCTS),
        # A start time of now returns the price in effect now in every AZ.
        "StartTime": dt.datetime.now(dt.UTC),
    }
    if availability_zones:
        kwargs["Filters"] = [{"Name": "availability-zone", "Values": list(availability_zones)}]
    for page in client.get_paginator("describe_spot_price_history").paginate(**kwargs):
        for entry in page.get("SpotPriceHistory", []):
            if entry.get("ProductDescription") not in LINUX_SPOT_PRODUCTS:
                continue
            key = (str(entry["InstanceType"]), str(entry["AvailabilityZone"]))
            stamp: dt.datetime = entry["Timestamp"]
            price = float(entry["SpotPrice"])
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, price)
    by_type: dict[str, list[float]] = {}
    for (instance_type, _zone), (_stamp, price) in latest.items():
        by_type.setdefault(instance_type, []).append(price)
    return {t: sum(values) / len(values) for t, values in by_type.items()}


def live_prices(
    region: str,
    instance_types: Sequence[str],
    *,
    session: Any | None = None,
    base: PriceTable | None = None,
    availability_zones: Sequence[str] | None = None,
) -> PriceTable:
    """`base` (default: the shipped table) with EC2 prices of `instance_types` read live.

    On-demand: `pricing.get_products` in us-east-1 for each type (Linux, shared tenancy, no
    pre-installed software, capacity status Used) in `region`. Spot: the latest price of each
    type in each availability zone of `region` (only `availability_zones` when given) from
    `ec2.describe_spot_price_history`, averaged over the zones. A type the APIs do not price
    keeps the table's figures. `session` is a boto3 Session (default: a new one). Raises
    LivePricingError when AWS cannot be reached or refuses.
    """
    base = base or load_prices()
    types = sorted(set(instance_types))
    try:
        session = session or boto3.Session()  # AWS_PROFILE naming no profile fails here
        pricing = session.client("pricing", region_name=PRICING_API_REGION)
        ec2 = session.client("ec2", region_name=region)
        on_demand = _on_demand_prices(pricing, region, types)
        spot = _spot_prices(ec2, types, availability_zones)
    except (BotoCoreError, ClientError) as exc:
        raise LivePricingError(str(exc)) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise LivePricingError(f"unexpected answer from AWS: {exc!r}") from exc
    if not on_demand:
        raise LivePricingError(
            f"the Price List API returned no on-demand price in {region} for {', '.join(types)}"
        )
    now = dt.datetime.now(dt.UTC)
    return base.with_ec2(
        on_demand_per_hour=on_demand,
        spot_per_hour=spot,
        region=region,
        source=f"AWS Price List API (on-demand) and EC2 spot price history for {region}, read "
        f"{now:%Y-%m-%d %H:%M} UTC",
        as_of=now.date(),
    )
