"""A preflight run: the placeholder rows, then every AWS check in order."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gpufarm.aws.preflight.bedrock import check_bedrock, check_bedrock_access
from gpufarm.aws.preflight.bootstrap import check_cdk_bootstrap
from gpufarm.aws.preflight.calls import (
    InstanceInfo,
    _error_message,
    _fatal,
    _guarded,
    describe_instance_types,
    describe_offerings,
)
from gpufarm.aws.preflight.certificate import check_certificate
from gpufarm.aws.preflight.hybrid import check_hybrid_cidrs, check_hybrid_gateway
from gpufarm.aws.preflight.image_cache import check_image_cache
from gpufarm.aws.preflight.kubernetes import check_kubernetes_version
from gpufarm.aws.preflight.model_bucket import check_model_bucket
from gpufarm.aws.preflight.model_replica import check_model_replica
from gpufarm.aws.preflight.network_quotas import check_network_quotas, no_template_row
from gpufarm.aws.preflight.offerings import check_offerings
from gpufarm.aws.preflight.reservations import check_reservations
from gpufarm.aws.preflight.results import (
    ACCOUNT_CHECKS,
    Check,
    CheckResult,
    PreflightError,
    PreflightReport,
    Status,
)
from gpufarm.aws.preflight.sagemaker_quotas import check_sagemaker_quotas
from gpufarm.aws.preflight.secrets import check_hf_token_secrets
from gpufarm.aws.preflight.vcpu_quotas import check_vcpu_quotas
from gpufarm.config import TierConfig
from gpufarm.config.model import Provisioning
from gpufarm.config.placeholders import UNPINNED_IMAGE, find_placeholders
from gpufarm.core.pools import gpu_instance_types

# --------------------------------------------------------------------------- run


def check_placeholders(tier: TierConfig) -> list[CheckResult]:
    """A failed row per documentation value left in the tier (:mod:`gpufarm.config.placeholders`),
    naming the field; one passing row when there is none. Needs no AWS call."""
    found = find_placeholders(tier)
    if not found:
        return [
            CheckResult(
                check=Check.PLACEHOLDER,
                subject="tier",
                status=Status.PASS,
                message="no documentation account, address range, resource ID or bucket; "
                "every image pinned by digest",
            )
        ]
    return [
        CheckResult(
            check=Check.PLACEHOLDER,
            subject=p.path,
            status=Status.FAIL,
            message=f"{p.value!r} is {p.kind} ({p.why}); the stack refuses to deploy",
            fix=f"set {p.path} to your own value"
            if p.kind != UNPINNED_IMAGE
            else f"set {p.path} to an image digest read from the registry "
            "(docs/operations.md, Refreshing image digests)",
        )
        for p in found
    ]


def region_row(tier: TierConfig, region: str) -> list[CheckResult]:
    """A warning when the checks run in another region than the tier deploys to. Needs no AWS call."""
    if tier.environment.region == region:
        return []
    return [
        CheckResult(
            check=Check.REGION,
            subject="region",
            status=Status.WARN,
            message=f"the tier deploys to {tier.environment.region}; these checks ran in {region}",
            fix=f"run preflight with --region {tier.environment.region}, or set environment.region",
        )
    ]


def offline_checks(tier: TierConfig, region: str) -> list[CheckResult]:
    """The checks that read only the tier (the region, documentation values): no credentials."""
    return region_row(tier, region) + check_placeholders(tier) + check_hybrid_cidrs(tier)


def skipped_rows(reason: str) -> list[CheckResult]:
    """One `skip` row per check that needs an account, saying why it did not run."""
    return [
        CheckResult(
            check=check,
            subject="account",
            status=Status.SKIP,
            message=f"not run: needs an AWS account ({reason})",
            fix="run preflight with credentials for the account that deploys the tier",
        )
        for check in ACCOUNT_CHECKS
    ]


def offline_report(tier: TierConfig, region: str, reason: str) -> PreflightReport:
    """The offline checks, and a `skip` row for each check that needs an account."""
    return PreflightReport(
        tier=tier.name,
        region=region,
        account="",
        results=tuple(offline_checks(tier, region) + skipped_rows(reason)),
    )


def run_preflight(
    tier: TierConfig,
    *,
    region: str,
    session: Any | None = None,
    now: datetime | None = None,
    template: Mapping[str, Any] | None = None,
    model_source_bucket: str | None = None,
) -> PreflightReport:
    """Run every check for `tier` in `region` with a boto3 session (default: the ambient one).

    For the tier of a secondary region (:func:`gpufarm.config.regions.regional_tiers`),
    `model_source_bucket` is the tier's model bucket: its replication to the region's replica is
    checked instead of the replica's contents.

    `template` is the tier's synthesized CloudFormation template: the network quotas are counted
    from it. Without one (the default) they are not checked, and a warning row says so.

    Raises :class:`PreflightError` when the credentials are missing, rejected or expired, or AWS
    cannot be reached.
    """
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        session = session or boto3.Session()  # AWS_PROFILE naming no profile fails here
    except BotoCoreError as exc:
        raise _fatal(exc) or PreflightError(f"cannot start an AWS session: {exc}") from None
    config = Config(retries={"mode": "standard", "max_attempts": 5})
    moment = now or datetime.now(UTC)

    def client(service: str, in_region: str = region) -> Any:
        return session.client(service, region_name=in_region, config=config)

    try:
        account = str(client("sts").get_caller_identity()["Account"])
    except (ClientError, BotoCoreError) as exc:
        fatal = _fatal(exc, connectivity=True)
        if fatal is not None:
            raise fatal from None
        raise PreflightError(f"cannot identify the caller: {_error_message(exc)}") from None

    ec2 = client("ec2")
    info: dict[str, InstanceInfo] = {}
    offered: dict[str, set[str]] = {}

    def quotas() -> list[CheckResult]:
        if tier.cluster.provisioning is Provisioning.SAGEMAKER:
            return check_sagemaker_quotas(tier, quotas=client("service-quotas"))
        info.update(describe_instance_types(ec2, gpu_instance_types(tier)))
        return check_vcpu_quotas(tier, region=region, info=info, quotas=client("service-quotas"))

    def offerings() -> list[CheckResult]:
        if tier.cluster.provisioning is Provisioning.SAGEMAKER:
            # SageMaker places the endpoint's instances; the tier's node pools launch nothing.
            return []
        if not info:
            info.update(describe_instance_types(ec2, gpu_instance_types(tier)))
        offered.update(
            describe_offerings(ec2, gpu_instance_types(tier), list(tier.environment.availability_zones))
        )
        return check_offerings(tier, info=info, offered=offered)

    bedrock_clients: dict[str, Any] = {}

    def bedrock(in_region: str) -> Any:
        if in_region not in bedrock_clients:
            bedrock_clients[in_region] = client("bedrock", in_region)
        return bedrock_clients[in_region]

    results: list[CheckResult] = offline_checks(tier, region)
    results += _guarded(Check.QUOTA, quotas)
    results += _guarded(Check.OFFERING, offerings)
    results += _guarded(
        Check.RESERVATION, lambda: check_reservations(tier, region=region, ec2=ec2, now=moment)
    )
    results += _guarded(Check.BEDROCK, lambda: check_bedrock(tier, region=region, bedrock=bedrock))
    results += _guarded(
        Check.BEDROCK_ACCESS, lambda: check_bedrock_access(tier, region=region, bedrock=bedrock)
    )
    if tier.cluster.provisioning not in (Provisioning.EC2, Provisioning.SAGEMAKER):
        # Only an EKS tier has a Kubernetes version to check.
        results += _guarded(
            Check.KUBERNETES,
            lambda: check_kubernetes_version(tier, region=region, eks=client("eks"), now=moment),
        )
    if template is None:
        results.append(no_template_row(tier))
    else:
        results += check_network_quotas(
            template,
            region=region,
            quotas=client("service-quotas"),
            ec2=ec2,
            elbv2=client("elbv2"),
            account=account,
        )
    results += _guarded(
        Check.CERTIFICATE, lambda: check_certificate(tier, region=region, acm=client("acm"), now=moment)
    )
    secondary = tier.secondary_region
    if secondary is not None and secondary.model_bucket is not None and model_source_bucket is not None:
        # A secondary region reads the replica its own stack creates: before that stack is
        # deployed there is no bucket to read, so the check is of the replication instead.
        replica = secondary.model_bucket
        results += _guarded(
            Check.MODEL_REPLICA,
            lambda: check_model_replica(
                source_bucket=model_source_bucket,
                replica_bucket=replica,
                stack_name=tier.stack_name,
                s3=client("s3"),
            ),
        )
    else:
        results += _guarded(
            Check.MODEL_BUCKET, lambda: check_model_bucket(tier, region=region, s3=client("s3"))
        )
    results += _guarded(
        Check.HF_TOKEN,
        lambda: check_hf_token_secrets(
            tier, region=region, secretsmanager=lambda r: client("secretsmanager", r)
        ),
    )
    results += _guarded(
        Check.CDK_BOOTSTRAP,
        lambda: check_cdk_bootstrap(region=region, account=account, ssm=client("ssm"), template=template),
    )
    results += _guarded(
        Check.IMAGE_CACHE,
        lambda: check_image_cache(
            tier,
            template=template,
            account=account,
            ecr=client("ecr"),
            secretsmanager=client("secretsmanager"),
        ),
    )
    results += _guarded(
        Check.HYBRID_GATEWAY,
        lambda: check_hybrid_gateway(tier, region=region, ec2=ec2, directconnect=client("directconnect")),
    )
    return PreflightReport(tier=tier.name, region=region, account=account, results=tuple(results))
