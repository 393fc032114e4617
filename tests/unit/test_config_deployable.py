"""Inputs that each field accepts alone but that break at deploy or at run time: refused by the
config checks, with the field path and the value, before any construct is built."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import ConfigError, TierConfig, build_tier, merge
from gpufarm.config.bedrock import PROFILE_GEOGRAPHIES, profile_callable_from
from gpufarm.config.model import BedrockTargetConfig
from gpufarm.config.validate import (
    CFN_DESCRIPTION_MAX_BYTES,
    GPUFARM_CONTROLLER_NAMESPACES,
    HEALTH_CHECK_TIMEOUT_SECONDS,
    MIN_APPLIANCE_SUBNET_PREFIX,
    s3_bucket_problem,
)
from gpufarm.k8s.lws import LWS_NAMESPACE
from tests.conftest import REPO

from .factories import (
    enterprise_part,
    make_enterprise,
    make_production,
    make_tier,
    model_override,
    overrides,
    pool_override,
    production_document,
    production_pool,
)

SECRET_ARN = "arn:aws:secretsmanager:{region}:123456789012:secret:gpufarm/hf-token-AbCdEf"
PROD_MODEL_BUCKET = "s3://gpufarm-production-models/"


def poc_issues(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_tier(*parts)
    return [str(issue) for issue in caught.value.issues]


def production_issues(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_production(*parts)
    return [str(issue) for issue in caught.value.issues]


def system_types(*types: str) -> dict[str, Any]:
    return {"cluster": {"system_nodes": {"instance_types": list(types)}}}


def fsx_bucket(bucket: str) -> dict[str, Any]:
    """The production tier with its model bucket (FSx import path and both models) renamed."""
    doc = production_document()
    uri = f"s3://{bucket}/"
    models = [
        {**m, "weights": m["weights"].replace(PROD_MODEL_BUCKET, uri)}
        if str(m["weights"]).startswith(PROD_MODEL_BUCKET)
        else m
        for m in doc["models"]
    ]
    return {"model_store": {"fsx": {"import_path": uri}}, "models": models}


INVALID_POC: list[Any] = [
    pytest.param(
        pool_override(instance_types=["g6e.12xlarge"], gpu_limit=2),
        [
            "node_pools[0].gpu_limit: must be at least the GPUs of the smallest instance the pool "
            "may launch (g6e.12xlarge: 4), else no node ever starts, got 2"
        ],
        id="gpu-limit-below-the-only-instance",
    ),
    pytest.param(
        pool_override(instance_families=["p5e"], gpu_limit=4),
        [
            "node_pools[0].gpu_limit: must be at least the GPUs of the smallest instance the pool "
            "may launch (p5e.48xlarge: 8), else no node ever starts, got 4"
        ],
        id="gpu-limit-below-a-family-of-8-gpu-instances",
    ),
    pytest.param(
        pool_override(ami_family="al2023", ami_version="1.50.0"),
        [
            "node_pools[0].ami_version: must be 'latest' or an AL2023 release such as 'v20251120' "
            "with ami_family 'al2023' (a version such as '1.50.0' is Bottlerocket's), got '1.50.0'"
        ],
        id="bottlerocket-version-on-al2023",
    ),
    pytest.param(
        pool_override(ami_family="bottlerocket", ami_version="v20251120"),
        [
            "node_pools[0].ami_version: must be 'latest' or a Bottlerocket release such as '1.50.0' "
            "with ami_family 'bottlerocket' (a version such as 'v20251120' is AL2023's), got 'v20251120'"
        ],
        id="al2023-version-on-bottlerocket",
    ),
    pytest.param(
        {"ingress": {"health_check_interval_seconds": HEALTH_CHECK_TIMEOUT_SECONDS}},
        [
            "ingress.health_check_interval_seconds: must be greater than the health-check timeout "
            "(5 s; the ELB API refuses an interval that is not), got 5"
        ],
        id="health-check-interval-equal-to-the-timeout",
    ),
    pytest.param(
        model_override(hf_token_secret=SECRET_ARN.format(region="eu-west-1")),
        [
            "models[0].hf_token_secret: must be a secret in the stack's region 'us-east-1' (gpufarm "
            "reads it there), got a secret in 'eu-west-1'"
        ],
        id="hf-token-secret-in-another-region",
    ),
    pytest.param(
        model_override(hf_token_secret=SECRET_ARN.format(region="useast1")),
        [
            "models[0].hf_token_secret: must be a secret name or a Secrets Manager secret ARN "
            "(arn:aws:secretsmanager:<region>:<account>:secret:<name>), got "
            "'arn:aws:secretsmanager:useast1:123456789012:secret:gpufarm/hf-token-AbCdEf'"
        ],
        id="hf-token-secret-arn-with-a-malformed-region",
    ),
    pytest.param(
        {"fallback": {"master_key_secret": SECRET_ARN.format(region="us-west-2")}},
        [
            "fallback.master_key_secret: must be a secret in the stack's region 'us-east-1' (gpufarm "
            "reads it there), got a secret in 'us-west-2'"
        ],
        id="gateway-master-key-in-another-region",
    ),
    pytest.param(
        model_override(weights="s3://models..bucket/qwen/"),
        [
            "models[0].weights: must name a bucket S3 allows (no two adjacent periods; S3 general "
            "purpose bucket naming rules), got bucket 'models..bucket' in 's3://models..bucket/qwen/'"
        ],
        id="bucket-with-adjacent-periods",
    ),
    pytest.param(
        model_override(weights="s3://192.168.5.4/qwen/"),
        [
            "models[0].weights: must name a bucket S3 allows (not an IP address; S3 general purpose "
            "bucket naming rules), got bucket '192.168.5.4' in 's3://192.168.5.4/qwen/'"
        ],
        id="bucket-formatted-as-an-ip-address",
    ),
    pytest.param(
        model_override(weights="s3://xn--models/qwen/"),
        [
            "models[0].weights: must name a bucket S3 allows (not the reserved prefix 'xn--'; S3 "
            "general purpose bucket naming rules), got bucket 'xn--models' in 's3://xn--models/qwen/'"
        ],
        id="bucket-with-a-reserved-prefix",
    ),
    pytest.param(
        model_override(weights="s3://models-s3alias/qwen/"),
        [
            "models[0].weights: must name a bucket S3 allows (not the reserved suffix '-s3alias'; S3 "
            "general purpose bucket naming rules), got bucket 'models-s3alias' in "
            "'s3://models-s3alias/qwen/'"
        ],
        id="bucket-with-a-reserved-suffix",
    ),
    pytest.param(
        # 400 characters, 1200 bytes: within the 1024-character field limit, over CloudFormation's.
        {"description": "模型" * 200},
        [
            "description: must be at most 1024 bytes in UTF-8 (CloudFormation's limit on a template "
            "description; a non-ASCII character takes 2-4 bytes), got 1200 bytes in 400 characters"
        ],
        id="description-over-the-byte-limit",
    ),
    pytest.param(
        {"serving": {"namespace": "kube-system"}},
        [
            "serving.namespace: must be a namespace of its own (gpufarm creates it, labels it and "
            "deletes it with the stack), not a Kubernetes system namespace, got 'kube-system'"
        ],
        id="serving-in-kube-system",
    ),
    pytest.param(
        {"serving": {"namespace": "default"}},
        [
            "serving.namespace: must be a namespace of its own (gpufarm creates it, labels it and "
            "deletes it with the stack), not a Kubernetes system namespace, got 'default'"
        ],
        id="serving-in-default",
    ),
    pytest.param(
        {"serving": {"namespace": "lws-system"}},
        [
            "serving.namespace: must be a namespace of its own (gpufarm creates it, labels it and "
            "deletes it with the stack), not the namespace of a controller gpufarm installs, got "
            "'lws-system'"
        ],
        id="serving-in-the-lws-controller-namespace",
    ),
    pytest.param(
        {"serving": {"namespace": "keda"}},
        [
            "serving.namespace: must be a namespace of its own (gpufarm creates it, labels it and "
            "deletes it with the stack), not autoscaling.namespace (KEDA's operator), got 'keda'"
        ],
        id="serving-in-the-keda-namespace",
    ),
    pytest.param(
        {"serving": {"allowed_client_namespaces": ["apps", "gpufarm"]}},
        [
            "serving.allowed_client_namespaces: must name other namespaces than serving.namespace "
            "(gpufarm's own pods are allowed by their own policies), got 'gpufarm'"
        ],
        id="client-namespace-is-the-serving-namespace",
    ),
    pytest.param(
        {"serving": {"allowed_client_namespaces": ["apps", "apps"]}},
        ["serving.allowed_client_namespaces: must list each namespace once, got 'apps' 2 times"],
        id="client-namespace-listed-twice",
    ),
    pytest.param(
        {"serving": {"allowed_client_namespaces": ["Apps_1"]}},
        [
            "serving.allowed_client_namespaces[0]: must be a lowercase DNS label (a-z, 0-9, '-', "
            "starting with a letter, at most 40 characters), got 'Apps_1'"
        ],
        id="client-namespace-not-a-dns-label",
    ),
    pytest.param(
        {"karpenter": {"namespace": "karpenter"}, "serving": {"namespace": "karpenter"}},
        [
            "serving.namespace: must be a namespace of its own (gpufarm creates it, labels it and "
            "deletes it with the stack), not karpenter.namespace (Karpenter's controller), got "
            "'karpenter'"
        ],
        id="serving-in-the-karpenter-namespace",
    ),
    pytest.param(
        model_override(
            bedrock={"model_id": "au.anthropic.claude-sonnet-4-5-20250929-v1:0", "region": "ap-southeast-1"}
        ),
        [
            "models[0].bedrock.model_id: must be an inference profile of the calling region "
            "'ap-southeast-1': a 'au' profile is called from its geography's regions "
            "('ap-southeast-2', 'ap-southeast-4'), got 'au.anthropic.claude-sonnet-4-5-20250929-v1:0'"
        ],
        id="au-profile-from-a-southeast-asian-region",
    ),
    pytest.param(
        model_override(bedrock={"model_id": "apac.meta.llama3-2-3b-instruct-v1:0", "region": "ap-east-1"}),
        [
            "models[0].bedrock.model_id: must be an inference profile of the calling region "
            "'ap-east-1': a 'apac' profile is called from its geography's regions ('ap-northeast-1', "
            "'ap-northeast-2', 'ap-northeast-3', 'ap-south-1', 'ap-south-2', 'ap-southeast-1', "
            "'ap-southeast-2', 'ap-southeast-4'), got 'apac.meta.llama3-2-3b-instruct-v1:0'"
        ],
        id="apac-profile-from-a-region-outside-the-table",
    ),
    pytest.param(
        model_override(
            bedrock={
                "model_id": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "region": "us-gov-west-1",
            }
        ),
        [
            "models[0].bedrock.model_id: must be an inference profile of the calling region "
            "'us-gov-west-1': a 'global' profile is called from a commercial region (not 'us-gov-' or "
            "'cn-'), got 'global.anthropic.claude-sonnet-4-5-20250929-v1:0'"
        ],
        id="global-profile-from-govcloud",
    ),
    pytest.param(
        model_override(extra_args=["--pipeline_parallel_size=2"]),
        [
            "models[0].extra_args[0]: must not set --pipeline-parallel-size (gpufarm derives it from "
            "the model config), got '--pipeline_parallel_size=2'"
        ],
        id="reserved-pipeline-parallel-in-underscore-spelling",
    ),
    pytest.param(
        model_override(extra_args=["-q", "awq"]),
        [
            "models[0].extra_args[0]: must not set --quantization (gpufarm derives it from the model "
            "config), got '-q'"
        ],
        id="reserved-quantization-short-alias",
    ),
    pytest.param(
        model_override(extra_args=["--revision=main"]),
        [
            "models[0].extra_args[0]: must not set --revision (gpufarm derives it from the model "
            "config), got '--revision=main'"
        ],
        id="reserved-revision",
    ),
    pytest.param(
        model_override(extra_args=["--max-num-seqs", "64"]),
        [
            "models[0].extra_args[0]: must not set --max-num-seqs (gpufarm derives it from the model "
            "config), got '--max-num-seqs'"
        ],
        id="reserved-max-num-seqs",
    ),
    pytest.param(
        model_override(served_model_name="qwen@bedrock"),
        [
            "models[0].served_model_name: must not end with '@bedrock' while fallback is enabled "
            "(the gateway's name for a model's Bedrock route), got 'qwen@bedrock'"
        ],
        id="served-name-taking-the-bedrock-route-name",
    ),
    pytest.param(
        pool_override(instance_types=["g6e.xlarge"]),
        [
            "models[0].cpu: must fit one instance the model may land on with 1 GPU(s) (at most "
            "4 vCPUs and 32 GiB; the pod asks 6 CPU and 48 GiB), got 6"
        ],
        id="pod-larger-than-the-pools-only-instance",
    ),
    pytest.param(
        # g6 hosts were known to the planner but not to this check before the one catalog.
        pool_override(instance_families=["g6"], instance_types=["g6.xlarge"]),
        [
            "models[0].cpu: must fit one instance the model may land on with 1 GPU(s) (at most "
            "4 vCPUs and 16 GiB; the pod asks 6 CPU and 48 GiB), got 6"
        ],
        id="pod-larger-than-the-pools-only-g6-instance",
    ),
    pytest.param(
        overrides(pool_override(instance_families=["g6"]), model_override(memory_gib=2000)),
        [
            "models[0].memory_gib: must fit one instance the model may land on with 1 GPU(s) "
            "(at most 192 vCPUs and 768 GiB; the pod asks 6 CPU and 2000 GiB), got 2000"
        ],
        id="pod-memory-above-every-instance-of-the-g6-family",
    ),
    pytest.param(
        overrides(pool_override(instance_families=["g5"]), model_override(memory_gib=1000)),
        [
            "models[0].memory_gib: must fit one instance the model may land on with 1 GPU(s) "
            "(at most 192 vCPUs and 768 GiB; the pod asks 6 CPU and 1000 GiB), got 1000"
        ],
        id="pod-memory-above-every-instance-of-the-family",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID_POC)
def test_invalid_poc_input(override: dict[str, Any], expected: list[str]) -> None:
    assert poc_issues(override) == expected


INVALID_PRODUCTION: list[Any] = [
    pytest.param(
        system_types("m7i.xlarge", "m7g.xlarge"),
        [
            "cluster.system_nodes.instance_types: must share one CPU architecture (one AMI serves the "
            "node group), got arm64 ['m7g.xlarge'] and x86_64 ['m7i.xlarge']"
        ],
        id="system-nodes-of-two-architectures",
    ),
    pytest.param(
        system_types("m7i-xlarge"),
        [
            "cluster.system_nodes.instance_types[0]: must be an EC2 instance type such as 'm7i.xlarge' "
            "(family, generation, capabilities, '.', size), got 'm7i-xlarge'"
        ],
        id="system-node-type-the-cdk-cannot-read",
    ),
    pytest.param(
        system_types("M7i.xlarge"),
        [
            "cluster.system_nodes.instance_types[0]: must be an EC2 instance type such as 'm7i.xlarge' "
            "(family, generation, capabilities, '.', size), got 'M7i.xlarge'"
        ],
        id="system-node-type-in-capitals",
    ),
    pytest.param(
        system_types("g6e.xlarge"),
        [
            "cluster.system_nodes.instance_types[0]: must be a CPU instance type (system pods use no "
            "GPU or other accelerator; GPU capacity belongs in node_pools or node_groups), got "
            "'g6e.xlarge'"
        ],
        id="gpu-instance-as-system-node",
    ),
    pytest.param(
        system_types("m7i.xlarge", "m7i.xlarge"),
        [
            "cluster.system_nodes.instance_types: must not list an instance type twice, got "
            "'m7i.xlarge' 2 times"
        ],
        id="system-node-type-twice",
    ),
    pytest.param(
        production_pool(0, ami_family="bottlerocket", ami_version="v20251120"),
        [
            "node_pools[0].ami_version: must be 'latest' or a Bottlerocket release such as '1.50.0' "
            "with ami_family 'bottlerocket' (a version such as 'v20251120' is AL2023's), got 'v20251120'"
        ],
        id="al2023-version-on-a-karpenter-bottlerocket-pool",
    ),
    pytest.param(
        fsx_bucket("sthree-models"),
        [
            "models[0].weights: must name a bucket S3 allows (not the reserved prefix 'sthree-'; S3 "
            "general purpose bucket naming rules), got bucket 'sthree-models' in "
            "'s3://sthree-models/meta-llama/Llama-3.3-70B-Instruct/'",
            "models[1].weights: must name a bucket S3 allows (not the reserved prefix 'sthree-'; S3 "
            "general purpose bucket naming rules), got bucket 'sthree-models' in "
            "'s3://sthree-models/Qwen/Qwen3-32B/'",
            "model_store.fsx.import_path: must name a bucket S3 allows (not the reserved prefix "
            "'sthree-'; S3 general purpose bucket naming rules), got bucket 'sthree-models' in "
            "'s3://sthree-models/'",
        ],
        id="fsx-import-bucket-with-a-reserved-prefix",
    ),
    pytest.param(
        {
            "environment": {
                "availability_zones": [f"us-east-1{z}" for z in "abcdef"],
            }
        },
        [
            "environment.availability_zones: must list at most 5 zones while "
            "observability.prometheus.enabled is true (the managed scraper takes one private subnet "
            "per zone, 5 at most), got 6"
        ],
        id="six-zones-with-managed-prometheus",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID_PRODUCTION)
def test_invalid_production_input(override: dict[str, Any], expected: list[str]) -> None:
    assert production_issues(override) == expected


VALID: list[Any] = [
    pytest.param(pool_override(instance_types=["g6e.12xlarge"], gpu_limit=4), id="gpu-limit-one-node"),
    pytest.param(pool_override(ami_family="bottlerocket", ami_version="1.50.0"), id="bottlerocket-release"),
    pytest.param(pool_override(ami_family="al2023", ami_version="v20251120"), id="al2023-release"),
    pytest.param(pool_override(ami_family="bottlerocket", ami_version="latest"), id="bottlerocket-latest"),
    pytest.param({"ingress": {"health_check_interval_seconds": 6}}, id="health-check-interval-6"),
    pytest.param(model_override(hf_token_secret=SECRET_ARN.format(region="us-east-1")), id="secret-arn-here"),
    pytest.param(model_override(hf_token_secret="gpufarm/hf-token"), id="secret-name"),
    pytest.param(model_override(weights="s3://my.models-bucket/qwen/"), id="bucket-with-single-periods"),
    pytest.param({"description": "é" * 512}, id="description-of-exactly-1024-bytes"),
    pytest.param({"serving": {"namespace": "inference"}}, id="serving-namespace-of-its-own"),
    pytest.param(
        model_override(
            bedrock={"model_id": "au.anthropic.claude-sonnet-4-5-20250929-v1:0", "region": "ap-southeast-2"}
        ),
        id="au-profile-from-sydney",
    ),
    pytest.param(
        model_override(
            bedrock={
                "model_id": "apac.meta.llama3-2-3b-instruct-v1:0",
                "region": "ap-east-1",
                "destination_regions": ["ap-east-1", "ap-southeast-1"],
            }
        ),
        id="region-added-through-destination-regions",
    ),
    pytest.param(model_override(extra_args=["--enable-prefix-caching", "-O3"]), id="unreserved-flags"),
    pytest.param(
        overrides(pool_override(instance_types=["g6e.2xlarge"]), model_override(cpu=8, memory_gib=64)),
        id="pod-as-large-as-its-instance",
    ),
    # The catalog has host sizes for only one g7e size: the pod is not judged against the others.
    pytest.param(
        overrides(pool_override(instance_families=["g7e"]), model_override(memory_gib=2000)),
        id="pool-of-unknown-host-sizes",
    ),
]


@pytest.mark.parametrize("override", VALID)
def test_valid_poc_variants(override: dict[str, Any]) -> None:
    assert make_tier(override).name == "poc"


def test_pod_larger_than_its_node_groups_instance() -> None:
    """A node group has one instance type: a pod larger than it never starts there."""
    with pytest.raises(ConfigError) as caught:
        make_enterprise(
            overrides(
                enterprise_part("node_groups", 1, instance_type="p4d.24xlarge"),
                enterprise_part("models", 0, cpu=100),
            )
        )
    assert [str(i) for i in caught.value.issues] == [
        "models[0].cpu: must fit one instance the model may land on with 8 GPU(s) (at most 96 vCPUs "
        "and 1152 GiB; the pod asks 100 CPU and 900 GiB), got 100"
    ]
    assert make_enterprise(
        overrides(
            enterprise_part("node_groups", 1, instance_type="p4d.24xlarge"),
            enterprise_part("models", 0, cpu=96),
        )
    )


def test_multi_node_model_may_not_choose_its_executor() -> None:
    with pytest.raises(ConfigError) as caught:
        make_enterprise(enterprise_part("models", 0, extra_args=["--distributed_executor_backend=mp"]))
    assert [str(i) for i in caught.value.issues] == [
        "models[0].extra_args[0]: must not set --distributed-executor-backend on a multi-node model "
        "(gpufarm runs its replicas with Ray), got '--distributed_executor_backend=mp'"
    ]
    # A single-node model runs no Ray: the flag is its own to set.
    flags = ["--distributed-executor-backend", "mp"]
    single = make_enterprise(enterprise_part("models", 1, extra_args=flags))
    assert single.models[1].extra_args == flags


def test_system_nodes_are_not_checked_in_auto_mode() -> None:
    """Auto Mode has no system node group: its instance types are never read."""
    cfg: TierConfig = make_tier(system_types("m7i-xlarge"))
    assert cfg.cluster.system_nodes.instance_types == ["m7i-xlarge"]


def test_arm_system_nodes_of_one_architecture_are_accepted() -> None:
    cfg = make_production(system_types("m7g.xlarge", "c7gn.2xlarge"))
    assert cfg.cluster.system_nodes.instance_types == ["m7g.xlarge", "c7gn.2xlarge"]


def test_inspection_appliance_type_must_be_readable() -> None:
    inspection = {"ingress": {"inspection": {"enabled": True}, "scheme": "internet-facing"}}
    bad = overrides(inspection, {"ingress": {"inspection": {"appliances": {"instance_type": "c6in large"}}}})
    issues = [i for i in _all_issues(make_production_document_with(bad)) if "appliances" in i]
    assert issues == [
        "ingress.inspection.appliances.instance_type: must be an EC2 instance type such as "
        "'c6in.large' (family, generation, capabilities, '.', size), got 'c6in large'"
    ]
    good = overrides(inspection, {"ingress": {"inspection": {"appliances": {"instance_type": "c7gn.large"}}}})
    assert [i for i in _all_issues(make_production_document_with(good)) if "appliances" in i] == []


def test_inspection_cidr_must_leave_a_subnet_per_zone() -> None:
    """A /26 split over 3 zones (4 parts) leaves /28s; a /27 would leave /29s."""
    inspection = {"ingress": {"inspection": {"enabled": True}, "scheme": "internet-facing"}}
    fits = overrides(inspection, {"ingress": {"inspection": {"cidr": "10.250.0.0/26"}}})
    issues = [i for i in _all_issues(make_production_document_with(fits)) if "inspection.cidr" in i]
    assert issues == []
    too_small = overrides(inspection, {"ingress": {"inspection": {"cidr": "10.250.0.0/27"}}})
    issues = [i for i in _all_issues(make_production_document_with(too_small)) if "inspection.cidr" in i]
    assert issues == [
        "ingress.inspection.cidr: must leave a /28 or larger appliance subnet per availability zone "
        "(3 zones need a /26 or larger), got '10.250.0.0/27'"
    ]


def make_production_document_with(part: dict[str, Any]) -> dict[str, Any]:
    return merge(production_document(), part)


def _all_issues(document: dict[str, Any]) -> list[str]:
    """Every issue of a document (empty when it builds)."""
    try:
        build_tier(document)
    except ConfigError as err:
        return [str(issue) for issue in err.issues]
    return []


@pytest.mark.parametrize(
    ("bucket", "problem"),
    [
        ("ab", "3 to 63 characters (2)"),
        ("a" * 64, "3 to 63 characters (64)"),
        ("My-Bucket", "only lowercase letters, digits, '.' and '-'"),
        ("models_bucket", "only lowercase letters, digits, '.' and '-'"),
        ("-models", "a letter or digit first and last"),
        ("models.", "a letter or digit first and last"),
        ("models..bucket", "no two adjacent periods"),
        ("10.0.0.1", "not an IP address"),
        ("xn--models", "not the reserved prefix 'xn--'"),
        ("sthree-models", "not the reserved prefix 'sthree-'"),
        ("amzn-s3-demo-models", "not the reserved prefix 'amzn-s3-demo-'"),
        ("models-s3alias", "not the reserved suffix '-s3alias'"),
        ("models--ol-s3", "not the reserved suffix '--ol-s3'"),
        ("models.mrap", "not the reserved suffix '.mrap'"),
        ("models--x-s3", "not the reserved suffix '--x-s3'"),
        ("gpufarm-production-models", None),
        ("my.models.2026", None),
        ("abc", None),
    ],
)
def test_s3_bucket_naming_rules(bucket: str, problem: str | None) -> None:
    assert s3_bucket_problem(bucket) == problem


def test_description_limit_is_cloudformations() -> None:
    assert CFN_DESCRIPTION_MAX_BYTES == 1024


def test_controller_namespaces_match_the_constructs() -> None:
    from gpufarm.constructs.observability import DCGM_NAMESPACE

    assert set(GPUFARM_CONTROLLER_NAMESPACES) == {LWS_NAMESPACE, DCGM_NAMESPACE}


def test_health_check_timeout_is_the_one_the_constructs_set() -> None:
    from gpufarm.constructs import ingress, nlb

    assert ingress.HEALTH_CHECK_TIMEOUT_SECONDS is HEALTH_CHECK_TIMEOUT_SECONDS
    assert nlb.HEALTH_CHECK_TIMEOUT_SECONDS is HEALTH_CHECK_TIMEOUT_SECONDS


def test_inspection_subnet_limit_matches_the_construct() -> None:
    from gpufarm.constructs import inspection

    assert inspection._MIN_APPLIANCE_SUBNET_PREFIX == MIN_APPLIANCE_SUBNET_PREFIX


@pytest.mark.parametrize(
    ("prefix", "region", "callable_"),
    [
        # Regions a name-prefix match took for members of the geography.
        ("au", "ap-southeast-1", False),
        ("au", "ap-southeast-3", False),
        ("jp", "ap-northeast-2", False),
        ("apac", "ap-east-1", False),
        ("eu", "eu-west-2", False),
        ("ca", "ca-central-1", True),
        ("au", "ap-southeast-2", True),
    ],
)
def test_profile_source_regions_come_from_the_table(prefix: str, region: str, callable_: bool) -> None:
    assert profile_callable_from(prefix, region) is callable_
    assert (region in PROFILE_GEOGRAPHIES[prefix]) is callable_


def test_destination_regions_extend_the_source_regions() -> None:
    target = BedrockTargetConfig(model_id="eu.meta.x-v1:0", destination_regions=["eu-west-2", "eu-west-1"])
    assert profile_callable_from("eu", "eu-west-2", target.destination_regions)


def test_app_refuses_inputs_that_once_reached_the_constructs_and_writes_nothing(tmp_path: Path) -> None:
    """Run as the CDK CLI runs it: exit 2 with every issue, no traceback, no cloud assembly.

    Mixed system-node architectures reached `InferenceCluster` (a ValueError naming
    'system_nodes.instance_types' as a traceback); a 5 s health-check interval was refused only
    by the ELB API at deploy.
    """
    tier_file = tmp_path / "mine.yaml"
    tier_file.write_text(
        "extends: production\n"
        "cluster:\n  system_nodes:\n    instance_types: [m7i.xlarge, m7g.xlarge]\n"
        "ingress:\n  health_check_interval_seconds: 5\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        HOME=str(tmp_path),
        PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}",
        AWS_EC2_METADATA_DISABLED="true",
        JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1",
        CDK_OUTDIR=str(out),
        CDK_CONTEXT_JSON=json.dumps({"tier_file": str(tier_file)}),
    )
    result = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "app.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"invalid {tier_file}:",
        "  - cluster.system_nodes.instance_types: must share one CPU architecture (one AMI serves the "
        "node group), got arm64 ['m7g.xlarge'] and x86_64 ['m7i.xlarge']",
        "  - ingress.health_check_interval_seconds: must be greater than the health-check timeout "
        "(5 s; the ELB API refuses an interval that is not), got 5",
    ]
    # The CDK app makes its output folder when it starts; nothing may be written into it.
    assert not out.exists() or not any(out.iterdir())
