"""LogsKey: the KMS key CloudWatch Logs of the stack's account and region may encrypt with."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from gpufarm.constructs import LogsKey
from tests.conftest import cdk_context
from tests.constructs.helpers import REGION

ACCOUNT = "123456789012"


def _stack(name: str) -> cdk.Stack:
    return cdk.Stack(
        cdk.App(context=cdk_context()), name, env=cdk.Environment(region=REGION, account=ACCOUNT)
    )


@pytest.fixture(scope="module")
def key() -> tuple[LogsKey, dict[str, Any]]:
    stack = _stack("LogsKeyTest")
    built = LogsKey(stack, "LogsKey", description="tier: CloudWatch Logs encryption")
    (resource,) = Template.from_stack(stack).find_resources("AWS::KMS::Key").values()
    return built, resource


def _statements(resource: dict[str, Any]) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = resource["Properties"]["KeyPolicy"]["Statement"]
    return statements


def test_the_key_rotates_and_is_retained_by_default(key: tuple[LogsKey, dict[str, Any]]) -> None:
    _, resource = key
    assert resource["Properties"]["EnableKeyRotation"] is True
    assert resource["Properties"]["Description"] == "tier: CloudWatch Logs encryption"
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_cloudwatch_logs_of_this_account_and_region_may_use_it(key: tuple[LogsKey, dict[str, Any]]) -> None:
    _, resource = key
    (logs,) = [
        s for s in _statements(resource) if s.get("Principal") == {"Service": f"logs.{REGION}.amazonaws.com"}
    ]
    assert logs["Effect"] == "Allow"
    assert logs["Action"] == [
        "kms:Decrypt*",
        "kms:Describe*",
        "kms:Encrypt*",
        "kms:GenerateDataKey*",
        "kms:ReEncrypt*",
    ]
    assert logs["Condition"] == {
        "ArnLike": {
            # The stack's region is known, so CDK writes its partition literally.
            "kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{REGION}:{ACCOUNT}:*"
        }
    }


def test_only_aws_services_may_create_grants(key: tuple[LogsKey, dict[str, Any]]) -> None:
    _, resource = key
    (deny,) = [s for s in _statements(resource) if s.get("Sid") == "DenyGrantsOutsideAwsServices"]
    assert (deny["Effect"], deny["Action"]) == ("Deny", "kms:CreateGrant")


def test_its_logical_id_is_a_plain_kms_keys(key: tuple[LogsKey, dict[str, Any]]) -> None:
    # Replacing the key would orphan every log group it encrypts: it keeps the ID a kms.Key had.
    built, _ = key
    plain_stack = _stack("LogsKeyTest")
    plain = kms.Key(plain_stack, "LogsKey")
    stack = cdk.Stack.of(built)
    assert stack.get_logical_id(built.node.default_child) == plain_stack.get_logical_id(
        plain.node.default_child
    )


def test_the_removal_policy_is_passed_on() -> None:
    stack = _stack("LogsKeyDestroy")
    LogsKey(stack, "LogsKey", removal_policy=cdk.RemovalPolicy.DESTROY)
    (resource,) = Template.from_stack(stack).find_resources("AWS::KMS::Key").values()
    assert resource["DeletionPolicy"] == "Delete"
    assert resource["Properties"]["Description"] == "CloudWatch Logs encryption"
