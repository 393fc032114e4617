"""Checks of where weights are read from: the FSx model store and the S3 buckets the tier names."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpufarm.config.errors import ConfigIssue
from gpufarm.config.fsx_capacity import fsx_required_gib, is_valid_fsx_capacity
from gpufarm.config.model import FSX_THROUGHPUT_PER_TIB, S3_URI, ModelStoreKind, TierConfig
from gpufarm.core.s3 import split_s3_uri


def _model_store(cfg: TierConfig) -> Iterator[ConfigIssue]:
    store = cfg.model_store
    if store.kind is not ModelStoreKind.FSX_LUSTRE:
        return
    fsx = store.fsx
    if fsx.import_path is None or not S3_URI.match(fsx.import_path):
        yield ConfigIssue(
            path="model_store.fsx.import_path",
            message="must be an S3 URI such as 's3://bucket/models/' when model_store.kind is "
            f"'fsx-lustre'{'; it is not set' if fsx.import_path is None else f', got {fsx.import_path!r}'}",
        )
        return
    bucket, prefix = split_s3_uri(fsx.import_path)
    for i, model in enumerate(cfg.models):
        if not model.is_s3:
            continue
        m_bucket, m_prefix = split_s3_uri(model.weights)
        if m_bucket != bucket or not m_prefix.startswith(prefix) or m_prefix == prefix:
            yield ConfigIssue(
                path=f"models[{i}].weights",
                message=f"must be a folder under model_store.fsx.import_path ({fsx.import_path!r}) "
                f"when the model store is FSx, got {model.weights!r}",
            )
        if fsx.storage_capacity_gib is None and model.weights_gib is None:
            yield ConfigIssue(
                path=f"models[{i}].weights_gib",
                message="is required to size the FSx file system (or set "
                "model_store.fsx.storage_capacity_gib); it is not set",
            )
    if fsx.throughput_per_tib not in FSX_THROUGHPUT_PER_TIB:
        yield ConfigIssue(
            path="model_store.fsx.throughput_per_tib",
            message=f"must be one of {', '.join(map(str, FSX_THROUGHPUT_PER_TIB))} (MB/s per TiB), "
            f"got {fsx.throughput_per_tib}",
        )
    capacity = fsx.storage_capacity_gib
    if capacity is not None:
        if not is_valid_fsx_capacity(capacity):
            yield ConfigIssue(
                path="model_store.fsx.storage_capacity_gib",
                message=f"must be 1200, 2400 or a multiple of 2400 (GiB, PERSISTENT_2), got {capacity}",
            )
        elif capacity < (needed := fsx_required_gib(cfg)):
            yield ConfigIssue(
                path="model_store.fsx.storage_capacity_gib",
                message=f"must hold the models' weights with headroom ({needed:g} GiB = sum of "
                f"weights_gib x {fsx.headroom:g}), got {capacity}",
            )


_IPV4_LIKE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


_S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")


_S3_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3")


def s3_bucket_problem(bucket: str) -> str | None:
    """Why S3 forbids `bucket` as a general purpose bucket name, or None when it allows it.

    The rules of "General purpose bucket naming rules"
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3-63
    characters of a-z, 0-9, '.', '-'; starting and ending with a letter or digit; no two
    adjacent periods; not formatted as an IP address; none of the prefixes `xn--`, `sthree-`,
    `amzn-s3-demo-`; none of the suffixes `-s3alias`, `--ol-s3`, `.mrap`, `--x-s3`.
    """
    if not 3 <= len(bucket) <= 63:
        return f"3 to 63 characters ({len(bucket)})"
    if not re.fullmatch(r"[a-z0-9.-]+", bucket):
        return "only lowercase letters, digits, '.' and '-'"
    if not (bucket[0].isalnum() and bucket[-1].isalnum()):
        return "a letter or digit first and last"
    if ".." in bucket:
        return "no two adjacent periods"
    if _IPV4_LIKE.match(bucket):
        return "not an IP address"
    for prefix in _S3_RESERVED_PREFIXES:
        if bucket.startswith(prefix):
            return f"not the reserved prefix {prefix!r}"
    for suffix in _S3_RESERVED_SUFFIXES:
        if bucket.endswith(suffix):
            return f"not the reserved suffix {suffix!r}"
    return None


def _s3_uris(cfg: TierConfig) -> Iterator[tuple[str, str]]:
    """(path, URI) of every S3 location the tier names."""
    for i, model in enumerate(cfg.models):
        if model.is_s3:
            yield f"models[{i}].weights", model.weights
    import_path = cfg.model_store.fsx.import_path
    if cfg.model_store.kind is ModelStoreKind.FSX_LUSTRE and import_path is not None:
        yield "model_store.fsx.import_path", import_path


def _s3_buckets(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for path, uri in _s3_uris(cfg):
        if not S3_URI.match(uri):
            continue  # not an S3 URI at all: reported with the field
        bucket = uri[len("s3://") :].split("/", 1)[0]
        problem = s3_bucket_problem(bucket)
        if problem is not None:
            yield ConfigIssue(
                path=path,
                message=f"must name a bucket S3 allows ({problem}; S3 general purpose bucket "
                f"naming rules), got bucket {bucket!r} in {uri!r}",
            )
