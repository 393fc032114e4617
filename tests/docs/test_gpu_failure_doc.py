"""docs/operations.md, "When a GPU fails": its timing table is the one the code's constants give."""

from __future__ import annotations

from pathlib import Path

from gpufarm.config import load_preset
from gpufarm.core.gpu_health import timeline_table

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
START = "<!-- gpu-failure-timeline:start -->"
END = "<!-- gpu-failure-timeline:end -->"
PRESETS = ("poc", "production", "enterprise")


def _table_in_doc() -> list[str]:
    text = OPERATIONS.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1, f"{OPERATIONS.name} needs one {START} ... {END}"
    return text.split(START, 1)[1].split(END, 1)[0].strip().splitlines()


def test_the_timing_table_is_the_codes() -> None:
    expected = timeline_table({name: load_preset(name) for name in PRESETS})
    assert _table_in_doc() == expected, (
        "docs/operations.md's GPU failure table differs from gpufarm/core/gpu_health.py; put "
        "gpufarm.core.gpu_health.timeline_table({preset: load_preset(preset)}) for poc, production "
        "and enterprise between the markers"
    )


def test_the_doc_names_the_bounds_it_derives() -> None:
    rows = {line.split("|")[1].strip(): line for line in _table_in_doc()[2:]}
    assert "| 10 s | 10 s | 10 s |" in rows["pod leaves its Service (gateway and in-cluster route)"]
    assert "| 600 s | 600 s | 600 s |" in rows["node with a failed GPU replaced"]
