"""Every command turns bad input into exit 2 and any other error into exit 1, in one line.

Each case runs the real command line (typer's CliRunner) and asserts the exit status, the whole
message on standard error and that no exception escaped: no traceback, whatever the input.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from botocore.exceptions import EndpointConnectionError
from constructs import Construct
from typer.testing import CliRunner, Result

from gpufarm import app as app_module
from gpufarm.app import STAGING_PREFIX
from gpufarm.aws.preflight import CREDENTIALS_HELP
from gpufarm.cli import _output
from gpufarm.cli.main import app
from gpufarm.config import TierConfig

RUNNER = CliRunner(env={"COLUMNS": "300"})
PLAN = ["--params-b", "8", "--layers", "36", "--kv-heads", "8", "--head-dim", "128"]
PLAN += ["--concurrency", "4", "--target-tokens-per-s", "10"]
BINARY = b"\xff\xfe\x00\x01binary"


@pytest.fixture(autouse=True)
def _whole_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Messages are compared whole (no wrapping); tracebacks only when a test asks for them."""
    monkeypatch.setattr(_output.errors, "soft_wrap", True)
    monkeypatch.delenv("GPUFARM_DEBUG", raising=False)
    yield


def run(*args: str | Path) -> Result:
    return RUNNER.invoke(app, [str(a) for a in args])


def failed(result: Result, status: int) -> list[str]:
    """Standard error's lines without the progress lines, once the exit status and the absence of
    a traceback are checked."""
    assert result.exit_code == status, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.stderr
    return [line for line in result.stderr.splitlines() if not line.endswith(" s)")]


def unwritable_folder() -> tuple[Path, str]:
    """A folder that cannot be created here even as root (sysfs), and the reason the OS gives."""
    target = Path("/sys/gpufarm-test-out")
    try:
        os.mkdir(target)
    except OSError as exc:
        return target, str(exc.strerror)
    os.rmdir(target)
    pytest.skip("/sys is writable here")


# --------------------------------------------------------------------------- the safety net


def test_an_unexpected_error_is_one_line_and_exit_1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(base: Any, head: Any) -> Any:
        raise KeyError("Resources")

    monkeypatch.setattr("gpufarm.review.review_paths", broken)
    assert failed(run("review", tmp_path), 1) == [
        "gpufarm review: internal error: KeyError: 'Resources' "
        "(run again with GPUFARM_DEBUG=1 for the traceback)"
    ]


def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(base: Any, head: Any) -> Any:
        raise KeyError("Resources")

    monkeypatch.setattr("gpufarm.review.review_paths", broken)
    monkeypatch.setenv("GPUFARM_DEBUG", "1")
    result = run("review", tmp_path)
    assert result.exit_code == 1
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert result.stderr.splitlines()[-1].startswith("gpufarm review: internal error: KeyError")


def test_commands_keep_their_names_and_options_once_guarded() -> None:
    result = run("review", "--help")
    assert result.exit_code == 0 and "--output" in result.stdout


# --------------------------------------------------------------------------- synth


def test_synth_out_pointing_at_a_file_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "cdk.out"
    out.write_text("a file")
    assert failed(run("synth", "--tier", "poc", "--out", out), 2) == [
        f"--out {str(out)!r}: is a file, not a folder"
    ]
    assert out.read_text() == "a file"


def test_synth_out_under_a_file_exits_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "cdk.out"
    assert failed(run("synth", "--tier", "poc", "--out", out), 2) == [
        f"--out {str(out)!r}: cannot write to it: Not a directory"
    ]


def test_synth_out_that_cannot_be_created_exits_2() -> None:
    out, reason = unwritable_folder()
    assert failed(run("synth", "--tier", "poc", "--out", out), 2) == [
        f"--out {str(out)!r}: cannot write to it: {reason}"
    ]


def _stack_that_raises(scope: Construct, *, config: TierConfig) -> cdk.Stack:
    cdk.Stack(scope, config.stack_name)
    raise ValueError("'subnets' must name two availability zones, got 1")


def test_synth_construct_error_exits_2_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_module, "GpuFarmStack", _stack_that_raises)
    out = tmp_path / "cdk.out"
    out.mkdir()
    assert failed(run("synth", "--tier", "poc", "--out", out), 2) == [
        "invalid tier 'poc': stack gpufarm-poc: a construct rejected the tier: "
        "'subnets' must name two availability zones, got 1"
    ]
    assert list(out.iterdir()) == []


def test_synth_internal_error_at_synth_exits_1_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stack_with_a_failing_token(scope: Construct, *, config: TierConfig) -> cdk.Stack:
        stack = cdk.Stack(scope, config.stack_name)
        cdk.CfnOutput(stack, "Broken", value=cdk.Lazy.string({"produce": _raise_key_error}))
        return stack

    monkeypatch.setattr(app_module, "GpuFarmStack", stack_with_a_failing_token)
    out = tmp_path / "cdk.out"
    lines = failed(run("synth", "--tier", "poc", "--out", out), 1)
    assert lines[-1].startswith("gpufarm synth: internal error: ")
    assert lines[-1].endswith("(run again with GPUFARM_DEBUG=1 for the traceback)")
    assert list(out.iterdir()) == []
    assert not list(out.glob(f"{STAGING_PREFIX}*"))


