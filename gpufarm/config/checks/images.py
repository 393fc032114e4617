"""Checks of `images`: the pull through cache's rule prefixes, credentials, network and hosts.

Each is a rule ECR's API enforces when CloudFormation creates the cache rules
(gpufarm/deploy_rules/ecr.py holds the same rules for the synthesized template), or a condition
without which nodes could not pull through the cache.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import AmiFamily, ImagePull, InterfaceEndpoint, Provisioning, TierConfig
from gpufarm.image_cache import RULE_UPSTREAMS, UPSTREAMS, CacheMode, UncachedRegistryError, upstream_of
from gpufarm.images import split_reference

CACHE_UNSUPPORTED_REGIONS = frozenset({"cn-north-1", "cn-northwest-1", "us-gov-east-1", "us-gov-west-1"})
"""Regions where ECR does not create pull through cache rules (ECR user guide, "Considerations for
using pull through cache rules",
https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html)."""

RULE_PREFIX = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")
"""One component of `ecrRepositoryPrefix`'s pattern in the ECR API reference, PullThroughCacheRule
(https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_PullThroughCacheRule.html):
gpufarm's root is one path component, so a cached repository reads back to its upstream
(:func:`gpufarm.image_cache.upstream_repository`)."""

RULE_PREFIX_MIN, RULE_PREFIX_MAX = 2, 30
"""`ecrRepositoryPrefix` length: "Minimum length of 2. Maximum length of 30" (same page)."""

CREDENTIAL_ARN = re.compile(
    r"^arn:aws:secretsmanager:[a-zA-Z0-9-:]+:secret:ecr\-pullthroughcache\/[a-zA-Z0-9\/_+=.@-]+$"
)
"""`credentialArn`: pattern of the same page; the secret's name must begin with
`ecr-pullthroughcache/` (user guide, "Creating a pull through cache rule in Amazon ECR")."""

CREDENTIAL_ARN_MIN, CREDENTIAL_ARN_MAX = 50, 612
"""`credentialArn` length: "Minimum length of 50. Maximum length of 612" (same page)."""

CREDENTIAL_FIELDS = {
    "docker.io": "images.docker_hub_credential_arn",
    "ghcr.io": "images.github_credential_arn",
}
"""Upstream host -> the field holding its rule's credential."""


def credential_arn_problem(value: str) -> str | None:
    """What is wrong with `value` as a cache rule's `credentialArn`, or None."""
    if not CREDENTIAL_ARN.match(value):
        return (
            "must be the ARN of a Secrets Manager secret whose name begins with 'ecr-pullthroughcache/' "
            "(arn:aws:secretsmanager:<region>:<account>:secret:ecr-pullthroughcache/<name>)"
        )
    if not CREDENTIAL_ARN_MIN <= len(value) <= CREDENTIAL_ARN_MAX:
        return f"must be {CREDENTIAL_ARN_MIN} to {CREDENTIAL_ARN_MAX} characters long, got {len(value)}"
    return None


def rule_prefixes(root: str) -> dict[str, str]:
    """Upstream host -> the `ecrRepositoryPrefix` of its cache rule under `root`."""
    return {host: f"{root}/{UPSTREAMS[host].prefix}" for host in sorted(RULE_UPSTREAMS)}


def max_root_length() -> int:
    """The longest cache root that keeps every rule prefix within ECR's RULE_PREFIX_MAX."""
    return RULE_PREFIX_MAX - max(len(prefix) for prefix in rule_prefixes("").values())


def configured_images(cfg: TierConfig) -> list[tuple[str, str]]:
    """(path, image) of every image the tier file sets and the tier runs."""
    found = [
        ("serving.vllm_image", cfg.serving.vllm_image),
        ("serving.aws_cli_image", cfg.serving.aws_cli_image),
    ]
    if cfg.fallback.enabled:
        found.append(("fallback.image", cfg.fallback.image))
    if cfg.ingress.target_optimizer.enabled:
        found.append(("ingress.target_optimizer.agent_image", cfg.ingress.target_optimizer.agent_image))
    return found


