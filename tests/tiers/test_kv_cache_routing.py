"""KV-cache-aware routing, opted into per model: the load balancer and the gateway reach the
model's router, which picks the vLLM pod; other models are untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.k8s.kv_cache_routing import ENVOY_READY_PORT, ROUTER_PORT, router_name
from gpufarm.k8s.labels import workload_name
from tests.assemblies import shared_assembly
from tests.conftest import cfn_lint_errors, nag_violations
from tests.tiers.conftest import variant
from tests.tiers.flows import check_closed_world, read_tier, unselected_pods
from tests.tiers.helpers import (
    application_load_balancer,
    manifest_of,
    manifests,
    model_target_groups,
    resources,
)


@pytest.fixture(scope="module")
def routed(production_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = [dict(m) for m in production_document["models"]]
    models[0]["kv_cache_routing"] = True
    config = variant(
        production_document, {"models": models, "ingress": {"target_optimizer": {"enabled": False}}}
    )
    # The same variant as tests/tiers/test_upstream.py's and test_k8s_security_scan.py's: one
    # synth per run (tests/assemblies.py).
    return shared_assembly([config], tmp_path_factory)


@pytest.fixture(scope="module")
def template(routed: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((routed / "gpufarm-production.template.json").read_text())
    return data


def test_routed_model_target_group_points_at_the_router(template: dict[str, Any]) -> None:
    groups = [g["Properties"] for g in model_target_groups(template).values()]
    routed = [g for g in groups if g["Port"] == ROUTER_PORT]
    assert len(routed) == 1
    (group,) = routed
    assert (group["HealthCheckPort"], group["HealthCheckPath"]) == (str(ENVOY_READY_PORT), "/ready")
    # The other model (on SGLang) still goes straight to its pods, checked on its readiness path.
    assert any(g["Port"] == 8000 and g["HealthCheckPath"] == "/ready" for g in groups)


def test_routed_model_binding_and_gateway_use_the_router(template: dict[str, Any]) -> None:
    name = router_name("llama-3-3-70b")
    bindings = [b for b in manifests(template) if b["kind"] == "TargetGroupBinding"]
    (binding,) = [b for b in bindings if b["spec"]["serviceRef"]["name"] == name]
    assert binding["spec"]["serviceRef"]["port"] == ROUTER_PORT
    assert binding["metadata"]["name"].endswith("-routed")
    # The gateway calls each model's route on the load balancer (ADR 0050); the routed model's
    # target group is the router's, so the router's endpoint picker still chooses the pod.
    config = yaml.safe_load(manifest_of(template, "ConfigMap", "gateway-config")["data"]["config.yaml"])
    bases = {e["model_info"]["id"]: e["litellm_params"].get("api_base") for e in config["model_list"]}
    assert bases["vllm-llama-3-3-70b"] == "os.environ/GPUFARM_ROUTE_LLAMA_3_3_70B"
    assert bases["vllm-qwen3-32b-batch"] == "os.environ/GPUFARM_ROUTE_QWEN3_32B_BATCH"
    routed_group = binding["spec"]["targetGroupARN"].removeprefix("<Ref:").removesuffix(">")
    assert template["Resources"][routed_group]["Properties"]["Port"] == ROUTER_PORT


def test_router_runs_the_endpoint_picker_beside_envoy(template: dict[str, Any]) -> None:
    deployment = manifest_of(template, "Deployment", router_name("llama-3-3-70b"))
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert any("gateway-api-inference-extension/epp" in i for i in images)
    assert any("envoy" in i for i in images)


def test_alb_reaches_the_router_ports(template: dict[str, Any]) -> None:
    _, lb = application_load_balancer(template)
    alb_sg = lb["Properties"]["SecurityGroups"][0]
    ports = {
        (r["Properties"]["FromPort"], r["Properties"]["ToPort"])
        for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("SourceSecurityGroupId") == alb_sg
    }
    assert {(ROUTER_PORT, ROUTER_PORT), (ENVOY_READY_PORT, ENVOY_READY_PORT)} <= ports


def test_routed_variant_passes_the_gates(routed: Path, template: dict[str, Any]) -> None:
    assert nag_violations(routed) == {}
    assert cfn_lint_errors(routed / "gpufarm-production.template.json") == []


def test_network_policies_allow_exactly_the_routed_flows(template: dict[str, Any]) -> None:
    """The router reaches the model's pods; the load balancer reaches the router only, and the gateway
    reaches neither (it calls the model's route on the load balancer, ADR 0050)."""
    tier = read_tier(template)
    assert unselected_pods(tier) == []
    assert check_closed_world(tier) == []
    router, model = router_name("llama-3-3-70b"), workload_name("llama-3-3-70b")
    assert tier.allowed(router, model, 8000)
    assert tier.allowed("vpc-host", router, ROUTER_PORT)
    assert not tier.allowed("gateway", router, ROUTER_PORT)
    assert not tier.allowed("gateway", model, 8000)
    assert tier.allowed("vpc-host", router, ENVOY_READY_PORT)
