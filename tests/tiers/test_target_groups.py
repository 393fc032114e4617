"""Target group attributes the ELB API accepts, in every tier."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tiers.helpers import resources


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
