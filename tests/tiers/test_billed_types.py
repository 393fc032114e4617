"""The resource-type walk over the presets and the integration apps (docs/decisions/0053).

The variants synthesized by other test modules (the enterprise NLB, shares behind an NLB, ...)
call :func:`tests.tiers.billing_walk.costing_gaps` on their own templates.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gpufarm.estimate.resource_types import (
    FREE_TYPES,
    PRICED_TYPES,
    kubernetes_kind,
    resource_kind,
    unaccounted,
)
from tests.tiers.billing_walk import costing_gaps

REPO = Path(__file__).resolve().parents[2]
INTEG_TIERS = sorted((REPO / "integ" / "cases").glob("*.snapshot/gpufarm-integ-*.template.json"))
INTEG_TIERS = [
    p for p in INTEG_TIERS if not p.name.endswith(("-probe.template.json", "-assert.template.json"))
]


def test_every_preset_type_is_priced_or_free(
    poc_template: dict[str, Any],
    production_template: dict[str, Any],
    enterprise_template: dict[str, Any],
    ec2_poc_template: dict[str, Any],
) -> None:
    for template in (poc_template, production_template, enterprise_template, ec2_poc_template):
        assert costing_gaps(template) == []


def test_the_integration_apps_are_walked() -> None:
    # Three tier stacks; their probe and assertion stacks are the test's own, not a tier's bill.
    assert [p.name for p in INTEG_TIERS] == [
        "gpufarm-integ-enterprise.template.json",
        "gpufarm-integ-poc.template.json",
        "gpufarm-integ-production.template.json",
    ]


@pytest.mark.parametrize("path", INTEG_TIERS, ids=[p.name for p in INTEG_TIERS])
def test_every_integration_type_is_priced_or_free(path: Path) -> None:
    assert costing_gaps(json.loads(path.read_text())) == []


def test_the_walk_fails_on_a_billed_type_it_does_not_know(poc_template: dict[str, Any]) -> None:
    template = copy.deepcopy(poc_template)
    template["Resources"]["Madeup"] = {"Type": "AWS::Example::BilledThing", "Properties": {}}
    assert costing_gaps(template) == [
        "AWS::Example::BilledThing: neither in PRICED_TYPES nor in FREE_TYPES "
        "(gpufarm/estimate/resource_types.py)"
    ]


def test_the_walk_fails_when_a_priced_type_has_no_line(poc_template: dict[str, Any]) -> None:
    # The poc tier has no file system, so its estimate has no FSx line for one added by hand.
    template = copy.deepcopy(poc_template)
    template["Resources"]["Extra"] = {"Type": "AWS::FSx::FileSystem", "Properties": {}}
    assert costing_gaps(template) == [
        "AWS::FSx::FileSystem: priced as ('FSx for Lustre',) but the estimate of poc has no such line"
    ]


def test_the_walk_fails_on_a_load_balancer_service(poc_template: dict[str, Any]) -> None:
    # A Service of type LoadBalancer makes the controller create a load balancer: not free.
    template = copy.deepcopy(poc_template)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"type": "LoadBalancer"},
    }
    template["Resources"]["ExtraService"] = {
        "Type": "Custom::AWSCDK-EKS-KubernetesResource",
        "Properties": {"Manifest": json.dumps([service])},
    }
    assert costing_gaps(template) == [
        "Kubernetes Service/LoadBalancer: neither in PRICED_KINDS nor in FREE_KINDS "
        "(gpufarm/estimate/resource_types.py)"
    ]


def test_the_walk_fails_when_a_line_miscounts_its_resources(poc_template: dict[str, Any]) -> None:
    # One alarm and one key more than the tier's config makes: the lines count from the config.
    template = copy.deepcopy(poc_template)
    template["Resources"]["ExtraAlarm"] = {"Type": "AWS::CloudWatch::Alarm", "Properties": {}}
    template["Resources"]["ExtraKey"] = {"Type": "AWS::KMS::Key", "Properties": {}}
    assert costing_gaps(template) == [
        "AWS::CloudWatch::Alarm: the template has 7, the line 'CloudWatch alarms' counts 6",
        "AWS::KMS::Key: the template has 4, the line 'KMS keys' counts 3",
    ]


def test_no_type_is_both_priced_and_free() -> None:
    assert set(PRICED_TYPES) & set(FREE_TYPES) == set()


def test_every_free_type_says_why() -> None:
    assert [t for t, why in FREE_TYPES.items() if len(why) < 10] == []


@pytest.mark.parametrize(
    ("resource_type", "properties", "kind"),
    [
        ("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Interface"}, "AWS::EC2::VPCEndpoint/Interface"),
        ("AWS::EC2::VPCEndpoint", {}, "AWS::EC2::VPCEndpoint/Gateway"),  # CloudFormation's default
        (
            "AWS::ElasticLoadBalancingV2::LoadBalancer",
            {"Type": "network"},
            "AWS::ElasticLoadBalancingV2::LoadBalancer/network",
        ),
        (
            "AWS::ElasticLoadBalancingV2::LoadBalancer",
            {},
            "AWS::ElasticLoadBalancingV2::LoadBalancer/application",
        ),
        ("AWS::KMS::Key", {}, "AWS::KMS::Key"),
    ],
)
def test_resource_kind_refines_types_billed_by_a_property(
    resource_type: str, properties: dict[str, Any], kind: str
) -> None:
    assert resource_kind(resource_type, properties) == kind


def test_a_service_kind_carries_its_type() -> None:
    assert [
        kubernetes_kind({"kind": "Service", "spec": {}}),
        kubernetes_kind({"kind": "Service", "spec": {"type": "LoadBalancer"}}),
        kubernetes_kind({"kind": "Service", "spec": {"clusterIP": "None"}}),
        kubernetes_kind({"kind": "Deployment"}),
    ] == ["Service/ClusterIP", "Service/LoadBalancer", "Service/None", "Deployment"]


def test_unaccounted_lists_what_neither_table_holds() -> None:
    assert unaccounted(
        ["AWS::IAM::Role", "AWS::Made::Up", "AWS::KMS::Key"], priced=PRICED_TYPES, free=FREE_TYPES
    ) == ["AWS::Made::Up"]
