"""Bedrock capacity the account owns as a fallback target: provisioned-model and
application-inference-profile ARNs, their checks, the gateway entry, the alert's price and the cost."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError
from gpufarm.config.bedrock import (
    CapacityKind,
    call_region,
    capacity_arn,
    destination_regions,
    token_priced_model_id,
)
from gpufarm.estimate import monthly_cost
from gpufarm.k8s.alerting import gateway_objective
from gpufarm.k8s.gateway import litellm_config
from gpufarm.pricing import PriceNotFoundError, load_prices

from .factories import make_tier, model_override, overrides

ACCOUNT = "123456789012"
PROVISIONED = f"arn:aws:bedrock:us-east-1:{ACCOUNT}:provisioned-model/abc123def456"
PROFILE = f"arn:aws:bedrock:us-east-1:{ACCOUNT}:application-inference-profile/k2l3m4n5o6p7"
LLAMA_8B = "meta.llama3-1-8b-instruct-v1:0"
US_LLAMA_8B = f"us.{LLAMA_8B}"
ONE_MONTH = {"model_units": 2, "commitment": "one-month"}


def target(**fields: Any) -> dict[str, Any]:
    """An override giving the poc's model the Bedrock target `fields`."""
    return model_override(bedrock=fields)


def provisioned_target(**fields: Any) -> dict[str, Any]:
    return target(**{"model_id": PROVISIONED, "base_model_id": LLAMA_8B, "provisioned": ONE_MONTH, **fields})


def profile_target(**fields: Any) -> dict[str, Any]:
    return target(**{"model_id": PROFILE, "base_model_id": US_LLAMA_8B, **fields})


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_tier(*parts)
    return [str(issue) for issue in caught.value.issues]


