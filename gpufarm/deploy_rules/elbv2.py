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


# An Application Load Balancer as the target of a Network Load Balancer (a target group of type
# `alb`): the rules of the NLB guide's "Use an Application Load Balancer as a target of a Network
# Load Balancer", each quoted where it is checked.
_ALB_TARGET_DOC = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/network/application-load-balancer-target.html"
)
ALB_TARGET_NLBS_MAX = 2
"""'You can associate an Application Load Balancer as a target of up to two Network Load Balancers.'"""


def _is_alb_group(resource: Resource) -> bool:
    return resource.type == TARGET_GROUP and literal_str(resource.prop("TargetType")) == "alb"


def _alb_targets(resource: Resource) -> list[Any]:
    return [t for t in items(resource.prop("Targets")) if isinstance(t, dict)]


def _registered_alb(resource: Resource, template: Template) -> Resource | None:
    """The load balancer an `alb` target group registers, when it is in the template."""
    targets = _alb_targets(resource)
    if len(targets) != 1:
        return None
    alb = template.get(ref_target(targets[0].get("Id")))
    return alb if alb is not None and alb.type == LOAD_BALANCER else None


def _target_port(resource: Resource) -> int | None:
    targets = _alb_targets(resource)
    port = literal_int(targets[0].get("Port")) if len(targets) == 1 else None
    return port if port is not None else literal_int(resource.prop("Port"))


def _listeners_of(load_balancer: str, template: Template) -> list[Resource]:
    return [r for r in template.of_type(LISTENER) if ref_target(r.prop("LoadBalancerArn")) == load_balancer]


def _forwarded_groups(resource: Resource) -> list[str]:
    """Logical IDs of the target groups a listener's default actions forward to."""
    groups: list[str] = []
    for action in items(resource.prop("DefaultActions")):
        if not isinstance(action, dict):
            continue
        if (group := ref_target(action.get("TargetGroupArn"))) is not None:
            groups.append(group)
        config = action.get("ForwardConfig")
        for tuple_ in items(config.get("TargetGroups")) if isinstance(config, dict) else []:
            if isinstance(tuple_, dict) and (group := ref_target(tuple_.get("TargetGroupArn"))) is not None:
                groups.append(group)
    return groups


def _alb_group_protocol(resource: Resource, _: Template) -> Iterator[str]:
    # "For Protocol, only TCP is allowed." / "The protocol must be TCP".
    protocol = literal_str(resource.prop("Protocol"))
    if _is_alb_group(resource) and protocol is not None and protocol != "TCP":
        yield f"TargetType alb with Protocol {protocol}: a target group of type alb takes TCP only"


def _alb_group_one_target(resource: Resource, _: Template) -> Iterator[str]:
    # "You can only register one Application Load Balancer per target group."
    count = len(_alb_targets(resource))
    if _is_alb_group(resource) and count > 1:
        yield f"{count} targets in a target group of type alb; it registers one Application Load Balancer"


def _alb_group_attributes(resource: Resource, _: Template) -> Iterator[str]:
    # "When the target group type is alb, you can't modify the target group attributes."
    keys = sorted(key_values(resource.prop("TargetGroupAttributes")))
    if _is_alb_group(resource) and keys:
        yield (
            f"TargetGroupAttributes {', '.join(keys)} on a target group of type alb, whose "
            "attributes keep their defaults"
        )


def _alb_group_health_check(resource: Resource, _: Template) -> Iterator[str]:
    # "For Health checks, choose HTTP or HTTPS as the Health check protocol." Without one, a TCP
    # group's health checks are TCP.
    if not _is_alb_group(resource):
        return
    value = resource.prop("HealthCheckProtocol")
    protocol = literal_str(value)
    if value is None or (protocol is not None and protocol not in {"HTTP", "HTTPS"}):
        shown = protocol or "TCP (the default for a TCP group)"
        yield f"HealthCheckProtocol {shown}: a target group of type alb checks HTTP or HTTPS"


def _alb_group_listener(resource: Resource, template: Template) -> Iterator[str]:
    # "The port for this target group must match the listener port of the Application Load
    # Balancer." Health checks go to "a listener with a port and protocol that matches the health
    # check port and protocol."
    if not _is_alb_group(resource):
        return
    alb, port = _registered_alb(resource, template), _target_port(resource)
    if alb is None or port is None:
        return
    listeners = {literal_int(r.prop("Port")): r for r in _listeners_of(alb.logical_id, template)}
    if port not in listeners:
        known = ", ".join(str(p) for p in sorted(p for p in listeners if p is not None)) or "none"
        yield f"{alb.logical_id} has no listener on port {port} (its listeners: {known})"
        return
    hc_port_value = literal_str(resource.prop("HealthCheckPort")) or "traffic-port"
    hc_port = port if hc_port_value == "traffic-port" else literal_int(hc_port_value)
    hc_protocol = literal_str(resource.prop("HealthCheckProtocol"))
    if hc_port is None or hc_protocol not in {"HTTP", "HTTPS"}:
        return
    checked = listeners.get(hc_port)
    listener_protocol = literal_str(checked.prop("Protocol")) if checked is not None else None
    if checked is None:
        yield f"health checks on port {hc_port}, where {alb.logical_id} has no listener"
    elif listener_protocol is not None and listener_protocol != hc_protocol:
        yield (
            f"health checks in {hc_protocol} on port {hc_port}, where {alb.logical_id}'s listener "
            f"is {listener_protocol}"
        )


