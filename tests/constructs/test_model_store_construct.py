"""S3ModelStore: the Mountpoint CSI add-on with a read-only Pod Identity role."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from aws_cdk.assertions import Template

from gpufarm.constructs import S3ModelStore
from tests.constructs.helpers import (
    CLUSTER_NAME,
    imported_cluster,
    logical_id,
    new_stack,
    partition_arn,
    resources,
)

URIS = ["s3://model-bucket-b/llama/", "s3://model-bucket-a/qwen/8b", "s3://model-bucket-a/mistral/"]


@dataclass(frozen=True)
class Built:
    store: S3ModelStore
    template: Template


@pytest.fixture(scope="module")
def built() -> Built:
    stack = new_stack("ModelStore")
    store = S3ModelStore(stack, "ModelStore", cluster=imported_cluster(stack), s3_uris=URIS)
    return Built(store, Template.from_stack(stack))


def _role(built: Built) -> dict[str, Any]:
    role: dict[str, Any] = resources(built.template, "AWS::IAM::Role")[logical_id(built.store.role)]
    return role


def test_addon_installs_mountpoint_with_pod_identity(built: Built) -> None:
    built.template.resource_count_is("AWS::EKS::Addon", 1)
    built.template.has_resource_properties(
        "AWS::EKS::Addon",
        {
            "AddonName": "aws-mountpoint-s3-csi-driver",
            "ClusterName": CLUSTER_NAME,
            "ResolveConflicts": "OVERWRITE",
            "PodIdentityAssociations": [
                {
                    "RoleArn": {"Fn::GetAtt": [logical_id(built.store.role), "Arn"]},
                    "ServiceAccount": "s3-csi-driver-sa",
                }
            ],
        },
    )


def test_role_is_trusted_by_eks_pod_identity_only(built: Built) -> None:
    built.template.resource_count_is("AWS::IAM::Role", 1)
    statements = _role(built)["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statements == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
        }
    ]
    assert "ManagedPolicyArns" not in _role(built)["Properties"]


def test_policy_is_exactly_list_and_get_under_the_prefixes(built: Built) -> None:
    policies = resources(built.template, "AWS::IAM::Policy")
    assert len(policies) == 1
    (policy,) = policies.values()
    assert policy["Properties"]["Roles"] == [{"Ref": logical_id(built.store.role)}]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    bucket_a = ":s3:::model-bucket-a"
    bucket_b = ":s3:::model-bucket-b"
    expected: list[dict[str, Any]] = [
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["mistral/*", "qwen/8b/*"]}},
            "Effect": "Allow",
            "Resource": partition_arn(bucket_a),
        },
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["llama/*"]}},
            "Effect": "Allow",
            "Resource": partition_arn(bucket_b),
        },
        # The minimizePolicies feature flag merges the per-bucket GetObject statements.
        {
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": [
                partition_arn(f"{bucket_a}/mistral/*"),
                partition_arn(f"{bucket_a}/qwen/8b/*"),
                partition_arn(f"{bucket_b}/llama/*"),
            ],
        },
    ]
    assert _canonical(statements) == _canonical(expected)


def _canonical(statements: list[dict[str, Any]]) -> list[str]:
    """Statements as sorted JSON, so the check ignores order but not content."""
    return sorted(json.dumps(s, sort_keys=True) for s in statements)


def test_empty_uri_list_is_rejected_with_an_exact_message() -> None:
    stack = new_stack("EmptyStore")
    with pytest.raises(ValueError) as excinfo:
        S3ModelStore(stack, "ModelStore", cluster=imported_cluster(stack), s3_uris=[])
    assert str(excinfo.value) == "'s3_uris' must name at least one s3://bucket/prefix/, got []"
