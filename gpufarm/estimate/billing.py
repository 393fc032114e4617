"""Reservations and commitments as AWS bills them: Capacity Block durations, and Savings Plans and
Reserved Instances applied to the EC2 usage they cover.

Sources (read 2026-12-02):

* On-Demand Capacity Reservations "are charged at the equivalent On-Demand rate whether you run
  instances in reserved capacity or not"; a reservation for 20 instances running 15 bills 15
  active and 5 unused instances; "Billing discounts for Savings Plans and Regional Reserved
  Instances apply to Capacity Reservations"
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-pricing-billing.html).
* Capacity Blocks: "Reservation durations for 1-day increments up 14 days and 7-day increments up
  to 182 days total" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html);
  the reservation fee is "charged up front at the time you schedule the reservation" at the rate
  prevailing at purchase (https://aws.amazon.com/ec2/capacityblocks/pricing/).
* Savings Plans "apply to your usage after the Amazon EC2 Reserved Instances (RI) are applied";
  "EC2 Instance Savings Plans are applied before Compute Savings Plans"; they "continue to apply
  until there are no more remaining usages, or your commitment is exhausted. Any remaining usage
  is charged at the On-Demand rates" (https://docs.aws.amazon.com/savingsplans/latest/userguide/sp-applying.html).
  A commitment is dollars per hour at the plan's rates, so a plan of C $/h at a discount d covers
  up to C / (1 - d) $/h of on-demand-rate usage, and C is paid every hour whether used or not.

Not confirmed by a source read here, so not modelled: whether Savings Plans or Reserved
Instances discount Capacity Blocks (no commitment is applied to them) and spot (none is applied
to spot either; spot has its own price).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from gpufarm.estimate.report import EstimateError

CAPACITY_BLOCK_DAILY_UP_TO = 14
"""Capacity Blocks last 1 to 14 days in 1-day steps, ..."""

CAPACITY_BLOCK_WEEKLY_UP_TO = 182
"""... or 7-day steps up to 182 days."""


def check_capacity_block_days(days: int) -> None:
    """EstimateError unless `days` is a Capacity Block duration AWS sells (see the module docstring)."""
    if 1 <= days <= CAPACITY_BLOCK_DAILY_UP_TO or (
        CAPACITY_BLOCK_DAILY_UP_TO < days <= CAPACITY_BLOCK_WEEKLY_UP_TO and days % 7 == 0
    ):
        return
    raise EstimateError(
        f"capacity_block_days must be 1 to {CAPACITY_BLOCK_DAILY_UP_TO} days, or a multiple of 7 up to "
        f"{CAPACITY_BLOCK_WEEKLY_UP_TO} (the durations AWS sells), got {days}"
    )


class CommitmentKind(StrEnum):
    """A billing commitment bought outside the stack."""

    COMPUTE_SAVINGS_PLAN = "compute-savings-plan"
    EC2_INSTANCE_SAVINGS_PLAN = "ec2-instance-savings-plan"
    RESERVED_INSTANCE = "reserved-instance"


APPLY_ORDER = (
    CommitmentKind.RESERVED_INSTANCE,
    CommitmentKind.EC2_INSTANCE_SAVINGS_PLAN,
    CommitmentKind.COMPUTE_SAVINGS_PLAN,
)
"""The order AWS applies commitments to usage (Reserved Instances, then EC2 Instance Savings
Plans, then Compute Savings Plans)."""

TERMS = ("1y", "3y")

_KEYS: dict[CommitmentKind, tuple[str, ...]] = {
    CommitmentKind.COMPUTE_SAVINGS_PLAN: ("kind", "term", "discount", "usd_per_hour"),
    CommitmentKind.EC2_INSTANCE_SAVINGS_PLAN: ("kind", "term", "discount", "usd_per_hour", "family"),
    CommitmentKind.RESERVED_INSTANCE: ("kind", "term", "discount", "instance_type", "count"),
}


@dataclass(frozen=True, kw_only=True)
class Commitment:
    """A Savings Plan or Reserved Instance the account holds: not created by this stack.

    `discount` (0 to below 1) is the plan's or instance's rate off on-demand for the usage it
    covers (read it from the offering you bought: it depends on term and payment option).
    A Savings Plan commits `usd_per_hour` at its own rates: a Compute plan covers any EC2
    instance, an EC2 Instance plan the instance `family` ('p5'). A Reserved Instance covers
    `count` running instances of `instance_type`.
    """

    kind: CommitmentKind
    term: str
    discount: float
    usd_per_hour: float | None = None
    family: str | None = None
    instance_type: str | None = None
    count: int | None = None

    def covers(self, instance_type: str) -> bool:
        """True when the commitment may apply to an instance of `instance_type`."""
        if self.kind is CommitmentKind.RESERVED_INSTANCE:
            return instance_type == self.instance_type
        if self.kind is CommitmentKind.EC2_INSTANCE_SAVINGS_PLAN:
            return instance_type.split(".", 1)[0] == self.family
        return True

    def describe(self) -> str:
        """One line naming the commitment, as the bill's lines show it."""
        if self.kind is CommitmentKind.RESERVED_INSTANCE:
            what = f"Reserved Instance {self.count} x {self.instance_type}"
        elif self.kind is CommitmentKind.EC2_INSTANCE_SAVINGS_PLAN:
            what = f"EC2 Instance Savings Plan {self.family} ${self.usd_per_hour:g}/h"
        else:
            what = f"Compute Savings Plan ${self.usd_per_hour:g}/h"
        return f"{what}, {self.term}, {self.discount:.0%} off on-demand"

    def to_json(self) -> dict[str, object]:
        """The commitment as a JSON-ready mapping."""
        return {
            "kind": self.kind.value,
            "term": self.term,
            "discount": self.discount,
            "usd_per_hour": self.usd_per_hour,
            "family": self.family,
            "instance_type": self.instance_type,
            "count": self.count,
            "created_by_stack": False,
        }


