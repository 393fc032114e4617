"""`cluster.provisioning: sagemaker`: the preset, what the endpoint plan reads from it, and every
invalid input with its message."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import pytest
import yaml

from gpufarm.config import ConfigError, TierConfig, build_tier, load_preset, merge
from gpufarm.config.loader import PRESET_DIR
from gpufarm.core import sagemaker as sm
from gpufarm.core.instances import GPU_FAMILIES, NVIDIA_GPU_FAMILIES

from .factories import poc_document


@cache
def _document() -> dict[str, Any]:
    preset: dict[str, Any] = yaml.safe_load((PRESET_DIR / "sagemaker-poc.yaml").read_text(encoding="utf-8"))
    return preset


def document() -> dict[str, Any]:
    return copy.deepcopy(_document())


def make(*parts: dict[str, Any]) -> TierConfig:
    doc = document()
    for part in parts:
        doc = merge(doc, part)
    return build_tier(doc)


def model(index: int, **fields: Any) -> dict[str, Any]:
    """An override of the preset's models with model `index` changed."""
    models = document()["models"]
    models[index] = {**models[index], **fields}
    return {"models": models}


def every_model(**fields: Any) -> dict[str, Any]:
    """An override of the preset's models with `fields` changed on each."""
    return {"models": [{**m, **fields} for m in document()["models"]]}


def section(**fields: Any) -> dict[str, Any]:
    return {"sagemaker": fields}


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make(*parts)
    return [str(issue) for issue in caught.value.issues]


def test_the_preset_puts_two_models_on_one_endpoint() -> None:
    tier = load_preset("sagemaker-poc")
    assert sm.endpoint_name(tier) == "gpufarm-sagemaker-poc"
    components = sm.components_of(tier)
    assert [(c.name, c.gpus, c.copies, c.min_copies, c.max_copies) for c in components] == [
        ("sagemaker-poc-qwen3-8b", 1, 1, 1, 2),
        ("sagemaker-poc-qwen3-4b", 1, 1, 0, 2),
    ]
    assert components[0].environment["OPTION_TENSOR_PARALLEL_DEGREE"] == "1"
    assert components[1].scales_to_zero and not components[0].scales_to_zero


def test_a_model_without_scaling_keeps_its_replicas_as_fixed_copies() -> None:
    tier = make({"sagemaker": {"scaling": []}}, model(0, replicas=2))
    first = sm.components_of(tier)[0]
    assert (first.copies, first.min_copies, first.max_copies) == (2, 2, 2)


def test_s3_weights_are_the_model_id_and_the_prefix_the_role_reads() -> None:
    tier = make(model(0, weights="s3://models-bucket/qwen3-8b"))
    first = sm.components_of(tier)[0]
    assert first.environment["HF_MODEL_ID"] == "s3://models-bucket/qwen3-8b"
    assert first.weights_s3 == ("models-bucket", "qwen3-8b/")


def test_a_trtllm_model_runs_the_tensorrt_llm_image() -> None:
    tier = make(model(1, engine="trtllm"))
    component = sm.components_of(tier)[1]
    assert component.environment["OPTION_ROLLING_BATCH"] == "trtllm"
    assert sm.lmi_image(component.engine, "us-east-1").endswith(
        "djl-inference:0.33.0-tensorrtllm0.21.0-cu128"
    )


MODE = "with cluster.provisioning 'sagemaker'"
NVIDIA = ", ".join(sorted(NVIDIA_GPU_FAMILIES & set(GPU_FAMILIES)))
NOT_OFFERED = (
    "sagemaker.instance_type: must be an instance type SageMaker offers for real-time endpoints (the "
    "`ml.*` list in gpufarm/data/sagemaker.yaml, from the SageMaker API's ProductionVariantInstanceType), "
    "got {!r}"
)

