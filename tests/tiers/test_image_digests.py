"""Every image a synthesized tier runs is pinned by the digest of gpufarm/data/images.yaml.

Container images in the manifests gpufarm applies carry `repository:tag@sha256:...`; images in
Helm values carry the digest in the chart's `digest` key or in the `tag` (the charts build
`repository:tag`). An image the table holds no digest for appears by tag only until the tier
supplies its digest, and exactly those images are the ones the tier reports as unpinned.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import TierConfig, load_preset
from gpufarm.config.image_pins import unpinned_images, used_images
from gpufarm.images import PinnedImage, split_reference, table
from tests.tiers.conftest import synthesize
from tests.tiers.helpers import helm_releases, resolved_manifests
from tests.unit.factories import make_enterprise
from tests.unit.upstream_ref import as_published, containers, pod_specs

SUPPLIED = "sha256:" + "5" * 64
"""A digest the test tier supplies for every image the table lacks one for."""

MIRRORED_AGENT = f"210987654321.dkr.ecr.us-east-1.amazonaws.com/target-control-agent@{SUPPLIED}"


def _row(repository: str, tag: str) -> PinnedImage | None:
    repository = as_published(repository)
    for row in table().values():
        if row.tag == tag and (repository == row.repository or repository.endswith("/" + row.repository)):
            return row
    return None


def container_images(template: dict[str, Any]) -> list[str]:
    """Every container image of every workload the stack applies."""
    return [
        container["image"]
        for manifest in resolved_manifests(template)
        for pod in pod_specs(manifest)
        for container in containers(pod)
    ]


def helm_images(values: Any) -> Iterator[tuple[str, str, str]]:
    """(repository, tag, digest) of every image a values tree sets: a mapping with `repository`
    and `tag` (and `registry`, `digest` where the chart has them), digest '' when none."""
    if isinstance(values, dict):
        if isinstance(values.get("repository"), str) and "tag" in values:
            repository = values["repository"]
            if values.get("registry"):
                repository = f"{values['registry']}/{repository}"
            tag, _, digest = values["tag"].partition("@")
            yield repository, tag, values.get("digest") or digest
        for value in values.values():
            yield from helm_images(value)


def helm_rows(template: dict[str, Any]) -> dict[str, str]:
    """Table row name -> the digest the template's Helm values give its image ('' for none)."""
    found = {}
    for _, _, values in helm_releases(template):
        for repository, tag, digest in helm_images(values):
            row = _row(repository, tag)
            assert row is not None, f"{repository}:{tag} in Helm values is not in the image table"
            found[row.name] = digest
    return found


def check_pinned(template: dict[str, Any], config: TierConfig) -> None:
    reported = {u.value for u in unpinned_images(config)}
    for reference in container_images(template):
        repository, tag, digest = split_reference(reference)
        # Through the image cache the template pulls the reported image from the account's ECR.
        published = f"{as_published(repository)}:{tag}"
        assert digest or reference in reported or published in reported, (
            f"{reference} is neither pinned by digest nor reported"
        )
        row = _row(repository, tag)
        if row is not None and row.digest is not None:
            assert digest == row.digest, f"{reference}: the table pins {row.digest}"
    unpinned = {u.path.rsplit(".", 1)[-1] for u in unpinned_images(config)}
    for name, digest in helm_rows(template).items():
        row = table()[name]
        expected = row.digest or config.images.digests.get(name, "")
        assert digest == expected, f"{name}: Helm values carry {digest!r}, expected {expected!r}"
        assert (digest == "") == (name in unpinned)


@pytest.mark.parametrize("tier", ["poc", "production", "enterprise"])
def test_presets_pin_every_image_the_table_has_a_digest_for(
    tier: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(f"{tier}_template")
    check_pinned(template, load_preset(tier))


@pytest.mark.parametrize("tier", ["poc", "production", "enterprise"])
def test_the_images_a_tier_is_said_to_run_are_the_ones_its_charts_run(
    tier: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(f"{tier}_template")
    assert set(used_images(load_preset(tier))) == set(helm_rows(template))


@pytest.fixture(scope="module")
def supplied(tmp_path_factory: pytest.TempPathFactory) -> tuple[TierConfig, dict[str, Any]]:
    """The enterprise tier with every missing digest supplied and the agent mirrored."""
    config = make_enterprise(
        {
            "images": {
                "digests": {row.name: SUPPLIED for row in table().values() if row.chart and not row.digest}
            },
            "ingress": {"target_optimizer": {"agent_image": MIRRORED_AGENT}},
        }
    )
    outdir: Path = tmp_path_factory.mktemp("supplied")
    return config, synthesize([config], outdir)[config.stack_name]


def test_a_tier_that_supplies_every_digest_runs_nothing_by_tag(
    supplied: tuple[TierConfig, dict[str, Any]],
) -> None:
    config, template = supplied
    assert unpinned_images(config) == []
    check_pinned(template, config)
    assert all(helm_rows(template).values())
    assert MIRRORED_AGENT in container_images(template)
    assert set(helm_rows(template)) >= {
        "lws-controller",
        "keda-operator",
        "keda-metrics-apiserver",
        "keda-admission-webhooks",
        "nvidia-device-plugin",
        "efa-device-plugin",
        "aws-load-balancer-controller",
    }
