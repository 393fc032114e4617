"""The YAML examples in docs/enterprise.md stay valid tier settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gpufarm.config import TierConfig, build_tier, load_preset, load_tier_file, merge
from gpufarm.core.placement import placement_of

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


def _layout(tier: TierConfig) -> tuple[list[tuple[object, ...]], dict[str, list[str]]]:
    """The tier's reserved node groups and where each model may run."""
    groups = [
        (g.name, g.instance_type, g.availability_zone, g.nodes, g.efa, g.capacity_class)
        for g in tier.node_groups
    ]
    return groups, {m.name: sorted(t.name for t in placement_of(tier, m)) for m in tier.models}


def test_the_tier_file_example_keeps_the_presets_layout(tmp_path: Path) -> None:
    """'Your tier file' restates node_groups and models in full: they must place models as the preset."""
    (example,) = [
        b for b in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S) if b.startswith("# ent.yaml")
    ]
    (tmp_path / "ent.yaml").write_text(example)
    tier = load_tier_file(tmp_path / "ent.yaml")
    assert _layout(tier) == _layout(load_preset("enterprise"))
    assert [g.capacity.kind.value for g in tier.node_groups] == ["odcr", "odcr"]
