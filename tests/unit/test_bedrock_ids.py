"""Bedrock model and inference-profile IDs: prefixes, callable regions and destination regions."""

from __future__ import annotations

import pytest

from gpufarm.config.bedrock import (
    PROFILE_GEOGRAPHIES,
    call_region,
    destination_regions,
    foundation_model_id,
    profile_callable_from,
    profile_prefix,
)
from gpufarm.config.model import BedrockTargetConfig


@pytest.mark.parametrize(
    ("model_id", "prefix"),
    [
        ("us.meta.llama3-3-70b-instruct-v1:0", "us"),
        ("us-gov.anthropic.claude-3-haiku-20240307-v1:0", "us-gov"),
        ("apac.amazon.nova-lite-v1:0", "apac"),
        ("global.anthropic.claude-sonnet-4-20250514-v1:0", "global"),
        ("meta.llama3-1-8b-instruct-v1:0", None),
        # A provider that happens to share a geography's letters is still a model ID: one dot only.
        ("eu.model", None),
    ],
)
def test_profile_prefix(model_id: str, prefix: str | None) -> None:
    assert profile_prefix(model_id) == prefix


def test_foundation_model_id_drops_only_a_profile_prefix() -> None:
    assert foundation_model_id("us.meta.llama3-3-70b-instruct-v1:0") == "meta.llama3-3-70b-instruct-v1:0"
    assert foundation_model_id("meta.llama3-3-70b-instruct-v1:0") == "meta.llama3-3-70b-instruct-v1:0"


@pytest.mark.parametrize(
    ("prefix", "region", "callable_"),
    [
        ("us", "us-east-1", True),
        ("us", "us-west-2", True),
        ("us", "us-gov-west-1", False),
        ("us", "eu-west-1", False),
        ("eu", "eu-central-1", True),
        ("apac", "ap-southeast-1", True),
        ("jp", "ap-northeast-1", True),
        ("jp", "ap-southeast-1", False),
        ("global", "eu-west-1", True),
        ("global", "us-gov-west-1", False),
    ],
)
def test_profile_callable_from(prefix: str, region: str, callable_: bool) -> None:
    assert profile_callable_from(prefix, region) is callable_


def test_call_region_defaults_to_the_stack() -> None:
    assert call_region(BedrockTargetConfig(model_id="meta.x-v1:0"), "us-east-2") == "us-east-2"
    assert (
        call_region(BedrockTargetConfig(model_id="meta.x-v1:0", region="us-west-2"), "us-east-2")
        == "us-west-2"
    )


def test_destination_regions() -> None:
    plain = BedrockTargetConfig(model_id="meta.llama3-1-8b-instruct-v1:0")
    assert destination_regions(plain, "us-east-1") == ["us-east-1"]
    us = BedrockTargetConfig(model_id="us.meta.llama3-1-8b-instruct-v1:0")
    assert destination_regions(us, "us-east-1") == list(PROFILE_GEOGRAPHIES["us"])
    pinned = BedrockTargetConfig(
        model_id="us.meta.llama3-1-8b-instruct-v1:0", destination_regions=["us-east-1"]
    )
    assert destination_regions(pinned, "us-east-1") == ["us-east-1"]
    # Global profiles name their foundation model without a region.
    assert destination_regions(BedrockTargetConfig(model_id="global.anthropic.x-v1:0"), "us-east-1") == []
