"""What a synthesized tier template creates that counts against account network quotas.

Pure functions over a CloudFormation template (a dict), used by `gpufarm preflight --template`:
Elastic IPs, VPCs, interface endpoints per VPC, target groups (per region and per Application Load
Balancer), listener rules per Application Load Balancer, rules per security group (inbound and
outbound apart) and security groups per network interface. Each count names the resources it
comes from, by logical ID. The quotas themselves (codes, AWS documentation) are in
:mod:`gpufarm.aws.preflight`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Template = Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class Count:
    """How many of something one scope of the template creates (a region, a VPC, a group...)."""

    scope: str
    """What the quota applies to: 'region', or a logical ID such as 'NetworkVpc7FB7348F'."""
    count: int


def _resources(template: Template, *types: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") in types:
            yield logical_id, resource.get("Properties", {}) or {}


def _target(value: Any) -> str | None:
    """The logical ID a `Ref` or `Fn::GetAtt` points at; None for anything else (an imported ID)."""
    if isinstance(value, Mapping):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            attr = value["Fn::GetAtt"]
            return str(attr[0] if isinstance(attr, list) else str(attr).split(".", 1)[0])
    return None


def _group_key(value: Any) -> str:
    """A security group reference as a readable key: the logical ID, or its attribute when the
    group is created by another resource (EKS's cluster security group)."""
    if isinstance(value, Mapping) and "Fn::GetAtt" in value:
        attr = value["Fn::GetAtt"]
        owner, _, attribute = (".".join(map(str, attr)) if isinstance(attr, list) else str(attr)).partition(
            "."
        )
        return owner if attribute == "GroupId" else f"{owner}.{attribute}"
    return _target(value) or str(value)


def elastic_ips(template: Template) -> int:
    """`AWS::EC2::EIP` resources: one per NAT gateway, and one per AZ for an internet-facing NLB."""
    return sum(1 for _ in _resources(template, "AWS::EC2::EIP"))


def vpcs(template: Template) -> int:
    """`AWS::EC2::VPC` resources (the tier's VPC, and the inspection VPC when there is one)."""
    return sum(1 for _ in _resources(template, "AWS::EC2::VPC"))


def interface_endpoints_per_vpc(template: Template) -> list[Count]:
    """Interface and Gateway Load Balancer endpoints of each VPC (one quota covers both kinds)."""
    per_vpc: dict[str, int] = defaultdict(int)
    for _, props in _resources(template, "AWS::EC2::VPCEndpoint"):
        if props.get("VpcEndpointType") in ("Interface", "GatewayLoadBalancer"):
            per_vpc[_target(props.get("VpcId")) or str(props.get("VpcId"))] += 1
    return [Count(scope=vpc, count=n) for vpc, n in sorted(per_vpc.items())]


def target_groups(template: Template) -> int:
    """Target groups that count against 'Target Groups per Region' (ALB and NLB ones; GENEVE
    target groups of a Gateway Load Balancer have a quota of their own)."""
    return sum(
        1
        for _, props in _resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup")
        if props.get("Protocol") != "GENEVE"
    )


def _application_load_balancers(template: Template) -> list[str]:
    return [
        logical_id
        for logical_id, props in _resources(template, "AWS::ElasticLoadBalancingV2::LoadBalancer")
        if props.get("Type", "application") == "application"
    ]


def _listeners_of(template: Template) -> dict[str, str]:
    """Listener logical ID -> its load balancer's logical ID."""
    out = {}
    for logical_id, props in _resources(template, "AWS::ElasticLoadBalancingV2::Listener"):
        owner = _target(props.get("LoadBalancerArn"))
        if owner is not None:
            out[logical_id] = owner
    return out


def _forwarded_groups(actions: Any) -> set[str]:
    """Target group logical IDs an action list forwards to (plain or weighted forward)."""
    out: set[str] = set()
    for action in actions if isinstance(actions, list) else []:
        if not isinstance(action, Mapping):
            continue
        if (single := _target(action.get("TargetGroupArn"))) is not None:
            out.add(single)
        for weighted in action.get("ForwardConfig", {}).get("TargetGroups", []) or []:
            if isinstance(weighted, Mapping) and (name := _target(weighted.get("TargetGroupArn"))):
                out.add(name)
    return out


def target_groups_per_alb(template: Template) -> list[Count]:
    """Target groups each Application Load Balancer forwards to, from its listeners and rules."""
    listeners = _listeners_of(template)
    groups: dict[str, set[str]] = {lb: set() for lb in _application_load_balancers(template)}
    for logical_id, props in _resources(template, "AWS::ElasticLoadBalancingV2::Listener"):
        lb = listeners.get(logical_id)
        if lb in groups:
            groups[lb] |= _forwarded_groups(props.get("DefaultActions"))
    for _, props in _resources(template, "AWS::ElasticLoadBalancingV2::ListenerRule"):
        lb = listeners.get(_target(props.get("ListenerArn")) or "")
        if lb in groups:
            groups[lb] |= _forwarded_groups(props.get("Actions"))
    return [Count(scope=lb, count=len(names)) for lb, names in sorted(groups.items())]


def rules_per_alb(template: Template) -> list[Count]:
    """Listener rules of each Application Load Balancer, default rules excluded (as the quota)."""
    listeners = _listeners_of(template)
    rules = {lb: 0 for lb in _application_load_balancers(template)}
    for _, props in _resources(template, "AWS::ElasticLoadBalancingV2::ListenerRule"):
        lb = listeners.get(_target(props.get("ListenerArn")) or "")
        if lb in rules:
            rules[lb] += 1
    return [Count(scope=lb, count=n) for lb, n in sorted(rules.items())]


def security_group_rules(template: Template) -> tuple[list[Count], list[Count]]:
    """(inbound, outbound) rules of each security group the template creates or adds rules to.

    Inline rules of `AWS::EC2::SecurityGroup` plus the separate `SecurityGroupIngress` /
    `SecurityGroupEgress` resources aimed at the group. A group created elsewhere (EKS's cluster
    security group) is counted with the rules the template adds to it only.
    """
    inbound: dict[str, int] = defaultdict(int)
    outbound: dict[str, int] = defaultdict(int)
    for logical_id, props in _resources(template, "AWS::EC2::SecurityGroup"):
        inbound[logical_id] += len(props.get("SecurityGroupIngress", []) or [])
        outbound[logical_id] += len(props.get("SecurityGroupEgress", []) or [])
    for _, props in _resources(template, "AWS::EC2::SecurityGroupIngress"):
        inbound[_group_key(props.get("GroupId"))] += 1
    for _, props in _resources(template, "AWS::EC2::SecurityGroupEgress"):
        outbound[_group_key(props.get("GroupId"))] += 1
    return (
        [Count(scope=g, count=n) for g, n in sorted(inbound.items())],
        [Count(scope=g, count=n) for g, n in sorted(outbound.items())],
    )


_GROUP_LIST_KEYS = frozenset({"SecurityGroupIds", "SecurityGroups", "Groups"})


def _group_lists(value: Any) -> Iterator[list[Any]]:
    """Every security-group list in a resource's properties, at any depth."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in _GROUP_LIST_KEYS and isinstance(item, list):
                yield item
            else:
                yield from _group_lists(item)
    elif isinstance(value, list):
        for item in value:
            yield from _group_lists(item)


def security_groups_per_interface(template: Template) -> list[Count]:
    """The most security groups each resource puts on one network interface (launch templates,
    endpoints, load balancers, the EKS cluster, file systems, functions).

    Karpenter's EC2NodeClass picks its groups by tag at run time and is not counted here.
    """
    out = []
    for logical_id, resource in template.get("Resources", {}).items():
        if str(resource.get("Type", "")).startswith("Custom::"):
            continue
        lists = list(_group_lists(resource.get("Properties", {})))
        if lists:
            out.append(Count(scope=logical_id, count=max(len(groups) for groups in lists)))
    return sorted(out, key=lambda c: c.scope)
