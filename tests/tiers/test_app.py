"""The CDK app and CLI entry points: exit codes, messages, offline synth."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

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
            "(public traffic is served over HTTPS only), got None",
        ),
        (
            "extends: poc\nclustr: {}\n",
            "  - clustr: is not a known setting (allowed: name, description, removal_policy, "
            "termination_protection, compliance_packs, environment, network, cluster, karpenter, "
            "node_pools, node_groups, serving, models, model_store, ingress, fallback, autoscaling, "
            "observability)",
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
        "invalid tier selection:\n  - tier: must be one of 'enterprise', 'poc', 'production', got 'staging'"
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
    subnets = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::Subnet"]
    assert {s["Properties"]["AvailabilityZone"] for s in subnets} == {"us-east-1a", "us-east-1b"}
    assert not (REPO / "cdk.context.json").exists(), "synth must not cache looked-up context"
    # The gate is cdk-nag (and cfn-lint in `make synth`), not aws-cdk-lib's built-in validator,
    # which the app turns off: it only warns and costs 2 s a synth (ADR 0028).
    report = json.loads((out / "validation-report.json").read_text())
    assert "CloudFormation Validate" not in [r["pluginName"] for r in report["pluginReports"]]
