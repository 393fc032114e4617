"""The ImageCache construct on its own: rules, the first-pull grant, and what it refuses."""

from __future__ import annotations

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from gpufarm.constructs.image_cache import ImageCache
from tests.constructs.helpers import new_stack, resources

DOCKER = "arn:aws:secretsmanager:us-east-1:210987654321:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
GITHUB = "arn:aws:secretsmanager:us-east-1:210987654321:secret:ecr-pullthroughcache/github-AbCdEf"


def test_a_rule_that_needs_a_credential_is_refused_without_one() -> None:
    with pytest.raises(ValueError) as caught:
        ImageCache(new_stack(), "Cache", prefix="t", credentials={"docker.io": DOCKER})
    assert str(caught.value) == "'credentials' must name a secret for GitHub Container Registry ('ghcr.io')"


def test_the_grant_names_only_the_rules_repositories() -> None:
    stack = new_stack()
    cache = ImageCache(stack, "Cache", prefix="t", credentials={"docker.io": DOCKER, "ghcr.io": GITHUB})
    role = iam.Role(stack, "Node", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    cache.grant_pull(role)
    template = Template.from_stack(stack)
    (policy,) = resources(template, "AWS::IAM::ManagedPolicy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]
    names = sorted(r["Fn::Join"][1][-1] for r in statement["Resource"])
    assert names == [
        ":repository/t/docker-hub/*",
        ":repository/t/ecr-public/*",
        ":repository/t/github/*",
        ":repository/t/kubernetes/*",
        ":repository/t/quay/*",
    ]
    prefixes = sorted(
        r["Properties"]["EcrRepositoryPrefix"]
        for r in resources(template, "AWS::ECR::PullThroughCacheRule").values()
    )
    assert prefixes == ["t/docker-hub", "t/ecr-public", "t/github", "t/kubernetes", "t/quay"]
