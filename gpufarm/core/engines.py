"""The inference servers a model can run on, each described once: image, flags, health, limits.

`models[].engine` picks one (docs/decisions/0060-serving-engines.md). Everything that depends on
the engine reads its :class:`EngineSpec` from :data:`ENGINES`: the container command and
arguments (`k8s/serving.py`), the probes and the load balancers' health checks (through
`core/endpoints.py`), where the server writes on a read-only root (:attr:`EngineSpec.cache_env`),
the flag list `extra_args` is checked against (`config/engine_flags.py`), and what the engine
cannot do, refused at config time (`config/checks/serving.py`).

Facts about each release come from its own files:

- vLLM 0.31.0: the `vllm-0.31.0` wheel (upstream-ref `vllm@0.31.0.json`; `core/gpu_health.py`).
- SGLang 0.5.23: the `sglang-0.5.23` wheel. Flags: `sglang/srt/arg_groups/fields/*.py`
  (`model_path` with alias `--model`, `tp_size` as `--tp-size`/`--tensor-parallel-size`,
  `context_length`, `max_running_requests`, `mem_fraction_static`, `served_model_name`,
  `enable_metrics`). Endpoints: `sglang/srt/entrypoints/http_server.py`: `GET /ready` answers
  200 while the server is up and not paused or shutting down, 503 otherwise (`is_ready()` in
  `managers/tokenizer_manager.py`); `GET /health` is 503 while starting and otherwise, by
  default (`SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION`), generates one token and answers 503 when
  no token comes back within 20 s. `--enable-metrics` mounts Prometheus' ASGI app at
  `/metrics` on the server's own port (`add_prometheus_middleware`, `utils/common.py`). Caches:
  `SGLANG_CACHE_DIR` (default `~/.cache/sglang`), under which SGLang points Triton, Inductor,
  CUDA and FlashInfer's JIT caches (`third_party_cache_defaults`, `srt/environ.py`).
- TensorRT-LLM 1.2.1 (`trtllm-serve`): NVIDIA/TensorRT-LLM `tensorrt_llm/commands/serve.py` and
  `tensorrt_llm/serve/openai_server.py` as a public code index holds them (commits 00209af and
  0005772; the 1.2.1 wheel could not be downloaded, see gpufarm/data/trtllm_serve_flags.yaml).
  `GET /health` answers 200, or 503 when the executor is unhealthy (`_check_health`); `/metrics`
  is a JSON list of iteration statistics, not Prometheus text; Prometheus metrics are mounted at
  `/prometheus/metrics` only when the LLM arguments set `return_perf_metrics` (`mount_metrics`),
  which `trtllm-serve` reads from the YAML file of `--config`/`--extra_llm_api_options`. The
  model's name in responses is the model argument, or its directory's name for a local path:
  there is no flag to rename it. There is no `--dtype` or `--quantization` option: precision
  and quantization come from the checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    # Annotations only: the validator imports this module, and importing the config here would
    # start `gpufarm.config` while this module is half-initialised. Engines are keyed by the
    # value of `gpufarm.config.model.Engine`, a StrEnum, which looks them up as its string.
    from gpufarm.config.model import ModelConfig

TRTLLM_CONFIG_FILE: Final = "/tmp/gpufarm-trtllm-serve.yaml"
"""The `--extra_llm_api_options` file gpufarm's `trtllm-serve` container writes before it starts
the server, on the pod's `/tmp` volume: it turns on `return_perf_metrics`, without which it serves no
Prometheus metrics."""

TRTLLM_CONFIG: Final = "return_perf_metrics: true\n"


@dataclass(frozen=True, kw_only=True)
class Limitation:
    """A model setting an engine cannot serve, and why; refused at config time."""

    setting: str
    """The model field that asks for it (`pipeline_parallel`, `prefill_decode`, ...)."""
    reason: str
    """Why the engine cannot do it, in a clause that follows 'because'."""

    def applies(self, model: ModelConfig) -> bool:
        """Whether `model` asks for what the engine cannot do."""
        if self.setting == "pipeline_parallel":
            return model.pipeline_parallel > 1
        if self.setting == "prefill_decode":
            return model.prefill_decode is not None
        if self.setting == "kv_cache_routing":
            return model.kv_cache_routing
        if self.setting == "quantization":
            return model.quantization is not None
        if self.setting == "dtype":
            return model.dtype != "auto"
        raise ValueError(f"'setting' must be a model field a limitation reads, got {self.setting!r}")


MULTI_NODE_VLLM_ONLY = (
    "gpufarm runs multi-node replicas as LeaderWorkerSets of vLLM over Ray "
    "(docs/decisions/0023-multi-node-serving.md); that path is vLLM's"
)
PREFILL_DECODE_VLLM_ONLY = (
    "gpufarm's prefill/decode path is the llm-d router with vLLM's NixlConnector "
    "(docs/decisions/0026-prefill-decode.md), which only vLLM speaks"
)
KV_ROUTING_VLLM_ONLY = (
    "the KV-cache-aware endpoint picker scores pods on vLLM's metrics "
    "(vllm:kv_cache_usage_perc, vllm:num_requests_waiting), which this engine does not publish"
)


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    """One inference server: its image, how a model's settings map to its flags, its endpoints and limits."""

    engine: str
    """The value of `models[].engine` that selects it."""
    title: str
    """The engine's name in messages and docs ('SGLang')."""
    cli: str
    """Its server command as its documentation names it ('sglang serve')."""
    image_key: str
    """Its row in gpufarm/data/images.yaml."""
    command: tuple[str, ...]
    """The container command; the arguments of :meth:`args` follow it."""
    model_flag: str | None
    """The flag that names the weights, or None when they are the first positional argument."""
    host_flag: str
    port_flag: str
    tensor_parallel_flag: str
    context_length_flag: str
    max_seqs_flag: str
    memory_fraction_flag: str
    revision_flag: str
    served_name_flag: str | None
    """None: the server has no flag to rename the model (see :meth:`reported_name`)."""
    dtype_flag: str | None
    quantization_flag: str | None
    pipeline_parallel_flag: str
    """Reserved: gpufarm owns pipeline parallelism (multi-node), so `extra_args` may not set it."""
    always: tuple[str, ...]
    """Arguments every container of the engine gets (metrics on, backend)."""
    reserved: tuple[str, ...]
    """More flags gpufarm owns besides those above (aliases of the same settings, the config file)."""
    health_path: str
    """Liveness: answers 200 while the server works; a hang fails it."""
    readiness_path: str
    """Readiness and the load balancers' health checks: 200 only while it should get requests."""
    metrics_path: str
    """Where it serves Prometheus text on its port."""
    cache_env: tuple[tuple[str, str], ...]
    """Variables that keep its caches under HOME (`{home}` is replaced) on a read-only root."""
    limitations: tuple[Limitation, ...]

    def args(self, model: ModelConfig, *, source: str, port: int, gpus: int) -> list[str]:
        """The server's arguments for `model`: weights, address, parallelism, limits, then `extra_args`.

        `source` is what the server loads (a Hugging Face repo id, or the mounted S3 weights),
        `port` the port it listens on, `gpus` its tensor-parallel size.
        """
        args = [self.model_flag, source] if self.model_flag else [source]
        if self.served_name_flag:
            args += [self.served_name_flag, model.api_model_name]
        args += [
            self.host_flag,
            "0.0.0.0",
            self.port_flag,
            str(port),
            self.tensor_parallel_flag,
            str(gpus),
            self.context_length_flag,
            str(model.max_model_len),
            self.memory_fraction_flag,
            f"{model.gpu_memory_utilization:g}",
        ]
        if self.dtype_flag:
            args += [self.dtype_flag, model.dtype]
        if model.revision:
            args += [self.revision_flag, model.revision]
        if model.quantization and self.quantization_flag:
            args += [self.quantization_flag, model.quantization]
        if model.max_num_seqs:
            args += [self.max_seqs_flag, str(model.max_num_seqs)]
        return [*args, *self.always, *model.extra_args]

    @property
    def owned_flags(self) -> tuple[str, ...]:
        """Every flag gpufarm sets or reserves for this engine; `extra_args` must not set them."""
        flags = [
            self.model_flag,
            self.host_flag,
            self.port_flag,
            self.tensor_parallel_flag,
            self.pipeline_parallel_flag,
            self.context_length_flag,
            self.max_seqs_flag,
            self.memory_fraction_flag,
            self.revision_flag,
            self.served_name_flag,
            self.dtype_flag,
            self.quantization_flag,
            *(a for a in self.always if a.startswith("-")),
            *self.reserved,
        ]
        return tuple(f for f in flags if f)

    def reported_name(self, model: ModelConfig, source: str) -> str:
        """The model name the server reports and answers to: `served_model_name` where the engine
        has the flag, else what it derives from `source` (a local path's directory name)."""
        if self.served_name_flag:
            return model.api_model_name
        return source.rstrip("/").rsplit("/", 1)[-1] if source.startswith("/") else source

    def limitation(self, setting: str) -> Limitation | None:
        """The engine's limitation on `setting`, or None when it serves it."""
        return next((lim for lim in self.limitations if lim.setting == setting), None)


