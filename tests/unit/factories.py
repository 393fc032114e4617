"""Build tier documents and configs from the poc preset with small variations."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import yaml

from gpufarm.config import TierConfig, build_tier, merge
from gpufarm.config.loader import PRESET_DIR


@cache
def _poc_document() -> dict[str, Any]:
    return yaml.safe_load((PRESET_DIR / "poc.yaml").read_text(encoding="utf-8"))


def poc_document() -> dict[str, Any]:
    """The raw poc preset document (a fresh copy: callers may mutate it)."""
    return copy.deepcopy(_poc_document())


def model_override(**fields: Any) -> dict[str, Any]:
    """An override replacing the poc's only model with one that has `fields` changed."""
    return {"models": [{**poc_document()["models"][0], **fields}]}


def pool_override(**fields: Any) -> dict[str, Any]:
    """An override replacing the poc's only node pool with one that has `fields` changed."""
    return {"node_pools": [{**poc_document()["node_pools"][0], **fields}]}


def overrides(*parts: dict[str, Any]) -> dict[str, Any]:
    """Several overrides combined into one (later ones win)."""
    out: dict[str, Any] = {}
    for part in parts:
        out = merge(out, part)
    return out


def make_tier(*parts: dict[str, Any]) -> TierConfig:
    """The poc tier with `parts` merged over it, validated like a user file."""
    return build_tier(merge(poc_document(), overrides(*parts)))


@cache
def _production_document() -> dict[str, Any]:
    return yaml.safe_load((PRESET_DIR / "production.yaml").read_text(encoding="utf-8"))


def production_document() -> dict[str, Any]:
    """The raw production preset document (a fresh copy)."""
    return copy.deepcopy(_production_document())


def production_model(index: int, **fields: Any) -> dict[str, Any]:
    """An override of the production preset's models with model `index` changed."""
    models = production_document()["models"]
    models[index] = {**models[index], **fields}
    return {"models": models}


def production_pool(index: int, **fields: Any) -> dict[str, Any]:
    """An override of the production preset's pools with pool `index` changed."""
    pools = production_document()["node_pools"]
    pools[index] = {**pools[index], **fields}
    return {"node_pools": pools}


def make_production(*parts: dict[str, Any]) -> TierConfig:
    """The production tier with `parts` merged over it, validated like a user file."""
    return build_tier(merge(production_document(), overrides(*parts)))


@cache
def _enterprise_document() -> dict[str, Any]:
    return yaml.safe_load((PRESET_DIR / "enterprise.yaml").read_text(encoding="utf-8"))


def enterprise_document() -> dict[str, Any]:
    """The raw enterprise preset document (a fresh copy)."""
    return copy.deepcopy(_enterprise_document())


def enterprise_part(section: str, index: int, **fields: Any) -> dict[str, Any]:
    """An override of one item of an enterprise list section (models, node_pools, node_groups)."""
    items = enterprise_document()[section]
    items[index] = {**items[index], **fields}
    return {section: items}


def make_enterprise(*parts: dict[str, Any]) -> TierConfig:
    """The enterprise tier with `parts` merged over it, validated like a user file."""
    return build_tier(merge(enterprise_document(), overrides(*parts)))


# --------------------------------------------------------------------------- a model split into shares

L40S_POOL: dict[str, Any] = {
    "name": "l40s",
    "purpose": "serving",
    "instance_families": ["g6e"],
    "instance_types": ["g6e.12xlarge"],
    "capacity_types": ["on-demand"],
    "gpu_limit": 16,
    "root_volume_gib": 500,
    "consolidate_after": "1h",
    "expire_after": "720h",
}
"""An on-demand L40S pool next to the enterprise preset's H100 class (4 GPUs per instance)."""

SHARES: list[dict[str, Any]] = [
    {"name": "h100", "capacity_class": "h100", "replicas": 2, "weight": 3},
    {"name": "l40s", "node_pool": "l40s", "replicas": 1, "weight": 1},
]
"""The 70B model: two replicas on the reserved H100 class, one on L40S, 3:1 by weight."""


def split(*shares: dict[str, Any], **model_fields: Any) -> dict[str, Any]:
    """The enterprise tier with the L40S pool and its 70B model (models[1]) split into `shares`."""
    chosen = [dict(s) for s in shares] if shares else copy.deepcopy(SHARES)
    pools = [*enterprise_document()["node_pools"], L40S_POOL]
    fields = {"capacity_class": None, "autoscaling": None, "shares": chosen, **model_fields}
    return overrides({"node_pools": pools}, enterprise_part("models", 1, **fields))


def share(index: int, **fields: Any) -> dict[str, Any]:
    """SHARES with share `index` changed (a field set to None is dropped)."""
    out = copy.deepcopy(SHARES)
    out[index] = {k: v for k, v in {**out[index], **fields}.items() if v is not None}
    return split(*out)


@cache
def _ec2_document() -> dict[str, Any]:
    return yaml.safe_load((PRESET_DIR / "ec2-poc.yaml").read_text(encoding="utf-8"))


def ec2_document() -> dict[str, Any]:
    """The raw ec2-poc preset document (a fresh copy)."""
    return copy.deepcopy(_ec2_document())


def ec2_model(**fields: Any) -> dict[str, Any]:
    """An override replacing the preset's only model with one that has `fields` changed."""
    return {"models": [{**ec2_document()["models"][0], **fields}]}


def ec2_scaling(**fields: Any) -> dict[str, Any]:
    base = ec2_document()["models"][0]
    return ec2_model(autoscaling={**base["autoscaling"], **fields})


def ec2_pool(**fields: Any) -> dict[str, Any]:
    return {"node_pools": [{**ec2_document()["node_pools"][0], **fields}]}


def make_ec2(*parts: dict[str, Any]) -> TierConfig:
    """The ec2-poc tier with `parts` merged over it, validated like a user file."""
    document = ec2_document()
    for part in parts:
        document = merge(document, part)
    return build_tier(document)


def second_region(**fields: Any) -> dict[str, Any]:
    """An override adding us-west-2 to the enterprise preset behind failover records: its zones,
    VPC, certificate, image cache secrets and replica model bucket, with `fields` changed."""
    document = enterprise_document()
    region = {
        "region": "us-west-2",
        "availability_zones": ["us-west-2a", "us-west-2b", "us-west-2c"],
        "network_cidr": "10.1.0.0/16",
        "certificate_arn": document["ingress"]["certificate_arn"].replace("us-east-1", "us-west-2"),
        "model_bucket": "gpufarm-enterprise-models-us-west-2",
        **{
            key: document["images"][key].replace("us-east-1", "us-west-2")
            for key in ("docker_hub_credential_arn", "github_credential_arn")
        },
        **fields,
    }
    return {
        "regions": {
            "routing": "failover",
            "dns_name": "inference.gpufarm.corp",
            "hosted_zone_id": "Z0123456789ABCDEFGHIJ",
            "secondary": [region],
        }
    }