def _raise_key_error() -> str:
    raise KeyError("produced")


# --------------------------------------------------------------------------- plan


def test_plan_write_pointing_at_a_folder_exits_2(tmp_path: Path) -> None:
    assert failed(run("plan", *PLAN, "--write", tmp_path, "--weights", "Qwen/Qwen3-8B"), 2) == [
        f"--write {str(tmp_path)!r}: is a folder; give the tier file's name, such as "
        f"{str(tmp_path / 'tier.yaml')!r}"
    ]


def test_plan_write_into_a_folder_that_cannot_be_written_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _ = unwritable_folder()
    # /sys itself exists and refuses new files: the temporary file of the write fails there.
    target = folder.parent / "tier.yaml"
    safe = ["--public-weights", "--no-fallback"]
    lines = failed(run("plan", *PLAN, "--write", target, "--weights", "Qwen/Qwen3-8B", *safe), 2)
    assert len(lines) == 1
    assert lines[0].startswith(f"--write {str(target)!r}: cannot write it: ")


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--prices", "the price file {path!r} is not UTF-8 text: byte 0 is 0xff"),
        ("--throughput-table", "the throughput table {path!r} is not UTF-8 text: byte 0 is 0xff"),
    ],
)
def test_plan_binary_data_files_exit_2(tmp_path: Path, flag: str, message: str) -> None:
    path = tmp_path / "data.yaml"
    path.write_bytes(BINARY)
    assert failed(run("plan", *PLAN, flag, path), 2) == [message.format(path=str(path))]


# --------------------------------------------------------------------------- preflight and cost: AWS


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials anywhere boto3 looks: environment, files, instance metadata."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_preflight_without_credentials_exits_1(no_aws: None) -> None:
    lines = failed(run("preflight", "--tier", "poc", "--region", "us-east-1"), 1)
    assert lines == [
        "preflight could not run: no usable AWS credentials (Unable to locate credentials); "
        f"{CREDENTIALS_HELP}"
    ]


