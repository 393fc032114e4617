"""integ/cleanup.py against moto: what the integration run deletes and what it reports."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integ import cleanup

STACKS = ["gpufarm-integ-poc", "gpufarm-integ-poc-probe", "gpufarm-integ-poc-assert"]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield


def _groups() -> list[str]:
    return sorted(g["logGroupName"] for g in boto3.client("logs").describe_log_groups()["logGroups"])


def test_deletes_the_stacks_out_of_band_log_groups_only(aws: None) -> None:
    logs = boto3.client("logs")
    for name in (
        "/aws/eks/gpufarm-integ-poc/cluster",
        "/aws/lambda/gpufarm-integ-poc-CustomVpcRestrictDefaultSGCust-abc",
        "/aws/lambda/gpufarm-integ-poc-assert-SingletonFunction1488-def",
        "/aws/eks/gpufarm-poc/cluster",
        "/aws/lambda/someone-elses-function",
    ):
        logs.create_log_group(logGroupName=name)

    assert cleanup.main(STACKS) == 0
    assert _groups() == ["/aws/eks/gpufarm-poc/cluster", "/aws/lambda/someone-elses-function"]


def test_reports_instances_the_cluster_still_owns(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    ec2 = boto3.client("ec2")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    tag = {"Key": "kubernetes.io/cluster/gpufarm-integ-poc", "Value": "owned"}
    left = ec2.run_instances(
        ImageId=image,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [tag]}],
    )["Instances"][0]["InstanceId"]
    ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)  # not the cluster's

    assert cleanup.main(STACKS) == 1
    assert f"instances of cluster gpufarm-integ-poc still exist: {left};" in capsys.readouterr().err


def test_needs_a_stack_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cleanup.main([]) == 2
    assert "Usage: `python integ/cleanup.py TIER_STACK [STACK...]`" in capsys.readouterr().err
