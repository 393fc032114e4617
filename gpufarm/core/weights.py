"""How a model's `s3://` weights reach its engine: which store, and the Run:ai Model Streamer's settings.

The store is the tier's `model_store.kind`; Hugging Face weights are downloaded from the Hub
whatever it is. With `runai-streamer`, vLLM reads the weights from S3 itself
(`vllm serve s3://bucket/prefix/ --load-format runai_streamer`): no volume, no CSI driver, the
pod's own Pod Identity role. Facts below are those of vLLM 0.31.0
(`vllm/model_executor/model_loader/runai_streamer_loader.py`, `vllm/transformers_utils/runai_utils.py`)
and runai-model-streamer 0.15.7, the version vLLM 0.31.0's `runai` extra asks for
(`runai-model-streamer[s3,gcs,azure]>=0.15.7`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpufarm.config.model import ModelConfig, RunaiStreamerConfig, TierConfig

STREAMER_STORE = "runai-streamer"
"""The `model_store.kind` of the streamer (`ModelStoreKind.RUNAI_STREAMER`; a string here because the
core may not import the config package at import time: its validator imports the core)."""

STREAMER_LOAD_FORMAT = "runai_streamer"
"""vLLM's `--load-format` value for the Run:ai Model Streamer (`LoadConfig.load_format`)."""

STREAMER_FLAGS = ("--load-format", "--model-loader-extra-config")
"""The `vllm serve` flags gpufarm sets on a streamed model (both in upstream-ref vllm@0.31.0.json)."""

GIB = 1024**3


def streams_weights(tier: TierConfig, model: ModelConfig) -> bool:
    """True when the model's engine streams its `s3://` weights from S3 (the `runai-streamer` store)."""
    return tier.model_store.kind == STREAMER_STORE and model.is_s3


def pod_gpu_counts(model: ModelConfig) -> list[int]:
    """GPUs of each kind of pod the model runs (its own, each share's, its prefill pods'), sorted, no repeats.

    Each GPU is one engine process (a tensor-parallel rank), and each process holds a streamer buffer.
    """
    counts = {model.gpus}
    counts.update(share.gpus or model.gpus for share in model.shares)
    if model.prefill_decode is not None:
        counts.add(model.prefill_decode.prefill_gpus_for(model.gpus))
    return sorted(counts)


def streamer_buffer_gib(config: RunaiStreamerConfig, *, memory_gib: float, gpus: int) -> float:
    """The streamer's CPU buffer in each engine process of a pod, GiB.

    `memory_limit_gib` when set; else half the pod's memory shared among its `gpus` processes, so
    the buffers never take more than half of what the container may use. The streamer's own
    default is 40 GB per process (runai-model-streamer 0.15.7 `file_streamer/requests_iterator.py`
    `DEFAULT_MEMORY_LIMIT_STRING`), more than most pods' whole memory limit.
    """
    if config.memory_limit_gib is not None:
        return config.memory_limit_gib
    return memory_gib / (2 * max(gpus, 1))


def streamer_extra_config(config: RunaiStreamerConfig, *, memory_gib: float, gpus: int) -> str:
    """The `--model-loader-extra-config` JSON of a streamed pod with `gpus` GPUs and `memory_gib` of memory.

    `memory_limit` is the buffer (:func:`streamer_buffer_gib`) in bytes, as the loader wants it (an
    integer >= -1); `concurrency` only when set (the streamer's default for object storage is 8:
    run-ai/runai-model-streamer `docs/src/env-vars.md`, RUNAI_STREAMER_CONCURRENCY);
    `distributed` with more than one GPU, so the ranks share the reading instead of each reading
    every file (the loader passes it to `runai_safetensors_weights_iterator`). Keys are the
    loader's `allowed_keys`: `distributed`, `concurrency`, `memory_limit`.
    """
    extra: dict[str, object] = {}
    if config.concurrency is not None:
        extra["concurrency"] = config.concurrency
    if gpus > 1:
        extra["distributed"] = True
    extra["memory_limit"] = int(streamer_buffer_gib(config, memory_gib=memory_gib, gpus=gpus) * GIB)
    return json.dumps(extra, separators=(",", ":"), sort_keys=True)
