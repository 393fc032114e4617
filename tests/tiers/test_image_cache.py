"""With `images.pull_through_cache` on, no image of the production or enterprise template is
pulled from outside the account's ECR.

The walk is the test's own, not gpufarm's rewrite: every container, init container and native
sidecar of every pod template the stack applies, and every image of every Helm release's values
(a mapping with `repository` and `tag`, joined to its `registry` where the chart has one). Each
must be in this account's registry under the tier's cache prefix, or in the EKS add-on registry
of the region (already in ECR). The charts' own image keys, read from the pinned releases'
values (`../shared/upstream-ref/charts`), must each be set by gpufarm: a chart default left in
place would pull from upstream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpufarm.core.registries import eks_registry
from tests.tiers.conftest import synthesize, variant
from tests.tiers.helpers import helm_releases, resolved_manifests, resources
from tests.unit.upstream_ref import chart_data, containers, pod_specs

ACCOUNT = "123456789012"
"""The account the test helpers resolve `AWS::AccountId` to (tests/tiers/helpers.py)."""


def _registry(template: dict[str, Any]) -> str:
    return f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"


def _tier(template: dict[str, Any]) -> str:
    rules = resources(template, "AWS::ECR::PullThroughCacheRule").values()
    return {r["Properties"]["EcrRepositoryPrefix"].split("/")[0] for r in rules}.pop()


def _values_images(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(node, dict):
        if isinstance(node.get("repository"), str) and "tag" in node:
            registry = node.get("registry")
            yield path, f"{registry}/{node['repository']}" if registry else node["repository"]
        for key, value in node.items():
            yield from _values_images(value, (*path, key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _values_images(item, (*path, str(i)))


def _walk(template: dict[str, Any]) -> list[str]:
    images = [
        c["image"] for m in resolved_manifests(template) for pod in pod_specs(m) for c in containers(pod)
    ]
    images += [image for _, _, values in helm_releases(template) for _, image in _values_images(values)]
    return images


@pytest.fixture(params=["production", "enterprise"])
def template(request: pytest.FixtureRequest) -> dict[str, Any]:
    fixture: dict[str, Any] = request.getfixturevalue(f"{request.param}_template")
    return fixture


def test_every_image_is_pulled_from_the_accounts_ecr(template: dict[str, Any]) -> None:
    cache = f"{_registry(template)}/{_tier(template)}/"
    eks = f"{eks_registry('us-east-1')}/"
    images = _walk(template)
    # The walk reaches the serving engine, the gateway, the token init container and the charts.
    assert len(images) >= 8
    outside = [i for i in images if not (i.startswith(cache) or i.startswith(eks))]
    assert outside == []


def test_every_chart_image_key_is_set_by_gpufarm(template: dict[str, Any]) -> None:
    cache = f"{_registry(template)}/{_tier(template)}/"
    missing = []
    for chart, version, values in helm_releases(template):
        ours = dict(_values_images(values))
        upstream = dict(_values_images(chart_data(chart, version)["values"]))
        for path in upstream:
            image = ours.get(path)
            if image is None or not (image.startswith(cache) or ".dkr.ecr." in image.split("/")[0]):
                missing.append(f"{chart}: {'.'.join(path)} = {image or upstream[path]}")
    assert missing == []


def test_the_cache_has_a_rule_per_upstream_and_nvidia_images_go_to_the_mirror_path(
    template: dict[str, Any],
) -> None:
    tier = _tier(template)
    rules = {
        r["Properties"]["UpstreamRegistryUrl"]: r["Properties"]
        for r in resources(template, "AWS::ECR::PullThroughCacheRule").values()
    }
    assert sorted(rules) == [
        "ghcr.io",
        "public.ecr.aws",
        "quay.io",
        "registry-1.docker.io",
        "registry.k8s.io",
    ]
    # Docker Hub and GHCR sign in (ECR user guide); the others take no credential.
    assert sorted(u for u, p in rules.items() if "CredentialArn" in p) == ["ghcr.io", "registry-1.docker.io"]
    # The DCGM exporter and the device plugin (nvcr.io) run from the operator's mirror path.
    nvidia = sorted({i.split(":")[0] for i in _walk(template) if f"/{tier}/nvcr/" in i})
    assert f"{_registry(template)}/{tier}/nvcr/nvidia/k8s/dcgm-exporter" in nvidia
    # The cluster waits for the rules: no pod pulls before they exist.
    (cluster,) = resources(template, "AWS::EKS::Cluster").values()
    assert set(rules_ids(template)) <= set(cluster.get("DependsOn", []))


def rules_ids(template: dict[str, Any]) -> list[str]:
    return list(resources(template, "AWS::ECR::PullThroughCacheRule"))


def test_every_node_role_may_make_the_first_pull(template: dict[str, Any]) -> None:
    policies = resources(template, "AWS::IAM::ManagedPolicy")
    first_pull = [
        lid
        for lid, p in policies.items()
        if any(
            s.get("Action") == ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        )
    ]
    assert len(first_pull) == 1
    ref = {"Ref": first_pull[0]}
    node_roles = [
        lid
        for lid, r in resources(template, "AWS::IAM::Role").items()
        if "ec2.amazonaws.com" in str(r["Properties"]["AssumeRolePolicyDocument"])
        and "inspection" not in lid.lower()
    ]
    assert node_roles
    without = [
        lid
        for lid in node_roles
        if ref not in resources(template, "AWS::IAM::Role")[lid]["Properties"].get("ManagedPolicyArns", [])
    ]
    assert without == []


def test_with_the_rules_only_the_rules_exist_and_the_images_still_come_from_upstream(
    production_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    config = variant(production_document, {"images": {"cache_rules_only": True}})
    (template,) = synthesize([config], tmp_path_factory.mktemp("rules-only")).values()
    assert len(resources(template, "AWS::ECR::PullThroughCacheRule")) == 5
    images = _walk(template)
    assert any(i.startswith("vllm/vllm-openai:") for i in images)
    assert not [i for i in images if f"/{config.name}/" in i]
