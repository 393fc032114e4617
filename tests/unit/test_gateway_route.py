"""How the gateway reaches the models: the load balancer's route where the tier allows it, else the Services.

One answer (`gpufarm.core.endpoints.gateway_route`) read by the gateway's config, its pod
environment and the serving namespace's network policies.
"""

from __future__ import annotations

import pytest

from gpufarm.config.model import LoadBalancerKind, TierConfig
from gpufarm.core.endpoints import GATEWAY_LISTENER_PORT, GatewayRoute, gateway_route, gateway_through_nlb
from gpufarm.k8s import gateway as gw
from gpufarm.k8s.labels import model_selector
from gpufarm.k8s.network_policy import network_policies
from tests.netpol import Endpoint, allowed

from .factories import SHARES, make_enterprise, make_production, make_tier, split

NS = "gpufarm"
GATEWAY = Endpoint(ip="10.0.9.1", namespace=NS, labels=dict(gw.SELECTOR))
ALB_NODE = Endpoint(ip="10.0.3.17")
"""A private address of the internal ALB, in the VPC's subnets (poc's VPC is 10.0.0.0/16)."""
NLB_NODE = Endpoint(ip="10.0.130.9")
"""A private address of the gateway's internal NLB in production's private subnets (10.0.0.0/16)."""
INTERNAL_NO_WAF = {
    "ingress": {"scheme": "internal", "waf": {"enabled": False}, "inspection": {"enabled": False}}
}
"""Enterprise made an internal ALB without WAF (and so without inspection, which needs a public one)."""
LB_URL = "http://internal-gpufarm-poc-123.us-east-1.elb.amazonaws.com:8088"


def _with_kind(tier: TierConfig, kind: LoadBalancerKind) -> TierConfig:
    return tier.model_copy(update={"ingress": tier.ingress.model_copy(update={"kind": kind})})


def _vllm(model: str) -> Endpoint:
    return Endpoint(ip="10.0.9.2", namespace=NS, labels=model_selector(model))


@pytest.mark.parametrize(
    ("tier", "route", "through_nlb"),
    [
        ("poc", GatewayRoute.LOAD_BALANCER, False),
        ("poc-with-waf", GatewayRoute.LOAD_BALANCER, False),
        ("poc-internet-facing", GatewayRoute.LOAD_BALANCER, True),
        ("production", GatewayRoute.LOAD_BALANCER, True),
        ("enterprise", GatewayRoute.LOAD_BALANCER, True),
        ("enterprise-internal-alb", GatewayRoute.LOAD_BALANCER, False),
        ("poc-nlb", GatewayRoute.SERVICE, False),
        ("enterprise-nlb", GatewayRoute.SERVICE, False),
    ],
)
def test_the_route_each_tier_gets(tier: str, route: GatewayRoute, through_nlb: bool) -> None:
    """ADR 0050's table: every ALB tier takes the load balancer's route (an internet-facing one
    through an internal NLB); an NLB tier keeps the Services'."""
    internal_no_waf = INTERNAL_NO_WAF
    config = {
        "poc": make_tier,
        "poc-with-waf": lambda: make_tier({"ingress": {"waf": {"enabled": True}}}),
        "poc-internet-facing": lambda: make_tier(
            {
                "ingress": {
                    "scheme": "internet-facing",
                    "certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/"
                    "12345678-1234-4234-8234-123456789012",
                    "allowed_cidrs": ["192.0.2.0/24"],
                    "waf": {"enabled": True},
                }
            }
        ),
        "production": make_production,
        "enterprise": make_enterprise,
        "enterprise-internal-alb": lambda: make_enterprise(internal_no_waf),
        # An NLB tier in the poc's otherwise load-balanced setting: only the kind differs.
        "poc-nlb": lambda: _with_kind(make_tier(), LoadBalancerKind.NLB),
        # Internet-facing, behind WAF: only the kind differs from the enterprise preset.
        "enterprise-nlb": lambda: _with_kind(make_enterprise(), LoadBalancerKind.NLB),
    }[tier]()
    assert gateway_route(config) is route
    assert gateway_through_nlb(config) is through_nlb


def test_a_load_balanced_model_is_one_deployment_read_from_the_pod_environment() -> None:
    tier = make_tier()
    model = tier.models[0]
    config = gw.litellm_config(tier, load_balanced=True)
    vllm = [e for e in config["model_list"] if e["model_name"] == model.api_model_name]
    assert vllm == [
        {
            "model_name": model.api_model_name,
            "litellm_params": {
                "model": f"hosted_vllm/{model.api_model_name}",
                "api_base": "os.environ/GPUFARM_ROUTE_QWEN3_8B",
                "timeout": tier.fallback.request_timeout_seconds,
                "stream_timeout": tier.fallback.stream_timeout_seconds,
            },
            "model_info": {
                "id": "vllm-qwen3-8b",
                "allowed_fails_policy": dict.fromkeys(
                    gw.ALLOWED_FAILS_POLICY_FIELDS, tier.fallback.allowed_fails
                ),
            },
        }
    ]
    # Bedrock, the fallbacks and the router settings are those of the Services' route.
    default = gw.litellm_config(tier)
    assert [e for e in config["model_list"] if e not in vllm] == [
        e for e in default["model_list"] if e["model_name"] != model.api_model_name
    ]
    assert {k: v for k, v in config.items() if k != "model_list"} == {
        k: v for k, v in default.items() if k != "model_list"
    }


