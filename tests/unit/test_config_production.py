"""The production preset and the rules that only production settings exercise, with exact messages."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError, TierConfig, load_preset
from gpufarm.config.fsx_capacity import fsx_capacity_step, fsx_storage_capacity_gib, is_valid_fsx_capacity
from gpufarm.config.model import ModelStoreKind, PoolPurpose, Provisioning

from .factories import make_production, make_tier, overrides, production_model, production_pool

OIDC = {
    "issuer": "https://idp.example.com",
    "authorization_endpoint": "https://idp.example.com/authorize",
    "token_endpoint": "https://idp.example.com/token",
    "user_info_endpoint": "https://idp.example.com/userinfo",
    "client_id": "gpufarm",
    "client_secret": "gpufarm/oidc-client-secret",
}
COGNITO = {
    "user_pool_arn": "arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_AbCdEf123",
    "user_pool_client_id": "1example23456789",
    "user_pool_domain": "gpufarm-auth",
}


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_production(*parts)
    return [str(issue) for issue in caught.value.issues]


@pytest.fixture(scope="module")
def production() -> TierConfig:
    return load_preset("production")


def test_production_preset_shape(production: TierConfig) -> None:
    assert production.cluster.provisioning is Provisioning.KARPENTER
    assert production.cluster.endpoint_access.value == "private"
    assert len(production.environment.availability_zones) == 3
    assert production.network.nat_gateways == 3
    assert production.model_store.kind is ModelStoreKind.FSX_LUSTRE
    assert production.ingress.target_optimizer.enabled
    assert production.ingress.waf.enabled
    assert production.observability.prometheus.enabled
    assert production.removal_policy.value == "retain"


def test_production_capacity_mix(production: TierConfig) -> None:
    serving, batch = production.node_pools
    assert serving.purpose is PoolPurpose.SERVING and [c.value for c in serving.capacity_types] == [
        "on-demand"
    ]
    assert batch.purpose is PoolPurpose.BATCH and "spot" in [c.value for c in batch.capacity_types]
    # The on-demand base fills before the batch pool.
    assert serving.nodepool_weight > batch.nodepool_weight
    critical = [m for m in production.models if m.critical]
    assert critical and all(production.pool_of(m).name == "serving" for m in critical)


def test_default_weights_favour_serving_pools() -> None:
    cfg = make_production(production_pool(0, weight=None), production_pool(1, weight=None))
    assert [p.nodepool_weight for p in cfg.node_pools] == [50, 10]


def test_fsx_is_sized_from_the_models(production: TierConfig) -> None:
    # 132 + 62 GiB of weights x 1.3 headroom = 252 GiB: the smallest step, 1200 GiB.
    assert fsx_storage_capacity_gib(production) == 1200
    big = make_production(production_model(0, weights_gib=1900))
    # (1900 + 62) x 1.3 = 2550.6 GiB: past 2400, so the next 2400 GiB step.
    assert fsx_storage_capacity_gib(big) == 4800


@pytest.mark.parametrize(
    ("gib", "step"), [(0, 1200), (1200, 1200), (1200.5, 2400), (2400, 2400), (2401, 4800), (9600, 9600)]
)
def test_fsx_capacity_steps(gib: float, step: int) -> None:
    assert fsx_capacity_step(gib) == step


@pytest.mark.parametrize(
    ("gib", "valid"), [(1200, True), (2400, True), (4800, True), (3600, False), (0, False)]
)
def test_fsx_valid_capacities(gib: int, valid: bool) -> None:
    assert is_valid_fsx_capacity(gib) is valid


def test_autoscaled_model_counts_max_replicas_against_gpu_limit() -> None:
    cfg = make_production(production_model(0, autoscaling={"min_replicas": 2, "max_replicas": 8}))
    assert cfg.models[0].max_replicas == 8  # 4 GPUs x 8 = 32 = the pool's limit


def test_target_control_concurrency_defaults(production: TierConfig) -> None:
    llama = production.models[0]
    assert llama.max_concurrency == llama.max_num_seqs == 64
    assert make_production(production_model(0, max_num_seqs=None)).models[0].max_concurrency == 64
    explicit = make_production(production_model(0, target_control_max_concurrency=12))
    assert explicit.models[0].max_concurrency == 12


SPOT_WARNING = "reclaimed with two minutes' notice"

INVALID: list[Any] = [
    pytest.param(
        production_pool(0, capacity_types=["on-demand", "spot"]),
        [
            "node_pools[0].capacity_types: may include 'spot' only when the pool's purpose is 'batch' "
            f"(spot nodes are {SPOT_WARNING}), got ['on-demand', 'spot'] on a 'serving' pool",
            "models[0].node_pool: must not be pool 'serving' for a critical model: the pool allows "
            f"spot, whose nodes are {SPOT_WARNING} (set critical: false, or allow_spot: true to "
            "accept it), got 'serving'",
        ],
        id="spot-on-serving-pool",
    ),
    pytest.param(
        production_model(1, critical=True, autoscaling={"min_replicas": 1, "max_replicas": 4}),
        [
            "models[1].node_pool: must not be pool 'batch' for a critical model: the pool allows "
            f"spot, whose nodes are {SPOT_WARNING} (set critical: false, or allow_spot: true to "
            "accept it), got 'batch'",
        ],
        id="critical-model-on-spot-pool",
    ),
    pytest.param(
        production_pool(0, capacity_types=["on-demand", "reserved"]),
        [
            "node_pools[0].reservation_ids: must name the capacity reservations a pool with the "
            "'reserved' capacity type may use (Karpenter selects reservations by ID), got []",
        ],
        id="reserved-pool-without-reservations",
    ),
    pytest.param(
        production_pool(1, capacity_types=["spot", "spot"]),
        ["node_pools[1].capacity_types: must not list a capacity type twice, got 'spot' 2 times"],
        id="capacity-type-twice",
    ),
    pytest.param(
        production_pool(0, weight=150),
        ["node_pools[0].weight: must be <= 100, got 150"],
        id="weight-over-100",
    ),
    pytest.param(
        production_pool(0, ami_version="al2023"),
        [
            "node_pools[0].ami_version: must be 'latest', an AL2023 release such as 'v20251120' or a "
            "Bottlerocket version such as '1.50.0', got 'al2023'"
        ],
        id="ami-version-shape",
    ),
    pytest.param(
        production_pool(0, purpose="latency"),
        ["node_pools[0].purpose: must be one of 'serving' or 'batch', got 'latency'"],
        id="unknown-purpose",
    ),
    pytest.param(
        {"model_store": {"fsx": {"storage_capacity_gib": 3000}}},
        [
            "model_store.fsx.storage_capacity_gib: must be 1200, 2400 or a multiple of 2400 "
            "(GiB, PERSISTENT_2), got 3000"
        ],
        id="fsx-capacity-off-step",
    ),
    pytest.param(
        {"model_store": {"fsx": {"storage_capacity_gib": 1200}}, **production_model(0, weights_gib=1000)},
        [
            "model_store.fsx.storage_capacity_gib: must hold the models' weights with headroom "
            "(1380.6 GiB = sum of weights_gib x 1.3), got 1200"
        ],
        id="fsx-capacity-too-small",
    ),
    pytest.param(
        {"model_store": {"fsx": {"throughput_per_tib": 200}}},
        ["model_store.fsx.throughput_per_tib: must be one of 125, 250, 500, 1000 (MB/s per TiB), got 200"],
        id="fsx-throughput-tier",
    ),
    pytest.param(
        {"model_store": {"fsx": {"import_path": None}}},
        [
            "model_store.fsx.import_path: must be an S3 URI such as 's3://bucket/models/' when "
            "model_store.kind is 'fsx-lustre'; it is not set"
        ],
        id="fsx-without-import-path",
    ),
    pytest.param(
        production_model(0, weights="s3://other-bucket/llama/"),
        [
            "models[0].weights: must be a folder under model_store.fsx.import_path "
            "('s3://gpufarm-production-models/') when the model store is FSx, got "
            "'s3://other-bucket/llama/'"
        ],
        id="weights-outside-fsx-import-path",
    ),
    pytest.param(
        production_model(0, weights_gib=None),
        [
            "models[0].weights_gib: is required to size the FSx file system (or set "
            "model_store.fsx.storage_capacity_gib); it is not set"
        ],
        id="fsx-unknown-weights-size",
    ),
    pytest.param(
        {"ingress": {"target_optimizer": {"data_port": 8000}}},
        [
            "ingress.target_optimizer.data_port: must differ from serving.port (the agent and vLLM "
            "share the pod's network), got 8000 for both"
        ],
        id="optimizer-data-port-is-vllm-port",
    ),
    pytest.param(
        {"ingress": {"target_optimizer": {"control_port": 8080}}},
        [
            "ingress.target_optimizer.control_port: must differ from "
            "ingress.target_optimizer.data_port (the agent and vLLM share the pod's network), got "
            "8080 for both"
        ],
        id="optimizer-control-port-is-data-port",
    ),
    pytest.param(
        {"ingress": {"waf": {"enabled": False}}},
        [
            "ingress.waf.enabled: must be true when ingress.scheme is 'internet-facing' (public "
            "endpoints get rate limiting and managed rules), got false"
        ],
        id="internet-facing-without-waf",
    ),
    pytest.param(
        {"ingress": {"oidc": OIDC, "cognito": COGNITO}},
        [
            "ingress.cognito: must be empty when ingress.oidc is set (one authentication action per "
            "route), got a Cognito user pool"
        ],
        id="oidc-and-cognito",
    ),
    pytest.param(
        {
            "ingress": {
                "scheme": "internal",
                "certificate_arn": None,
                "allowed_cidrs": [],
                "cognito": COGNITO,
            }
        },
        [
            "ingress.cognito: needs ingress.certificate_arn (load balancer authentication works on "
            "HTTPS listeners only), got no certificate"
        ],
        id="auth-without-https",
    ),
    pytest.param(
        {"ingress": {"oidc": {**OIDC, "issuer": "http://idp.example.com"}}},
        ["ingress.oidc.issuer: must be an https:// URL, got 'http://idp.example.com'"],
        id="oidc-plain-http",
    ),
    pytest.param(
        production_model(0, autoscaling={"min_replicas": 7, "max_replicas": 6}),
        ["models[0].autoscaling.min_replicas: must be at most max_replicas (6), got 7"],
        id="min-above-max",
    ),
    pytest.param(
        production_model(0, autoscaling={"min_replicas": 0, "max_replicas": 6}),
        [
            "models[0].autoscaling.min_replicas: must be at least 1 for a critical model (scale to "
            "zero needs critical: false), got 0"
        ],
        id="critical-scaled-to-zero",
    ),
    pytest.param(
        production_model(0, autoscaling={"queue_target": None}),
        [
            "models[0].autoscaling: must set queue_target and/or kv_cache_target (the metrics it "
            "scales on), got neither"
        ],
        id="autoscaling-without-metric",
    ),
    pytest.param(
        production_model(0, autoscaling={"kv_cache_target": 1.5}),
        ["models[0].autoscaling.kv_cache_target: must be <= 1.0, got 1.5"],
        id="kv-cache-target-above-one",
    ),
    pytest.param(
        # Grafana reads the Prometheus workspace too: off, to isolate KEDA's refusal.
        {"observability": {"prometheus": {"enabled": False}, "grafana": {"enabled": False}}},
        [
            f"models[{i}].autoscaling: needs observability.prometheus.enabled: true (KEDA reads "
            "vLLM metrics from Amazon Managed Prometheus), got false"
            for i in (0, 1)
        ],
        id="autoscaling-without-prometheus",
    ),
    pytest.param(
        production_model(0, autoscaling={"min_replicas": 2, "max_replicas": 9}),
        [
            "node_pools[0].gpu_limit: must cover the GPUs its models request (36 = sum of gpus x "
            "replicas, max_replicas when autoscaled), got 32"
        ],
        id="max-replicas-beyond-gpu-limit",
    ),
    pytest.param(
        {"cluster": {"system_nodes": {"min_size": 3}}},
        ["cluster.system_nodes: must satisfy min_size <= desired_size <= max_size, got 3 <= 2 <= 4"],
        id="system-nodes-order",
    ),
    pytest.param(
        {"cluster": {"core_addons": ["vpc-cni", "coredns", "kube-proxy"]}},
        [
            "cluster.core_addons: must include 'vpc-cni', 'coredns', 'kube-proxy' and "
            "'eks-pod-identity-agent' with karpenter provisioning (pod networking, DNS and Pod "
            "Identity for the controllers), missing 'eks-pod-identity-agent'",
            "cluster.core_addons: must include 'eks-node-monitoring-agent' while "
            "karpenter.node_repair is on (the agent reports the GPU faults Karpenter repairs), "
            "got 'vpc-cni', 'coredns', 'kube-proxy'",
        ],
        id="karpenter-without-pod-identity-agent",
    ),
    pytest.param(
        {"cluster": {"core_addons": ["vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"]}},
        [
            "cluster.core_addons: must include 'eks-node-monitoring-agent' while "
            "karpenter.node_repair is on (the agent reports the GPU faults Karpenter repairs), "
            "got 'vpc-cni', 'coredns', 'kube-proxy', 'eks-pod-identity-agent'"
        ],
        id="node-repair-without-monitoring-agent",
    ),
    pytest.param(
        production_model(0, kv_cache_routing=True),
        [
            "models[0].kv_cache_routing: must be false while ingress.target_optimizer.enabled is "
            "true (both choose the pod a request goes to), got true"
        ],
        id="kv-routing-with-target-optimizer",
    ),
    pytest.param(
        {"karpenter": {"replicas": 3}},
        [
            "karpenter.replicas: must be at most cluster.system_nodes.min_size (2; each controller "
            "replica needs its own system node), got 3"
        ],
        id="more-controllers-than-system-nodes",
    ),
    pytest.param(
        production_pool(0, weight=0),
        ["node_pools[0].weight: must be >= 1, got 0"],
        id="weight-zero",
    ),
    pytest.param(
        {"ingress": {"target_optimizer": {"agent_image": "example.com/agent:latest"}}},
        [
            "ingress.target_optimizer.agent_image: must be a container image pinned by digest, such as "
            "'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            "got 'example.com/agent:latest'"
        ],
        id="agent-image-latest-elsewhere",
    ),
    pytest.param(
        {"karpenter": {"chart_version": "1.14"}},
        ["karpenter.chart_version: must be an exact chart version such as '1.2.3', got '1.14'"],
        id="chart-version-not-exact",
    ),
    pytest.param(
        {"observability": {"prometheus": {"scrape_interval_seconds": 15}}},
        ["observability.prometheus.scrape_interval_seconds: must be >= 30, got 15"],
        id="scrape-interval-below-scraper-minimum",
    ),
    pytest.param(
        {"observability": {"alarms": {"emails": ["ops"]}}},
        ["observability.alarms.emails[0]: must be an email address, got 'ops'"],
        id="alarm-email",
    ),
    pytest.param(
        {"fallback": {"enabled": False}},
        [
            "models[1].autoscaling.min_replicas: must be at least 1 while fallback.enabled is false "
            "(a model parked at zero wakes on the requests the gateway counts), got 0"
        ],
        id="scale-to-zero-without-gateway",
    ),
    pytest.param(
        {"fallback": {"port": 9090}},
        [
            "fallback.port: must not be 9090 while the gateway serves its metrics (Prometheus is "
            "enabled or a model scales to zero; they are on 9090), got 9090"
        ],
        id="gateway-port-on-metrics-port",
    ),
    pytest.param(
        {"observability": {"prometheus": {"fallback_rate_percent": 0}}},
        ["observability.prometheus.fallback_rate_percent: must be > 0.0, got 0"],
        id="fallback-rate-zero",
    ),
    pytest.param(
        {"observability": {"prometheus": {"fallback_rate_percent": 101}}},
        ["observability.prometheus.fallback_rate_percent: must be <= 100.0, got 101"],
        id="fallback-rate-above-100",
    ),
    pytest.param(
        {"observability": {"prometheus": {"bedrock_spend_per_hour": 0}}},
        ["observability.prometheus.bedrock_spend_per_hour: must be > 0.0, got 0"],
        id="bedrock-spend-zero",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_production_input(override: dict[str, Any], expected: list[str]) -> None:
    assert issues_of(override) == expected


def test_the_gateway_port_is_not_9090_while_prometheus_scrapes_it_without_a_parked_model() -> None:
    # No model parks at zero, but Prometheus scrapes the fallback rate from the metrics port.
    assert issues_of(production_model(1, autoscaling={"min_replicas": 1}), {"fallback": {"port": 9090}}) == [
        "fallback.port: must not be 9090 while the gateway serves its metrics (Prometheus is "
        "enabled or a model scales to zero; they are on 9090), got 9090"
    ]


def test_the_gateway_may_listen_on_9090_without_its_metrics_server() -> None:
    # poc: no Prometheus and no model parked at zero, so the gateway serves no metrics; 9090 is free.
    assert make_tier({"fallback": {"port": 9090}}).fallback.port == 9090


VALID: list[Any] = [
    pytest.param(
        production_model(
            1, critical=True, allow_spot=True, autoscaling={"min_replicas": 1, "max_replicas": 4}
        ),
        id="critical-on-spot-with-explicit-override",
    ),
    pytest.param({"model_store": {"fsx": {"storage_capacity_gib": 2400}}}, id="explicit-capacity"),
    pytest.param(
        {"ingress": {"target_optimizer": {"enabled": False, "data_port": 8000}}},
        id="ports-unchecked-while-optimizer-off",
    ),
    pytest.param(
        overrides(
            production_model(0, kv_cache_routing=True), {"ingress": {"target_optimizer": {"enabled": False}}}
        ),
        id="kv-routing-without-target-optimizer",
    ),
    pytest.param({"ingress": {"oidc": OIDC}}, id="oidc-on-https"),
    pytest.param({"ingress": {"cognito": COGNITO}}, id="cognito-on-https"),
    pytest.param(production_pool(0, ami_family="bottlerocket", ami_version="1.50.0"), id="bottlerocket"),
    pytest.param(
        overrides({"fallback": {"enabled": False}}, production_model(1, autoscaling={"min_replicas": 1})),
        id="no-gateway-no-scale-to-zero",
    ),
    pytest.param(
        {
            "cluster": {"core_addons": ["vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"]},
            "karpenter": {"node_repair": False},
        },
        id="no-monitoring-agent-without-node-repair",
    ),
]


@pytest.mark.parametrize("override", VALID)
def test_valid_production_variants(override: dict[str, Any]) -> None:
    assert make_production(override).name == "production"
