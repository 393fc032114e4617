"""Where each image comes from when a tier pulls through the account's ECR: the one rewrite.

With `images.pull_through_cache` on, every image a tier writes into a manifest or a Helm values
file is pulled from the account's private ECR registry in the tier's region instead of from the
registry that publishes it. :func:`cached_repository` maps a repository (`ghcr.io/berriai/litellm`)
to its place there (`<account>.dkr.ecr.<region>.amazonaws.com/github/berriai/litellm`), keyed off
the registry host alone, so an image added to gpufarm/data/images.yaml (or set in a tier file)
on a host below is covered without a line here. :func:`cached` does the same for a whole
reference and keeps its `:tag@digest`; :func:`rewrite_manifest` and :func:`rewrite_values` apply
it to every container image of a manifest and every image key of a chart's values.

Two ways an upstream reaches ECR (docs/decisions/0062-images-through-ecr.md):

- **Pull through cache** (`AWS::ECR::PullThroughCacheRule`): ECR fetches the image from the
  upstream on the first pull and keeps it. The upstreams ECR supports, their
  `upstreamRegistryUrl` and which need a credential in Secrets Manager are those of the ECR API
  reference, CreatePullThroughCacheRule
  (https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreatePullThroughCacheRule.html)
  and the user guide, "Sync an upstream registry with an Amazon ECR private registry"
  (https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache.html): "Amazon ECR
  Public, Kubernetes container image registry, and Quay (doesn't require authentication)";
  "Docker Hub, Microsoft Azure Container Registry, GitHub Container Registry, and GitLab
  Container Registry (requires authentication with AWS Secrets Manager secret)". The prefixes
  are the ones the ECR console uses (user guide, "Pulling an image with a pull through cache
  rule"), and Docker Hub's official images keep their `library/` path there ("For Docker Hub
  official images, the /library prefix must be included").
- **Mirror**: nvcr.io (NVIDIA NGC) is not an upstream ECR supports (same API reference), so
  gpufarm creates a private repository per NVIDIA image under `nvcr/` and the operator copies
  the pinned digest into it (docs/operations.md, "NVIDIA images").

Amazon ECR registries (`*.dkr.ecr.*.amazonaws.com`), the EKS add-on images among them
(gpufarm/core/registries.py), already are in ECR: they are left as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpufarm.images import split_reference


class CacheMode(StrEnum):
    """How an upstream's images get into the account's ECR."""

    PULL_THROUGH = "pull-through"
    """An `AWS::ECR::PullThroughCacheRule`: ECR fetches on the first pull."""
    MIRROR = "mirror"
    """A gpufarm-created repository the operator copies the pinned digest into."""


@dataclass(frozen=True, kw_only=True)
class Upstream:
    """A registry gpufarm's images come from, and where its images live in the account's ECR.

    `registry_url` is the rule's `UpstreamRegistryUrl` and `upstream_registry` the API's name for
    it (None for a mirror); `credential` says the rule needs a Secrets Manager secret.
    """

    host: str
    prefix: str
    mode: CacheMode
    registry_url: str | None = None
    upstream_registry: str | None = None
    credential: bool = False
    name: str


DOCKER_HUB = Upstream(
    host="docker.io",
    prefix="docker-hub",
    mode=CacheMode.PULL_THROUGH,
    registry_url="registry-1.docker.io",
    upstream_registry="docker-hub",
    credential=True,
    name="Docker Hub",
)

UPSTREAMS: Mapping[str, Upstream] = {
    u.host: u
    for u in (
        DOCKER_HUB,
        Upstream(
            host="public.ecr.aws",
            prefix="ecr-public",
            mode=CacheMode.PULL_THROUGH,
            registry_url="public.ecr.aws",
            upstream_registry="ecr-public",
            name="Amazon ECR Public",
        ),
        Upstream(
            host="ghcr.io",
            prefix="github",
            mode=CacheMode.PULL_THROUGH,
            registry_url="ghcr.io",
            upstream_registry="github-container-registry",
            credential=True,
            name="GitHub Container Registry",
        ),
        Upstream(
            host="registry.k8s.io",
            prefix="kubernetes",
            mode=CacheMode.PULL_THROUGH,
            registry_url="registry.k8s.io",
            upstream_registry="k8s",
            name="Kubernetes registry",
        ),
        Upstream(
            host="quay.io",
            prefix="quay",
            mode=CacheMode.PULL_THROUGH,
            registry_url="quay.io",
            upstream_registry="quay",
            name="Quay",
        ),
        Upstream(
            host="registry.gitlab.com",
            prefix="gitlab",
            mode=CacheMode.PULL_THROUGH,
            registry_url="registry.gitlab.com",
            upstream_registry="gitlab-container-registry",
            credential=True,
            name="GitLab Container Registry",
        ),
        Upstream(host="nvcr.io", prefix="nvcr", mode=CacheMode.MIRROR, name="NVIDIA NGC (nvcr.io)"),
    )
}
"""Registry host -> its upstream. Docker Hub's other names resolve to `docker.io` (:func:`host_of`)."""

RULE_UPSTREAMS = frozenset({"docker.io", "public.ecr.aws", "ghcr.io", "registry.k8s.io", "quay.io"})
"""The upstreams a tier gets a cache rule for: those of gpufarm's images and of the usual
third-party charts. GitLab's and Azure's registries need a credential and serve no gpufarm
image: an image there is refused (gpufarm/config/checks/images.py)."""

_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

ECR_HOST = re.compile(r"^\d{12}\.dkr\.ecr(-fips)?\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$")
"""A private Amazon ECR registry: images there are already in ECR and are not rewritten."""


class UncachedRegistryError(ValueError):
    """An image on a registry ECR can neither cache nor gpufarm mirror."""


