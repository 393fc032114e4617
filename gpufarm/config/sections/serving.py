"""The models vLLM serves: placement, shares, prefill/decode, autoscaling, and the settings they share."""

from __future__ import annotations

import zlib
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator

from gpufarm import images as image_table
from gpufarm.config.sections.gateway import BedrockTargetConfig
from gpufarm.config.sections.values import (
    ChartVersion,
    DnsLabel,
    EngineImageRef,
    ImageRef,
    SecretRef,
    _Model,
)


def default_route_priority(model_name: str) -> int:
    """A listener-rule priority derived from the model name alone (1000-40999).

    Priorities must not depend on a model's position in the list: removing a model would shift
    the others onto priorities the old rules still hold, and the deploy would fail.
    """
    return 1000 + zlib.crc32(model_name.encode()) % 40000


class Engine(StrEnum):
    """The inference server that runs a model's replicas (each engine's facts: `gpufarm.core.engines`)."""

    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"


TGI_REFUSED = (
    "must be one of 'vllm', 'sglang', 'trtllm': Hugging Face Text Generation Inference is in "
    "maintenance mode upstream since 2025-12-11 (minor bug fixes and documentation only; its last "
    "release is v3.3.7) and Hugging Face recommends vLLM or SGLang instead "
    "(https://huggingface.co/docs/text-generation-inference/en/index), so gpufarm does not run it; "
    "use 'vllm' or 'sglang', got 'tgi'"
)
"""Why `engine: tgi` is refused (docs/decisions/0060-serving-engines.md)."""


class ModelAutoscalingConfig(_Model):
    """KEDA scaling of one model on its vLLM metrics in Amazon Managed Prometheus."""

    min_replicas: int = Field(1, ge=0, le=100, description="Fewest replicas; 0 only for non-critical models.")
    max_replicas: int = Field(4, ge=1, le=100, description="Most replicas (gpu_limit must cover them).")
    queue_target: float | None = Field(
        5, gt=0, description="Waiting requests per replica to aim for (vllm:num_requests_waiting)."
    )
    kv_cache_target: float | None = Field(
        None, gt=0, le=1, description="KV-cache usage per replica to aim for (vllm:kv_cache_usage_perc)."
    )
    polling_interval_seconds: int = Field(15, ge=5, le=600, description="How often KEDA queries.")
    cooldown_seconds: int = Field(
        900, ge=60, le=86400, description="Idle time before scaling to zero (min_replicas 0 only)."
    )
    scale_down_stabilization_seconds: int = Field(
        600, ge=0, le=3600, description="Time a lower replica count must hold before pods are removed."
    )
    expected_busy_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Share of the month spent at `max_replicas` (the rest at `min_replicas`), for the "
        "expected figure of `gpufarm cost`; 0.5 is no measurement.",
    )


class KvTransport(StrEnum):
    """How a prefill pod's KV cache reaches the decode pod (NIXL backends)."""

    TCP = "tcp"
    EFA = "efa"


