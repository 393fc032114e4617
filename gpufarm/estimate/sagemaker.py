"""The cost line of a `provisioning: sagemaker` tier's endpoint: its instances, per instance-hour.

SageMaker bills a real-time endpoint per instance-hour of its instance type, whatever the
inference components on it do; managed instance scaling keeps between `min_instance_count` and
`max_instance_count` instances. The rate is the price table's `sagemaker.hosting_per_hour`
(dated, with its source); a type it lacks is a PriceNotFoundError, never a guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufarm.config.model import CapacityType, TierConfig
from gpufarm.core import sagemaker as sm
from gpufarm.pricing import PriceTable

if TYPE_CHECKING:
    from gpufarm.estimate.cost import _Lines


def sagemaker_wake_alarms(tier: TierConfig) -> int:
    """The CloudWatch alarms that wake scaled-to-zero inference components: one per such model."""
    return sum(1 for c in sm.components_of(tier) if c.scales_to_zero)


def sagemaker_endpoint_lines(tier: TierConfig, prices: PriceTable, out: _Lines) -> None:
    """Add the endpoint's instances to `out`: `min_instance_count` at floor, `max_instance_count`
    at peak, the tier's busy share between them expected. The gateway's CPU group is priced as an
    `ec2` tier's (`gpufarm.estimate.cost._direct_hosts`)."""
    section = tier.sagemaker
    rate = prices.sagemaker_hosting(section.instance_type)
    floor = section.min_instance_count
    out.add(
        item=f"SageMaker endpoint instances: {section.instance_type}",
        category="gpu",
        capacity_type=CapacityType.ON_DEMAND.value,
        quantity=floor,
        peak_quantity=section.max_instance_count,
        unit="instance-month",
        unit_price=rate * prices.hours_per_month,
        note=(
            "SageMaker hosting rate (not the EC2 rate): managed instance scaling keeps "
            f"{floor}-{section.max_instance_count} instances; Savings Plans and Reserved Instances "
            "for EC2 do not cover it"
        ),
        section="sagemaker",
    )
