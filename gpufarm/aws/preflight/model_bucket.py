"""The model bucket check: every S3 location the tier reads weights from exists and holds them."""

from __future__ import annotations

from typing import Any

from gpufarm.aws.preflight.calls import _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import ModelStoreKind, TierConfig
from gpufarm.core.s3 import split_s3_uri
from gpufarm.core.weights import streams_weights


def _row(status: Status, subject: str, message: str, fix: str = "") -> CheckResult:
    return CheckResult(check=Check.MODEL_BUCKET, subject=subject, status=status, message=message, fix=fix)


def _bucket_region(s3: Any, bucket: str) -> str:
    # GetBucketLocation answers null for us-east-1.
    return str(s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") or "us-east-1")


def check_model_bucket(tier: TierConfig, *, region: str, s3: Any) -> list[CheckResult]:
    """Each `s3://` weights folder and the FSx import path: the bucket exists and the caller may
    read it (HeadBucket), it is in the tier's region (GetBucketLocation; another region warns),
    and the prefix holds objects; a model's folder holds a `config.json` (ListObjectsV2), without
    which vLLM cannot load the model. With the `runai-streamer` store a model's folder must also
    hold `*.safetensors` files: the Run:ai streamer loader reads nothing else (vLLM 0.31.0
    `RunaiModelStreamerLoader._prepare_weights` raises "Cannot find any safetensors model
    weights"); a listing cut at 1000 keys is not judged."""
    from botocore.exceptions import ClientError

    locations: list[tuple[str, str, bool]] = [
        (f"models[{i}].weights", m.weights, True) for i, m in enumerate(tier.models) if m.is_s3
    ]
    streamed = {f"models[{i}].weights" for i, m in enumerate(tier.models) if streams_weights(tier, m)}
    store = tier.model_store
    if store.kind is ModelStoreKind.FSX_LUSTRE and store.fsx.import_path:
        locations.append(("model_store.fsx.import_path", store.fsx.import_path, False))
    if not locations:
        return [_row(Status.PASS, "weights", "no weights come from S3 (nothing to check)")]
    rows: list[CheckResult] = []
    regions: dict[str, str | None] = {}
    unreadable: dict[str, bool] = {}
    """Bucket -> True when it does not exist, False when the caller may not read it."""
    for path, uri, is_model in locations:
        bucket, prefix = split_s3_uri(uri)
        subject = f"{path}: {uri}"
        if bucket not in regions:
            try:
                s3.head_bucket(Bucket=bucket)
                regions[bucket] = _bucket_region(s3, bucket)
            except ClientError as exc:
                code = _error_code(exc)
                if code not in {"404", "NoSuchBucket", "403", "AccessDenied", "Forbidden"}:
                    raise
                regions[bucket] = None
                unreadable[bucket] = code in {"404", "NoSuchBucket"}
        bucket_region = regions[bucket]
        if bucket_region is None:
            missing = unreadable[bucket]
            rows.append(
                _row(
                    Status.FAIL,
                    subject,
                    f"bucket {bucket} does not exist"
                    if missing
                    else f"bucket {bucket} is not readable by the caller (access denied)",
                    f"create the bucket and upload the weights, or set {path}"
                    if missing
                    else f"grant s3:ListBucket on {bucket} to the caller, or set {path}",
                )
            )
            continue
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1000)
        keys = [str(o["Key"]) for o in listed.get("Contents", [])]
        if not keys:
            rows.append(
                _row(
                    Status.FAIL,
                    subject,
                    f"nothing under s3://{bucket}/{prefix}",
                    f"upload the weights there, or set {path}",
                )
            )
            continue
        if is_model and f"{prefix}config.json" not in keys:
            rows.append(
                _row(
                    Status.FAIL,
                    subject,
                    f"no config.json directly under s3://{bucket}/{prefix}: vLLM loads a model from the "
                    "folder holding its config.json and weights",
                    f"point {path} at the folder that holds config.json",
                )
            )
            continue
        safetensors = any(k.endswith(".safetensors") for k in keys)
        if path in streamed and not safetensors and not listed.get("IsTruncated"):
            rows.append(
                _row(
                    Status.FAIL,
                    subject,
                    f"no *.safetensors under s3://{bucket}/{prefix}: the runai-streamer model store "
                    "loads safetensors weights only",
                    "upload the checkpoint as safetensors, or set model_store.kind to 's3-mountpoint' "
                    "or 'fsx-lustre'",
                )
            )
            continue
        if bucket_region != region:
            rows.append(
                _row(
                    Status.WARN,
                    subject,
                    f"bucket {bucket} is in {bucket_region}, the tier in {region}: the weights are read "
                    "across regions (inter-region data transfer on every load)",
                    f"copy the weights to a bucket in {region}",
                )
            )
            continue
        rows.append(
            _row(
                Status.PASS,
                subject,
                f"{len(keys)}{'+' if listed.get('IsTruncated') else ''} object(s) in {bucket_region}",
            )
        )
    return rows
