"""A second region: the further regions a tier runs in, one stack each, behind Route 53 records.

The tier's own region (`environment.region`) is the primary. Each entry of `regions.secondary`
is a whole copy of the tier in another region (:func:`gpufarm.config.regions.regional_tiers`
derives it): its own VPC, cluster, node pools, load balancer, gateway, AMP workspace and FSx,
with the model bucket replicated to a bucket in that region. docs/decisions/0069-a-second-region.md.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from gpufarm.config.sections.capacity import NodeGroupConfig
from gpufarm.config.sections.values import (
    AcmCertificateArn,
    Cidr,
    DnsLabel,
    Region,
    ReservationId,
    _Model,
    _pattern,
)


class Routing(StrEnum):
    """How Route 53 answers for the tier's DNS name across its regions."""

    FAILOVER = "failover"
    """One primary record (the tier's own region) and one secondary, each health-checked."""
    LATENCY = "latency"
    """One record per region; Route 53 answers with the lowest-latency healthy region."""


HOSTED_ZONE_ID = re.compile(r"^Z[A-Z0-9]{1,31}$")
"""A Route 53 hosted zone ID: 'Z' then upper-case letters and digits, at most 32 characters
(`HostedZoneId`, "Length Constraints: Maximum length of 32",
https://docs.aws.amazon.com/Route53/latest/APIReference/API_ChangeResourceRecordSets.html)."""

HostedZoneId = Annotated[
    str, _pattern(HOSTED_ZONE_ID, "a Route 53 hosted zone ID such as 'Z0123456789ABCDEFGHIJ'")
]

S3_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
"""An S3 bucket name: 3-63 characters, lower-case letters, digits, '.' and '-', starting and ending
with a letter or digit (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)."""

BucketName = Annotated[str, _pattern(S3_BUCKET_NAME, "an S3 bucket name (3-63 of a-z, 0-9, '.', '-')")]


PoolReservations = dict[DnsLabel, list[ReservationId]]
"""Node pool name -> capacity reservation IDs."""


class RegionConfig(_Model):
    """One further region the tier runs in: what differs there from the tier's own region."""

    region: Region = Field(description="AWS region of this region's stack.")
    availability_zones: list[str] = Field(
        min_length=2, max_length=6, description="Availability zones of its VPC, in order; in `region`."
    )
    network_cidr: Cidr = Field(
        description="IPv4 CIDR of its VPC (a /16 to /20); must not overlap another region's."
    )
    certificate_arn: AcmCertificateArn | None = Field(
        None,
        description="ACM certificate in `region` for its load balancer (required when "
        "`ingress.certificate_arn` is set: ACM certificates serve only their own region); it must "
        "cover `regions.dns_name`.",
    )
    model_bucket: BucketName | None = Field(
        None,
        description="Name of the bucket this region's stack creates to receive the replicated model "
        "bucket; its models read their `s3://` weights there (required when a model reads `s3://`).",
    )
    node_groups: list[NodeGroupConfig] | None = Field(
        None,
        description="Reserved node groups of this region (default: the tier's, each moved to the "
        "availability zone at the same position; groups on existing reservations must be listed).",
    )
    reservation_ids: PoolReservations = Field(
        {},
        description="Node pool name -> the reservations it may use in this region (a pool's own "
        "`reservation_ids` name reservations of the tier's region, which serve only there).",
    )
    docker_hub_credential_arn: str | None = Field(
        None,
        description="With `images.pull_through_cache`: the Docker Hub cache rule's secret in `region`.",
    )
    github_credential_arn: str | None = Field(
        None,
        description="With `images.pull_through_cache`: the GitHub cache rule's secret in `region`.",
    )


class RegionsConfig(_Model):
    """Further regions the tier runs in, one stack each, behind Route 53 health-checked records."""

    secondary: list[RegionConfig] = Field(
        [],
        max_length=4,
        description="The further regions (empty: the tier runs in `environment.region` only). "
        "With failover routing, exactly one.",
    )
    routing: Routing = Field(
        Routing.FAILOVER,
        description="'failover': the tier's region answers while healthy, the secondary otherwise; "
        "'latency': the nearest healthy region answers.",
    )
    dns_name: str | None = Field(
        None,
        description="The name clients call ('inference.corp.example.net'); each region's stack "
        "creates its record of it in `hosted_zone_id`.",
    )
    hosted_zone_id: HostedZoneId | None = Field(
        None,
        description="The Route 53 hosted zone (public or private) holding `dns_name`; it is not "
        "created by gpufarm.",
    )
    alarm_evaluation_minutes: int = Field(
        2,
        ge=1,
        le=10,
        description="Minutes with no healthy gateway target before a region's health check fails.",
    )

    @property
    def enabled(self) -> bool:
        """True when the tier runs in more than one region."""
        return bool(self.secondary)
