"""Prefill/decode disaggregation, opted into per model: the production tier with one disaggregated
model, synthesized once. Its decode and prefill pods, llm-d's router in front of them, and the load
balancer, the gateway and KEDA wired to the right pods; the other model is untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.core.prefill_decode import NIXL_SIDE_CHANNEL_PORT
from gpufarm.image_cache import cached
from gpufarm.k8s import prefill_decode
from gpufarm.k8s.kv_cache_routing import PLUGINS_FILE, ROUTER_PORT, router_name
from gpufarm.k8s.labels import GPU_RESOURCE, workload_name
from tests.assemblies import shared_assembly
from tests.conftest import cfn_lint_errors, nag_violations
from tests.tiers.conftest import variant
from tests.tiers.flows import check_closed_world, read_tier, unselected_pods
from tests.tiers.helpers import manifest_of, manifests, model_target_groups

MODEL = "llama-3-3-70b"
OTHER = "qwen3-32b-batch"


@pytest.fixture(scope="module")
def split(production_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = [dict(m) for m in production_document["models"]]
    assert models[0]["name"] == MODEL
    models[0]["prefill_decode"] = {
        "min_uncached_tokens": 1024,
        "prefill_autoscaling": {"min_replicas": 1, "max_replicas": 2, "queue_target": 3},
    }
    config = variant(
        production_document, {"models": models, "ingress": {"target_optimizer": {"enabled": False}}}
    )
    # The compliance gate passes, or this raises. The same variant as tests/tiers/test_upstream.py's
    # and test_k8s_security_scan.py's: one synth per run (tests/assemblies.py).
    return shared_assembly([config], tmp_path_factory)


@pytest.fixture(scope="module")
def template(split: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((split / "gpufarm-production.template.json").read_text())
    return data


def _vllm(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
    return container


def test_model_runs_decode_pods_behind_the_sidecar_and_separate_prefill_pods(
    template: dict[str, Any],
) -> None:
    decode = manifest_of(template, "Deployment", workload_name(MODEL))
    prefill = manifest_of(template, "Deployment", prefill_decode.prefill_name(MODEL))
    assert decode["spec"]["template"]["metadata"]["labels"][prefill_decode.ROLE_LABEL] == "decode"
    assert prefill["spec"]["template"]["metadata"]["labels"][prefill_decode.ROLE_LABEL] == "prefill"
    assert "replicas" not in prefill["spec"]  # KEDA sizes the prefill pods
    sidecars = [c["name"] for c in decode["spec"]["template"]["spec"].get("initContainers", [])]
    assert prefill_decode.SIDECAR_CONTAINER in sidecars
    # Both roles land where the model does, and prefill pods hold GPUs like decode pods.
    assert (
        decode["spec"]["template"]["spec"]["nodeSelector"]
        == prefill["spec"]["template"]["spec"]["nodeSelector"]
    )
    assert (
        _vllm(prefill)["resources"]["limits"][GPU_RESOURCE]
        == _vllm(decode)["resources"]["limits"][GPU_RESOURCE]
    )


def test_other_model_is_neither_split_nor_routed(template: dict[str, Any]) -> None:
    deployment = manifest_of(template, "Deployment", workload_name(OTHER))
    assert prefill_decode.ROLE_LABEL not in deployment["spec"]["template"]["metadata"]["labels"]
    names = {m["metadata"]["name"] for m in manifests(template) if m["kind"] == "Deployment"}
    assert prefill_decode.prefill_name(OTHER) not in names
    assert router_name(OTHER) not in names


def test_router_runs_llm_ds_picker_with_the_configured_threshold(template: dict[str, Any]) -> None:
    router = manifest_of(template, "Deployment", router_name(MODEL))
    images = {c["name"]: c["image"] for c in router["spec"]["template"]["spec"]["containers"]}
    # The production preset pulls through the account's image cache (images.pull_through_cache):
    # llm-d's picker, pinned by digest, under the tier's cache prefix ('production').
    registry = images["epp"].split("/", 1)[0]
    assert images["epp"] == cached(prefill_decode.PREFILL_DECODE_EPP_IMAGE, registry, "production")
    plugins = json.loads(manifest_of(template, "ConfigMap", router_name(MODEL))["data"][PLUGINS_FILE])
    decider = next(p for p in plugins["plugins"] if p["type"] == "prefix-based-pd-decider")
    assert decider["parameters"] == {"nonCachedTokens": 1024}


def test_load_balancer_and_gateway_reach_the_router(template: dict[str, Any]) -> None:
    routed = [
        g["Properties"]
        for g in model_target_groups(template).values()
        if g["Properties"]["Port"] == ROUTER_PORT
    ]
    assert len(routed) == 1
    bindings = [b for b in manifests(template) if b["kind"] == "TargetGroupBinding"]
    assert any(b["spec"]["serviceRef"]["name"] == router_name(MODEL) for b in bindings)
    # The gateway calls the model's route on the load balancer (ADR 0050), whose target group is
    # the router's: the router's endpoint picker still chooses the pod.
    config = yaml.safe_load(manifest_of(template, "ConfigMap", "gateway-config")["data"]["config.yaml"])
    bases = {e["model_info"]["id"]: e["litellm_params"].get("api_base") for e in config["model_list"]}
    assert bases[f"vllm-{MODEL}"] == f"os.environ/GPUFARM_ROUTE_{MODEL.upper().replace('-', '_')}"


def test_keda_scales_each_role_on_its_own_pods(template: dict[str, Any]) -> None:
    for target, role in ((workload_name(MODEL), "decode"), (prefill_decode.prefill_name(MODEL), "prefill")):
        scaled = manifest_of(template, "ScaledObject", target)
        assert scaled["spec"]["scaleTargetRef"]["name"] == target
        queries = [t["metadata"]["query"] for t in scaled["spec"]["triggers"]]
        assert queries and all(f'role="{role}"' in q for q in queries)
    prefill = manifest_of(template, "ScaledObject", prefill_decode.prefill_name(MODEL))
    assert (prefill["spec"]["minReplicaCount"], prefill["spec"]["maxReplicaCount"]) == (1, 2)


def test_split_variant_passes_the_gates(split: Path) -> None:
    assert nag_violations(split) == {}
    assert cfn_lint_errors(split / "gpufarm-production.template.json") == []


def test_network_policies_fence_the_decode_pods(template: dict[str, Any]) -> None:
    """Only the router reaches a decode pod's sidecar; prefill and decode pods exchange KV blocks;
    a client pod cannot reach a decode pod (and set the prefiller header) directly."""
    tier = read_tier(template)
    assert unselected_pods(tier) == []
    assert check_closed_world(tier) == []
    decode, prefill, router = workload_name(MODEL), prefill_decode.prefill_name(MODEL), router_name(MODEL)
    assert tier.allowed(router, decode, 8000)
    assert tier.allowed(router, prefill, 8000)
    assert tier.allowed(decode, prefill, 8000)  # the sidecar posts the prompt
    assert tier.allowed(decode, prefill, NIXL_SIDE_CHANNEL_PORT)
    for source in ("gateway", "foreign-pod", "foreign-pod-off-vpc", workload_name(OTHER)):
        assert not tier.allowed(source, decode, 8000), source
        assert not tier.allowed(source, decode, NIXL_SIDE_CHANNEL_PORT), source
    assert not tier.allowed("gateway", prefill, 8000)
