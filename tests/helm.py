"""Helm's values merge, for tests that check what a chart really renders with gpufarm's values.

Helm coalesces user values over the chart's `values.yaml`: maps merge key by key, any other
value (a list, a scalar) replaces the default whole, and a null deletes the key ("If you need
to delete a key from the default values, you may override the value of the key to be null, in
which case Helm will remove the key from the overridden values merge":
https://helm.sh/docs/chart_template_guide/values_files/#deleting-a-default-key).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.conftest import REPO

UPSTREAM_CHARTS = REPO.parent / "shared" / "upstream-ref" / "charts"
"""Parsed `values.yaml` of each chart gpufarm pins (../shared/upstream-ref, beside the repo)."""


def chart_defaults(chart: str) -> dict[str, Any]:
    """The parsed `values.yaml` of `chart` ('<name>@<version>') from ../shared/upstream-ref."""
    values: dict[str, Any] = json.loads((UPSTREAM_CHARTS / f"{chart}.json").read_text())["values"]
    return values


def helm_merge(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`overrides` coalesced over `defaults` as Helm does; neither argument is changed."""
    merged = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = _without_nulls(value)
    return merged


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return copy.deepcopy(value)


def chart_available(chart: str) -> bool:
    """Whether ../shared/upstream-ref holds `chart` (it is not part of the repository)."""
    return Path(UPSTREAM_CHARTS / f"{chart}.json").exists()
