"""RegionalRecord (a region's health-checked record) and ModelReplica (the model bucket's replica)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from gpufarm.config.model import LoadBalancerKind, Routing
from gpufarm.constructs.model_replica import ModelReplica, replication_configuration
from gpufarm.constructs.regional_record import RegionalRecord
from tests.constructs.helpers import new_stack


def _record(routing: Routing, *, primary: bool, kind: LoadBalancerKind, topic: str | None) -> dict[str, Any]:
    stack = new_stack("RecordTest")
    RegionalRecord(
        stack,
        "DnsRecord",
        dns_name="inference.gpufarm.corp",
        hosted_zone_id="Z0123456789ABCDEFGHIJ",
        routing=routing,
        primary=primary,
        region="eu-west-1",
        kind=kind,
        load_balancer_dns_name="lb.eu-west-1.elb.amazonaws.com",
        load_balancer_zone_id="Z32O12XQLNTSW2",
        load_balancer_full_name="net/lb/0123",
        gateway_target_group="targetgroup/gw/0123",
        evaluation_minutes=3,
        alarm_topic_arn=topic,
    )
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def _only(template: dict[str, Any], type_: str) -> dict[str, Any]:
    (found,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == type_]
    return found


def test_latency_routing_names_the_region_and_no_failover_role() -> None:
    template = _record(Routing.LATENCY, primary=True, kind=LoadBalancerKind.NLB, topic=None)
    record = _only(template, "AWS::Route53::RecordSet")
    assert record["Region"] == "eu-west-1"
    assert "Failover" not in record
    assert record["SetIdentifier"] == "eu-west-1"
    assert record["AliasTarget"] == {
        "DNSName": "lb.eu-west-1.elb.amazonaws.com",
        "HostedZoneId": "Z32O12XQLNTSW2",
        "EvaluateTargetHealth": False,
    }


def test_the_alarm_reads_the_load_balancer_kind_s_namespace_over_the_evaluation() -> None:
    template = _record(Routing.FAILOVER, primary=False, kind=LoadBalancerKind.NLB, topic=None)
    alarm = _only(template, "AWS::CloudWatch::Alarm")
    assert alarm["Namespace"] == "AWS/NetworkELB"
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (3, 3)
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {
        "LoadBalancer": "net/lb/0123",
        "TargetGroup": "targetgroup/gw/0123",
    }
    # Without the tier's alarm topic the alarm notifies nobody: Route 53 reads its state.
    assert "AlarmActions" not in alarm
    assert _only(template, "AWS::Route53::RecordSet")["Failover"] == "SECONDARY"


def test_the_alarm_notifies_the_tier_s_topic_when_there_is_one() -> None:
    topic = "arn:aws:sns:eu-west-1:123456789012:alarms"
    alarm = _only(
        _record(Routing.FAILOVER, primary=True, kind=LoadBalancerKind.ALB, topic=topic),
        "AWS::CloudWatch::Alarm",
    )
    assert alarm["Namespace"] == "AWS/ApplicationELB"
    assert (alarm["AlarmActions"], alarm["OKActions"]) == ([topic], [topic])


@pytest.fixture(scope="module")
def replica() -> dict[str, Any]:
    stack = new_stack("ReplicaTest")
    ModelReplica(stack, "ModelReplica", source_bucket="acme-models", bucket_name="acme-models-west")
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def test_the_replica_is_versioned_retained_and_expires_old_versions(replica: dict[str, Any]) -> None:
    (bucket,) = [r for r in replica["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    props = bucket["Properties"]
    assert props["BucketName"] == "acme-models-west"
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LifecycleConfiguration"]["Rules"] == [
        {"NoncurrentVersionExpiration": {"NoncurrentDays": 30}, "Status": "Enabled"}
    ]
    assert bucket["DeletionPolicy"] == "Retain"


def test_the_role_is_assumed_by_s3(replica: dict[str, Any]) -> None:
    (role,) = [r for r in replica["Resources"].values() if r["Type"] == "AWS::IAM::Role"]
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "s3.amazonaws.com"}


def test_the_configuration_replicates_every_key_and_keeps_deleted_models() -> None:
    config = replication_configuration(
        role_arn="arn:role", replica_bucket_arn="arn:aws:s3:::acme-models-west"
    )
    (rule,) = config["Rules"]  # type: ignore[misc]
    assert config["Role"] == "arn:role"
    assert rule["Filter"] == {"Prefix": ""} and rule["Status"] == "Enabled"
    assert rule["DeleteMarkerReplication"] == {"Status": "Disabled"}
    assert rule["Destination"] == {"Bucket": "arn:aws:s3:::acme-models-west"}
