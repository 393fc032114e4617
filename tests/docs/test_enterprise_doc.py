"""The YAML examples in docs/enterprise.md stay valid tier settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gpufarm.config import build_tier, load_preset, merge

DOC = Path(__file__).resolve().parents[2] / "docs" / "enterprise.md"


def _yaml_blocks() -> list[dict[str, Any]]:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)]


def test_prefill_decode_example_is_a_valid_change_to_the_preset() -> None:
    (example,) = [b for b in _yaml_blocks() if "prefill_decode" in str(b)]
    preset = load_preset("enterprise").model_dump(mode="json", exclude_none=True)
    # The example shows only what changes: merge each model into the preset's model of its name.
    changed = {m["name"]: m for m in example["models"]}
    models = [merge(m, changed.get(m["name"], {})) for m in preset["models"]]
    tier = build_tier(merge(preset, {"ingress": example["ingress"], "models": models}))
    (split,) = [m for m in tier.models if m.prefill_decode is not None]
    assert split.prefill_decode is not None
    assert split.prefill_gpu_demand == 2 * 4
