"""The SageMaker endpoint quota check of a `provisioning: sagemaker` tier.

SageMaker limits the instances of each type an account's endpoints may run in a region: the
Service Quotas quota "<instance type> for endpoint usage" (service code `sagemaker`; codes in
gpufarm/data/sagemaker.yaml). The endpoint may grow to `sagemaker.max_instance_count` instances.
"""

from __future__ import annotations

from typing import Any

from gpufarm.aws.preflight.calls import _quota_value
from gpufarm.aws.preflight.results import Check, CheckResult, QuotaFigures, Status
from gpufarm.config.model import Provisioning, TierConfig
from gpufarm.core import sagemaker as sm

SERVICE_CODE = "sagemaker"


def check_sagemaker_quotas(tier: TierConfig, *, quotas: Any) -> list[CheckResult]:
    """One row: the endpoint quota of the tier's instance type against `max_instance_count`.

    FAIL below `max_instance_count`, else PASS. A type whose quota
    code gpufarm does not know is a WARN naming the quota to look up. `quotas` is a Service Quotas
    client. Nothing for a tier that is not `provisioning: sagemaker`.
    """
    if tier.cluster.provisioning is not Provisioning.SAGEMAKER:
        return []
    section = tier.sagemaker
    name = sm.endpoint_quota_name(section.instance_type)
    code = sm.endpoint_quota_code(section.instance_type)
    if code is None:
        return [
            CheckResult(
                check=Check.QUOTA,
                subject=name,
                status=Status.WARN,
                message="gpufarm knows no Service Quotas code for this quota, so it was not read",
                fix=f"look up '{name}' under Amazon SageMaker in the Service Quotas console; the tier "
                f"needs at least {section.max_instance_count}",
            )
        ]
    limit = int(_quota_value(quotas, code, service=SERVICE_CODE))
    most = section.max_instance_count
    figures = QuotaFigures(name=name, code=code, limit=limit, in_use=0, needed=most)
    request = (
        f"aws service-quotas request-service-quota-increase --service-code {SERVICE_CODE} "
        f"--quota-code {code} --desired-value {{}}"
    )
    if limit < most:
        return [
            CheckResult(
                check=Check.QUOTA,
                subject=name,
                status=Status.FAIL,
                message=f"{limit} instances, but the endpoint may run {most} (sagemaker.max_instance_count)",
                fix=request.format(most),
                quota=figures,
            )
        ]
    return [
        CheckResult(
            check=Check.QUOTA,
            subject=name,
            status=Status.PASS,
            message=f"{limit} instances cover the endpoint at its most ({most}, "
            "sagemaker.max_instance_count)",
            quota=figures,
        )
    ]
