"""Where a client's request for a model enters the cluster: one endpoint per model or share.

Every consumer that needs "the Service in front of a model" reads an :class:`Endpoint` built here
once from the tier config: the load balancers (a target group and a TargetGroupBinding per
endpoint, a rule or listener per model), the gateway (its vLLM `api_base` per endpoint) and the
monitoring (an alarm per target group). None of them re-derives the Service name, its port or
its health check.

A model's endpoint is, in that order of precedence:

- its router's Service (`vllm-<model>-router`, port :data:`ROUTER_PORT`, health check `/ready`
  on :data:`ENVOY_READY_PORT`) when a router sits in front of its pods: KV-cache-aware routing or
  prefill/decode disaggregation. A prefill/decode model has one endpoint, the router's: its
  prefill and decode roles have no Service of their own (the router's picker reaches their
  pods by label), so nothing outside the cluster addresses a role;
- one endpoint per share (`vllm-<model>-<share>`, weighted) for a model split into shares;
- its leaders' Service (`vllm-<model>-leader`) for a multi-node model;
- its own Service (`vllm-<model>`) otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from gpufarm.config.model import LoadBalancerKind, LoadBalancerScheme, ModelConfig, ServingConfig, TierConfig
from gpufarm.core.engines import engine_of
from gpufarm.core.names import leader_service_name, router_name, workload_name

HEALTH_PATH = "/health"
"""vLLM's health endpoint: the pods' probes and the load balancers' health checks ask it (another
engine's path is its :attr:`gpufarm.core.engines.EngineSpec.readiness_path`)."""

ROUTER_PORT = 8081
"""Envoy's listener for inference requests (the standalone chart's `http` Service port)."""

ENVOY_READY_PORT = 19001
"""Envoy's readiness listener (`/ready`) and its Prometheus statistics (`/stats/prometheus`)."""

ROUTER_READY_PATH = "/ready"
"""Envoy's readiness path on :data:`ENVOY_READY_PORT` (see `k8s/kv_cache_routing.py`, which serves it)."""


def route_prefix(model_name: str) -> str:
    """The ALB path prefix that reaches a model: '/<model>'."""
    return f"/{model_name}"


GATEWAY_LISTENER_PORT = 8088
"""The ALB listener (HTTP, open to the gateway's callers only) the gateway calls models on.

It carries the same `/<model>/*` rules as the client listener, forwarding to the same target
groups, without authentication. On an internet-facing ALB the gateway reaches it through an
internal NLB listening on the same port (:func:`gateway_through_nlb`): see
docs/decisions/0050-gateway-route-balancing.md."""


class GatewayRoute(StrEnum):
    """How the gateway reaches a model's replicas."""

    LOAD_BALANCER = "load-balancer"
    """Through the model's route on the tier's ALB: least outstanding requests, and the Target
    Optimizer's per-replica cap when it is on (the listener :data:`GATEWAY_LISTENER_PORT`)."""
    SERVICE = "service"
    """Straight to the model's Kubernetes Service: kube-proxy picks a ready pod at random."""


def gateway_route(config: TierConfig) -> GatewayRoute:
    """How the tier's gateway reaches its models: one answer for the config, the network policies
    and the stack.

    Through the load balancer on every ALB tier, internal or internet-facing, with or without
    AWS WAF: the ALB balances by least outstanding requests and holds the Target Optimizer's cap.
    An internet-facing ALB's DNS name resolves to public addresses, so there the gateway calls an
    internal NLB in front of the ALB (:func:`gateway_through_nlb`); the web ACL's rate rule
    exempts the VPC's own addresses. An NLB tier keeps the Service route: an NLB balances
    connections, not requests, and has no Target Optimizer.
    """
    if config.ingress.kind is LoadBalancerKind.ALB:
        return GatewayRoute.LOAD_BALANCER
    return GatewayRoute.SERVICE


def gateway_through_nlb(config: TierConfig) -> bool:
    """Whether the gateway reaches the ALB's gateway listener through an internal NLB.

    True for an internet-facing ALB: its DNS name resolves to the public addresses of its nodes,
    and a call to them from the private subnets would leave through NAT. An internal NLB in the
    private subnets, whose target group of type `alb` registers the ALB on
    :data:`GATEWAY_LISTENER_PORT`, keeps the hop inside the VPC.
    """
    ingress = config.ingress
    return (
        gateway_route(config) is GatewayRoute.LOAD_BALANCER
        and ingress.scheme is LoadBalancerScheme.INTERNET_FACING
    )


@dataclass(frozen=True, kw_only=True)
class RouterTarget:
    """Where a model's target group sends traffic when a router sits in front of its pods."""

    port: int
    """The router's traffic port (the target group's port and the binding's Service port)."""
    health_check_port: int
    """The router's own readiness port."""
    health_check_path: str
    """The router's readiness path."""


