"""AWS WAF: what CreateWebACL, AssociateWebACL and PutLoggingConfiguration refuse."""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str, ref_target
from gpufarm.deploy_rules.shapes import TOKEN, each, referenced, render, resource

WEB_ACL = "AWS::WAFv2::WebACL"
ASSOCIATION = "AWS::WAFv2::WebACLAssociation"
LOGGING = "AWS::WAFv2::LoggingConfiguration"
LOG_GROUP = "AWS::Logs::LogGroup"
IP_SET = "AWS::WAFv2::IPSet"

_RULE = "https://docs.aws.amazon.com/waf/latest/APIReference/API_Rule.html"
_ASSOCIATE = "https://docs.aws.amazon.com/waf/latest/APIReference/API_AssociateWebACL.html"
_LOGGING = "https://docs.aws.amazon.com/waf/latest/APIReference/API_LoggingConfiguration.html"

_CREATE_IP_SET = "https://docs.aws.amazon.com/waf/latest/APIReference/API_CreateIPSet.html"

LOG_PREFIX = "aws-waf-logs-"


def _ip_set_addresses(res: Resource, _template: Template) -> Iterator[str]:
    # CreateIPSet, Addresses: "All addresses must be specified using Classless Inter-Domain Routing
    # (CIDR) notation. WAF supports all IPv4 and IPv6 CIDR ranges except for /0." IPAddressVersion:
    # "The version of the IP addresses, either IPV4 or IPV6."
    version = literal_str(res.prop("IPAddressVersion"))
    addresses = res.prop("Addresses")
    for address in addresses if isinstance(addresses, list) else []:
        text = literal_str(address)
        if text is None:
            continue
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            yield f"address {text!r} is not in CIDR notation"
            continue
        if "/" not in text:
            yield f"address {text!r} has no prefix length: write it as {text}/{network.max_prefixlen}"
        elif network.prefixlen == 0:
            yield f"address {text!r}: WAF takes every CIDR range but /0"
        elif version in {"IPV4", "IPV6"} and f"IPV{network.version}" != version:
            yield f"address {text!r} is IPv{network.version} in an IP set of IPAddressVersion {version}"


def _unique_priorities(res: Resource, _template: Template) -> Iterator[str]:
    # WAFv2 Rule, Priority: "The priorities don't need to be consecutive, but they must all be
    # different."
    priorities = [
        p for p in (literal_int(r.get("Priority")) for r in each(res.prop("Rules"))) if p is not None
    ]
    for priority, count in sorted(Counter(priorities).items()):
        if count > 1:
            yield f"{count} rules have Priority {priority}; each rule of a web ACL needs its own"


def _regional_acl(res: Resource, template: Template) -> Iterator[str]:
    # AssociateWebACL: "For Amazon CloudFront, don't use this call. Instead, use your CloudFront
    # distribution configuration." A CLOUDFRONT-scoped web ACL cannot be associated here.
    acl = referenced(res.prop("WebACLArn"), template, WEB_ACL)
    if acl is not None and literal_str(acl.prop("Scope")) == "CLOUDFRONT":
        yield (
            f"web ACL {acl.logical_id} has Scope CLOUDFRONT; only a REGIONAL web "
            "ACL is associated with a resource"
        )


def _destination_name(value: Any, template: Template) -> str | None:
    """The name of a log destination (log group, bucket, stream), rendered around its tokens.

    A log group of the template, by `Fn::GetAtt` or by `Ref` inside the ARN, gives its own
    `LogGroupName`.
    """
    target = referenced(value, template, LOG_GROUP)
    if target is not None:
        return render(target.prop("LogGroupName"))
    join = value.get("Fn::Join") if isinstance(value, dict) else None
    if isinstance(join, list) and len(join) == 2 and isinstance(join[1], list):
        value = {"Fn::Join": [join[0], [_join_part(part, template) for part in join[1]]]}
    arn = render(value)
    match = re.search(r":log-group:([^:]*)|:::([^/]*)$|:deliverystream/(.*)$", arn or "")
    return next((g for g in match.groups() if g is not None), None) if match else None


def _join_part(part: Any, template: Template) -> Any:
    """A `Ref` to a log group of the template, replaced by its name (what Ref returns)."""
    target = template.get(ref_target(part)) if isinstance(part, dict) and "Ref" in part else None
    if target is not None and target.type == LOG_GROUP:
        return target.prop("LogGroupName", part)
    return part


