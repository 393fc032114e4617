"""The image cache check: the cache rules' credentials exist, and every pinned image the
template pulls through the account's ECR is there by its digest.

ECR's pull through cache fetches an image on the first pull *by tag*; a first pull by digest of
an image not yet cached is answered as missing, even with the tag beside the digest
(aws/containers-roadmap#2837, open: "an uncached image returns as missing, even though the tag
also is included"). gpufarm pulls every image by `tag@digest`, so each must be cached once by
tag before the tier deploys; NVIDIA's images (nvcr.io, no upstream ECR supports) must be copied
into their mirror repositories. The row of an image that is missing gives the exact command.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from gpufarm.aws.preflight.calls import _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import TierConfig
from gpufarm.image_cache import UPSTREAMS, CacheMode, container_images, values_images
from gpufarm.images import split_reference

_KUBERNETES = "Custom::AWSCDK-EKS-KubernetesResource"
_HELM = "Custom::AWSCDK-EKS-HelmChart"


def _row(status: Status, subject: str, message: str, fix: str = "") -> CheckResult:
    return CheckResult(check=Check.IMAGE_CACHE, subject=subject, status=status, message=message, fix=fix)


def _text(value: Any, account: str) -> str:
    """A template string property, the account filled in and any other token left as '?'."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return str(sep).join(_text(p, account) for p in parts)
    if value == {"Ref": "AWS::AccountId"}:
        return account
    return "?"


def template_images(template: Mapping[str, Any], account: str) -> list[str]:
    """Every image reference a template's manifests and chart values pull, in template order
    (chart images as `repository:tag`, with the digest when the chart's `digest` key has one)."""
    found: list[str] = []
    for resource in (template.get("Resources") or {}).values():
        props = resource.get("Properties") or {}
        if resource.get("Type") == _KUBERNETES and "Manifest" in props:
            for document in json.loads(_text(props["Manifest"], account)):
                found += container_images(document)
        elif resource.get("Type") == _HELM and "Values" in props:
            found += list(_chart_images(json.loads(_text(props["Values"], account))))
    return list(dict.fromkeys(found))


def _chart_images(values: Any) -> Iterator[str]:
    if isinstance(values, dict):
        if isinstance(values.get("repository"), str) and isinstance(values.get("tag"), str):
            (repository,) = values_images({"i": values})
            digest = values.get("digest")
            yield f"{repository}:{values['tag']}" + (
                f"@{digest}" if digest and "@" not in values["tag"] else ""
            )
            return
        for value in values.values():
            yield from _chart_images(value)
    elif isinstance(values, list):
        for item in values:
            yield from _chart_images(item)


def _credential_rows(tier: TierConfig, secretsmanager: Any) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    rows = []
    for field, arn in (
        ("images.docker_hub_credential_arn", tier.images.docker_hub_credential_arn),
        ("images.github_credential_arn", tier.images.github_credential_arn),
    ):
        if arn is None:
            continue
        try:
            described = secretsmanager.describe_secret(SecretId=arn)
        except ClientError as exc:
            if _error_code(exc) != "ResourceNotFoundException":
                raise
            rows.append(
                _row(
                    Status.FAIL,
                    field,
                    f"Secrets Manager has no secret {arn!r}: CloudFormation cannot create the cache rule",
                    "create it with the registry's user name and access token: aws secretsmanager "
                    f"create-secret --name {arn.split(':secret:', 1)[1].rsplit('-', 1)[0]} "
                    '--secret-string \'{"username":"<user>","accessToken":"<token>"}\'',
                )
            )
            continue
        if described.get("DeletedDate") is not None:
            rows.append(_row(Status.FAIL, field, f"secret {arn!r} is scheduled for deletion", "restore it"))
            continue
        rows.append(_row(Status.PASS, field, f"secret {arn!r} exists"))
    return rows


def check_image_cache(
    tier: TierConfig, *, template: Mapping[str, Any] | None, account: str, ecr: Any, secretsmanager: Any
) -> list[CheckResult]:
    """Rows for `images.pull_through_cache`: none when it is off. Secrets are described, never read."""
    from botocore.exceptions import ClientError

    if not tier.images.pull_through_cache:
        return []
    rows = _credential_rows(tier, secretsmanager)
    if template is None:
        rows.append(
            _row(
                Status.SKIP,
                "images",
                "no template: the cached and mirrored images were not checked",
                "run gpufarm synth, then preflight with --template cdk.out/<stack>.template.json",
            )
        )
        return rows
    region = tier.environment.region
    registry = f"{account}.dkr.ecr.{region}.amazonaws.com"
    root = tier.image_cache_prefix
    prefixes = {u.prefix: u for u in UPSTREAMS.values()}
    for image in template_images(template, account):
        repository, tag, digest = split_reference(image)
        if not repository.startswith(f"{registry}/{root}/") or not digest:
            continue  # outside the cache (the EKS registry), or pinned by tag only (a placeholder row)
        name = repository[len(registry) + 1 :]
        upstream = prefixes[name.split("/")[1]]
        path = name.split("/", 2)[2]
        source = f"{upstream.host}/{path}"
        try:
            ecr.describe_images(repositoryName=name, imageIds=[{"imageDigest": digest}])
        except ClientError as exc:
            if _error_code(exc) not in ("RepositoryNotFoundException", "ImageNotFoundException"):
                raise
            if upstream.mode is CacheMode.MIRROR:
                fix = (
                    f"aws ecr create-repository --repository-name {name} --image-tag-mutability IMMUTABLE "
                    f"--image-scanning-configuration scanOnPush=true; crane copy {source}:{tag}@{digest} "
                    f"{repository}:{tag}"
                )
                why = f"the {upstream.name} mirror holds no {digest[:19]}..."
            else:
                fix = f"pull it once by tag through the cache: docker pull {repository}:{tag}"
                why = (
                    f"not cached yet: ECR caches an image on a pull by tag, and nodes pull by digest "
                    f"({digest[:19]}...)"
                )
            rows.append(_row(Status.FAIL, f"{name}:{tag}", why, fix))
            continue
        rows.append(_row(Status.PASS, f"{name}:{tag}", f"{digest[:19]}... is in {name}"))
    return rows