INVALID: list[Any] = [
    pytest.param(
        section(instance_type="ml.g6e.3xlarge"), NOT_OFFERED.format("ml.g6e.3xlarge"), id="not-offered"
    ),
    pytest.param(section(instance_type="g6e.xlarge"), NOT_OFFERED.format("g6e.xlarge"), id="ec2-name"),
    pytest.param(
        section(instance_type="ml.m5.xlarge"),
        "sagemaker.instance_type: must have NVIDIA GPUs the Large Model Inference container serves on "
        f"(ml. families {NVIDIA}), got 'ml.m5.xlarge'",
        id="no-gpu",
    ),
    pytest.param(
        section(instance_type="ml.inf2.xlarge"),
        "sagemaker.instance_type: must have NVIDIA GPUs the Large Model Inference container serves on "
        f"(ml. families {NVIDIA}), got 'ml.inf2.xlarge'",
        id="inferentia",
    ),
    pytest.param(
        model(0, pipeline_parallel=2),
        f"models[0].pipeline_parallel: must be 1 {MODE} (an inference component's copy runs on one "
        "instance), got 2",
        id="multi-node",
    ),
    pytest.param(
        model(0, prefill_decode={}),
        f"models[0].prefill_decode: must be empty {MODE} (a copy prefills and decodes its own requests), "
        "got a prefill_decode section",
        id="prefill-decode",
    ),
    pytest.param(
        model(0, kv_cache_routing=True),
        f"models[0].kv_cache_routing: must be false {MODE} (the endpoint routes requests itself: "
        "sagemaker.routing_strategy), got true",
        id="kv-routing",
    ),
    pytest.param(
        model(1, engine="sglang"),
        f"models[1].engine: must be one of 'vllm', 'trtllm' {MODE} (the engines of the Large Model "
        "Inference containers), got 'sglang'",
        id="engine-lmi-lacks",
    ),
    pytest.param(
        model(0, gpus=8),
        f"models[0].gpus: must be at most 4, the GPUs of one ml.g6.12xlarge, {MODE} (a copy runs on one "
        "instance), got 8",
        id="gpus-beyond-instance",
    ),
    pytest.param(
        model(0, memory_gib=256),
        f"models[0].memory_gib: must be at most 192, the memory of one ml.g6.12xlarge, {MODE}, got 256",
        id="memory-beyond-instance",
    ),
    pytest.param(
        model(0, shares=[{"name": "a", "replicas": 1}, {"name": "b", "replicas": 1}], replicas=0),
        f"models[0].shares: must be empty {MODE} (a model is one inference component; shares split "
        "Kubernetes replicas over node pools), got 2 shares",
        id="k8s-shares",
    ),
    pytest.param(
        model(0, autoscaling={"min_replicas": 1, "max_replicas": 2}),
        f"models[0].autoscaling: must be empty {MODE} (KEDA scales Kubernetes replicas; set the model's "
        "copies in sagemaker.scaling), got an autoscaling section",
        id="k8s-keda",
    ),
    pytest.param(
        model(0, extra_args=["--enforce-eager"]),
        f"models[0].extra_args: must be empty {MODE} (the Large Model Inference container takes no "
        "`vllm serve` arguments), got ['--enforce-eager']",
        id="k8s-vllm-args",
    ),
    pytest.param(
        model(0, hf_token_secret="hf/token"),
        f"models[0].hf_token_secret: must be empty {MODE} (an inference component's environment is plain "
        "text in the template; put gated weights in S3), got 'hf/token'",
        id="k8s-token-secret",
    ),
    pytest.param(
        model(0, listener_port=9000),
        f"models[0].listener_port: must be empty {MODE} (the gateway calls the endpoint, no load balancer "
        "listener reaches the model), got 9000",
        id="k8s-listener-port",
    ),
    pytest.param(
        {"name": "sagemaker-poc-with-a-long-tier-name"}
        | model(0, name="qwen3-8b-instruct-long-name-x", served_model_name="qwen3-8b")
        | {
            "sagemaker": {
                "scaling": [{"model": "qwen3-8b-instruct-long-name-x", "min_copies": 1, "max_copies": 2}]
            }
        },
        "models[0].name: must leave the inference component name '<tier>-<model>' at most 63 characters "
        "(SageMaker's limit), got 'sagemaker-poc-with-a-long-tier-name-qwen3-8b-instruct-long-name-x' "
        "(65 characters)",
        id="component-name-too-long",
    ),
    pytest.param(
        section(initial_instance_count=3),
        "sagemaker.initial_instance_count: must lie between min_instance_count and max_instance_count "
        "(1-2), got 3",
        id="initial-outside-range",
    ),
    pytest.param(
        every_model(gpus=4),
        "sagemaker.initial_instance_count: must hold the copies at deploy (8 GPUs, models' replicas times "
        "gpus) on 4-GPU ml.g6.12xlarge instances, got 1",
        id="copies-at-deploy-do-not-fit",
    ),
    pytest.param(
        {"sagemaker": {"scaling": [{"model": "qwen3-8b", "min_copies": 1, "max_copies": 8}]}},
        "sagemaker.max_instance_count: must hold every model at its most copies (9 GPUs) on 4-GPU "
        "ml.g6.12xlarge instances, got 2",
        id="most-copies-do-not-fit",
    ),
    pytest.param(
        {"sagemaker": {"scaling": [{"model": "llama", "min_copies": 1, "max_copies": 1}]}},
        "sagemaker.scaling[0].model: must name a model (qwen3-8b, qwen3-4b), got 'llama'",
        id="scaling-unknown-model",
    ),
    pytest.param(
        {"sagemaker": {"scaling": [{"model": "qwen3-8b"}, {"model": "qwen3-8b"}]}},
        "sagemaker.scaling: must not name a model twice, got 'qwen3-8b' 2 times",
        id="scaling-twice",
    ),
    pytest.param(
        {"sagemaker": {"scaling": [{"model": "qwen3-8b", "min_copies": 2, "max_copies": 3}]}},
        "sagemaker.scaling[0].max_copies: must give a range min_copies-max_copies holding the model's "
        "replicas (1), got 2-3",
        id="scaling-range-misses-replicas",
    ),
    pytest.param(
        {"fallback": {"enabled": False}},
        "sagemaker.scaling[1].min_copies: must be at least 1 while fallback.enabled is false (a component "
        "at zero copies fails every request until a copy starts, minutes later), got 0",
        id="zero-copies-without-fallback",
    ),
    pytest.param(
        {"environment": {"region": "eu-central-3", "availability_zones": ["eu-central-3a", "eu-central-3b"]}},
        "environment.region: must be a region SageMaker publishes the Large Model Inference images in "
        f"{MODE} ({', '.join(sm.lmi_regions())}), got 'eu-central-3'",
        id="region-without-lmi",
    ),
    pytest.param(
        section(image_digests={"vllm": "sha256:abc"}),
        "sagemaker.image_digests: 'vllm' must be an image digest 'sha256:' followed by 64 hex digits, "
        "got 'sha256:abc'",
        id="digest-malformed",
    ),
    pytest.param(
        section(image_digests={"sglang": "sha256:" + "0" * 64}),
        "sagemaker.image_digests: must name the engines 'vllm', 'trtllm', got 'sglang'",
        id="digest-unknown-engine",
    ),
]


@pytest.mark.parametrize(("part", "message"), INVALID)
def test_invalid_sagemaker_settings_are_refused_with_their_message(
    part: dict[str, Any], message: str
) -> None:
    assert message in issues_of(part)


def test_the_checks_leave_other_provisioning_modes_alone() -> None:
    # The same model settings a sagemaker tier refuses are the poc tier's business otherwise.
    tier = build_tier(merge(poc_document(), {"sagemaker": {"instance_type": "ml.m5.xlarge"}}))
    assert tier.sagemaker.instance_type == "ml.m5.xlarge"


def test_a_multi_node_model_is_refused_once_with_the_modes_reason() -> None:
    # The EKS check ("needs karpenter provisioning") does not add a second, contradicting line.
    assert [i for i in issues_of(model(0, pipeline_parallel=2)) if "pipeline_parallel" in i] == [
        f"models[0].pipeline_parallel: must be 1 {MODE} (an inference component's copy runs on one "
        "instance), got 2"
    ]
