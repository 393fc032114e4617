"""Every relative link of the README and docs/ reaches a file, and its #anchor a heading there.

Anchors follow GitHub's rule: the heading in lower case, punctuation other than '-' and '_'
dropped, spaces as '-', and '-1', '-2', ... for repeats. Links inside code blocks are not links.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(doc: Path) -> set[str]:
    """The anchors GitHub gives the headings of `doc`."""
    seen: Counter[str] = Counter()
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", doc.read_text(encoding="utf-8")), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return out


def links() -> list[tuple[str, Path, str]]:
    found = []
    for doc in DOCS:
        text = FENCE.sub("", doc.read_text(encoding="utf-8"))
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            found.append((f"{doc.relative_to(ROOT)} -> {target}", doc, target))
    return found


LINKS = links()


def test_the_readme_links_to_the_pages_its_prose_moved_to() -> None:
    targets = {target for name, _, target in LINKS if name.startswith("README.md ")}
    assert {"docs/getting-started.md", "docs/calling-a-model.md", "docs/compliance.md"} <= targets


@pytest.mark.parametrize(("doc", "target"), [(d, t) for _, d, t in LINKS], ids=[n for n, _, _ in LINKS])
def test_a_relative_link_reaches_its_file_and_heading(doc: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (doc.parent / path).resolve() if path else doc
    assert file.exists(), f"{doc.relative_to(ROOT)} links to {target}, which does not exist"
    if anchor and file.suffix == ".md":
        assert anchor in anchors(file), f"{doc.relative_to(ROOT)} links to {target}: no such heading"
