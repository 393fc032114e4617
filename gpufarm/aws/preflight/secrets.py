"""The Hugging Face token check: each model's `hf_token_secret` exists and has a current value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpufarm.aws.preflight.calls import _arn_region, _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import TierConfig


def _row(status: Status, subject: str, message: str, fix: str = "") -> CheckResult:
    return CheckResult(check=Check.HF_TOKEN, subject=subject, status=status, message=message, fix=fix)


def check_hf_token_secrets(
    tier: TierConfig, *, region: str, secretsmanager: Callable[[str], Any]
) -> list[CheckResult]:
    """Per model with `hf_token_secret`: DescribeSecret finds it (in the ARN's region, else the
    tier's), it is not scheduled for deletion, and a version carries the AWSCURRENT label (the
    value pods read). The secret's value is never read.

    Models with Hugging Face weights and no secret get a warning: gated repos need one, and
    whether a repo is gated cannot be read from the tier.
    """
    from botocore.exceptions import ClientError

    rows: list[CheckResult] = []
    for i, model in enumerate(tier.models):
        secret = model.hf_token_secret
        subject = f"models[{i}].hf_token_secret"
        if secret is None:
            if not model.is_s3:
                rows.append(
                    _row(
                        Status.WARN,
                        f"models[{i}]: {model.weights}",
                        "Hugging Face weights with no token secret: a gated repo refuses the download",
                        f"if the repo is gated, set {subject} to a Secrets Manager secret holding a token",
                    )
                )
            continue
        in_region = _arn_region(secret) if secret.startswith("arn:") else region
        try:
            described = secretsmanager(in_region).describe_secret(SecretId=secret)
        except ClientError as exc:
            if _error_code(exc) != "ResourceNotFoundException":
                raise
            rows.append(
                _row(
                    Status.FAIL,
                    subject,
                    f"Secrets Manager has no secret {secret!r} in {in_region}",
                    f"create it (aws secretsmanager create-secret --name {secret} --secret-string <token>)",
                )
            )
            continue
        if described.get("DeletedDate") is not None:
            rows.append(
                _row(
                    Status.FAIL,
                    subject,
                    f"secret {secret!r} is scheduled for deletion",
                    "restore it (aws secretsmanager restore-secret) or name another",
                )
            )
            continue
        stages = described.get("VersionIdsToStages") or {}
        if not any("AWSCURRENT" in labels for labels in stages.values()):
            rows.append(
                _row(
                    Status.FAIL,
                    subject,
                    f"secret {secret!r} has no current value",
                    f"put the token in it (aws secretsmanager put-secret-value --secret-id {secret})",
                )
            )
            continue
        rows.append(_row(Status.PASS, subject, f"secret {secret!r} has a current value in {in_region}"))
    if not rows:
        rows.append(_row(Status.PASS, "models", "every model reads its weights from S3 (no token needed)"))
    return rows
