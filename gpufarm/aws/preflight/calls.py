"""AWS calls shared by the checks: credential and access-denied errors, the guard that turns a
denied API into a warning row, DescribeInstanceTypes and DescribeInstanceTypeOfferings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gpufarm.aws.preflight.results import Check, CheckResult, PreflightError, Status
from gpufarm.core.instances import gpus_in

# --------------------------------------------------------------------------- AWS plumbing

_CREDENTIAL_ERROR_CODES = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "AuthFailure",
    }
)
_ACCESS_DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess"}
)

CREDENTIALS_HELP = (
    "configure credentials for the account (aws configure, AWS_PROFILE, or aws sso login) and try again"
)


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _arn_region(arn: str) -> str:
    """The region field of an ARN (arn:partition:service:region:...), "" when it has none."""
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 else ""


def _error_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Message", "")) or str(exc)
    return str(exc)


def _fatal(exc: BaseException, *, connectivity: bool = False) -> PreflightError | None:
    """A PreflightError when `exc` means no check can run: credentials, or (with `connectivity`,
    for the first call) an AWS endpoint that cannot be reached. Later, an unreachable endpoint
    (a service the region does not offer) only stops its own check."""
    from botocore import exceptions as boto_errors

    if isinstance(exc, boto_errors.ClientError):
        if _error_code(exc) in _CREDENTIAL_ERROR_CODES:
            return PreflightError(f"AWS rejected the credentials: {_error_message(exc)}; {CREDENTIALS_HELP}")
        return None
    if isinstance(
        exc,
        boto_errors.NoCredentialsError
        | boto_errors.PartialCredentialsError
        | boto_errors.CredentialRetrievalError
        | boto_errors.TokenRetrievalError
        | boto_errors.SSOError
        | boto_errors.ProfileNotFound,
    ):
        return PreflightError(f"no usable AWS credentials ({exc}); {CREDENTIALS_HELP}")
    if connectivity and isinstance(
        exc, boto_errors.EndpointConnectionError | boto_errors.ConnectTimeoutError
    ):
        return PreflightError(f"cannot reach AWS: {exc}")
    return None


_CHECK_ACTIONS: dict[Check, str] = {
    Check.QUOTA: "servicequotas:GetServiceQuota, servicequotas:GetAWSDefaultServiceQuota, "
    "ec2:DescribeInstanceTypes",
    Check.OFFERING: "ec2:DescribeInstanceTypeOfferings, ec2:DescribeInstanceTypes",
    Check.RESERVATION: "ec2:DescribeCapacityReservations",
    Check.BEDROCK: "bedrock:ListFoundationModels, bedrock:GetInferenceProfile, "
    "bedrock:GetProvisionedModelThroughput",
    Check.KUBERNETES: "eks:DescribeClusterVersions",
    Check.NETWORK_QUOTA: "servicequotas:GetServiceQuota, servicequotas:GetAWSDefaultServiceQuota, "
    "ec2:DescribeAddresses, ec2:DescribeVpcs, elasticloadbalancing:DescribeTargetGroups",
    Check.REGION: "sts:GetCallerIdentity",
    Check.BEDROCK_ACCESS: "bedrock:GetFoundationModelAvailability",
    Check.CERTIFICATE: "acm:DescribeCertificate",
    Check.MODEL_BUCKET: "s3:ListBucket, s3:GetBucketLocation",
    Check.HF_TOKEN: "secretsmanager:DescribeSecret",
    Check.CDK_BOOTSTRAP: "ssm:GetParameter",
}


def _guarded(check: Check, run: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    """Run one check; an AWS error other than credentials becomes a single warning row."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return run()
    except (ClientError, BotoCoreError) as exc:
        fatal = _fatal(exc)
        if fatal is not None:
            raise fatal from None
        code = _error_code(exc)
        if code in _ACCESS_DENIED_CODES:
            return [
                CheckResult(
                    check=check,
                    subject="permissions",
                    status=Status.WARN,
                    message=f"could not check: access denied ({_error_message(exc)})",
                    fix=f"allow {_CHECK_ACTIONS[check]} to the caller",
                )
            ]
        return [
            CheckResult(
                check=check,
                subject="aws error",
                status=Status.WARN,
                message=f"could not check: {code or type(exc).__name__}: {_error_message(exc)}",
                fix="run preflight again; if it persists, check the AWS service health for the region",
            )
        ]


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True, kw_only=True)
class InstanceInfo:
    """What EC2 says about an instance type (from DescribeInstanceTypes)."""

    instance_type: str
    vcpus: int
    memory_gib: float
    gpus: int


def describe_instance_types(ec2: Any, instance_types: list[str]) -> dict[str, InstanceInfo]:
    """vCPUs, memory and GPUs of the given types; types the region does not have are left out."""
    out: dict[str, InstanceInfo] = {}
    paginator = ec2.get_paginator("describe_instance_types")
    for chunk in _chunks(instance_types, 100):
        for page in paginator.paginate(Filters=[{"Name": "instance-type", "Values": chunk}]):
            for item in page.get("InstanceTypes", []):
                name = str(item["InstanceType"])
                gpus = sum(int(g.get("Count", 0)) for g in item.get("GpuInfo", {}).get("Gpus", []))
                out[name] = InstanceInfo(
                    instance_type=name,
                    vcpus=int(item["VCpuInfo"]["DefaultVCpus"]),
                    memory_gib=int(item["MemoryInfo"]["SizeInMiB"]) / 1024,
                    gpus=gpus or (gpus_in(name) or 0),
                )
    return out


def describe_offerings(ec2: Any, instance_types: list[str], zones: list[str]) -> dict[str, set[str]]:
    """Instance type -> the zones (of `zones`) that offer it."""
    out: dict[str, set[str]] = {t: set() for t in instance_types}
    paginator = ec2.get_paginator("describe_instance_type_offerings")
    for chunk in _chunks(instance_types, 100):
        pages = paginator.paginate(
            LocationType="availability-zone",
            Filters=[
                {"Name": "location", "Values": zones},
                {"Name": "instance-type", "Values": chunk},
            ],
        )
        for page in pages:
            for offer in page.get("InstanceTypeOfferings", []):
                out.setdefault(str(offer["InstanceType"]), set()).add(str(offer["Location"]))
    return out


def _quota_value(quotas: Any, code: str, service: str = "ec2") -> float:
    """The applied value of a quota (`GetServiceQuota`), else its AWS default
    (`GetAWSDefaultServiceQuota`, when the account has no applied value)."""
    from botocore.exceptions import ClientError

    try:
        response = quotas.get_service_quota(ServiceCode=service, QuotaCode=code)
    except ClientError as exc:
        if _error_code(exc) != "NoSuchResourceException":
            raise
        response = quotas.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)
    return float(response["Quota"]["Value"])
