"""Routine config changes must not replace stateful or traffic-bearing resources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tiers.conftest import synthesize, variant
from tests.tiers.helpers import STATEFUL_TYPES, only, resources, stateful_logical_ids


@pytest.fixture(scope="module")
def changed_template(
    poc_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """poc with more replicas, a bigger pool and a second model."""
    models = [dict(poc_document["models"][0], replicas=2)]
    models.append({"name": "llama-3-1-8b", "weights": "s3://my-models/llama-3.1-8b/", "gpus": 1})
    config = variant(
        poc_document, {"models": models, "node_pools": [dict(poc_document["node_pools"][0], gpu_limit=8)]}
    )
    return synthesize([config], tmp_path_factory.mktemp("changed"))["gpufarm-poc"]


def test_the_change_really_happened(changed_template: dict[str, Any]) -> None:
    assert len(resources(changed_template, "AWS::ElasticLoadBalancingV2::TargetGroup")) == 2
    assert len(resources(changed_template, "AWS::EKS::Addon")) == 1  # Mountpoint for the S3 model


# Target groups are checked per model below: adding a model adds one.
@pytest.mark.parametrize(
    "type_name", [t for t in STATEFUL_TYPES if t != "AWS::ElasticLoadBalancingV2::TargetGroup"]
)
def test_stateful_logical_ids_survive(
    poc_template: dict[str, Any], changed_template: dict[str, Any], type_name: str
) -> None:
    before = stateful_logical_ids(poc_template).get(type_name, [])
    after = stateful_logical_ids(changed_template).get(type_name, [])
    assert before and before == after


def test_existing_model_keeps_its_target_group(
    poc_template: dict[str, Any], changed_template: dict[str, Any]
) -> None:
    (before,) = resources(poc_template, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert before in resources(changed_template, "AWS::ElasticLoadBalancingV2::TargetGroup")


def test_cluster_properties_unchanged(poc_template: dict[str, Any], changed_template: dict[str, Any]) -> None:
    assert only(poc_template, "AWS::EKS::Cluster") == only(changed_template, "AWS::EKS::Cluster")


def test_synth_is_deterministic(
    poc_template: dict[str, Any], tmp_path: Path, poc_document: dict[str, Any]
) -> None:
    again = synthesize([variant(poc_document, {})], tmp_path)["gpufarm-poc"]
    assert again == poc_template