class PrefillDecodeConfig(_Model):
    """Disaggregated serving of one model: prefill pods beside the decode pods (`replicas`).

    The llm-d router picks a decode pod for every request and, when the prompt's uncached part is
    long enough, a prefill pod too; the decode pod's routing sidecar sends the prompt there and
    vLLM's NixlConnector moves the KV cache to the decode GPU.
    """

    prefill_replicas: int = Field(
        1,
        ge=1,
        le=100,
        description="Prefill pods (fixed); the model's replicas/autoscaling size the decode pods.",
    )
    prefill_gpus: int | None = Field(
        None, ge=1, description="GPUs per prefill pod, its tensor-parallel size (default: the model's gpus)."
    )
    min_uncached_tokens: int = Field(
        512,
        ge=1,
        le=1_048_576,
        description="Prompt tokens not in the decode pod's prefix cache from which a request is "
        "prefilled on a prefill pod; shorter prompts are served whole by the decode pod.",
    )
    block_size: Literal[16, 32, 64, 128] = Field(
        128, description="KV-cache block size, tokens (--block-size on both roles; NIXL needs them equal)."
    )
    kv_transport: KvTransport = Field(
        KvTransport.TCP,
        description="'tcp' (UCX over the pod network, stock image) or 'efa' (libfabric over EFA; "
        "needs efa_image and EFA node groups).",
    )
    efa_image: ImageRef | None = Field(
        None,
        description="vLLM image with NIXL's libfabric backend and the EFA libraries (kv_transport 'efa').",
    )

    prefill_autoscaling: ModelAutoscalingConfig | None = Field(
        None,
        description="Scale the prefill pods with KEDA on their own vLLM metrics (replaces "
        "prefill_replicas); empty: prefill_replicas pods.",
    )

    def prefill_gpus_for(self, model_gpus: int) -> int:
        """GPUs of one prefill pod: `prefill_gpus`, else the model's `gpus`."""
        return self.prefill_gpus or model_gpus

    @property
    def prefill_replica_bounds(self) -> tuple[int, int]:
        """(fewest, most) prefill pods: the autoscaling bounds, else `prefill_replicas` twice."""
        if self.prefill_autoscaling is not None:
            return self.prefill_autoscaling.min_replicas, self.prefill_autoscaling.max_replicas
        return self.prefill_replicas, self.prefill_replicas


MAX_SHARES = 5
"""Shares one model may have: a load balancer's forward action names at most five target groups."""


class ModelShareConfig(_Model):
    """Part of a model's replicas on one pool or capacity class, behind its own weighted target group."""

    name: DnsLabel | None = Field(
        None,
        description="Share name, unique within the model; its Deployment and Service are "
        "`vllm-<model>-<name>` (default: its node_pool or capacity_class).",
    )
    node_pool: str | None = Field(
        None, description="GPU pool or node group the share runs on (set this or capacity_class)."
    )
    capacity_class: DnsLabel | None = Field(
        None, description="Capacity class the share runs on (set this or node_pool)."
    )
    replicas: int = Field(1, ge=0, le=100, description="vLLM pods of this share.")
    gpus: int | None = Field(
        None,
        ge=1,
        description="GPUs per replica on this hardware, vLLM's tensor-parallel size "
        "(default: the model's gpus).",
    )
    weight: int = Field(
        1,
        ge=0,
        le=999,
        description="Weight of the share's target group in the model's forward action "
        "(0 sends it no new requests).",
    )

    @property
    def share_name(self) -> str:
        """The share's name: `name`, else its capacity class, else its node pool."""
        return self.name or self.capacity_class or self.node_pool or ""


