"""The tier of each region: the tier file's own, and one derived for each of `regions.secondary`.

One answer to "what does the stack in region X build": :func:`regional_tier` copies the tier and
replaces what is regional (zones, VPC CIDR, certificate, reservations, image cache secrets, the
model bucket); everything else (models, pools, gateway, observability) is the same tier. The
derived tier keeps `regions`, so its stack knows its role (`TierConfig.secondary_region`) and
carries its record of the DNS name. docs/decisions/0069-a-second-region.md.
"""

from __future__ import annotations

from typing import Any

from gpufarm.config.model import ModelStoreKind, ReservationKind, TierConfig
from gpufarm.config.sections.regions import RegionConfig


def source_buckets(cfg: TierConfig) -> list[str]:
    """The buckets the tier reads `s3://` weights from (models, the FSx import path), in order, once each."""
    uris = [m.weights for m in cfg.models if m.is_s3]
    import_path = cfg.model_store.fsx.import_path
    if cfg.model_store.kind is ModelStoreKind.FSX_LUSTRE and import_path is not None:
        uris.append(import_path)
    return list(dict.fromkeys(uri[len("s3://") :].split("/", 1)[0] for uri in uris))


def _rebucket(uri: str, source: str, replica: str | None) -> str:
    prefix = f"s3://{source}/"
    if replica is None or not (uri.startswith(prefix) or uri == f"s3://{source}"):
        return uri
    return f"s3://{replica}/{uri[len(prefix) :]}" if uri.startswith(prefix) else f"s3://{replica}"


def moved_zone(cfg: TierConfig, zone: str, region: RegionConfig) -> str:
    """The zone of `region` at the position `zone` has among the tier's own; `zone` itself when
    there is none (validation names it)."""
    zones = cfg.environment.availability_zones
    if zone in zones and zones.index(zone) < len(region.availability_zones):
        return region.availability_zones[zones.index(zone)]
    return zone


def regional_tier(cfg: TierConfig, region: RegionConfig) -> TierConfig:
    """The tier as the stack in `region` (one of `cfg.regions.secondary`) builds it.

    Replaced: `environment` (region, zones), `network.cidr`, `ingress.certificate_arn`, the node
    groups (the region's own, or the tier's moved to the zone at the same position), each node
    pool's `reservation_ids` (the region's, else none), the image cache's secrets, and every
    `s3://` location of the tier's model bucket (moved to `region.model_bucket`, its replica).
    """
    doc: dict[str, Any] = cfg.model_dump(mode="json", by_alias=True)
    doc["environment"] = {**doc["environment"], "region": region.region}
    doc["environment"]["availability_zones"] = list(region.availability_zones)
    doc["network"]["cidr"] = region.network_cidr
    if cfg.ingress.certificate_arn is not None:
        doc["ingress"]["certificate_arn"] = region.certificate_arn
    if region.node_groups is not None:
        doc["node_groups"] = [g.model_dump(mode="json", by_alias=True) for g in region.node_groups]
    else:
        for group in doc["node_groups"]:
            group["availability_zone"] = moved_zone(cfg, group["availability_zone"], region)
    for pool in doc["node_pools"]:
        pool["reservation_ids"] = list(region.reservation_ids.get(pool["name"], []))
    if cfg.images.pull_through_cache:
        doc["images"]["docker_hub_credential_arn"] = region.docker_hub_credential_arn
        doc["images"]["github_credential_arn"] = region.github_credential_arn
    buckets = source_buckets(cfg)
    if len(buckets) == 1:
        for model in doc["models"]:
            model["weights"] = _rebucket(model["weights"], buckets[0], region.model_bucket)
        fsx = doc["model_store"]["fsx"]
        if fsx.get("import_path"):
            fsx["import_path"] = _rebucket(fsx["import_path"], buckets[0], region.model_bucket)
    return TierConfig.model_validate(doc)


def regional_tiers(cfg: TierConfig) -> list[TierConfig]:
    """The tier of every stack `cfg` deploys: `cfg` itself first, then one per secondary region.

    A tier already derived for a secondary region is its own only stack.
    """
    if cfg.secondary_region is not None:
        return [cfg]
    return [cfg, *(regional_tier(cfg, region) for region in cfg.regions.secondary)]


def stack_tiers(configs: list[TierConfig]) -> list[TierConfig]:
    """:func:`regional_tiers` of each config, in order: one entry per stack."""
    return [tier for cfg in configs for tier in regional_tiers(cfg)]


def existing_reservations(cfg: TierConfig) -> list[tuple[int, list[str]]]:
    """(index, reservation IDs) of the node groups on reservations that already exist."""
    return [
        (i, list(g.capacity.reservation_ids))
        for i, g in enumerate(cfg.node_groups)
        if g.capacity.kind is not ReservationKind.CREATE
    ]