INVALID = [
    pytest.param(
        target(model_id=f"arn:aws:bedrock:us-east-1:{ACCOUNT}:custom-model/abc"),
        [
            "models[0].bedrock.model_id: must be a provisioned-model ARN ('arn:aws:bedrock:<region>:"
            "<12-digit account>:provisioned-model/<12 characters>') or an application-inference-profile "
            "ARN ('arn:aws:bedrock:<region>:<12-digit account>:application-inference-profile/<id>'), "
            f"got 'arn:aws:bedrock:us-east-1:{ACCOUNT}:custom-model/abc'"
        ],
        id="arn-of-another-resource-type",
    ),
    pytest.param(
        target(model_id="arn:aws:bedrock:us-east-1:1234:provisioned-model/abc123def456"),
        [
            "models[0].bedrock.model_id: must be a provisioned-model ARN ('arn:aws:bedrock:<region>:"
            "<12-digit account>:provisioned-model/<12 characters>') or an application-inference-profile "
            "ARN ('arn:aws:bedrock:<region>:<12-digit account>:application-inference-profile/<id>'), "
            "got 'arn:aws:bedrock:us-east-1:1234:provisioned-model/abc123def456'"
        ],
        id="arn-with-a-short-account",
    ),
    pytest.param(
        provisioned_target(model_id=f"arn:aws:bedrock:us-east-1:{ACCOUNT}:provisioned-model/ABC"),
        [
            "models[0].bedrock.model_id: must end in 'provisioned-model/' and the 12 lowercase letters "
            "and digits Bedrock names a Provisioned Throughput with, got "
            f"'arn:aws:bedrock:us-east-1:{ACCOUNT}:provisioned-model/ABC'"
        ],
        id="provisioned-model-id-not-12-characters",
    ),
    pytest.param(
        provisioned_target(model_id=PROVISIONED.replace("us-east-1", "eu-west-1")),
        [
            "models[0].bedrock.model_id: must be in the calling region 'us-east-1' (bedrock.region, else "
            "environment.region): Bedrock serves a Provisioned Throughput in its own region only, got an "
            "ARN in 'eu-west-1'"
        ],
        id="provisioned-model-in-another-region",
    ),
    pytest.param(
        profile_target(model_id=PROFILE, region="us-west-2"),
        [
            "models[0].bedrock.model_id: must be in the calling region 'us-west-2' (bedrock.region, else "
            "environment.region): Bedrock serves an application inference profile in its own region "
            "only, got an ARN in 'us-east-1'"
        ],
        id="application-profile-outside-the-given-call-region",
    ),
    pytest.param(
        provisioned_target(model_id=PROVISIONED.replace("arn:aws:", "arn:aws-cn:")),
        [
            "models[0].bedrock.model_id: must name the partition of its region 'us-east-1' "
            "('arn:aws:...'), got 'arn:aws-cn:bedrock:us-east-1:123456789012:provisioned-model/abc123def456'"
        ],
        id="arn-in-the-wrong-partition",
    ),
    pytest.param(
        overrides(provisioned_target(), {"environment": {"account": "210987654321"}}),
        [
            "models[0].bedrock.model_id: must be in the tier's account '210987654321' "
            "(environment.account): the gateway's role invokes a Provisioned Throughput of its own account, "
            f"got an ARN in account '{ACCOUNT}'"
        ],
        id="provisioned-model-of-another-account",
    ),
    pytest.param(
        target(model_id=PROVISIONED, provisioned=ONE_MONTH),
        [
            "models[0].bedrock.base_model_id: is required when model_id is a provisioned-model ARN (the "
            "foundation model the Provisioned Throughput was bought for: the gateway's IAM and the cost "
            "read it); it is not set"
        ],
        id="provisioned-model-without-base-model",
    ),
    pytest.param(
        target(model_id=PROFILE),
        [
            "models[0].bedrock.base_model_id: is required when model_id is an application-inference-profile "
            "ARN (the model or system inference profile the profile copies: the gateway's IAM and the "
            "cost read it); it is not set"
        ],
        id="application-profile-without-base-model",
    ),
    pytest.param(
        provisioned_target(base_model_id=PROVISIONED),
        [
            "models[0].bedrock.base_model_id: must be a model ID, not an ARN (the foundation model the "
            f"Provisioned Throughput was bought for; the ARN goes in model_id), got '{PROVISIONED}'"
        ],
        id="provisioned-arn-where-a-model-id-is-expected",
    ),
    pytest.param(
        profile_target(base_model_id="Llama 3"),
        [
            "models[0].bedrock.base_model_id: must be a Bedrock model ID such as "
            "'meta.llama3-3-70b-instruct-v1:0' (the model or system inference profile the profile "
            "copies), got 'Llama 3'"
        ],
        id="application-profile-base-model-shape",
    ),
    pytest.param(
        provisioned_target(base_model_id=US_LLAMA_8B),
        [
            "models[0].bedrock.base_model_id: must be a foundation-model ID for a provisioned-model ARN "
            "(Provisioned Throughput is bought for a model, not an inference profile), got "
            f"'{US_LLAMA_8B}'"
        ],
        id="provisioned-model-bought-for-a-profile",
    ),
    pytest.param(
        profile_target(base_model_id="eu.meta.llama3-2-3b-instruct-v1:0"),
        [
            "models[0].bedrock.base_model_id: must be an inference profile of the calling region "
            "'us-east-1': a 'eu' profile is called from its geography's regions ('eu-central-1', "
            "'eu-central-2', 'eu-north-1', 'eu-south-1', 'eu-south-2', 'eu-west-1', 'eu-west-3'), "
            "got 'eu.meta.llama3-2-3b-instruct-v1:0'"
        ],
        id="application-profile-copying-another-geography",
    ),
    pytest.param(
        provisioned_target(destination_regions=["us-west-2"]),
        [
            "models[0].bedrock.destination_regions: applies only to geographic inference profiles "
            "('us.', 'us-gov.', 'eu.', 'apac.', 'jp.', 'au.', 'ca.'), got ['us-west-2'] for "
            f"'{LLAMA_8B}'"
        ],
        id="destination-regions-on-a-provisioned-model",
    ),
    pytest.param(
        target(model_id=PROVISIONED, base_model_id=LLAMA_8B),
        [
            "models[0].bedrock.provisioned: is required when model_id is a provisioned-model ARN "
            "({model_units: N, commitment: one-month | six-months}: the cost prices its model units); "
            "it is not set"
        ],
        id="provisioned-model-without-its-purchase",
    ),
    pytest.param(
        provisioned_target(provisioned={"model_units": 1, "commitment": "none"}),
        [
            "models[0].bedrock.provisioned.commitment: must be 'one-month' or 'six-months' for a "
            "foundation model: Bedrock sells Provisioned Throughput without commitment for custom "
            "models only, got 'none'"
        ],
        id="no-commitment-for-a-foundation-model",
    ),
    pytest.param(
        provisioned_target(provisioned={"model_units": 0, "commitment": "six-months"}),
        ["models[0].bedrock.provisioned.model_units: must be >= 1, got 0"],
        id="zero-model-units",
    ),
    pytest.param(
        # A scalar where the sub-section's mapping belongs is the sub-section's error, not the
        # target's ("must be 'none' or a mapping, got a mapping" named neither).
        provisioned_target(provisioned=-1),
        ["models[0].bedrock.provisioned: must be a mapping, got -1"],
        id="provisioned-given-a-scalar",
    ),
    pytest.param(
        provisioned_target(provisioned={"model_units": 1, "commitment": "1-month"}),
        [
            "models[0].bedrock.provisioned.commitment: must be one of 'none', 'one-month' or 'six-months', "
            "got '1-month'"
        ],
        id="commitment-spelling",
    ),
    pytest.param(
        profile_target(provisioned=ONE_MONTH),
        [
            "models[0].bedrock.provisioned: applies only to a provisioned-model ARN in model_id, got it "
            "set for an application-inference-profile ARN"
        ],
        id="purchase-on-an-application-profile",
    ),
    pytest.param(
        target(model_id=US_LLAMA_8B, base_model_id=LLAMA_8B, provisioned=ONE_MONTH),
        [
            "models[0].bedrock.base_model_id: applies only when model_id is a provisioned-model or "
            f"application-inference-profile ARN, got it set with model_id '{US_LLAMA_8B}'",
            "models[0].bedrock.provisioned: applies only when model_id is a provisioned-model or "
            f"application-inference-profile ARN, got it set with model_id '{US_LLAMA_8B}'",
        ],
        id="capacity-fields-on-a-profile-id",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_capacity_target_message(override: dict[str, Any], expected: list[str]) -> None:
    assert issues_of(override) == expected


def test_a_provisioned_model_arn_is_a_target_in_its_region() -> None:
    tier = make_tier(provisioned_target())
    bedrock = tier.models[0].bedrock_target
    assert bedrock is not None
    arn = capacity_arn(bedrock.model_id)
    assert arn is not None
    assert (arn.kind, arn.region, arn.account, arn.resource) == (
        CapacityKind.PROVISIONED_MODEL,
        "us-east-1",
        ACCOUNT,
        "abc123def456",
    )
    # A Provisioned Throughput answers in its own region only, and does not bill by the token.
    assert call_region(bedrock, "us-east-1") == "us-east-1"
    assert destination_regions(bedrock, "us-east-1") == ["us-east-1"]
    assert token_priced_model_id(bedrock) is None


def test_an_application_profile_routes_and_bills_as_the_profile_it_copies() -> None:
    tier = make_tier(profile_target())
    bedrock = tier.models[0].bedrock_target
    assert bedrock is not None
    assert destination_regions(bedrock, "us-east-1") == ["us-east-1", "us-east-2", "us-west-1", "us-west-2"]
    assert token_priced_model_id(bedrock) == US_LLAMA_8B


def test_an_application_profile_of_a_model_reaches_its_own_region_only() -> None:
    bedrock = make_tier(profile_target(base_model_id=LLAMA_8B)).models[0].bedrock_target
    assert bedrock is not None
    assert destination_regions(bedrock, "us-east-1") == ["us-east-1"]


def test_the_tiers_own_account_is_accepted() -> None:
    make_tier(provisioned_target(), {"environment": {"account": ACCOUNT}})


@pytest.mark.parametrize("arn", [PROVISIONED, PROFILE], ids=["provisioned-model", "application-profile"])
def test_the_gateway_calls_the_arn_through_converse_in_its_region(arn: str) -> None:
    fields: dict[str, Any] = {"model_id": arn, "base_model_id": LLAMA_8B}
    if "provisioned-model" in arn:
        fields["provisioned"] = ONE_MONTH
    config = litellm_config(make_tier(target(**fields)))
    (entry,) = [e for e in config["model_list"] if e["model_name"].endswith("@bedrock")]
    # LiteLLM 1.102.1 strips `bedrock/converse/` and percent-encodes the ARN whole into the
    # Converse path (litellm/llms/bedrock/chat/converse_handler.py, encode_model_id).
    assert entry["litellm_params"]["model"] == f"bedrock/converse/{arn}"
    assert entry["litellm_params"]["aws_region_name"] == "us-east-1"


def test_the_spend_alert_prices_an_application_profile_and_leaves_out_provisioned_throughput() -> None:
    prometheus = {"observability": {"prometheus": {"enabled": True}}}
    by_profile = gateway_objective(make_tier(profile_target(), prometheus))
    by_provisioned = gateway_objective(make_tier(provisioned_target(), prometheus))
    assert by_profile is not None and by_provisioned is not None
    shipped = load_prices().bedrock_model(LLAMA_8B)
    (spend,) = by_profile.spend
    assert (spend.input_per_1k, spend.output_per_1k) == (
        shipped.input_per_million / 1000,
        shipped.output_per_million / 1000,
    )
    # Still counted in the fallback rate, but its cost does not grow with tokens.
    assert by_provisioned.spend == ()
    assert [m.name for m in by_provisioned.models] == ["qwen3-8b"]


def prices_with(rate: float, commitment: str = "one-month") -> Any:
    table = load_prices().model_dump(mode="json")
    table["bedrock_provisioned"]["per_model_unit_hour"] = {LLAMA_8B: {commitment: rate}}
    return type(load_prices()).model_validate(table)


def test_provisioned_throughput_is_billed_per_model_unit_hour_whatever_the_traffic() -> None:
    tier = make_tier(provisioned_target())
    prices = prices_with(20.0)
    for share, tokens in ((0.0, None), (0.5, 1e9)):
        estimate = monthly_cost(tier, prices=prices, fallback_share=share, tokens_per_month=tokens)
        lines = [line for line in estimate.lines if line.category == "fallback"]
        # 2 model units x $20/h x 730 h, at floor, expected and ceiling: no token lines beside it.
        assert [(line.item, line.quantity, line.unit_price, line.peak_quantity) for line in lines] == [
            (f"Bedrock Provisioned Throughput qwen3-8b: {LLAMA_8B} (one-month)", 2, 20.0 * 730, 2)
        ]


def test_the_shipped_table_has_no_provisioned_rate_so_the_cost_asks_for_one() -> None:
    with pytest.raises(PriceNotFoundError) as caught:
        monthly_cost(make_tier(provisioned_target()))
    assert str(caught.value) == (
        "no Amazon Bedrock Provisioned Throughput price for 'meta.llama3-1-8b-instruct-v1:0 (one-month)' "
        "in the price table (add bedrock_provisioned.per_model_unit_hour.meta.llama3-1-8b-instruct-v1:0."
        "one-month in a --prices file, at the hourly rate per model unit the Bedrock console showed "
        "when you bought it)"
    )


def test_an_application_profile_is_priced_as_the_tokens_of_the_model_it_copies() -> None:
    estimate = monthly_cost(make_tier(profile_target()), fallback_share=1.0, tokens_per_month=4e6)
    shipped = load_prices().bedrock_model(LLAMA_8B)
    lines = {line.item: line for line in estimate.lines if line.category == "fallback"}
    inputs = lines[f"Bedrock fallback qwen3-8b: {PROFILE} input tokens"]
    outputs = lines[f"Bedrock fallback qwen3-8b: {PROFILE} output tokens"]
    # 4M tokens, all answered by Bedrock: 75 % input, 25 % output, at the copied model's rates.
    assert (inputs.quantity, inputs.unit_price) == (3.0, shipped.input_per_million)
    assert (outputs.quantity, outputs.unit_price) == (1.0, shipped.output_per_million)
