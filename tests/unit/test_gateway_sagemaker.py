"""The gateway config of a `provisioning: sagemaker` tier: one SageMaker deployment per model, the
same Bedrock fallbacks as an EKS tier's."""

from __future__ import annotations

from gpufarm.config import load_preset
from gpufarm.core import sagemaker as sm
from gpufarm.k8s.gateway import (
    bedrock_model_name,
    client_model_name,
    litellm_config,
    sagemaker_deployment_id,
    served_deployments,
)

TIER = load_preset("sagemaker-poc")


def _sagemaker_entries(config: dict[str, object]) -> dict[str, dict[str, object]]:
    entries = config["model_list"]
    assert isinstance(entries, list)
    return {
        e["model_name"]: e for e in entries if str(e["litellm_params"]["model"]).startswith("sagemaker_chat/")
    }


def test_each_model_calls_its_inference_component_on_the_tiers_endpoint() -> None:
    entries = _sagemaker_entries(litellm_config(TIER))
    assert sorted(entries) == sorted(client_model_name(m) for m in TIER.models)
    for model in TIER.models:
        entry = entries[client_model_name(model)]
        assert entry["litellm_params"] == {
            "model": "sagemaker_chat/gpufarm-sagemaker-poc",
            "model_id": sm.inference_component_name(TIER, model),
            "aws_region_name": "us-east-1",
            "timeout": TIER.fallback.request_timeout_seconds,
            "stream_timeout": TIER.fallback.stream_timeout_seconds,
        }
        assert entry["model_info"]["id"] == sagemaker_deployment_id(model) == f"sagemaker-{model.name}"


def test_the_bedrock_fallback_is_the_same_model_group_fallback_as_on_eks() -> None:
    config = litellm_config(TIER)
    assert config["router_settings"]["fallbacks"] == [
        {client_model_name(m): [bedrock_model_name(m)]} for m in TIER.models
    ]


def test_a_runtime_url_replaces_the_whole_invocation_url() -> None:
    entries = _sagemaker_entries(litellm_config(TIER, sagemaker_runtime_url="http://127.0.0.1:8080/"))
    urls = {e["litellm_params"]["sagemaker_base_url"] for e in entries.values()}
    assert urls == {"http://127.0.0.1:8080/endpoints/gpufarm-sagemaker-poc/invocations"}


def test_the_demand_counter_knows_the_sagemaker_deployments() -> None:
    served = served_deployments(TIER)
    for model in TIER.models:
        assert served[sagemaker_deployment_id(model)][0] == client_model_name(model)


def test_an_eks_tier_has_no_sagemaker_deployment() -> None:
    assert _sagemaker_entries(litellm_config(load_preset("poc"))) == {}
