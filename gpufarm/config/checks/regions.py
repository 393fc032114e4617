"""Checks of `regions`: a second region's zones, network, certificate, reservations and bucket.

What the stack of each secondary region builds is the tier derived for it
(:func:`gpufarm.config.regions.regional_tier`); :func:`gpufarm.config.validate.validate_tier`
also runs every other check on that tier and reports its problems under `regions.secondary[i]`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from gpufarm.config.checks.common import _quoted, _repeats
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import Provisioning, TierConfig
from gpufarm.config.regions import existing_reservations, source_buckets
from gpufarm.config.sections.regions import Routing

DNS_NAME_MAX = 253
"""Longest DNS name Route 53 takes without its final dot: "The maximum length of a domain name is
255 bytes, including the dots" in its wire form, and each label "can be up to 63 bytes"
(https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/DomainNameFormat.html)."""

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")

EKS_PROVISIONING = (Provisioning.AUTO_MODE, Provisioning.KARPENTER)
"""The provisioning modes a second region is built for: the EKS tiers."""


def dns_name_problem(name: str) -> str | None:
    """Why `name` is not a DNS name gpufarm can create a record of, or None."""
    labels = name.split(".")
    if len(name) > DNS_NAME_MAX:
        return f"at most {DNS_NAME_MAX} characters"
    if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
        return (
            "at least two labels of a-z, 0-9 and '-' (1-63 characters each, no leading or trailing "
            "'-'), separated by '.'"
        )
    return None


def _regions(cfg: TierConfig) -> Iterator[ConfigIssue]:
    regions = cfg.regions
    if not regions.enabled:
        for field in ("dns_name", "hosted_zone_id"):
            if getattr(regions, field) is not None:
                yield ConfigIssue(
                    path=f"regions.{field}",
                    message="is only used with regions.secondary (the records of a tier in several "
                    f"regions), got {getattr(regions, field)!r} and no secondary region",
                )
        return
    if cfg.cluster.provisioning not in EKS_PROVISIONING:
        yield ConfigIssue(
            path="regions.secondary",
            message="needs an EKS tier (cluster.provisioning "
            f"{_quoted([p.value for p in EKS_PROVISIONING])}), got {cfg.cluster.provisioning.value!r}",
        )
    if not cfg.fallback.enabled:
        yield ConfigIssue(
            path="regions.secondary",
            message="needs fallback.enabled: each region's Route 53 health check follows its "
            "gateway's readiness (the gateway target group's healthy hosts), got fallback.enabled false",
        )
    if regions.routing is Routing.FAILOVER and len(regions.secondary) != 1:
        yield ConfigIssue(
            path="regions.secondary",
            message="must list exactly one region with routing 'failover' (Route 53 failover has one "
            f"primary and one secondary record), got {len(regions.secondary)}; use routing 'latency' "
            "for more",
        )
    for field in ("dns_name", "hosted_zone_id"):
        if getattr(regions, field) is None:
            yield ConfigIssue(
                path=f"regions.{field}",
                message="is required with regions.secondary (each region's stack creates its record "
                "of the tier's DNS name in the hosted zone), got none",
            )
    if regions.dns_name is not None and (problem := dns_name_problem(regions.dns_name)):
        yield ConfigIssue(
            path="regions.dns_name", message=f"must be a DNS name of {problem}, got {regions.dns_name!r}"
        )
    names = [r.region for r in regions.secondary]
    yield from _repeats("regions.secondary", names, "must not list a region twice")
    for i, region in enumerate(regions.secondary):
        where = f"regions.secondary[{i}]"
        if region.region == cfg.environment.region:
            yield ConfigIssue(
                path=f"{where}.region",
                message=f"must differ from environment.region (the tier's own, primary region), got "
                f"{region.region!r}",
            )
        yield from _zones(cfg, where, region.region, region.availability_zones)
        yield from _reservations(cfg, i)
        yield from _certificate(cfg, i)
        yield from _credentials(cfg, i)
    yield from _networks(cfg)
    yield from _model_bucket(cfg)


def _zones(cfg: TierConfig, where: str, region: str, zones: list[str]) -> Iterator[ConfigIssue]:
    for j, az in enumerate(zones):
        suffix = az[len(region) :]
        if not az.startswith(region) or len(suffix) != 1 or not suffix.isalpha():
            yield ConfigIssue(
                path=f"{where}.availability_zones[{j}]",
                message=f"must be an availability zone of region {region!r} (such as '{region}a'), "
                f"got {az!r}",
            )
    yield from _repeats(f"{where}.availability_zones", zones, "must not repeat an availability zone")


def _reservations(cfg: TierConfig, i: int) -> Iterator[ConfigIssue]:
    region = cfg.regions.secondary[i]
    where = f"regions.secondary[{i}]"
    if region.node_groups is None:
        for g, ids in existing_reservations(cfg):
            group = cfg.node_groups[g]
            yield ConfigIssue(
                path=f"{where}.node_groups",
                message=f"must list {region.region}'s node groups: node_groups[{g}] ({group.name!r}) runs "
                f"on reservations {_quoted(ids)} of {cfg.environment.region}, and a capacity "
                "reservation serves only its own region and zone, got none",
            )
        zones = cfg.environment.availability_zones
        for g, group in enumerate(cfg.node_groups):
            if group.availability_zone in zones and zones.index(group.availability_zone) >= len(
                region.availability_zones
            ):
                yield ConfigIssue(
                    path=f"{where}.node_groups",
                    message=f"must list {region.region}'s node groups: node_groups[{g}] ({group.name!r}) "
                    f"is in the zone at position {zones.index(group.availability_zone)} of "
                    f"environment.availability_zones, and {region.region} lists "
                    f"{len(region.availability_zones)} zones, got none",
                )
    pools = {p.name: p for p in cfg.node_pools}
    for name in region.reservation_ids:
        if name not in pools:
            yield ConfigIssue(
                path=f"{where}.reservation_ids",
                message=f"must be keyed by node pool names ({_quoted(list(pools))}), got {name!r}",
            )
    for p, pool in enumerate(cfg.node_pools):
        if pool.reservation_ids and pool.name not in region.reservation_ids:
            yield ConfigIssue(
                path=f"{where}.reservation_ids",
                message=f"must give node pool {pool.name!r} its reservations in {region.region} (or []): "
                f"node_pools[{p}].reservation_ids {_quoted(list(pool.reservation_ids))} are reservations "
                f"of {cfg.environment.region}, and a capacity reservation serves only its own region",
            )


def _certificate(cfg: TierConfig, i: int) -> Iterator[ConfigIssue]:
    region = cfg.regions.secondary[i]
    where = f"regions.secondary[{i}].certificate_arn"
    if cfg.ingress.certificate_arn is None:
        if region.certificate_arn is not None:
            yield ConfigIssue(
                path=where,
                message="is only used when ingress.certificate_arn is set (a TLS listener), got "
                f"{region.certificate_arn!r}",
            )
        return
    if region.certificate_arn is None:
        yield ConfigIssue(
            path=where,
            message=f"is required with ingress.certificate_arn: an ACM certificate serves load "
            f"balancers of its own region only, so {region.region} needs its own, got none",
        )
        return
    cert_region = region.certificate_arn.split(":")[3]
    if cert_region != region.region:
        yield ConfigIssue(
            path=where,
            message=f"must be a certificate in {region.region} (ACM certificates serve load balancers "
            f"of their own region only), got a certificate in {cert_region!r}",
        )


def _credentials(cfg: TierConfig, i: int) -> Iterator[ConfigIssue]:
    region = cfg.regions.secondary[i]
    for field in ("docker_hub_credential_arn", "github_credential_arn"):
        value = getattr(region, field)
        if cfg.images.pull_through_cache and value is None:
            yield ConfigIssue(
                path=f"regions.secondary[{i}].{field}",
                message=f"is required with images.pull_through_cache: {region.region}'s cache rule signs "
                "in with a Secrets Manager secret in its own region, got none",
            )
        elif not cfg.images.pull_through_cache and value is not None:
            yield ConfigIssue(
                path=f"regions.secondary[{i}].{field}",
                message=f"is only used with images.pull_through_cache, got {value!r}",
            )


def _networks(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """The regions' VPCs must not overlap: a client in one VPC reaches the other region's internal
    load balancer (the DNS name's failover answer) only through peering or a transit gateway, and
    neither routes between overlapping CIDRs."""
    seen = [("network.cidr", ipaddress.IPv4Network(cfg.network.cidr))]
    for i, region in enumerate(cfg.regions.secondary):
        network = ipaddress.IPv4Network(region.network_cidr)
        for path, other in seen:
            if network.overlaps(other):
                yield ConfigIssue(
                    path=f"regions.secondary[{i}].network_cidr",
                    message=f"must not overlap {path} ({other}): clients reach the other region's "
                    "load balancer through VPC peering or a transit gateway, which route only between "
                    f"networks that do not overlap, got {region.network_cidr!r}",
                )
                break
        seen.append((f"regions.secondary[{i}].network_cidr", network))


def _model_bucket(cfg: TierConfig) -> Iterator[ConfigIssue]:
    buckets = source_buckets(cfg)
    if len(buckets) > 1:
        yield ConfigIssue(
            path="regions.secondary",
            message="needs every s3:// weight in one model bucket (the bucket replicated to each "
            f"region), got buckets {_quoted(buckets)}",
        )
    for i, region in enumerate(cfg.regions.secondary):
        where = f"regions.secondary[{i}].model_bucket"
        if not buckets and region.model_bucket is not None:
            yield ConfigIssue(
                path=where,
                message="is only used when a model reads s3:// weights (no model does), got "
                f"{region.model_bucket!r}",
            )
        elif buckets and region.model_bucket is None:
            yield ConfigIssue(
                path=where,
                message=f"is required when models read s3:// weights: {region.region}'s stack "
                f"creates this bucket as the replica of {buckets[0]!r}, got none",
            )
        elif region.model_bucket is not None and region.model_bucket in buckets:
            yield ConfigIssue(
                path=where,
                message="must name a new bucket for the replica, not the model bucket itself, got "
                f"{region.model_bucket!r}",
            )
    replicas = [r.model_bucket for r in cfg.regions.secondary if r.model_bucket is not None]
    yield from _repeats("regions.secondary", replicas, "must not name one model_bucket twice")