ROUTER = RouterTarget(
    port=ROUTER_PORT, health_check_port=ENVOY_READY_PORT, health_check_path=ROUTER_READY_PATH
)
"""The router gpufarm runs in front of a routed model (KV-cache-aware or prefill/decode)."""


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """The Service that serves one model, or one share of a model, and how traffic reaches it."""

    model: str
    """The model's name (its route prefix and its Kubernetes names)."""
    share: str | None = None
    """The share's name for a model split into shares; None otherwise."""
    service: str
    """The Kubernetes Service in front of the pods (or of the model's router)."""
    namespace: str
    """The Service's namespace."""
    port: int
    """The Service port traffic enters on: vLLM's, or the router's."""
    health_check_path: str
    """What a load balancer's health check asks: the engine's readiness path (vLLM's `/health`,
    SGLang's `/ready`), or the router's `/ready`."""
    health_check_port: int | None = None
    """Where the health check goes; None for the traffic port (the router has its own)."""
    weight: int | None = None
    """The share's weight in the model's forward action; None for a model without shares."""
    rule_priority: int
    """The ALB listener-rule priority of the model's route (its shares share it)."""
    listener_port: int | None = None
    """The model's NLB listener port (its shares share it); None when the config sets none."""
    router: RouterTarget | None = None
    """The router in front of the model's pods; None when the load balancer picks the pod."""

    @property
    def key(self) -> str:
        """`<model>`, or `<model>/<share>`: how target groups, bindings and alarms are keyed."""
        return self.model if self.share is None else f"{self.model}/{self.share}"

    @property
    def path_prefix(self) -> str:
        """The ALB path prefix that reaches the model: '/<model>'."""
        return route_prefix(self.model)

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL of the Service, by its cluster DNS name."""
        return f"http://{self.service}.{self.namespace}.svc.cluster.local:{self.port}/v1"


def model_endpoints(model: ModelConfig, serving: ServingConfig) -> list[Endpoint]:
    """The endpoints of one model: one, or one per share (in the order of `shares`)."""

    def endpoint(service: str, *, share: str | None = None, weight: int | None = None) -> Endpoint:
        router = ROUTER if model.routed else None
        return Endpoint(
            model=model.name,
            share=share,
            service=service,
            namespace=serving.namespace,
            port=router.port if router else serving.port,
            health_check_path=router.health_check_path if router else engine_of(model).readiness_path,
            health_check_port=router.health_check_port if router else None,
            weight=weight,
            rule_priority=model.rule_priority,
            listener_port=model.listener_port,
            router=router,
        )

    if model.routed:
        return [endpoint(router_name(model.name))]
    if model.shares:
        return [
            endpoint(workload_name(model.name, s.share_name), share=s.share_name, weight=s.weight)
            for s in model.shares
        ]
    # A multi-node model's workers serve no HTTP: only its leaders' Service is an endpoint.
    if model.pipeline_parallel > 1:
        return [endpoint(leader_service_name(model.name))]
    return [endpoint(workload_name(model.name))]


def endpoints_of(config: TierConfig) -> list[Endpoint]:
    """Every endpoint of the tier, model by model in config order, a model's shares in theirs."""
    return [e for model in config.models for e in model_endpoints(model, config.serving)]


def by_model(endpoints: Iterable[Endpoint]) -> dict[str, list[Endpoint]]:
    """The endpoints grouped by model, in the order given."""
    grouped: dict[str, list[Endpoint]] = {}
    for endpoint in endpoints:
        grouped.setdefault(endpoint.model, []).append(endpoint)
    return grouped


def services_of(endpoints: Iterable[Endpoint]) -> dict[str, str | dict[str, str]]:
    """Model -> its Service, or `{share: Service}` for a model split into shares.

    The shape :meth:`bind_services` of the load balancers takes.
    """
    services: dict[str, str | dict[str, str]] = {}
    for model, group in by_model(endpoints).items():
        if group[0].share is None:
            services[model] = group[0].service
        else:
            services[model] = {e.share: e.service for e in group if e.share is not None}
    return services


def weights_of(endpoints: Iterable[Endpoint]) -> dict[str, dict[str, int]]:
    """Model -> `{share: weight}` for each model split into shares."""
    weights: dict[str, dict[str, int]] = {}
    for e in endpoints:
        if e.share is not None and e.weight is not None:
            weights.setdefault(e.model, {})[e.share] = e.weight
    return weights


def health_paths_of(endpoints: Iterable[Endpoint]) -> dict[str, str]:
    """Model -> the path its target groups' health checks ask (a model's shares share it)."""
    return {e.model: e.health_check_path for e in endpoints}
