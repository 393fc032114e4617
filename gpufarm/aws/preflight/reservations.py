"""The capacity reservation check: referenced ODCRs and Capacity Blocks exist, are active and
match their node groups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gpufarm.aws.preflight.calls import _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import TierConfig
from gpufarm.config.model import ReservationKind
from gpufarm.core.pools import pool_instance_types

# --------------------------------------------------------------------------- check: reservations


@dataclass(frozen=True, kw_only=True)
class _Reference:
    reservation_id: str
    owner: str
    instance_types: tuple[str, ...]
    zones: tuple[str, ...]
    kind: ReservationKind | None = None
    nodes: int = 0
    group: str | None = None


def _references(tier: TierConfig) -> list[_Reference]:
    refs = []
    for group in tier.node_groups:
        for rid in group.capacity.reservation_ids:
            refs.append(
                _Reference(
                    reservation_id=rid,
                    owner=f"node group {group.name}",
                    instance_types=(group.instance_type,),
                    zones=(group.availability_zone,),
                    kind=group.capacity.kind,
                    nodes=group.nodes,
                    group=group.name,
                )
            )
    for pool in tier.node_pools:
        for rid in pool.reservation_ids:
            refs.append(
                _Reference(
                    reservation_id=rid,
                    owner=f"pool {pool.name}",
                    instance_types=tuple(pool_instance_types(pool)),
                    zones=tuple(tier.environment.availability_zones),
                )
            )
    return refs


def _describe_reservation(ec2: Any, reservation_id: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        response = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    except ClientError as exc:
        if _error_code(exc).startswith(("InvalidCapacityReservationId", "InvalidReservationID")):
            return None
        raise
    found = response.get("CapacityReservations", [])
    return dict(found[0]) if found else None


def _day(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def check_reservations(tier: TierConfig, *, region: str, ec2: Any, now: datetime) -> list[CheckResult]:
    """One row per referenced reservation: exists, active now, type/AZ/count match, not ending soon."""
    rows = []
    totals: dict[str, int] = defaultdict(int)
    refs = _references(tier)
    if not refs:
        created = [g.name for g in tier.node_groups if g.capacity.kind is ReservationKind.CREATE]
        return [
            CheckResult(
                check=Check.RESERVATION,
                subject="reservations",
                status=Status.PASS,
                message="the tier references no existing reservation"
                + (f" (node groups {', '.join(created)} create theirs at deploy)" if created else ""),
            )
        ]
    for ref in refs:
        found = _describe_reservation(ec2, ref.reservation_id)
        subject = f"{ref.reservation_id} ({ref.owner})"
        if found is None:
            rows.append(
                CheckResult(
                    check=Check.RESERVATION,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"{ref.reservation_id} does not exist in {region} or is not shared with "
                    "this account",
                    fix="check the reservation ID and region, or share the reservation with this account "
                    "(AWS RAM)",
                )
            )
            continue
        totals[ref.group or ""] += int(found.get("TotalInstanceCount", 0))
        rows.append(_reservation_row(ref, found, subject=subject, now=now))
    for group in tier.node_groups:
        kind = group.capacity.kind
        if kind is ReservationKind.CREATE or group.name not in totals:
            continue
        if totals[group.name] < group.nodes:
            rows.append(
                CheckResult(
                    check=Check.RESERVATION,
                    subject=f"node group {group.name}",
                    status=Status.FAIL,
                    message=f"its reservations hold {totals[group.name]} instance(s), the group runs "
                    f"{group.nodes}",
                    fix=f"reserve {group.nodes - totals[group.name]} more {group.instance_type} in "
                    f"{group.availability_zone}, or lower node_groups '{group.name}'.nodes",
                )
            )
    return rows


def _reservation_row(
    ref: _Reference, found: Mapping[str, Any], *, subject: str, now: datetime
) -> CheckResult:
    problems: list[tuple[str, str]] = []
    state = str(found.get("State", ""))
    rtype = str(found.get("ReservationType", "default"))
    start = found.get("StartDate")
    end = found.get("EndDate")
    is_block = rtype == "capacity-block"
    if ref.kind is ReservationKind.CAPACITY_BLOCK and not is_block:
        problems.append(
            (
                "is an On-Demand Capacity Reservation, not a Capacity Block",
                f"set node_groups '{ref.group}'.capacity.kind to 'odcr'",
            )
        )
    if ref.kind is ReservationKind.ODCR and is_block:
        problems.append(
            ("is a Capacity Block", f"set node_groups '{ref.group}'.capacity.kind to 'capacity-block'")
        )
    if state == "expired" or (isinstance(end, datetime) and end <= now):
        when = f" on {_day(end)}" if isinstance(end, datetime) else ""
        problems.append((f"expired{when}", "buy or create a new reservation and reference its ID"))
    elif is_block and (state == "scheduled" or (isinstance(start, datetime) and start > now)):
        when = _day(start) if isinstance(start, datetime) else "later"
        problems.append(
            (
                f"does not cover now: the Capacity Block starts {when}",
                "deploy the node group once the block is active, or use a block that covers now",
            )
        )
    elif state != "active":
        problems.append((f"is {state or 'in an unknown state'}, not active", "use an active reservation"))
    itype = str(found.get("InstanceType", ""))
    if itype not in ref.instance_types:
        allowed = ", ".join(ref.instance_types) if len(ref.instance_types) <= 4 else "the pool's types"
        problems.append(
            (f"reserves {itype}, not {allowed}", "reference a reservation of the same instance type")
        )
    zone = str(found.get("AvailabilityZone", ""))
    if zone not in ref.zones:
        problems.append(
            (
                f"is in {zone}, not {' or '.join(ref.zones)}",
                f"reference a reservation in {' or '.join(ref.zones)}"
                + (f", or move node_groups '{ref.group}' to {zone}" if ref.group else ""),
            )
        )
    if problems:
        return CheckResult(
            check=Check.RESERVATION,
            subject=subject,
            status=Status.FAIL,
            message="; ".join(p for p, _ in problems),
            fix="; ".join(dict.fromkeys(f for _, f in problems)),
        )
    total = int(found.get("TotalInstanceCount", 0))
    available = int(found.get("AvailableInstanceCount", 0))
    what = "Capacity Block" if is_block else "reservation"
    described = f"active {what}: {total} x {itype} in {zone}"
    if isinstance(end, datetime) and end - now < timedelta(days=7):
        return CheckResult(
            check=Check.RESERVATION,
            subject=subject,
            status=Status.WARN,
            message=f"{described}, ends {_day(end)}"
            + ("; EC2 terminates its instances 30 minutes before" if is_block else ""),
            fix="extend it or plan the replacement capacity before it ends",
        )
    if ref.nodes and available < ref.nodes:
        return CheckResult(
            check=Check.RESERVATION,
            subject=subject,
            status=Status.WARN,
            message=f"{described}, only {available} available (other instances use it)",
            fix="free the reserved capacity the other instances use, or reserve more",
        )
    return CheckResult(check=Check.RESERVATION, subject=subject, status=Status.PASS, message=described)
