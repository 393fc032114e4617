"""Preflight of Bedrock capacity the account owns: a provisioned-model ARN is read with
GetProvisionedModelThroughput, an application-inference-profile ARN with GetInferenceProfile.

moto implements neither (its bedrock backend covers custom models, customization jobs, logging
and tags), so botocore Stubbers answer them, with responses shaped as botocore's bedrock
2023-04-20 service model defines them (the Stubber validates both request and response).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from gpufarm.aws.preflight import Status, check_bedrock, check_bedrock_access
from gpufarm.config import TierConfig
from tests.aws.moto_account import moto_account
from tests.aws.test_preflight import REGION, AwsStubs, rows
from tests.unit.factories import make_tier, model_override

ACCOUNT = "123456789012"
PROVISIONED = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:provisioned-model/abc123def456"
PROFILE = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:application-inference-profile/k2l3m4n5o6p7"
LLAMA_8B = "meta.llama3-1-8b-instruct-v1:0"
SUBJECT = f"model qwen3-8b: {PROVISIONED}"
ENDS = datetime(2027, 1, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsStubs]:
    """moto with fake credentials, and the stubs."""
    with moto_account(monkeypatch, REGION):
        yield AwsStubs()


def provisioned_tier(model_units: int = 2, commitment: str = "one-month") -> TierConfig:
    return make_tier(
        model_override(
            bedrock={
                "model_id": PROVISIONED,
                "base_model_id": LLAMA_8B,
                "provisioned": {"model_units": model_units, "commitment": commitment},
            }
        )
    )


def add_provisioned(aws: AwsStubs, **fields: Any) -> None:
    response = {
        "modelUnits": 2,
        "desiredModelUnits": 2,
        "provisionedModelName": "fallback-llama",
        "provisionedModelArn": PROVISIONED,
        "modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{LLAMA_8B}",
        "desiredModelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{LLAMA_8B}",
        "foundationModelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{LLAMA_8B}",
        "status": "InService",
        "creationTime": datetime(2026, 12, 2, 12, 0, tzinfo=UTC),
        "lastModifiedTime": datetime(2026, 12, 2, 12, 0, tzinfo=UTC),
        "commitmentDuration": "OneMonth",
        "commitmentExpirationTime": ENDS,
        **fields,
    }
    aws.stub("bedrock").add_response(
        "get_provisioned_model_throughput", response, {"provisionedModelId": PROVISIONED}
    )


def bedrock_rows(aws: AwsStubs, tier: TierConfig) -> dict[str, tuple[Status, str, str]]:
    result = rows(check_bedrock(tier, region=REGION, bedrock=lambda r: aws.client("bedrock", r)))
    aws.verify()
    return result


def test_an_in_service_provisioned_throughput_as_bought_passes(aws: AwsStubs) -> None:
    add_provisioned(aws)
    assert bedrock_rows(aws, provisioned_tier()) == {
        SUBJECT: (
            Status.PASS,
            f"Provisioned Throughput InService in us-east-1: 2 model units of {LLAMA_8B}, commitment "
            "ends 2027-01-02",
            "",
        )
    }


def test_a_missing_provisioned_throughput_fails(aws: AwsStubs) -> None:
    aws.stub("bedrock").add_client_error(
        "get_provisioned_model_throughput", "ResourceNotFoundException", "not found"
    )
    assert bedrock_rows(aws, provisioned_tier()) == {
        SUBJECT: (
            Status.FAIL,
            "the account has no provisioned-model abc123def456 in us-east-1",
            "name one listed by `aws bedrock list-provisioned-model-throughputs --region us-east-1` in "
            "models 'qwen3-8b'.bedrock.model_id",
        )
    }


def test_a_provisioned_throughput_still_creating_fails(aws: AwsStubs) -> None:
    add_provisioned(aws, status="Creating")
    assert bedrock_rows(aws, provisioned_tier())[SUBJECT] == (
        Status.FAIL,
        "the Provisioned Throughput is Creating in us-east-1; only an InService one answers requests",
        "wait until `aws bedrock get-provisioned-model-throughput` shows InService, or name another",
    )


def test_a_failed_provisioned_throughput_says_why(aws: AwsStubs) -> None:
    add_provisioned(aws, status="Failed", failureMessage="capacity unavailable")
    status, message, _ = bedrock_rows(aws, provisioned_tier())[SUBJECT]
    assert (status, message) == (
        Status.FAIL,
        "the Provisioned Throughput is Failed in us-east-1: capacity unavailable; only an InService "
        "one answers requests",
    )


def test_a_provisioned_throughput_of_another_model_fails(aws: AwsStubs) -> None:
    other = "meta.llama3-3-70b-instruct-v1:0"
    add_provisioned(aws, foundationModelArn=f"arn:aws:bedrock:{REGION}::foundation-model/{other}")
    assert bedrock_rows(aws, provisioned_tier())[SUBJECT] == (
        Status.FAIL,
        f"the Provisioned Throughput serves {other}, not base_model_id {LLAMA_8B} (the price and the "
        "gateway's model)",
        f"set models 'qwen3-8b'.bedrock.base_model_id to '{other}'",
    )


def test_model_units_other_than_the_config_counts_warn(aws: AwsStubs) -> None:
    add_provisioned(aws, modelUnits=4)
    assert bedrock_rows(aws, provisioned_tier())[SUBJECT] == (
        Status.WARN,
        "the Provisioned Throughput has 4 model units; the cost counts 2",
        "set models 'qwen3-8b'.bedrock.provisioned.model_units to 4",
    )


def test_a_commitment_other_than_the_config_prices_warns(aws: AwsStubs) -> None:
    add_provisioned(aws, commitmentDuration="SixMonths")
    assert bedrock_rows(aws, provisioned_tier())[SUBJECT] == (
        Status.WARN,
        "the Provisioned Throughput was bought with a six-months commitment; the cost prices one-month",
        "set models 'qwen3-8b'.bedrock.provisioned.commitment to 'six-months'",
    )


def test_an_application_profile_is_read_by_its_arn_and_checked_through_the_model_it_copies(
    aws: AwsStubs,
) -> None:
    tier = make_tier(model_override(bedrock={"model_id": PROFILE, "base_model_id": f"us.{LLAMA_8B}"}))
    regions = ["us-east-1", "us-east-2", "us-west-2"]
    aws.stub("bedrock").add_response(
        "get_inference_profile",
        {
            "inferenceProfileName": "fallback-cost-center-42",
            "inferenceProfileArn": PROFILE,
            "inferenceProfileId": "k2l3m4n5o6p7",
            "status": "ACTIVE",
            "type": "APPLICATION",
            "models": [{"modelArn": f"arn:aws:bedrock:{r}::foundation-model/{LLAMA_8B}"} for r in regions],
        },
        {"inferenceProfileIdentifier": PROFILE},
    )
    assert bedrock_rows(aws, tier) == {
        f"model qwen3-8b: {PROFILE}": (
            Status.PASS,
            f"inference profile active in us-east-1, routes {LLAMA_8B} to us-east-1, us-east-2, us-west-2",
            "",
        )
    }
    # Model access is the copied foundation model's, asked in the profile's region.
    aws.stub("bedrock").add_response(
        "get_foundation_model_availability",
        {
            "modelId": LLAMA_8B,
            "agreementAvailability": {"status": "AVAILABLE"},
            "authorizationStatus": "AUTHORIZED",
            "entitlementAvailability": "AVAILABLE",
            "regionAvailability": "AVAILABLE",
        },
        {"modelId": LLAMA_8B},
    )
    access = rows(check_bedrock_access(tier, region=REGION, bedrock=lambda r: aws.client("bedrock", r)))
    assert access == {
        f"model qwen3-8b: {LLAMA_8B}": (Status.PASS, f"the account may invoke {LLAMA_8B} in us-east-1", "")
    }
