"""Reservations and commitments as AWS bills them, and the floor / expected / ceiling figures.

Expected values are worked out here from the preset YAML, the table's unit prices and the billing
rules cited in gpufarm/estimate/billing.py, not by calling the estimate's helpers.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError
from gpufarm.estimate import CostEstimate, CostLine, EstimateError, monthly_cost
from gpufarm.estimate.billing import (
    Commitment,
    CommitmentKind,
    Ec2Usage,
    apply_commitments,
    parse_commitment,
)
from gpufarm.estimate.cost import tier_busy_share
from gpufarm.pricing import PriceNotFoundError, load_prices

from .factories import (
    enterprise_document,
    enterprise_part,
    make_enterprise,
    make_tier,
)

PRICES = load_prices()
H = 730
P5 = 55.04  # p5.48xlarge on-demand, $/h (the table)
P5_BLOCK = 39.33  # p5.48xlarge Capacity Block, $/h (the table)
M7I = 0.4032  # m7i.2xlarge, the enterprise system nodes


def line(estimate: CostEstimate, item: str) -> CostLine:
    """The line named `item`, else the one line whose item starts with it."""
    found = [x for x in estimate.lines if x.item == item] or [
        x for x in estimate.lines if x.item.startswith(item)
    ]
    assert len(found) == 1, [x.item for x in estimate.lines]
    return found[0]


def multinode(**capacity: Any) -> dict[str, Any]:
    """The enterprise h100-multinode node group (2 x p5.48xlarge) with `capacity` replaced."""
    return enterprise_part("node_groups", 1, capacity=capacity)


# --------------------------------------------------------------------------- reservations


def test_a_reservation_larger_than_its_group_bills_the_spare_instances() -> None:
    # 3 reserved, 2 running: AWS bills 2 active and 1 unused instance, both at on-demand.
    estimate = monthly_cost(make_enterprise(multinode(kind="create", instance_count=3)))
    used = line(estimate, "GPU node group h100-multinode: p5.48xlarge")
    spare = line(estimate, "GPU node group h100-multinode: p5.48xlarge reserved, unused")
    assert (used.quantity, used.monthly_usd) == (2, pytest.approx(2 * P5 * H))
    assert (spare.capacity_type, spare.quantity, spare.monthly_usd, spare.peak_monthly_usd) == (
        "reserved",
        1,
        pytest.approx(P5 * H),
        pytest.approx(P5 * H),
    )
    plain = monthly_cost(make_enterprise())
    assert estimate.total_usd - plain.total_usd == pytest.approx(P5 * H)  # $40,179.20 a month


def test_spare_reserved_instances_are_not_part_of_the_all_on_demand_capacity() -> None:
    # Bought on demand, nobody would pay for an instance that runs nothing: the spare reservation
    # is what reserving costs, so it is a loss against all-on-demand.
    estimate = monthly_cost(make_enterprise(multinode(kind="create", instance_count=3)))
    plain = monthly_cost(make_enterprise())
    assert estimate.all_on_demand_at("floor") == pytest.approx(plain.all_on_demand_at("floor"))
    assert estimate.saving_at("floor") == pytest.approx(1 - estimate.total_usd / plain.total_usd)
    assert estimate.saving_at("floor") < 0


def test_a_reservation_the_size_of_its_group_has_no_unused_line() -> None:
    estimate = monthly_cost(make_enterprise())
    assert not [x for x in estimate.lines if "unused" in x.item]


def test_existing_reservations_say_their_spare_instances_are_not_counted() -> None:
    estimate = monthly_cost(make_enterprise(multinode(kind="odcr", reservation_ids=["cr-0123456789abcdef0"])))
    assert any(
        n.startswith("Existing On-Demand Capacity Reservations (h100-multinode)") for n in estimate.notes
    )


def test_capacity_block_bills_its_own_rate_all_month_by_default() -> None:
    estimate = monthly_cost(
        make_enterprise(multinode(kind="capacity-block", reservation_ids=["cr-0123456789abcdef0"]))
    )
    got = line(estimate, "GPU node group h100-multinode: p5.48xlarge (Capacity Block)")
    assert (got.quantity, got.unit_price, got.monthly_usd) == (
        2,
        pytest.approx(P5_BLOCK * H),
        pytest.approx(2 * P5_BLOCK * H),
    )
    # Not on-demand x (1 - a discount): the on-demand comparison is the on-demand rate.
    assert got.on_demand_at("floor") == pytest.approx(2 * P5 * H)


def test_capacity_block_of_some_days_bills_those_days() -> None:
    tier = make_enterprise(multinode(kind="capacity-block", reservation_ids=["cr-0123456789abcdef0"]))
    estimate = monthly_cost(tier, capacity_block_days=7)
    got = line(estimate, "GPU node group h100-multinode: p5.48xlarge (Capacity Block)")
    assert (got.monthly_usd, got.on_demand_at("floor")) == (
        pytest.approx(2 * P5_BLOCK * 7 * 24),
        pytest.approx(2 * P5 * 7 * 24),
    )
    assert "a 7-day block (168 h of the month)" in got.note


def test_capacity_block_longer_than_a_month_bills_a_month_of_it() -> None:
    tier = make_enterprise(multinode(kind="capacity-block", reservation_ids=["cr-0123456789abcdef0"]))
    got = line(monthly_cost(tier, capacity_block_days=182), "GPU node group h100-multinode")
    assert got.monthly_usd == pytest.approx(2 * P5_BLOCK * H)


def test_capacity_block_of_a_type_without_a_rate_is_reported() -> None:
    with pytest.raises(PriceNotFoundError) as raised:
        PRICES.capacity_block("p4d.24xlarge")
    assert str(raised.value) == (
        "no EC2 Capacity Block price for 'p4d.24xlarge' in the price table (add it under "
        "capacity_blocks.per_instance_hour in a --prices file, at the rate you bought the block at)"
    )


def test_capacity_block_rate_is_sourced_and_marked_as_changing() -> None:
    section = PRICES.capacity_blocks
    assert "aws.amazon.com/ec2/capacityblocks/pricing" in section.source
    assert "capacity_blocks.p5.48xlarge" in PRICES.estimated_figures()


def test_no_commitment_means_reserved_capacity_at_on_demand_and_says_so() -> None:
    estimate = monthly_cost(make_enterprise())
    assert line(estimate, "GPU node group h100-base").monthly_usd == pytest.approx(P5 * H)
    assert any(n.startswith("No commitment applied") for n in estimate.notes)


# --------------------------------------------------------------------------- commitments


def usage(**instances: float) -> list[Ec2Usage]:
    rates = {"p5.48xlarge": P5, "m7i.2xlarge": M7I}
    return [
        Ec2Usage(
            instance_type=t.replace("_", "."), on_demand_per_hour=rates[t.replace("_", ".")], instances=n
        )
        for t, n in instances.items()
    ]


def test_savings_plan_covers_its_commitment_over_one_minus_the_discount() -> None:
    plan = parse_commitment("kind=ec2-instance-savings-plan,family=p5,usd_per_hour=30,discount=0.4,term=3y")
    (got,) = apply_commitments(usage(p5_48xlarge=3), [plan], PRICES.on_demand)
    assert (got.fee_per_hour, got.covered_per_hour) == (30, pytest.approx(50))


def test_savings_plan_larger_than_the_usage_is_paid_in_full() -> None:
    plan = parse_commitment("kind=compute-savings-plan,usd_per_hour=100,discount=0.3,term=1y")
    (got,) = apply_commitments(usage(p5_48xlarge=1), [plan], PRICES.on_demand)
    assert (got.fee_per_hour, got.covered_per_hour) == (100, pytest.approx(P5))


def test_ec2_instance_plan_covers_only_its_family() -> None:
    plan = parse_commitment("kind=ec2-instance-savings-plan,family=p5,usd_per_hour=100,discount=0.4,term=1y")
    (got,) = apply_commitments(usage(p5_48xlarge=1, m7i_2xlarge=3), [plan], PRICES.on_demand)
    assert got.covered_per_hour == pytest.approx(P5)


def test_reserved_instances_apply_first_then_instance_plans_then_compute_plans() -> None:
    compute = parse_commitment("kind=compute-savings-plan,usd_per_hour=100,discount=0.2,term=1y")
    instance = parse_commitment(
        "kind=ec2-instance-savings-plan,family=p5,usd_per_hour=30,discount=0.4,term=1y"
    )
    ri = parse_commitment("kind=reserved-instance,instance_type=p5.48xlarge,count=1,discount=0.35,term=1y")
    # Given in the wrong order on purpose; 3 x p5 = $165.12/h of usage.
    got = apply_commitments(usage(p5_48xlarge=3), [compute, instance, ri], PRICES.on_demand)
    by_kind = {a.commitment.kind: a for a in got}
    assert by_kind[CommitmentKind.RESERVED_INSTANCE].covered_per_hour == pytest.approx(P5)
    assert by_kind[CommitmentKind.RESERVED_INSTANCE].fee_per_hour == pytest.approx(P5 * 0.65)
    assert by_kind[CommitmentKind.EC2_INSTANCE_SAVINGS_PLAN].covered_per_hour == pytest.approx(50)
    assert by_kind[CommitmentKind.COMPUTE_SAVINGS_PLAN].covered_per_hour == pytest.approx(3 * P5 - P5 - 50)
    assert [a.commitment for a in got] == [compute, instance, ri]  # reported in the order given


def test_reserved_instance_without_running_instances_still_bills() -> None:
    ri = parse_commitment("kind=reserved-instance,instance_type=p5.48xlarge,count=2,discount=0.35,term=1y")
    (got,) = apply_commitments(usage(m7i_2xlarge=3), [ri], PRICES.on_demand)
    assert (got.covered_per_hour, got.fee_per_hour) == (0, pytest.approx(2 * P5 * 0.65))


def test_enterprise_commitment_lines_are_marked_not_created_by_the_stack() -> None:
    plan = parse_commitment("kind=ec2-instance-savings-plan,family=p5,usd_per_hour=30,discount=0.4,term=3y")
    estimate = monthly_cost(make_enterprise(), commitments=[plan])
    fee = line(estimate, "Commitment: EC2 Instance Savings Plan p5 $30/h, 3y, 40% off on-demand")
    covered = line(estimate, "Usage covered by the commitment")
    assert (fee.monthly_usd, fee.category, covered.monthly_usd) == (
        pytest.approx(30 * H),
        "commitment",
        pytest.approx(-50 * H),
    )
    assert fee.note.startswith("not created by this stack") and covered.note.startswith(
        "not created by this stack"
    )
    # $30/h buys $50/h of p5 usage: $20/h saved, against the same all-on-demand capacity.
    plain = monthly_cost(make_enterprise())
    assert estimate.total_usd == pytest.approx(plain.total_usd - 20 * H)
    assert estimate.all_on_demand_at("floor") == pytest.approx(plain.all_on_demand_at("floor"))


def test_commitments_cover_the_ceiling_usage_too() -> None:
    # At the ceiling the 70B bursts to one on-demand p5 beyond the 3 reserved: $220.16/h of p5.
    plan = parse_commitment("kind=ec2-instance-savings-plan,family=p5,usd_per_hour=150,discount=0.4,term=3y")
    covered = line(monthly_cost(make_enterprise(), commitments=[plan]), "Usage covered by the commitment")
    assert (covered.monthly_usd, covered.peak_monthly_usd) == (
        pytest.approx(-3 * P5 * H),
        pytest.approx(-4 * P5 * H),
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "kind=compute-savings-plan",
            "commitment 'kind=compute-savings-plan': compute-savings-plan needs term",
        ),
        ("kind", "commitment 'kind': 'kind' is not key=value"),
        (
            "kind=ri,term=1y",
            "commitment 'kind=ri,term=1y': kind must be one of compute-savings-plan, "
            "ec2-instance-savings-plan, reserved-instance, got 'ri'",
        ),
        (
            "term=1y",
            "commitment 'term=1y': kind must be one of compute-savings-plan, ec2-instance-savings-plan, "
            "reserved-instance, got '(none)'",
        ),
        (
            "kind=compute-savings-plan,kind=compute-savings-plan",
            "commitment 'kind=compute-savings-plan,kind=compute-savings-plan': kind is given twice",
        ),
        (
            "kind=compute-savings-plan,family=p5,term=1y,discount=0.2,usd_per_hour=5",
            "commitment 'kind=compute-savings-plan,family=p5,term=1y,discount=0.2,usd_per_hour=5': family "
            "does not apply to compute-savings-plan (keys: kind, term, discount, usd_per_hour)",
        ),
        (
            "kind=compute-savings-plan,term=2y,discount=0.2,usd_per_hour=5",
            "commitment 'kind=compute-savings-plan,term=2y,discount=0.2,usd_per_hour=5': term must be "
            "1y or 3y, got '2y'",
        ),
        (
            "kind=compute-savings-plan,term=1y,discount=1,usd_per_hour=5",
            "commitment 'kind=compute-savings-plan,term=1y,discount=1,usd_per_hour=5': discount must be "
            "a share from 0 to below 1 (such as 0.4), got 1",
        ),
        (
            "kind=compute-savings-plan,term=1y,discount=lots,usd_per_hour=5",
            "commitment 'kind=compute-savings-plan,term=1y,discount=lots,usd_per_hour=5': discount must "
            "be a number, got 'lots'",
        ),
        (
            "kind=compute-savings-plan,term=1y,discount=0.2,usd_per_hour=0",
            "commitment 'kind=compute-savings-plan,term=1y,discount=0.2,usd_per_hour=0': usd_per_hour "
            "must be above 0, got 0",
        ),
        (
            "kind=ec2-instance-savings-plan,term=1y,discount=0.2,usd_per_hour=5,family=p5.48xlarge",
            "commitment 'kind=ec2-instance-savings-plan,term=1y,discount=0.2,usd_per_hour=5,"
            "family=p5.48xlarge': family must be an instance family such as p5, got 'p5.48xlarge'",
        ),
        (
            "kind=reserved-instance,term=1y,discount=0.3,instance_type=p5.48xlarge,count=1.5",
            "commitment 'kind=reserved-instance,term=1y,discount=0.3,instance_type=p5.48xlarge,count=1.5': "
            "count must be a whole number of instances, got 1.5",
        ),
        (
            "kind=reserved-instance,term=1y,discount=0.3,instance_type=p5,count=1",
            "commitment 'kind=reserved-instance,term=1y,discount=0.3,instance_type=p5,count=1': "
            "instance_type must be an instance type such as p5.48xlarge, got 'p5'",
        ),
    ],
)
def test_invalid_commitment(spec: str, message: str) -> None:
    with pytest.raises(EstimateError) as raised:
        parse_commitment(spec)
    assert str(raised.value) == message


def test_commitment_round_trip() -> None:
    got = parse_commitment(
        "kind=reserved-instance, instance_type=p5.48xlarge, count=2, discount=0.35, term=3y"
    )
    assert got == Commitment(
        kind=CommitmentKind.RESERVED_INSTANCE,
        term="3y",
        discount=0.35,
        instance_type="p5.48xlarge",
        count=2,
    )
    assert got.describe() == "Reserved Instance 2 x p5.48xlarge, 3y, 35% off on-demand"


# --------------------------------------------------------------------------- floor, expected, ceiling


def test_expected_follows_each_models_busy_share() -> None:
    # The 70B is the only model bursting on h100-burst: 0 instances at floor, 1 at ceiling.
    models = enterprise_document()["models"]
    models[1]["autoscaling"] = {**models[1]["autoscaling"], "expected_busy_share": 0.25}
    estimate = monthly_cost(make_enterprise({"models": models}))
    burst = line(estimate, "GPU pool h100-burst")
    assert (burst.quantity, burst.expected, burst.peak_quantity) == (0, 0.25, 1)
    assert burst.expected_monthly_usd == pytest.approx(0.25 * P5 * H)


def test_busy_share_argument_replaces_every_models() -> None:
    estimate = monthly_cost(make_enterprise(), busy_share=1.0)
    assert estimate.expected_total_usd == pytest.approx(estimate.peak_total_usd)
    estimate = monthly_cost(make_enterprise(), busy_share=0.0)
    assert estimate.expected_total_usd == pytest.approx(estimate.total_usd)


def test_fixed_replicas_have_no_spread() -> None:
    estimate = monthly_cost(make_tier())
    assert estimate.total_usd == estimate.expected_total_usd == estimate.peak_total_usd


def test_enterprise_preset_saving_is_spot_and_scale_down_only() -> None:
    # As shipped: ODCRs at on-demand, no commitment. At the floor every instance runs on demand or
    # in an ODCR (no spot runs: the batch model scales to zero), so nothing is saved; at the
    # ceiling the spot background pool is the only saving.
    estimate = monthly_cost(make_enterprise())
    assert estimate.saving_at("floor") == pytest.approx(0.0)
    spot = line(estimate, "GPU pool background")
    saved = spot.on_demand_at("ceiling") - spot.peak_monthly_usd
    assert estimate.all_on_demand_at("ceiling") - estimate.peak_total_usd == pytest.approx(saved)
    assert estimate.saving_at("ceiling") > 0


def test_json_carries_the_three_figures() -> None:
    doc = monthly_cost(make_enterprise()).to_json()
    assert set(doc["figures"]) == {"floor", "expected", "ceiling"}
    assert set(doc["figures"]["expected"]) == {"total_usd", "all_on_demand_usd", "saving_share"}
    assert doc["figures"]["floor"]["total_usd"] == doc["total_usd"]
    assert doc["figures"]["ceiling"]["total_usd"] == doc["peak_total_usd"]


# --------------------------------------------------------------------------- the config field


@pytest.mark.parametrize(
    ("share", "message"),
    [
        (1.5, "models[1].autoscaling.expected_busy_share: must be <= 1.0, got 1.5"),
        (-0.1, "models[1].autoscaling.expected_busy_share: must be >= 0.0, got -0.1"),
    ],
)
def test_invalid_expected_busy_share(share: float, message: str) -> None:
    scaling = {**enterprise_document()["models"][1]["autoscaling"], "expected_busy_share": share}
    with pytest.raises(ConfigError) as raised:
        make_enterprise(enterprise_part("models", 1, autoscaling=scaling))
    assert [str(i) for i in raised.value.issues] == [message]


def test_expected_busy_share_defaults_to_one_half() -> None:
    tier = make_enterprise()
    assert "expected_busy_share" not in enterprise_document()["models"][1]["autoscaling"]
    assert tier.models[1].autoscaling is not None
    assert tier.models[1].autoscaling.expected_busy_share == 0.5


def test_prefill_pods_take_their_own_busy_share() -> None:
    # The 70B's decode pods add 12 GPUs from floor to ceiling (1 -> 4 replicas of 4) at share 0;
    # its prefill pods add 8 (1 -> 3 pods of 4) at share 1; the batch model adds 8 (0 -> 4 of 2)
    # at the default 0.5. The 405B runs fixed replicas and weighs nothing.
    models = enterprise_document()["models"]
    models[1]["autoscaling"] = {**models[1]["autoscaling"], "expected_busy_share": 0.0}
    models[1]["prefill_decode"] = {
        "prefill_autoscaling": {
            "min_replicas": 1,
            "max_replicas": 3,
            "queue_target": 4,
            "expected_busy_share": 1.0,
        }
    }
    tier = make_enterprise({"ingress": {"target_optimizer": {"enabled": False}}}, {"models": models})
    assert tier_busy_share(tier) == pytest.approx((12 * 0.0 + 8 * 1.0 + 8 * 0.5) / (12 + 8 + 8))
