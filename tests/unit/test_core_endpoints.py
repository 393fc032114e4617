"""The endpoint of each model, share or router: the one answer the load balancers and the gateway read."""

from __future__ import annotations

import pytest

from gpufarm.config import TierConfig, load_preset
from gpufarm.config.model import (
    ModelConfig,
    PrefillDecodeConfig,
    ServingConfig,
    default_route_priority,
)
from gpufarm.core.endpoints import (
    ENVOY_READY_PORT,
    HEALTH_PATH,
    ROUTER,
    ROUTER_PORT,
    Endpoint,
    by_model,
    endpoints_of,
    model_endpoints,
    services_of,
    weights_of,
)
from gpufarm.k8s import gateway as gw

from .factories import SHARES, make_enterprise, split

SERVING = ServingConfig(namespace="inference", port=8000)


def model(**fields: object) -> ModelConfig:
    return ModelConfig.model_validate({"name": "qwen", "weights": "Qwen/Qwen3-8B", **fields})


@pytest.fixture(scope="module")
def shared() -> TierConfig:
    """The enterprise tier with its 70B model split 3:1 over an H100 class and an L40S pool."""
    return make_enterprise(split())


def test_a_plain_model_is_reached_at_its_own_service_on_the_vllm_port() -> None:
    (endpoint,) = model_endpoints(model(), SERVING)
    assert endpoint == Endpoint(
        model="qwen",
        service="vllm-qwen",
        namespace="inference",
        port=8000,
        health_check_path=HEALTH_PATH,
        rule_priority=default_route_priority("qwen"),
    )
    # The load balancer checks vLLM's health on the traffic port; nothing picks the pod but it.
    assert (endpoint.health_check_port, endpoint.router, endpoint.weight) == (None, None, None)
    assert (endpoint.key, endpoint.path_prefix) == ("qwen", "/qwen")
    assert endpoint.url == "http://vllm-qwen.inference.svc.cluster.local:8000/v1"


def test_route_priority_and_listener_port_come_from_the_model() -> None:
    (endpoint,) = model_endpoints(model(route_priority=7, listener_port=9001), SERVING)
    assert (endpoint.rule_priority, endpoint.listener_port) == (7, 9001)


def test_a_multi_node_model_is_reached_through_its_leaders_service() -> None:
    (endpoint,) = model_endpoints(model(pipeline_parallel=2), SERVING)
    # Not vllm-qwen: the LeaderWorkerSet's headless Service of that name reaches the workers too.
    assert endpoint.service == "vllm-qwen-leader"
    assert endpoint.url == "http://vllm-qwen-leader.inference.svc.cluster.local:8000/v1"


def test_kv_cache_routing_puts_the_router_in_front() -> None:
    (endpoint,) = model_endpoints(model(kv_cache_routing=True), SERVING)
    assert endpoint.router == ROUTER
    assert (endpoint.service, endpoint.port) == ("vllm-qwen-router", ROUTER_PORT)
    # Envoy's readiness listener, not the traffic port: the target group checks the router.
    assert (endpoint.health_check_path, endpoint.health_check_port) == ("/ready", ENVOY_READY_PORT)
    assert endpoint.url == f"http://vllm-qwen-router.inference.svc.cluster.local:{ROUTER_PORT}/v1"


def test_a_prefill_decode_model_has_one_endpoint_its_router() -> None:
    endpoints = model_endpoints(model(prefill_decode=PrefillDecodeConfig(prefill_replicas=2)), SERVING)
    # Both roles sit behind the router: no role has a Service a load balancer or the gateway calls.
    assert [(e.service, e.port, e.router) for e in endpoints] == [("vllm-qwen-router", ROUTER_PORT, ROUTER)]


def test_each_share_is_an_endpoint_with_its_weight(shared: TierConfig) -> None:
    name = shared.models[1].name
    endpoints = by_model(endpoints_of(shared))[name]
    assert [(e.share, e.service, e.weight) for e in endpoints] == [
        (s["name"], f"vllm-{name}-{s['name']}", s["weight"]) for s in SHARES
    ]
    assert [e.key for e in endpoints] == [f"{name}/{s['name']}" for s in SHARES]
    # The shares split one route: its rule priority, listener port and path are the model's.
    assert {(e.rule_priority, e.listener_port, e.path_prefix) for e in endpoints} == {
        (shared.models[1].rule_priority, shared.models[1].listener_port, f"/{name}")
    }
    assert all(e.port == shared.serving.port and e.router is None for e in endpoints)
    assert weights_of(endpoints_of(shared)) == {name: {"h100": 3, "l40s": 1}}
    assert sum(weights_of(endpoints)[name].values()) == 4


@pytest.mark.parametrize("preset", ["poc", "production", "enterprise"])
def test_every_model_of_a_tier_has_its_endpoints_in_config_order(preset: str) -> None:
    tier = load_preset(preset)
    endpoints = endpoints_of(tier)
    assert list(by_model(endpoints)) == [m.name for m in tier.models]
    keys = [e.key for e in endpoints]
    assert len(keys) == len(set(keys))
    assert {e.namespace for e in endpoints} == {tier.serving.namespace}
    # Each model's endpoint is its router's when it is routed, else its own or its leaders'.
    for m in tier.models:
        (endpoint,) = by_model(endpoints)[m.name]
        expected = (
            f"vllm-{m.name}-router"
            if m.routed
            else f"vllm-{m.name}"
            if m.pipeline_parallel == 1
            else f"vllm-{m.name}-leader"
        )
        assert endpoint.service == expected


def test_services_take_the_shape_the_load_balancers_bind(shared: TierConfig) -> None:
    services = services_of(endpoints_of(shared))
    first, split_model = shared.models[0].name, shared.models[1].name
    assert services[split_model] == {"h100": f"vllm-{split_model}-h100", "l40s": f"vllm-{split_model}-l40s"}
    assert isinstance(services[first], str)
    assert list(services) == [m.name for m in shared.models]


def test_the_gateway_calls_each_endpoint_the_load_balancer_binds(shared: TierConfig) -> None:
    config = gw.litellm_config(shared)
    vllm = [e["litellm_params"] for e in config["model_list"] if e["model_info"]["id"].startswith("vllm-")]
    endpoints = endpoints_of(shared)
    assert [p["api_base"] for p in vllm] == [e.url for e in endpoints]
    # A share's deployment carries the share's weight; a model without shares carries none.
    assert [p.get("weight") for p in vllm] == [e.weight for e in endpoints]