VLLM = EngineSpec(
    engine="vllm",
    title="vLLM",
    cli="vllm serve",
    image_key="vllm",
    command=("vllm", "serve"),
    model_flag=None,
    host_flag="--host",
    port_flag="--port",
    tensor_parallel_flag="--tensor-parallel-size",
    context_length_flag="--max-model-len",
    max_seqs_flag="--max-num-seqs",
    memory_fraction_flag="--gpu-memory-utilization",
    revision_flag="--revision",
    served_name_flag="--served-model-name",
    dtype_flag="--dtype",
    quantization_flag="--quantization",
    pipeline_parallel_flag="--pipeline-parallel-size",
    always=(),
    reserved=("--model", "--download-dir"),
    health_path="/health",
    readiness_path="/health",
    metrics_path="/metrics",
    cache_env=(
        ("XDG_CACHE_HOME", "{home}/.cache"),
        ("XDG_CONFIG_HOME", "{home}/.config"),
        ("VLLM_CACHE_ROOT", "{home}/.cache/vllm"),
        ("VLLM_CONFIG_ROOT", "{home}/.config/vllm"),
        ("TRITON_CACHE_DIR", "{home}/.cache/triton"),
        ("TORCHINDUCTOR_CACHE_DIR", "{home}/.cache/torchinductor"),
    ),
    limitations=(),
)

