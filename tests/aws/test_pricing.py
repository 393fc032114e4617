"""Live EC2 prices: the Price List API through botocore's Stubber (moto lacks it), the spot price
history through moto."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from gpufarm.aws.pricing import LivePricingError, live_prices, on_demand_price, product_filters
from gpufarm.pricing import load_prices

TABLE = load_prices()


def price_list_entry(instance_type: str, usd: str) -> str:
    """One PriceList document as `pricing.get_products` returns it (abridged to what is read)."""
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": instance_type, "operatingSystem": "Linux"}},
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    "ABC.JRTCKXETXF": {
                        "priceDimensions": {
                            "ABC.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": usd},
                                "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                            }
                        }
                    }
                }
            },
        }
    )


class StubbedSession:
    """A boto3 session whose pricing client is the stubbed one; other clients come from moto."""

    def __init__(self, pricing: Any) -> None:
        self.pricing = pricing
        self.session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        )

    def client(self, name: str, **kwargs: Any) -> Any:
        return self.pricing if name == "pricing" else self.session.client(name, **kwargs)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(var, "testing")
    with mock_aws():
        yield


def pricing_client() -> Any:
    return boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    ).client("pricing", region_name="us-east-1")


def expect_products(stubber: Stubber, instance_type: str, region: str, price_list: list[str]) -> None:
    stubber.add_response(
        "get_products",
        {"PriceList": price_list, "FormatVersion": "aws_v1"},
        {
            "ServiceCode": "AmazonEC2",
            "Filters": product_filters(instance_type, region),
            "FormatVersion": "aws_v1",
            "MaxResults": 10,
        },
    )


def test_filters_select_linux_shared_on_demand_in_the_region() -> None:
    assert {f["Field"]: f["Value"] for f in product_filters("g6e.12xlarge", "us-west-2")} == {
        "instanceType": "g6e.12xlarge",
        "location": "US West (Oregon)",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }


def test_region_without_a_known_location_filters_by_region_code() -> None:
    fields = {f["Field"]: f["Value"] for f in product_filters("g6e.xlarge", "xx-test-9")}
    assert fields["regionCode"] == "xx-test-9"


def test_price_is_read_from_the_on_demand_term() -> None:
    assert on_demand_price([price_list_entry("g6e.12xlarge", "10.4926000000")]) == 10.4926


def test_zero_price_dimensions_are_skipped() -> None:
    assert on_demand_price([price_list_entry("g6e.12xlarge", "0.0000000000")]) is None


def test_live_on_demand_price_replaces_the_table(aws: None) -> None:
    client = pricing_client()
    with Stubber(client) as stubber:
        expect_products(stubber, "g6e.12xlarge", "us-east-1", [price_list_entry("g6e.12xlarge", "9.9")])
        expect_products(stubber, "p5.48xlarge", "us-east-1", [price_list_entry("p5.48xlarge", "50.0")])
        prices = live_prices("us-east-1", ["p5.48xlarge", "g6e.12xlarge"], session=StubbedSession(client))
        stubber.assert_no_pending_responses()
    assert (prices.on_demand("g6e.12xlarge"), prices.on_demand("p5.48xlarge")) == (9.9, 50.0)


def test_live_spot_price_is_the_average_over_the_zones(aws: None) -> None:
    client = pricing_client()
    with Stubber(client) as stubber:
        expect_products(stubber, "g6e.12xlarge", "us-east-1", [price_list_entry("g6e.12xlarge", "9.9")])
        prices = live_prices(
            "us-east-1",
            ["g6e.12xlarge"],
            session=StubbedSession(client),
            availability_zones=["us-east-1a", "us-east-1b"],
        )
    # moto prices every spot offering at $0.00001.
    assert prices.spot("g6e.12xlarge") == pytest.approx(0.00001)


def test_types_the_api_does_not_price_keep_the_table(aws: None) -> None:
    client = pricing_client()
    with Stubber(client) as stubber:
        expect_products(stubber, "g6e.12xlarge", "us-east-1", [price_list_entry("g6e.12xlarge", "9.9")])
        expect_products(stubber, "m7i.2xlarge", "us-east-1", [])
        prices = live_prices("us-east-1", ["g6e.12xlarge", "m7i.2xlarge"], session=StubbedSession(client))
    assert prices.on_demand("m7i.2xlarge") == TABLE.on_demand("m7i.2xlarge")


def test_live_table_names_its_source_and_region(aws: None) -> None:
    client = pricing_client()
    with Stubber(client) as stubber:
        expect_products(stubber, "g6e.12xlarge", "us-west-2", [price_list_entry("g6e.12xlarge", "9.9")])
        prices = live_prices("us-west-2", ["g6e.12xlarge"], session=StubbedSession(client))
    assert (prices.region, prices.ec2.source.startswith("AWS Price List API")) == ("us-west-2", True)


def test_other_sections_stay_the_dated_tables(aws: None) -> None:
    client = pricing_client()
    with Stubber(client) as stubber:
        expect_products(stubber, "g6e.12xlarge", "us-east-1", [price_list_entry("g6e.12xlarge", "9.9")])
        prices = live_prices("us-east-1", ["g6e.12xlarge"], session=StubbedSession(client))
    assert (prices.fsx_lustre, prices.bedrock, prices.elb) == (TABLE.fsx_lustre, TABLE.bedrock, TABLE.elb)


def test_api_error_raises_a_typed_error(aws: None) -> None:
    client = pricing_client()
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "get_products", service_error_code="AccessDeniedException", service_message="not allowed"
        )
        with pytest.raises(LivePricingError, match="AccessDeniedException"):
            live_prices("us-east-1", ["g6e.12xlarge"], session=StubbedSession(client))


def test_no_price_at_all_raises_a_typed_error(aws: None) -> None:
    client = pricing_client()
    with Stubber(client) as stubber:
        expect_products(stubber, "g6e.12xlarge", "us-east-1", [])
        with pytest.raises(LivePricingError) as info:
            live_prices("us-east-1", ["g6e.12xlarge"], session=StubbedSession(client))
    assert str(info.value) == "the Price List API returned no on-demand price in us-east-1 for g6e.12xlarge"


def test_no_credentials_raises_a_typed_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(LivePricingError, match="Unable to locate credentials"):
        live_prices("us-east-1", ["g6e.12xlarge"], session=boto3.Session(region_name="us-east-1"))