def test_a_model_split_into_shares_is_one_deployment_the_load_balancer_weighs() -> None:
    tier = make_enterprise(split(), INTERNAL_NO_WAF)
    shared = next(m for m in tier.models if m.shares)
    assert [s.share_name for s in shared.shares] == [s["name"] for s in SHARES]
    entries = [
        e
        for e in gw.litellm_config(tier, load_balanced=True)["model_list"]
        if e["model_name"] == shared.api_model_name
    ]
    assert [(e["model_info"]["id"], "weight" in e["litellm_params"]) for e in entries] == [
        (gw.vllm_deployment_id(shared), False)
    ]


def test_the_pod_environment_holds_each_model_route() -> None:
    tier = make_enterprise(INTERNAL_NO_WAF)
    env = gw.route_env(tier, LB_URL)
    assert env == [{"name": gw.route_env_name(m), "value": f"{LB_URL}/{m.name}/v1"} for m in tier.models]
    assert len({e["name"] for e in env}) == len(tier.models)
    assert gw.route_env_name(tier.models[0]) == "GPUFARM_ROUTE_" + tier.models[0].name.upper().replace(
        "-", "_"
    )


def test_the_deployment_carries_the_routes_only_when_given_a_load_balancer() -> None:
    tier = make_tier()
    config = gw.litellm_config(tier, load_balanced=True)

    def env(url: str | None) -> dict[str, str]:
        pod = gw.gateway_deployment(
            tier,
            config=config,
            namespace=NS,
            region="us-east-1",
            master_key_secret_arn=None,
            load_balancer_url=url,
        )
        return {e["name"]: e["value"] for e in pod["spec"]["template"]["spec"]["containers"][0]["env"]}

    assert env(LB_URL)["GPUFARM_ROUTE_QWEN3_8B"] == f"{LB_URL}/qwen3-8b/v1"
    assert not [name for name in env(None) if name.startswith(gw.ROUTE_ENV_PREFIX)]
    # The address is deploy-time data: the config, and the hash that rolls the pods, do not hold it.
    assert LB_URL not in gw.config_yaml(config)


def _tier_with_route(route: GatewayRoute) -> TierConfig:
    tier = (
        make_tier() if route is GatewayRoute.LOAD_BALANCER else _with_kind(make_tier(), LoadBalancerKind.NLB)
    )
    assert gateway_route(tier) is route
    return tier


def test_a_load_balanced_gateway_reaches_the_gateway_listener_and_no_model_pod() -> None:
    tier = _tier_with_route(GatewayRoute.LOAD_BALANCER)
    policies = network_policies(tier)
    model = _vllm(tier.models[0].name)
    assert allowed(policies, GATEWAY, ALB_NODE, GATEWAY_LISTENER_PORT)
    assert not allowed(policies, GATEWAY, ALB_NODE, 80)
    assert not allowed(policies, GATEWAY, model, tier.serving.port)
    # The load balancer still reaches the pods (its ipBlock is the VPC), for clients and gateway alike.
    assert allowed(policies, ALB_NODE, model, tier.serving.port)


def test_a_gateway_on_the_services_route_reaches_the_model_pods_and_no_listener() -> None:
    tier = _tier_with_route(GatewayRoute.SERVICE)
    policies = network_policies(tier)
    assert allowed(policies, GATEWAY, _vllm(tier.models[0].name), tier.serving.port)
    assert not allowed(policies, GATEWAY, ALB_NODE, GATEWAY_LISTENER_PORT)


def test_an_internet_facing_tiers_gateway_reaches_the_nlb_on_the_gateway_port_only() -> None:
    """Production's gateway calls the internal NLB's private addresses, in the VPC's CIDR, on the
    gateway port: that port and no other, and no model pod directly."""
    tier = make_production()
    assert gateway_through_nlb(tier)
    policies = network_policies(tier)
    assert allowed(policies, GATEWAY, NLB_NODE, GATEWAY_LISTENER_PORT)
    # (443 in the VPC stays open: the Bedrock and Secrets Manager endpoints listen there.)
    assert not allowed(policies, GATEWAY, NLB_NODE, 80)
    for model in tier.models:
        assert not allowed(policies, GATEWAY, _vllm(model.name), tier.serving.port)
    # Outside the VPC (a public address of the ALB) the port is closed: the hop stays inside.
    assert not allowed(policies, GATEWAY, Endpoint(ip="198.51.100.7"), GATEWAY_LISTENER_PORT)
