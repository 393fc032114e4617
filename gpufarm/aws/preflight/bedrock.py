"""The Bedrock check: fallback foundation models and inference profiles are offered in the region."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpufarm.aws.preflight.calls import _arn_region, _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import TierConfig
from gpufarm.config.bedrock import destination_regions, foundation_model_id, profile_prefix
from gpufarm.config.model import ModelConfig

# --------------------------------------------------------------------------- check: bedrock


def check_bedrock(tier: TierConfig, *, region: str, bedrock: Callable[[str], Any]) -> list[CheckResult]:
    """One row per model with a Bedrock fallback: its model or inference profile is offered.

    `bedrock(region)` returns a Bedrock control-plane client for a region (the call region is the
    model's `bedrock.region`, else the preflight region).
    """
    from botocore.exceptions import ClientError

    if not tier.fallback.enabled or not any(m.bedrock_target for m in tier.models):
        return [
            CheckResult(
                check=Check.BEDROCK,
                subject="fallback",
                status=Status.PASS,
                message="no model falls back to Bedrock",
            )
        ]
    catalogs: dict[str, dict[str, dict[str, Any]]] = {}
    rows = []
    for model in tier.models:
        target = model.bedrock_target
        if target is None:
            continue
        call_region = target.region or region
        subject = f"model {model.name}: {target.model_id}"
        client = bedrock(call_region)
        if profile_prefix(target.model_id) is not None:
            try:
                profile = client.get_inference_profile(inferenceProfileIdentifier=target.model_id)
            except ClientError as exc:
                if _error_code(exc) not in {"ResourceNotFoundException", "ValidationException"}:
                    raise
                rows.append(
                    CheckResult(
                        check=Check.BEDROCK,
                        subject=subject,
                        status=Status.FAIL,
                        message=f"inference profile {target.model_id} is not available in {call_region}",
                        fix=f"choose a profile listed by `aws bedrock list-inference-profiles --region "
                        f"{call_region}`, or set models '{model.name}'.bedrock.region",
                    )
                )
                continue
            rows.append(_profile_row(model, profile, subject=subject, region=region, call_region=call_region))
            continue
        if call_region not in catalogs:
            summaries = client.list_foundation_models().get("modelSummaries", [])
            catalogs[call_region] = {str(s["modelId"]): dict(s) for s in summaries}
        summary = catalogs[call_region].get(target.model_id)
        if summary is None:
            rows.append(
                CheckResult(
                    check=Check.BEDROCK,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"foundation model {target.model_id} is not offered in {call_region}",
                    fix=f"choose a model listed by `aws bedrock list-foundation-models --region "
                    f"{call_region}`, or set models '{model.name}'.bedrock.region to a region that offers it",
                )
            )
            continue
        inference = [str(t) for t in summary.get("inferenceTypesSupported", [])]
        lifecycle = str(summary.get("modelLifecycle", {}).get("status", "ACTIVE"))
        if "ON_DEMAND" not in inference:
            rows.append(
                CheckResult(
                    check=Check.BEDROCK,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"{target.model_id} cannot be invoked on demand in {call_region} "
                    f"(supports {', '.join(inference) or 'no inference type'})",
                    fix=f"use an inference profile ID (such as 'us.{target.model_id}') in models "
                    f"'{model.name}'.bedrock.model_id",
                )
            )
        elif lifecycle != "ACTIVE":
            rows.append(
                CheckResult(
                    check=Check.BEDROCK,
                    subject=subject,
                    status=Status.WARN,
                    message=f"{target.model_id} is {lifecycle.lower()} in {call_region}; AWS retires "
                    "legacy models",
                    fix="move the fallback to a newer model",
                )
            )
        else:
            rows.append(
                CheckResult(
                    check=Check.BEDROCK,
                    subject=subject,
                    status=Status.PASS,
                    message=f"foundation model offered on demand in {call_region}",
                )
            )
    return rows


def _profile_row(
    model: ModelConfig, profile: Mapping[str, Any], *, subject: str, region: str, call_region: str
) -> CheckResult:
    target = model.bedrock_target
    assert target is not None
    status = str(profile.get("status", "ACTIVE"))
    if status != "ACTIVE":
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.FAIL,
            message=f"inference profile {target.model_id} is {status} in {call_region}",
            fix="choose an active inference profile",
        )
    routed = sorted({_arn_region(str(m.get("modelArn", ""))) for m in profile.get("models", [])} - {""})
    allowed = destination_regions(target, region)
    if allowed and (outside := [r for r in routed if r not in allowed]):
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.WARN,
            message=f"the profile routes to {', '.join(outside)}, which the gateway's IAM policy does "
            f"not allow ({', '.join(allowed)}); requests routed there are denied",
            fix=f"set models '{model.name}'.bedrock.destination_regions to {', '.join(routed)}",
        )
    fm = foundation_model_id(target.model_id)
    return CheckResult(
        check=Check.BEDROCK,
        subject=subject,
        status=Status.PASS,
        message=f"inference profile active in {call_region}, routes {fm} to "
        f"{', '.join(routed) or 'its regions'}",
    )


# --------------------------------------------------------------------------- check: bedrock access


def check_bedrock_access(
    tier: TierConfig, *, region: str, bedrock: Callable[[str], Any]
) -> list[CheckResult]:
    """One row per model with a Bedrock fallback: the account may invoke its foundation model.

    GetFoundationModelAvailability
    (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_GetFoundationModelAvailability.html)
    answers `authorizationStatus` (AUTHORIZED | NOT_AUTHORIZED), `entitlementAvailability` and
    `regionAvailability` (AVAILABLE | NOT_AVAILABLE) and `agreementAvailability.status`
    (AVAILABLE | PENDING | NOT_AVAILABLE | ERROR); anything but AUTHORIZED and AVAILABLE fails,
    a pending agreement warns. An inference profile is checked through its foundation model.
    """
    from botocore.exceptions import ClientError

    if not tier.fallback.enabled or not any(m.bedrock_target for m in tier.models):
        return [
            CheckResult(
                check=Check.BEDROCK_ACCESS,
                subject="fallback",
                status=Status.PASS,
                message="no model falls back to Bedrock",
            )
        ]
    rows: list[CheckResult] = []
    for model in tier.models:
        target = model.bedrock_target
        if target is None:
            continue
        call_region = target.region or region
        fm = foundation_model_id(target.model_id)
        subject = f"model {model.name}: {fm}"
        fix = (
            f"request access to {fm} in the Bedrock console (Model access) in {call_region}, "
            "and accept its end-user agreement"
        )
        try:
            found = bedrock(call_region).get_foundation_model_availability(modelId=fm)
        except ClientError as exc:
            if _error_code(exc) not in {"ResourceNotFoundException", "ValidationException"}:
                raise
            rows.append(
                CheckResult(
                    check=Check.BEDROCK_ACCESS,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"Bedrock knows no foundation model {fm} in {call_region}",
                    fix="choose a model listed by `aws bedrock list-foundation-models --region "
                    f"{call_region}`",
                )
            )
            continue
        refused = [
            f"{key} {value}"
            for key, value in (
                ("authorization", found.get("authorizationStatus")),
                ("entitlement", found.get("entitlementAvailability")),
                ("region", found.get("regionAvailability")),
            )
            if value not in (None, "AUTHORIZED", "AVAILABLE")
        ]
        agreement = str((found.get("agreementAvailability") or {}).get("status", "AVAILABLE"))
        if agreement in {"NOT_AVAILABLE", "ERROR"}:
            refused.append(f"agreement {agreement}")
        if refused:
            rows.append(
                CheckResult(
                    check=Check.BEDROCK_ACCESS,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"the account may not invoke {fm} in {call_region} ({', '.join(refused)})",
                    fix=fix,
                )
            )
        elif agreement == "PENDING":
            rows.append(
                CheckResult(
                    check=Check.BEDROCK_ACCESS,
                    subject=subject,
                    status=Status.WARN,
                    message=f"the model's agreement is pending in {call_region}; invocations fail until "
                    "it is accepted",
                    fix="wait for the agreement, or accept it in the Bedrock console",
                )
            )
        else:
            rows.append(
                CheckResult(
                    check=Check.BEDROCK_ACCESS,
                    subject=subject,
                    status=Status.PASS,
                    message=f"the account may invoke {fm} in {call_region}",
                )
            )
    return rows