def test_preflight_with_an_unknown_profile_exits_1(no_aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nope")
    assert failed(run("preflight", "--tier", "poc", "--region", "us-east-1"), 1) == [
        f"preflight could not run: no usable AWS credentials (The config profile (nope) could not be found); "
        f"{CREDENTIALS_HELP}"
    ]


class _Unreachable:
    """A boto3 session whose every client call fails as when AWS cannot be reached."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def client(self, service: str, **kwargs: Any) -> Any:
        url = f"https://{service}.us-east-1.amazonaws.com"

        class Client:
            def __getattr__(self, name: str) -> Any:
                def call(*args: Any, **kwargs: Any) -> Any:
                    raise EndpointConnectionError(endpoint_url=url)

                return call

        return Client()


def test_preflight_when_aws_cannot_be_reached_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("boto3.Session", _Unreachable)
    assert failed(run("preflight", "--tier", "poc", "--region", "us-east-1"), 1) == [
        "preflight could not run: cannot reach AWS: Could not connect to the endpoint URL: "
        '"https://sts.us-east-1.amazonaws.com"'
    ]


def test_cost_live_without_credentials_falls_back_with_one_warning(no_aws: None) -> None:
    result = run("cost", "--tier", "poc", "--live", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        "warning: live prices unavailable (Unable to locate credentials); "
        "using the price table dated 2026-12-02"
    ]


def test_cost_live_with_an_unknown_profile_falls_back(no_aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nope")
    result = run("cost", "--tier", "poc", "--live", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        "warning: live prices unavailable (The config profile (nope) could not be found); "
        "using the price table dated 2026-12-02"
    ]


def test_cost_live_when_aws_cannot_be_reached_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("boto3.Session", _Unreachable)
    result = run("cost", "--tier", "poc", "--live", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [
        'warning: live prices unavailable (Could not connect to the endpoint URL: "https://pricing.us-east-1.'
        'amazonaws.com"); using the price table dated 2026-12-02'
    ]


def test_preflight_binary_template_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(BINARY)
    assert failed(run("preflight", "--tier", "poc", "--region", "us-east-1", "--template", path), 2) == [
        f"--template {path}: not JSON (not UTF-8 text: byte 0 is 0xff)"
    ]


# --------------------------------------------------------------------------- cloud assemblies


def _assembly(folder: Path, manifest: Any, files: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    (folder / "manifest.json").write_bytes(text)
    for name, content in (files or {}).items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    return folder


def _stack(template_file: Any = "s.template.json") -> dict[str, Any]:
    return {"type": "aws:cloudformation:stack", "properties": {"templateFile": template_file}}


BROKEN_MANIFESTS: list[tuple[Any, dict[str, Any], str]] = [
    (BINARY, {}, "manifest.json: not UTF-8 text (byte 0)"),
    ([], {}, "manifest.json must be a JSON object, got an array"),
    ({"artifacts": ["s"]}, {}, "manifest.json 'artifacts' must be an object, got an array"),
    ({"artifacts": {"s": "stack"}}, {}, "manifest.json artifacts.s must be an object, got a string"),
    (
        {"artifacts": {"s": {"type": "aws:cloudformation:stack", "properties": []}}},
        {},
        "manifest.json artifacts.s.properties must be an object, got an array",
    ),
    (
        {"artifacts": {"s": _stack(7)}},
        {},
        "manifest.json artifacts.s.properties.templateFile must be a file name, got a number",
    ),
    (
        {"artifacts": {"s": _stack()}},
        {"s.template.json": ["Resources"]},
        "s.template.json must be a JSON object, got an array",
    ),
    (
        {"artifacts": {"s": _stack()}},
        {"s.template.json": {"Resources": {"Bucket": "AWS::S3::Bucket"}}},
        "s.template.json Resources.Bucket must be an object, got a string",
    ),
]

BROKEN_MANIFEST_IDS = [
    "binary",
    "array",
    "artifacts-list",
    "artifact-string",
    "properties-list",
    "template-file-number",
    "template-array",
    "resource-string",
]


@pytest.mark.parametrize(
    ("manifest", "files", "reason"),
    BROKEN_MANIFESTS,
    ids=BROKEN_MANIFEST_IDS,
)
def test_cost_assembly_of_the_wrong_shape_exits_2(
    tmp_path: Path, manifest: Any, files: dict[str, Any], reason: str
) -> None:
    # One reader (gpufarm.assembly.read_assembly): the same message as `gpufarm review`.
    folder = _assembly(tmp_path / "cdk.out", manifest, files)
    assert failed(run("cost", "--assembly", folder), 2) == [_unreadable(folder, reason)]


@pytest.mark.parametrize(
    ("manifest", "files", "reason"),
    BROKEN_MANIFESTS,
    ids=BROKEN_MANIFEST_IDS,
)
def test_review_assembly_of_the_wrong_shape_exits_2(
    tmp_path: Path, manifest: Any, files: dict[str, Any], reason: str
) -> None:
    folder = _assembly(tmp_path / "cdk.out", manifest, files)
    assert failed(run("review", folder), 2) == [f"gpufarm review: {_unreadable(folder, reason)}"]


def _unreadable(folder: Path, reason: str) -> str:
    """The reader's message for a BROKEN_MANIFESTS reason."""
    if reason.startswith("manifest.json"):
        why = reason.removeprefix("manifest.json").lstrip(": ")
        return f"cannot read {str(folder / 'manifest.json')!r}: {why}"
    file, _, why = reason.partition(" ")
    return f"cannot read the template of 's' ({str(folder / file)!r}): {why}"


def test_a_nested_assembly_that_leads_back_exits_2(tmp_path: Path) -> None:
    loop = {"artifacts": {"again": {"type": "cdk:cloud-assembly", "properties": {"directoryName": "."}}}}
    folder = _assembly(tmp_path / "cdk.out", loop)
    assert failed(run("review", folder), 2) == [
        f"gpufarm review: {str(folder / '.')!r}: a nested assembly leads back to a folder already read"
    ]
    assert failed(run("cost", "--assembly", folder), 2) == [
        f"{str(folder / '.')!r}: a nested assembly leads back to a folder already read"
    ]


def test_review_output_pointing_at_a_folder_exits_2(tmp_path: Path) -> None:
    folder = _assembly(
        tmp_path / "cdk.out", {"artifacts": {"s": _stack()}}, {"s.template.json": {"Resources": {}}}
    )
    assert failed(run("review", folder, "--output", tmp_path), 2) == [
        f"gpufarm review: cannot write {str(tmp_path)!r}: Is a directory"
    ]


@pytest.mark.parametrize(
    ("flag", "what"),
    [("--prices", "the price file"), ("--throughput-table", "the throughput table")],
)
def test_plan_data_files_that_are_not_yaml_exit_2_in_one_line(tmp_path: Path, flag: str, what: str) -> None:
    path = tmp_path / "data.yaml"
    path.write_text("ec2: [\n")
    assert failed(run("plan", *PLAN, flag, path), 2) == [
        f"{what} {str(path)!r} is not valid YAML at line 2, column 1: "
        "expected the node content, but found '<stream end>'"
    ]


def test_one_set_of_exit_codes_serves_the_app_and_the_commands() -> None:
    from gpufarm import debug

    assert (debug.EXIT_OK, debug.EXIT_CHECK_FAILED, debug.EXIT_BAD_INPUT) == (0, 1, 2)
    for module in (app_module, _output):
        assert "EXIT_BAD_INPUT = " not in Path(str(module.__file__)).read_text()
        assert (module.EXIT_OK, module.EXIT_CHECK_FAILED, module.EXIT_BAD_INPUT) == (0, 1, 2)
