"""Generated `gpufarm` command lines end with exit status 0, 1 or 2 and a message, never a traceback.

The invocations are built from the commands' own parameters (read from the typer app), so
an option added to a command is generated without a change here: flags on or off, numbers from
inside and outside their ranges or not numbers at all, files that exist, are folders, are empty,
are binary, are another encoding, or are missing, and odd strings.

Offline: what a command would do over the network is replaced, so only the argument parsing
and the config paths run. `synth` stops where it would start building stacks (a synth costs
seconds; tests/property/test_tier_documents.py synthesizes a few valid tiers); `preflight`'s
AWS calls and `cost --live`'s price queries are refused as if AWS were unreachable.
"""

from __future__ import annotations

import os
import tempfile
import typing
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import event, given, note, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpufarm.aws.stack import CREDENTIALS_HELP
from gpufarm.cli import _output
from gpufarm.cli.main import app
from gpufarm.config.loader import preset_names
from tests.property.conftest import examples
from tests.property.model_strategies import ODD_STRINGS

COMMAND: Any = typer.main.get_command(app)
COMMANDS = sorted(COMMAND.commands)


class ReachedSynthesisError(Exception):
    """`gpufarm synth` got past its arguments and the tier selection to building the stacks."""


REACHED: list[bool] = []
"""Appended to when synth reaches the stacks (the command may catch and report the exception)."""


FILES: dict[str, bytes | None] = {
    # name -> content (None: a folder; absent from the folder: a missing file)
    "tier.yaml": b"extends: poc\n",
    "typo.yaml": b"extends: poc\nclustr: {}\n",
    "empty.yaml": b"",
    "list.yaml": b"- a\n- b\n",
    "broken.yaml": b"extends: poc\nname: [unclosed\n",
    "unknown-preset.yaml": b"extends: nowhere\n",
    "crlf.yaml": b"extends: poc\r\ndescription: windows\r\n",
    "bom.yaml": b"\xef\xbb\xbfextends: poc\n",
    "utf16.yaml": "extends: poc\n".encode("utf-16"),
    "latin1.yaml": b"extends: poc\ndescription: caf\xe9\n",
    "binary.yaml": bytes(range(256)),
    "duplicate.yaml": b"extends: poc\ndescription: a\ndescription: b\n",
    "prices.yaml": b"ec2: {}\n",
    "manifest-list/manifest.json": b"[]",
    "manifest-bad/manifest.json": b"{not json",
    "folder": None,
    "empty-assembly": None,
}
MISSING_FILES = ("missing.yaml", "no/such/folder/out")


def _materialize(folder: Path) -> None:
    for name, content in FILES.items():
        path = folder / name
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


NUMBERS = st.sampled_from(
    [
        *("0", "1", "-1", "0.5", "2", "8", "70", "4096", "1e308", "-1e308", "1e-300"),
        *("nan", "inf", "-inf", "99999999999999999999", "abc", "", "1,5", "0x10", " 3"),
    ]
)
WORDS = st.sampled_from(
    [*preset_names(), "fp16", "bf16", "fp8", "int8", "int4", "auto", "us-east-1", "eu-west-1", "nowhere"]
)
PATHS = st.sampled_from([*FILES, *MISSING_FILES, ""])


def _type(param: Any) -> Any:
    annotation = param.type_descriptor.annotation
    return (typing.get_args(annotation) or (annotation,))[0]  # list[str] -> str


def _value(param: Any) -> st.SearchStrategy[str]:
    """Strings for one option or argument, chosen by its declared type."""
    annotation = _type(param)
    if annotation is Path:
        return PATHS
    if annotation in (int, float):
        return NUMBERS
    return st.one_of(WORDS, ODD_STRINGS, NUMBERS)