def _image_cache(cfg: TierConfig) -> Iterator[ConfigIssue]:
    images = cfg.images
    if not images.pull_through_cache:
        return
    region = cfg.environment.region
    if region in CACHE_UNSUPPORTED_REGIONS:
        yield ConfigIssue(
            path="images.pull_through_cache",
            message=f"must be false in {region!r}: ECR creates no pull through cache rules there "
            f"({', '.join(sorted(CACHE_UNSUPPORTED_REGIONS))}), got true",
        )
    root = cfg.image_cache_prefix
    longest = max(rule_prefixes(root).values(), key=len)
    if not RULE_PREFIX.match(root):
        yield ConfigIssue(
            path="images.cache_prefix",
            message="must be one path component: lowercase letters and digits, separated by single "
            f"'.', '_' or '-' (ECR's repository prefix pattern, without '/'), got {root!r}",
        )
    elif len(longest) > RULE_PREFIX_MAX:
        yield ConfigIssue(
            path="images.cache_prefix",
            message=f"must leave every cache rule prefix at most {RULE_PREFIX_MAX} characters (ECR's "
            f"limit; the longest is {longest!r}, {len(longest)}): use at most "
            f"{max_root_length()} characters, got {root!r}",
        )
    for host, path in CREDENTIAL_FIELDS.items():
        value = getattr(images, path.split(".")[1])
        name = UPSTREAMS[host].name
        if value is None:
            yield ConfigIssue(
                path=path,
                message=f"is required with images.pull_through_cache: ECR's {name} cache rule signs in "
                "with a Secrets Manager secret (docs/operations.md, 'Images'), got none",
            )
            continue
        if problem := credential_arn_problem(value):
            yield ConfigIssue(path=path, message=f"{problem}, got {value!r}")
            continue
        _, _, _, secret_region, account = value.split(":")[:5]
        if secret_region != region:
            yield ConfigIssue(
                path=path,
                message=f"must be a secret in the stack's region {region!r} (ECR requires the secret "
                f"in the rule's account and region), got a secret in {secret_region!r}",
            )
        elif cfg.environment.account is not None and account != cfg.environment.account:
            yield ConfigIssue(
                path=path,
                message=f"must be a secret in the stack's account {cfg.environment.account} (ECR "
                f"requires the secret in the rule's account and region), got account {account}",
            )
    network = cfg.network
    if not network.s3_gateway_endpoint:
        yield ConfigIssue(
            path="network.s3_gateway_endpoint",
            message="must be true with images.pull_through_cache (ECR serves image layers from S3; "
            "nodes reach it through the gateway endpoint), got false",
        )
    missing = [
        e.value
        for e in (InterfaceEndpoint.ECR_API, InterfaceEndpoint.ECR_DKR)
        if e not in network.interface_endpoints
    ]
    if missing:
        yield ConfigIssue(
            path="network.interface_endpoints",
            message=f"must include {' and '.join(missing)} with images.pull_through_cache (nodes "
            f"pull through the cache inside the VPC), got {[e.value for e in network.interface_endpoints]}",
        )
    for path, image in configured_images(cfg):
        repository, _, _ = split_reference(image)
        try:
            upstream = upstream_of(repository)
        except UncachedRegistryError:
            upstream_ok = False
        else:
            upstream_ok = (
                upstream is None or upstream.mode is CacheMode.MIRROR or upstream.host in RULE_UPSTREAMS
            )
        if not upstream_ok:
            hosts = ", ".join(
                sorted(RULE_UPSTREAMS | {h for h, u in UPSTREAMS.items() if u.mode is CacheMode.MIRROR})
            )
            yield ConfigIssue(
                path=path,
                message=f"must be on a registry the image cache serves ({hosts}) or in Amazon ECR "
                f"while images.pull_through_cache is true, got {image!r}",
            )


SOCI_MIN_BOTTLEROCKET = (1, 44, 0)
"""First Bottlerocket release with the SOCI snapshotter's parallel pull-and-unpack settings
(`settings.container-runtime.snapshotter`, `settings.container-runtime-plugins.soci-snapshotter`:
https://bottlerocket.dev/en/os/1.44.x/api/settings/container-runtime-plugins).

The EKS AL2023 AMIs carry the snapshotter too since 2025-08-29, behind nodeadm's `FastImagePull`
feature gate, which nodeadm's examples list as experimental ("Enabling fast image pull
(experimental)", awslabs/amazon-eks-ami; awslabs/ai-on-eks#235, awslabs/amazon-eks-ami#2352), and
which an AL2023 pre-release AMI broke (its nodes could not pull the pause image:
awslabs/amazon-eks-ami#2710). gpufarm sets the mode only on Bottlerocket (ADR 0062)."""


def _image_pull(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for i, pool in enumerate(cfg.node_pools):
        if pool.image_pull is not ImagePull.SOCI_PARALLEL_PULL:
            continue
        path = f"node_pools[{i}].image_pull"
        if cfg.cluster.provisioning is Provisioning.AUTO_MODE:
            yield ConfigIssue(
                path=path,
                message="must be 'default' with EKS Auto Mode (Auto Mode chooses its nodes' AMI and "
                "runtime settings), got 'soci-parallel-pull'",
            )
        elif pool.ami_family is not AmiFamily.BOTTLEROCKET:
            yield ConfigIssue(
                path=path,
                message="must be 'default' unless ami_family is 'bottlerocket' (gpufarm turns SOCI "
                "parallel pull on through Bottlerocket's settings, from 1.44; AL2023's nodeadm gate "
                "for it is experimental), got "
                f"'soci-parallel-pull' with ami_family {pool.ami_family.value!r}",
            )
        elif (
            pool.ami_version != "latest"
            and tuple(int(p) for p in pool.ami_version.removeprefix("v").split(".")) < SOCI_MIN_BOTTLEROCKET
        ):
            yield ConfigIssue(
                path=path,
                message="'soci-parallel-pull' needs Bottlerocket 1.44.0 or later (its first release "
                f"with the SOCI snapshotter settings), got ami_version {pool.ami_version!r}",
            )
