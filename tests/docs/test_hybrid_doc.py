"""docs/operations.md, Onboarding an on-premises node: its tier file is a valid tier."""

from __future__ import annotations

import re
from pathlib import Path

from gpufarm.config.loader import load_tier_file
from gpufarm.core.hybrid import node_affinities

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_the_onboarding_tier_file_runs_a_model_on_premises(tmp_path: Path) -> None:
    section = DOC.read_text(encoding="utf-8").split("## Onboarding an on-premises node", 1)[1]
    block = re.search(r"```yaml\n(extends: .*?)```", section, re.S)
    assert block is not None
    (tmp_path / "hybrid.yaml").write_text(block.group(1), encoding="utf-8")
    tier = load_tier_file(tmp_path / "hybrid.yaml")
    assert tier.hybrid_nodes.enabled and tier.hybrid_nodes.gpu_count == 16
    assert list(node_affinities(tier)) == ["qwen2-5-72b"]
