"""Target group attributes the ELB API accepts, in every tier."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import load_preset
from gpufarm.k8s.binding import (
    READINESS_GATE_INJECT_LABEL,
    REGISTRATION_ALLOWANCE_SECONDS,
    TARGET_HEALTHY_THRESHOLD,
    readiness_gates,
)
from tests.tiers.helpers import manifests, resources


@pytest.mark.parametrize("tier", ["poc", "production", "enterprise"])
def test_no_target_group_combines_least_outstanding_requests_with_slow_start(
    tier: str, request: pytest.FixtureRequest
) -> None:
    # ALB user guide, target group attributes, slow start mode: "You cannot enable both slow
    # start mode and least outstanding requests"; CloudFormation would roll the stack back.
    template: dict[str, Any] = request.getfixturevalue(f"{tier}_template")
    groups = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup")
    least_outstanding = 0
    for logical_id, group in groups.items():
        attributes = {a["Key"]: a["Value"] for a in group["Properties"].get("TargetGroupAttributes", [])}
        if attributes.get("load_balancing.algorithm.type") == "least_outstanding_requests":
            least_outstanding += 1
            assert attributes.get("slow_start.duration_seconds", "0") == "0", logical_id
    # Every preset's ALB routes its models by least outstanding requests: the check above ran.
    assert least_outstanding >= 1


def _bound_deployments(objects: list[dict[str, Any]], binding: dict[str, Any]) -> list[dict[str, Any]]:
    """The Deployments whose pods a TargetGroupBinding registers (through its Service's selector)."""
    namespace = binding["metadata"]["namespace"]
    (service,) = [
        o
        for o in objects
        if o["kind"] == "Service"
        and o["metadata"]["name"] == binding["spec"]["serviceRef"]["name"]
        and o["metadata"].get("namespace") == namespace
    ]
    selector = service["spec"]["selector"].items()
    return [
        o
        for o in objects
        if o["kind"] == "Deployment"
        and o["metadata"]["namespace"] == namespace
        and selector <= o["spec"]["template"]["metadata"]["labels"].items()
    ]


@pytest.mark.parametrize(("tier", "gated"), [("poc", False), ("production", True), ("enterprise", True)])
def test_rollouts_keep_a_healthy_target_until_the_new_pod_is_healthy(
    tier: str, gated: bool, request: pytest.FixtureRequest
) -> None:
    # With the AWS Load Balancer Controller, its readiness gate holds a new pod unready until its
    # target is healthy; Auto Mode's controller injects none, so minReadySeconds holds the step.
    template: dict[str, Any] = request.getfixturevalue(f"{tier}_template")
    config = load_preset(tier)
    objects = manifests(template)
    bindings = [o for o in objects if o["kind"] == "TargetGroupBinding"]
    assert bindings
    namespaces = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Namespace"}
    wait = (
        REGISTRATION_ALLOWANCE_SECONDS
        + TARGET_HEALTHY_THRESHOLD * config.ingress.health_check_interval_seconds
    )
    checked = 0
    for binding in bindings:
        assert readiness_gates(binding["apiVersion"]) is gated
        labels = namespaces[binding["metadata"]["namespace"]]["metadata"]["labels"]
        assert (labels.get(READINESS_GATE_INJECT_LABEL) == "enabled") is gated
        deployments = _bound_deployments(objects, binding)
        checked += len(deployments)
        for deployment in deployments:
            assert deployment["spec"].get("minReadySeconds", 0) == (0 if gated else wait)
            if deployment["spec"]["strategy"]["type"] == "RollingUpdate":
                assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert checked >= len(config.models)