def _log_prefix(res: Resource, template: Template) -> Iterator[str]:
    # WAFv2 LoggingConfiguration: "The name that you give the destination must start with
    # aws-waf-logs-." Only the literal start of a name is judged: a token may complete it.
    destinations = res.prop("LogDestinationConfigs")
    for destination in destinations if isinstance(destinations, list) else []:
        name = _destination_name(destination, template)
        if name is None:
            continue
        known = name.split(TOKEN, 1)[0]
        if not known.startswith(LOG_PREFIX) and not (TOKEN in name and LOG_PREFIX.startswith(known)):
            yield f"log destination {name.replace(TOKEN, '...')!r} does not start with {LOG_PREFIX!r}"


_VISIBILITY = {"CloudWatchMetricsEnabled": True, "MetricName": "acl", "SampledRequestsEnabled": True}


def _waf_rule(name: str, priority: int) -> dict[str, Any]:
    return {
        "Name": name,
        "Priority": priority,
        "OverrideAction": {"None": {}},
        "Statement": {
            "ManagedRuleGroupStatement": {"VendorName": "AWS", "Name": "AWSManagedRulesCommonRuleSet"}
        },
        "VisibilityConfig": {**_VISIBILITY, "MetricName": name},
    }


def _acl(*rules: dict[str, Any], scope: str = "REGIONAL") -> dict[str, Any]:
    return resource(
        WEB_ACL, DefaultAction={"Allow": {}}, Scope=scope, VisibilityConfig=_VISIBILITY, Rules=list(rules)
    )


def _logging(log_group_name: str) -> dict[str, Any]:
    return {
        "Acl": _acl(),
        "Logs": resource(LOG_GROUP, LogGroupName=log_group_name, RetentionInDays=30),
        "Logging": resource(
            LOGGING,
            ResourceArn={"Fn::GetAtt": ["Acl", "Arn"]},
            LogDestinationConfigs=[
                {
                    "Fn::Join": [
                        "",
                        [
                            "arn:aws:logs:us-east-1:",
                            {"Ref": "AWS::AccountId"},
                            ":log-group:",
                            {"Ref": "Logs"},
                        ],
                    ]
                }
            ],
        ),
    }


def _association(scope: str) -> dict[str, Any]:
    return {
        "Acl": _acl(scope=scope),
        "Assoc": resource(
            ASSOCIATION,
            ResourceArn="arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/lb/0123456789abcdef",
            WebACLArn={"Fn::GetAtt": ["Acl", "Arn"]},
        ),
    }


def _ip_set(*addresses: str) -> dict[str, Any]:
    return resource(IP_SET, Scope="REGIONAL", IPAddressVersion="IPV4", Addresses=list(addresses))


RULES: tuple[Rule, ...] = (
    Rule(
        id="WAF-IPSET-ADDRESSES",
        resource_type=IP_SET,
        title="An IP set's addresses are CIDR ranges of its IP version, not /0",
        doc_url=_CREATE_IP_SET,
        check=_ip_set_addresses,
        bad={"Set": _ip_set("10.0.0.0/16", "0.0.0.0/0")},
        good={"Set": _ip_set("10.0.0.0/16", "192.0.2.44/32")},
    ),
    Rule(
        id="WAF-WEBACL-RULE-PRIORITIES",
        resource_type=WEB_ACL,
        title="The rules of a web ACL have different priorities",
        doc_url=_RULE,
        check=_unique_priorities,
        bad={"Acl": _acl(_waf_rule("common", 0), _waf_rule("bad-inputs", 0))},
        good={"Acl": _acl(_waf_rule("common", 0), _waf_rule("bad-inputs", 1))},
    ),
    Rule(
        id="WAF-ASSOCIATION-REGIONAL",
        resource_type=ASSOCIATION,
        title="Only a REGIONAL web ACL is associated with a resource",
        doc_url=_ASSOCIATE,
        check=_regional_acl,
        bad=_association("CLOUDFRONT"),
        good=_association("REGIONAL"),
    ),
    Rule(
        id="WAF-LOGGING-DESTINATION-PREFIX",
        resource_type=LOGGING,
        title="A WAF log destination's name starts with aws-waf-logs-",
        doc_url=_LOGGING,
        check=_log_prefix,
        bad=_logging("gpufarm-waf"),
        good=_logging("aws-waf-logs-gpufarm"),
    ),
)
