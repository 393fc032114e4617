"""Amazon ECR: what CreatePullThroughCacheRule refuses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from gpufarm.deploy_rules.checks import name_check
from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import resource

PULL_THROUGH_CACHE_RULE = "AWS::ECR::PullThroughCacheRule"

_CREATE_RULE = "https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreatePullThroughCacheRule.html"
_PULL_THROUGH_CACHE = "https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html"

PREFIX_PATTERN = r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*"
CREDENTIAL_PATTERN = (
    r"arn:aws:secretsmanager:[a-zA-Z0-9-:]+:secret:ecr\-pullthroughcache\/[a-zA-Z0-9\/_+=.@-]+"
)

CREDENTIAL_UPSTREAMS = frozenset({"registry-1.docker.io", "ghcr.io", "registry.gitlab.com"})
"""Upstream URLs whose rule needs a Secrets Manager credential (user guide, "Sync an upstream
registry with an Amazon ECR private registry": Docker Hub, GitHub Container Registry and GitLab
Container Registry "requires authentication with AWS Secrets Manager secret"; Azure registries
too, matched by their `.azurecr.io` suffix)."""

_SECRET = "arn:aws:secretsmanager:us-east-1:210987654321:secret:ecr-pullthroughcache/docker-hub-AbCdEf"


def _credential_present(res: Resource, _: Template) -> Iterator[str]:
    url = literal_str(res.prop("UpstreamRegistryUrl"))
    if url is None:
        return
    needs = url in CREDENTIAL_UPSTREAMS or url.endswith(".azurecr.io")
    if needs and res.prop("CredentialArn") is None:
        yield (
            f"UpstreamRegistryUrl {url!r} requires authentication: set CredentialArn to a "
            "Secrets Manager secret"
        )


def _unique_prefix(res: Resource, template: Template) -> Iterator[str]:
    prefix = literal_str(res.prop("EcrRepositoryPrefix"))
    if prefix is None:
        return
    counts = Counter(
        literal_str(r.prop("EcrRepositoryPrefix")) for r in template.of_type(PULL_THROUGH_CACHE_RULE)
    )
    if counts[prefix] > 1:
        yield (
            f"EcrRepositoryPrefix {prefix!r} is used by {counts[prefix]} rules; a registry has one "
            "rule per prefix"
        )


RULES: tuple[Rule, ...] = (
    # CreatePullThroughCacheRule, ecrRepositoryPrefix: "Length Constraints: Minimum length of 2.
    # Maximum length of 30. Pattern: (?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*".
    Rule(
        id="ECR-PTC-PREFIX",
        resource_type=PULL_THROUGH_CACHE_RULE,
        title="A cache rule's repository prefix has 2 to 30 lowercase letters, digits, '.', '_', '-', '/'",
        doc_url=_CREATE_RULE,
        check=name_check(
            "EcrRepositoryPrefix",
            pattern=PREFIX_PATTERN,
            min_len=2,
            max_len=30,
            allowed="lowercase letters and digits in components separated by single '.', '_', '-' or '/'",
        ),
        bad={
            "R": resource(
                PULL_THROUGH_CACHE_RULE,
                EcrRepositoryPrefix="enterprise-tier/docker-hub-cache",
                UpstreamRegistryUrl="public.ecr.aws",
            )
        },
        good={
            "R": resource(
                PULL_THROUGH_CACHE_RULE,
                EcrRepositoryPrefix="enterprise/ecr-public",
                UpstreamRegistryUrl="public.ecr.aws",
            )
        },
    ),
    # Same page, credentialArn: "Length Constraints: Minimum length of 50. Maximum length of 612.
    # Pattern: ^arn:aws:secretsmanager:[a-zA-Z0-9-:]+:secret:ecr\-pullthroughcache\/[a-zA-Z0-9\/_+=.@-]+$".
    Rule(
        id="ECR-PTC-CREDENTIAL-ARN",
        resource_type=PULL_THROUGH_CACHE_RULE,
        title="A cache rule's credential is a secret named 'ecr-pullthroughcache/...'",
        doc_url=_CREATE_RULE,
        check=name_check(
            "CredentialArn",
            pattern=CREDENTIAL_PATTERN,
            min_len=50,
            max_len=612,
            allowed="the ARN of a Secrets Manager secret whose name begins with 'ecr-pullthroughcache/'",
        ),
        bad={
            "R": resource(
                PULL_THROUGH_CACHE_RULE,
                EcrRepositoryPrefix="enterprise/docker-hub",
                UpstreamRegistryUrl="registry-1.docker.io",
                CredentialArn="arn:aws:secretsmanager:us-east-1:210987654321:secret:docker-hub-token-AbCdEf",
            )
        },
        good={
            "R": resource(
                PULL_THROUGH_CACHE_RULE,
                EcrRepositoryPrefix="enterprise/docker-hub",
                UpstreamRegistryUrl="registry-1.docker.io",
                CredentialArn=_SECRET,
            )
        },
    ),
    Rule(
        id="ECR-PTC-CREDENTIAL-REQUIRED",
        resource_type=PULL_THROUGH_CACHE_RULE,
        title="A cache rule for Docker Hub, GHCR, GitLab or Azure names a credential",
        doc_url=_PULL_THROUGH_CACHE,
        check=_credential_present,
        bad={
            "R": resource(
                PULL_THROUGH_CACHE_RULE,
                EcrRepositoryPrefix="enterprise/github",
                UpstreamRegistryUrl="ghcr.io",
            )
        },
        good={
            "R": resource(
                PULL_THROUGH_CACHE_RULE,
                EcrRepositoryPrefix="enterprise/github",
                UpstreamRegistryUrl="ghcr.io",
                CredentialArn=_SECRET.replace("docker-hub", "github"),
            )
        },
    ),
    # CreatePullThroughCacheRule errors: PullThroughCacheRuleAlreadyExistsException, "A pull
    # through cache rule with these settings already exists for the private registry".
    Rule(
        id="ECR-PTC-PREFIX-UNIQUE",
        resource_type=PULL_THROUGH_CACHE_RULE,
        title="Each cache rule of a registry has its own repository prefix",
        doc_url=_CREATE_RULE,
        check=_unique_prefix,
        bad={
            "A": resource(
                PULL_THROUGH_CACHE_RULE, EcrRepositoryPrefix="enterprise/cache", UpstreamRegistryUrl="quay.io"
            ),
            "B": resource(
                PULL_THROUGH_CACHE_RULE,
                EcrRepositoryPrefix="enterprise/cache",
                UpstreamRegistryUrl="public.ecr.aws",
            ),
        },
        good={
            "A": resource(
                PULL_THROUGH_CACHE_RULE, EcrRepositoryPrefix="enterprise/quay", UpstreamRegistryUrl="quay.io"
            ),
            "B": resource(
                PULL_THROUGH_CACHE_RULE,
                EcrRepositoryPrefix="enterprise/ecr-public",
                UpstreamRegistryUrl="public.ecr.aws",
            ),
        },
    ),
)