class ModelConfig(_Model):
    """A model served by vLLM."""

    name: DnsLabel = Field(description="Name used for Kubernetes objects and the route prefix.")
    weights: str = Field(
        description="Hugging Face repo id ('Qwen/Qwen3-8B') or S3 URI ('s3://bucket/prefix/')."
    )
    engine: Engine = Field(Engine.VLLM, description="Inference server of the model's replicas.")
    served_model_name: str | None = Field(
        None, description="The `model` clients send (default: the model's `name`)."
    )
    revision: str | None = Field(
        None, description="Hugging Face revision (commit, branch or tag) to pin the weights."
    )
    hf_token_secret: SecretRef | None = Field(
        None, description="Secrets Manager secret holding a Hugging Face token (gated models)."
    )
    node_pool: str | None = Field(None, description="GPU pool the model runs on (default: the first pool).")
    gpus: int = Field(1, ge=1, description="GPUs per replica; vLLM's tensor-parallel size.")
    replicas: int = Field(1, ge=0, le=100, description="vLLM pods.")
    max_model_len: int = Field(
        8192, ge=256, le=1_048_576, description="Context length in tokens (--max-model-len)."
    )
    gpu_memory_utilization: float = Field(
        0.90, gt=0.1, le=0.98, description="GPU memory share vLLM may use (--gpu-memory-utilization)."
    )
    max_num_seqs: int | None = Field(
        None, ge=1, le=4096, description="Concurrent sequences per replica (--max-num-seqs)."
    )
    dtype: Literal["auto", "half", "float16", "bfloat16", "float32"] = Field(
        "auto", description="Weight and activation precision (--dtype)."
    )
    quantization: str | None = Field(
        None, pattern=r"^[a-z0-9_-]+$", description="--quantization (e.g. 'fp8', 'awq')."
    )
    extra_args: list[str] = Field([], description="More `vllm serve` arguments, appended as given.")
    cpu: float = Field(4, gt=0, le=192, description="CPU cores requested per replica.")
    memory_gib: int = Field(32, ge=4, le=2048, description="Memory requested per replica, GiB.")
    startup_timeout_seconds: int = Field(
        1800, ge=60, le=7200, description="Time allowed to download and load weights."
    )
    route_priority: int | None = Field(
        None,
        ge=1,
        le=50000,
        description="Listener-rule priority of the model's route (default: derived from the name).",
    )
    critical: bool = Field(
        True, description="Latency-critical: never on spot, never scaled to zero (unless overridden)."
    )
    allow_spot: bool = Field(
        False, description="Let a critical model run on a pool that allows spot (explicit override)."
    )
    weights_gib: float | None = Field(
        None, gt=0, le=20000, description="Size of the weights on disk, GiB (sizes the FSx file system)."
    )
    autoscaling: ModelAutoscalingConfig | None = Field(
        None, description="Scale replicas with KEDA (replaces `replicas`); empty: fixed replicas."
    )
    target_control_max_concurrency: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Concurrent requests the Target Optimizer sends one replica "
        "(default: max_num_seqs, else 64).",
    )
    capacity_class: DnsLabel | None = Field(
        None,
        description="Run on any node group or pool of this class (reserved base first, then burst); "
        "instead of node_pool.",
    )
    pipeline_parallel: int = Field(
        1,
        ge=1,
        le=16,
        description="Nodes per replica (vLLM pipeline parallelism over a LeaderWorkerSet); gpus is per node.",
    )
    listener_port: int | None = Field(
        None, ge=1, le=65535, description="NLB listener port of the model (ingress.kind 'nlb')."
    )
    kv_cache_routing: bool = Field(
        False,
        description="Route requests through a KV-cache-aware endpoint picker (Gateway API "
        "Inference Extension, standalone) instead of the load balancer's own pod choice.",
    )
    prefill_decode: PrefillDecodeConfig | None = Field(
        None,
        description="Serve disaggregated: prefill pods beside the decode pods, behind the llm-d "
        "router (vLLM NixlConnector); empty: every pod prefills and decodes its own requests.",
    )
    bedrock: BedrockTargetConfig | Literal["none"] | None = Field(
        None,
        description="Bedrock model the gateway falls back to, or 'none' to opt out "
        "(required while fallback is enabled).",
    )
    shares: list[ModelShareConfig] = Field(
        [],
        description="Split the replicas over pools or classes, each share behind its own weighted "
        "target group (2-5 shares; instead of node_pool, capacity_class and replicas).",
    )
    ttft_p99_seconds: float = Field(
        2.0,
        gt=0,
        le=600,
        description="Time-to-first-token objective, seconds: the p99 above which the model's "
        "Prometheus alert fires (tiers with observability.prometheus).",
    )

    @field_validator("engine", mode="before")
    @classmethod
    def _not_tgi(cls, value: object) -> object:
        if isinstance(value, str) and value.lower() in ("tgi", "text-generation-inference"):
            raise ValueError(TGI_REFUSED.replace("got 'tgi'", f"got {value!r}"))
        return value

    @property
    def bedrock_target(self) -> BedrockTargetConfig | None:
        """The Bedrock fallback of this model; None when it opts out or names none."""
        return self.bedrock if isinstance(self.bedrock, BedrockTargetConfig) else None

    @property
    def routed(self) -> bool:
        """True when the model's traffic passes its own router (KV-cache-aware or prefill/decode)."""
        return self.kv_cache_routing or self.prefill_decode is not None

    @property
    def prefill_gpu_demand(self) -> int:
        """GPUs the model's prefill pods may hold at most (0 without prefill/decode)."""
        return self.prefill_gpus_at(peak=True)

    def prefill_gpus_at(self, *, peak: bool) -> int:
        """GPUs of the model's prefill pods at their fewest (base) or most (`peak`); 0 without them."""
        pd = self.prefill_decode
        if pd is None:
            return 0
        return pd.prefill_replica_bounds[1 if peak else 0] * pd.prefill_gpus_for(self.gpus)

    @property
    def max_replicas(self) -> int:
        """The most replicas the model can run: the autoscaling maximum, else `replicas` (its shares' sum)."""
        if self.shares:
            return sum(share.replicas for share in self.shares)
        return self.autoscaling.max_replicas if self.autoscaling else self.replicas

    def as_share(self, share: ModelShareConfig) -> ModelConfig:
        """The model as one of its shares serves it: the share's placement, replicas and GPUs.

        Everything else (weights, vLLM flags, resources, fallback) is the model's. The result
        has no shares, fixed replicas of one node each and no KV-cache router, as a share's
        Deployment runs (shares exclude autoscaling, pipeline parallelism and the router).
        """
        return self.model_copy(
            update={
                "node_pool": share.node_pool,
                "capacity_class": share.capacity_class,
                "replicas": share.replicas,
                "gpus": share.gpus or self.gpus,
                "shares": [],
                "autoscaling": None,
                "pipeline_parallel": 1,
                "kv_cache_routing": False,
            }
        )

    def parts(self) -> list[tuple[str | None, ModelConfig]]:
        """How the model is deployed: `[(None, self)]`, or `(share name, as_share(share))` per share."""
        if not self.shares:
            return [(None, self)]
        return [(share.share_name, self.as_share(share)) for share in self.shares]

    @property
    def max_concurrency(self) -> int:
        """TARGET_CONTROL_MAX_CONCURRENCY for this model's replicas."""
        return self.target_control_max_concurrency or self.max_num_seqs or 64

    @property
    def is_s3(self) -> bool:
        """True when the weights come from S3 (mounted with Mountpoint) rather than Hugging Face."""
        return self.weights.startswith("s3://")

    @property
    def rule_priority(self) -> int:
        """The listener-rule priority of this model's route."""
        return self.route_priority or default_route_priority(self.name)

    @property
    def api_model_name(self) -> str:
        """The model name clients put in the request body."""
        return self.served_model_name or self.name


