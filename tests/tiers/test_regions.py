"""The enterprise tier in two regions: one stack each, Route 53 failover records, the model replica."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cfn_lint_errors
from tests.tiers.billing_walk import costing_gaps
from tests.tiers.conftest import synthesize
from tests.tiers.helpers import default_target_group, only, resources, stateful_logical_ids
from tests.unit.factories import make_enterprise, second_region

PRIMARY = "gpufarm-enterprise"
SECONDARY = "gpufarm-enterprise-us-west-2"
SOURCE_BUCKET = "gpufarm-enterprise-models"
REPLICA_BUCKET = "gpufarm-enterprise-models-us-west-2"


@pytest.fixture(scope="module")
def regions_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The enterprise tier with us-west-2 behind failover records, synthesized (gate passed)."""
    folder = tmp_path_factory.mktemp("regions")
    synthesize([make_enterprise(second_region())], folder)
    return folder


@pytest.fixture(scope="module")
def templates(regions_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        name: json.loads((regions_dir / f"{name}.template.json").read_text()) for name in (PRIMARY, SECONDARY)
    }


def test_one_stack_per_region_the_primary_under_its_own_name(regions_dir: Path) -> None:
    manifest = json.loads((regions_dir / "manifest.json").read_text())
    stacks = {
        k: v["environment"]
        for k, v in manifest["artifacts"].items()
        if v["type"] == "aws:cloudformation:stack"
    }
    assert stacks == {
        PRIMARY: "aws://unknown-account/us-east-1",
        SECONDARY: "aws://unknown-account/us-west-2",
    }


def test_the_primary_keeps_every_stateful_logical_id(
    templates: dict[str, dict[str, Any]], enterprise_template: dict[str, Any]
) -> None:
    # Turning `regions` on adds records and alarms, and replaces nothing of the primary.
    assert stateful_logical_ids(templates[PRIMARY]) == stateful_logical_ids(enterprise_template)
    before = set(enterprise_template["Resources"])
    after = set(templates[PRIMARY]["Resources"])
    assert before <= after
    assert {templates[PRIMARY]["Resources"][i]["Type"] for i in after - before} == {
        "AWS::CloudWatch::Alarm",
        "AWS::Route53::HealthCheck",
        "AWS::Route53::RecordSet",
    }


@pytest.mark.parametrize(
    ("stack", "role", "region"), [(PRIMARY, "PRIMARY", "us-east-1"), (SECONDARY, "SECONDARY", "us-west-2")]
)
def test_each_region_creates_its_failover_record(
    templates: dict[str, dict[str, Any]], stack: str, role: str, region: str
) -> None:
    template = templates[stack]
    _, record = only(template, "AWS::Route53::RecordSet")
    props = record["Properties"]
    assert props["Failover"] == role
    assert props["SetIdentifier"] == region
    assert props["Name"] == "inference.gpufarm.corp."
    assert props["HostedZoneId"] == "Z0123456789ABCDEFGHIJ"
    # The alias is the tier's own load balancer: the one its clients are given.
    lb_id = template["Outputs"]["LoadBalancerDnsName"]["Value"]["Fn::GetAtt"][0]
    assert template["Resources"][lb_id]["Properties"]["Type"] == "application"
    assert props["AliasTarget"]["DNSName"] == {"Fn::GetAtt": [lb_id, "DNSName"]}
    assert props["AliasTarget"]["HostedZoneId"] == {"Fn::GetAtt": [lb_id, "CanonicalHostedZoneID"]}
    check_id, check = only(template, "AWS::Route53::HealthCheck")
    assert props["HealthCheckId"] == {"Fn::GetAtt": [check_id, "HealthCheckId"]}
    config = check["Properties"]["HealthCheckConfig"]
    assert config["Type"] == "CLOUDWATCH_METRIC"
    assert config["AlarmIdentifier"]["Region"] == region
    assert config["InsufficientDataHealthStatus"] == "Unhealthy"


@pytest.mark.parametrize("stack", [PRIMARY, SECONDARY])
def test_the_health_check_follows_the_gateway_readiness(
    templates: dict[str, dict[str, Any]], stack: str
) -> None:
    template = templates[stack]
    _, check = only(template, "AWS::Route53::HealthCheck")
    alarm_id = check["Properties"]["HealthCheckConfig"]["AlarmIdentifier"]["Name"]["Ref"]
    alarm = template["Resources"][alarm_id]["Properties"]
    assert alarm["MetricName"] == "HealthyHostCount"
    assert alarm["Statistic"] == "Minimum"
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)
    assert alarm["TreatMissingData"] == "breaching"
    dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
    # The gateway's target group: the listener's default, whose health check is the gateway's readiness.
    gateway = default_target_group(template)
    assert dimensions["TargetGroup"] == {"Fn::GetAtt": [gateway, "TargetGroupFullName"]}


