"""Preflight's image cache check against moto: the credentials exist, and each pinned image the
template pulls through the account's ECR is there by digest, with the command that fixes a miss."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from gpufarm.aws.preflight import Status, check_image_cache, template_images
from gpufarm.config import TierConfig
from tests.aws.moto_account import moto_account, table
from tests.unit.factories import make_production, make_tier

REGION = "us-east-1"
ACCOUNT = "123456789012"
"""moto's account."""
REGISTRY = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
MANIFEST = json.dumps(
    {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}
)


@pytest.fixture(autouse=True)
def account(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with moto_account(monkeypatch, REGION):
        yield


def _secrets() -> dict[str, str]:
    sm = boto3.client("secretsmanager", region_name=REGION)
    return {
        name: sm.create_secret(Name=f"ecr-pullthroughcache/{name}", SecretString="{}")["ARN"]
        for name in ("docker-hub", "github")
    }


def _tier(arns: dict[str, str]) -> TierConfig:
    return make_production(
        {"images": {"docker_hub_credential_arn": arns["docker-hub"], "github_credential_arn": arns["github"]}}
    )


def _cached(repository: str) -> str:
    """Put one image in a cache repository; its digest (moto hashes the manifest)."""
    ecr = boto3.client("ecr", region_name=REGION)
    ecr.create_repository(repositoryName=repository)
    image = ecr.put_image(repositoryName=repository, imageManifest=MANIFEST, imageTag="v1")["image"]
    digest: str = image["imageId"]["imageDigest"]
    return digest


def _template(vllm_digest: str, dcgm_digest: str) -> dict[str, Any]:
    account = {"Ref": "AWS::AccountId"}
    manifest = json.dumps(
        [
            {
                "kind": "Deployment",
                "spec": {"template": {"spec": {"containers": [{"name": "vllm", "image": "@VLLM@"}]}}},
            }
        ]
    )
    head, tail = manifest.split("@VLLM@")
    vllm = f".dkr.ecr.{REGION}.amazonaws.com/production/docker-hub/vllm/vllm-openai:v1@{vllm_digest}"
    values = json.dumps({"image": {"repository": "@DCGM@", "tag": f"v1@{dcgm_digest}"}})
    vhead, vtail = values.split("@DCGM@")
    dcgm = f".dkr.ecr.{REGION}.amazonaws.com/production/nvcr/nvidia/k8s/dcgm-exporter"
    return {
        "Resources": {
            "Model": {
                "Type": "Custom::AWSCDK-EKS-KubernetesResource",
                "Properties": {"Manifest": {"Fn::Join": ["", [head, account, vllm, tail]]}},
            },
            "Dcgm": {
                "Type": "Custom::AWSCDK-EKS-HelmChart",
                "Properties": {
                    "Chart": "dcgm-exporter",
                    "Values": {"Fn::Join": ["", [vhead, account, dcgm, vtail]]},
                },
            },
        }
    }


def _run(tier: TierConfig, template: dict[str, Any] | None) -> dict[str, tuple[Status, str, str]]:
    return table(
        check_image_cache(
            tier,
            template=template,
            account=ACCOUNT,
            ecr=boto3.client("ecr", region_name=REGION),
            secretsmanager=boto3.client("secretsmanager", region_name=REGION),
        )
    )


def test_template_images_fills_in_the_account() -> None:
    digest = "sha256:" + "1" * 64
    images = template_images(_template(digest, digest), ACCOUNT)
    assert images == [
        f"{REGISTRY}/production/docker-hub/vllm/vllm-openai:v1@{digest}",
        f"{REGISTRY}/production/nvcr/nvidia/k8s/dcgm-exporter:v1@{digest}",
    ]


def test_every_image_present_passes() -> None:
    tier = _tier(_secrets())
    vllm = _cached("production/docker-hub/vllm/vllm-openai")
    dcgm = _cached("production/nvcr/nvidia/k8s/dcgm-exporter")
    rows = _run(tier, _template(vllm, dcgm))
    assert {s for s, _, _ in rows.values()} == {Status.PASS}
    assert set(rows) == {
        "images.docker_hub_credential_arn",
        "images.github_credential_arn",
        "production/docker-hub/vllm/vllm-openai:v1",
        "production/nvcr/nvidia/k8s/dcgm-exporter:v1",
    }


def test_a_missing_image_fails_with_the_command_that_fixes_it() -> None:
    tier = _tier(_secrets())
    missing = "sha256:" + "2" * 64
    rows = _run(tier, _template(missing, missing))
    assert rows["production/docker-hub/vllm/vllm-openai:v1"] == (
        Status.FAIL,
        "not cached yet: ECR caches an image on a pull by tag, and nodes pull by digest "
        "(sha256:222222222222...)",
        "pull it once by tag through the cache: docker pull "
        f"{REGISTRY}/production/docker-hub/vllm/vllm-openai:v1",
    )
    assert rows["production/nvcr/nvidia/k8s/dcgm-exporter:v1"] == (
        Status.FAIL,
        "the NVIDIA NGC (nvcr.io) mirror holds no sha256:222222222222...",
        "aws ecr create-repository --repository-name production/nvcr/nvidia/k8s/dcgm-exporter "
        "--image-tag-mutability IMMUTABLE --image-scanning-configuration scanOnPush=true; crane copy "
        f"nvcr.io/nvidia/k8s/dcgm-exporter:v1@{missing} "
        f"{REGISTRY}/production/nvcr/nvidia/k8s/dcgm-exporter:v1",
    )


def test_a_missing_credential_secret_fails() -> None:
    arns = _secrets()
    boto3.client("secretsmanager", region_name=REGION).delete_secret(
        SecretId=arns["github"], ForceDeleteWithoutRecovery=True
    )
    rows = _run(_tier(arns), None)
    status, message, fix = rows["images.github_credential_arn"]
    assert status is Status.FAIL
    assert message == (
        f"Secrets Manager has no secret {arns['github']!r}: CloudFormation cannot create the cache rule"
    )
    assert fix.startswith(
        "create it with the registry's user name and access token: aws secretsmanager "
        "create-secret --name ecr-pullthroughcache/github "
    )
    assert rows["images"][0] is Status.SKIP


def test_no_rows_without_the_cache() -> None:
    assert _run(make_tier(), None) == {}
