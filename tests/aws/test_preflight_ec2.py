"""Preflight of `cluster.provisioning: ec2`: the vCPUs the GPU Auto Scaling groups may run."""

from __future__ import annotations

from gpufarm.aws.preflight import vcpu_demands
from gpufarm.config import CapacityType, load_preset
from tests.aws.test_preflight import AwsStubs, aws, facts  # noqa: F401  (the fixture)
from tests.unit.factories import ec2_model as model
from tests.unit.factories import ec2_pool as pool
from tests.unit.factories import make_ec2


def test_a_group_counts_at_its_max_size_against_the_on_demand_quota(aws: AwsStubs) -> None:  # noqa: F811
    tier = load_preset("ec2-poc")
    assert [
        (d.source, d.instance_type, d.capacity_type, d.vcpus_per_instance, d.instances, d.limit_instances)
        for d in vcpu_demands(tier, facts(aws, tier))
    ] == [
        # Two replicas at most, one GPU each: two g6e.2xlarge (the smallest g6e with the model's
        # 6 vCPUs); the warm pool's stopped instance counts against no running-instances quota.
        ("group l40s", "g6e.2xlarge", CapacityType.ON_DEMAND, 8, 2, 2),
    ]


def test_a_spot_group_splits_its_max_size_at_the_on_demand_base(aws: AwsStubs) -> None:  # noqa: F811
    tier = make_ec2(
        pool(capacity_types=["on-demand", "spot"], purpose="batch"),
        model(critical=False),
        {"ec2": {"warm_pool": {"enabled": False}}},
    )
    assert [(d.capacity_type, d.instances) for d in vcpu_demands(tier, facts(aws, tier))] == [
        (CapacityType.ON_DEMAND, 1),
        (CapacityType.SPOT, 1),
    ]
