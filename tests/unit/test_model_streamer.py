"""The runai-streamer model store: config refusals, the vLLM pod it renders, its network policy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufarm.config import ConfigError, ModelConfig, RunaiStreamerConfig, TierConfig
from gpufarm.config.checks.model_store import STREAMER_ENGINE_REASONS
from gpufarm.config.model import Engine
from gpufarm.core.weights import pod_gpu_counts, streamer_buffer_gib, streams_weights
from gpufarm.k8s.labels import model_selector
from gpufarm.k8s.network_policy import network_policies
from gpufarm.k8s.serving import MODELS_DIR, SERVICE_ACCOUNT, vllm_deployment
from gpufarm.k8s.storage import stream_weights
from tests.netpol import Endpoint, allowed

from .factories import make_production, production_document
from .upstream_ref import vllm_arg_issues


def vllm_model(index: int, **fields: Any) -> dict[str, Any]:
    """The production preset's models, all on vLLM (the engine the streamer serves; the preset runs
    models[1] on SGLang), with model `index` changed."""
    models = [{k: v for k, v in m.items() if k != "engine"} for m in production_document()["models"]]
    models[index] = {**models[index], **fields}
    return {"models": models}


STREAMER = {"model_store": {"kind": "runai-streamer"}, **vllm_model(1)}
GIB = 1024**3


def _issues(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_production(STREAMER, *parts)
    return [str(issue) for issue in caught.value.issues]


def _streamed() -> TierConfig:
    return make_production(STREAMER)


INVALID = [
    pytest.param(
        vllm_model(1, engine="sglang"),
        "models[1].engine: must be 'vllm' for 'qwen3-32b-batch' while model_store.kind is 'runai-streamer' "
        f"({STREAMER_ENGINE_REASONS[Engine.SGLANG]}), got 'sglang'",
        id="sglang",
    ),
    pytest.param(
        # Fixed replicas: trtllm 1.2.1 exports no queue series for the preset's KEDA trigger.
        vllm_model(1, engine="trtllm", autoscaling=None, replicas=1),
        "models[1].engine: must be 'vllm' for 'qwen3-32b-batch' while model_store.kind is 'runai-streamer' "
        "(TensorRT-LLM has no streaming loader: its LoadFormat is AUTO, DUMMY or VISION_ONLY "
        "(tensorrt_llm/llmapi/llm_args.py)), got 'trtllm'",
        id="trtllm",
    ),
    pytest.param(
        vllm_model(0, extra_args=["--load-format=safetensors"]),
        "models[0].extra_args[0]: must not set --load-format while model_store.kind is 'runai-streamer' "
        "(gpufarm sets it from model_store.streamer), got '--load-format=safetensors'",
        id="load-format-in-extra-args",
    ),
    pytest.param(
        vllm_model(1, extra_args=["--model_loader_extra_config", "{}"]),
        "models[1].extra_args[0]: must not set --model-loader-extra-config while model_store.kind is "
        "'runai-streamer' (gpufarm sets it from model_store.streamer), got '--model_loader_extra_config'",
        id="extra-config-in-extra-args",
    ),
    pytest.param(
        {"model_store": {"kind": "runai-streamer", "streamer": {"memory_limit_gib": 40}}},
        # llama-3-3-70b: 4 GPUs, memory_gib 160.
        "model_store.streamer.memory_limit_gib: must leave the engine room in the memory of models[0] "
        "('llama-3-3-70b'): 4 engine processes x 40 GiB = 160 GiB of buffers is not below its "
        "memory_gib 160, got 40",
        id="buffers-fill-the-pod",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_streamer_input(override: dict[str, Any], expected: str) -> None:
    assert _issues(override) == [expected]


def test_sglang_reason_names_the_missing_s3_backend() -> None:
    reason = STREAMER_ENGINE_REASONS[Engine.SGLANG]
    assert "runai-model-streamer-s3" in reason and "0.5.23" in reason


def test_a_multi_node_model_cannot_stream() -> None:
    from .factories import make_enterprise

    with pytest.raises(ConfigError) as caught:
        make_enterprise({"model_store": {"kind": "runai-streamer"}})
    pp = [str(i) for i in caught.value.issues if ".pipeline_parallel:" in str(i)]
    assert pp and all(
        "must be 1 for" in m
        and "while model_store.kind is 'runai-streamer' (gpufarm streams weights into single-node "
        "replicas; a multi-node model reads them through 's3-mountpoint' or 'fsx-lustre'), got "
        in m
        for m in pp
    )


def test_hugging_face_weights_are_untouched_by_the_store() -> None:
    tier = make_production(STREAMER, vllm_model(0, weights="Qwen/Qwen3-8B", weights_gib=None))
    model = tier.models[0]
    assert not streams_weights(tier, model)
    deployment = vllm_deployment(
        model, tier.serving, pool_name="l40s", region="us-east-1", streamer=tier.model_store.streamer
    )
    (engine,) = deployment["spec"]["template"]["spec"]["containers"]
    assert engine["args"][0] == "Qwen/Qwen3-8B"
    assert "--load-format" not in engine["args"]


@pytest.mark.parametrize("index", [0, 1])
def test_streamed_deployment(index: int) -> None:
    tier = _streamed()
    model = tier.models[index]
    deployment = vllm_deployment(
        model, tier.serving, pool_name="l40s", region="eu-west-1", streamer=tier.model_store.streamer
    )
    pod = deployment["spec"]["template"]["spec"]
    (engine,) = pod["containers"]
    args = engine["args"]
    assert args[0] == model.weights and f"{MODELS_DIR}/{model.name}" not in args
    assert args[-4:-1] == ["--load-format", "runai_streamer", "--model-loader-extra-config"]
    extra = json.loads(args[-1])
    # Default buffer: half the pod's memory over its engine processes (one per GPU).
    assert extra["memory_limit"] == int(model.memory_gib / (2 * model.gpus) * GIB)
    assert extra.get("distributed", False) is (model.gpus > 1)
    assert "concurrency" not in extra
    assert vllm_arg_issues(args, "0.31.0") == []
    assert {"name": "AWS_REGION", "value": "eu-west-1"} in engine["env"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert "weights" not in [v["name"] for v in pod["volumes"]]
    assert "weights" not in [m["name"] for m in engine["volumeMounts"]]


def test_explicit_streamer_settings_reach_the_loader() -> None:
    tier = make_production(
        {"model_store": {"kind": "runai-streamer", "streamer": {"concurrency": 32, "memory_limit_gib": 2}}},
        vllm_model(1),
    )
    model = tier.models[1]
    deployment = vllm_deployment(
        model, tier.serving, pool_name="l40s", region="us-east-1", streamer=tier.model_store.streamer
    )
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert json.loads(args[-1]) == {"concurrency": 32, "distributed": True, "memory_limit": 2 * GIB}


def test_buffer_defaults_to_half_the_memory_per_process() -> None:
    assert streamer_buffer_gib(RunaiStreamerConfig(), memory_gib=96, gpus=2) == 24
    assert streamer_buffer_gib(RunaiStreamerConfig(memory_limit_gib=3), memory_gib=96, gpus=2) == 3


def test_pod_gpu_counts_cover_shares_and_prefill_pods() -> None:
    model = ModelConfig(
        name="m",
        weights="s3://b/m/",
        gpus=2,
        shares=[{"node_pool": "a", "gpus": 4}, {"node_pool": "b"}],
        prefill_decode={"prefill_gpus": 8},
    )
    assert pod_gpu_counts(model) == [2, 4, 8]
    assert pod_gpu_counts(ModelConfig(name="m", weights="s3://b/m/", gpus=2)) == [2]


def test_stream_weights_refuses_what_it_cannot_stream() -> None:
    tier = _streamed()
    model = tier.models[0]
    with pytest.raises(ValueError) as caught:
        stream_weights(
            {"containers": [{"name": "vllm", "args": ["x"]}]},
            model=model,
            config=RunaiStreamerConfig(),
            gpus=1,
            region="us-east-1",
            local_path="/models/other",
            service_account="vllm",
        )
    assert str(caught.value) == "'pod_spec' must have a container 'vllm' reading '/models/other'"
    hf = model.model_copy(update={"weights": "Qwen/Qwen3-8B"})
    with pytest.raises(ValueError) as caught:
        stream_weights(
            {"containers": []},
            model=hf,
            config=RunaiStreamerConfig(),
            gpus=1,
            region="us-east-1",
            local_path="/models/x",
            service_account="vllm",
        )
    assert str(caught.value) == "'model' must have s3:// weights to stream them, got 'Qwen/Qwen3-8B'"


def test_a_streamed_pod_reaches_s3_and_the_pod_identity_agent() -> None:
    pod = Endpoint(ip="10.0.9.2", namespace="gpufarm", labels=model_selector("llama-3-3-70b"))
    streamed = network_policies(_streamed())
    mounted = network_policies(make_production())
    s3 = Endpoint(ip="52.216.1.1")  # an S3 address: the gateway endpoint routes to S3's public ranges
    agent = Endpoint(ip="169.254.170.23")
    assert allowed(streamed, pod, s3, 443)
    assert allowed(streamed, pod, agent, 80)
    assert not allowed(mounted, pod, s3, 443)
    assert not allowed(mounted, pod, agent, 80)


def test_the_core_names_the_store_as_the_config_does() -> None:
    from gpufarm.config import ModelStoreKind
    from gpufarm.core.weights import STREAMER_STORE

    assert ModelStoreKind(STREAMER_STORE) is ModelStoreKind.RUNAI_STREAMER