def _alb_group_after_listener(resource: Resource, template: Template) -> Iterator[str]:
    # The ALB "must have a listener on the same port as the target group" when it is registered:
    # a group created before that listener fails (the CDK's AlbTarget is deprecated for lacking
    # this dependency).
    if not _is_alb_group(resource):
        return
    alb, port = _registered_alb(resource, template), _target_port(resource)
    if alb is None or port is None:
        return
    on_port = [
        r.logical_id for r in _listeners_of(alb.logical_id, template) if literal_int(r.prop("Port")) == port
    ]
    if on_port and not set(on_port) & set(resource.depends_on):
        yield f"no DependsOn on {on_port[0]}, the listener of {alb.logical_id} on port {port} it registers"


def _alb_group_same_vpc(resource: Resource, template: Template) -> Iterator[str]:
    # "the load balancers must be in the same VPC within the same account."
    if not _is_alb_group(resource):
        return
    alb = _registered_alb(resource, template)
    group_vpc = ref_target(resource.prop("VpcId")) or literal_str(resource.prop("VpcId"))
    if alb is None or group_vpc is None:
        return
    subnets = [template.get(ref_target(s)) for s in items(alb.prop("Subnets"))]
    vpcs = {ref_target(s.prop("VpcId")) or literal_str(s.prop("VpcId")) for s in subnets if s is not None}
    vpcs.discard(None)
    if vpcs and group_vpc not in vpcs:
        yield f"VpcId {group_vpc}, but {alb.logical_id} is in {', '.join(sorted(str(v) for v in vpcs))}"


def _listener_to_alb_group(resource: Resource, template: Template) -> Iterator[str]:
    # "Only TCP listeners can forward traffic to an Application Load Balancer target group."
    protocol = literal_str(resource.prop("Protocol"))
    if protocol is None or protocol == "TCP":
        return
    for group in _forwarded_groups(resource):
        target_group = template.get(group)
        if target_group is not None and _is_alb_group(target_group):
            yield (
                f"a {protocol} listener forwards to {group}, a target group of type alb: only TCP "
                "listeners may"
            )


def _alb_network_load_balancers(resource: Resource, template: Template) -> Iterator[str]:
    # "You can associate an Application Load Balancer as a target of up to two Network Load
    # Balancers."
    if (literal_str(resource.prop("Type")) or "application") != "application":
        return
    groups = {
        g.logical_id
        for g in template.of_type(TARGET_GROUP)
        if _is_alb_group(g) and any(ref_target(t.get("Id")) == resource.logical_id for t in _alb_targets(g))
    }
    nlbs = sorted(
        {
            nlb
            for listener in template.of_type(LISTENER)
            if set(_forwarded_groups(listener)) & groups
            and (nlb := ref_target(listener.prop("LoadBalancerArn"))) is not None
        }
    )
    if len(nlbs) > ALB_TARGET_NLBS_MAX:
        yield (
            f"the target of {len(nlbs)} Network Load Balancers ({', '.join(nlbs)}); an Application "
            f"Load Balancer may be the target of at most {ALB_TARGET_NLBS_MAX}"
        )


