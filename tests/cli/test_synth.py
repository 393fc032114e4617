"""`gpufarm synth`: the poc tier synthesized once for the module, exit codes, --json, the gates."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from gpufarm.cli import _output
from gpufarm.cli import synth as synth_command
from gpufarm.cli.main import app
from gpufarm.config import load_preset
from gpufarm.estimate import gpu_capacity, monthly_cost

RUNNER = CliRunner()


@pytest.fixture(autouse=True)
def _whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages are compared whole: standard error does not wrap at a non-terminal's 80 columns."""
    monkeypatch.setattr(_output.errors, "soft_wrap", True)


def _messages(result: Result) -> list[str]:
    """Standard error without the progress lines (each step's 'done (1.2 s)' line)."""
    return [line for line in result.stderr.splitlines() if not line.endswith(" s)")]


@pytest.fixture(scope="module")
def poc_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, Path]:
    """`gpufarm synth --tier poc --json` into a fresh folder (the module's one synthesis), on a
    day when the poc's Kubernetes 1.35 has just entered EKS extended support."""
    out = tmp_path_factory.mktemp("synth") / "cdk.out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gpufarm.app.today", lambda: dt.date(2027, 3, 27))
        return RUNNER.invoke(app, ["synth", "--tier", "poc", "--out", str(out), "--json"]), out


@pytest.fixture(scope="module")
def poc_doc(poc_run: tuple[Result, Path]) -> dict[str, Any]:
    """The JSON summary of the poc run."""
    result, _ = poc_run
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture(scope="module")
def poc_stack(poc_doc: dict[str, Any]) -> dict[str, Any]:
    """The poc stack's entry in the summary."""
    (stack,) = poc_doc["stacks"]
    assert isinstance(stack, dict)
    return stack


def test_synth_of_a_clean_tier_exits_0(poc_doc: dict[str, Any]) -> None:
    assert poc_doc["ok"] is True


def test_the_template_is_written_to_the_out_folder(
    poc_run: tuple[Result, Path], poc_stack: dict[str, Any]
) -> None:
    _, out = poc_run
    assert (poc_stack["stack"], poc_stack["template"]) == (
        "gpufarm-poc",
        str(out / "gpufarm-poc.template.json"),
    )


def test_resources_are_counted_from_the_template(poc_stack: dict[str, Any]) -> None:
    template = json.loads(Path(poc_stack["template"]).read_text())
    assert poc_stack["resources"] == len(template["Resources"])


def test_gpus_by_capacity_type_come_from_the_estimate(poc_stack: dict[str, Any]) -> None:
    assert poc_stack["gpus"] == gpu_capacity(load_preset("poc"))


def test_the_monthly_cost_is_the_estimate_total(poc_stack: dict[str, Any]) -> None:
    assert poc_stack["monthly_cost_usd"] == round(monthly_cost(load_preset("poc")).total_usd, 2)


def test_the_ceiling_cost_is_the_estimate_at_peak(poc_stack: dict[str, Any]) -> None:
    assert poc_stack["ceiling_monthly_cost_usd"] == round(monthly_cost(load_preset("poc")).peak_total_usd, 2)


def test_the_compliance_gate_passed(poc_stack: dict[str, Any]) -> None:
    assert poc_stack["nag"] == {"status": "passed", "findings": []}


def test_cfn_lint_passed(poc_stack: dict[str, Any]) -> None:
    assert poc_stack["cfn_lint"] == {"status": "passed", "errors": []}


def test_a_tier_in_extended_support_is_warned_about_and_still_passes(poc_run: tuple[Result, Path]) -> None:
    result, _ = poc_run
    assert result.exit_code == 0
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning: gpufarm-poc: Kube")]
    assert warning.startswith(
        "warning: gpufarm-poc: Kubernetes 1.35 is in EKS extended support (standard support ended 2027-03-27"
    )


def test_a_documentation_value_is_warned_about_by_field(poc_run: tuple[Result, Path]) -> None:
    result, _ = poc_run
    assert result.exit_code == 0
    assert [
        line for line in result.stderr.splitlines() if line.startswith("warning: gpufarm-poc: cluster")
    ] == [
        "warning: gpufarm-poc: cluster.public_access_cidrs[0] = '198.51.100.0/24' is a documentation value "
        "(RFC 5737 TEST-NET-2, 198.51.100.0/24): replace it before deploying"
    ]


