"""The Bedrock check: fallback foundation models and inference profiles are offered in the region."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpufarm.aws.preflight.calls import _arn_region, _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import TierConfig
from gpufarm.config.bedrock import (
    CapacityArn,
    CapacityKind,
    capacity_arn,
    destination_regions,
    foundation_model_id,
    profile_prefix,
    routing_model_id,
)
from gpufarm.config.model import BedrockCommitment, ModelConfig

COMMITMENTS = {"OneMonth": BedrockCommitment.ONE_MONTH, "SixMonths": BedrockCommitment.SIX_MONTHS}
"""GetProvisionedModelThroughput's `commitmentDuration` (absent: no commitment) as the config's terms."""

# --------------------------------------------------------------------------- check: bedrock


def check_bedrock(tier: TierConfig, *, region: str, bedrock: Callable[[str], Any]) -> list[CheckResult]:
    """One row per model with a Bedrock fallback: its model or inference profile is offered.

    `bedrock(region)` returns a Bedrock control-plane client for a region (the call region is the
    model's `bedrock.region`, else the preflight region; a capacity ARN's own region). A
    provisioned-model ARN is read with GetProvisionedModelThroughput
    (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_GetProvisionedModelThroughput.html):
    it must be `InService`, serve `base_model_id`, and have the model units and commitment the
    cost counts. An application-inference-profile ARN is read with GetInferenceProfile like a
    system profile. Quotas are not read: a Provisioned Throughput is bought outside the stack,
    and its model units were counted against the account's quota when it was bought.
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
        arn = capacity_arn(target.model_id)
        call_region = arn.region if arn is not None else (target.region or region)
        subject = f"model {model.name}: {target.model_id}"
        client = bedrock(call_region)
        if arn is not None:
            rows.append(_capacity_row(model, client, arn, subject=subject, region=region))
            continue
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


def _capacity_row(
    model: ModelConfig, client: Any, arn: CapacityArn, *, subject: str, region: str
) -> CheckResult:
    """The row of a provisioned-model or application-inference-profile ARN: it exists and serves."""
    from botocore.exceptions import ClientError

    target = model.bedrock_target
    assert target is not None
    provisioned = arn.kind is CapacityKind.PROVISIONED_MODEL
    try:
        if provisioned:
            found = client.get_provisioned_model_throughput(provisionedModelId=target.model_id)
        else:
            found = client.get_inference_profile(inferenceProfileIdentifier=target.model_id)
    except ClientError as exc:
        if _error_code(exc) not in {"ResourceNotFoundException", "ValidationException"}:
            raise
        listing = (
            "list-provisioned-model-throughputs"
            if provisioned
            else "list-inference-profiles --type-equals APPLICATION"
        )
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.FAIL,
            message=f"the account has no {arn.kind} {arn.resource} in {arn.region}",
            fix=f"name one listed by `aws bedrock {listing} --region {arn.region}` in models "
            f"'{model.name}'.bedrock.model_id",
        )
    if provisioned:
        return _provisioned_row(model, found, subject=subject, arn=arn)
    return _profile_row(model, found, subject=subject, region=region, call_region=arn.region)


def _provisioned_row(
    model: ModelConfig, found: Mapping[str, Any], *, subject: str, arn: CapacityArn
) -> CheckResult:
    """A Provisioned Throughput: InService, serving `base_model_id`, bought as the config says."""
    target = model.bedrock_target
    assert target is not None and target.provisioned is not None
    where = f"models '{model.name}'.bedrock"
    status = str(found.get("status", ""))
    if status != "InService":
        reason = f": {found['failureMessage']}" if found.get("failureMessage") else ""
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.WARN if status == "Updating" else Status.FAIL,
            message=f"the Provisioned Throughput is {status} in {arn.region}{reason}; only an InService "
            "one answers requests",
            fix="wait until `aws bedrock get-provisioned-model-throughput` shows InService, or name another",
        )
    served = str(found.get("foundationModelArn", "")).rsplit("/", 1)[-1]
    if served and served != target.base_model_id:
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.FAIL,
            message=f"the Provisioned Throughput serves {served}, not base_model_id "
            f"{target.base_model_id} (the price and the gateway's model)",
            fix=f"set {where}.base_model_id to {served!r}",
        )
    units = int(found.get("modelUnits", 0))
    if units != target.provisioned.model_units:
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.WARN,
            message=f"the Provisioned Throughput has {units} model units; the cost counts "
            f"{target.provisioned.model_units}",
            fix=f"set {where}.provisioned.model_units to {units}",
        )
    term = COMMITMENTS.get(str(found.get("commitmentDuration", "")), BedrockCommitment.NONE)
    if term is not target.provisioned.commitment:
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.WARN,
            message=f"the Provisioned Throughput was bought with a {term.value} commitment; the cost "
            f"prices {target.provisioned.commitment.value}",
            fix=f"set {where}.provisioned.commitment to {term.value!r}",
        )
    expires = found.get("commitmentExpirationTime")
    ends = f", commitment ends {expires:%Y-%m-%d}" if expires is not None else ""
    return CheckResult(
        check=Check.BEDROCK,
        subject=subject,
        status=Status.PASS,
        message=f"Provisioned Throughput InService in {arn.region}: {units} model units of {served}{ends}",
    )


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
    fm = foundation_model_id(routing_model_id(target))
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
        arn = capacity_arn(target.model_id)
        call_region = arn.region if arn is not None else (target.region or region)
        fm = foundation_model_id(routing_model_id(target))
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
