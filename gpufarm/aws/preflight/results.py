"""Preflight's results: the status of a row, the checks, a row, the report, the error that stops a run."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# --------------------------------------------------------------------------- results


class Status(StrEnum):
    """Outcome of one check row."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    """Not run: the check needs an AWS account (offline, or no usable credentials)."""


class Check(StrEnum):
    """The checks preflight runs, in the order they are reported."""

    QUOTA = "vcpu-quota"
    OFFERING = "instance-offering"
    RESERVATION = "capacity-reservation"
    BEDROCK = "bedrock"
    KUBERNETES = "kubernetes-version"
    NETWORK_QUOTA = "network-quota"
    REGION = "region"
    PLACEHOLDER = "placeholder"
    BEDROCK_ACCESS = "bedrock-access"
    CERTIFICATE = "certificate"
    MODEL_BUCKET = "model-bucket"
    MODEL_REPLICA = "model-replica"
    HF_TOKEN = "hf-token-secret"
    CDK_BOOTSTRAP = "cdk-bootstrap"
    IMAGE_CACHE = "image-cache"


OFFLINE_CHECKS = (Check.REGION, Check.PLACEHOLDER)
"""Checks that read only the tier: they run without credentials."""

ACCOUNT_CHECKS = (
    Check.QUOTA,
    Check.OFFERING,
    Check.RESERVATION,
    Check.BEDROCK,
    Check.BEDROCK_ACCESS,
    Check.KUBERNETES,
    Check.NETWORK_QUOTA,
    Check.CERTIFICATE,
    Check.MODEL_BUCKET,
    Check.HF_TOKEN,
    Check.CDK_BOOTSTRAP,
    Check.IMAGE_CACHE,
)
"""Checks that call AWS: they need credentials for the account, in the order they run."""


@dataclass(frozen=True, kw_only=True)
class QuotaFigures:
    """The figures behind a network quota row: the quota, its value, and the tier's use of it."""

    name: str
    code: str
    """The Service Quotas code; '' for a fixed quota that Service Quotas does not list."""
    limit: int
    in_use: int
    needed: int

    def to_dict(self) -> dict[str, str | int]:
        """The figures as JSON-ready data."""
        return {
            "name": self.name,
            "code": self.code,
            "limit": self.limit,
            "in_use": self.in_use,
            "needed": self.needed,
        }


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """One row of the preflight table."""

    check: Check
    subject: str
    status: Status
    message: str
    fix: str = ""
    quota: QuotaFigures | None = None
    """The figures of a network quota row (None for the other checks)."""

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data (with `quota` for a network quota row)."""
        out: dict[str, Any] = {
            "check": self.check.value,
            "subject": self.subject,
            "status": self.status.value,
            "message": self.message,
            "fix": self.fix,
        }
        if self.quota is not None:
            out["quota"] = self.quota.to_dict()
        return out


@dataclass(frozen=True, kw_only=True)
class PreflightReport:
    """Every row of a preflight run, with where it ran."""

    tier: str
    region: str
    account: str
    results: tuple[CheckResult, ...]

    @property
    def failed(self) -> bool:
        """True when any row failed (the command then exits with status 1)."""
        return any(r.status is Status.FAIL for r in self.results)

    def counts(self) -> dict[str, int]:
        """Rows per status (`skip` only when some check did not run)."""
        counts = {s.value: sum(1 for r in self.results if r.status is s) for s in Status}
        if not counts[Status.SKIP]:
            del counts[Status.SKIP]
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "tier": self.tier,
            "region": self.region,
            "account": self.account,
            "ok": not self.failed,
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }


class PreflightError(Exception):
    """The checks could not run at all: no or expired credentials, or AWS unreachable."""