def test_progress_is_shown_per_tier_on_stderr(poc_run: tuple[Result, Path]) -> None:
    result, _ = poc_run
    assert "built gpufarm-poc" in result.stderr
    assert "linted gpufarm-poc.template.json" in result.stderr


def test_the_table_summarizes_each_stack(
    poc_run: tuple[Result, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = poc_run
    summaries = synth_command.summarize([load_preset("poc")], out, findings=[], lint=False)
    synth_command._print(summaries, out)
    gpus = gpu_capacity(load_preset("poc"))
    row = next(line for line in capsys.readouterr().out.splitlines() if "gpufarm-poc" in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    assert cells == [
        "gpufarm-poc",
        str(summaries[0].resources),
        f"{gpus['reserved']} / {gpus['on-demand']} / {gpus['spot']}",
        f"{monthly_cost(load_preset('poc')).total_usd:,.0f}",  # the floor, in whole dollars
        f"{monthly_cost(load_preset('poc')).peak_total_usd:,.0f}",  # the ceiling
        "passed",
        "skipped",
    ]


# --------------------------------------------------------------------------- failed gates (exit 1)


def _failing_synth(configs: list[Any], outdir: Path, context: dict[str, Any]) -> bool:
    """Write a `gpufarm-poc` stack holding a bucket that breaks two AwsSolutions rules."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    from gpufarm.constructs import enable_compliance_checks

    cdk_app = cdk.App(context=context, outdir=str(outdir))
    enable_compliance_checks(cdk_app)
    s3.Bucket(cdk.Stack(cdk_app, "gpufarm-poc"), "Offending")
    try:
        cdk_app.synth()
    except RuntimeError as exc:
        assert "ValidationFailed" in str(exc)
        return False
    return True


def test_unacknowledged_findings_exit_1_and_are_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(synth_command, "synthesize", _failing_synth)
    result = RUNNER.invoke(app, ["synth", "--tier", "poc", "--out", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert (
        f"compliance gate failed for gpufarm-poc: 2 cdk-nag finding(s) not acknowledged "
        f"(see {tmp_path / 'validation-report.json'}):"
    ) in lines
    assert {line.split(":")[0] for line in lines if line.startswith("  - AwsSolutions")} == {
        "  - AwsSolutions-S1 at gpufarm-poc/Offending/Resource",
        "  - AwsSolutions-S10 at gpufarm-poc/Offending/Resource",
    }


def test_unacknowledged_findings_are_in_the_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synth_command, "synthesize", _failing_synth)
    result = RUNNER.invoke(app, ["synth", "--tier", "poc", "--out", str(tmp_path), "--json"])
    (stack,) = json.loads(result.stdout)["stacks"]
    assert stack["nag"]["status"] == "failed"
    assert sorted(f["rule"] for f in stack["nag"]["findings"]) == ["AwsSolutions-S1", "AwsSolutions-S10"]


def test_cfn_lint_errors_exit_1_and_are_listed(
    poc_run: tuple[Result, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out = poc_run
    monkeypatch.setattr(synth_command, "synthesize", lambda configs, outdir, context: True)
    monkeypatch.setattr(
        synth_command,
        "lint_template",
        lambda template, region: [synth_command.LintError(rule="E3012", message="bad type", line=7)],
    )
    result = RUNNER.invoke(app, ["synth", "--tier", "poc", "--out", str(out), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["stacks"][0]["cfn_lint"] == {
        "status": "failed",
        "errors": [{"rule": "E3012", "message": "bad type", "line": 7}],
    }
    assert result.stderr.splitlines()[-2:] == [
        f"cfn-lint found 1 error(s) in {out / 'gpufarm-poc.template.json'}:",
        "  - E3012 (line 7): bad type",
    ]


def test_a_startup_timeout_shorter_than_the_load_is_warned_about(
    poc_run: tuple[Result, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import yaml

    from gpufarm.config import load_tier_file
    from gpufarm.core.cold_start import cold_start_warnings

    _, out = poc_run
    monkeypatch.setattr(synth_command, "synthesize", lambda configs, outdir, context: True)
    monkeypatch.setattr(synth_command, "lint_template", lambda template, region: [])
    model = {**load_preset("poc").models[0].model_dump(mode="json", exclude_none=True)}
    model.update(weights_gib=16, startup_timeout_seconds=60)
    file = tmp_path / "poc.yaml"
    file.write_text(yaml.safe_dump({"extends": "poc", "models": [model]}), encoding="utf-8")
    (expected,) = cold_start_warnings(load_tier_file(file))
    assert expected.startswith("models[0].startup_timeout_seconds: 60 s is shorter than 'qwen3-8b''s")
    result = RUNNER.invoke(app, ["synth", "--tier-file", str(file), "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert f"warning: gpufarm-poc: {expected}" in result.stderr.splitlines()


def test_without_cfn_lint_the_templates_are_not_linted_and_synth_passes(
    poc_run: tuple[Result, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out = poc_run
    monkeypatch.setattr(synth_command, "synthesize", lambda configs, outdir, context: True)
    monkeypatch.setattr(synth_command, "cfn_lint_installed", lambda: False)
    result = RUNNER.invoke(app, ["synth", "--tier", "poc", "--out", str(out), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["stacks"][0]["cfn_lint"]["status"] == "skipped"
    assert (
        "warning: cfn-lint is not installed (a dev dependency: pip install 'gpufarm[dev]'); "
        "templates were not linted"
    ) in result.stderr.splitlines()


def test_lint_template_is_none_when_cfn_lint_cannot_be_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "cfnlint.api", None)
    assert synth_command.lint_template(tmp_path / "x.template.json", "us-east-1") is None


# --------------------------------------------------------------------------- bad input (exit 2)


def _bad(args: list[str]) -> Result:
    result = RUNNER.invoke(app, ["synth", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return result


def test_an_unknown_tier_exits_2(tmp_path: Path) -> None:
    result = _bad(["--tier", "staging", "--out", str(tmp_path)])
    assert _messages(result) == [
        "invalid tier selection:",
        "  - tier: must be one of 'ec2-poc', 'enterprise', 'poc', 'production', "
        "'sagemaker-poc', got 'staging'",
    ]


def test_tier_and_tier_file_together_exit_2(tmp_path: Path) -> None:
    result = _bad(["--tier", "poc", "--tier-file", "x.yaml", "--out", str(tmp_path)])
    assert _messages(result) == [
        "invalid command line:",
        "  - give either --tier or --tier-file, not both (got --tier poc and --tier-file x.yaml); "
        "a tier file can start with `extends: poc`",
    ]


def test_an_invalid_tier_file_exits_2_with_the_loader_message(tmp_path: Path) -> None:
    file = tmp_path / "mine.yaml"
    file.write_text(
        "extends: poc\nmodels:\n  - name: big\n    weights: meta-llama/Llama-3.1-70B-Instruct\n"
        "    gpus: 3\n    bedrock: none\n"
    )
    result = _bad(["--tier-file", str(file), "--out", str(tmp_path / "out")])
    assert _messages(result) == [
        f"invalid {file}:",
        "  - models[0].gpus: must be one of 1, 2, 4, 8 (the tensor-parallel size), got 3",
    ]
    assert not (tmp_path / "out").exists()


def test_a_missing_tier_file_exits_2(tmp_path: Path) -> None:
    result = _bad(["--tier-file", str(tmp_path / "none.yaml"), "--out", str(tmp_path)])
    assert _messages(result) == [
        f"invalid {tmp_path / 'none.yaml'}:",
        "  - cannot read the file: No such file or directory",
    ]


# --------------------------------------------------------------------------- helpers


def test_nag_findings_keep_failed_packs_and_drop_annotations(tmp_path: Path) -> None:
    report = {
        "pluginReports": [
            {
                "pluginName": "Construct Annotations",
                "conclusion": "success",
                "violations": [
                    {
                        "ruleName": "Annotation::x",
                        "severity": "warning",
                        "violatingConstructs": [{"constructPath": "a"}],
                    }
                ],
            },
            {
                "pluginName": "AwsSolutions",
                "conclusion": "failure",
                "violations": [
                    {
                        "ruleName": "AwsSolutions-IAM5",
                        "description": "wildcard",
                        "severity": "error",
                        "violatingConstructs": [{"constructPath": "gpufarm-poc/Role/Resource"}],
                    }
                ],
            },
        ]
    }
    (tmp_path / "validation-report.json").write_text(json.dumps(report))
    assert synth_command.nag_findings(tmp_path) == [
        synth_command.NagFinding(
            plugin="AwsSolutions",
            rule="AwsSolutions-IAM5",
            path="gpufarm-poc/Role/Resource",
            description="wildcard",
        )
    ]


def test_no_validation_report_means_no_findings(tmp_path: Path) -> None:
    assert synth_command.nag_findings(tmp_path) == []
