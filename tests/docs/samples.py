"""Command samples in the docs, tied to the commands that print them.

A fenced block preceded by an HTML comment naming a `gpufarm` command is that command's output:

    <!-- doc-sample: gpufarm synth --tier poc -->
    ```text
    ...what the command prints on standard output...
    ```

The comment may name a mode before the colon:

- `doc-sample` (exact): the block is the whole standard output;
- `doc-sample abridged`: the block's lines appear in the output in the same order, others may be
  left out (a long table cut to the rows the text talks about);
- `doc-sample json`: the block and the output are the same JSON document (formatting is free).

`tests/docs/test_samples.py` runs each command in-process (as `tests/cli` does) in a fresh folder
holding the repository's `cdk.json`, and compares. Only what truly varies is normalized: trailing
spaces of a line (rich pads tables to the terminal width) and that folder's path. To rewrite
every sample from the current commands: `.venv/bin/python -m tests.docs.samples`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
COLUMNS = "100"
"""The terminal width the samples are printed at."""

_MARKER = re.compile(
    r"^<!-- doc-sample(?: (?P<mode>[a-z]+))?: (?P<command>[^\n]*?) -->\n```[a-z]*\n(?P<block>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
_LOOSE_MARKER = re.compile(r"^<!-- doc-sample\b", re.MULTILINE)


class Mode(StrEnum):
    """How a sample is compared with the command's output."""

    EXACT = "exact"
    ABRIDGED = "abridged"
    JSON = "json"


class SampleError(ValueError):
    """A marker the checker cannot use: an unknown mode, a command that is not `gpufarm`, no block."""


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One marked block of one document."""

    doc: Path
    line: int
    mode: Mode
    command: str
    block: str
    start: int
    """Offset of the block's text in the document."""

    @property
    def args(self) -> list[str]:
        """The command's arguments after `gpufarm`."""
        return shlex.split(self.command)[1:]

    @property
    def name(self) -> str:
        """`docs/cli.md:41 gpufarm synth --tier poc`: where the sample is, for test IDs."""
        return f"{self.doc.relative_to(ROOT)}:{self.line} {self.command}"


def find_samples(doc: Path, text: str | None = None) -> list[Sample]:
    """Every marked sample of a document; raises SampleError for a marker the checker cannot use."""
    text = doc.read_text(encoding="utf-8") if text is None else text
    samples = []
    for match in _MARKER.finditer(text):
        mode_name = match["mode"] or Mode.EXACT.value
        line = text.count("\n", 0, match.start()) + 1
        if mode_name not in {m.value for m in Mode}:
            raise SampleError(
                f"{doc.name}:{line}: doc-sample mode must be one of "
                f"{', '.join(m.value for m in Mode if m is not Mode.EXACT)} or none, got {mode_name!r}"
            )
        command = match["command"].strip()
        if shlex.split(command)[:1] != ["gpufarm"]:
            raise SampleError(f"{doc.name}:{line}: doc-sample must name a gpufarm command, got {command!r}")
        samples.append(
            Sample(
                doc=doc,
                line=line,
                mode=Mode(mode_name),
                command=command,
                block=match["block"],
                start=match.start("block"),
            )
        )
    if len(samples) != len(_LOOSE_MARKER.findall(text)):
        raise SampleError(
            f"{doc.name}: every '<!-- doc-sample[ mode]: gpufarm ... -->' line must be followed "
            "directly by a fenced block"
        )
    return samples


def all_samples() -> list[Sample]:
    """The samples of README.md and docs/*.md."""
    return [s for doc in DOCS for s in find_samples(doc)]


def normalize(text: str) -> str:
    """Output without what varies between runs and terminals: trailing spaces of each line."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"


def mismatch(sample: Sample, output: str) -> str | None:
    """Why the sample does not match the output (None when it does)."""
    shown, printed = normalize(sample.block), normalize(output)
    if sample.mode is Mode.JSON:
        try:
            same = json.loads(shown) == json.loads(printed)
        except json.JSONDecodeError as exc:
            return f"not JSON: {exc}"
        return None if same else f"the JSON differs; the command prints:\n{printed}"
    if sample.mode is Mode.ABRIDGED:
        lines = iter(printed.splitlines())
        for wanted in shown.splitlines():
            if not any(line == wanted for line in lines):
                return f"line {wanted!r} is not printed (in this order); the command prints:\n{printed}"
        return None
    return None if shown == printed else f"the command prints:\n{printed}"


@contextmanager
def sample_folder() -> Iterator[Path]:
    """A fresh working folder holding the repository's cdk.json (which synth does not read)."""
    with tempfile.TemporaryDirectory(prefix="doc-sample-") as folder:
        shutil.copy(ROOT / "cdk.json", folder)
        yield Path(folder)


def run(sample: Sample, folder: Path) -> tuple[int, str]:
    """Exit status and standard output of the sample's command, run in-process in `folder`.

    `gpufarm synth` without `--out` writes to `<folder>/cdk.out`, given as an absolute path (the
    CDK's Node process keeps the working folder it started in), and `<folder>/` is taken out of
    the output, so it reads as the default `cdk.out`.
    """
    from typer.testing import CliRunner

    from gpufarm.cli.main import app

    args = sample.args
    if args[:1] == ["synth"] and "--out" not in args:
        args = [*args, "--out", str(folder / "cdk.out")]
    here = Path.cwd()
    os.chdir(folder)
    try:
        result = CliRunner(env={"COLUMNS": COLUMNS, "NO_COLOR": "1"}).invoke(app, args)
    finally:
        os.chdir(here)
    return result.exit_code, result.stdout.replace(f"{folder}/", "")


def rewrite(doc: Path) -> bool:
    """Replace each exact or JSON sample of `doc` with the command's output; True when it changed.

    Abridged samples are left alone: which lines to keep is an author's choice.
    """
    text = doc.read_text(encoding="utf-8")
    out = text
    for sample in reversed(find_samples(doc, text)):
        if sample.mode is Mode.ABRIDGED:
            continue
        with sample_folder() as folder:
            status, output = run(sample, folder)
        if status != 0:
            raise SampleError(f"{sample.name}: exited with {status}:\n{output}")
        new = normalize(output)
        if sample.mode is Mode.JSON and json.loads(new) == json.loads(normalize(sample.block)):
            continue
        out = out[: sample.start] + new + out[sample.start + len(sample.block) :]
    if out != text:
        doc.write_text(out, encoding="utf-8")
    return out != text


if __name__ == "__main__":
    for path in DOCS:
        if rewrite(path):
            print(f"rewrote {path.relative_to(ROOT)}")
