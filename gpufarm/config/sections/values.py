"""The value types the sections share: constrained strings and numbers, each with its message."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gpufarm import images as image_table
from gpufarm.config.names import is_dns_1035_label

_DURATION = re.compile(r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$")


HF_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$")


_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]{36}$")


_IAM_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")


_SECRET_REF = re.compile(
    r"^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]+|[\w/+=.@-]{1,512})$"
)


REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")


TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)
"""GPU counts per replica that vLLM's tensor parallelism and GPU instances both allow."""


# Karpenter's own pattern for NodePool disruption budgets: a count, or 0%-100%.
_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")


_IMAGE = re.compile(r"^[\w.-]+(:\d+)?(/[\w.-]+)+(:[\w.-]+)?@sha256:[0-9a-f]{64}$")


def _dns_label(value: str) -> str:
    if not is_dns_1035_label(value, max_length=40):
        raise ValueError(
            "must be a lowercase DNS label (a-z, 0-9, '-', starting with a letter, "
            f"at most 40 characters), got {value!r}"
        )
    return value


def _duration(value: str) -> str:
    if value != "Never" and not _DURATION.match(value):
        raise ValueError(f"must be a duration such as '30m', '1h' or '2h30m' (or 'Never'), got {value!r}")
    return value


LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
"""Retention periods CloudWatch Logs accepts, in days."""


def _log_retention(value: int) -> int:
    if value not in LOG_RETENTION_DAYS:
        raise ValueError(
            f"must be a CloudWatch Logs retention ({', '.join(map(str, LOG_RETENTION_DAYS))}), got {value}"
        )
    return value


def _cidr(value: str) -> str:
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError:
        raise ValueError(
            f"must be an IPv4 CIDR block with no host bits set, such as '10.0.0.0/16', got {value!r}"
        ) from None
    return str(network)


def _pattern(regex: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not regex.match(value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return AfterValidator(check)


DnsLabel = Annotated[str, AfterValidator(_dns_label)]


Duration = Annotated[str, AfterValidator(_duration)]


Cidr = Annotated[str, AfterValidator(_cidr)]


LogRetentionDays = Annotated[int, AfterValidator(_log_retention)]


Region = Annotated[str, _pattern(REGION, "an AWS region name such as 'us-east-1'")]


AcmCertificateArn = Annotated[
    str, _pattern(_ACM_ARN, "an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)")
]


IamRoleArn = Annotated[str, _pattern(_IAM_ROLE_ARN, "an IAM role ARN (arn:aws:iam::<account>:role/<name>)")]


SecretRef = Annotated[str, _pattern(_SECRET_REF, "a Secrets Manager secret name or ARN")]


NodeBudget = Annotated[
    str, _pattern(_BUDGET_NODES, "a node count such as '1' or a percentage from '0%' to '100%'")
]


def _pinned_image(value: str) -> str:
    # Pods run exactly the image reviewed: a tag can be pushed again, a digest cannot
    # (docs/decisions/0042-images-pinned-by-digest.md).
    if not _IMAGE.match(value):
        raise ValueError(
            "must be a container image pinned by digest, such as "
            f"'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            f"got {value!r}"
        )
    return value


ImageRef = Annotated[str, AfterValidator(_pinned_image)]


TARGET_CONTROL_AGENT_IMAGE = image_table.image("target-control-agent").reference()
"""The ALB target control agent as AWS publishes it: under the `latest` tag only, with no
digest gpufarm could confirm (gpufarm/data/images.yaml)."""


def _agent_image(value: str) -> str:
    if value == TARGET_CONTROL_AGENT_IMAGE:
        return value
    return _pinned_image(value)


AgentImageRef = Annotated[str, AfterValidator(_agent_image)]


def _engine_image(value: str) -> str:
    # An engine image whose digest no public record gave (`digest: null` in the table) is allowed
    # as the table's own tag until the operator pins it: the tier reports it unpinned and the
    # stack refuses to deploy (gpufarm/config/image_pins.py).
    engines = ("vllm", "sglang", "trtllm")
    if value in {row.reference() for row in image_table.unconfirmed() if row.name in engines}:
        return value
    return _pinned_image(value)


EngineImageRef = Annotated[str, AfterValidator(_engine_image)]
"""A serving engine's image: pinned by digest, or its table tag while the table has no digest."""


AccountId = Annotated[str, _pattern(re.compile(r"^\d{12}$"), "a 12-digit AWS account ID")]


ChartVersion = Annotated[
    str, _pattern(re.compile(r"^\d+\.\d+\.\d+$"), "an exact chart version such as '1.2.3'")
]


AmiVersion = Annotated[
    str,
    _pattern(
        re.compile(r"^(latest|v\d{8}|\d+\.\d+\.\d+)$"),
        "'latest', an AL2023 release such as 'v20251120' or a Bottlerocket version such as '1.50.0'",
    ),
]


CognitoUserPoolArn = Annotated[
    str,
    _pattern(
        re.compile(r"^arn:aws[a-z-]*:cognito-idp:[a-z0-9-]+:\d{12}:userpool/[\w-]+$"),
        "a Cognito user pool ARN (arn:aws:cognito-idp:<region>:<account>:userpool/<id>)",
    ),
]


HttpsUrl = Annotated[str, _pattern(re.compile(r"^https://[^\s/]+(/\S*)?$"), "an https:// URL")]


_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8}([0-9a-f]{9})?$")


ReservationId = Annotated[
    str, _pattern(_RESERVATION_ID, "a capacity reservation ID such as 'cr-0123456789abcdef0'")
]


_PRINCIPAL = re.compile(r"^(\*|arn:aws[a-z-]*:iam::\d{12}:(root|role/[\w+=,.@/-]+|user/[\w+=,.@/-]+))$")


AllowedPrincipal = Annotated[
    str,
    _pattern(_PRINCIPAL, "an IAM principal ARN (arn:aws:iam::<account>:root, :role/<name> or :user/<name>)"),
]


class _Model(BaseModel):
    """Base for every config object: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class OpenChoiceConfig(_Model):
    """A deliberate choice to admit the whole internet (0.0.0.0/0), and why; the reason becomes
    the cdk-nag acknowledgement on the resource it opens."""

    reason: str = Field(description="Why the whole internet must reach it (at least 20 characters).")


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")


Email = Annotated[str, _pattern(_EMAIL, "an email address")]
