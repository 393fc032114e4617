"""Running Prometheus' own `promtool` on rules files: the real PromQL parser and rule evaluator.

Debian's `prometheus` package installs `/usr/bin/promtool` (`.ci/run` installs it); a test that
needs it skips, with the reason shown, where it is missing.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from gpufarm.k8s.promql import Expression


def promtool() -> str:
    """The `promtool` command; skips the calling test (visibly) when it is not installed."""
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian package 'prometheus'; .ci/run installs it)")
    return found


def check_rules(path: Path) -> subprocess.CompletedProcess[str]:
    """`promtool check rules --lint-fatal PATH`: parses every expression, checks the structure and
    fails on duplicate rules (same name and labels)."""
    return subprocess.run(
        [promtool(), "check", "rules", "--lint-fatal", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_rules(path: Path) -> subprocess.CompletedProcess[str]:
    """`promtool test rules PATH`: evaluates rules against the input series of a unit-test file."""
    return subprocess.run(
        [promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=120, check=False
    )


test_rules.__test__ = False  # type: ignore[attr-defined]


def expressions_file(expressions: Iterable[Expression], path: Path) -> Path:
    """A rules file with one recording rule per expression, so promtool parses each of them."""
    rules = [{"record": f"gpufarm:check_{i}", "expr": e.expr} for i, e in enumerate(expressions)]
    path.write_text(yaml.safe_dump({"groups": [{"name": "expressions", "rules": rules}]}), encoding="utf-8")
    return path