class ServingConfig(_Model):
    """Settings shared by every vLLM deployment."""

    namespace: DnsLabel = Field("gpufarm", description="Namespace of the serving workloads.")
    vllm_image: ImageRef = Field(
        image_table.reference("vllm"), description="vLLM OpenAI-compatible server image, pinned by digest."
    )
    sglang_image: EngineImageRef = Field(
        image_table.reference("sglang"), description="SGLang server image (models with engine 'sglang')."
    )
    trtllm_image: EngineImageRef = Field(
        image_table.reference("trtllm"),
        description="TensorRT-LLM release image with trtllm-serve (models with engine 'trtllm').",
    )
    aws_cli_image: ImageRef = Field(
        image_table.reference("aws-cli"),
        description="Image of the init container that reads the Hugging Face token secret.",
    )
    port: int = Field(8000, ge=1024, le=65535, description="Port vLLM listens on in the pod.")
    allowed_client_namespaces: list[DnsLabel] = Field(
        [],
        description="Namespaces whose pods may call the gateway and each model's Service in the "
        "cluster (NetworkPolicy ingress; empty: only the load balancer and gpufarm's own pods).",
    )

    def engine_image(self, engine: Engine) -> str:
        """The image the replicas of an `engine` model run."""
        images = {
            Engine.VLLM: self.vllm_image,
            Engine.SGLANG: self.sglang_image,
            Engine.TRTLLM: self.trtllm_image,
        }
        return images[engine]


class AutoscalingConfig(_Model):
    """KEDA, which scales models that set `autoscaling` (Karpenter then adds or removes nodes)."""

    keda_chart_version: ChartVersion = Field("2.18.1", description="KEDA Helm chart version, pinned.")
    namespace: DnsLabel = Field("keda", description="Namespace of the KEDA operator.")
