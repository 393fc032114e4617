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


SLOW_FIRST = ("integration", "tiers", "e2e", "property", "cli", "constructs", "aws", "deploy_rules", "docs")
"""Test folders in the order `make test` hands their files to the xdist workers; folders not
named here come next, `unit` last.

`--dist loadfile` gives each worker one file at a time, and by default queues the files with the
most tests first (pytest-xdist 3.8.0, `loadscopereorder`), so files of one or two long tests (an
end-to-end gateway, a property test, a subprocess run) came last and one worker finished a file
of 20-30 s while the other had nothing left. pyproject.toml turns that reordering off
(`--no-loadscope-reorder`) and this order puts the folders whose files are long first and the
many short unit files last, to fill the end of the run (benchmarks/README.md, "Test suite time").
"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the tests by folder (:data:`SLOW_FIRST`), keeping the collection order inside one."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    later, last = len(SLOW_FIRST), len(SLOW_FIRST) + 1

    def folder_rank(item: pytest.Item) -> int:
        parts = Path(item.nodeid.split("::", 1)[0]).parts
        folder = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
        return last if folder == "unit" else rank.get(folder, later)

    items.sort(key=folder_rank)


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
