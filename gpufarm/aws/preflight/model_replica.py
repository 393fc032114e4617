"""The model replica check of a secondary region: the model bucket can replicate, and does.

S3 replication needs versioning on the source bucket ("Both source and destination buckets must
have versioning enabled", https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-requirements.html),
and the source bucket's replication configuration (GetBucketReplication) must hold an enabled rule
to the replica bucket, which the secondary stack creates (:mod:`gpufarm.constructs.model_replica`).
"""

from __future__ import annotations

from typing import Any

from gpufarm.aws.preflight.calls import _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status


def _row(status: Status, subject: str, message: str, fix: str = "") -> CheckResult:
    return CheckResult(check=Check.MODEL_REPLICA, subject=subject, status=status, message=message, fix=fix)


def check_model_replica(
    *, source_bucket: str, replica_bucket: str, stack_name: str, s3: Any
) -> list[CheckResult]:
    """Rows for the replication of `source_bucket` to `replica_bucket` (the stack `stack_name` creates).

    FAIL when the source bucket's versioning is not enabled (PutBucketReplication refuses it) or
    the caller cannot read it; WARN when its replication configuration has no enabled rule to the
    replica yet (apply the stack's `ModelReplicationConfiguration` output once it is deployed);
    PASS when it has.
    """
    from botocore.exceptions import ClientError

    subject = f"s3://{source_bucket} -> s3://{replica_bucket}"
    try:
        versioning = s3.get_bucket_versioning(Bucket=source_bucket).get("Status")
    except ClientError as exc:
        return [
            _row(
                Status.FAIL,
                subject,
                f"cannot read the versioning of {source_bucket} ({_error_code(exc)})",
                f"grant s3:GetBucketVersioning on {source_bucket} to the caller",
            )
        ]
    rows: list[CheckResult] = []
    if versioning != "Enabled":
        rows.append(
            _row(
                Status.FAIL,
                subject,
                f"versioning of {source_bucket} is {versioning or 'off'}: S3 replicates only "
                "a versioned bucket",
                f"aws s3api put-bucket-versioning --bucket {source_bucket} "
                "--versioning-configuration Status=Enabled",
            )
        )
    try:
        rules = s3.get_bucket_replication(Bucket=source_bucket)["ReplicationConfiguration"].get("Rules", [])
    except ClientError as exc:
        if _error_code(exc) != "ReplicationConfigurationNotFoundError":
            raise
        rules = []
    target = f"arn:aws:s3:::{replica_bucket}"
    if any(r.get("Status") == "Enabled" and r.get("Destination", {}).get("Bucket") == target for r in rules):
        rows.append(_row(Status.PASS, subject, f"{source_bucket} replicates to {replica_bucket}"))
    else:
        rows.append(
            _row(
                Status.WARN,
                subject,
                f"{source_bucket} has no enabled replication rule to {replica_bucket} yet",
                f"after deploying {stack_name}: aws s3api put-bucket-replication --bucket {source_bucket} "
                f"--replication-configuration '<the {stack_name} output ModelReplicationConfiguration>', "
                "then copy the objects already there once (S3 Batch Replication)",
            )
        )
    return rows