BASE_LINES = {
    # An invocation of each command that passes its argument checks, to change: most random
    # lines stop at the first check, these reach the later ones (writing files, summing costs,
    # selecting tiers). `review` has no cloud assembly to read offline: its line is refused.
    "synth": ["synth", "--tier", "poc"],
    "plan": [
        *("plan", "--params-b", "8", "--concurrency", "16", "--layers", "32", "--kv-heads", "8"),
        *("--head-dim", "128", "--target-tokens-per-s", "20"),
        *("--weights", "meta-llama/Llama-3.1-8B-Instruct", "--write", "planned.yaml"),
        *("--hf-token-secret", "gpufarm/hf-token", "--bedrock-model-id", "us.meta.llama3-1-8b-instruct-v1:0"),
    ],
    "cost": ["cost", "--tier", "poc"],
    "preflight": ["preflight", "--region", "us-east-1", "--tier", "poc"],
    "review": ["review", "empty-assembly"],
    # The deploy loop needs AWS credentials, which the offline fixture removes: each stops there.
    "deploy": ["deploy", "--tier", "poc"],
    "diff": ["diff", "--tier", "poc"],
    "destroy": ["destroy", "--tier", "poc", "--yes"],
    "status": ["status", "--tier", "poc"],
    "kubeconfig": ["kubeconfig", "--tier", "poc", "--print"],
}


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """`gpufarm <command>`, or a working invocation of it, with some options added (a later one
    replaces an earlier one of the same name) and maybe stray words."""
    name = draw(st.sampled_from(COMMANDS))
    command = COMMAND.commands[name]
    options = [p for p in command.params if p.param_type_name == "option"]
    if draw(st.booleans()):
        argv = list(BASE_LINES[name])
        # Few changes, half of them to an option the line already gives.
        own = [p for p in options if set(p.opts) & set(argv)]
        pool = st.one_of(st.sampled_from(own), st.sampled_from(options)) if own else st.sampled_from(options)
        changes = draw(st.lists(pool, max_size=2))
    else:
        argv = [name]
        changes = draw(st.lists(st.sampled_from(options), max_size=6))
    for param in changes:
        option = draw(st.sampled_from(param.opts))
        argv.append(option)
        if not param.is_flag:
            argv.append(draw(_value(param)))
    for param in command.params:
        if param.param_type_name == "argument" and draw(st.booleans()):
            argv.append(draw(_value(param)))
    if draw(st.integers(0, 9)) == 0:
        argv.append(draw(st.sampled_from(["--nope", "extra", "-x", "--", "--json=yes"])))
    return argv


def _run(argv: list[str]) -> Any:
    """`gpufarm <argv>` in a fresh folder holding the FILES."""
    REACHED.clear()
    with tempfile.TemporaryDirectory() as folder:
        _materialize(Path(folder))
        cwd = Path.cwd()
        os.chdir(folder)
        try:
            return CliRunner().invoke(app, argv)
        finally:
            os.chdir(cwd)


def test_base_lines_pass_their_argument_checks(offline: None) -> None:
    assert sorted(BASE_LINES) == COMMANDS
    outcomes = {}
    for name, argv in BASE_LINES.items():
        result = _run(argv)
        outcomes[name] = (
            "synthesis"
            if REACHED
            else (result.exit_code, result.stderr.splitlines()[-1] if result.exit_code else "")
        )
    assert outcomes == {
        "synth": "synthesis",
        "plan": (0, ""),
        "cost": (0, ""),
        "preflight": (1, "preflight could not run: AWS is not reachable in this test"),
        "review": (
            2,
            "gpufarm review: 'empty-assembly' is not a cloud assembly (no manifest.json); give the "
            "folder `cdk synth` or `gpufarm synth` wrote (cdk.out)",
        ),
        **{
            name: (2, f"no AWS credentials: gpufarm {name} {needs}; {CREDENTIALS_HELP}")
            for name, needs in (
                ("deploy", "runs the CDK CLI against stack gpufarm-poc in us-east-1"),
                ("diff", "runs the CDK CLI against stack gpufarm-poc in us-east-1"),
                ("destroy", "reads and changes stack gpufarm-poc in us-east-1"),
                (
                    "status",
                    "reads CloudFormation, ELBv2, CloudWatch and EKS in us-east-1 (and the cluster's "
                    "Kubernetes API)",
                ),
                ("kubeconfig", "reads CloudFormation and EKS in us-east-1"),
            )
        },
    }


