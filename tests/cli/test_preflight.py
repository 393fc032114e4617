"""`gpufarm preflight`: exit codes, messages, the table and the `--json` document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from gpufarm.aws import preflight as preflight_module
from gpufarm.aws.preflight import ACCOUNT_CHECKS, Check, CheckResult, PreflightError, PreflightReport, Status
from gpufarm.cli.main import app
from gpufarm.config import TierConfig

runner = CliRunner(env={"COLUMNS": "300"})


def run(*args: str) -> Result:
    return runner.invoke(app, ["preflight", *args])


def said(text: str) -> str:
    """Text with its line wrapping undone."""
    return " ".join(text.split())


def report_with(*statuses: Status) -> PreflightReport:
    return PreflightReport(
        tier="poc",
        region="us-east-1",
        account="123456789012",
        results=tuple(
            CheckResult(
                check=Check.QUOTA,
                subject=f"row {i}",
                status=status,
                message=f"{status.value} message",
                fix="raise the quota" if status is Status.FAIL else "",
            )
            for i, status in enumerate(statuses)
        ),
    )


class CannedChecks:
    """Stands in for the AWS checks: returns `outcome` (or raises it) and records the calls."""

    def __init__(self) -> None:
        self.outcome: PreflightReport | Exception = report_with(Status.PASS, Status.WARN)
        self.calls: list[tuple[str, str]] = []
        self.templates: list[dict[str, Any] | None] = []

    def __call__(
        self, tier: TierConfig, *, region: str, template: dict[str, Any] | None = None
    ) -> PreflightReport:
        self.calls.append((tier.name, region))
        self.templates.append(template)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> CannedChecks:
    """The AWS checks replaced by a canned report."""
    canned = CannedChecks()
    monkeypatch.setattr(preflight_module, "run_preflight", canned)
    return canned


def test_passing_checks_exit_0_with_a_table(checks: CannedChecks) -> None:
    result = run("--tier", "poc", "--region", "us-east-1")
    assert (result.exit_code, checks.calls) == (0, [("poc", "us-east-1")])
    assert "Preflight: tier poc in us-east-1 (account 123456789012)" in said(result.stdout)
    assert "preflight passed: 1 pass, 1 warn, 0 fail" in said(result.stdout)


def test_a_failed_check_exits_1(checks: CannedChecks) -> None:
    checks.outcome = report_with(Status.PASS, Status.FAIL)
    result = run("--tier", "poc", "--region", "us-east-1")
    assert result.exit_code == 1
    assert "preflight failed: 1 pass, 0 warn, 1 fail" in said(result.stdout)
    assert "raise the quota" in result.stdout


def test_json_prints_the_report(checks: CannedChecks) -> None:
    checks.outcome = report_with(Status.FAIL)
    result = run("--tier", "poc", "--region", "us-east-1", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "tier": "poc",
        "region": "us-east-1",
        "region_source": "--region",
        "account": "123456789012",
        "ok": False,
        "counts": {"pass": 0, "warn": 0, "fail": 1},
        "results": [
            {
                "check": "vcpu-quota",
                "subject": "row 0",
                "status": "fail",
                "message": "fail message",
                "fix": "raise the quota",
            }
        ],
    }


def test_missing_credentials_exit_1_after_the_offline_checks(checks: CannedChecks) -> None:
    checks.outcome = PreflightError("no usable AWS credentials (Unable to locate credentials)")
    result = run("--tier", "poc", "--region", "us-east-1")
    assert (result.exit_code, said(result.stderr)) == (
        1,
        "preflight could not run: no usable AWS credentials (Unable to locate credentials)",
    )
    # The tier's own checks ran; each check that needs the account says so.
    # Every check that calls AWS is one skip (gpufarm.aws.preflight.ACCOUNT_CHECKS).
    skipped = len(ACCOUNT_CHECKS)
    assert (
        f"preflight failed: 0 pass, 0 warn, 1 fail, {skipped} need an account (region from --region)"
        in said(result.stdout)
    )
    assert "not run: needs an AWS account (no usable AWS credentials (Unable to locate credentials))" in (
        said(result.stdout)
    )


def test_missing_credentials_still_print_a_json_document(checks: CannedChecks) -> None:
    checks.outcome = PreflightError("no usable AWS credentials (Unable to locate credentials)")
    result = run("--tier", "poc", "--region", "us-east-1", "--json")
    data = json.loads(result.stdout)
    assert (result.exit_code, data["ok"], data["account"], data["counts"]) == (
        1,
        False,
        "",
        {"pass": 0, "warn": 0, "fail": 1, "skip": len(ACCOUNT_CHECKS)},
    )
    assert (
        data["error"] == "preflight could not run: no usable AWS credentials (Unable to locate credentials)"
    )
    assert [r["check"] for r in data["results"] if r["status"] == "skip"] == [
        "vcpu-quota", "instance-offering", "capacity-reservation", "bedrock", "bedrock-access",
        "kubernetes-version", "network-quota", "certificate", "model-bucket", "hf-token-secret",
        "cdk-bootstrap", "image-cache", "hybrid-gateway",
    ]  # fmt: skip


OWN_TIER = "extends: poc\nname: mine\ncluster:\n  public_access_cidrs: [10.20.0.0/16]\n"
"""The poc with its documentation range replaced: the offline checks pass."""


def test_offline_runs_only_the_tier_checks(checks: CannedChecks, tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(OWN_TIER)
    result = run("--tier-file", str(tmp_path / "t.yaml"), "--offline", "--json")
    data = json.loads(result.stdout)
    assert (result.exit_code, checks.calls, data["region"], data["region_source"]) == (
        0,
        [],
        "us-east-1",
        "the tier's environment.region",
    )
    assert data["counts"] == {"pass": 1, "warn": 0, "fail": 0, "skip": len(ACCOUNT_CHECKS)}
    assert data["results"][1]["message"] == "not run: needs an AWS account (--offline)"


def test_the_region_comes_from_the_tier(checks: CannedChecks, tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        OWN_TIER + "environment:\n  region: us-west-2\n  availability_zones: [us-west-2a, us-west-2b]\n"
    )
    result = run("--tier-file", str(tmp_path / "t.yaml"))
    assert (result.exit_code, checks.calls) == (0, [("mine", "us-west-2")])
    assert "(region from the tier's environment.region)" in said(result.stdout)


def test_aws_region_serves_a_tier_that_sets_none(
    checks: CannedChecks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpufarm.cli.preflight import region_for
    from gpufarm.config import load_preset
    from gpufarm.config.model import EnvironmentConfig

    # A tier whose environment leaves the region to its default.
    bare = load_preset("poc").model_copy(update={"environment": EnvironmentConfig()})
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    assert region_for(None, bare) == ("eu-central-1", "AWS_REGION")
    assert region_for("us-west-2", bare) == ("us-west-2", "--region")
    monkeypatch.delenv("AWS_REGION")
    assert region_for(None, bare) == ("us-east-1", "the tier's default environment.region")


def test_a_bad_aws_region_exits_2(checks: CannedChecks, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufarm.cli.preflight import _RefusedError, region_for
    from gpufarm.config import load_preset
    from gpufarm.config.model import EnvironmentConfig

    monkeypatch.setenv("AWS_REGION", "moon-1")
    with pytest.raises(_RefusedError) as refused:
        region_for(None, load_preset("poc").model_copy(update={"environment": EnvironmentConfig()}))
    assert str(refused.value) == "AWS_REGION must be an AWS region name such as 'us-east-1', got 'moon-1'"


def test_bad_input_with_json_still_prints_a_document(checks: CannedChecks) -> None:
    result = run("--tier", "nope", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "ok": False,
        "exit_status": 2,
        "error": "invalid tier selection:\n  - tier: must be one of 'ec2-poc', 'enterprise', 'poc', "
        "'production', 'sagemaker-poc', got 'nope'",
        "results": [],
    }


def test_a_tier_file_is_loaded(checks: CannedChecks, tmp_path: Path) -> None:
    tier_file = tmp_path / "tier.yaml"
    tier_file.write_text("extends: poc\nname: mine\n")
    result = run("--tier-file", str(tier_file), "--region", "eu-west-1")
    assert (result.exit_code, checks.calls) == (0, [("mine", "eu-west-1")])


def test_a_template_is_handed_to_the_checks(checks: CannedChecks, tmp_path: Path) -> None:
    template = {"Resources": {"Vpc": {"Type": "AWS::EC2::VPC", "Properties": {}}}}
    (tmp_path / "t.json").write_text(json.dumps(template))
    result = run("--tier", "poc", "--region", "us-east-1", "--template", str(tmp_path / "t.json"))
    assert (result.exit_code, checks.templates) == (0, [template])


def test_without_a_template_the_checks_get_none(checks: CannedChecks) -> None:
    result = run("--tier", "poc", "--region", "us-east-1")
    assert (result.exit_code, checks.templates) == (0, [None])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--template {path}: cannot read the file: No such file or directory"),
        (
            "{not json",
            "--template {path}: not JSON (Expecting property name enclosed in double quotes at line 1)",
        ),
        (
            '{"AWSTemplateFormatVersion": "2010-09-09"}',
            "--template {path}: must be a synthesized CloudFormation template with a 'Resources' mapping "
            "(such as cdk.out/gpufarm-poc.template.json)",
        ),
        (
            "[]",
            "--template {path}: must be a synthesized CloudFormation template with a 'Resources' mapping "
            "(such as cdk.out/gpufarm-poc.template.json)",
        ),
    ],
)
def test_a_bad_template_exits_2(
    checks: CannedChecks, tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "template.json"
    if content is not None:
        path.write_text(content)
    result = run("--tier", "poc", "--region", "us-east-1", "--template", str(path))
    assert (result.exit_code, said(result.stderr), checks.calls) == (2, message.format(path=path), [])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--region", "us-east-1"],
            "give the tier to check: --tier NAME (a preset) or --tier-file PATH",
        ),
        (
            ["--tier", "poc", "--tier-file", "x.yaml", "--region", "us-east-1"],
            "give either --tier or --tier-file, not both (got --tier poc and --tier-file x.yaml)",
        ),
        (
            ["--tier", "poc", "--region", "virginia"],
            "--region must be an AWS region name such as 'us-east-1', got 'virginia'",
        ),
        (
            ["--tier-file", "no-such-tier.yaml", "--region", "us-east-1"],
            "invalid no-such-tier.yaml: - cannot read the file: No such file or directory",
        ),
        (
            ["--tier", "nope", "--region", "us-east-1"],
            "invalid tier selection: - tier: must be one of 'ec2-poc', 'enterprise', 'poc', 'production', "
            "'sagemaker-poc', got 'nope'",
        ),
    ],
)
def test_bad_input_exits_2_with_its_message(checks: CannedChecks, args: list[str], message: str) -> None:
    result = run(*args)
    assert (result.exit_code, said(result.stderr), checks.calls) == (2, message, [])


def test_end_to_end_against_moto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The command with the real checks: moto and stubs from the AWS tests stand in for the account."""
    from datetime import UTC, datetime

    from moto import mock_aws

    from tests.aws.test_network_quotas import SMALL
    from tests.aws.test_preflight import (
        NOW,
        POC_PROFILE,
        AwsStubs,
        account_ready,
        add_network_quotas,
        add_profile,
        add_quota,
        add_versions,
        version,
    )

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    real = preflight_module.run_preflight
    with mock_aws():
        aws = AwsStubs()
        add_quota(aws, "L-DB2E81BA", 4)
        add_profile(aws, POC_PROFILE, ["us-east-1"])
        add_versions(
            aws,
            version("1.35", "STANDARD_SUPPORT", default=True, standard_end=datetime(2027, 1, 1, tzinfo=UTC)),
        )
        add_network_quotas(aws)
        account_ready(aws)
        monkeypatch.setattr(
            preflight_module,
            "run_preflight",
            lambda tier, *, region, template: real(
                tier, region=region, session=aws, now=NOW, template=template
            ),
        )
        (tmp_path / "poc.json").write_text(json.dumps(SMALL))
        result = run(
            "--tier", "poc", "--region", "us-east-1", "--json", "--template", str(tmp_path / "poc.json")
        )
    data = json.loads(result.stdout)
    assert (result.exit_code, data["ok"], data["counts"]) == (1, False, {"pass": 17, "warn": 1, "fail": 2})
    # The poc's example range for the public endpoint is a documentation range: its row fails first.
    assert data["results"][0] == {
        "check": "placeholder",
        "subject": "cluster.public_access_cidrs[0]",
        "status": "fail",
        "message": "'198.51.100.0/24' is a documentation value (RFC 5737 TEST-NET-2, 198.51.100.0/24); "
        "the stack refuses to deploy",
        "fix": "set cluster.public_access_cidrs[0] to your own value",
    }
    assert data["results"][1]["message"] == (
        "4 vCPUs, but the models at their most replicas need 8 (pool l40s: 1 x g6e.2xlarge)"
    )
    assert [r for r in data["results"] if r["check"] == "network-quota"][-1] == {
        "check": "network-quota",
        "subject": "Security groups per network interface (L-2AFB9258)",
        "status": "pass",
        "message": "limit 5, in use 0, needed 2: security groups on NodeTemplate",
        "fix": "",
        "quota": {
            "name": "Security groups per network interface",
            "code": "L-2AFB9258",
            "limit": 5,
            "in_use": 0,
            "needed": 2,
        },
    }
