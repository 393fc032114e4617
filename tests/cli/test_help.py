"""`gpufarm --version`, and help that names values in words rather than Python types."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufarm.cli.main import app

runner = CliRunner(env={"COLUMNS": "120"})


def test_version_prints_the_installed_package_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"gpufarm {version('gpufarm')}\n")


def test_the_console_script_answers_version() -> None:
    script = Path(sys.executable).with_name("gpufarm")
    if not script.is_file():
        pytest.skip(f"the gpufarm console script is not installed beside {sys.executable}")
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"gpufarm {version('gpufarm')}\n", "")


@pytest.mark.parametrize(
    ("command", "option", "shown"),
    [
        ("cost", "--tier", "TEXT"),
        ("cost", "--tier-file", "PATH"),
        ("cost", "--commitment", "TEXT"),  # repeatable: was <list[str]>
        ("cost", "--busy-share", "NUMBER"),
        ("cost", "--capacity-block-days", "INTEGER"),
        ("cost", "--json", ""),  # a flag takes no value: was <bool>
        ("cost", "--help", ""),
        ("synth", "--tier", "TEXT"),
        ("plan", "--write", "PATH"),
        ("review", "--json", ""),
    ],
)
def test_help_names_each_value_in_words(command: str, option: str, shown: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    (line,) = [line for line in result.stdout.splitlines() if re.search(rf"│ {re.escape(option)}\s", line)]
    after = line.split(option, 1)[1].split()
    assert after[0] == shown if shown else after[0] not in {"TEXT", "PATH", "<bool>"}
    assert not re.search(r"<(?:bool|str|int|float|path|list\[[a-z]+\])>", result.stdout)


def test_the_arguments_of_review_show_their_names_not_their_type() -> None:
    result = runner.invoke(app, ["review", "--help"])
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("│") and "BASE_OR_DIR" in line]
    assert "<path>" not in line
    assert "The base cloud assembly" in line


def test_the_command_list_flows_each_description() -> None:
    """The docstring's own line breaks no longer break the list of commands mid-sentence."""
    result = runner.invoke(app, ["--help"])
    raw = result.stdout.splitlines()
    start = next(i for i, line in enumerate(raw) if line.startswith("│ synth "))
    entry = [raw[start]]
    for line in raw[start + 1 :]:
        if not line.startswith("│   "):  # the next command, or the panel's end
            break
        entry.append(line)
    text = " ".join(" ".join(line.strip("│ ").split()) for line in entry)
    # The docstring breaks after "each stack:"; the list wraps only where the width ends.
    assert "and summarize each stack: resources, GPUs by capacity type" in text
    assert not any(line.rstrip("│ ").endswith("summarize each stack:") for line in raw)
