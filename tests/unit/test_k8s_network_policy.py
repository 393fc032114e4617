"""NetworkPolicies from tier configs: derived from the config, evaluated by tests/netpol.py."""

from __future__ import annotations

import pytest

from gpufarm.config.model import TierConfig
from gpufarm.core.demand import METRICS_PORT
from gpufarm.k8s import gateway as gw
from gpufarm.k8s.labels import model_selector
from gpufarm.k8s.lws import GROUP_INDEX_LABEL, RAY_CLIENT_PORT, RAY_PORT, WORKER_INDEX_LABEL
from gpufarm.k8s.network_policy import POD_IDENTITY_AGENT_CIDR, network_policies
from tests.netpol import Endpoint, allowed, is_isolated

from .factories import (
    enterprise_document,
    enterprise_part,
    make_enterprise,
    make_production,
    make_tier,
    model_override,
    production_model,
)
from .k8s_schema import validate_core

NS = "gpufarm"
GATEWAY = Endpoint(ip="10.0.9.1", namespace=NS, labels=dict(gw.SELECTOR))
INTERNET = Endpoint(ip="198.51.100.7")


def _vllm(model: str, ip: str = "10.0.9.2", **extra: str) -> Endpoint:
    return Endpoint(ip=ip, namespace=NS, labels={**model_selector(model), **extra})


def _two_groups() -> TierConfig:
    capacity = enterprise_document()["node_groups"][1]["capacity"]
    return make_enterprise(
        enterprise_part("models", 0, replicas=2),
        enterprise_part("node_groups", 1, nodes=4, capacity={**capacity, "instance_count": 4}),
    )


@pytest.mark.parametrize("tier", ["poc", "production", "enterprise", "two-groups"])
def test_policies_pass_the_core_schema(tier: str) -> None:
    config = {
        "poc": make_tier,
        "production": make_production,
        "enterprise": make_enterprise,
        "two-groups": _two_groups,
    }[tier]()
    policies = network_policies(config)
    assert policies[0]["metadata"]["name"] == "default-deny"
    assert len({p["metadata"]["name"] for p in policies}) == len(policies)
    for policy in policies:
        validate_core(policy)


def test_one_fence_per_leader_worker_set_group() -> None:
    policies = network_policies(_two_groups())
    model = "llama-3-1-405b"
    names = [p["metadata"]["name"] for p in policies]
    assert [n for n in names if n.startswith(f"vllm-{model}-group-")] == [
        f"vllm-{model}-group-0",
        f"vllm-{model}-group-1",
    ]
    leader0 = _vllm(model, "10.0.9.10", **{GROUP_INDEX_LABEL: "0", WORKER_INDEX_LABEL: "0"})
    worker0 = _vllm(model, "10.0.9.11", **{GROUP_INDEX_LABEL: "0", WORKER_INDEX_LABEL: "1"})
    worker1 = _vllm(model, "10.0.9.21", **{GROUP_INDEX_LABEL: "1", WORKER_INDEX_LABEL: "1"})
    assert allowed(policies, worker0, leader0, RAY_PORT)
    assert allowed(policies, leader0, worker0, 40000)
    # Another group of the same model is outside the group.
    for port in (RAY_PORT, RAY_CLIENT_PORT, 40000):
        assert not allowed(policies, worker1, leader0, port)
        assert not allowed(policies, leader0, worker1, port)
    # The load balancer (a VPC address) reaches the leader on the Target Optimizer's data port, the
    # workers never. The gateway calls the model's route on the load balancer (ADR 0050), so it
    # reaches no vLLM pod directly, leader or worker.
    tier = _two_groups()
    data_port = tier.ingress.target_optimizer.data_port
    load_balancer = Endpoint(ip="10.0.3.7")
    assert allowed(policies, load_balancer, leader0, data_port)
    assert not allowed(policies, load_balancer, worker0, data_port)
    assert not allowed(policies, GATEWAY, leader0, 8000)
    assert not allowed(policies, GATEWAY, worker0, 8000)
    assert not allowed(policies, GATEWAY, leader0, RAY_PORT)


def test_client_namespaces_reach_the_gateway_and_the_models_only() -> None:
    tier = make_tier({"serving": {"allowed_client_namespaces": ["apps"]}})
    policies = network_policies(tier)
    client = Endpoint(ip="100.64.0.5", namespace="apps", labels={"app": "web"})
    stranger = Endpoint(ip="100.64.0.6", namespace="other", labels={"app": "web"})
    model = _vllm(tier.models[0].name)
    assert allowed(policies, client, GATEWAY, tier.fallback.port)
    assert allowed(policies, client, model, tier.serving.port)
    assert not allowed(policies, client, GATEWAY, tier.serving.port)
    assert not allowed(policies, stranger, GATEWAY, tier.fallback.port)
    assert not allowed(policies, stranger, model, tier.serving.port)


