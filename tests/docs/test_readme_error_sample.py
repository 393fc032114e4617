"""The getting-started page's sample of an invalid tier file is what the loader says about it.

(The sample was in the README before its long prose moved to docs/getting-started.md.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpufarm.config import ConfigError, load_tier_file

GETTING_STARTED = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"


def _blocks(language: str) -> list[str]:
    text = GETTING_STARTED.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_the_error_sample_is_the_loaders_message(tmp_path: Path) -> None:
    """getting-started.md: 'the tier file above without its node_pools override ... prints' the sample."""
    (example,) = [b for b in _blocks("yaml") if b.startswith("# my.yaml\nextends: poc")]
    (sample,) = [b for b in _blocks("text") if b.startswith("invalid my.yaml:")]
    document = yaml.safe_load(example)
    del document["node_pools"]
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_tier_file(tmp_path / "my.yaml")
    assert str(raised.value).replace(str(tmp_path / "my.yaml"), "my.yaml") + "\n" == sample
