"""Amazon Bedrock's on-demand token prices, as data for the gateway's spend alert.

The alert rules (`gpufarm.k8s.alerting`) turn Bedrock's token counters into dollars per hour with
the list prices gpufarm ships in `gpufarm/data/prices.yaml` (`bedrock.models`, $ per million
tokens; the cost report reads the same section through `gpufarm.pricing`, which the deployment's
layers may not import). Only the shipped table is read: a `--prices` file changes the reports,
not the deployed alert.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from gpufarm.config.bedrock import foundation_model_id


@dataclass(frozen=True, kw_only=True)
class BedrockTokenPrice:
    """$ per 1,000 input and output tokens of one Bedrock model, on demand."""

    input_per_1k: float
    output_per_1k: float


@cache
def _shipped_models() -> dict[str, Any]:
    text = (resources.files("gpufarm") / "data" / "prices.yaml").read_text(encoding="utf-8")
    models: dict[str, Any] = yaml.safe_load(text)["bedrock"]["models"]
    return models


def bedrock_token_price(model_id: str) -> BedrockTokenPrice | None:
    """The shipped price of a Bedrock model or inference profile (prefix dropped); None if unlisted."""
    entry = _shipped_models().get(foundation_model_id(model_id))
    if entry is None:
        return None
    return BedrockTokenPrice(
        input_per_1k=float(entry["input_per_million"]) / 1000,
        output_per_1k=float(entry["output_per_million"]) / 1000,
    )