SGLANG = EngineSpec(
    engine="sglang",
    title="SGLang",
    cli="sglang serve",
    image_key="sglang",
    command=("sglang", "serve"),
    model_flag="--model-path",
    host_flag="--host",
    port_flag="--port",
    tensor_parallel_flag="--tp-size",
    context_length_flag="--context-length",
    max_seqs_flag="--max-running-requests",
    memory_fraction_flag="--mem-fraction-static",
    revision_flag="--revision",
    served_name_flag="--served-model-name",
    dtype_flag="--dtype",
    quantization_flag="--quantization",
    pipeline_parallel_flag="--pp-size",
    always=("--enable-metrics",),
    reserved=("--model", "--tensor-parallel-size", "--pipeline-parallel-size", "--config"),
    health_path="/health",
    readiness_path="/ready",
    metrics_path="/metrics",
    cache_env=(
        ("XDG_CACHE_HOME", "{home}/.cache"),
        ("XDG_CONFIG_HOME", "{home}/.config"),
        ("SGLANG_CACHE_DIR", "{home}/.cache/sglang"),
        ("TRITON_CACHE_DIR", "{home}/.cache/sglang/triton"),
        ("TORCHINDUCTOR_CACHE_DIR", "{home}/.cache/sglang/inductor"),
        ("FLASHINFER_WORKSPACE_BASE", "{home}/.cache/sglang"),
    ),
    limitations=(
        Limitation(setting="pipeline_parallel", reason=MULTI_NODE_VLLM_ONLY),
        Limitation(setting="prefill_decode", reason=PREFILL_DECODE_VLLM_ONLY),
        Limitation(setting="kv_cache_routing", reason=KV_ROUTING_VLLM_ONLY),
    ),
)

TRTLLM = EngineSpec(
    engine="trtllm",
    title="TensorRT-LLM",
    cli="trtllm-serve",
    image_key="trtllm",
    # The server reads `return_perf_metrics` only from a YAML file; the container writes it to
    # its /tmp volume and then execs trtllm-serve with the arguments as "$@".
    command=(
        "/bin/sh",
        "-c",
        f"printf '{TRTLLM_CONFIG.strip()}\\n' > {TRTLLM_CONFIG_FILE} && exec trtllm-serve \"$@\"",
        "trtllm-serve",
    ),
    model_flag=None,
    host_flag="--host",
    port_flag="--port",
    tensor_parallel_flag="--tp_size",
    context_length_flag="--max_seq_len",
    max_seqs_flag="--max_batch_size",
    memory_fraction_flag="--kv_cache_free_gpu_memory_fraction",
    revision_flag="--revision",
    served_name_flag=None,
    dtype_flag=None,
    quantization_flag=None,
    pipeline_parallel_flag="--pp_size",
    always=("--backend", "pytorch", "--extra_llm_api_options", TRTLLM_CONFIG_FILE),
    reserved=(
        "--tensor_parallel_size",
        "--pipeline_parallel_size",
        "--free_gpu_memory_fraction",
        "--config",
    ),
    health_path="/health",
    readiness_path="/health",
    metrics_path="/prometheus/metrics",
    cache_env=(
        ("XDG_CACHE_HOME", "{home}/.cache"),
        ("XDG_CONFIG_HOME", "{home}/.config"),
        ("TRITON_CACHE_DIR", "{home}/.cache/triton"),
        ("TORCHINDUCTOR_CACHE_DIR", "{home}/.cache/torchinductor"),
    ),
    limitations=(
        Limitation(setting="pipeline_parallel", reason=MULTI_NODE_VLLM_ONLY),
        Limitation(setting="prefill_decode", reason=PREFILL_DECODE_VLLM_ONLY),
        Limitation(setting="kv_cache_routing", reason=KV_ROUTING_VLLM_ONLY),
        Limitation(
            setting="quantization",
            reason="trtllm-serve has no quantization option: it serves the quantization the "
            "checkpoint was made with (a TensorRT Model Optimizer checkpoint)",
        ),
        Limitation(
            setting="dtype",
            reason="trtllm-serve has no dtype option: it serves the checkpoint's precision",
        ),
    ),
)

ENGINES: MappingProxyType[str, EngineSpec] = MappingProxyType(
    {spec.engine: spec for spec in (VLLM, SGLANG, TRTLLM)}
)
"""Every engine gpufarm runs, by `models[].engine`."""


def engine_of(model: ModelConfig) -> EngineSpec:
    """The engine `model` runs on."""
    return ENGINES[model.engine]
