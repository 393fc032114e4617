"""Fixtures shared by the config and Kubernetes manifest unit tests."""

from __future__ import annotations

import pytest

from gpufarm.config import ModelConfig, TierConfig, load_preset

from .factories import make_tier, model_override

S3_WEIGHTS = "s3://gpufarm-models/qwen/Qwen3-8B/"
HF_TOKEN_SECRET = "gpufarm/hf-token"


@pytest.fixture(scope="session")
def poc() -> TierConfig:
    """The poc preset as shipped."""
    return load_preset("poc")


@pytest.fixture(scope="session")
def s3_tier() -> TierConfig:
    """The poc tier serving its model from S3 weights."""
    return make_tier(model_override(weights=S3_WEIGHTS))


@pytest.fixture(scope="session")
def hf_token_tier() -> TierConfig:
    """The poc tier with a gated Hugging Face model: a token secret and a pinned revision."""
    return make_tier(model_override(hf_token_secret=HF_TOKEN_SECRET, revision="main"))


@pytest.fixture(scope="session")
def s3_model(s3_tier: TierConfig) -> ModelConfig:
    """A model whose weights are mounted from S3."""
    return s3_tier.models[0]


@pytest.fixture(scope="session")
def hf_token_model(hf_token_tier: TierConfig) -> ModelConfig:
    """A Hugging Face model read with a token from Secrets Manager."""
    return hf_token_tier.models[0]
