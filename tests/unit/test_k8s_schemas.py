"""Rendered manifests match their schemas: core kinds strictly, CRDs with unknown fields rejected."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from gpufarm.config import NodePoolConfig, TierConfig, load_preset
from gpufarm.k8s import (
    LBC_TGB_API,
    auto_mode_gpu_nodepool,
    namespace,
    s3_weights_volume,
    service_account,
    target_group_binding,
    vllm_deployment,
    vllm_service,
)

from .factories import make_tier, model_override, pool_override
from .k8s_schema import (
    KUBERNETES_VERSION,
    crd_errors,
    nodepool_errors,
    strictify,
    validate_core,
    validate_crd,
)

TG_ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/vllm/0123456789abcdef"


def core_manifests(tier: TierConfig) -> list[dict[str, Any]]:
    """Every built-in-kind manifest gpufarm renders for a tier."""
    ns = tier.serving.namespace
    region = tier.environment.region
    out = [namespace(ns), service_account(ns)]
    for model in tier.models:
        out.append(vllm_deployment(model, tier.serving, pool_name=tier.pool_of(model).name, region=region))
        out.append(vllm_service(model, tier.serving))
        if model.is_s3:
            out += s3_weights_volume(model_name=model.name, namespace=ns, s3_uri=model.weights, region=region)
    return out


def _ids(manifests: list[dict[str, Any]]) -> list[str]:
    return [f"{m['kind']}/{m['metadata']['name']}" for m in manifests]


def test_kubernetes_validate_has_the_pinned_version() -> None:
    assert load_preset("poc").cluster.kubernetes_version == KUBERNETES_VERSION
    assert kubernetes_validate.validate(namespace("x"), KUBERNETES_VERSION, strict=True) == "1.35"


def test_poc_core_manifests(poc: TierConfig) -> None:
    manifests = core_manifests(poc)
    assert {m["kind"] for m in manifests} == {"Namespace", "ServiceAccount", "Deployment", "Service"}
    for manifest in manifests:
        validate_core(manifest)


def test_s3_and_token_core_manifests() -> None:
    tier = make_tier(
        {
            "models": [
                {"name": "from-s3", "weights": "s3://gpufarm-models/qwen/Qwen3-8B/", "bedrock": "none"},
                {
                    "name": "gated",
                    "weights": "meta-llama/Llama-3.1-8B-Instruct",
                    "hf_token_secret": "gpufarm/hf-token",
                    "revision": "main",
                    "bedrock": "none",
                },
            ]
        },
        pool_override(gpu_limit=4),
    )
    manifests = core_manifests(tier)
    assert _ids(manifests) == [
        "Namespace/gpufarm",
        "ServiceAccount/vllm",
        "Deployment/vllm-from-s3",
        "Service/vllm-from-s3",
        "PersistentVolume/gpufarm-weights-from-s3",
        "PersistentVolumeClaim/weights-from-s3",
        "Deployment/vllm-gated",
        "Service/vllm-gated",
    ]
    for manifest in manifests:
        validate_core(manifest)


@pytest.mark.parametrize("gpus", [1, 8])
def test_deployment_validates_for_every_size(gpus: int) -> None:
    tier = make_tier(pool_override(gpu_limit=8), model_override(gpus=gpus, extra_args=["--enforce-eager"]))
    [deployment] = [m for m in core_manifests(tier) if m["kind"] == "Deployment"]
    validate_core(deployment)


def test_core_validation_rejects_an_unknown_field(poc: TierConfig) -> None:
    deployment = copy.deepcopy(core_manifests(poc)[2])
    assert deployment["kind"] == "Deployment"
    deployment["spec"]["template"]["spec"]["containers"][0]["startupProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="startupProbes"):
        validate_core(deployment)


# --------------------------------------------------------------------------- NodePool CRD


def test_poc_nodepool_matches_the_crd(poc: TierConfig) -> None:
    validate_crd(auto_mode_gpu_nodepool(poc.node_pools[0]), "karpenter.sh_nodepools.yaml", "v1")


def test_nodepool_with_instance_types_matches_the_crd() -> None:
    pool = NodePoolConfig(
        name="big",
        instance_families=["g6e", "p5"],
        instance_types=["g6e.48xlarge", "p5.48xlarge"],
        capacity_types=["spot", "on-demand"],
        gpu_limit=64,
        consolidate_after="Never",
        expire_after="2h30m",
        disruption_budget_nodes="100%",
    )
    validate_crd(auto_mode_gpu_nodepool(pool), "karpenter.sh_nodepools.yaml", "v1")


@pytest.mark.parametrize("nodes", ["0", "1", "25", "0%", "10%", "100%"])
def test_every_valid_budget_matches_the_crd(nodes: str) -> None:
    pool = NodePoolConfig(name="p", disruption_budget_nodes=nodes)
    assert nodepool_errors(auto_mode_gpu_nodepool(pool)) == []


def test_crd_check_rejects_a_misspelled_field(poc: TierConfig) -> None:
    nodepool = auto_mode_gpu_nodepool(poc.node_pools[0])
    disruption = nodepool["spec"]["disruption"]
    disruption["consolidateAftr"] = disruption.pop("consolidateAfter")
    assert nodepool_errors(nodepool) == [
        "spec.disruption: 'consolidateAfter' is a required property",
        "spec.disruption: Additional properties are not allowed ('consolidateAftr' was unexpected)",
    ]


def test_crd_check_rejects_an_unknown_optional_field(poc: TierConfig) -> None:
    nodepool = auto_mode_gpu_nodepool(poc.node_pools[0])
    # An extra field next to valid ones: only the strict walker can catch it.
    nodepool["spec"]["template"]["spec"]["expireAftr"] = "336h"
    assert nodepool_errors(nodepool) == [
        "spec.template.spec: Additional properties are not allowed ('expireAftr' was unexpected)"
    ]


def test_crd_check_rejects_a_misspelled_nested_field(poc: TierConfig) -> None:
    nodepool = auto_mode_gpu_nodepool(poc.node_pools[0])
    nodepool["spec"]["template"]["spec"]["nodeClassRef"]["nmae"] = "default"
    assert nodepool_errors(nodepool) == [
        "spec.template.spec.nodeClassRef: Additional properties are not allowed ('nmae' was unexpected)"
    ]


def test_crd_check_rejects_a_bad_value(poc: TierConfig) -> None:
    nodepool = auto_mode_gpu_nodepool(poc.node_pools[0])
    nodepool["spec"]["disruption"]["budgets"] = [{"nodes": "150%"}]
    nodepool["spec"]["template"]["spec"]["taints"][0]["effect"] = "NoScheduel"
    errors = nodepool_errors(nodepool)
    assert len(errors) == 2
    assert errors[0].startswith("spec.disruption.budgets.0.nodes: '150%' does not match")
    assert errors[1].startswith("spec.template.spec.taints.0.effect: 'NoScheduel' is not one of")


# --------------------------------------------------------------------------- TargetGroupBinding CRD


def test_lbc_target_group_binding_matches_the_crd(poc: TierConfig) -> None:
    binding = target_group_binding(
        name="vllm-qwen3-8b",
        namespace=poc.serving.namespace,
        service_name="vllm-qwen3-8b",
        service_port=poc.serving.port,
        target_group_arn=TG_ARN,
        api_version=LBC_TGB_API,
    )
    validate_crd(binding, "elbv2.k8s.aws_targetgroupbindings.yaml", "v1beta1")


# --------------------------------------------------------------------------- the strictifying walker


def test_strictify_closes_objects_with_properties_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "list": {"type": "array", "items": {"type": "object", "properties": {"a": {}}}},
                    "free": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"b": {}},
                    },
                    "map": {"type": "object", "additionalProperties": {"type": "string"}},
                    "opaque": {"type": "object"},
                    "either": {"anyOf": [{"type": "object", "properties": {"c": {}}}]},
                },
            }
        },
    }
    strict = strictify(schema)
    spec = strict["properties"]["spec"]
    assert strict["additionalProperties"] is False
    assert spec["additionalProperties"] is False
    assert spec["properties"]["list"]["items"]["additionalProperties"] is False
    assert "additionalProperties" not in spec["properties"]["free"]
    assert spec["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in spec["properties"]["opaque"]
    assert spec["properties"]["either"]["anyOf"][0]["additionalProperties"] is False
    assert "additionalProperties" not in schema, "the input schema is left untouched"


def test_crd_errors_name_the_path() -> None:
    errors = crd_errors(
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "x"}, "spec": []},
        "karpenter.sh_nodepools.yaml",
        "v1",
    )
    assert errors == ["spec: [] is not of type 'object'"]