def test_no_stack_references_the_other(templates: dict[str, dict[str, Any]]) -> None:
    for template in templates.values():
        text = json.dumps(template)
        assert "Fn::ImportValue" not in text
        assert "ExportsWriter" not in text and "ExportsReader" not in text


def test_only_the_secondary_holds_the_model_replica(templates: dict[str, dict[str, Any]]) -> None:
    assert not [
        b
        for b in resources(templates[PRIMARY], "AWS::S3::Bucket").values()
        if "BucketName" in b["Properties"]
    ]
    secondary = templates[SECONDARY]
    named = {
        lid: b
        for lid, b in resources(secondary, "AWS::S3::Bucket").items()
        if "BucketName" in b["Properties"]
    }
    assert len(named) == 1
    bucket_id, bucket = next(iter(named.items()))
    assert bucket["Properties"]["BucketName"] == REPLICA_BUCKET
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["DeletionPolicy"] == "Retain"
    roles = [
        r
        for r in resources(secondary, "AWS::IAM::Role").values()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "s3.amazonaws.com"}
    ]
    assert len(roles) == 1
    output = secondary["Outputs"]["ModelReplicationConfiguration"]
    assert SOURCE_BUCKET in output["Description"]
    value = json.dumps(output["Value"])
    assert bucket_id in value and "ModelReplicaReplicationRole" in value


def test_the_secondary_replication_role_reads_the_source_and_writes_the_replica(
    templates: dict[str, dict[str, Any]],
) -> None:
    policies = [
        p
        for p in resources(templates[SECONDARY], "AWS::IAM::Policy").values()
        if "ModelReplica" in json.dumps(p["Properties"]["Roles"])
    ]
    assert len(policies) == 1
    statements = policies[0]["Properties"]["PolicyDocument"]["Statement"]
    by_action = {a: json.dumps(s["Resource"]) for s in statements for a in s["Action"]}
    assert f':s3:::{SOURCE_BUCKET}/*"' in by_action["s3:GetObjectVersionForReplication"]
    assert f':s3:::{SOURCE_BUCKET}"' in by_action["s3:ListBucket"]
    assert "ModelReplicaBucket" in by_action["s3:ReplicateObject"]


def test_the_secondary_reads_weights_from_its_replica(templates: dict[str, dict[str, Any]]) -> None:
    _, association = only(templates[SECONDARY], "AWS::FSx::DataRepositoryAssociation")
    assert association["Properties"]["DataRepositoryPath"] == f"s3://{REPLICA_BUCKET}/"
    _, primary = only(templates[PRIMARY], "AWS::FSx::DataRepositoryAssociation")
    assert primary["Properties"]["DataRepositoryPath"] == f"s3://{SOURCE_BUCKET}/"


@pytest.mark.parametrize("stack", [PRIMARY, SECONDARY])
def test_every_billed_type_is_priced(templates: dict[str, dict[str, Any]], stack: str) -> None:
    assert costing_gaps(templates[stack]) == []


@pytest.mark.parametrize("stack", [PRIMARY, SECONDARY])
def test_cfn_lint_reports_no_errors(regions_dir: Path, stack: str) -> None:
    assert cfn_lint_errors(regions_dir / f"{stack}.template.json") == []


def test_cost_reads_each_stack_of_the_assembly_in_its_region(regions_dir: Path) -> None:
    from gpufarm.cli.cost import assembly_tiers

    tiers = dict(assembly_tiers(regions_dir))
    assert sorted(tiers) == [PRIMARY, SECONDARY]
    assert tiers[PRIMARY].environment.region == "us-east-1"
    assert tiers[SECONDARY].environment.region == "us-west-2"
    assert tiers[SECONDARY].secondary_region is not None


def test_review_reads_both_templates(regions_dir: Path, enterprise_dir: Path) -> None:
    from gpufarm.review.report import review_paths

    review = review_paths(enterprise_dir, regions_dir)
    by_name = {s.name: s for s in review.stacks}
    assert set(by_name) == {PRIMARY, SECONDARY}
    # Turning regions on replaces nothing in the primary; the secondary is a new stack.
    assert by_name[PRIMARY].critical_replacements == []
    assert by_name[SECONDARY].status != by_name[PRIMARY].status
