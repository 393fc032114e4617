"""Small helpers shared by the constructs."""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from gpufarm.config.model import IngressConfig, RemovalPolicy
from gpufarm.config.names import is_dns_1035_label
from gpufarm.config.placeholders import OPEN_CIDRS

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"

TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
"""Security policy of every TLS listener, ALB and NLB: TLS 1.2 and 1.3 only. The ALB's L2
listener takes it as its enum member :data:`ALB_TLS_POLICY`."""
ALB_TLS_POLICY = elbv2.SslPolicy.RECOMMENDED_TLS
""":data:`TLS_POLICY` as the L2 listener's enum: RECOMMENDED_TLS = "ELBSecurityPolicy-TLS13-1-2-2021-06"
(aws-cdk-lib@2.275.0, aws-elasticloadbalancingv2/lib/shared/enums.ts); a test checks the ALB's
synthesized listener carries :data:`TLS_POLICY`."""

DELETED_LOG_RECOVERY_DAYS = 30
"""Days a deleted or expired load balancer access log stays recoverable in its versioned bucket."""


_VALIDATIONS: weakref.WeakKeyDictionary[IConstruct, cdk.Validations] = weakref.WeakKeyDictionary()
"""`Validations.of(construct)` per construct, so a construct acknowledged several times asks jsii
for it once. The object only wraps its scope (aws-cdk-lib@2.275.0 core/lib/validation/
validations.js: `static of(scope){return new Validations(scope)}`, no state of its own), so one
per construct is the same as a new one per call."""


def _validations(construct: IConstruct) -> cdk.Validations:
    validations = _VALIDATIONS.get(construct)
    if validations is None:
        validations = _VALIDATIONS[construct] = cdk.Validations.of(construct)
    return validations


class PseudoParameters(NamedTuple):
    """The tokens of three pseudo parameters, `${Token[AWS.Partition.N]}` and the like."""

    partition: str
    region: str
    account_id: str


@functools.cache
def pseudo_parameters() -> PseudoParameters:
    """`Aws.PARTITION`, `Aws.REGION` and `Aws.ACCOUNT_ID`, read from jsii once per process.

    Each is a static readonly token of `Aws` (aws-cdk-lib@2.275.0 core/lib/cfn-pseudo.d.ts:
    `static readonly PARTITION: string`), the same string however often it is read, and valid in
    every stack of the process; the Python binding asks Node for it on every read.
    """
    return PseudoParameters(cdk.Aws.PARTITION, cdk.Aws.REGION, cdk.Aws.ACCOUNT_ID)


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `construct` (and its children), with a specific reason."""
    acknowledge_all(construct, {rule: reason})


def acknowledge_all(construct: IConstruct, findings: Mapping[str, str]) -> None:
    """Acknowledge each cdk-nag finding of `findings` (rule -> specific reason) on `construct`
    (and its children), in one jsii call.

    `Validations.acknowledge` takes any number of acknowledgments and records each as its own
    metadata entry, in order (aws-cdk-lib@2.275.0 core/lib/validation/validations.js), so one
    call with several writes the same metadata as one call per finding, in fewer round trips.
    """
    _validations(construct).acknowledge(
        *(cdk.Acknowledgment(id=rule, reason=reason) for rule, reason in findings.items())
    )


OPEN_INGRESS_RULES = ("AwsSolutions-EC23",)
"""cdk-nag rules a listener's security group admitting 0.0.0.0/0 trips: AwsSolutions-EC23, "The
Security Group allows for 0.0.0.0/0 or ::/0 inbound access" (cdk-nag@3.0.2
lib/packs/aws-solutions.js, rule EC2RestrictedInbound). The compliance packs' open-port rule
(EC2RestrictedCommonPorts) blocks only ports 20, 21, 3389, 3309, 3306 and 4333
(lib/rules/ec2/EC2RestrictedCommonPorts.js); the ALB listens on 80 or 443. An NLB listener
on one of those ports would still trip it, and is left to the compliance gate."""


def acknowledge_open_ingress(security_group: IConstruct, config: IngressConfig) -> None:
    """When `config` admits the whole internet by choice, acknowledge the findings that choice
    trips on `security_group`, with the tier's own reason (`ingress.open_to_internet.reason`)."""
    choice = config.open_to_internet
    if choice is None or not OPEN_CIDRS & set(config.allowed_cidrs):
        return
    acknowledge_all(
        security_group, {rule: f"ingress.open_to_internet: {choice.reason}" for rule in OPEN_INGRESS_RULES}
    )