def test_without_client_namespaces_no_namespace_is_named() -> None:
    for policy in network_policies(make_tier()):
        for rule in policy["spec"].get("ingress", []):
            assert all("namespaceSelector" not in peer for peer in rule.get("from", [])), policy["metadata"][
                "name"
            ]


def test_dns_in_auto_mode_is_port_53_anywhere_and_elsewhere_kube_dns_only() -> None:
    pod = _vllm("qwen3-8b")
    resolver = Endpoint(ip="10.0.0.2")  # not a pod: Auto Mode's node-level CoreDNS, or the VPC resolver
    kube_dns = Endpoint(ip="10.0.5.5", namespace="kube-system", labels={"k8s-app": "kube-dns"})
    poc = network_policies(make_tier())
    assert allowed(poc, pod, resolver, 53, "UDP")
    assert allowed(poc, pod, kube_dns, 53, "TCP")
    production = network_policies(make_production())
    pod = _vllm("llama-3-3-70b")
    assert allowed(production, pod, kube_dns, 53, "UDP")
    assert allowed(production, pod, kube_dns, 53, "TCP")
    assert not allowed(production, pod, resolver, 53, "UDP")


def test_secrets_manager_through_its_endpoint_when_the_vpc_has_one() -> None:
    """Production's gateway reads its master key: Secrets Manager has no endpoint there, so HTTPS
    goes anywhere; with the endpoint (enterprise) only the VPC, unless Bedrock needs another region."""
    endpoints = list(make_production().network.interface_endpoints)
    inside = network_policies(
        make_production({"network": {"interface_endpoints": [*endpoints, "secretsmanager"]}})
    )
    outside = network_policies(make_production())
    assert allowed(inside, GATEWAY, Endpoint(ip="10.0.3.3"), 443)
    assert not allowed(inside, GATEWAY, INTERNET, 443)
    assert allowed(outside, GATEWAY, INTERNET, 443)


def test_a_gated_model_reads_its_token_with_pod_identity() -> None:
    policies = network_policies(make_tier(model_override(hf_token_secret="hf-token")))
    pod = _vllm(make_tier().models[0].name)
    assert allowed(policies, pod, Endpoint(ip="169.254.170.23"), 80)
    assert allowed(policies, pod, INTERNET, 443)  # Hugging Face and Secrets Manager, through NAT
    assert not allowed(network_policies(make_tier()), pod, Endpoint(ip="169.254.170.23"), 80)


def test_s3_weights_without_a_token_send_nothing_outside() -> None:
    policies = network_policies(make_production())
    pod = _vllm("llama-3-3-70b")
    for target, port in (
        (INTERNET, 443),
        (Endpoint(ip="169.254.170.23"), 80),
        (Endpoint(ip="10.0.3.3"), 443),
    ):
        assert not allowed(policies, pod, target, port)


def test_gateway_reaches_bedrock_through_the_endpoint_unless_a_fallback_calls_another_region() -> None:
    same = network_policies(make_tier())  # no master key; Bedrock in the tier's region
    assert allowed(same, GATEWAY, Endpoint(ip="10.0.3.3"), 443)
    assert not allowed(same, GATEWAY, INTERNET, 443)
    cross = network_policies(make_enterprise())  # one fallback calls us-west-2 from us-east-1
    assert allowed(cross, GATEWAY, INTERNET, 443)
    for policies in (same, cross):
        assert allowed(policies, GATEWAY, Endpoint(ip=POD_IDENTITY_AGENT_CIDR.split("/")[0]), 80)


def test_every_pod_selector_of_the_tier_is_isolated() -> None:
    """Any pod of the serving namespace, whatever its labels, is isolated both ways by the default deny."""
    policies = network_policies(make_tier())
    stray = Endpoint(ip="10.0.9.99", namespace=NS, labels={"app": "debug"})
    assert is_isolated(policies, stray, "Ingress")
    assert is_isolated(policies, stray, "Egress")
    assert not allowed(policies, stray, INTERNET, 443)


def test_the_scraper_reaches_the_gateways_metrics_port_only_when_it_serves_metrics() -> None:
    scraper = Endpoint(ip="10.0.2.40")  # the managed scraper's interface in a private subnet
    outside = Endpoint(ip="198.51.100.7")
    production = network_policies(make_production())  # a model parks at zero, Prometheus on
    assert allowed(production, scraper, GATEWAY, METRICS_PORT)
    assert not allowed(production, outside, GATEWAY, METRICS_PORT)
    always_up = production_model(1, autoscaling={"min_replicas": 1})
    # Prometheus on: the fallback rate is scraped though no model parks at zero.
    assert allowed(network_policies(make_production(always_up)), scraper, GATEWAY, METRICS_PORT)
    assert not allowed(network_policies(make_tier()), scraper, GATEWAY, METRICS_PORT)  # poc: no Prometheus
