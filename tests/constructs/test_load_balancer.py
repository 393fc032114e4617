"""The load-balancer protocol: InferenceAlb and InferenceNlb both implement it, and share its code."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from gpufarm.config import IngressConfig
from gpufarm.config.model import LoadBalancerKind, NlbConfig, WafConfig
from gpufarm.constructs import InferenceAlb, InferenceNlb
from gpufarm.constructs.load_balancer import GATEWAY_TARGET_GROUP, InferenceLoadBalancer, LoadBalancer
from gpufarm.core.endpoints import HEALTH_PATH, ROUTER, Endpoint
from gpufarm.k8s.binding import target_group_binding
from tests.constructs.helpers import CLUSTER_NAME, imported_cluster, manifest_of, new_stack, new_vpc, ref

VLLM_PORT = 8000
GATEWAY_PORT = 4000
NAMESPACE = "gpufarm"


def endpoint(model: str, *, share: str | None = None, weight: int | None = None, **fields: Any) -> Endpoint:
    defaults: dict[str, Any] = {
        "service": f"vllm-{model}" if share is None else f"vllm-{model}-{share}",
        "namespace": NAMESPACE,
        "port": VLLM_PORT,
        "health_check_path": HEALTH_PATH,
        "rule_priority": 10 + len(model),
        "listener_port": 9000 + len(model),
    }
    return Endpoint(model=model, share=share, weight=weight, **{**defaults, **fields})


ENDPOINTS = [
    endpoint("qwen"),
    endpoint("llama", share="h100", weight=3),
    endpoint("llama", share="l40s", weight=1),
]
"""One plain model, and one split 3:1 into two shares (one rule or listener, two target groups)."""


def build(
    kind: LoadBalancerKind, endpoints: list[Endpoint] = ENDPOINTS, *, legacy: dict[str, Any] | None = None
) -> InferenceLoadBalancer:
    """The load balancer of `kind` for `endpoints`, or for the per-model keywords in `legacy`."""
    stack = new_stack(f"{kind.value.title()}Protocol")
    vpc = new_vpc(stack)
    common: dict[str, Any] = {"vpc": vpc, "target_port": VLLM_PORT, "cluster_name": CLUSTER_NAME}
    chosen = legacy or {"endpoints": endpoints}
    if kind is LoadBalancerKind.NLB:
        config = IngressConfig(kind=kind, waf=WafConfig(enabled=False), nlb=NlbConfig(tls=False))
        return InferenceNlb(stack, "Ingress", config=config, **common, **chosen)
    return InferenceAlb(stack, "Ingress", config=IngressConfig(), **common, **chosen)


@pytest.mark.parametrize("kind", list(LoadBalancerKind))
def test_both_load_balancers_implement_the_protocol(kind: LoadBalancerKind) -> None:
    lb = build(kind)
    assert isinstance(lb, LoadBalancer)
    assert lb.kind is kind
    assert type(lb) is {LoadBalancerKind.ALB: InferenceAlb, LoadBalancerKind.NLB: InferenceNlb}[kind]


@pytest.mark.parametrize("kind", list(LoadBalancerKind))
def test_bind_default_builds_the_same_binding_on_either(kind: LoadBalancerKind) -> None:
    lb = build(kind)
    stack = lb.node.scope
    cluster = imported_cluster(stack)  # type: ignore[arg-type]
    with pytest.raises(ValueError) as error:
        lb.bind_default(cluster=cluster, namespace=NAMESPACE, service="gateway")
    assert (
        str(error.value) == "bind_default() needs route_default_to() first: there is no default target group"
    )
    target_group = lb.route_default_to(port=GATEWAY_PORT, health_check_path="/health/readiness")
    binding = lb.bind_default(cluster=cluster, namespace=NAMESPACE, service="gateway")
    assert binding.node.id == "Binding-Default-Route"
    template = Template.from_stack(stack)  # type: ignore[arg-type]
    [doc] = manifest_of(template, binding)
    expected = target_group_binding(
        name="gateway",
        namespace=NAMESPACE,
        service_name="gateway",
        service_port=GATEWAY_PORT,
        target_group_arn="TARGET_GROUP",
    )
    assert doc["spec"]["targetGroupARN"] == ref(target_group)
    assert {**doc, "spec": {**doc["spec"], "targetGroupARN": "TARGET_GROUP"}} == json.loads(
        json.dumps(expected)
    )
    # The gateway's target group is keyed apart from the models' for the alarms and the dashboard.
    assert set(lb.target_group_full_names()) == {"qwen", "llama/h100", "llama/l40s", GATEWAY_TARGET_GROUP}


@pytest.mark.parametrize("kind", list(LoadBalancerKind))
def test_endpoints_build_what_the_per_model_dicts_built(kind: LoadBalancerKind) -> None:
    legacy: dict[str, Any] = {"weights": {"llama": {"h100": 3, "l40s": 1}}}
    if kind is LoadBalancerKind.NLB:
        legacy["listeners"] = {"qwen": 9004, "llama": 9005}
    else:
        legacy["model_names"] = ["qwen", "llama"]
        legacy["rule_priorities"] = {"qwen": 14, "llama": 15}
    from_dicts = Template.from_stack(build(kind, legacy=legacy).node.scope).to_json()  # type: ignore[arg-type]
    from_endpoints = Template.from_stack(build(kind).node.scope).to_json()  # type: ignore[arg-type]
    assert from_endpoints == from_dicts


@pytest.mark.parametrize("kind", list(LoadBalancerKind))
def test_bind_endpoints_binds_each_service_in_its_target_group(kind: LoadBalancerKind) -> None:
    lb = build(kind)
    cluster = imported_cluster(lb.node.scope)  # type: ignore[arg-type]
    bindings = lb.bind_endpoints(cluster=cluster, endpoints=ENDPOINTS)
    assert list(bindings) == ["qwen", "llama/h100", "llama/l40s"]
    template = Template.from_stack(lb.node.scope)  # type: ignore[arg-type]
    groups = {
        "qwen": lb.target_groups["qwen"],
        **{f"llama/{g}": t for g, t in lb.weighted_target_groups["llama"].items()},
    }
    for e in ENDPOINTS:
        [doc] = manifest_of(template, bindings[e.key])
        assert (doc["metadata"]["namespace"], doc["spec"]["serviceRef"]) == (
            NAMESPACE,
            {"name": e.service, "port": VLLM_PORT},
        )
        assert doc["spec"]["targetGroupARN"] == ref(groups[e.key])


def test_the_alb_sends_a_routed_endpoint_to_its_router() -> None:
    routed = endpoint(
        "qwen",
        service="vllm-qwen-router",
        port=ROUTER.port,
        health_check_path=ROUTER.health_check_path,
        health_check_port=ROUTER.health_check_port,
        router=ROUTER,
    )
    alb = build(LoadBalancerKind.ALB, [routed])
    assert isinstance(alb, InferenceAlb)
    assert alb.routed == {"qwen": ROUTER}
    target_group = alb.target_groups["qwen"]
    assert (target_group.port, target_group.health_check_path, target_group.health_check_port) == (
        ROUTER.port,
        "/ready",
        str(ROUTER.health_check_port),
    )


@pytest.mark.parametrize(
    ("kind", "legacy", "field"),
    [
        (LoadBalancerKind.ALB, {"model_names": ["qwen"]}, "model_names"),
        (LoadBalancerKind.ALB, {"weights": {"llama": {"h100": 1}}}, "weights"),
        (LoadBalancerKind.NLB, {"listeners": {"qwen": 9000}}, "listeners"),
    ],
)
def test_endpoints_and_the_per_model_dicts_exclude_each_other(
    kind: LoadBalancerKind, legacy: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError) as error:
        build(kind, legacy={**legacy, "endpoints": ENDPOINTS})
    assert str(error.value) == f"'{field}' must be empty when 'endpoints' is given (read from it), got both"