def limit_grants_to_aws_services(key: kms.Key) -> kms.Key:
    """Deny kms:CreateGrant on `key` unless an AWS service asks (Control Tower CT.KMS.PR.3).

    The key's users never create grants themselves; the services that encrypt with it do (EKS,
    FSx, EBS), and their requests carry `kms:GrantIsForAWSResource` (a service integrated with
    KMS sends the request on the principal's behalf) or `aws:PrincipalIsAWSService`.
    https://docs.aws.amazon.com/kms/latest/developerguide/grant-authorization.html
    """
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="DenyGrantsOutsideAwsServices",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["kms:CreateGrant"],
            resources=["*"],
            conditions={
                "BoolIfExists": {"kms:GrantIsForAWSResource": "false", "aws:PrincipalIsAWSService": "false"}
            },
        )
    )
    return key


_PRIVATE_SUBNETS: weakref.WeakKeyDictionary[ec2.IVpc, tuple[ec2.ISubnet, ...]] = weakref.WeakKeyDictionary()
""":func:`private_subnets` per VPC: a VPC's subnets are fixed once it exists (`ec2.Vpc` creates
them in its constructor, an imported VPC is given them), so jsii is asked once per VPC."""


def private_subnets(vpc: ec2.IVpc) -> list[ec2.ISubnet]:
    """The VPC's private subnets: those with egress through NAT, else the isolated ones (no NAT)."""
    subnets = _PRIVATE_SUBNETS.get(vpc)
    if subnets is None:
        subnets = _PRIVATE_SUBNETS[vpc] = tuple(vpc.private_subnets) or tuple(vpc.isolated_subnets)
    return list(subnets)


def cdk_removal_policy(policy: RemovalPolicy) -> cdk.RemovalPolicy:
    """The CDK removal policy for a config value."""
    return cdk.RemovalPolicy.RETAIN if policy is RemovalPolicy.RETAIN else cdk.RemovalPolicy.DESTROY


