"""Amazon Route 53: what ChangeResourceRecordSets and CreateHealthCheck refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str, ref_target
from gpufarm.deploy_rules.shapes import resource, value_at

RECORD_SET = "AWS::Route53::RecordSet"
HEALTH_CHECK = "AWS::Route53::HealthCheck"
ALARM = "AWS::CloudWatch::Alarm"

_RECORD_SET_API = "https://docs.aws.amazon.com/Route53/latest/APIReference/API_ResourceRecordSet.html"
_ALARM_IDENTIFIER = "https://docs.aws.amazon.com/Route53/latest/APIReference/API_AlarmIdentifier.html"

ROUTING_PROPERTIES = (
    "Failover",
    "Region",
    "Weight",
    "GeoLocation",
    "GeoProximityLocation",
    "MultiValueAnswer",
)
"""Properties that make a record one of several of a name and type (not simple routing)."""

SET_IDENTIFIER_MAX = 128
FAILOVER_VALUES = ("PRIMARY", "SECONDARY")
ALARM_STATISTICS = ("Average", "Minimum", "Maximum", "Sum", "SampleCount")
STANDARD_RESOLUTION_SECONDS = 60


def _routing_needs_set_identifier(res: Resource, template: Template) -> Iterator[str]:
    routed = [p for p in ROUTING_PROPERTIES if res.prop(p) is not None]
    ident = res.prop("SetIdentifier")
    text = literal_str(ident)
    if routed and ident is None:
        yield f"sets {', '.join(routed)} but no SetIdentifier"
    elif text is not None and not 1 <= len(text) <= SET_IDENTIFIER_MAX:
        yield f"SetIdentifier is {len(text)} characters; Route 53 allows 1-{SET_IDENTIFIER_MAX}"


def _failover_value(res: Resource, template: Template) -> Iterator[str]:
    value = literal_str(res.prop("Failover"))
    if value is not None and value not in FAILOVER_VALUES:
        yield f"Failover {value!r} is not one of {', '.join(FAILOVER_VALUES)}"


def _alias_without_ttl(res: Resource, template: Template) -> Iterator[str]:
    if res.prop("AliasTarget") is None:
        return
    for prop in ("TTL", "ResourceRecords"):
        if res.prop(prop) is not None:
            yield f"an alias record sets {prop}; Route 53 takes the alias target's instead"


def _alarm_supported(res: Resource, template: Template) -> Iterator[str]:
    target = ref_target(value_at(res, ("HealthCheckConfig", "AlarmIdentifier", "Name")))
    alarm = template.get(target)
    if alarm is None or alarm.type != ALARM:
        return
    if alarm.prop("Metrics") is not None:
        yield f"alarm {alarm.logical_id} uses metric math (Metrics); Route 53 reads single-metric alarms"
    if alarm.prop("ExtendedStatistic") is not None:
        yield f"alarm {alarm.logical_id} uses an extended statistic; Route 53 does not support them"
    statistic = literal_str(alarm.prop("Statistic"))
    if statistic is not None and statistic not in ALARM_STATISTICS:
        yield f"alarm {alarm.logical_id} uses statistic {statistic!r}; allowed: {', '.join(ALARM_STATISTICS)}"
    period = literal_int(alarm.prop("Period"))
    if period is not None and period < STANDARD_RESOLUTION_SECONDS:
        yield (
            f"alarm {alarm.logical_id} has a {period}-second period (high resolution); Route 53 reads "
            "standard-resolution alarms"
        )


_ALIAS: dict[str, Any] = {
    "DNSName": "lb.example.net",
    "HostedZoneId": "Z35SXDOTRQ7X7K",
    "EvaluateTargetHealth": False,
}
_ALARM_ID = {"Name": {"Ref": "A"}, "Region": "us-east-1"}


def _alarm(**properties: Any) -> dict[str, Any]:
    base = {
        "ComparisonOperator": "LessThanThreshold",
        "EvaluationPeriods": 2,
        "Threshold": 1,
        "Namespace": "AWS/ApplicationELB",
        "MetricName": "HealthyHostCount",
        "Period": 60,
        "Statistic": "Minimum",
    }
    return resource(ALARM, **{**base, **properties})


def _check(**config: Any) -> dict[str, Any]:
    return resource(HEALTH_CHECK, HealthCheckConfig={"Type": "CLOUDWATCH_METRIC", **config})


RULES: tuple[Rule, ...] = (
    # ResourceRecordSet, SetIdentifier: "Resource record sets that have a routing policy other than
    # simple: An identifier that differentiates among multiple resource record sets that have the
    # same combination of name and type"; "Length Constraints: Minimum length of 1. Maximum
    # length of 128."
    Rule(
        id="R53-RECORD-SET-IDENTIFIER",
        resource_type=RECORD_SET,
        title="A failover, latency or weighted record has a SetIdentifier of 1-128 characters",
        doc_url=_RECORD_SET_API,
        check=_routing_needs_set_identifier,
        bad={"R": resource(RECORD_SET, Name="a.corp.", Type="A", Failover="PRIMARY", AliasTarget=_ALIAS)},
        good={
            "R": resource(
                RECORD_SET,
                Name="a.corp.",
                Type="A",
                Failover="PRIMARY",
                SetIdentifier="us-east-1",
                AliasTarget=_ALIAS,
            )
        },
    ),
    # ResourceRecordSet, Failover: "Valid Values: PRIMARY | SECONDARY".
    Rule(
        id="R53-RECORD-FAILOVER",
        resource_type=RECORD_SET,
        title="A failover record is PRIMARY or SECONDARY",
        doc_url=_RECORD_SET_API,
        check=_failover_value,
        bad={"R": resource(RECORD_SET, Failover="primary", SetIdentifier="a", AliasTarget=_ALIAS)},
        good={"R": resource(RECORD_SET, Failover="PRIMARY", SetIdentifier="a", AliasTarget=_ALIAS)},
    ),
    # ResourceRecordSet, TTL: "If you're creating or updating an alias resource record set, omit
    # TTL. Amazon Route 53 uses the value of TTL for the alias target"; ResourceRecords: "If you're
    # creating an alias resource record set, omit ResourceRecords."
    Rule(
        id="R53-RECORD-ALIAS-TTL",
        resource_type=RECORD_SET,
        title="An alias record has no TTL and no ResourceRecords",
        doc_url=_RECORD_SET_API,
        check=_alias_without_ttl,
        bad={"R": resource(RECORD_SET, Name="a.corp.", Type="A", TTL="60", AliasTarget=_ALIAS)},
        good={"R": resource(RECORD_SET, Name="a.corp.", Type="A", AliasTarget=_ALIAS)},
    ),
    # AlarmIdentifier, Name: "Route 53 supports CloudWatch alarms with the following features:
    # Standard-resolution metrics. High-resolution metrics aren't supported. Statistics: Average,
    # Minimum, Maximum, Sum, and SampleCount. Extended statistics aren't supported." (and the
    # alarm is of one metric: its MetricName/Statistic are what the page describes).
    Rule(
        id="R53-HEALTH-CHECK-ALARM",
        resource_type=HEALTH_CHECK,
        title="An alarm health check reads a standard-resolution, single-metric alarm of a basic statistic",
        doc_url=_ALARM_IDENTIFIER,
        check=_alarm_supported,
        bad={
            "A": _alarm(Period=10, Statistic=None, ExtendedStatistic="p99"),
            "H": _check(AlarmIdentifier=_ALARM_ID),
        },
        good={
            "A": _alarm(),
            "H": _check(AlarmIdentifier=_ALARM_ID, InsufficientDataHealthStatus="Unhealthy"),
        },
    ),
)
