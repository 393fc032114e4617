"""Checks of where weights are read from: the FSx model store and the S3 buckets the tier names."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpufarm.config.errors import ConfigIssue
from gpufarm.config.fsx_capacity import fsx_required_gib, is_valid_fsx_capacity
from gpufarm.config.model import FSX_THROUGHPUT_PER_TIB, S3_URI, Engine, ModelStoreKind, TierConfig
from gpufarm.config.vllm_flags import flag_args, long_form
from gpufarm.core.s3 import split_s3_uri
from gpufarm.core.weights import STREAMER_FLAGS, pod_gpu_counts

STREAMER_ENGINE_REASONS: dict[Engine, str] = {
    Engine.SGLANG: "SGLang 0.5.23 has the loader (--load-format runai_streamer), but its S3 backend "
    "is the wheel's optional 'runai' extra (runai-model-streamer[s3]); the 'all' extra SGLang's "
    "image installs brings the streamer without runai-model-streamer-s3",
    Engine.TRTLLM: "TensorRT-LLM has no streaming loader: its LoadFormat is AUTO, DUMMY or "
    "VISION_ONLY (tensorrt_llm/llmapi/llm_args.py)",
}
"""Why an engine other than vLLM cannot stream `s3://` weights, read from its pinned release.

SGLang: the sglang-0.5.23 wheel's `sglang/srt/configs/load_config.py` has
`LoadFormat.RUNAI_STREAMER`, and its METADATA says `Requires-Dist: runai-model-streamer[azure,gcs,s3]`
only for `extra == "runai"`; `extra == "all"` pulls `sglang[diffusion]`, which requires
`runai_model_streamer>=0.15.7` with no extra. The S3 reader is the separate package
`runai-model-streamer-s3` (the `s3` extra of runai-model-streamer 0.15.7). SGLang's
`docker/Dockerfile` installs `python[${BUILD_TYPE}]` with `BUILD_TYPE=all`.
TensorRT-LLM: `class LoadFormat(Enum)` in `tensorrt_llm/llmapi/llm_args.py`
(NVIDIA/TensorRT-LLM@fcd3f316) lists AUTO and DUMMY (VISION_ONLY in later releases), nothing
that reads object storage."""


def _model_store(cfg: TierConfig) -> Iterator[ConfigIssue]:
    store = cfg.model_store
    if store.kind is ModelStoreKind.RUNAI_STREAMER:
        yield from _streamer(cfg)
        return
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


def _streamer(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """The streamed models: vLLM, one node per replica, flags gpufarm sets, buffers that fit."""
    limit = cfg.model_store.streamer.memory_limit_gib
    for i, model in enumerate(cfg.models):
        if not model.is_s3:
            continue  # Hugging Face weights download from the Hub whatever the store
        where = f"models[{i}]"
        if model.engine is not Engine.VLLM:
            yield ConfigIssue(
                path=f"{where}.engine",
                message=f"must be 'vllm' for {model.name!r} while model_store.kind is 'runai-streamer' "
                f"({STREAMER_ENGINE_REASONS[model.engine]}), got {model.engine.value!r}",
            )
        if model.pipeline_parallel > 1:
            yield ConfigIssue(
                path=f"{where}.pipeline_parallel",
                message=f"must be 1 for {model.name!r} while model_store.kind is 'runai-streamer' "
                "(gpufarm streams weights into single-node replicas; a multi-node model reads them "
                f"through 's3-mountpoint' or 'fsx-lustre'), got {model.pipeline_parallel}",
            )
        for found in flag_args(model.extra_args):
            flag = long_form(found.flag)
            if flag in STREAMER_FLAGS:
                yield ConfigIssue(
                    path=f"{where}.extra_args[{found.index}]",
                    message=f"must not set {flag} while model_store.kind is 'runai-streamer' "
                    f"(gpufarm sets it from model_store.streamer), got {found.arg!r}",
                )
        gpus = pod_gpu_counts(model)[-1]
        if limit is not None and gpus * limit >= model.memory_gib:
            yield ConfigIssue(
                path="model_store.streamer.memory_limit_gib",
                message=f"must leave the engine room in the memory of {where} ({model.name!r}): "
                f"{gpus} engine processes x {limit:g} GiB = {gpus * limit:g} GiB of buffers is not "
                f"below its memory_gib {model.memory_gib}, got {limit:g}",
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
