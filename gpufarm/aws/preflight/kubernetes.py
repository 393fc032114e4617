"""The Kubernetes version check: EKS supports the configured version."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from gpufarm.aws.preflight.reservations import _day
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import TierConfig
from gpufarm.eks_support import WARN_DAYS, support_status
from gpufarm.pricing import load_prices

# --------------------------------------------------------------------------- check: kubernetes


def _midnight(day: date | None) -> datetime | None:
    return datetime.combine(day, time(), UTC) if day is not None else None


def check_kubernetes_version(tier: TierConfig, *, region: str, eks: Any, now: datetime) -> list[CheckResult]:
    """EKS offers the configured Kubernetes version in standard support, not within 60 days of its
    end (that, and extended support, warn with the extended-support rate).

    The support dates come from EKS (DescribeClusterVersions); where EKS gives none, from
    gpufarm's support calendar (:mod:`gpufarm.eks_support`).
    """
    wanted = tier.cluster.kubernetes_version
    versions: list[dict[str, Any]] = []
    for page in eks.get_paginator("describe_cluster_versions").paginate(includeAll=True):
        versions.extend(dict(v) for v in page.get("clusterVersions", []))
    default = next((str(v["clusterVersion"]) for v in versions if v.get("defaultVersion")), None)
    fix_version = (
        f"set cluster.kubernetes_version to {default!r} (the EKS default)"
        if default
        else "set cluster.kubernetes_version to a version in standard support"
    )
    found = next((v for v in versions if str(v.get("clusterVersion")) == wanted), None)
    subject = f"Kubernetes {wanted}"
    if found is None:
        return [
            CheckResult(
                check=Check.KUBERNETES,
                subject=subject,
                status=Status.FAIL,
                message=f"EKS does not offer Kubernetes {wanted} in {region}",
                fix=fix_version,
            )
        ]
    status = str(found.get("versionStatus", ""))
    calendar = support_status(wanted, now.date())
    standard_end = found.get("endOfStandardSupportDate") or _midnight(calendar.standard_support_end)
    extended_end = found.get("endOfExtendedSupportDate") or _midnight(calendar.extended_support_end)
    eks_prices = load_prices().eks
    rates = (
        f"${eks_prices.extended_support_cluster_per_hour:.2f} instead of "
        f"${eks_prices.cluster_per_hour:.2f} per cluster hour"
    )
    if status == "STANDARD_SUPPORT":
        if isinstance(standard_end, datetime) and standard_end - now <= timedelta(days=WARN_DAYS):
            return [
                CheckResult(
                    check=Check.KUBERNETES,
                    subject=subject,
                    status=Status.WARN,
                    message=f"standard support ends {_day(standard_end)}; "
                    f"extended support then bills {rates}",
                    fix=f"plan the upgrade; {fix_version}",
                )
            ]
        return [
            CheckResult(
                check=Check.KUBERNETES,
                subject=subject,
                status=Status.PASS,
                message="in standard support"
                + (f" until {_day(standard_end)}" if isinstance(standard_end, datetime) else ""),
            )
        ]
    if status == "EXTENDED_SUPPORT":
        return [
            CheckResult(
                check=Check.KUBERNETES,
                subject=subject,
                status=Status.WARN,
                message="in extended support"
                + (f" until {_day(extended_end)}" if isinstance(extended_end, datetime) else "")
                + f", billed at {rates}",
                fix=fix_version,
            )
        ]
    return [
        CheckResult(
            check=Check.KUBERNETES,
            subject=subject,
            status=Status.FAIL,
            message=f"EKS no longer supports Kubernetes {wanted} ({status.lower() or 'unsupported'})",
            fix=fix_version,
        )
    ]
