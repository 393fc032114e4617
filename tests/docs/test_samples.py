"""Command output shown in the docs is what the command prints (see tests/docs/samples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.samples import (
    ROOT,
    Mode,
    Sample,
    SampleError,
    all_samples,
    find_samples,
    mismatch,
    run,
    sample_folder,
)

SAMPLES = all_samples()


def test_the_cli_reference_marks_its_samples() -> None:
    marked = {(s.doc.name, s.command, s.mode) for s in SAMPLES}
    assert {
        ("cli.md", "gpufarm synth --tier poc", Mode.EXACT),
        ("cli.md", "gpufarm synth --tier poc --json", Mode.JSON),
        ("cli.md", "gpufarm cost --tier enterprise", Mode.ABRIDGED),
    } <= marked
    assert any(s.command.startswith("gpufarm plan ") and s.mode is Mode.ABRIDGED for s in SAMPLES)


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_sample_is_what_the_command_prints(sample: Sample) -> None:
    with sample_folder() as folder:
        status, output = run(sample, folder)
    assert status == 0, output
    problem = mismatch(sample, output)
    assert problem is None, (
        f"{sample.name} is stale: {problem}\nregenerate with `.venv/bin/python -m tests.docs.samples`"
    )


# --------------------------------------------------------------------------- the checker itself


def _sample(text: str) -> Sample:
    (sample,) = find_samples(ROOT / "docs" / "example.md", text)
    return sample


def test_a_marker_reads_its_mode_command_and_block() -> None:
    sample = _sample("Intro.\n\n<!-- doc-sample abridged: gpufarm cost --tier poc -->\n```text\na\nb\n```\n")
    assert (sample.mode, sample.args, sample.block, sample.line) == (
        Mode.ABRIDGED,
        ["cost", "--tier", "poc"],
        "a\nb\n",
        3,
    )


@pytest.mark.parametrize(
    ("mode", "block", "output", "problem"),
    [
        (Mode.EXACT, "a\nb\n", "a   \nb\n", None),
        (Mode.EXACT, "a\nb\n", "a\nc\n", "the command prints:\na\nc\n"),
        (Mode.EXACT, "a\n", "a\nb\n", "the command prints:\na\nb\n"),
        (Mode.ABRIDGED, "a\nc\n", "a\nb\nc\n", None),
        (
            Mode.ABRIDGED,
            "c\na\n",
            "a\nb\nc\n",
            "line 'a' is not printed (in this order); the command prints:\na\nb\nc\n",
        ),
        (Mode.ABRIDGED, "x\n", "a\n", "line 'x' is not printed (in this order); the command prints:\na\n"),
        (Mode.JSON, '{"a": 1, "b": [2]}\n', '{\n  "b": [2],\n  "a": 1\n}\n', None),
        (Mode.JSON, '{"a": 1}\n', '{"a": 2}\n', 'the JSON differs; the command prints:\n{"a": 2}\n'),
    ],
)
def test_mismatch(mode: Mode, block: str, output: str, problem: str | None) -> None:
    sample = Sample(doc=ROOT / "docs" / "x.md", line=1, mode=mode, command="gpufarm x", block=block, start=0)
    assert mismatch(sample, output) == problem


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "<!-- doc-sample short: gpufarm cost -->\n```text\na\n```\n",
            "example.md:1: doc-sample mode must be one of abridged, json or none, got 'short'",
        ),
        (
            "<!-- doc-sample: aws sts get-caller-identity -->\n```text\na\n```\n",
            "example.md:1: doc-sample must name a gpufarm command, got 'aws sts get-caller-identity'",
        ),
        (
            "<!-- doc-sample: gpufarm cost -->\n\nsome prose\n```text\na\n```\n",
            "example.md: every '<!-- doc-sample[ mode]: gpufarm ... -->' line must be followed directly "
            "by a fenced block",
        ),
    ],
)
def test_an_unusable_marker_is_an_error(text: str, message: str) -> None:
    with pytest.raises(SampleError) as caught:
        find_samples(ROOT / "docs" / "example.md", text)
    assert str(caught.value) == message


def test_samples_run_beside_the_repository_cdk_json() -> None:
    with sample_folder() as folder:
        assert (folder / "cdk.json").read_bytes() == (ROOT / "cdk.json").read_bytes()
        assert folder != Path.cwd()
