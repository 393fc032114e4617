"""`gpufarm cost` of `cluster.provisioning: ec2`: no cluster, the gateway's instances, the warm pool."""

from __future__ import annotations

from gpufarm.config import load_preset
from gpufarm.estimate import monthly_cost
from gpufarm.pricing import load_prices
from tests.unit.factories import make_ec2


def test_an_ec2_tier_pays_for_no_control_plane_no_system_nodes_and_no_control_plane_logs() -> None:
    items = [line.item for line in monthly_cost(load_preset("ec2-poc")).lines]
    assert not [i for i in items if i.startswith(("EKS", "System nodes"))]
    assert not [i for i in items if "control-plane" in i]


def test_the_gateway_group_bills_its_instances_between_its_sizes() -> None:
    tier = load_preset("ec2-poc")
    line = next(li for li in monthly_cost(tier).lines if li.item.startswith("Gateway instances"))
    prices = load_prices()
    gateway = tier.ec2.gateway
    assert line.item == f"Gateway instances: {gateway.instance_type}"
    assert (line.quantity, line.peak_quantity) == (gateway.min_instances, gateway.max_instances)
    assert line.unit_price == prices.on_demand(gateway.instance_type) * prices.hours_per_month


def test_a_warm_pool_bills_its_stopped_instances_volumes_not_their_hours() -> None:
    tier = load_preset("ec2-poc")
    lines = {li.item: li for li in monthly_cost(tier).lines}
    volumes = lines["EBS gp3 warm pool volumes (stopped GPU instances)"]
    assert volumes.quantity == tier.ec2.warm_pool.min_size * tier.node_pools[0].root_volume_gib
    assert "EBS gp3 throughput above baseline (warm pool volumes)" in lines
    # The GPU line counts running instances only: the model's autoscaling bounds.
    gpu = next(li for item, li in lines.items() if item.startswith("GPU pool"))
    assert (gpu.quantity, gpu.peak_quantity) == (1, 2)
    without = make_ec2({"ec2": {"warm_pool": {"enabled": False}}})
    assert not [li for li in monthly_cost(without).lines if "warm pool" in li.item]


def test_an_ec2_tier_counts_no_cluster_secrets_key() -> None:
    # The logs key and the alarm topic's key; `cluster.secrets_encryption` (default true) has no cluster.
    lines = monthly_cost(load_preset("ec2-poc")).lines
    (keys,) = [li for li in lines if li.item.startswith("KMS keys")]
    assert keys.quantity == 2
