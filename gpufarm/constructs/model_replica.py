"""The replica of the model bucket in a secondary region, and the role S3 replicates into it with.

gpufarm never creates the model bucket: every model store (Mountpoint, FSx for Lustre's data
repository association, the Run:ai streamer) reads the bucket named in the tier's `s3://` URIs,
which the operator owns. A replication configuration is a property of that source bucket
(`PutBucketReplication`), so a stack can only set it on a bucket it owns. The secondary region's
stack therefore builds everything else: the replica bucket (versioned, as replication requires of
both buckets), and the IAM role Amazon S3 assumes, with the permissions the S3 user guide lists
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/setting-repl-config-perm-overview.html:
`s3:GetReplicationConfiguration` and `s3:ListBucket` on the source bucket,
`s3:GetObjectVersionForReplication`, `s3:GetObjectVersionAcl` and `s3:GetObjectVersionTagging` on
its objects, `s3:ReplicateObject`, `s3:ReplicateDelete` and `s3:ReplicateTags` on the replica's).
The stack outputs the replication configuration to apply to the source bucket, and
`gpufarm preflight` checks that it is applied (docs/operations.md, "A second region").

The replica is SSE-S3: replicas of SSE-S3 objects stay SSE-S3, and every reader of the bucket
(the Mountpoint driver's role, FSx for Lustre, the streamer) reads it without a key grant.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gpufarm.constructs._util import acknowledge_all

S3_SERVICE = "s3.amazonaws.com"

NONCURRENT_VERSION_DAYS = 30
"""Days a replaced or deleted model file's old version stays in the replica before it expires."""


def replication_configuration(*, role_arn: str, replica_bucket_arn: str) -> dict[str, object]:
    """The `ReplicationConfiguration` to put on the model bucket: every object, to the replica.

    One rule, every key (`Filter.Prefix` ""), delete markers not replicated (a model deleted in
    the primary stays served in the secondary until it is removed there too); shape as in
    https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketReplication.html.
    """
    return {
        "Role": role_arn,
        "Rules": [
            {
                "ID": "gpufarm-model-replica",
                "Status": "Enabled",
                "Priority": 1,
                "Filter": {"Prefix": ""},
                "DeleteMarkerReplication": {"Status": "Disabled"},
                "Destination": {"Bucket": replica_bucket_arn},
            }
        ],
    }


class ModelReplica(Construct):
    """A versioned replica bucket named `bucket_name` and the role S3 replicates `source_bucket` with.

    Both are retained when the stack is deleted (the replica holds the weights this region serves).
    """

    def __init__(self, scope: Construct, id: str, *, source_bucket: str, bucket_name: str) -> None:
        super().__init__(scope, id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=bucket_name,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            # Replication requires versioning on the source and the destination bucket.
            versioned=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
            # A model file replaced in the source leaves its old version here: gone after a while.
            lifecycle_rules=[
                s3.LifecycleRule(noncurrent_version_expiration=cdk.Duration.days(NONCURRENT_VERSION_DAYS))
            ],
        )
        self.role = iam.Role(
            self,
            "ReplicationRole",
            assumed_by=iam.ServicePrincipal(S3_SERVICE),
            description=f"S3 replication of s3://{source_bucket} to s3://{bucket_name}",
        )
        source_arn = f"arn:{cdk.Aws.PARTITION}:s3:::{source_bucket}"
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetReplicationConfiguration", "s3:ListBucket"], resources=[source_arn]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "s3:GetObjectVersionForReplication",
                    "s3:GetObjectVersionAcl",
                    "s3:GetObjectVersionTagging",
                ],
                resources=[f"{source_arn}/*"],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags"],
                resources=[self.bucket.arn_for_objects("*")],
            )
        )
        stack = cdk.Stack.of(self)
        bucket_objects = (
            f"AwsSolutions-IAM5[Resource::<{stack.get_logical_id(self.bucket.node.default_child)}.Arn>/*]"  # type: ignore[arg-type]
        )
        acknowledge_all(
            self.role,
            {
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{source_bucket}/*]": (
                    f"S3 replicates every object of the model bucket {source_bucket}; the role reads "
                    "object versions for replication only."
                ),
                bucket_objects: "S3 writes every replicated object into the replica bucket; nothing else.",
                "NIST.800.53.R5-IAMNoInlinePolicy": (
                    "The replication role's three grants (read the source bucket's versions, write "
                    "the replica's) are held inline so that they belong to this role alone and are "
                    "deleted with it."
                ),
            },
        )
        no_server_logs = (
            "The replica only receives S3 replication and the model store's reads; its source bucket "
            "is the one whose access the operator logs. Public access is blocked and TLS enforced."
        )
        acknowledge_all(
            self.bucket,
            {
                "AwsSolutions-S1": no_server_logs,
                "NIST.800.53.R5-S3BucketLoggingEnabled": no_server_logs,
                "NIST.800.53.R5-S3DefaultEncryptionKMS": (
                    "Replicas of SSE-S3 model files stay SSE-S3, and the readers (the Mountpoint "
                    "driver, FSx for Lustre's data repository association, the streamer) read them "
                    "without a key grant. The files are model weights, not customer data."
                ),
                "NIST.800.53.R5-S3BucketReplicationEnabled": (
                    "This bucket is itself the replica of the model bucket in the tier's own region."
                ),
                "ControlTower::CT.S3.PR.2": no_server_logs,
                "ControlTower::CT.S3.PR.10": (
                    "SSE-S3: replicas of SSE-S3 model files, read by the model store without a key grant."
                ),
                "ControlTower::CT.S3.PR.4": (
                    "Nothing consumes replicated model files as they arrive: the model store reads them "
                    "when a model starts, so an event notification would have no target."
                ),
                "ControlTower::CT.S3.PR.9": (
                    "Replication must be able to replace and delete model versions as the source "
                    "bucket changes; an Object Lock retention would refuse that. Versioning keeps "
                    "what is overwritten."
                ),
            },
        )
        self.configuration = json.dumps(
            replication_configuration(role_arn=self.role.role_arn, replica_bucket_arn=self.bucket.bucket_arn)
        )
        """The replication configuration to put on the source bucket, as JSON (with the role's and
        the bucket's ARNs resolved at deploy)."""
