"""The account's ECR as the tier's only image source: pull through cache rules and NVIDIA mirrors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from constructs import Construct

from gpufarm.config.model import TierConfig
from gpufarm.constructs._util import acknowledge
from gpufarm.image_cache import (
    RULE_UPSTREAMS,
    UPSTREAMS,
    cached,
    cached_repository,
    rewrite_manifest,
    rewrite_values,
)


def _nag(value: str, pseudo: str) -> str:
    """How cdk-nag writes `value` in a finding: itself, or `<AWS::pseudo>` for a token."""
    return f"<AWS::{pseudo}>" if cdk.Token.is_unresolved(value) else value


def image_cache_credentials(config: TierConfig) -> dict[str, str]:
    """Upstream host -> the secret ARN its cache rule signs in with, from a tier's `images`."""
    found = {
        "docker.io": config.images.docker_hub_credential_arn,
        "ghcr.io": config.images.github_credential_arn,
    }
    return {host: arn for host, arn in found.items() if arn is not None}


class ImageCache(Construct):
    """Pull through cache rules for the registries a tier's images come from.

    Every image a tier emits goes through :meth:`image` (manifests: :meth:`manifest`; chart
    values: :meth:`values`), which moves it into this account's registry in the stack's region
    (:mod:`gpufarm.image_cache`). NVIDIA's images (nvcr.io, which ECR cannot cache) move to
    `<prefix>/nvcr/<path>`: repositories the operator creates and copies the pinned digests into
    before the first deploy (docs/operations.md, "NVIDIA images"), since the charts that run
    them wait for their pods while the stack deploys; `gpufarm preflight --template` checks
    each digest is there.

    `credentials` maps an upstream host (`docker.io`, `ghcr.io`) to the Secrets Manager secret ARN
    its rule signs in with; a rule for an upstream that needs one is refused without it.
    `prefix` is the first part of every repository name (`<prefix>/docker-hub/...`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prefix: str,
        credentials: Mapping[str, str],
    ) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)
        self.prefix = prefix
        self.registry = f"{stack.account}.dkr.ecr.{stack.region}.{stack.url_suffix}"
        """`<account>.dkr.ecr.<region>.amazonaws.com`: where every image is pulled from."""
        self.rules: dict[str, ecr.CfnPullThroughCacheRule] = {}
        """Upstream host -> its cache rule."""
        self.images: dict[str, str] = {}
        """Upstream reference -> the reference pulled instead, for every image seen."""
        for host in sorted(RULE_UPSTREAMS):
            upstream = UPSTREAMS[host]
            credential = credentials.get(host)
            if upstream.credential and credential is None:
                raise ValueError(f"'credentials' must name a secret for {upstream.name} ({host!r})")
            self.rules[host] = ecr.CfnPullThroughCacheRule(
                self,
                f"Rule{''.join(p.capitalize() for p in upstream.prefix.split('-'))}",
                ecr_repository_prefix=f"{prefix}/{upstream.prefix}",
                upstream_registry_url=upstream.registry_url,
                upstream_registry=upstream.upstream_registry,
                credential_arn=credential if upstream.credential else None,
            )
        upstreams = [UPSTREAMS[h] for h in sorted(RULE_UPSTREAMS)]
        self.pull_policy = iam.ManagedPolicy(
            self,
            "FirstPullPolicy",
            description=f"gpufarm {prefix}: first pull of an image through the ECR pull through cache",
            statements=[
                iam.PolicyStatement(
                    sid="PullThroughCacheFirstPull",
                    actions=["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"],
                    resources=[
                        stack.format_arn(
                            service="ecr", resource="repository", resource_name=f"{prefix}/{u.prefix}/*"
                        )
                        for u in upstreams
                    ],
                )
            ],
        )
        """What a node needs to pull an image through a rule the first time: ECR imports it and
        creates its repository under the caller's identity (ECR user guide, "IAM permissions
        required to sync an upstream registry with an Amazon ECR private registry",
        https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-iam.html), on the
        rules' repositories only. Pulling itself is the nodes' AmazonEC2ContainerRegistryPullOnly."""
        for upstream in upstreams:
            acknowledge(
                self.pull_policy,
                f"AwsSolutions-IAM5[Resource::arn:{_nag(stack.partition, 'Partition')}:ecr:"
                f"{_nag(stack.region, 'Region')}:{_nag(stack.account, 'AccountId')}:repository/"
                f"{prefix}/{upstream.prefix}/*]",
                f"ECR creates one repository per image under the {upstream.name} cache rule's prefix "
                "on its first pull; the names are the upstream's, so only the prefix can be named.",
            )

    def image(self, reference: str) -> str:
        """`reference` as pulled through this account's ECR (unchanged when already in ECR)."""
        moved = cached(reference, self.registry, self.prefix)
        if moved != reference:
            self.images.setdefault(reference, moved)
        return moved

    def repository(self, repository: str) -> str:
        """A chart's image repository as pulled through this account's ECR."""
        return cached_repository(repository, self.registry, self.prefix)

    def manifest(self, document: Mapping[str, Any]) -> Any:
        """A Kubernetes object with every container image moved into this account's ECR."""
        return rewrite_manifest(document, self.image)

    def values(self, values: Mapping[str, Any]) -> Any:
        """A chart's values with every image repository moved into this account's ECR."""
        return rewrite_values(values, self.repository)

    def grant_pull(self, role: iam.IRole) -> None:
        """Let nodes of `role` make the first pull of an image through the cache rules."""
        role.add_managed_policy(self.pull_policy)
