"""Preflight's SageMaker endpoint quota row, against a fake account.

moto gives the account (fake credentials, no network); Service Quotas, which moto does not
implement for SageMaker, is a botocore Stubber that checks each request's service and quota code.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gpufarm.aws.preflight import run_preflight
from gpufarm.aws.preflight.results import Check, Status
from gpufarm.aws.preflight.sagemaker_quotas import check_sagemaker_quotas
from gpufarm.config import TierConfig, load_preset
from tests.aws.moto_account import moto_account
from tests.aws.test_preflight import NOW, AwsStubs, aws  # noqa: F401  (the fixture)

REGION = "us-east-1"
G6_12XLARGE = "L-0A29AACF"
"""The quota code of 'ml.g6.12xlarge for endpoint usage' (gpufarm/data/sagemaker.yaml)."""


@pytest.fixture
def quotas(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Stubber]]:
    with moto_account(monkeypatch, REGION):
        client = boto3.client("service-quotas", region_name=REGION)
        with Stubber(client) as stub:
            yield client, stub
            stub.assert_no_pending_responses()


def preset() -> TierConfig:
    return load_preset("sagemaker-poc")


def applied(stub: Stubber, value: float) -> None:
    stub.add_response(
        "get_service_quota",
        {"Quota": {"ServiceCode": "sagemaker", "QuotaCode": G6_12XLARGE, "Value": value}},
        {"ServiceCode": "sagemaker", "QuotaCode": G6_12XLARGE},
    )


def test_a_quota_below_the_most_instances_fails_with_the_request_to_make(quotas: tuple[Any, Stubber]) -> None:
    client, stub = quotas
    applied(stub, 1.0)
    (row,) = check_sagemaker_quotas(preset(), quotas=client)
    assert (row.check, row.subject, row.status) == (
        Check.QUOTA,
        "ml.g6.12xlarge for endpoint usage",
        Status.FAIL,
    )
    assert row.message == "1 instances, but the endpoint may run 2 (sagemaker.max_instance_count)"
    assert row.fix == (
        "aws service-quotas request-service-quota-increase --service-code sagemaker "
        f"--quota-code {G6_12XLARGE} --desired-value 2"
    )
    assert row.quota is not None and (row.quota.limit, row.quota.needed) == (1, 2)


def test_a_quota_that_covers_the_most_instances_passes(quotas: tuple[Any, Stubber]) -> None:
    client, stub = quotas
    applied(stub, 2.0)
    (row,) = check_sagemaker_quotas(preset(), quotas=client)
    assert row.status is Status.PASS


def test_an_account_without_an_applied_value_is_read_at_the_aws_default(quotas: tuple[Any, Stubber]) -> None:
    client, stub = quotas
    stub.add_client_error(
        "get_service_quota", service_error_code="NoSuchResourceException", http_status_code=404
    )
    stub.add_response(
        "get_aws_default_service_quota",
        {"Quota": {"ServiceCode": "sagemaker", "QuotaCode": G6_12XLARGE, "Value": 0.0}},
        {"ServiceCode": "sagemaker", "QuotaCode": G6_12XLARGE},
    )
    (row,) = check_sagemaker_quotas(preset(), quotas=client)
    assert row.status is Status.FAIL and row.message.startswith("0 instances")


def test_a_type_without_a_known_code_warns_and_names_the_quota(quotas: tuple[Any, Stubber]) -> None:
    client, _ = quotas
    tier = preset()
    tier = tier.model_copy(
        update={"sagemaker": tier.sagemaker.model_copy(update={"instance_type": "ml.g6.48xlarge"})}
    )
    (row,) = check_sagemaker_quotas(tier, quotas=client)
    assert (row.subject, row.status) == ("ml.g6.48xlarge for endpoint usage", Status.WARN)
    assert "'ml.g6.48xlarge for endpoint usage'" in row.fix and "at least 2" in row.fix


def test_other_provisioning_modes_have_no_sagemaker_row(quotas: tuple[Any, Stubber]) -> None:
    client, _ = quotas
    assert check_sagemaker_quotas(load_preset("poc"), quotas=client) == []


def test_a_sagemaker_tier_gets_no_instance_offering_or_kubernetes_rows(aws: AwsStubs) -> None:  # noqa: F811
    # SageMaker places the endpoint's instances and there is no cluster: the node pool the schema
    # still carries launches nothing, so neither its offerings nor a Kubernetes version is read
    # (no EKS stub is given a response: a call would show as a warning row).
    report = run_preflight(load_preset("sagemaker-poc"), region=REGION, session=aws, now=NOW)
    checks = {row.check for row in report.results}
    assert Check.OFFERING not in checks
    assert Check.KUBERNETES not in checks
    assert Check.QUOTA in checks


def test_an_ec2_tier_checks_offerings_but_no_kubernetes_version(aws: AwsStubs) -> None:  # noqa: F811
    report = run_preflight(load_preset("ec2-poc"), region=REGION, session=aws, now=NOW)
    checks = {row.check for row in report.results}
    assert Check.OFFERING in checks
    assert Check.KUBERNETES not in checks
