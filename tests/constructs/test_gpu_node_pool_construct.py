"""AutoModeGpuNodePool: a Karpenter NodePool applied to an existing cluster."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from aws_cdk.assertions import Template

from gpufarm.config import CapacityType, NodePoolConfig
from gpufarm.constructs import AutoModeGpuNodePool
from gpufarm.k8s.nodepool import auto_mode_gpu_nodepool
from tests.constructs.helpers import (
    CLUSTER_NAME,
    KUBECTL_SERVICE_TOKEN,
    KUBERNETES_RESOURCE,
    imported_cluster,
    logical_id,
    manifest_of,
    new_stack,
    resources,
)

DEFAULT_POOL = NodePoolConfig(name="l40s")
CUSTOM_POOL = NodePoolConfig(
    name="h100",
    instance_families=["p5"],
    capacity_types=[CapacityType.SPOT, CapacityType.ON_DEMAND],
    gpu_limit=16,
    consolidate_after="1h",
)


@dataclass(frozen=True)
class Built:
    default: AutoModeGpuNodePool
    custom: AutoModeGpuNodePool
    template: Template


@pytest.fixture(scope="module")
def built() -> Built:
    stack = new_stack("NodePools")
    cluster = imported_cluster(stack)
    default = AutoModeGpuNodePool(stack, "DefaultPool", cluster=cluster, pool=DEFAULT_POOL)
    custom = AutoModeGpuNodePool(stack, "CustomPool", cluster=cluster, pool=CUSTOM_POOL, node_class="gpu")
    return Built(default, custom, Template.from_stack(stack))


def test_an_existing_cluster_is_not_recreated(built: Built) -> None:
    built.template.resource_count_is("AWS::EKS::Cluster", 0)
    built.template.resource_count_is("AWS::Lambda::Function", 0)
    built.template.resource_count_is("AWS::IAM::Role", 0)


def test_one_manifest_per_pool_through_the_cluster_kubectl_provider(built: Built) -> None:
    built.template.resource_count_is(KUBERNETES_RESOURCE, 2)
    for pool in (built.default, built.custom):
        props = resources(built.template, KUBERNETES_RESOURCE)[logical_id(pool.resource)]["Properties"]
        assert props["ServiceToken"] == KUBECTL_SERVICE_TOKEN
        assert props["ClusterName"] == CLUSTER_NAME
        assert props["Overwrite"] is True


@pytest.mark.parametrize(
    ("attr", "pool", "node_class"),
    [("default", DEFAULT_POOL, "default"), ("custom", CUSTOM_POOL, "gpu")],
)
def test_manifest_is_the_nodepool_from_k8s(
    built: Built, attr: str, pool: NodePoolConfig, node_class: str
) -> None:
    construct: AutoModeGpuNodePool = getattr(built, attr)
    expected = auto_mode_gpu_nodepool(pool, node_class=node_class)
    assert manifest_of(built.template, construct.resource) == [expected]
    assert construct.manifest == expected


def test_manifest_carries_the_pool_settings(built: Built) -> None:
    (doc,) = manifest_of(built.template, built.custom.resource)
    assert doc["kind"] == "NodePool"
    assert doc["metadata"]["name"] == built.custom.node_pool_name == "gpu-h100"
    spec = doc["spec"]
    assert spec["limits"] == {"nvidia.com/gpu": "16"}
    assert spec["disruption"]["consolidateAfter"] == "1h"
    assert spec["template"]["spec"]["nodeClassRef"] == {
        "group": "eks.amazonaws.com",
        "kind": "NodeClass",
        "name": "gpu",
    }
    requirements = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert requirements["eks.amazonaws.com/instance-family"] == ["p5"]
    assert sorted(requirements["karpenter.sh/capacity-type"]) == ["on-demand", "spot"]
