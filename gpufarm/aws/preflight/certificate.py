"""The certificate check: the listener's ACM certificate exists, is issued, valid and in the region."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from gpufarm.aws.preflight.calls import _arn_region, _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import TierConfig

EXPIRY_WARN_DAYS = 30
"""A certificate that expires within this many days warns (ACM renews the certificates it issued)."""


def _row(status: Status, subject: str, message: str, fix: str = "") -> CheckResult:
    return CheckResult(check=Check.CERTIFICATE, subject=subject, status=status, message=message, fix=fix)


def check_certificate(tier: TierConfig, *, region: str, acm: Any, now: datetime) -> list[CheckResult]:
    """`ingress.certificate_arn` with ACM's DescribeCertificate: it exists, its status is ISSUED,
    it has not expired (warning within EXPIRY_WARN_DAYS), and it is in the tier's region.

    ACM certificates are regional: a load balancer uses a certificate of its own region
    (https://docs.aws.amazon.com/acm/latest/userguide/acm-regions.html).
    """
    from botocore.exceptions import ClientError

    arn = tier.ingress.certificate_arn
    if arn is None:
        return [_row(Status.PASS, "certificate", "the tier names no certificate (no TLS listener to check)")]
    subject = "ingress.certificate_arn"
    arn_region = _arn_region(arn)
    if arn_region and arn_region != region:
        return [
            _row(
                Status.FAIL,
                subject,
                f"the certificate is in {arn_region}; the load balancer in {region} can only use a "
                "certificate of its own region",
                f"request or import the certificate in {region} and set ingress.certificate_arn to it",
            )
        ]
    try:
        certificate = acm.describe_certificate(CertificateArn=arn)["Certificate"]
    except ClientError as exc:
        if _error_code(exc) not in {"ResourceNotFoundException", "InvalidArnException"}:
            raise
        return [
            _row(
                Status.FAIL,
                subject,
                f"ACM has no certificate {arn} in {region}",
                "request or import the certificate in ACM and set ingress.certificate_arn to its ARN",
            )
        ]
    status = str(certificate.get("Status", ""))
    domain = str(certificate.get("DomainName", ""))
    if status != "ISSUED":
        return [
            _row(
                Status.FAIL,
                subject,
                f"the certificate for {domain} is {status.lower().replace('_', ' ')}, not issued",
                "complete its validation (DNS or email) or issue a new certificate",
            )
        ]
    not_after = certificate.get("NotAfter")
    if isinstance(not_after, datetime):
        if not_after <= now:
            return [
                _row(
                    Status.FAIL,
                    subject,
                    f"the certificate for {domain} expired {not_after:%Y-%m-%d}",
                    "renew or replace it",
                )
            ]
        if not_after - now <= timedelta(days=EXPIRY_WARN_DAYS):
            return [
                _row(
                    Status.WARN,
                    subject,
                    f"the certificate for {domain} expires {not_after:%Y-%m-%d}",
                    "renew it (ACM renews certificates it issued; an imported one must be reimported)",
                )
            ]
    return [_row(Status.PASS, subject, f"issued for {domain} in {region}")]
