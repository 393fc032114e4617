"""The one rewrite that moves every image into the account's ECR, and the checks of `images`."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError
from gpufarm.image_cache import (
    UPSTREAMS,
    UncachedRegistryError,
    cached,
    cached_repository,
    container_images,
    host_of,
    rewrite_manifest,
    rewrite_values,
    upstream_repository,
    values_images,
)
from gpufarm.images import table

from .factories import make_production, make_tier

REGISTRY = "210987654321.dkr.ecr.eu-west-1.amazonaws.com"
DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("repository", "host", "path"),
    [
        # No registry part: a Docker Hub namespace, as container runtimes read it.
        ("vllm/vllm-openai", "docker.io", "vllm/vllm-openai"),
        # An official image lives under library/ (the ECR guide: "the /library prefix must be included").
        ("nginx", "docker.io", "library/nginx"),
        ("docker.io/envoyproxy/envoy", "docker.io", "envoyproxy/envoy"),
        ("index.docker.io/library/busybox", "docker.io", "library/busybox"),
        ("ghcr.io/berriai/litellm", "ghcr.io", "berriai/litellm"),
        ("nvcr.io/nvidia/k8s/dcgm-exporter", "nvcr.io", "nvidia/k8s/dcgm-exporter"),
        ("localhost/x", "localhost", "x"),
    ],
)
def test_host_of_reads_the_registry_as_container_runtimes_do(repository: str, host: str, path: str) -> None:
    assert host_of(repository) == (host, path)


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        (
            f"vllm/vllm-openai:v0.31.0@{DIGEST}",
            f"{REGISTRY}/prod/docker-hub/vllm/vllm-openai:v0.31.0@{DIGEST}",
        ),
        (f"nginx:1.27@{DIGEST}", f"{REGISTRY}/prod/docker-hub/library/nginx:1.27@{DIGEST}"),
        ("public.ecr.aws/aws-cli/aws-cli:2.31.23", f"{REGISTRY}/prod/ecr-public/aws-cli/aws-cli:2.31.23"),
        (f"ghcr.io/berriai/litellm@{DIGEST}", f"{REGISTRY}/prod/github/berriai/litellm@{DIGEST}"),
        ("registry.k8s.io/lws/lws:v0.10.0", f"{REGISTRY}/prod/kubernetes/lws/lws:v0.10.0"),
        ("quay.io/prometheus/node-exporter:v1", f"{REGISTRY}/prod/quay/prometheus/node-exporter:v1"),
        # nvcr.io is no pull through cache upstream: the gpufarm-created mirror repository.
        ("nvcr.io/nvidia/tensorrt-llm/release:1.0", f"{REGISTRY}/prod/nvcr/nvidia/tensorrt-llm/release:1.0"),
        # Already in ECR (the EKS add-on registry, or this cache): left as it is.
        (
            "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20",
            "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:v0.5.20",
        ),
        (f"{REGISTRY}/prod/quay/a:b", f"{REGISTRY}/prod/quay/a:b"),
    ],
)
def test_cached_moves_a_reference_under_its_upstream_prefix_keeping_tag_and_digest(
    reference: str, expected: str
) -> None:
    assert cached(reference, REGISTRY, "prod") == expected


def test_every_table_image_has_a_place_in_the_cache() -> None:
    # A new row on a host the cache does not serve would otherwise surface only at synth.
    for row in table().values():
        moved = cached_repository(row.repository, REGISTRY, "prod")
        assert moved.startswith(f"{REGISTRY}/prod/") or moved == row.repository, row.name


@pytest.mark.parametrize(
    ("repository", "message"),
    [
        (
            "gcr.io/distroless/static",
            "image repository 'gcr.io/distroless/static' is on 'gcr.io', which neither an ECR pull "
            "through cache rule nor a gpufarm mirror serves (hosts: "
            + ", ".join(UPSTREAMS)
            + ", or an Amazon ECR registry)",
        ),
        (
            "registry.gitlab.com/group/image",
            "image repository 'registry.gitlab.com/group/image' is on GitLab Container Registry, for "
            "which gpufarm creates no cache rule (hosts with one: docker.io, ghcr.io, public.ecr.aws, "
            "quay.io, registry.k8s.io)",
        ),
    ],
)
def test_an_image_the_cache_cannot_serve_is_refused(repository: str, message: str) -> None:
    with pytest.raises(UncachedRegistryError) as caught:
        cached_repository(repository, REGISTRY, "prod")
    assert str(caught.value) == message


def _move(reference: str) -> str:
    return cached(reference, REGISTRY, "prod")


def test_rewrite_manifest_reaches_every_container_of_every_pod_template() -> None:
    lws: dict[str, Any] = {
        "kind": "LeaderWorkerSet",
        "spec": {
            "leaderWorkerTemplate": {
                "leaderTemplate": {
                    "spec": {
                        "initContainers": [{"name": "token", "image": "public.ecr.aws/aws-cli/aws-cli:2"}],
                        "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v1"}],
                    }
                },
                "workerTemplate": {
                    "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v1"}]}
                },
            }
        },
    }
    moved = rewrite_manifest(lws, _move)
    assert container_images(moved) == [
        f"{REGISTRY}/prod/ecr-public/aws-cli/aws-cli:2",
        f"{REGISTRY}/prod/docker-hub/vllm/vllm-openai:v1",
        f"{REGISTRY}/prod/docker-hub/vllm/vllm-openai:v1",
    ]
    # The input is left as it was: constructs keep the upstream manifest for other uses.
    assert container_images(lws)[1] == "vllm/vllm-openai:v1"


def test_rewrite_manifest_leaves_image_keys_outside_containers() -> None:
    config_map = {"kind": "ConfigMap", "data": {"image": "vllm/vllm-openai:v1"}}
    assert rewrite_manifest(config_map, _move) == config_map


def test_rewrite_values_moves_repository_keys_and_splits_a_registry_key() -> None:
    values = {
        "controller": {
            "image": {"repository": "public.ecr.aws/karpenter/controller", "tag": "1.14.0", "digest": DIGEST}
        },
        "image": {"keda": {"registry": "ghcr.io", "repository": "kedacore/keda", "tag": "2.18.1"}},
        "chart": {"repository": "oci://public.ecr.aws/karpenter"},  # no tag: not an image
    }
    moved = rewrite_values(values, lambda r: cached_repository(r, REGISTRY, "prod"))
    assert moved["controller"]["image"] == {
        "repository": f"{REGISTRY}/prod/ecr-public/karpenter/controller",
        "tag": "1.14.0",
        "digest": DIGEST,
    }
    assert moved["image"]["keda"] == {
        "registry": REGISTRY,
        "repository": "prod/github/kedacore/keda",
        "tag": "2.18.1",
    }
    assert moved["chart"] == values["chart"]
    assert values_images(moved) == [
        f"{REGISTRY}/prod/ecr-public/karpenter/controller",
        f"{REGISTRY}/prod/github/kedacore/keda",
    ]


@pytest.mark.parametrize(
    "reference",
    [
        "vllm/vllm-openai",
        "nginx",
        "ghcr.io/kedacore/keda",
        "nvcr.io/nvidia/k8s/dcgm-exporter",
        "registry.k8s.io/lws/lws",
    ],
)
def test_upstream_repository_reads_a_cached_repository_back(reference: str) -> None:
    host, path = host_of(reference)
    assert upstream_repository(cached_repository(reference, REGISTRY, "prod")) == f"{host}/{path}"


def test_upstream_repository_leaves_other_repositories() -> None:
    eks = "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"
    assert upstream_repository(eks) == eks
    assert upstream_repository("vllm/vllm-openai") == "vllm/vllm-openai"


def test_the_rewrite_is_idempotent() -> None:
    once = _move(f"ghcr.io/kedacore/keda:2.18.1@{DIGEST}")
    assert _move(once) == once


CACHE_ON = {"images": {"pull_through_cache": True}}
DOCKER = "arn:aws:secretsmanager:us-east-1:210987654321:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
GITHUB = "arn:aws:secretsmanager:us-east-1:210987654321:secret:ecr-pullthroughcache/github-AbCdEf"


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_production(*parts)
    return [str(issue) for issue in caught.value.issues]


INVALID = [
    pytest.param(
        {"images": {"docker_hub_credential_arn": None}},
        [
            "images.docker_hub_credential_arn: is required with images.pull_through_cache: ECR's Docker "
            "Hub cache rule signs in with a Secrets Manager secret (docs/operations.md, 'Images'), got none"
        ],
        id="no-docker-hub-credential",
    ),
    pytest.param(
        {"images": {"github_credential_arn": DOCKER.replace("ecr-pullthroughcache/", "")}},
        [
            "images.github_credential_arn: must be the ARN of a Secrets Manager secret whose name begins "
            "with 'ecr-pullthroughcache/' (arn:aws:secretsmanager:<region>:<account>:secret:"
            "ecr-pullthroughcache/<name>), got "
            "'arn:aws:secretsmanager:us-east-1:210987654321:secret:docker-hub-AbCdEf'"
        ],
        id="credential-name-prefix",
    ),
    pytest.param(
        {"images": {"docker_hub_credential_arn": DOCKER.replace("us-east-1", "us-west-2")}},
        [
            "images.docker_hub_credential_arn: must be a secret in the stack's region 'us-east-1' (ECR "
            "requires the secret in the rule's account and region), got a secret in 'us-west-2'"
        ],
        id="credential-other-region",
    ),
    pytest.param(
        {"environment": {"account": "210987654322"}},
        [
            "images.docker_hub_credential_arn: must be a secret in the stack's account 210987654322 (ECR "
            "requires the secret in the rule's account and region), got account 210987654321",
            "images.github_credential_arn: must be a secret in the stack's account 210987654322 (ECR "
            "requires the secret in the rule's account and region), got account 210987654321",
        ],
        id="credential-other-account",
    ),
    pytest.param(
        {"images": {"cache_prefix": "Prod"}},
        [
            "images.cache_prefix: must be one path component: lowercase letters and digits, separated "
            "by single '.', '_' or '-' (ECR's repository prefix pattern, without '/'), got 'Prod'"
        ],
        id="prefix-pattern",
    ),
    pytest.param(
        {"images": {"cache_prefix": "gpufarm-production-1"}},
        [
            "images.cache_prefix: must leave every cache rule prefix at most 30 characters (ECR's limit; "
            "the longest is 'gpufarm-production-1/docker-hub', 31): use at most 19 characters, got "
            "'gpufarm-production-1'"
        ],
        id="prefix-too-long",
    ),
    pytest.param(
        {"network": {"s3_gateway_endpoint": False}},
        [
            "network.s3_gateway_endpoint: must be true with images.pull_through_cache (ECR serves image "
            "layers from S3; nodes reach it through the gateway endpoint), got false"
        ],
        id="no-s3-endpoint",
    ),
    pytest.param(
        {"network": {"interface_endpoints": ["sts", "logs", "ecr.api"]}},
        [
            "network.interface_endpoints: must include ecr.dkr with images.pull_through_cache (nodes pull "
            "through the cache inside the VPC), got ['sts', 'logs', 'ecr.api']"
        ],
        id="no-ecr-dkr-endpoint",
    ),
    pytest.param(
        {"fallback": {"image": f"gcr.io/proxy/litellm:1@{DIGEST}"}},
        [
            "fallback.image: must be on a registry the image cache serves (docker.io, ghcr.io, nvcr.io, "
            "public.ecr.aws, quay.io, registry.k8s.io) or in Amazon ECR while images.pull_through_cache "
            f"is true, got 'gcr.io/proxy/litellm:1@{DIGEST}'"
        ],
        id="image-on-uncached-host",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_image_cache_input(override: dict[str, Any], expected: list[str]) -> None:
    creds = {"images": {"docker_hub_credential_arn": DOCKER, "github_credential_arn": GITHUB}}
    assert issues_of(creds, override) == expected


@pytest.mark.parametrize("region", ["cn-north-1", "us-gov-west-1"])
def test_the_cache_is_refused_where_ecr_has_no_cache_rules(region: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_tier(
            CACHE_ON,
            {"images": {"docker_hub_credential_arn": DOCKER, "github_credential_arn": GITHUB}},
            {"environment": {"region": region}},
        )
    messages = [str(i) for i in caught.value.issues]
    assert (
        f"images.pull_through_cache: must be false in {region!r}: ECR creates no pull through cache rules "
        "there (cn-north-1, cn-northwest-1, us-gov-east-1, us-gov-west-1), got true"
    ) in messages


def test_the_cache_off_needs_no_credential() -> None:
    assert not make_tier().images.pull_through_cache


def _pool_issues(tier: str, **pool: Any) -> list[str]:
    make = make_production if tier == "production" else make_tier
    document_pool = {**(make().node_pools[0].model_dump(mode="json")), **pool}
    with pytest.raises(ConfigError) as caught:
        make({"node_pools": [document_pool]})
    return [str(i) for i in caught.value.issues if "image_pull" in str(i)]


@pytest.mark.parametrize(
    ("tier", "pool", "message"),
    [
        (
            "production",
            {"image_pull": "soci-parallel-pull", "ami_family": "al2023", "ami_version": "latest"},
            "node_pools[0].image_pull: must be 'default' unless ami_family is 'bottlerocket' (gpufarm "
            "turns SOCI parallel pull on through Bottlerocket's settings, from 1.44; AL2023's nodeadm "
            "gate for it is experimental), got "
            "'soci-parallel-pull' with ami_family 'al2023'",
        ),
        (
            "production",
            {"image_pull": "soci-parallel-pull", "ami_family": "bottlerocket", "ami_version": "1.43.2"},
            "node_pools[0].image_pull: 'soci-parallel-pull' needs Bottlerocket 1.44.0 or later (its "
            "first release with the SOCI snapshotter settings), got ami_version '1.43.2'",
        ),
        (
            "poc",
            {"image_pull": "soci-parallel-pull"},
            "node_pools[0].image_pull: must be 'default' with EKS Auto Mode (Auto Mode chooses its "
            "nodes' AMI and runtime settings), got 'soci-parallel-pull'",
        ),
    ],
)
def test_soci_parallel_pull_is_refused_where_the_ami_lacks_it(
    tier: str, pool: dict[str, Any], message: str
) -> None:
    assert _pool_issues(tier, **pool) == [message]


@pytest.mark.parametrize("version", ["latest", "1.44.0", "1.50.0"])
def test_soci_parallel_pull_on_bottlerocket_1_44_and_later(version: str) -> None:
    pools = [p.model_dump(mode="json") for p in make_production().node_pools]
    pools[0] |= {"image_pull": "soci-parallel-pull", "ami_family": "bottlerocket", "ami_version": version}
    tier = make_production({"node_pools": pools})
    assert tier.node_pools[0].image_pull == "soci-parallel-pull"
