"""VllmServing with the Run:ai Model Streamer store: no volume, a Pod Identity role reading the prefixes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from aws_cdk.assertions import Template

from gpufarm.config import ModelConfig, RunaiStreamerConfig, ServingConfig
from gpufarm.constructs import VllmServing
from gpufarm.k8s import serving as k8s_serving
from tests.constructs.helpers import (
    CLUSTER_NAME,
    REGION,
    imported_cluster,
    logical_id,
    manifest_of,
    new_stack,
    partition_arn,
    resources,
)

SERVING = ServingConfig(namespace="inference")
STREAMED = ModelConfig(name="qwen3-32b", weights="s3://model-bucket/Qwen/Qwen3-32B/", gpus=2, memory_gib=96)
OTHER = ModelConfig(name="llama", weights="s3://other-bucket/llama/")
OPEN = ModelConfig(name="mistral", weights="mistralai/Mistral-7B-Instruct-v0.3")


@dataclass(frozen=True)
class Built:
    serving: VllmServing
    template: Template


@pytest.fixture(scope="module")
def built() -> Built:
    stack = new_stack("StreamedServing")
    serving = VllmServing(
        stack,
        "Serving",
        cluster=imported_cluster(stack),
        config=SERVING,
        models=[STREAMED, OTHER, OPEN],
        default_pool="l40s",
        region=REGION,
        streamer=RunaiStreamerConfig(concurrency=16),
    )
    return Built(serving, Template.from_stack(stack))


def _kinds(built: Built, model: str) -> list[str]:
    return [doc["kind"] for doc in manifest_of(built.template, built.serving.model_manifests[model])]


def _pod(built: Built, model: str) -> dict[str, Any]:
    (deployment,) = [
        d
        for d in manifest_of(built.template, built.serving.model_manifests[model])
        if d["kind"] == "Deployment"
    ]
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def test_streamed_models_get_no_volume_claim_or_csi_driver(built: Built) -> None:
    assert _kinds(built, "qwen3-32b") == ["Deployment", "Service"]
    assert _kinds(built, "llama") == ["Deployment", "Service"]
    built.template.resource_count_is("AWS::EKS::Addon", 0)
    pod = _pod(built, "qwen3-32b")
    assert "weights" not in [v["name"] for v in pod["volumes"]]


def test_streamed_pods_run_as_the_service_account_with_the_role(built: Built) -> None:
    assert _pod(built, "qwen3-32b")["serviceAccountName"] == k8s_serving.SERVICE_ACCOUNT
    # Hugging Face weights download from the Hub: the store changes nothing for them.
    assert "serviceAccountName" not in _pod(built, "mistral")
    assert built.serving.role is not None
    built.template.has_resource_properties(
        "AWS::EKS::PodIdentityAssociation",
        {
            "ClusterName": CLUSTER_NAME,
            "Namespace": "inference",
            "ServiceAccount": k8s_serving.SERVICE_ACCOUNT,
            "RoleArn": {"Fn::GetAtt": [logical_id(built.serving.role), "Arn"]},
        },
    )


def test_role_may_list_and_get_exactly_the_model_prefixes(built: Built) -> None:
    assert built.serving.role is not None
    (policy,) = resources(built.template, "AWS::IAM::Policy").values()
    assert policy["Properties"]["Roles"] == [{"Ref": logical_id(built.serving.role)}]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    expected = [
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["Qwen/Qwen3-32B/*"]}},
            "Effect": "Allow",
            "Resource": partition_arn(":s3:::model-bucket"),
        },
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["llama/*"]}},
            "Effect": "Allow",
            "Resource": partition_arn(":s3:::other-bucket"),
        },
        {
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": [
                partition_arn(":s3:::model-bucket/Qwen/Qwen3-32B/*"),
                partition_arn(":s3:::other-bucket/llama/*"),
            ],
        },
    ]
    assert sorted(json.dumps(s, sort_keys=True) for s in statements) == sorted(
        json.dumps(s, sort_keys=True) for s in expected
    )
    role = resources(built.template, "AWS::IAM::Role")[logical_id(built.serving.role)]
    assert role["Properties"]["Description"] == "vLLM pods: stream model weights from S3"


def test_vllm_reads_the_uri_with_the_streamer(built: Built) -> None:
    (engine,) = _pod(built, "qwen3-32b")["containers"]
    args = engine["args"]
    assert args[0] == STREAMED.weights
    assert args[-4:-1] == ["--load-format", "runai_streamer", "--model-loader-extra-config"]
    # 96 GiB over two engine processes, half of it for buffers: 24 GiB each.
    assert json.loads(args[-1]) == {"concurrency": 16, "distributed": True, "memory_limit": 24 * 1024**3}


def test_streamer_and_fsx_together_are_rejected_with_an_exact_message() -> None:
    stack = new_stack("BothStores")
    with pytest.raises(ValueError) as caught:
        VllmServing(
            stack,
            "Serving",
            cluster=imported_cluster(stack),
            config=SERVING,
            models=[STREAMED],
            default_pool="l40s",
            region=REGION,
            fsx_claim="fsx-models",
            fsx_import_path="s3://model-bucket/",
            streamer=RunaiStreamerConfig(),
        )
    assert str(caught.value) == "'streamer' and 'fsx_claim' are two model stores: give one, got both"
