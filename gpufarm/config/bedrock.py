"""Amazon Bedrock model and inference-profile IDs: their shape, geography and regions.

A cross-region inference profile ID is a foundation-model ID with a geography prefix
(`us.anthropic.claude-...`). Bedrock routes a profile's requests to any region of its
geography, so IAM must allow the foundation model in each of them; `global.` profiles route to
any commercial region and IAM names their foundation model without a region.

A target may also be capacity the account owns, named by ARN: a Provisioned Throughput
(`provisioned-model`, bought by hand for a foundation model) or an application inference
profile (`application-inference-profile`, a copy of a foundation model or system profile that
carries cost-allocation tags). The target's `base_model_id` names the model or system profile
behind the ARN, which decides the regions a request reaches and the token price.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpufarm.config.model import BEDROCK_CAPACITY_ARN, BedrockTargetConfig


class CapacityKind(StrEnum):
    """The resource type of a Bedrock capacity ARN."""

    PROVISIONED_MODEL = "provisioned-model"
    APPLICATION_PROFILE = "application-inference-profile"


@dataclass(frozen=True, kw_only=True)
class CapacityArn:
    """The parts of a provisioned-model or application-inference-profile ARN."""

    partition: str
    region: str
    account: str
    kind: CapacityKind
    resource: str


def capacity_arn(model_id: str) -> CapacityArn | None:
    """The parts of a provisioned-model or application-inference-profile ARN; None for anything else."""
    found = BEDROCK_CAPACITY_ARN.match(model_id)
    if found is None:
        return None
    return CapacityArn(
        partition=found["partition"],
        region=found["region"],
        account=found["account"],
        kind=CapacityKind(found["kind"]),
        resource=found["resource"],
    )


def routing_model_id(target: BedrockTargetConfig) -> str:
    """The model or system-profile ID whose regions a request reaches and whose tokens it is priced as.

    `model_id` itself, or for a capacity ARN its `base_model_id` (the model ID itself when that is
    not set, which the config checks refuse).
    """
    if capacity_arn(target.model_id) is not None and target.base_model_id:
        return target.base_model_id
    return target.model_id


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


def token_priced_model_id(target: BedrockTargetConfig) -> str | None:
    """The model whose token price a target's requests bill at; None for a Provisioned Throughput.

    A Provisioned Throughput bills its model units by the hour whatever the tokens; an application
    inference profile bills its tokens as the model or system profile it copies.
    """
    arn = capacity_arn(target.model_id)
    if arn is not None and arn.kind is CapacityKind.PROVISIONED_MODEL:
        return None
    return routing_model_id(target)


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
    """The region the gateway sends the request to: a capacity ARN's own, else `region` or the stack's."""
    arn = capacity_arn(target.model_id)
    if arn is not None:
        return arn.region
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
    """Regions whose foundation model the request may reach (empty for a `global.` profile).

    A Provisioned Throughput serves in its own region only; an application profile routes as the
    model or system profile it copies (`base_model_id`).
    """
    arn = capacity_arn(target.model_id)
    if arn is not None and arn.kind is CapacityKind.PROVISIONED_MODEL:
        return [arn.region]
    prefix = profile_prefix(routing_model_id(target))
    if prefix is None:
        return [call_region(target, stack_region)]
    if prefix == GLOBAL_PREFIX:
        return []
    return list(target.destination_regions or PROFILE_GEOGRAPHIES[prefix])