def construct_id(name: str) -> str:
    """A stable CamelCase construct ID from a config name: 'qwen3-8b' -> 'Qwen38b'."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part)


def pod_identity_role(scope: Construct, id: str, *, description: str) -> iam.Role:
    """An IAM role that EKS Pod Identity can hand to a Kubernetes service account."""
    # One principal object for both statements: a principal is a value (it renders the same
    # JSON wherever it is used), and each new one is a jsii round trip.
    principal = iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL)
    role = iam.Role(scope, id, assumed_by=principal, description=description)
    role.assume_role_policy.add_statements(  # type: ignore[union-attr]
        iam.PolicyStatement(actions=["sts:TagSession"], principals=[principal])
    )
    return role


def access_logs_bucket(scope: Construct, *, retention_days: int, kind: str, kms_reason: str) -> s3.Bucket:
    """The retained, private, TLS-only, versioned SSE-S3 bucket a load balancer writes access logs to.

    Logs expire after `retention_days`; a deleted or expired log stays recoverable for
    :data:`DELETED_LOG_RECOVERY_DAYS`. `kind` names the load balancer in the acknowledgements and
    `kms_reason` says why this kind's logs stay on SSE-S3.
    """
    bucket = s3.Bucket(
        scope,
        "AccessLogs",
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        # Versions keep a deleted log (by hand or by the lifecycle rule) recoverable a while.
        versioned=True,
        removal_policy=cdk.RemovalPolicy.RETAIN,
        lifecycle_rules=[
            s3.LifecycleRule(
                expiration=cdk.Duration.days(retention_days),
                noncurrent_version_expiration=cdk.Duration.days(DELETED_LOG_RECOVERY_DAYS),
            )
        ],
    )
    no_server_logs = (
        f"This bucket only receives the {kind}'s access logs; logging reads of it to a further "
        "bucket would add a log of a log. Public access is blocked and TLS enforced."
    )
    acknowledge_all(
        bucket,
        {
            "AwsSolutions-S1": no_server_logs,
            "NIST.800.53.R5-S3BucketLoggingEnabled": no_server_logs,
            "NIST.800.53.R5-S3DefaultEncryptionKMS": kms_reason,
            "NIST.800.53.R5-S3BucketReplicationEnabled": (
                "Access logs of a load balancer in this Region: a copy in another Region would need a "
                "bucket and replication role outside this single-Region stack. The bucket is retained "
                "when the stack is deleted, versioned, and its logs expire per access_logs.retention_days."
            ),
            "ControlTower::CT.S3.PR.2": no_server_logs,
            "ControlTower::CT.S3.PR.10": kms_reason,
            "ControlTower::CT.S3.PR.4": (
                f"Nothing consumes the {kind}'s log files as they arrive: they are read on demand "
                "(Athena, or a download) while they last, so an event notification would have no target."
            ),
            "ControlTower::CT.S3.PR.9": (
                "Logs must leave this bucket once access_logs.retention_days has passed (the lifecycle "
                "rule expires them; a deleted one stays 30 days as a noncurrent version, then goes): "
                "an Object Lock retention would keep them past that. Public access is blocked, TLS "
                "enforced, and versioning keeps what is overwritten or deleted."
            ),
        },
    )
    return bucket


MAX_WEIGHT = 999
"""Weights of a forward action's target groups are 0-999 (ALB and NLB alike)."""
MAX_WEIGHTED_GROUPS = 5
"""Target groups one forward action may name."""


def validate_weights(weights: Mapping[str, Mapping[str, int]], models: Sequence[str], *, entry: str) -> None:
    """Check `{model: {group: weight}}` for a load balancer whose models each have one `entry`.

    `entry` names what forwards to a model's target groups ('listener' on an NLB, 'route' on an
    ALB). Raises ValueError for an unknown model, no group, more than MAX_WEIGHTED_GROUPS
    groups, a group name that is not a DNS label, a weight outside 0-MAX_WEIGHT, or all 0.
    """
    for name, groups in weights.items():
        if name not in models:
            raise ValueError(
                f"'weights' names model {name!r}, which has no {entry}; models: {', '.join(models)}"
            )
        if not groups:
            raise ValueError(f"'weights' of model {name!r} must name at least one target group, got none")
        if len(groups) > MAX_WEIGHTED_GROUPS:
            raise ValueError(
                f"'weights' of model {name!r} must name at most {MAX_WEIGHTED_GROUPS} target groups "
                f"(one forward action), got {len(groups)}"
            )
        for group, weight in groups.items():
            if not is_dns_1035_label(group, max_length=40):
                raise ValueError(
                    f"'weights' of model {name!r}: group names must be lowercase DNS labels (a-z, 0-9, "
                    f"'-', starting with a letter, at most 40 characters), got {group!r}"
                )
            if not 0 <= weight <= MAX_WEIGHT:
                raise ValueError(
                    f"'weights' of model {name!r}: group {group!r} must weigh 0-{MAX_WEIGHT}, got {weight}"
                )
        if not any(groups.values()):
            raise ValueError(
                f"'weights' of model {name!r} must give at least one group a weight above 0 (else the "
                f"{entry} forwards nowhere), got all 0"
            )
