"""Fixtures shared by every test folder: the repo root and the CDK context from cdk.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def cdk_context() -> dict[str, Any]:
    """The context `cdk` passes to the app (feature flags), so tests synthesize the same way."""
    data: dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]
    return data


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO
