"""A model split into shares, without CDK: a Deployment and Service per share, and the gateway's view."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ModelConfig, TierConfig
from gpufarm.k8s import gateway as gw
from gpufarm.k8s import vllm_deployment, vllm_service
from gpufarm.k8s.labels import (
    CAPACITY_CLASS_LABEL,
    GPU_RESOURCE,
    MODEL_LABEL,
    NODEPOOL_LABEL,
    SHARE_LABEL,
    model_selector,
    workload_name,
)

from .factories import make_enterprise, share, split
from .k8s_schema import validate_core


@pytest.fixture(scope="module")
def tier() -> TierConfig:
    return make_enterprise(share(1, gpus=2))


@pytest.fixture(scope="module")
def model(tier: TierConfig) -> ModelConfig:
    return tier.models[1]


def rendered(tier: TierConfig, model: ModelConfig) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Share name -> (Deployment, Service), as VllmServing renders them (class shares by label)."""
    out = {}
    for name, part in model.parts():
        assert name is not None
        selector = {CAPACITY_CLASS_LABEL: part.capacity_class} if part.capacity_class else None
        deployment = vllm_deployment(
            part,
            tier.serving,
            pool_name=part.node_pool or tier.node_pools[0].name,
            region=tier.environment.region,
            node_selector=selector,
            share=name,
        )
        out[name] = (deployment, vllm_service(part, tier.serving, share=name))
    return out


def test_each_share_has_its_own_deployment_and_service(tier: TierConfig, model: ModelConfig) -> None:
    manifests = rendered(tier, model)
    assert sorted(manifests) == ["h100", "l40s"]
    for name, (deployment, service) in manifests.items():
        assert deployment["metadata"]["name"] == service["metadata"]["name"] == f"vllm-{model.name}-{name}"
        assert workload_name(model.name, name) == f"vllm-{model.name}-{name}"
        validate_core(deployment)
        validate_core(service)


def test_share_pods_run_on_their_own_hardware(tier: TierConfig, model: ModelConfig) -> None:
    manifests = rendered(tier, model)
    h100 = manifests["h100"][0]["spec"]
    l40s = manifests["l40s"][0]["spec"]
    assert h100["template"]["spec"]["nodeSelector"] == {CAPACITY_CLASS_LABEL: "h100"}
    assert l40s["template"]["spec"]["nodeSelector"] == {NODEPOOL_LABEL: "gpu-l40s"}
    assert (h100["replicas"], l40s["replicas"]) == (2, 1)
    for spec, gpus in ((h100, "4"), (l40s, "2")):
        (container,) = spec["template"]["spec"]["containers"]
        assert container["resources"]["requests"][GPU_RESOURCE] == gpus
        assert container["resources"]["limits"][GPU_RESOURCE] == gpus
        args = container["args"]
        assert args[args.index("--tensor-parallel-size") + 1] == gpus
        # The same weights and client-facing name on every share.
        assert args[0] == f"/models/{model.name}"
        assert args[args.index("--served-model-name") + 1] == model.api_model_name


def test_share_selectors_never_overlap(tier: TierConfig, model: ModelConfig) -> None:
    manifests = rendered(tier, model)
    for name, (deployment, service) in manifests.items():
        expected = {**model_selector(model.name), SHARE_LABEL: name}
        assert deployment["spec"]["selector"]["matchLabels"] == expected
        assert service["spec"]["selector"] == expected
        template = deployment["spec"]["template"]
        assert expected.items() <= template["metadata"]["labels"].items()
        (spread,) = template["spec"]["topologySpreadConstraints"]
        assert spread["labelSelector"]["matchLabels"] == expected
        assert service["metadata"]["labels"][SHARE_LABEL] == name
        # Still the model's pods: metrics are labelled by model across its shares.
        assert template["metadata"]["labels"][MODEL_LABEL] == model.name
    labels = [d["spec"]["template"]["metadata"]["labels"] for d, _ in manifests.values()]
    for _, service in manifests.values():
        selector = service["spec"]["selector"]
        assert sum(selector.items() <= pod.items() for pod in labels) == 1


def test_a_model_without_shares_keeps_its_names_and_selector(tier: TierConfig) -> None:
    model = tier.models[2]
    deployment = vllm_deployment(model, tier.serving, pool_name="background", region="us-east-1")
    service = vllm_service(model, tier.serving)
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == f"vllm-{model.name}"
    assert deployment["spec"]["selector"]["matchLabels"] == model_selector(model.name)
    assert SHARE_LABEL not in service["metadata"]["labels"]


# --------------------------------------------------------------------------- the gateway


def test_gateway_balances_the_shares_of_one_model_by_weight(tier: TierConfig, model: ModelConfig) -> None:
    config = gw.litellm_config(tier)
    entries = [e for e in config["model_list"] if e["model_name"] == model.api_model_name]
    assert [e["model_info"]["id"] for e in entries] == [f"vllm-{model.name}-h100", f"vllm-{model.name}-l40s"]
    assert [e["litellm_params"]["weight"] for e in entries] == [3, 1]
    assert [e["litellm_params"]["api_base"] for e in entries] == [
        f"http://vllm-{model.name}-h100.gpufarm.svc.cluster.local:8000/v1",
        f"http://vllm-{model.name}-l40s.gpufarm.svc.cluster.local:8000/v1",
    ]
    for e in entries:
        assert e["litellm_params"]["model"] == f"hosted_vllm/{model.api_model_name}"
        assert e["model_info"]["allowed_fails_policy"] == dict.fromkeys(
            gw.ALLOWED_FAILS_POLICY_FIELDS, tier.fallback.allowed_fails
        )


def test_bedrock_fallback_still_covers_the_whole_model(tier: TierConfig, model: ModelConfig) -> None:
    config = gw.litellm_config(tier)
    fallbacks = config["router_settings"]["fallbacks"]
    assert {model.api_model_name: [gw.bedrock_model_name(model)]} in fallbacks
    assert len(fallbacks) == len([m for m in tier.models if m.bedrock_target])
    (bedrock,) = [e for e in config["model_list"] if e["model_name"] == gw.bedrock_model_name(model)]
    assert bedrock["model_info"]["id"] == gw.bedrock_deployment_id(model)


def test_models_without_shares_get_no_weight(tier: TierConfig) -> None:
    config = gw.litellm_config(make_enterprise(split()))
    for model in tier.models:
        if model.shares:
            continue
        (entry,) = [e for e in config["model_list"] if e["model_name"] == model.api_model_name]
        assert "weight" not in entry["litellm_params"]
        assert entry["model_info"]["id"] == gw.vllm_deployment_id(model) == f"vllm-{model.name}"