def host_of(repository: str) -> tuple[str, str]:
    """(registry host, path in it) of a repository, as container runtimes read it.

    A first component without a '.' or ':' (and not 'localhost') is a Docker Hub namespace;
    a Docker Hub repository without a namespace is an official image under `library/`.
    """
    first, _, rest = repository.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        host, path = "docker.io", repository
    else:
        host, path = first, rest
    if host in _DOCKER_HUB_ALIASES:
        host = "docker.io"
        if "/" not in path:
            path = f"library/{path}"
    return host, path


def upstream_of(repository: str) -> Upstream | None:
    """The upstream a repository is pulled from; None when it is already in Amazon ECR.

    Raises UncachedRegistryError for any other host.
    """
    host, _ = host_of(repository)
    if ECR_HOST.match(host):
        return None
    upstream = UPSTREAMS.get(host)
    if upstream is None:
        raise UncachedRegistryError(
            f"image repository {repository!r} is on {host!r}, which neither an ECR pull through cache "
            f"rule nor a gpufarm mirror serves (hosts: {', '.join(UPSTREAMS)}, or an Amazon ECR registry)"
        )
    return upstream


def cached_repository(repository: str, registry: str, root: str) -> str:
    """Where `repository` lives in the ECR registry `registry` ('<account>.dkr.ecr.<region>.amazonaws.com').

    `<registry>/<root>/<prefix>/<path>`, `root` being the tier's cache prefix; a repository
    already in Amazon ECR (this registry included) is returned unchanged.
    """
    if repository.startswith(f"{registry}/"):
        return repository
    upstream = upstream_of(repository)
    if upstream is None:
        return repository
    if upstream.mode is CacheMode.PULL_THROUGH and upstream.host not in RULE_UPSTREAMS:
        raise UncachedRegistryError(
            f"image repository {repository!r} is on {upstream.name}, for which gpufarm creates no cache "
            f"rule (hosts with one: {', '.join(sorted(RULE_UPSTREAMS))})"
        )
    _, path = host_of(repository)
    return f"{registry}/{root}/{upstream.prefix}/{path}"


def cached(reference: str, registry: str, root: str) -> str:
    """An image reference pulled through `registry`: `<registry>/<root>/<prefix>/<path>:<tag>@<digest>`.

    The tag and digest are kept as they are: a digest names content, which ECR serves unchanged.
    """
    repository, tag, digest = split_reference(reference)
    out = cached_repository(repository, registry, root)
    if tag:
        out += f":{tag}"
    if digest:
        out += f"@{digest}"
    return out


_BY_PREFIX = {u.prefix: u for u in UPSTREAMS.values()}


def upstream_repository(repository: str) -> str:
    """The upstream repository (`<host>/<path>`) a repository in a cache or mirror stands for;
    any other repository unchanged. The inverse of :func:`cached_repository` (the cache prefix is
    one path component: `images.cache_prefix` allows no '/')."""
    host, _, rest = repository.partition("/")
    parts = rest.split("/")
    if ECR_HOST.match(host) and len(parts) >= 3 and parts[1] in _BY_PREFIX:
        return f"{_BY_PREFIX[parts[1]].host}/{'/'.join(parts[2:])}"
    return repository


_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def rewrite_manifest(document: Any, rewrite: Callable[[str], str]) -> Any:
    """A copy of a Kubernetes object with every container's `image` passed through `rewrite`.

    Containers are found wherever a pod template sits (Deployment, LeaderWorkerSet leader and
    worker templates, Job, Pod): every list under `containers`, `initContainers` (native
    sidecars among them) or `ephemeralContainers`.
    """
    if isinstance(document, list):
        return [rewrite_manifest(item, rewrite) for item in document]
    if not isinstance(document, dict):
        return document
    out: dict[str, Any] = {}
    for key, value in document.items():
        if key in _CONTAINER_LISTS and isinstance(value, list):
            out[key] = [
                {**c, "image": rewrite(c["image"])}
                if isinstance(c, dict) and isinstance(c.get("image"), str)
                else rewrite_manifest(c, rewrite)
                for c in value
            ]
        else:
            out[key] = rewrite_manifest(value, rewrite)
    return out


def rewrite_values(values: Any, rewrite_repository: Callable[[str], str]) -> Any:
    """A copy of a chart's values with every image's repository moved into `registry`.

    An image is a mapping with `repository` and `tag` (the shape of every chart gpufarm
    installs), `rewrite_repository` gives the new repository; with a `registry` key beside them
    (KEDA's), the new repository's host becomes the registry and the rest the repository. Tags
    and digests are kept.
    """
    if isinstance(values, list):
        return [rewrite_values(v, rewrite_repository) for v in values]
    if not isinstance(values, dict):
        return values
    if isinstance(values.get("repository"), str) and "tag" in values:
        out = dict(values)
        if isinstance(values.get("registry"), str) and values["registry"]:
            moved = rewrite_repository(f"{values['registry']}/{values['repository']}")
            host, _, path = moved.partition("/")
            out["registry"], out["repository"] = host, path
        else:
            out["repository"] = rewrite_repository(values["repository"])
        return out
    return {k: rewrite_values(v, rewrite_repository) for k, v in values.items()}


def container_images(document: Any) -> list[str]:
    """Every container image of a Kubernetes object (see :func:`rewrite_manifest`), in order."""
    found: list[str] = []

    def collect(image: str) -> str:
        found.append(image)
        return image

    rewrite_manifest(document, collect)
    return found


def values_images(values: Any) -> list[str]:
    """Every image repository of a chart's values (see :func:`rewrite_values`), `registry/` joined."""
    found: list[str] = []

    def collect(repository: str) -> str:
        found.append(repository)
        return repository

    rewrite_values(values, collect)
    return found