def _number(text: str, key: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or math.isinf(value):
        raise EstimateError(f"commitment {spec!r}: {key} must be a number, got {text!r}")
    return value


def parse_commitment(spec: str) -> Commitment:
    """A commitment from `key=value` pairs separated by commas (the `--commitment` syntax).

    `kind` is one of :class:`CommitmentKind`; every kind needs `term` (1y or 3y) and `discount`;
    Savings Plans `usd_per_hour` (and `family` for an EC2 Instance plan), Reserved Instances
    `instance_type` and `count`. Raises EstimateError naming the first problem.
    """
    fields: dict[str, str] = {}
    for part in spec.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not key or not value:
            raise EstimateError(f"commitment {spec!r}: {part.strip()!r} is not key=value")
        if key in fields:
            raise EstimateError(f"commitment {spec!r}: {key} is given twice")
        fields[key] = value.strip()
    kinds = ", ".join(k.value for k in CommitmentKind)
    try:
        kind = CommitmentKind(fields.get("kind", ""))
    except ValueError:
        raise EstimateError(
            f"commitment {spec!r}: kind must be one of {kinds}, got {fields.get('kind', '(none)')!r}"
        ) from None
    allowed = _KEYS[kind]
    for key in fields:
        if key not in allowed:
            raise EstimateError(
                f"commitment {spec!r}: {key} does not apply to {kind.value} (keys: {', '.join(allowed)})"
            )
    for key in allowed:
        if key not in fields:
            raise EstimateError(f"commitment {spec!r}: {kind.value} needs {key}")
    if fields["term"] not in TERMS:
        raise EstimateError(f"commitment {spec!r}: term must be 1y or 3y, got {fields['term']!r}")
    discount = _number(fields["discount"], "discount", spec)
    if not 0 <= discount < 1:
        raise EstimateError(
            f"commitment {spec!r}: discount must be a share from 0 to below 1 (such as 0.4), got {discount:g}"
        )
    if kind is CommitmentKind.RESERVED_INSTANCE:
        count = _number(fields["count"], "count", spec)
        if count < 1 or count != int(count):
            raise EstimateError(
                f"commitment {spec!r}: count must be a whole number of instances, got {count:g}"
            )
        if "." not in fields["instance_type"]:
            raise EstimateError(
                f"commitment {spec!r}: instance_type must be an instance type such as p5.48xlarge, "
                f"got {fields['instance_type']!r}"
            )
        return Commitment(
            kind=kind,
            term=fields["term"],
            discount=discount,
            instance_type=fields["instance_type"],
            count=int(count),
        )
    usd = _number(fields["usd_per_hour"], "usd_per_hour", spec)
    if usd <= 0:
        raise EstimateError(f"commitment {spec!r}: usd_per_hour must be above 0, got {usd:g}")
    family = fields.get("family")
    if family is not None and "." in family:
        raise EstimateError(
            f"commitment {spec!r}: family must be an instance family such as p5, got {family!r}"
        )
    return Commitment(kind=kind, term=fields["term"], discount=discount, usd_per_hour=usd, family=family)


@dataclass(frozen=True, kw_only=True)
class Ec2Usage:
    """Instances billed at the on-demand rate (on-demand or in an ODCR) at one level of the month."""

    instance_type: str
    on_demand_per_hour: float
    instances: float


@dataclass(frozen=True, kw_only=True)
class Applied:
    """What one commitment costs an hour and the on-demand-rate usage it covers an hour."""

    commitment: Commitment
    fee_per_hour: float
    covered_per_hour: float


def apply_commitments(
    usage: list[Ec2Usage], commitments: list[Commitment], on_demand_per_hour: Callable[[str], float]
) -> list[Applied]:
    """Each commitment's hourly fee and the usage it covers, in :data:`APPLY_ORDER` (given order within
    a kind).

    A Reserved Instance covers up to `count` instances of its type and costs `count` x on-demand x
    (1 - discount) an hour, used or not. A Savings Plan costs `usd_per_hour` and covers up to
    `usd_per_hour / (1 - discount)` of the usage left after the commitments before it.
    `on_demand_per_hour` prices a Reserved Instance's type. Returns one :class:`Applied` per
    commitment, in the order given.
    """
    left = {u.instance_type: 0.0 for u in usage}
    for u in usage:
        left[u.instance_type] += u.instances * u.on_demand_per_hour  # $ of on-demand usage an hour
    done: dict[int, Applied] = {}
    for kind in APPLY_ORDER:
        for index, commitment in enumerate(commitments):
            if commitment.kind is not kind:
                continue
            if kind is CommitmentKind.RESERVED_INSTANCE:
                assert commitment.instance_type is not None and commitment.count is not None
                itype = commitment.instance_type
                od = on_demand_per_hour(itype)
                covered = min(left.get(itype, 0.0), commitment.count * od)
                if itype in left:
                    left[itype] -= covered
                fee = commitment.count * od * (1 - commitment.discount)
                done[index] = Applied(commitment=commitment, fee_per_hour=fee, covered_per_hour=covered)
                continue
            assert commitment.usd_per_hour is not None
            eligible = {t: v for t, v in left.items() if commitment.covers(t) and v > 0}
            total = sum(eligible.values())
            covered = min(total, commitment.usd_per_hour / (1 - commitment.discount))
            for itype, value in eligible.items():
                left[itype] -= covered * value / total
            done[index] = Applied(
                commitment=commitment, fee_per_hour=commitment.usd_per_hour, covered_per_hour=covered
            )
    return [done[i] for i in range(len(commitments))]
