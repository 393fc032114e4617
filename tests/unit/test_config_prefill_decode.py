"""Prefill/decode disaggregation in the tier config: what it accepts, what it rejects, what it costs."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError, TierConfig
from gpufarm.config.model import KvTransport
from gpufarm.core.placement import prefill_decode_efa_devices
from gpufarm.estimate import gpu_allocations

from .factories import enterprise_document, make_enterprise

NO_OPTIMIZER = {"ingress": {"target_optimizer": {"enabled": False}}}
EFA_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-efa:v0.31.0@sha256:" + "e" * 64


def with_model(index: int, **fields: Any) -> dict[str, Any]:
    """An override of one enterprise model (0: the 405B multi-node, 1: the 70B, 2: the batch Qwen)."""
    models = enterprise_document()["models"]
    models[index] = {**models[index], **fields}
    return {"models": models}


def pd(**fields: Any) -> dict[str, Any]:
    return {"prefill_replicas": 2, **fields}


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_enterprise(*parts)
    return [str(issue) for issue in caught.value.issues]


def efa_tier(**fields: Any) -> TierConfig:
    """The 405B's two EFA nodes given to a disaggregated 70B instead (decode and prefill, 8 GPUs each)."""
    models = enterprise_document()["models"]
    models[0] = {
        **models[1],
        "name": "llama-efa",
        "served_model_name": "meta-llama/Llama-3.3-70B-Instruct-EFA",
        "capacity_class": None,
        "node_pool": "h100-multinode",
        "gpus": 8,
        "autoscaling": None,
        "replicas": 1,
        "prefill_decode": pd(prefill_replicas=1, kv_transport="efa", efa_image=EFA_IMAGE, **fields),
    }
    return make_enterprise(NO_OPTIMIZER, {"models": models})


def test_defaults_disaggregate_long_prompts_over_tcp_with_the_stock_image() -> None:
    tier = make_enterprise(NO_OPTIMIZER, with_model(1, prefill_decode={}))
    model = tier.models[1]
    assert model.prefill_decode is not None
    assert model.prefill_decode.kv_transport is KvTransport.TCP
    assert model.prefill_decode.efa_image is None
    assert model.prefill_decode.block_size == 128
    assert model.prefill_decode.min_uncached_tokens == 512
    # One prefill pod of the model's own size, and the model's traffic passes its router.
    assert model.prefill_gpu_demand == model.gpus
    assert model.routed


def test_prefill_pods_may_be_sized_apart_from_decode_pods() -> None:
    model = make_enterprise(NO_OPTIMIZER, with_model(1, prefill_decode=pd(prefill_gpus=2))).models[1]
    assert model.prefill_gpu_demand == 2 * 2  # prefill_replicas x prefill_gpus


def test_prefill_gpus_are_costed_on_the_models_capacity() -> None:
    plain = make_enterprise(NO_OPTIMIZER)
    split = make_enterprise(NO_OPTIMIZER, with_model(1, prefill_decode=pd(prefill_replicas=3)))

    def gpus(tier: TierConfig, which: str) -> int:
        return sum(getattr(a, f"{which}_gpus") for a in gpu_allocations(tier) if a.target.startswith("h100"))

    # Prefill pods run at a fixed count: the same GPUs more at base and at peak.
    extra = 3 * split.models[1].gpus
    assert gpus(split, "base") - gpus(plain, "base") == extra
    assert gpus(split, "peak") - gpus(plain, "peak") == extra


def test_efa_pods_take_the_nodes_efa_interfaces_in_proportion_to_their_gpus() -> None:
    tier = efa_tier()
    # p5.48xlarge: 32 EFA interfaces for 8 GPUs; each pod holds a whole node.
    assert prefill_decode_efa_devices(tier, tier.models[0]) == (32, 32)
    half = efa_tier(prefill_gpus=4)
    assert prefill_decode_efa_devices(half, half.models[0]) == (32, 16)
    assert prefill_decode_efa_devices(tier, tier.models[2]) == (0, 0)  # not disaggregated