@pytest.fixture(scope="module")
def offline() -> Iterator[None]:
    """No AWS: credentials removed, preflight and live prices refused, synth stopped before stacks."""
    from gpufarm.aws import preflight as aws_preflight
    from gpufarm.aws import pricing as aws_pricing
    from gpufarm.cli import synth as synth_command

    def no_aws(*args: Any, **kwargs: Any) -> Any:
        raise aws_preflight.PreflightError("AWS is not reachable in this test")

    def no_prices(*args: Any, **kwargs: Any) -> Any:
        raise aws_pricing.LivePricingError("AWS is not reachable in this test")

    def stop(*args: Any, **kwargs: Any) -> bool:
        REACHED.append(True)
        raise ReachedSynthesisError

    with pytest.MonkeyPatch.context() as patch:
        for var in [v for v in os.environ if v.startswith("AWS_")]:
            patch.delenv(var)
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        patch.setenv("AWS_CONFIG_FILE", "/nonexistent")
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        patch.setenv("HF_HUB_OFFLINE", "1")  # `plan --hf-config org/model` must not fetch
        patch.setattr(aws_preflight, "run_preflight", no_aws)
        patch.setattr(aws_pricing, "live_prices", no_prices)
        patch.setattr(synth_command, "synthesize", stop)
        patch.setattr(_output.errors, "soft_wrap", True)
        yield


@settings(max_examples=examples(200), deadline=timedelta(seconds=10))
@given(argv=command_lines())
def test_command_line_exits_0_1_or_2_without_a_traceback(offline: None, argv: list[str]) -> None:
    note(repr(argv))
    result = _run(argv)
    if REACHED:
        event("synth reached stack building")
        return
    event(f"{argv[0]} exit {result.exit_code}")
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{argv} raised {result.exception!r}"
    )
    assert result.exit_code in (0, 1, 2), f"{argv} exited {result.exit_code}: {result.output}"
    assert "Traceback" not in result.output
    # The commands turn an exception they did not expect into "internal error" and exit 1:
    # still a bug, which the input should have met as a clear message.
    assert "internal error" not in result.stderr, f"{argv}: {result.stderr}"
    if result.exit_code != 0:
        assert result.stderr.strip(), f"{argv} exited {result.exit_code} with nothing on standard error"


# --------------------------------------------------------------------------- cdk synth -c ...

CONTEXT_TIER_FILES = st.sampled_from(["", " ", *FILES, *MISSING_FILES])
CONTEXT_TIERS = st.one_of(st.just(""), WORDS, ODD_STRINGS)


@settings(max_examples=examples(100), deadline=timedelta(seconds=10))
@given(
    tier=st.one_of(st.none(), CONTEXT_TIERS),
    tier_file=st.one_of(st.none(), CONTEXT_TIER_FILES),
)
def test_cdk_context_selects_tiers_or_exits_2(tier: str | None, tier_file: str | None) -> None:
    """`-c tier=... -c tier_file=...` as `app.py` reads them: tiers, or a ConfigError (exit 2)
    that says what is wrong; every preset only when neither is given."""
    from gpufarm.app import select_tiers
    from gpufarm.config import ConfigError

    context = {k: v for k, v in (("tier", tier), ("tier_file", tier_file)) if v is not None}
    with tempfile.TemporaryDirectory() as folder:
        _materialize(Path(folder))
        cwd = Path.cwd()
        os.chdir(folder)
        try:
            configs = select_tiers(context)
        except ConfigError as exc:
            lines = exc.render().splitlines()
            assert lines[0].startswith("invalid ") and lines[0].endswith(":")
            assert len(lines) > 1 and all(line.startswith("  - ") for line in lines[1:])
            event("rejected")
            return
        finally:
            os.chdir(cwd)
    event("selected")
    if context:
        assert len(configs) == 1 or (tier_file is None and tier in preset_names())
    else:
        assert sorted(c.name for c in configs) == preset_names()