def _alb_target_template(
    *,
    group: dict[str, Any] | None = None,
    listener: dict[str, Any] | None = None,
    nlbs: int = 1,
    alb_listeners: tuple[tuple[int, str], ...] = ((8088, "HTTP"),),
    depends: bool = True,
    vpc: str = "Vpc",
) -> dict[str, Any]:
    """An ALB with listeners on `alb_listeners`, and `nlbs` NLBs each forwarding port 8088 to it."""
    resources: dict[str, Any] = {
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
        "Other": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.1.0.0/16"}},
        "SubnetA": {
            "Type": "AWS::EC2::Subnet",
            "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.0.0/24"},
        },
        "SubnetB": {
            "Type": "AWS::EC2::Subnet",
            "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.1.0/24"},
        },
        "Alb": _lb(Subnets=[{"Ref": "SubnetA"}, {"Ref": "SubnetB"}]),
    }
    for port, protocol in alb_listeners:
        resources[f"AlbListener{port}"] = {
            "Type": LISTENER,
            "Properties": {
                "LoadBalancerArn": {"Ref": "Alb"},
                "Port": port,
                "Protocol": protocol,
                "DefaultActions": [{"Type": "fixed-response", "FixedResponseConfig": {"StatusCode": "404"}}],
            },
        }
    for index in range(nlbs):
        group_props: dict[str, Any] = {
            "TargetType": "alb",
            "Protocol": "TCP",
            "Port": 8088,
            "VpcId": {"Ref": vpc},
            "Targets": [{"Id": {"Ref": "Alb"}, "Port": 8088}],
            "HealthCheckProtocol": "HTTP",
            **(group or {}),
        }
        body: dict[str, Any] = {"Type": TARGET_GROUP, "Properties": group_props}
        if depends and 8088 in dict(alb_listeners):
            body["DependsOn"] = ["AlbListener8088"]
        resources[f"AlbGroup{index}"] = body
        resources[f"Nlb{index}"] = _lb(
            Type="network", Scheme="internal", Subnets=[{"Ref": "SubnetA"}, {"Ref": "SubnetB"}]
        )
        resources[f"NlbListener{index}"] = {
            "Type": LISTENER,
            "Properties": {
                "LoadBalancerArn": {"Ref": f"Nlb{index}"},
                "Port": 8088,
                "Protocol": "TCP",
                "DefaultActions": [{"Type": "forward", "TargetGroupArn": {"Ref": f"AlbGroup{index}"}}],
                **(listener or {}),
            },
        }
    return resources


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
    Rule(
        id="ELBV2-TG-ALB-TCP",
        resource_type=TARGET_GROUP,
        title="A target group of type alb takes the TCP protocol only",
        doc_url=_ALB_TARGET_DOC,
        check=_alb_group_protocol,
        bad=_alb_target_template(group={"Protocol": "TLS"}),
        good=_alb_target_template(),
    ),
    Rule(
        id="ELBV2-TG-ALB-ONE-TARGET",
        resource_type=TARGET_GROUP,
        title="A target group of type alb registers one Application Load Balancer",
        doc_url=_ALB_TARGET_DOC,
        check=_alb_group_one_target,
        bad=_alb_target_template(
            group={"Targets": [{"Id": {"Ref": "Alb"}, "Port": 8088}, {"Id": {"Ref": "Alb"}, "Port": 8088}]}
        ),
        good=_alb_target_template(),
    ),
    Rule(
        id="ELBV2-TG-ALB-ATTRIBUTES",
        resource_type=TARGET_GROUP,
        title="A target group of type alb keeps its attributes' defaults",
        doc_url=_ALB_TARGET_DOC,
        check=_alb_group_attributes,
        bad=_alb_target_template(
            group={"TargetGroupAttributes": [{"Key": "preserve_client_ip.enabled", "Value": "false"}]}
        ),
        good=_alb_target_template(),
    ),
    Rule(
        id="ELBV2-TG-ALB-HEALTH-CHECK",
        resource_type=TARGET_GROUP,
        title="A target group of type alb health-checks in HTTP or HTTPS",
        doc_url=_ALB_TARGET_DOC,
        check=_alb_group_health_check,
        bad=_alb_target_template(group={"HealthCheckProtocol": "TCP"}),
        good=_alb_target_template(),
    ),
    Rule(
        id="ELBV2-TG-ALB-LISTENER",
        resource_type=TARGET_GROUP,
        title="A target group of type alb uses a port, and a health-check port and protocol, "
        "the ALB listens on",
        doc_url=_ALB_TARGET_DOC,
        check=_alb_group_listener,
        bad=_alb_target_template(alb_listeners=((80, "HTTP"),)),
        good=_alb_target_template(alb_listeners=((80, "HTTP"), (8088, "HTTP"))),
    ),
    Rule(
        id="ELBV2-TG-ALB-AFTER-LISTENER",
        resource_type=TARGET_GROUP,
        title="A target group of type alb is created after the ALB's listener on its port",
        doc_url=_ALB_TARGET_DOC,
        check=_alb_group_after_listener,
        bad=_alb_target_template(depends=False),
        good=_alb_target_template(),
    ),
    Rule(
        id="ELBV2-TG-ALB-SAME-VPC",
        resource_type=TARGET_GROUP,
        title="A target group of type alb is in the VPC of the ALB it registers",
        doc_url=_ALB_TARGET_DOC,
        check=_alb_group_same_vpc,
        bad=_alb_target_template(vpc="Other"),
        good=_alb_target_template(),
    ),
    Rule(
        id="ELBV2-LISTENER-ALB-TARGET-TCP",
        resource_type=LISTENER,
        title="Only a TCP listener forwards to a target group of type alb",
        doc_url=_ALB_TARGET_DOC,
        check=_listener_to_alb_group,
        bad=_alb_target_template(
            listener={
                "Protocol": "TLS",
                "Certificates": [{"CertificateArn": "arn:aws:acm:us-east-1:111122223333:certificate/1"}],
            }
        ),
        good=_alb_target_template(),
    ),
    Rule(
        id="ELBV2-LB-ALB-TARGET-OF-TWO-NLBS",
        resource_type=LOAD_BALANCER,
        title="An Application Load Balancer is the target of at most two Network Load Balancers",
        doc_url=_ALB_TARGET_DOC,
        check=_alb_network_load_balancers,
        bad=_alb_target_template(nlbs=3),
        good=_alb_target_template(nlbs=2),
    ),
)
