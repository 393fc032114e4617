"""`gpufarm.cli._output.table`: empty cells (None) in a column of numbers."""

from __future__ import annotations

import pytest

from gpufarm.cli._output import table


def test_a_none_cell_is_blank_and_its_column_stays_right_aligned(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    table("T", ("Name", "Tokens"), [("measured", 1234), ("unmeasured", None)])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    # Numbers right-aligned under a right-aligned header; the empty cell is blank, not "None".
    assert rows == ["│ measured   │  1,234 │", "│ unmeasured │        │"]
