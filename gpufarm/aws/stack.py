"""A deployed tier's CloudFormation stack, read with boto3: state, outputs, resources.

Shared by `gpufarm status`, `gpufarm kubeconfig` and `gpufarm destroy`. Every call is a read-only
`Describe`; nothing here is imported at synth time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CREDENTIALS_HELP = (
    "configure credentials for the tier's account (aws configure, AWS_PROFILE, or aws sso login)"
)


class AwsAccessError(Exception):
    """AWS cannot be asked: no credentials, rejected credentials, or no endpoint to reach."""


class StackNotFoundError(Exception):
    """The tier's stack does not exist in the account and region."""


@dataclass(frozen=True, kw_only=True)
class StackResource:
    """One resource of a deployed stack."""

    logical_id: str
    type: str
    physical_id: str
    status: str


@dataclass(frozen=True, kw_only=True)
class StackInfo:
    """A deployed stack: its state, why it is in it, its outputs and termination protection."""

    name: str
    status: str
    reason: str
    outputs: dict[str, str] = field(default_factory=dict)
    termination_protection: bool = False


def aws_session(region: str, needs: str) -> Any:
    """A boto3 session for `region` that has credentials; raises :class:`AwsAccessError` otherwise.

    `needs` names what the command reads or changes, for the message ("gpufarm status reads ...").
    """
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.Session(region_name=region)
        credentials = session.get_credentials()
    except BotoCoreError as exc:  # ProfileNotFound, a broken config file, SSO errors
        raise AwsAccessError(f"no usable AWS credentials ({exc}): {needs}; {CREDENTIALS_HELP}") from None
    if credentials is None:
        raise AwsAccessError(f"no AWS credentials: {needs}; {CREDENTIALS_HELP}")
    return session


def access_error(exc: BaseException) -> AwsAccessError | None:
    """An :class:`AwsAccessError` when `exc` means AWS cannot be asked at all, else None."""
    from botocore import exceptions as boto_errors

    if isinstance(exc, boto_errors.ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in {
            "UnrecognizedClientException",
            "InvalidClientTokenId",
            "ExpiredToken",
            "ExpiredTokenException",
            "SignatureDoesNotMatch",
            "AuthFailure",
        }:
            message = exc.response.get("Error", {}).get("Message", "") or code
            return AwsAccessError(f"AWS rejected the credentials: {message}; {CREDENTIALS_HELP}")
        return None
    if isinstance(
        exc,
        boto_errors.NoCredentialsError
        | boto_errors.PartialCredentialsError
        | boto_errors.CredentialRetrievalError
        | boto_errors.TokenRetrievalError
        | boto_errors.SSOError,
    ):
        return AwsAccessError(f"no usable AWS credentials ({exc}); {CREDENTIALS_HELP}")
    if isinstance(exc, boto_errors.EndpointConnectionError | boto_errors.ConnectTimeoutError):
        return AwsAccessError(f"cannot reach AWS: {exc}")
    return None


def describe_stack(cfn: Any, name: str) -> StackInfo:
    """The stack `name` (DescribeStacks); raises :class:`StackNotFoundError` when it does not exist.

    DescribeStacks answers a missing stack with the error code ValidationError and the message
    "Stack with id <name> does not exist" (the response body quoted in boto/boto3 issue #2807).
    """
    from botocore.exceptions import ClientError

    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message", "")):
            raise StackNotFoundError(name) from None
        raise
    stack = stacks[0]
    return StackInfo(
        name=name,
        status=str(stack["StackStatus"]),
        reason=str(stack.get("StackStatusReason", "")),
        outputs={str(o["OutputKey"]): str(o["OutputValue"]) for o in stack.get("Outputs", [])},
        termination_protection=bool(stack.get("EnableTerminationProtection", False)),
    )


def stack_resources(cfn: Any, name: str) -> list[StackResource]:
    """Every resource of the stack (ListStackResources, all pages)."""
    out: list[StackResource] = []
    for page in cfn.get_paginator("list_stack_resources").paginate(StackName=name):
        out += [
            StackResource(
                logical_id=str(r["LogicalResourceId"]),
                type=str(r["ResourceType"]),
                physical_id=str(r.get("PhysicalResourceId", "")),
                status=str(r.get("ResourceStatus", "")),
            )
            for r in page["StackResourceSummaries"]
        ]
    return out
