"""Where `s3://` weights are read from: Mountpoint for S3, FSx for Lustre, or the Run:ai Model Streamer."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from gpufarm.config.sections.values import _Model


class ModelStoreKind(StrEnum):
    """Where vLLM reads `s3://` weights from."""

    S3_MOUNTPOINT = "s3-mountpoint"
    FSX_LUSTRE = "fsx-lustre"
    RUNAI_STREAMER = "runai-streamer"


FSX_THROUGHPUT_PER_TIB = (125, 250, 500, 1000)
"""PERSISTENT_2 throughput tiers, MB/s per TiB of storage."""


class FsxLustreConfig(_Model):
    """An FSx for Lustre PERSISTENT_2 file system that imports the model bucket."""

    import_path: str | None = Field(
        None, description="S3 prefix imported into the file system ('s3://bucket/prefix/')."
    )
    storage_capacity_gib: int | None = Field(
        None, description="1200, 2400 or a multiple of 2400 GiB (default: sized from the models)."
    )
    throughput_per_tib: int = Field(250, description="MB/s per TiB: 125, 250, 500 or 1000.")
    headroom: float = Field(
        1.3, ge=1.0, le=10.0, description="Capacity sized as the models' weights_gib times this factor."
    )
    data_compression: Literal["LZ4", "NONE"] = Field("LZ4", description="Lustre data compression.")
    auto_import: bool = Field(True, description="Import new, changed and deleted S3 objects automatically.")


class RunaiStreamerConfig(_Model):
    """vLLM's Run:ai Model Streamer reading `s3://` weights straight from S3 (`--load-format runai_streamer`).

    Its two settings are the loader's `--model-loader-extra-config` keys of vLLM 0.31.0
    (`vllm/model_executor/model_loader/runai_streamer_loader.py`: `concurrency`, `memory_limit`).
    Only `s3://` weights stream; Hugging Face weights still download from the Hub, as with every
    store. vLLM only, single-node replicas only (the config check says why for the others).
    """

    concurrency: int | None = Field(
        None,
        ge=1,
        le=256,
        description="Reader threads (S3 clients) per engine process (default: the streamer's own, "
        "8 for object storage).",
    )
    # At least 1 GiB: the buffer must hold the largest chunk the streamer reads (8 MiB per read
    # from object storage by default; runai-model-streamer docs/src/env-vars.md,
    # RUNAI_STREAMER_CHUNK_BYTESIZE), or it refuses to start (RunaiStreamerMemoryLimitException).
    memory_limit_gib: float | None = Field(
        None,
        ge=1,
        le=1024,
        description="CPU buffer of each engine process (one per GPU), GiB (default: half the "
        "model's memory_gib, shared among its GPUs).",
    )


class ModelStoreConfig(_Model):
    """Where `s3://` weights are read from: Mountpoint for S3, FSx for Lustre, or the Run:ai streamer."""

    kind: ModelStoreKind = Field(ModelStoreKind.S3_MOUNTPOINT, description="The model store.")
    fsx: FsxLustreConfig = Field(default_factory=FsxLustreConfig, description="FSx for Lustre (fsx-lustre).")
    streamer: RunaiStreamerConfig = Field(
        default_factory=RunaiStreamerConfig, description="Run:ai Model Streamer (runai-streamer)."
    )
