"""The documents' Python samples that use gpufarm.client parse, and name only what the module has.

They need a deployed load balancer to run; tests/e2e/test_hot_path.py runs the same calls against
the stand-ins and the real gateway. This keeps a renamed class, helper or argument from leaving a
sample behind.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from gpufarm import client

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "calling-a-model.md", ROOT / "docs" / "client.md", ROOT / "docs" / "fallback.md")
BLOCK = re.compile(r"^```python\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)


def samples() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            if "gpufarm.client" in match["code"]:
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{doc.relative_to(ROOT)}:{line}", match["code"]))
    return found


SAMPLES = samples()


def test_the_calling_and_client_pages_show_the_transport() -> None:
    shown = {name.split(":")[0] for name, _ in SAMPLES}
    assert {"docs/calling-a-model.md", "docs/client.md"} <= shown


@pytest.mark.parametrize(("name", "code"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_a_sample_names_only_what_gpufarm_client_has(name: str, code: str) -> None:
    # '[...]' stands for the messages in some samples: a valid expression either way.
    tree = ast.parse(code, filename=name)
    imported = {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "gpufarm.client"
        for alias in node.names
    }
    assert imported, f"{name} imports nothing from gpufarm.client"
    assert set(imported.values()) <= set(client.__all__), name
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported:
            target = getattr(client, imported[node.func.id])
            parameters = inspect.signature(target).parameters
            takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
            for keyword in node.keywords:
                assert keyword.arg is None or takes_any or keyword.arg in parameters, (
                    f"{name}: {node.func.id}() has no argument {keyword.arg!r}"
                )
