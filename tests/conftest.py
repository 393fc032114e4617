"""Fixtures shared by every test folder: the repo root and the CDK context from cdk.json."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

# Apps built in tests synthesize as gpufarm's own do: without aws-cdk-lib's built-in template
# validation (warnings only, 2 s a synth); cfn-lint is the check (cfn_lint_errors below). Set
# before aws_cdk starts its Node process, which reads it.
os.environ.setdefault("CDK_VALIDATION", "false")


def cdk_context() -> dict[str, Any]:
    """The context `cdk` passes to the app (feature flags), so tests synthesize the same way."""
    data: dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]
    return data


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO


def cfn_lint_errors(template: Path) -> list[dict[str, Any]]:
    """cfn-lint's error-level findings on a synthesized template (warnings are not errors)."""
    result = subprocess.run(
        [str(REPO / ".venv" / "bin" / "cfn-lint"), "--format", "json", str(template)],
        capture_output=True,
        text=True,
        check=False,
    )
    findings: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    return [f for f in findings if f["Level"] == "Error"]


ANNOTATIONS_PLUGIN = "Construct Annotations"
"""The report's plugin for CDK warnings (not a compliance rule pack)."""


PLACEHOLDER_ANNOTATION = "Annotation::gpufarm:placeholder"
"""The warning a stack carries per documentation value (tests/tiers/test_placeholders.py)."""


def nag_violations(
    outdir: Path, *, annotations: bool = True, placeholders: bool = False
) -> dict[str, list[str]]:
    """Rule names of the violations each validation plugin reported, for plugins that reported any.

    `annotations=False` leaves out CDK's own warnings (such as those about imported subnets in
    test scaffolding) and keeps the compliance and CloudFormation validation findings.
    `placeholders=False` (the default) leaves out the warnings about documentation values, which
    every tier derived from a preset carries and tests/tiers/test_placeholders.py asserts.
    """
    report = json.loads((outdir / "validation-report.json").read_text())
    found = {
        p["pluginName"]: [
            v["ruleName"] for v in p["violations"] if placeholders or v["ruleName"] != PLACEHOLDER_ANNOTATION
        ]
        for p in report["pluginReports"]
        if annotations or p["pluginName"] != ANNOTATIONS_PLUGIN
    }
    return {name: rules for name, rules in found.items() if rules}
