"""Model weights read from S3 through the Mountpoint for Amazon S3 CSI driver (an EKS add-on)."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpufarm.constructs._util import acknowledge, pod_identity_role
from gpufarm.core.s3 import split_s3_uri

MOUNTPOINT_ADDON = "aws-mountpoint-s3-csi-driver"
MOUNTPOINT_SERVICE_ACCOUNT = "s3-csi-driver-sa"


def grant_model_read(role: iam.Role, s3_uris: Sequence[str], *, reader: str) -> None:
    """Let `role` read the objects under each `s3://bucket/prefix/`, and nothing else.

    Per bucket, `s3:ListBucket` limited to the prefixes (`s3:prefix` condition) and `s3:GetObject`
    under each prefix; `reader` names who reads, in each wildcard's acknowledgement.
    """
    partition = cdk.Aws.PARTITION
    by_bucket: dict[str, set[str]] = {}
    for uri in s3_uris:
        bucket, prefix = split_s3_uri(uri)
        by_bucket.setdefault(bucket, set()).add(prefix)
    for bucket, prefixes in sorted(by_bucket.items()):
        bucket_arn = f"arn:{partition}:s3:::{bucket}"
        listing = iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn])
        if "" not in prefixes:
            listing.add_condition("StringLike", {"s3:prefix": sorted(f"{p}*" for p in prefixes)})
        role.add_to_policy(listing)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=sorted(f"{bucket_arn}/{p}*" for p in prefixes)
            )
        )
        for prefix in sorted(prefixes):
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{bucket}/{prefix}*]",
                f"{reader} reads the model files under s3://{bucket}/{prefix}; the wildcard "
                "is that prefix, and the access is read-only.",
            )


class S3ModelStore(Construct):
    """Installs the Mountpoint for S3 CSI add-on with read-only access to the given S3 prefixes.

    The driver gets its credentials through EKS Pod Identity: a role allowed `s3:ListBucket` on
    each bucket (limited to the prefixes) and `s3:GetObject` under each prefix, nothing else.
    Volumes themselves are static PersistentVolumes rendered next to each model.
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, s3_uris: Sequence[str]) -> None:
        super().__init__(scope, id)
        if not s3_uris:
            raise ValueError("'s3_uris' must name at least one s3://bucket/prefix/, got []")
        self.role = pod_identity_role(
            self, "DriverRole", description="Mountpoint for S3 CSI driver: read model weights"
        )
        grant_model_read(self.role, s3_uris, reader="Mountpoint")
        self.addon = eks.CfnAddon(
            self,
            "Resource",
            cluster_name=cluster.cluster_name,
            addon_name=MOUNTPOINT_ADDON,
            resolve_conflicts="OVERWRITE",
            pod_identity_associations=[
                eks.CfnAddon.PodIdentityAssociationProperty(
                    role_arn=self.role.role_arn, service_account=MOUNTPOINT_SERVICE_ACCOUNT
                )
            ],
        )
