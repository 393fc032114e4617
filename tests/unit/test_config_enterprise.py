"""The enterprise preset: reserved capacity, capacity classes, multi-node models, NLB/GLB/PrivateLink."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError, TierConfig, load_preset
from gpufarm.config.bedrock import PROFILE_GEOGRAPHIES
from gpufarm.config.model import CompliancePack, NodeGroupConfig, NodePoolConfig, ReservationKind
from gpufarm.core.placement import placement_of

from .factories import enterprise_document, enterprise_part, make_enterprise, overrides

NLB_MODELS = {
    "models": [
        {**m, "listener_port": port}
        for m, port in zip(
            load_preset("enterprise").model_dump(mode="json")["models"], (8443, 9443, 10443), strict=True
        )
    ]
}


def in_region(region: str, *, efa: bool = True) -> dict[str, Any]:
    """The enterprise preset moved to `region`: zones, node groups, certificate and the image
    cache's credential secrets follow.

    Models with a `us.` Bedrock profile list `region` among their destination_regions, as a user
    does for a region gpufarm's geography table does not know yet.
    """
    document = enterprise_document()
    models = [
        {**m, "bedrock": {**m["bedrock"], "destination_regions": [*PROFILE_GEOGRAPHIES["us"], region]}}
        if isinstance(m.get("bedrock"), dict) and m["bedrock"]["model_id"].startswith("us.")
        else m
        for m in document["models"]
    ]
    groups = [
        {
            **g,
            "availability_zone": g["availability_zone"].replace("us-east-1", region),
            "efa": g.get("efa", False) and efa,
        }
        for g in document["node_groups"]
    ]
    return {
        "environment": {"region": region, "availability_zones": [f"{region}{z}" for z in "abc"]},
        "node_groups": groups,
        "models": models,
        "ingress": {"certificate_arn": document["ingress"]["certificate_arn"].replace("us-east-1", region)},
        "images": {
            key: document["images"][key].replace("us-east-1", region)
            for key in ("docker_hub_credential_arn", "github_credential_arn")
        },
    }


NLB = overrides(
    {"ingress": {"kind": "nlb", "target_optimizer": {"enabled": False}, "waf": {"enabled": False}}},
    {"ingress": {"lcu_reservation": None}},
    NLB_MODELS,
)


@pytest.fixture(scope="module")
def enterprise() -> TierConfig:
    return load_preset("enterprise")


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_enterprise(*parts)
    return [str(issue) for issue in caught.value.issues]


def test_three_tier_capacity_mix(enterprise: TierConfig) -> None:
    classes = enterprise.capacity_classes()
    base, burst = classes["h100"]
    # Reserved base first, on-demand burst of the same class behind it; spot only in background.
    assert isinstance(base, NodeGroupConfig) and base.capacity.kind is ReservationKind.CREATE
    assert isinstance(burst, NodePoolConfig) and [c.value for c in burst.capacity_types] == ["on-demand"]
    (background,) = classes["background"]
    assert isinstance(background, NodePoolConfig) and "spot" in [c.value for c in background.capacity_types]
    assert burst.nodepool_weight > background.nodepool_weight


def test_serving_models_never_land_on_spot(enterprise: TierConfig) -> None:
    for model in enterprise.models:
        spot = any(
            isinstance(t, NodePoolConfig) and "spot" in [c.value for c in t.capacity_types]
            for t in placement_of(enterprise, model)
        )
        assert spot is (not model.critical), model.name


def test_enterprise_is_hardened(enterprise: TierConfig) -> None:
    assert enterprise.termination_protection
    assert enterprise.compliance_packs == [
        CompliancePack.AWS_SOLUTIONS,
        CompliancePack.NIST_800_53_R5,
        CompliancePack.CONTROL_TOWER,
    ]
    assert enterprise.removal_policy.value == "retain"
    assert len(enterprise.environment.availability_zones) == 3


def test_nlb_variant_is_valid() -> None:
    assert make_enterprise(NLB).ingress.kind.value == "nlb"


INVALID: list[Any] = [
    pytest.param(
        enterprise_part("node_groups", 0, availability_zone="us-east-1d"),
        [
            "node_groups[0].availability_zone: must be one of the VPC's availability zones "
            "('us-east-1a', 'us-east-1b', 'us-east-1c'), got 'us-east-1d'"
        ],
        id="reservation-az-outside-the-vpc",
    ),
    pytest.param(
        enterprise_part("node_groups", 0, instance_type="m7i.48xlarge"),
        [
            "node_groups[0].instance_type: must be a known GPU instance type (such as "
            "'p5.48xlarge'), got 'm7i.48xlarge'"
        ],
        id="node-group-not-gpu",
    ),
    pytest.param(
        enterprise_part("node_groups", 1, capacity={"kind": "create", "instance_count": 1}),
        [
            "node_groups[1].capacity.instance_count: must be at least nodes (2): every node runs in "
            "the reservation, got 1"
        ],
        id="reservation-smaller-than-the-group",
    ),
    pytest.param(
        enterprise_part("node_groups", 0, capacity={"kind": "capacity-block", "reservation_ids": []}),
        [
            "node_groups[0].capacity.reservation_ids: must name exactly one Capacity Block when "
            "capacity.kind is 'capacity-block', got []"
        ],
        id="capacity-block-without-id",
    ),
    pytest.param(
        enterprise_part("node_groups", 0, capacity={"kind": "odcr"}),
        [
            "node_groups[0].capacity.reservation_ids: must name at least one reservation when "
            "capacity.kind is 'odcr', got []"
        ],
        id="odcr-without-ids",
    ),
    pytest.param(
        enterprise_part(
            "node_groups", 0, capacity={"kind": "create", "reservation_ids": ["cr-0123456789abcdef0"]}
        ),
        [
            "node_groups[0].capacity.reservation_ids: must be empty when capacity.kind is 'create' "
            "(gpufarm creates the reservation), got ['cr-0123456789abcdef0']"
        ],
        id="create-with-ids",
    ),
    pytest.param(
        enterprise_part("node_groups", 0, capacity={"kind": "odcr", "reservation_ids": ["cr-12"]}),
        [
            "node_groups[0].capacity.reservation_ids[0]: must be a capacity reservation ID such as "
            "'cr-0123456789abcdef0', got 'cr-12'"
        ],
        id="reservation-id-shape",
    ),
    pytest.param(
        enterprise_part("node_groups", 0, name="background"),
        [
            "node_groups[0].name: must differ from every node pool's name (models name either), "
            "got 'background'"
        ],
        id="node-group-named-like-a-pool",
    ),
    pytest.param(
        enterprise_part("models", 1, capacity_class="background"),
        [
            "models[1].capacity_class: must not be class 'background' for a critical model: its pool "
            "'background' allows spot, whose nodes are reclaimed with two minutes' notice (set "
            "critical: false, or allow_spot: true to accept it), got 'background'",
            "models[1].capacity_class: must have room for its models (24 GPUs requested from class "
            "'background', whose node groups and pool limits hold 16), got 'background'",
        ],
        id="critical-model-on-the-spot-class",
    ),
    pytest.param(
        enterprise_part("models", 1, capacity_class="a100"),
        [
            "models[1].capacity_class: must name a capacity class ('h100', 'h100-multinode', "
            "'background'), got 'a100'"
        ],
        id="unknown-capacity-class",
    ),
    pytest.param(
        enterprise_part("models", 1, node_pool="h100-burst"),
        [
            "models[1].capacity_class: must be empty when node_pool is set (one placement per "
            "model), got 'h100' and node_pool 'h100-burst'"
        ],
        id="class-and-pool",
    ),
    pytest.param(
        enterprise_part("models", 0, replicas=3),
        [
            "node_groups[1].nodes: must hold the GPUs its models request (48 GPUs; 2 x p5.48xlarge "
            "hold 16), got 2"
        ],
        id="reserved-group-without-room",
    ),
    pytest.param(
        enterprise_part("models", 0, autoscaling={"min_replicas": 1, "max_replicas": 1}),
        [
            "models[0].autoscaling: must be empty for a multi-node model (pipeline_parallel > 1): "
            "its replicas are LeaderWorkerSet groups with fixed `replicas`, got an autoscaling section"
        ],
        id="multi-node-autoscaling",
    ),
    pytest.param(
        {"ingress": {"kind": "nlb"}},
        [
            "ingress.target_optimizer.enabled: must be false with ingress.kind 'nlb' (the Target "
            "Optimizer and WAF attach to Application Load Balancers only; inspect NLB traffic with "
            "ingress.inspection), got true",
            "ingress.waf.enabled: must be false with ingress.kind 'nlb' (the Target Optimizer and "
            "WAF attach to Application Load Balancers only; inspect NLB traffic with "
            "ingress.inspection), got true",
            "ingress.lcu_reservation: applies only with ingress.kind 'alb', got 100 with 'nlb'",
            "models[0].listener_port: is required with ingress.kind 'nlb' (an NLB routes by port, "
            "one listener per model); it is not set",
            "models[1].listener_port: is required with ingress.kind 'nlb' (an NLB routes by port, "
            "one listener per model); it is not set",
            "models[2].listener_port: is required with ingress.kind 'nlb' (an NLB routes by port, "
            "one listener per model); it is not set",
        ],
        id="nlb-with-target-optimizer-and-no-ports",
    ),
    pytest.param(
        overrides(
            NLB,
            {
                "models": [
                    dict(m, listener_port=443) if i == 1 else m for i, m in enumerate(NLB_MODELS["models"])
                ]
            },
        ),
        ["models[1].listener_port: must differ from the gateway's listener (one listener per port), got 443"],
        id="nlb-port-clashes-with-the-gateway",
    ),
    pytest.param(
        overrides(
            NLB,
            {"ingress": {"scheme": "internal", "certificate_arn": None, "inspection": {"enabled": False}}},
        ),
        [
            "ingress.certificate_arn: is required when ingress.nlb.tls is true (the NLB terminates "
            "TLS); it is not set"
        ],
        id="nlb-tls-without-certificate",
    ),
    pytest.param(
        enterprise_part("models", 1, listener_port=8443),
        ["models[1].listener_port: applies only with ingress.kind 'nlb' (the ALB routes by path), got 8443"],
        id="listener-port-on-alb",
    ),
    pytest.param(
        {"ingress": {"private_link": {"allowed_principals": []}}},
        [
            "ingress.private_link.allowed_principals: must list at least one principal when "
            "private_link.enabled is true (nobody else could connect), got []"
        ],
        id="private-link-without-principals",
    ),
    pytest.param(
        {"ingress": {"private_link": {"allowed_principals": ["444455556666"]}}},
        [
            "ingress.private_link.allowed_principals[0]: must be an IAM principal ARN "
            "(arn:aws:iam::<account>:root, :role/<name> or :user/<name>), got '444455556666'"
        ],
        id="private-link-principal-shape",
    ),
    pytest.param(
        {"ingress": {"inspection": {"cidr": "10.0.128.0/20"}}},
        ["ingress.inspection.cidr: must not overlap network.cidr ('10.0.0.0/16'), got '10.0.128.0/20'"],
        id="inspection-cidr-overlap",
    ),
    pytest.param(
        {"ingress": {"inspection": {"appliances": {"min_size": 5, "max_size": 4}}}},
        ["ingress.inspection.appliances.min_size: must be at most max_size (4), got 5"],
        id="appliances-min-above-max",
    ),
    pytest.param(
        {"ingress": {"inspection": {"appliances": {"root_device_name": "/dev/sda1"}}}},
        [
            "ingress.inspection.appliances.root_device_name: must be '/dev/xvda' (Amazon Linux 2023's) "
            "unless ami_id names another image, got '/dev/sda1'"
        ],
        id="appliance-root-device-without-ami",
    ),
    pytest.param(
        {"ingress": {"inspection": {"appliances": {"health_check_port": 0}}}},
        ["ingress.inspection.appliances.health_check_port: must be >= 1, got 0"],
        id="appliance-health-check-port",
    ),
    pytest.param(
        {"ingress": {"inspection": {"appliances": {"root_device_name": "xvda"}}}},
        [
            "ingress.inspection.appliances.root_device_name: must match the pattern "
            "^/dev/[a-z0-9]+$, got 'xvda'"
        ],
        id="appliance-root-device-not-a-device",
    ),
    pytest.param(
        {"compliance_packs": []},
        [
            "compliance_packs: must list at least 'aws-solutions' (compliance is a gate, not an "
            "option), got []"
        ],
        id="no-compliance-pack",
    ),
    pytest.param(
        {"network": {"flow_logs": {"enabled": True, "retention_days": 30}}},
        [
            "network.flow_logs.retention_days: must be at least 365 with the 'control-tower' "
            "compliance pack (its control CT.CLOUDWATCH.PR.2 requires a CloudWatch log group kept at "
            "least one year), got 30"
        ],
        id="control-tower-short-flow-log-retention",
    ),
    pytest.param(
        {"termination_protection": False},
        [
            "termination_protection: must be true with the 'control-tower' compliance pack (its "
            "control CT.ELASTICLOADBALANCING.PR.5 requires deletion protection on the load "
            "balancers, which follows termination_protection), got false"
        ],
        id="control-tower-without-deletion-protection",
    ),
    pytest.param(
        enterprise_part("node_pools", 0, capacity_types=["reserved"]),
        [
            "node_pools[0].reservation_ids: must name the capacity reservations a pool with the "
            "'reserved' capacity type may use (Karpenter selects reservations by ID), got []"
        ],
        id="karpenter-reserved-without-ids",
    ),
    pytest.param(
        enterprise_part("node_pools", 0, efa=True),
        [
            "node_pools[0].efa: must be false: EFA interfaces are configured on reserved node groups "
            "(node_groups[].efa), not on Karpenter or Auto Mode pools, got true"
        ],
        id="efa-on-a-pool",
    ),
    pytest.param(
        in_region("us-west-9"),
        [
            "environment.region: must have a known Amazon EKS image registry when a node group "
            "sets efa (the EFA device plugin is pulled from the region's own registry; see "
            "gpufarm/core/registries.py), got 'us-west-9'"
        ],
        id="efa-in-a-region-without-a-known-eks-registry",
    ),
    pytest.param(
        overrides(NLB, {"ingress": {"slow_start_seconds": 10}}),
        ["ingress.slow_start_seconds: must be 0 (off) or 30-900, got 10"],
        id="nlb-slow-start-out-of-range",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_enterprise_input(override: dict[str, Any], expected: list[str]) -> None:
    assert issues_of(override) == expected


VALID: list[Any] = [
    pytest.param(
        enterprise_part(
            "node_pools",
            0,
            capacity_types=["reserved", "on-demand"],
            reservation_ids=["cr-0123456789abcdef0"],
        ),
        id="karpenter-pool-on-reservations",
    ),
    pytest.param(
        enterprise_part(
            "node_groups", 0, capacity={"kind": "capacity-block", "reservation_ids": ["cr-0123456789abcdef0"]}
        ),
        id="capacity-block",
    ),
    pytest.param(
        enterprise_part(
            "node_groups",
            0,
            capacity={"kind": "odcr", "reservation_ids": ["cr-0123456789abcdef0", "cr-0fedcba9876543210"]},
        ),
        id="existing-odcrs",
    ),
    pytest.param(
        enterprise_part("models", 2, capacity_class="h100", node_pool=None),
        id="non-critical-model-on-the-reserved-class",
    ),
    # An NLB has no routing algorithm, so slow start is not refused there (it does not apply).
    pytest.param(overrides(NLB, {"ingress": {"slow_start_seconds": 30}}), id="nlb-slow-start-30"),
    pytest.param(in_region("us-west-2"), id="efa-in-another-region-with-a-known-registry"),
    pytest.param(in_region("us-west-9", efa=False), id="no-efa-needs-no-known-registry"),
]


@pytest.mark.parametrize("override", VALID)
def test_valid_enterprise_variants(override: dict[str, Any]) -> None:
    assert make_enterprise(override).name == "enterprise"
