"""`gpufarm status`, `gpufarm kubeconfig` and `gpufarm destroy` on the command line: exit codes and
messages, against moto (and, for destroy, the real synthesis and a fake `cdk` on PATH)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml
from typer.testing import CliRunner, Result

from gpufarm.cli import _output
from gpufarm.cli.main import app
from tests.aws.test_deploy_loop import (
    REGION,
    RecordedCluster,
    deploy_stack,
    launch,
    make_cluster,
    moto_account,
)
from tests.cli.test_deploy import install_fake_cdk, recorded

RUNNER = CliRunner()
CREDENTIALS_HELP = (
    "configure credentials for the tier's account (aws configure, AWS_PROFILE, or aws sso login)"
)


@pytest.fixture(autouse=True)
def _whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_output.errors, "soft_wrap", True)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.Session]:
    with moto_account(monkeypatch) as session:
        yield session


@pytest.fixture
def fake_cdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return install_fake_cdk(tmp_path, monkeypatch)


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_cdk: Path) -> Iterator[None]:
    """No credentials anywhere boto3 looks: environment, files, container or instance role (set up
    after the fake `cdk`, whose fixture gives the other tests credentials)."""
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield


def errors_of(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if not line.endswith(" s)")]


# --------------------------------------------------------------------------- without credentials: exit 2


@pytest.mark.parametrize(
    ("command", "needs"),
    [
        (
            "status",
            "gpufarm status reads CloudFormation, ELBv2, CloudWatch and EKS in us-east-1 "
            "(and the cluster's Kubernetes API)",
        ),
        ("kubeconfig", "gpufarm kubeconfig reads CloudFormation and EKS in us-east-1"),
    ],
)
def test_without_credentials_says_what_is_needed(command: str, needs: str, no_credentials: None) -> None:
    result = RUNNER.invoke(app, [command, "--tier", "poc"])
    assert result.exit_code == 2
    assert errors_of(result) == [f"no AWS credentials: {needs}; {CREDENTIALS_HELP}"]


@pytest.mark.parametrize("command", ["deploy", "diff"])
def test_deploy_and_diff_without_credentials_stop_before_the_gates(
    command: str, fake_cdk: Path, no_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gpufarm.cli.synth.gate", lambda *a, **k: pytest.fail("the gates ran"))
    result = RUNNER.invoke(app, [command, "--tier", "poc"])
    assert result.exit_code == 2
    assert errors_of(result) == [
        f"no AWS credentials: gpufarm {command} runs the CDK CLI against stack gpufarm-poc in us-east-1; "
        f"{CREDENTIALS_HELP}"
    ]
    assert not fake_cdk.exists()


def test_destroy_without_credentials_stops_before_synthesis(no_credentials: None, fake_cdk: Path) -> None:
    result = RUNNER.invoke(app, ["destroy", "--tier", "poc", "--yes"])
    assert result.exit_code == 2
    assert errors_of(result) == [
        "no AWS credentials: gpufarm destroy reads and changes stack gpufarm-poc in us-east-1; "
        f"{CREDENTIALS_HELP}"
    ]
    assert not fake_cdk.exists()


def test_destroy_asks_and_refuses_without_a_terminal(fake_cdk: Path) -> None:
    # CliRunner's standard input is not a terminal: no one could answer the question.
    result = RUNNER.invoke(app, ["destroy", "--tier", "poc"])
    assert result.exit_code == 2
    assert errors_of(result) == ["gpufarm destroy asks for confirmation: run it in a terminal, or pass --yes"]
    assert not fake_cdk.exists()


@pytest.mark.parametrize("command", ["status", "kubeconfig", "destroy"])
def test_each_needs_exactly_one_tier(command: str) -> None:
    result = RUNNER.invoke(app, [command, "--yes"] if command == "destroy" else [command])
    verb = {"status": "show", "kubeconfig": "connect to", "destroy": "destroy"}[command]
    assert result.exit_code == 2
    assert errors_of(result) == [f"give the tier to {verb}: --tier NAME (a preset) or --tier-file PATH"]


# --------------------------------------------------------------------------- status


def test_status_of_a_missing_stack_is_exit_1(aws: boto3.Session) -> None:
    result = RUNNER.invoke(app, ["status", "--tier", "poc", "--no-kubernetes"])
    assert result.exit_code == 1
    assert errors_of(result) == ["stack gpufarm-poc does not exist in us-east-1"]


def test_status_json_of_a_deployed_stack(aws: boto3.Session) -> None:
    deploy_stack(aws)
    result = RUNNER.invoke(app, ["status", "--tier", "poc", "--no-kubernetes", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["stack"]["status"] == "CREATE_COMPLETE"
    assert [t["logical_id"] for t in document["target_groups"]] == [
        "IngressDefaultRouteTargetGroupDE3500E4",
        "IngressQwen38bTargetGroupE7485DAF",
    ]
    assert document["node_pools"] is None
    assert document["kubernetes_note"] == "not read (--no-kubernetes)"


def test_status_table(aws: boto3.Session) -> None:
    deploy_stack(aws)
    result = RUNNER.invoke(app, ["status", "--tier", "poc", "--no-kubernetes"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "gpufarm-poc in us-east-1: CREATE_COMPLETE"
    assert (
        "fallback share, last 15 min: no gateway requests (0 Bedrock invocations, 0 gateway requests)"
        in lines
    )


# --------------------------------------------------------------------------- kubeconfig


def test_kubeconfig_print_is_the_clusters_entry(aws: boto3.Session) -> None:
    deploy_stack(aws)
    make_cluster(aws)
    result = RUNNER.invoke(app, ["kubeconfig", "--tier", "poc", "--print"])
    assert result.exit_code == 0, result.output
    entry = yaml.safe_load(result.stdout)
    arn = f"arn:aws:eks:{REGION}:123456789012:cluster/gpufarm-poc"
    assert entry["current-context"] == arn
    assert entry["users"][0]["user"]["exec"]["args"][-2:] == ["--cluster-name", "gpufarm-poc"]


def test_kubeconfig_merges_into_the_file(aws: boto3.Session, tmp_path: Path) -> None:
    deploy_stack(aws)
    make_cluster(aws)
    config = tmp_path / "kube" / "config"
    config.parent.mkdir()
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kind-dev", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "contexts": [{"name": "kind-dev", "context": {"cluster": "kind-dev", "user": "kind-dev"}}],
                "users": [{"name": "kind-dev", "user": {}}],
                "current-context": "kind-dev",
            }
        )
    )
    result = RUNNER.invoke(app, ["kubeconfig", "--tier", "poc", "--kubeconfig", str(config)])
    assert result.exit_code == 0, result.output
    merged = yaml.safe_load(config.read_text())
    arn = f"arn:aws:eks:{REGION}:123456789012:cluster/gpufarm-poc"
    assert [c["name"] for c in merged["clusters"]] == ["kind-dev", arn]
    assert merged["current-context"] == arn
    assert errors_of(result) == [f"wrote context {arn} to {config} (now the current context)"]


def test_kubeconfig_refuses_a_file_that_is_not_a_kubeconfig(aws: boto3.Session, tmp_path: Path) -> None:
    deploy_stack(aws)
    make_cluster(aws)
    config = tmp_path / "config"
    config.write_text("- just\n- a list\n")
    result = RUNNER.invoke(app, ["kubeconfig", "--tier", "poc", "--kubeconfig", str(config)])
    assert result.exit_code == 2
    assert errors_of(result) == [
        f"--kubeconfig {str(config)!r}: must be a kubeconfig (a YAML mapping), got list"
    ]
    assert config.read_text() == "- just\n- a list\n"


def test_kubeconfig_of_a_missing_stack_is_exit_1(aws: boto3.Session) -> None:
    result = RUNNER.invoke(app, ["kubeconfig", "--tier", "poc", "--print"])
    assert result.exit_code == 1
    assert errors_of(result) == ["stack gpufarm-poc does not exist in us-east-1"]


# --------------------------------------------------------------------------- destroy, end to end


def test_destroy_unprotects_runs_cdk_destroy_and_lists_what_is_retained(
    aws: boto3.Session, fake_cdk: Path
) -> None:
    deploy_stack(aws, protected=False)
    # A GPU node Karpenter launched and could not clean up (the fake cdk deletes nothing).
    node = launch(aws, {"kubernetes.io/cluster/gpufarm-poc": "owned"})
    result = RUNNER.invoke(app, ["destroy", "--tier", "poc", "--yes", "--out", "assembly"])
    assert result.exit_code == 0, result.output
    assert recorded(fake_cdk) == ["destroy", "gpufarm-poc", "--app", "assembly", "--force"]
    messages = errors_of(result)
    assert (
        "warning: 1 instance(s) still tagged kubernetes.io/cluster/gpufarm-poc=owned (launched by Karpenter "
        f"or Auto Mode, not deleted with the stack): {node}; terminate them with aws ec2 "
        f"terminate-instances --instance-ids {node}"
    ) in messages
    assert "gpufarm destroy will, in us-east-1:" in messages
    assert "  - cdk destroy gpufarm-poc" in messages
    # The retained security group of the deployed stack is planned for if the deletion stops; the
    # fake cdk succeeded, so it was left alone and is listed with what the template retains.
    template = json.loads((Path("assembly") / "gpufarm-poc.template.json").read_text())
    bucket = next(k for k, v in template["Resources"].items() if v["Type"] == "AWS::S3::Bucket")
    # ADR 0009: the access-log bucket is retained on every tier, the poc's `destroy` policy included.
    assert template["Resources"][bucket]["DeletionPolicy"] == "Retain"
    assert bucket in result.stdout
    assert "Retained after destroying gpufarm-poc" in result.stdout


def test_destroy_of_a_missing_stack_changes_nothing(aws: boto3.Session, fake_cdk: Path) -> None:
    result = RUNNER.invoke(app, ["destroy", "--tier", "poc", "--yes", "--out", "assembly"])
    assert result.exit_code == 0, result.output
    assert errors_of(result)[-1] == "stack gpufarm-poc does not exist in us-east-1: nothing to destroy"
    assert not fake_cdk.exists()


def test_status_reports_a_cluster_it_cannot_describe(aws: boto3.Session) -> None:
    # The stack names a cluster EKS does not know (deleted by hand, say): the AWS parts are shown
    # and the Kubernetes part says why it is missing, instead of failing the command.
    deploy_stack(aws)
    result = RUNNER.invoke(app, ["status", "--tier", "poc", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["node_pools"] is None
    assert document["kubernetes_note"].startswith("eks:DescribeCluster gpufarm-poc: ")
    assert "ResourceNotFoundException" in document["kubernetes_note"]


def test_destroy_answered_no_changes_nothing(
    aws: boto3.Session, fake_cdk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy_stack(aws, protected=True)
    # A terminal that answers "n" to the question.
    monkeypatch.setattr("gpufarm.cli.destroy.can_ask", lambda: True)
    result = RUNNER.invoke(app, ["destroy", "--tier", "poc", "--out", "assembly"], input="n\n")
    assert result.exit_code == 1
    messages = errors_of(result)
    assert "  - turn off termination protection on stack gpufarm-poc" in messages
    # The question (on standard error, answered on standard input), then the outcome.
    assert messages[-1].startswith("Destroy gpufarm-poc? [y/N]:")
    assert messages[-1].endswith("nothing was changed")
    assert not fake_cdk.exists()
    stack = aws.client("cloudformation").describe_stacks(StackName="gpufarm-poc")["Stacks"][0]
    assert stack["EnableTerminationProtection"] is True


def test_status_table_with_the_cluster_read(aws: boto3.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    # The Kubernetes reader answers from recorded `kubectl get -o json` documents.
    deploy_stack(aws)
    monkeypatch.setattr(
        "gpufarm.cli.status.kubernetes_factory", lambda session, region: lambda name: RecordedCluster()
    )
    result = RUNNER.invoke(app, ["status", "--tier", "poc"])
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") >= 4}
    # l40s: two nodes, one Ready; qwen3-8b: two live pods, one Ready, one replica in the tier.
    assert [cell.strip() for cell in rows["l40s"].split("│")[2:4]] == ["1", "2"]
    assert [cell.strip() for cell in rows["qwen3-8b"].split("│")[2:5]] == ["1", "2", "1"]


def test_kubeconfig_of_an_ec2_tier_is_refused_before_any_aws_call() -> None:
    result = RUNNER.invoke(app, ["kubeconfig", "--tier", "ec2-poc", "--print"])
    assert result.exit_code == 2
    assert errors_of(result) == [
        "tier 'ec2-poc' has no EKS cluster (cluster.provisioning: ec2): reach its instances with "
        "Session Manager, `aws ssm start-session --target <instance id>` (docs/ec2.md)"
    ]


def test_kubeconfig_of_a_sagemaker_tier_is_refused_before_any_aws_call() -> None:
    result = RUNNER.invoke(app, ["kubeconfig", "--tier", "sagemaker-poc", "--print"])
    assert result.exit_code == 2
    assert errors_of(result) == [
        "tier 'sagemaker-poc' has no EKS cluster (cluster.provisioning: sagemaker): its models are "
        "inference components of the SageMaker endpoint gpufarm-sagemaker-poc (docs/sagemaker.md)"
    ]
