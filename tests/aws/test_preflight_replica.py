"""The secondary region's preflight: the model bucket is versioned and replicates to the replica."""

from __future__ import annotations

import boto3
import pytest

from gpufarm.aws.preflight import Status
from gpufarm.aws.preflight.model_replica import check_model_replica
from tests.aws.moto_account import moto_account, table

SOURCE = "acme-models"
REPLICA = "acme-models-us-west-2"
SUBJECT = f"s3://{SOURCE} -> s3://{REPLICA}"
STACK = "gpufarm-enterprise-us-west-2"


def _rows(s3: object) -> dict[str, tuple[Status, str, str]]:
    return table(check_model_replica(source_bucket=SOURCE, replica_bucket=REPLICA, stack_name=STACK, s3=s3))


def _replicate(s3: object, *, to: str, status: str = "Enabled") -> None:
    s3.put_bucket_replication(  # type: ignore[attr-defined]
        Bucket=SOURCE,
        ReplicationConfiguration={
            "Role": "arn:aws:iam::123456789012:role/replication",
            "Rules": [
                {
                    "ID": "r",
                    "Status": status,
                    "Priority": 1,
                    "Filter": {"Prefix": ""},
                    "DeleteMarkerReplication": {"Status": "Disabled"},
                    "Destination": {"Bucket": f"arn:aws:s3:::{to}"},
                }
            ],
        },
    )


def test_an_unversioned_bucket_fails_and_says_how_to_version_it(monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_account(monkeypatch, "us-east-1"):
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=SOURCE)
        results = check_model_replica(source_bucket=SOURCE, replica_bucket=REPLICA, stack_name=STACK, s3=s3)
    # Versioning first (PutBucketReplication refuses an unversioned bucket), then the missing rule.
    assert [r.status for r in results] == [Status.FAIL, Status.WARN]
    assert results[0].message == f"versioning of {SOURCE} is off: S3 replicates only a versioned bucket"
    assert results[0].fix == (
        f"aws s3api put-bucket-versioning --bucket {SOURCE} --versioning-configuration Status=Enabled"
    )


def test_a_versioned_bucket_without_the_rule_warns_with_the_stack_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with moto_account(monkeypatch, "us-east-1"):
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=SOURCE)
        s3.put_bucket_versioning(Bucket=SOURCE, VersioningConfiguration={"Status": "Enabled"})
        rows = _rows(s3)
    status, message, fix = rows[SUBJECT]
    assert status is Status.WARN
    assert message == f"{SOURCE} has no enabled replication rule to {REPLICA} yet"
    assert f"after deploying {STACK}" in fix and "ModelReplicationConfiguration" in fix


def test_a_rule_to_another_bucket_is_not_the_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_account(monkeypatch, "us-east-1"):
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=SOURCE)
        s3.put_bucket_versioning(Bucket=SOURCE, VersioningConfiguration={"Status": "Enabled"})
        _replicate(s3, to="somewhere-else")
        rows = _rows(s3)
    assert rows[SUBJECT][0] is Status.WARN


def test_an_enabled_rule_to_the_replica_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_account(monkeypatch, "us-east-1"):
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=SOURCE)
        s3.put_bucket_versioning(Bucket=SOURCE, VersioningConfiguration={"Status": "Enabled"})
        _replicate(s3, to=REPLICA)
        rows = _rows(s3)
    assert rows[SUBJECT] == (Status.PASS, f"{SOURCE} replicates to {REPLICA}", "")


def test_a_bucket_the_caller_cannot_read_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    with moto_account(monkeypatch, "us-east-1"):
        s3 = boto3.client("s3", region_name="us-east-1")
        rows = _rows(s3)  # no such bucket
    status, message, _ = rows[SUBJECT]
    assert status is Status.FAIL
    assert message == f"cannot read the versioning of {SOURCE} (NoSuchBucket)"