def test_autoscaled_prefill_pods_cost_their_fewest_at_base_and_most_at_peak() -> None:
    scaling = {"min_replicas": 1, "max_replicas": 3, "queue_target": 4}
    split = make_enterprise(NO_OPTIMIZER, with_model(1, prefill_decode={"prefill_autoscaling": scaling}))
    plain = make_enterprise(NO_OPTIMIZER)
    model = split.models[1]
    assert (model.prefill_gpus_at(peak=False), model.prefill_gpu_demand) == (1 * 4, 3 * 4)

    def gpus(tier: TierConfig, which: str) -> int:
        return sum(getattr(a, f"{which}_gpus") for a in gpu_allocations(tier) if a.target.startswith("h100"))

    assert gpus(split, "base") - gpus(plain, "base") == 4
    assert gpus(split, "peak") - gpus(plain, "peak") == 12


INVALID: list[Any] = [
    pytest.param(
        (NO_OPTIMIZER, with_model(1, prefill_decode=pd(), kv_cache_routing=True)),
        [
            "models[1].kv_cache_routing: must be false when prefill_decode is set (the prefill/decode "
            "router also scores prefix-cache hits), got true"
        ],
        id="with-kv-cache-routing",
    ),
    pytest.param(
        (NO_OPTIMIZER, with_model(0, prefill_decode=pd())),
        [
            # Its prefill pods would also need GPUs the two reserved nodes do not have.
            "node_groups[1].nodes: must hold the GPUs its models request (32 GPUs; 2 x p5.48xlarge "
            "hold 16), got 2",
            "models[0].prefill_decode: must be empty for a multi-node model (pipeline_parallel > 1): "
            "prefill and decode pods are single-node Deployments, got pipeline_parallel 2",
        ],
        id="multi-node-model",
    ),
    pytest.param(
        (with_model(1, prefill_decode=pd()),),
        [
            "models[1].prefill_decode: must be empty while ingress.target_optimizer.enabled is true "
            "(both choose the pod a request goes to), got a prefill_decode section"
        ],
        id="with-target-optimizer",
    ),
    pytest.param(
        (
            {"ingress": {"kind": "nlb", "target_optimizer": {"enabled": False}, "waf": {"enabled": False}}},
            {"ingress": {"lcu_reservation": None}},
            {
                "models": [
                    {**m, "listener_port": port, **({"prefill_decode": pd()} if i == 1 else {})}
                    for i, (m, port) in enumerate(
                        zip(enterprise_document()["models"], (8443, 9443, 10443), strict=True)
                    )
                ]
            },
        ),
        [
            "models[1].prefill_decode: needs ingress.kind 'alb' (the router's health check is HTTP on "
            "its own port), got 'nlb'"
        ],
        id="nlb",
    ),
    pytest.param(
        (NO_OPTIMIZER, with_model(1, prefill_decode=pd(prefill_gpus=3))),
        [
            "models[1].prefill_decode.prefill_gpus: must be one of 1, 2, 4, 8 (vLLM tensor-parallel "
            "sizes), got 3"
        ],
        id="prefill-gpus-not-a-tensor-parallel-size",
    ),
    pytest.param(
        (
            NO_OPTIMIZER,
            {
                "node_pools": [
                    enterprise_document()["node_pools"][0],
                    {**enterprise_document()["node_pools"][1], "instance_types": ["g6e.12xlarge"]},
                ]
            },
            with_model(2, gpus=2, prefill_decode=pd(prefill_replicas=1, prefill_gpus=8)),
        ),
        [
            "models[2].prefill_decode.prefill_gpus: must fit on one instance of pool 'background' "
            "(at most 4 GPU(s) per instance), got 8"
        ],
        id="prefill-pod-larger-than-a-node",
    ),
    pytest.param(
        (NO_OPTIMIZER, with_model(1, prefill_decode=pd(kv_transport="efa"))),
        [
            "models[1].prefill_decode.efa_image: is required with kv_transport 'efa' (the stock vLLM "
            "image has no EFA libraries for NIXL's libfabric backend), got none",
            "models[1].prefill_decode.kv_transport: 'efa' needs every node the model may land on to "
            "have EFA (node groups with efa: true), got 'efa' with 'h100-base', 'h100-burst'",
        ],
        id="efa-without-image-on-plain-nodes",
    ),
    pytest.param(
        (NO_OPTIMIZER, with_model(1, prefill_decode=pd(efa_image=EFA_IMAGE))),
        [
            "models[1].prefill_decode.efa_image: must be empty with kv_transport 'tcp' (the stock "
            f"vllm_image carries NIXL), got '{EFA_IMAGE}'"
        ],
        id="efa-image-over-tcp",
    ),
    pytest.param(
        (NO_OPTIMIZER, {"serving": {"port": 8200}}, with_model(1, prefill_decode=pd())),
        [
            "serving.port: must differ from 8200 while a model serves prefill/decode (the decode "
            "pods' vLLM listens there), got 8200"
        ],
        id="serving-port-is-the-decode-engine-port",
    ),
    pytest.param(
        (NO_OPTIMIZER, {"serving": {"port": 5600}}, with_model(1, prefill_decode=pd())),
        [
            "serving.port: must differ from 5600 while a model serves prefill/decode (NIXL's side "
            "channel listens there), got 5600"
        ],
        id="serving-port-is-the-nixl-port",
    ),
    pytest.param(
        (NO_OPTIMIZER, with_model(1, prefill_decode=pd(), extra_args=["--block-size=16"])),
        [
            "models[1].extra_args[0]: must not set --block-size on a prefill/decode model (gpufarm "
            "derives it from prefill_decode), got '--block-size=16'"
        ],
        id="block-size-in-extra-args",
    ),
    pytest.param(
        (NO_OPTIMIZER, with_model(1, prefill_decode=pd(prefill_replicas=5))),
        [
            "models[1].capacity_class: must have room for its models (36 GPUs requested from class "
            "'h100', whose node groups and pool limits hold 32), got 'h100'"
        ],
        id="prefill-pods-exceed-the-class",
    ),
    pytest.param(
        (
            NO_OPTIMIZER,
            with_model(
                1,
                prefill_decode=pd(
                    prefill_replicas=2, prefill_autoscaling={"min_replicas": 1, "max_replicas": 2}
                ),
            ),
        ),
        [
            "models[1].prefill_decode.prefill_replicas: must be unset when prefill_autoscaling is set "
            "(KEDA sizes the prefill pods between its min and max), got 2"
        ],
        id="prefill-replicas-with-prefill-autoscaling",
    ),
    pytest.param(
        (
            NO_OPTIMIZER,
            with_model(
                1,
                prefill_decode={
                    "prefill_autoscaling": {"min_replicas": 0, "max_replicas": 2, "queue_target": None}
                },
            ),
        ),
        [
            "models[1].prefill_decode.prefill_autoscaling.min_replicas: must be at least 1 (the picker "
            "sends a long prompt to a prefill pod whenever it disaggregates), got 0",
            "models[1].prefill_decode.prefill_autoscaling: must set queue_target and/or kv_cache_target "
            "(the metrics it scales on), got neither",
        ],
        id="prefill-autoscaling-to-zero-without-targets",
    ),
    pytest.param(
        (
            NO_OPTIMIZER,
            # Grafana reads the Prometheus workspace too: off, to isolate KEDA's refusal.
            {"observability": {"prometheus": {"enabled": False}, "grafana": {"enabled": False}}},
            {
                "models": [
                    {
                        **m,
                        "autoscaling": None,
                        **({"prefill_decode": {"prefill_autoscaling": {}}} if i == 1 else {}),
                    }
                    for i, m in enumerate(enterprise_document()["models"])
                ]
            },
        ),
        [
            "models[1].prefill_decode.prefill_autoscaling: needs observability.prometheus.enabled: true "
            "(KEDA reads vLLM metrics from Amazon Managed Prometheus), got false"
        ],
        id="prefill-autoscaling-without-prometheus",
    ),
    pytest.param(
        (NO_OPTIMIZER, with_model(1, prefill_decode=pd(block_size=24))),
        ["models[1].prefill_decode.block_size: must be one of 16, 32, 64 or 128, got 24"],
        id="block-size-not-allowed",
    ),
    pytest.param(
        (NO_OPTIMIZER, with_model(1, prefill_decode=pd(min_uncached_tokens=0))),
        ["models[1].prefill_decode.min_uncached_tokens: must be >= 1, got 0"],
        id="threshold-zero-never-disaggregates",
    ),
]


@pytest.mark.parametrize(("parts", "expected"), INVALID)
def test_invalid_prefill_decode_is_rejected_with_its_message(
    parts: tuple[dict[str, Any], ...], expected: list[str] | None
) -> None:
    assert issues_of(*parts) == expected
