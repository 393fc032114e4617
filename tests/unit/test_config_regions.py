"""`regions`: a second region's config, the tier derived for it, and each refusal's exact message."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError
from gpufarm.config.regions import regional_tier, regional_tiers, stack_tiers

from .factories import (
    enterprise_document,
    enterprise_part,
    make_enterprise,
    make_tier,
    overrides,
    second_region,
)


def issues_of(*parts: dict[str, Any]) -> list[str]:
    """The issues of the enterprise tier with `parts` merged over it, one string each."""
    with pytest.raises(ConfigError) as caught:
        make_enterprise(*parts)
    return [str(issue) for issue in caught.value.issues]


def regions(**fields: Any) -> dict[str, Any]:
    """`second_region()` with fields of the `regions` section itself changed."""
    section = second_region()["regions"]
    return {"regions": {**section, **fields}}


WEST = "arn:aws:acm:us-west-2:111122223333:certificate/00000000-0000-4000-8000-000000000000"
EAST = WEST.replace("us-west-2", "us-east-1")


def test_primary_keeps_its_stack_and_the_secondary_gets_its_own() -> None:
    tiers = regional_tiers(make_enterprise(second_region()))
    assert [t.stack_name for t in tiers] == ["gpufarm-enterprise", "gpufarm-enterprise-us-west-2"]
    assert [t.secondary_region is None for t in tiers] == [True, False]
    # A derived tier is its own only stack.
    assert regional_tiers(tiers[1]) == [tiers[1]]
    assert [t.stack_name for t in stack_tiers([make_enterprise(), tiers[0]])] == [
        "gpufarm-enterprise",
        "gpufarm-enterprise",
        "gpufarm-enterprise-us-west-2",
    ]


def test_secondary_tier_replaces_what_is_regional() -> None:
    cfg = make_enterprise(second_region())
    west = regional_tier(cfg, cfg.regions.secondary[0])
    assert west.environment.region == "us-west-2"
    assert west.environment.availability_zones == ["us-west-2a", "us-west-2b", "us-west-2c"]
    assert west.network.cidr == "10.1.0.0/16"
    assert west.ingress.certificate_arn == WEST
    # Node groups keep their zone's position: us-east-1b is the tier's second zone.
    assert [g.availability_zone for g in west.node_groups] == ["us-west-2b", "us-west-2a"]
    # Every s3:// location moves to the replica, keeping its key.
    assert {m.weights.split("/", 3)[2] for m in west.models if m.is_s3} == {
        "gpufarm-enterprise-models-us-west-2"
    }
    assert west.models[0].weights.endswith("/meta-llama/Llama-3.1-405B-Instruct-FP8/")
    assert west.model_store.fsx.import_path == "s3://gpufarm-enterprise-models-us-west-2/"
    assert west.images.docker_hub_credential_arn is not None
    assert ":us-west-2:" in west.images.docker_hub_credential_arn
    # What is not regional stays the tier's.
    assert [m.name for m in west.models] == [m.name for m in cfg.models]
    assert west.fallback == cfg.fallback


def test_secondary_lists_its_own_node_groups() -> None:
    groups = [
        {
            **g,
            "availability_zone": "us-west-2c",
            "capacity": {"kind": "odcr", "reservation_ids": ["cr-0a1b2c3d4e5f60718"]},
        }
        for g in enterprise_document()["node_groups"]
    ]
    cfg = make_enterprise(second_region(node_groups=groups))
    west = regional_tier(cfg, cfg.regions.secondary[0])
    assert [g.availability_zone for g in west.node_groups] == ["us-west-2c", "us-west-2c"]
    assert [g.capacity.reservation_ids for g in west.node_groups] == [["cr-0a1b2c3d4e5f60718"]] * 2


def test_no_regions_is_one_stack() -> None:
    cfg = make_enterprise()
    assert regional_tiers(cfg) == [cfg]
    assert cfg.secondary_region is None


def _no_parking() -> list[dict[str, Any]]:
    """The enterprise models with none parked at zero replicas (which needs the gateway)."""
    return [
        {**m, "autoscaling": {**m["autoscaling"], "min_replicas": 1}} if "autoscaling" in m else m
        for m in enterprise_document()["models"]
    ]


ODCR_GROUP = {
    "node_groups": [
        {
            **enterprise_document()["node_groups"][0],
            "capacity": {"kind": "odcr", "reservation_ids": ["cr-0a1b2c3d4e5f60718"]},
        },
        enterprise_document()["node_groups"][1],
    ]
}


def _west(**fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = second_region()["regions"]["secondary"][0]
    return {**entry, **fields}


EU = {
    "region": "eu-west-1",
    "availability_zones": ["eu-west-1a", "eu-west-1b", "eu-west-1c"],
    "network_cidr": "10.2.0.0/16",
    "certificate_arn": WEST.replace("us-west-2", "eu-west-1"),
    "model_bucket": "gpufarm-enterprise-models-eu-west-1",
    **{
        key: enterprise_document()["images"][key].replace("us-east-1", "eu-west-1")
        for key in ("docker_hub_credential_arn", "github_credential_arn")
    },
}
OVERLAP = (
    "clients reach the other region's load balancer through VPC peering or a transit gateway, which "
    "route only between networks that do not overlap"
)

INVALID: list[Any] = [
    pytest.param(
        second_region(
            region="us-east-1", availability_zones=["us-east-1a", "us-east-1b"], certificate_arn=EAST
        ),
        [
            "regions.secondary[0].region: must differ from environment.region (the tier's own, primary "
            "region), got 'us-east-1'"
        ],
        id="secondary-is-the-primary-region",
    ),
    pytest.param(
        regions(
            routing="latency",
            secondary=[_west(), _west(network_cidr="10.2.0.0/16", model_bucket="gpufarm-models-west-two")],
        ),
        ["regions.secondary: must not list a region twice, got 'us-west-2' 2 times"],
        id="same-region-twice",
    ),
    pytest.param(
        second_region(availability_zones=["us-west-2a", "us-east-1b"]),
        [
            "regions.secondary[0].availability_zones[1]: must be an availability zone of region "
            "'us-west-2' (such as 'us-west-2a'), got 'us-east-1b'"
        ],
        id="zone-of-another-region",
    ),
    pytest.param(
        second_region(availability_zones=["us-west-2a", "us-west-2a"]),
        [
            "regions.secondary[0].availability_zones: must not repeat an availability zone, got "
            "'us-west-2a' 2 times"
        ],
        id="zone-twice",
    ),
    pytest.param(
        second_region(availability_zones=["us-west-2a"]),
        ["regions.secondary[0].availability_zones: must have at least 2 item(s), got 1"],
        id="one-zone",
    ),
    pytest.param(
        second_region(network_cidr="10.0.128.0/17"),
        [
            "regions.secondary[0].network_cidr: must not overlap network.cidr (10.0.0.0/16): "
            f"{OVERLAP}, got '10.0.128.0/17'"
        ],
        id="cidr-overlaps-the-primary",
    ),
    pytest.param(
        second_region(network_cidr="10.1.0.0/24"),
        [
            "regions.secondary[0].network_cidr: must be a /16 to /20 block (room for a private subnet "
            "per AZ), got '10.1.0.0/24'"
        ],
        id="a-check-of-the-derived-tier-named-at-the-region-s-field",
    ),
    pytest.param(
        regions(routing="latency", secondary=[_west(), {**EU, "network_cidr": "10.1.64.0/18"}]),
        [
            "regions.secondary[1].network_cidr: must not overlap regions.secondary[0].network_cidr "
            f"(10.1.0.0/16): {OVERLAP}, got '10.1.64.0/18'"
        ],
        id="cidr-overlaps-another-secondary",
    ),
    pytest.param(
        regions(secondary=[_west(), EU]),
        [
            "regions.secondary: must list exactly one region with routing 'failover' (Route 53 failover "
            "has one primary and one secondary record), got 2; use routing 'latency' for more"
        ],
        id="failover-with-two-secondaries",
    ),
    pytest.param(
        regions(dns_name=None, hosted_zone_id=None),
        [
            "regions.dns_name: is required with regions.secondary (each region's stack creates its "
            "record of the tier's DNS name in the hosted zone), got none",
            "regions.hosted_zone_id: is required with regions.secondary (each region's stack creates "
            "its record of the tier's DNS name in the hosted zone), got none",
        ],
        id="no-dns-name-or-zone",
    ),
    pytest.param(
        regions(dns_name="Inference..corp"),
        [
            "regions.dns_name: must be a DNS name of at least two labels of a-z, 0-9 and '-' (1-63 "
            "characters each, no leading or trailing '-'), separated by '.', got 'Inference..corp'"
        ],
        id="dns-name-not-a-name",
    ),
    pytest.param(
        regions(dns_name=f"{'a' * 63}.{'b' * 63}.{'c' * 63}.{'d' * 63}"),
        [
            "regions.dns_name: must be a DNS name of at most 253 characters, got "
            f"'{'a' * 63}.{'b' * 63}.{'c' * 63}.{'d' * 63}'"
        ],
        id="dns-name-too-long",
    ),
    pytest.param(
        regions(hosted_zone_id="zabc"),
        [
            "regions.hosted_zone_id: must be a Route 53 hosted zone ID such as 'Z0123456789ABCDEFGHIJ', "
            "got 'zabc'"
        ],
        id="hosted-zone-id-shape",
    ),
    pytest.param(
        {"regions": {"dns_name": "inference.gpufarm.corp"}},
        [
            "regions.dns_name: is only used with regions.secondary (the records of a tier in several "
            "regions), got 'inference.gpufarm.corp' and no secondary region"
        ],
        id="dns-name-without-a-secondary",
    ),
    pytest.param(
        second_region(certificate_arn=None),
        [
            "regions.secondary[0].certificate_arn: is required with ingress.certificate_arn: an ACM "
            "certificate serves load balancers of its own region only, so us-west-2 needs its own, got none"
        ],
        id="no-certificate",
    ),
    pytest.param(
        second_region(certificate_arn=EAST),
        [
            "regions.secondary[0].certificate_arn: must be a certificate in us-west-2 (ACM certificates "
            "serve load balancers of their own region only), got a certificate in 'us-east-1'"
        ],
        id="certificate-of-another-region",
    ),
    pytest.param(
        second_region(model_bucket=None),
        [
            "regions.secondary[0].model_bucket: is required when models read s3:// weights: us-west-2's "
            "stack creates this bucket as the replica of 'gpufarm-enterprise-models', got none"
        ],
        id="no-replica-bucket",
    ),
    pytest.param(
        second_region(model_bucket="gpufarm-enterprise-models"),
        [
            "regions.secondary[0].model_bucket: must name a new bucket for the replica, not the model "
            "bucket itself, got 'gpufarm-enterprise-models'"
        ],
        id="replica-is-the-model-bucket",
    ),
    pytest.param(
        overrides(ODCR_GROUP, second_region()),
        [
            "regions.secondary[0].node_groups: must list us-west-2's node groups: node_groups[0] "
            "('h100-base') runs on reservations 'cr-0a1b2c3d4e5f60718' of us-east-1, and a capacity "
            "reservation serves only its own region and zone, got none"
        ],
        id="reservation-of-the-primary-region",
    ),
    pytest.param(
        overrides(
            enterprise_part("node_groups", 0, availability_zone="us-east-1c"),
            second_region(availability_zones=["us-west-2a", "us-west-2b"]),
            {"network": {"nat_gateways": 2}},
        ),
        [
            "regions.secondary[0].node_groups: must list us-west-2's node groups: node_groups[0] "
            "('h100-base') is in the zone at position 2 of environment.availability_zones, and "
            "us-west-2 lists 2 zones, got none"
        ],
        id="node-group-zone-beyond-the-secondary-zones",
    ),
    pytest.param(
        second_region(
            node_groups=[
                {**g, "availability_zone": "us-west-2d"} for g in enterprise_document()["node_groups"]
            ]
        ),
        [
            "regions.secondary[0].node_groups[0].availability_zone: must be one of the VPC's availability "
            "zones ('us-west-2a', 'us-west-2b', 'us-west-2c'), got 'us-west-2d'",
            "regions.secondary[0].node_groups[1].availability_zone: must be one of the VPC's availability "
            "zones ('us-west-2a', 'us-west-2b', 'us-west-2c'), got 'us-west-2d'",
        ],
        id="own-node-group-outside-its-zones",
    ),
    pytest.param(
        overrides(
            {
                "node_pools": [
                    {
                        **enterprise_document()["node_pools"][0],
                        "reservation_ids": ["cr-0a1b2c3d4e5f60718"],
                        "capacity_types": ["reserved", "on-demand"],
                    },
                    enterprise_document()["node_pools"][1],
                ]
            },
            second_region(),
        ),
        [
            "regions.secondary[0].reservation_ids: must give node pool 'h100-burst' its reservations in "
            "us-west-2 (or []): node_pools[0].reservation_ids 'cr-0a1b2c3d4e5f60718' are reservations of "
            "us-east-1, and a capacity reservation serves only its own region"
        ],
        id="pool-reservation-of-the-primary-region",
    ),
    pytest.param(
        second_region(reservation_ids={"gpu": []}),
        [
            "regions.secondary[0].reservation_ids: must be keyed by node pool names ('h100-burst', "
            "'background'), got 'gpu'"
        ],
        id="reservations-of-an-unknown-pool",
    ),
    pytest.param(
        second_region(docker_hub_credential_arn=None),
        [
            "regions.secondary[0].docker_hub_credential_arn: is required with images.pull_through_cache: "
            "us-west-2's cache rule signs in with a Secrets Manager secret in its own region, got none"
        ],
        id="no-cache-secret",
    ),
    pytest.param(
        second_region(github_credential_arn=enterprise_document()["images"]["github_credential_arn"]),
        [
            "regions.secondary[0].github_credential_arn: must be a secret in the stack's region "
            "'us-west-2' (ECR requires the secret in the rule's account and region), got a secret in "
            "'us-east-1'"
        ],
        id="cache-secret-of-another-region",
    ),
    pytest.param(
        overrides({"fallback": {"enabled": False}, "models": _no_parking()}, second_region()),
        [
            "regions.secondary: needs fallback.enabled: each region's Route 53 health check follows its "
            "gateway's readiness (the gateway target group's healthy hosts), got fallback.enabled false"
        ],
        id="no-gateway",
    ),
    pytest.param(
        regions(secondary=[{**EU, "region": "eu-west-1"}]),
        [
            "regions.secondary[0]: in eu-west-1, models[1].bedrock.model_id must be an inference profile "
            "of the calling region 'eu-west-1': a 'us' profile is called from its geography's regions "
            "('us-east-1', 'us-east-2', 'us-west-1', 'us-west-2'), got 'us.meta.llama3-3-70b-instruct-v1:0'"
        ],
        id="a-check-of-the-tier-as-the-secondary-builds-it",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_regions(override: dict[str, Any], expected: list[str]) -> None:
    assert issues_of(override) == expected


def test_each_region_prices_its_health_check_and_the_secondary_its_replica() -> None:
    from gpufarm.estimate import monthly_cost
    from gpufarm.pricing import load_prices

    from .cost_lines import items, line

    prices = load_prices()
    primary, west = regional_tiers(make_enterprise(second_region()))
    east_cost, west_cost = monthly_cost(primary, prices=prices), monthly_cost(west, prices=prices)
    for estimate in (east_cost, west_cost):
        check = line(estimate, "Route 53 health checks")
        assert (check.quantity, check.unit_price) == (1, prices.route53.health_check_per_month)
        assert line(estimate, "CloudWatch alarms (Route 53 health check)").quantity == 1
    assert "S3 model replica" not in items(east_cost)
    replica = line(west_cost, "S3 model replica")
    # The three models' weights (410 + 132 + 62 GiB), in GB as S3 bills them.
    assert replica.quantity == pytest.approx((410 + 132 + 62) * 2**30 / 1e9)
    assert replica.unit_price == prices.s3.standard_per_gb_month
    # The secondary is priced from the us-east-1 table and says so (--live prices its region).
    assert "us-west-2" in " ".join(west_cost.notes)


def test_a_tier_without_regions_has_no_region_lines() -> None:
    from gpufarm.estimate import monthly_cost

    from .cost_lines import items

    names = items(monthly_cost(make_enterprise()))
    assert not [n for n in names if "Route 53" in n or "replica" in n]


POC_WEST = {
    "region": "us-west-2",
    "availability_zones": ["us-west-2a", "us-west-2b"],
    "network_cidr": "10.1.0.0/16",
}
POC_REGIONS = {"dns_name": "inference.gpufarm.corp", "hosted_zone_id": "Z0123456789ABCDEFGHIJ"}


def test_latency_routing_takes_several_secondaries_on_an_auto_mode_tier() -> None:
    east2 = {**POC_WEST, "region": "us-east-2", "availability_zones": ["us-east-2a", "us-east-2b"]}
    cfg = make_tier(
        {
            "regions": {
                **POC_REGIONS,
                "routing": "latency",
                "secondary": [POC_WEST, {**east2, "network_cidr": "10.2.0.0/16"}],
            }
        }
    )
    assert [t.stack_name for t in regional_tiers(cfg)] == [
        "gpufarm-poc",
        "gpufarm-poc-us-west-2",
        "gpufarm-poc-us-east-2",
    ]
    # Hugging Face weights need no bucket, so no replica is asked for.
    assert all(t.models[0].weights == cfg.models[0].weights for t in regional_tiers(cfg))


def test_only_an_eks_tier_runs_in_several_regions() -> None:
    with pytest.raises(ConfigError) as caught:
        make_tier({"regions": {**POC_REGIONS, "secondary": [POC_WEST]}}, {"cluster": {"provisioning": "ec2"}})
    assert [str(i) for i in caught.value.issues] == [
        "regions.secondary: needs an EKS tier (cluster.provisioning 'auto-mode', 'karpenter'), got 'ec2'"
    ]
