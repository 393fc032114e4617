"""Amazon Bedrock model and inference-profile IDs: their shape, geography and regions.

A cross-region inference profile ID is a foundation-model ID with a geography prefix
(`us.anthropic.claude-...`). Bedrock routes a profile's requests to any region of its
geography, so IAM must allow the foundation model in each of them; `global.` profiles route to
any commercial region and IAM names their foundation model without a region.
"""

from __future__ import annotations

from gpufarm.config.model import BedrockTargetConfig

PROFILE_GEOGRAPHIES: dict[str, tuple[str, ...]] = {
    "us": ("us-east-1", "us-east-2", "us-west-1", "us-west-2"),
    "us-gov": ("us-gov-east-1", "us-gov-west-1"),
    "eu": (
        "eu-central-1",
        "eu-central-2",
        "eu-north-1",
        "eu-south-1",
        "eu-south-2",
        "eu-west-1",
        "eu-west-3",
    ),
    "apac": (
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-south-1",
        "ap-south-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-4",
    ),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
    "ca": ("ca-central-1", "ca-west-1"),
}
"""Destination regions of each geographic inference-profile prefix, as AWS documents them.

AWS adds regions over time: a model's `bedrock.destination_regions` replaces this list.
"""

GLOBAL_PREFIX = "global"
"""Global profiles route to any commercial region."""


def profile_prefix(model_id: str) -> str | None:
    """The geography prefix of an inference-profile ID ('us', 'eu', 'global'...); None for a model ID."""
    head, _, rest = model_id.partition(".")
    if "." in rest and (head in PROFILE_GEOGRAPHIES or head == GLOBAL_PREFIX):
        return head
    return None


def foundation_model_id(model_id: str) -> str:
    """The foundation-model ID behind an ID: the profile prefix removed, if there is one."""
    prefix = profile_prefix(model_id)
    return model_id[len(prefix) + 1 :] if prefix else model_id


def call_region(target: BedrockTargetConfig, stack_region: str) -> str:
    """The region the gateway sends the request to."""
    return target.region or stack_region


def profile_callable_from(prefix: str, region: str, regions: tuple[str, ...] | list[str] = ()) -> bool:
    """Whether a profile of `prefix` can be invoked from `region`.

    A geographic profile is called from a region of its own geography: one of
    :data:`PROFILE_GEOGRAPHIES` for its prefix, or of `regions` when the model lists its
    `destination_regions` (which replace the table as AWS adds regions). Matching the table, not
    a name prefix, keeps `ap-southeast-3` out of `au.` and `ap-east-1` out of `apac.`.
    """
    if prefix == GLOBAL_PREFIX:
        return not region.startswith(("us-gov-", "cn-"))
    return region in (regions or PROFILE_GEOGRAPHIES[prefix])


def destination_regions(target: BedrockTargetConfig, stack_region: str) -> list[str]:
    """Regions whose foundation model the request may reach (empty for a `global.` profile)."""
    prefix = profile_prefix(target.model_id)
    if prefix is None:
        return [call_region(target, stack_region)]
    if prefix == GLOBAL_PREFIX:
        return []
    return list(target.destination_regions or PROFILE_GEOGRAPHIES[prefix])
