"""Elastic Load Balancing v2: rules the ELB API enforces on load balancers, listeners and target groups."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.checks import items, literal_strs, name_check
from gpufarm.deploy_rules.rule import (
    Resource,
    Rule,
    Template,
    key_values,
    literal_int,
    literal_str,
    ref_target,
)

TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"
LOAD_BALANCER = "AWS::ElasticLoadBalancingV2::LoadBalancer"
LISTENER = "AWS::ElasticLoadBalancingV2::Listener"
LISTENER_RULE = "AWS::ElasticLoadBalancingV2::ListenerRule"

_API = "https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/"
_ALB_GUIDE = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/"

_TG_ATTRIBUTES_DOC = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/"
    "edit-target-group-attributes.html#slow-start-mode"
)


def _lor_with_slow_start(resource: Resource, template: Template) -> Iterator[str]:
    # ALB user guide, target group attributes, slow start mode: "You cannot enable both slow
    # start mode and least outstanding requests."
    attributes = key_values(resource.prop("TargetGroupAttributes"))
    algorithm = literal_str(attributes.get("load_balancing.algorithm.type"))
    slow_start = literal_int(attributes.get("slow_start.duration_seconds"))
    if algorithm == "least_outstanding_requests" and slow_start:
        yield (
            f"least_outstanding_requests with slow_start.duration_seconds={slow_start}: the ELB API "
            "refuses slow start together with least outstanding requests; set slow start to 0 or "
            "choose round_robin"
        )


def _attribute_range(key: str, low: int, high: int, *, off: int | None = None) -> Any:
    """A numeric attribute (target group or load balancer) within [low, high] (or equal to `off`)."""

    def check(resource: Resource, _: Template) -> Iterator[str]:
        prop = "TargetGroupAttributes" if resource.type == TARGET_GROUP else "LoadBalancerAttributes"
        value = literal_int(key_values(resource.prop(prop)).get(key))
        if value is not None and value != off and not low <= value <= high:
            allowed = f"{low}-{high}" + (f" (or {off} to turn it off)" if off is not None else "")
            yield f"{key}={value}: the API accepts {allowed}"

    return check


def _target_control_port(resource: Resource, _: Template) -> Iterator[str]:
    # Target optimizer: the target control port is "only applicable for Application Load Balancer
    # target groups when targetType is instance or ip" (the providers' wording of the ALB guide's
    # target-optimizer section; ../shared/AWS-FACTS.md says the same).
    if resource.prop("TargetControlPort") is None:
        return
    protocol = literal_str(resource.prop("Protocol"))
    target_type = literal_str(resource.prop("TargetType")) or "instance"
    if protocol is not None and protocol not in {"HTTP", "HTTPS"}:
        yield f"TargetControlPort on a {protocol} target group: only ALB (HTTP/HTTPS) target groups take one"
    if target_type not in {"instance", "ip"}:
        yield f"TargetControlPort with TargetType {target_type}: only instance and ip target groups take one"


def _anomaly_mitigation(resource: Resource, _: Template) -> Iterator[str]:
    # Automatic target weights: "Target anomaly mitigation is only supported by the
    # weighted_random load balancing algorithm type" (the wording the Terraform AWS provider
    # carries from the ELB documentation).
    attributes = key_values(resource.prop("TargetGroupAttributes"))
    mitigation = literal_str(attributes.get("load_balancing.algorithm.anomaly_mitigation"))
    algorithm = literal_str(attributes.get("load_balancing.algorithm.type")) or "round_robin"
    if mitigation == "on" and algorithm != "weighted_random":
        yield f"anomaly_mitigation=on with algorithm {algorithm}: it needs weighted_random"


def _health_check_timing(resource: Resource, _: Template) -> Iterator[str]:
    # The ELB API answers "Health check interval must be greater than the timeout."
    # (ValidationError; aws/aws-cdk#3703, kubernetes-sigs/aws-load-balancer-controller#2951).
    # For ALB (HTTP/HTTPS) groups equal values are refused too; for NLB groups the CDK lets
    # them be equal (aws/aws-cdk#16446), so only a longer timeout is flagged there.
    interval = literal_int(resource.prop("HealthCheckIntervalSeconds"))
    timeout = literal_int(resource.prop("HealthCheckTimeoutSeconds"))
    if interval is None or timeout is None:
        return
    alb = literal_str(resource.prop("Protocol")) in {"HTTP", "HTTPS"}
    if timeout > interval or (alb and timeout == interval):
        yield f"HealthCheckTimeoutSeconds {timeout} is not below HealthCheckIntervalSeconds {interval}"


_HTTP_CODE = re.compile(r"\d{3}(-\d{3})?")


def _matcher(resource: Resource, _: Template) -> Iterator[str]:
    # API_Matcher: "For Application Load Balancers, you can specify values between 200 and 499
    # ... multiple values (for example, "200,202") or a range of values (for example, "200-299")."
    if literal_str(resource.prop("Protocol")) not in {"HTTP", "HTTPS"}:
        return
    matcher = resource.prop("Matcher")
    code = literal_str(matcher.get("HttpCode")) if isinstance(matcher, dict) else None
    if code is None:
        return
    for part in code.split(","):
        if not _HTTP_CODE.fullmatch(part):
            yield f"Matcher.HttpCode {code!r}: give codes like 200, 200,202 or 200-299"
            return
        low, _dash, high = part.partition("-")
        if not all(200 <= int(c) <= 499 for c in (low, high or low)) or int(high or low) < int(low):
            yield f"Matcher.HttpCode {code!r}: an ALB target group accepts codes 200-499"
            return


def _forward_target_groups(actions: Any) -> Iterator[str]:
    # API_TargetGroupTuple: Weight "Valid Range: Minimum value of 0. Maximum value of 999."
    for action in items(actions):
        config = action.get("ForwardConfig") if isinstance(action, dict) else None
        groups = items(config.get("TargetGroups")) if isinstance(config, dict) else []
        for group in groups:
            weight = literal_int(group.get("Weight")) if isinstance(group, dict) else None
            if weight is not None and not 0 <= weight <= 999:
                yield f"forward weight {weight}: the API accepts 0-999"


def _listener_weights(resource: Resource, _: Template) -> Iterator[str]:
    yield from _forward_target_groups(resource.prop("DefaultActions"))


def _rule_weights(resource: Resource, _: Template) -> Iterator[str]:
    yield from _forward_target_groups(resource.prop("Actions"))


def _listener_key(resource: Resource) -> str | None:
    arn = resource.prop("ListenerArn")
    return ref_target(arn) or literal_str(arn)


def _priority_unique(resource: Resource, template: Template) -> Iterator[str]:
    # API_CreateRule, Priority: "A listener can't have multiple rules with the same priority."
    priority, listener = literal_int(resource.prop("Priority")), _listener_key(resource)
    if priority is None or listener is None:
        return
    for other in template.of_type(LISTENER_RULE):
        if other.logical_id == resource.logical_id:
            return
        if _listener_key(other) == listener and literal_int(other.prop("Priority")) == priority:
            yield f"priority {priority} is already taken on this listener by {other.logical_id}"


PATH_PATTERN_MAX = 128
CONDITION_VALUES_MAX = 5
WILDCARDS_MAX = 5


def _condition_values(condition: Any) -> list[str]:
    if not isinstance(condition, dict):
        return []
    values = literal_strs(condition.get("Values"))
    for config in condition.values():
        if isinstance(config, dict):
            values += literal_strs(config.get("Values"))
    return values


def _path_patterns(resource: Resource, _: Template) -> Iterator[str]:
    # PathPatternConditionConfig: "The maximum length of each string is 128 characters."
    for condition in items(resource.prop("Conditions")):
        if isinstance(condition, dict) and literal_str(condition.get("Field")) == "path-pattern":
            for value in _condition_values(condition):
                if len(value) > PATH_PATTERN_MAX:
                    yield f"path pattern {value[:40]!r}... is {len(value)} characters; max {PATH_PATTERN_MAX}"


def _rule_condition_quota(resource: Resource, _: Template) -> Iterator[str]:
    # ALB quotas (not adjustable): "Condition values per rule: 5", "Condition wildcards per rule: 5".
    values = [v for c in items(resource.prop("Conditions")) for v in _condition_values(c)]
    if len(values) > CONDITION_VALUES_MAX:
        yield f"{len(values)} condition values; a rule takes at most {CONDITION_VALUES_MAX}"
    wildcards = sum(v.count("*") + v.count("?") for v in values)
    if wildcards > WILDCARDS_MAX:
        yield f"{wildcards} wildcards in the conditions; a rule takes at most {WILDCARDS_MAX}"


_ELB_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"


def _lb_not_internal(resource: Resource, _: Template) -> Iterator[str]:
    name = literal_str(resource.prop("Name"))
    if name is not None and name.startswith("internal-"):
        yield f"Name {name!r}: a load balancer name must not begin with 'internal-'"


def _tg(attributes: dict[str, str] | None = None, **props: Any) -> dict[str, object]:
    properties: dict[str, Any] = {
        "Port": 8000,
        "Protocol": "HTTP",
        "TargetType": "ip",
        "VpcId": "vpc-0123456789abcdef0",
    }
    if attributes:
        properties["TargetGroupAttributes"] = [{"Key": k, "Value": v} for k, v in attributes.items()]
    return {"Type": TARGET_GROUP, "Properties": {**properties, **props}}


def _lb(attributes: dict[str, str] | None = None, **props: Any) -> dict[str, object]:
    properties: dict[str, Any] = {
        "Type": "application",
        "Subnets": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    }
    if attributes:
        properties["LoadBalancerAttributes"] = [{"Key": k, "Value": v} for k, v in attributes.items()]
    return {"Type": LOAD_BALANCER, "Properties": {**properties, **props}}


def _forward(weight: int) -> list[dict[str, Any]]:
    return [
        {
            "Type": "forward",
            "ForwardConfig": {
                "TargetGroups": [
                    {"TargetGroupArn": {"Ref": "Blue"}, "Weight": weight},
                    {"TargetGroupArn": {"Ref": "Green"}, "Weight": 1},
                ]
            },
        }
    ]


def _listener(weight: int) -> dict[str, object]:
    return {
        "Type": LISTENER,
        "Properties": {
            "LoadBalancerArn": "arn:aws:elasticloadbalancing:us-east-1:111122223333:loadbalancer/app/a/1",
            "Port": 80,
            "Protocol": "HTTP",
            "DefaultActions": _forward(weight),
        },
    }


def _rule(priority: int = 10, paths: tuple[str, ...] = ("/m/*",), **props: Any) -> dict[str, object]:
    return {
        "Type": LISTENER_RULE,
        "Properties": {
            "ListenerArn": {"Ref": "Https"},
            "Priority": priority,
            "Actions": [{"Type": "forward", "TargetGroupArn": {"Ref": "Tg"}}],
            "Conditions": [{"Field": "path-pattern", "PathPatternConfig": {"Values": list(paths)}}],
            **props,
        },
    }


def _two_conditions(hosts: int) -> list[dict[str, Any]]:
    return [
        {"Field": "path-pattern", "PathPatternConfig": {"Values": ["/a/*", "/b/*", "/c/*"]}},
        {"Field": "host-header", "HostHeaderConfig": {"Values": [f"h{i}.example.com" for i in range(hosts)]}},
    ]


_ELB_NAME_CHECK = name_check(
    "Name",
    max_len=32,
    pattern=_ELB_NAME,
    allowed="only letters, digits and hyphens, not beginning or ending with a hyphen",
)
"""Target group and load balancer names follow the same rule (CreateTargetGroup, CreateLoadBalancer)."""


RULES: tuple[Rule, ...] = (
    Rule(
        id="ELBV2-TG-LOR-SLOW-START",
        resource_type=TARGET_GROUP,
        title="Least outstanding requests and slow start cannot be combined",
        doc_url=_TG_ATTRIBUTES_DOC,
        check=_lor_with_slow_start,
        bad={
            "Tg": _tg(
                {
                    "load_balancing.algorithm.type": "least_outstanding_requests",
                    "slow_start.duration_seconds": "60",
                }
            )
        },
        good={
            "Tg": _tg(
                {
                    "load_balancing.algorithm.type": "least_outstanding_requests",
                    "slow_start.duration_seconds": "0",
                }
            )
        },
    ),
    Rule(
        # API_CreateTargetGroup, Name: "can have a maximum of 32 characters, must contain only
        # alphanumeric characters or hyphens, and must not begin or end with a hyphen."
        id="ELBV2-TG-NAME",
        resource_type=TARGET_GROUP,
        title="Target group name: at most 32 letters, digits and hyphens, no hyphen at either end",
        doc_url=_API + "API_CreateTargetGroup.html",
        check=_ELB_NAME_CHECK,
        bad={"Tg": _tg(Name="gpufarm-production-llama-3-3-70b-data")},
        good={"Tg": _tg(Name="gpufarm-prod-llama-70b")},
    ),
    Rule(
        # API_TargetGroupAttribute: deregistration_delay.timeout_seconds "The range is 0-3600 seconds."
        id="ELBV2-TG-DEREGISTRATION-DELAY",
        resource_type=TARGET_GROUP,
        title="Deregistration delay is 0-3600 seconds",
        doc_url=_API + "API_TargetGroupAttribute.html",
        check=_attribute_range("deregistration_delay.timeout_seconds", 0, 3600),
        bad={"Tg": _tg({"deregistration_delay.timeout_seconds": "7200"})},
        good={"Tg": _tg({"deregistration_delay.timeout_seconds": "3600"})},
    ),
    Rule(
        # API_TargetGroupAttribute: slow_start.duration_seconds "The range is 30-900 seconds
        # (15 minutes). The default is 0 seconds (disabled)."
        id="ELBV2-TG-SLOW-START-RANGE",
        resource_type=TARGET_GROUP,
        title="Slow start is 0 (off) or 30-900 seconds",
        doc_url=_API + "API_TargetGroupAttribute.html",
        check=_attribute_range("slow_start.duration_seconds", 30, 900, off=0),
        bad={"Tg": _tg({"slow_start.duration_seconds": "10"})},
        good={"Tg": _tg({"slow_start.duration_seconds": "30"})},
    ),
    Rule(
        id="ELBV2-TG-ANOMALY-MITIGATION",
        resource_type=TARGET_GROUP,
        title="Anomaly mitigation (automatic target weights) needs the weighted_random algorithm",
        doc_url=_ALB_GUIDE + "edit-target-group-attributes.html#automatic-target-weights",
        check=_anomaly_mitigation,
        bad={"Tg": _tg({"load_balancing.algorithm.anomaly_mitigation": "on"})},
        good={
            "Tg": _tg(
                {
                    "load_balancing.algorithm.type": "weighted_random",
                    "load_balancing.algorithm.anomaly_mitigation": "on",
                }
            )
        },
    ),
    Rule(
        id="ELBV2-TG-TARGET-CONTROL-PORT",
        resource_type=TARGET_GROUP,
        title="A target control port only on ALB (HTTP/HTTPS) target groups of type instance or ip",
        doc_url=_ALB_GUIDE + "load-balancer-target-groups.html#target-optimizer",
        check=_target_control_port,
        bad={"Tg": _tg(Protocol="TCP", TargetControlPort=3000)},
        good={"Tg": _tg(TargetControlPort=3000)},
    ),
    Rule(
        id="ELBV2-TG-HEALTH-CHECK-TIMEOUT",
        resource_type=TARGET_GROUP,
        title="The health-check timeout is shorter than the interval",
        doc_url=_ALB_GUIDE + "target-group-health-checks.html",
        check=_health_check_timing,
        bad={"Tg": _tg(HealthCheckIntervalSeconds=10, HealthCheckTimeoutSeconds=10)},
        good={"Tg": _tg(HealthCheckIntervalSeconds=15, HealthCheckTimeoutSeconds=5)},
    ),
    Rule(
        id="ELBV2-TG-MATCHER",
        resource_type=TARGET_GROUP,
        title="ALB health-check success codes are 200-499, as a code, a list or a range",
        doc_url=_API + "API_Matcher.html",
        check=_matcher,
        bad={"Tg": _tg(Matcher={"HttpCode": "200-599"})},
        good={"Tg": _tg(Matcher={"HttpCode": "200,202-204"})},
    ),
    Rule(
        # API_CreateLoadBalancer, Name: "can have a maximum of 32 characters, must contain only
        # alphanumeric characters or hyphens, must not begin or end with a hyphen, and must not
        # begin with "internal-"."
        id="ELBV2-LB-NAME",
        resource_type=LOAD_BALANCER,
        title="Load balancer name: at most 32 letters, digits and hyphens, no hyphen at either end",
        doc_url=_API + "API_CreateLoadBalancer.html",
        check=_ELB_NAME_CHECK,
        bad={"Lb": _lb(Name="gpufarm_enterprise")},
        good={"Lb": _lb(Name="gpufarm-enterprise")},
    ),
    Rule(
        id="ELBV2-LB-NAME-INTERNAL",
        resource_type=LOAD_BALANCER,
        title="Load balancer name must not begin with internal-",
        doc_url=_API + "API_CreateLoadBalancer.html",
        check=_lb_not_internal,
        bad={"Lb": _lb(Name="internal-gpufarm")},
        good={"Lb": _lb(Name="gpufarm-internal")},
    ),
    Rule(
        # API_LoadBalancerAttribute: idle_timeout.timeout_seconds "The valid range is 1-4000 seconds."
        id="ELBV2-LB-IDLE-TIMEOUT",
        resource_type=LOAD_BALANCER,
        title="ALB idle timeout is 1-4000 seconds",
        doc_url=_API + "API_LoadBalancerAttribute.html",
        check=_attribute_range("idle_timeout.timeout_seconds", 1, 4000),
        bad={"Lb": _lb({"idle_timeout.timeout_seconds": "7200"})},
        good={"Lb": _lb({"idle_timeout.timeout_seconds": "4000"})},
    ),
    Rule(
        id="ELBV2-LISTENER-FORWARD-WEIGHT",
        resource_type=LISTENER,
        title="Forward action weights are 0-999",
        doc_url=_API + "API_TargetGroupTuple.html",
        check=_listener_weights,
        bad={"Listener": _listener(1000)},
        good={"Listener": _listener(999)},
    ),
    Rule(
        id="ELBV2-RULE-FORWARD-WEIGHT",
        resource_type=LISTENER_RULE,
        title="Forward action weights are 0-999",
        doc_url=_API + "API_TargetGroupTuple.html",
        check=_rule_weights,
        bad={"Rule": _rule(Actions=_forward(1000))},
        good={"Rule": _rule(Actions=_forward(0))},
    ),
    Rule(
        id="ELBV2-RULE-PRIORITY-UNIQUE",
        resource_type=LISTENER_RULE,
        title="Listener rule priorities are unique per listener",
        doc_url=_API + "API_CreateRule.html",
        check=_priority_unique,
        bad={"A": _rule(10, ("/a/*",)), "B": _rule(10, ("/b/*",))},
        good={"A": _rule(10, ("/a/*",)), "B": _rule(11, ("/b/*",))},
    ),
    Rule(
        id="ELBV2-RULE-PATH-PATTERN-LENGTH",
        resource_type=LISTENER_RULE,
        title="Each path pattern is at most 128 characters",
        doc_url=_API + "API_PathPatternConditionConfig.html",
        check=_path_patterns,
        bad={"Rule": _rule(paths=("/" + "m" * 128 + "/*",))},
        good={"Rule": _rule(paths=("/" + "m" * 120 + "/*",))},
    ),
    Rule(
        id="ELBV2-RULE-CONDITION-QUOTA",
        resource_type=LISTENER_RULE,
        title="A rule has at most 5 condition values and 5 wildcards (a fixed quota)",
        doc_url=_ALB_GUIDE + "load-balancer-limits.html",
        check=_rule_condition_quota,
        # cfn-lint caps one condition at 5 values (E3032); the quota counts all conditions.
        bad={"Rule": _rule(paths=("/a/*", "/b/*", "/c/*"), Conditions=_two_conditions(3))},
        good={"Rule": _rule(paths=("/a/*", "/b/*", "/c/*"), Conditions=_two_conditions(2))},
    ),
)
