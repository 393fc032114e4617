"""The tier's Amazon Bedrock fallback targets, one answer for the dashboards and `gpufarm status`."""

from __future__ import annotations

from gpufarm.config import TierConfig


def bedrock_model_ids(tier: TierConfig) -> list[str]:
    """The Bedrock model (or inference profile) IDs the gateway falls back to, each once, in model order."""
    ids: list[str] = []
    for model in tier.models:
        target = model.bedrock_target
        if target is not None and target.model_id not in ids:
            ids.append(target.model_id)
    return ids
