"""Routine config changes must not replace stateful or traffic-bearing resources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tiers.conftest import synthesize, variant
from tests.tiers.helpers import (
    STATEFUL_TYPES,
    application_load_balancer,
    default_target_group,
    model_target_groups,
    only,
    resources,
    stateful_logical_ids,
)


@pytest.fixture(scope="module")
def changed_template(
    poc_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """poc with more replicas, a bigger pool and a second model."""
    models = [dict(poc_document["models"][0], replicas=2)]
    models.append(
        {"name": "llama-3-1-8b", "weights": "s3://my-models/llama-3.1-8b/", "gpus": 1, "bedrock": "none"}
    )
    config = variant(
        poc_document, {"models": models, "node_pools": [dict(poc_document["node_pools"][0], gpu_limit=8)]}
    )
    return synthesize([config], tmp_path_factory.mktemp("changed"))["gpufarm-poc"]


def test_the_change_really_happened(changed_template: dict[str, Any]) -> None:
    assert len(model_target_groups(changed_template)) == 2
    assert len(resources(changed_template, "AWS::EKS::Addon")) == 1  # Mountpoint for the S3 model


# Target groups are checked per model below: adding a model adds one. The poc has no FSx
# file system, no Prometheus workspace and no Grafana workspace.
POC_STATEFUL_TYPES = [
    t
    for t in STATEFUL_TYPES
    if t
    not in (
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        "AWS::FSx::FileSystem",
        "AWS::APS::Workspace",
        "AWS::Grafana::Workspace",
    )
]


@pytest.mark.parametrize("type_name", POC_STATEFUL_TYPES)
def test_stateful_logical_ids_survive(
    poc_template: dict[str, Any], changed_template: dict[str, Any], type_name: str
) -> None:
    before = stateful_logical_ids(poc_template).get(type_name, [])
    after = stateful_logical_ids(changed_template).get(type_name, [])
    assert before and before == after


def test_existing_model_keeps_its_target_group(
    poc_template: dict[str, Any], changed_template: dict[str, Any]
) -> None:
    (before,) = model_target_groups(poc_template)
    assert before in model_target_groups(changed_template)
    assert default_target_group(poc_template) == default_target_group(changed_template)


def test_cluster_properties_unchanged(poc_template: dict[str, Any], changed_template: dict[str, Any]) -> None:
    assert only(poc_template, "AWS::EKS::Cluster") == only(changed_template, "AWS::EKS::Cluster")


def test_synth_is_deterministic(
    poc_template: dict[str, Any], tmp_path: Path, poc_document: dict[str, Any]
) -> None:
    again = synthesize([variant(poc_document, {})], tmp_path)["gpufarm-poc"]
    assert again == poc_template


# ----------------------------------------------------------------------------- production


@pytest.fixture(scope="module")
def changed_production(
    production_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """production with more replicas, bigger pools, more FSx weights and a third model."""
    models = [dict(m) for m in production_document["models"]]
    models[0]["autoscaling"] = dict(models[0]["autoscaling"], min_replicas=3, max_replicas=8)
    models.append(
        {
            "name": "qwen3-8b",
            "weights": "s3://gpufarm-production-models/Qwen/Qwen3-8B/",
            "weights_gib": 16,
            "node_pool": "serving",
            "gpus": 1,
            "replicas": 2,
            "bedrock": {"model_id": "us.meta.llama3-1-8b-instruct-v1:0"},
        }
    )
    pools = [dict(p, gpu_limit=p["gpu_limit"] * 2) for p in production_document["node_pools"]]
    config = variant(production_document, {"models": models, "node_pools": pools})
    return synthesize([config], tmp_path_factory.mktemp("changed-production"))["gpufarm-production"]


def test_the_production_change_really_happened(changed_production: dict[str, Any]) -> None:
    assert len(model_target_groups(changed_production)) == 3


@pytest.mark.parametrize(
    "type_name", [t for t in STATEFUL_TYPES if t != "AWS::ElasticLoadBalancingV2::TargetGroup"]
)
def test_production_stateful_logical_ids_survive(
    production_template: dict[str, Any], changed_production: dict[str, Any], type_name: str
) -> None:
    before = stateful_logical_ids(production_template).get(type_name, [])
    after = stateful_logical_ids(changed_production).get(type_name, [])
    assert before and before == after


def test_production_models_keep_their_target_groups(
    production_template: dict[str, Any], changed_production: dict[str, Any]
) -> None:
    before = set(model_target_groups(production_template))
    after = set(model_target_groups(changed_production))
    assert len(before) == 2 and before < after


def test_production_file_system_is_updated_not_replaced(
    production_template: dict[str, Any], changed_production: dict[str, Any]
) -> None:
    (before_id, before), (after_id, after) = (
        only(production_template, "AWS::FSx::FileSystem"),
        only(changed_production, "AWS::FSx::FileSystem"),
    )
    assert before_id == after_id
    assert before["Properties"] == after["Properties"]


def test_optimizer_toggle_creates_new_target_groups(
    production_document: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
    production_template: dict[str, Any],
) -> None:
    """TargetControlPort is fixed at creation: turning the optimizer off must make new groups."""
    config = variant(production_document, {"ingress": {"target_optimizer": {"enabled": False}}})
    off = synthesize([config], tmp_path_factory.mktemp("optimizer-off"))["gpufarm-production"]
    before = set(model_target_groups(production_template))
    after = model_target_groups(off)
    assert before.isdisjoint(after)
    assert all("TargetControlPort" not in g["Properties"] for g in after.values())
    assert application_load_balancer(off)[0] == application_load_balancer(production_template)[0]
