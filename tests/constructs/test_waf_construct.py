"""InferenceWaf: regional web ACL, rate limit, managed rules with the body-size rule counted, logging."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from gpufarm.config.model import WafConfig
from gpufarm.constructs.waf import InferenceWaf
from tests.constructs.helpers import logical_id, new_stack, ref, resources

LB_ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/inference/0123456789abcdef"
WEB_ACL = "AWS::WAFv2::WebACL"


@dataclass(frozen=True)
class Built:
    waf: InferenceWaf
    template: Template
    key: kms.Key | None = None


@pytest.fixture(scope="module")
def full() -> Built:
    """Every rule set, a name, logging encrypted with a key, a non-default rate and retention."""
    stack = new_stack("FullWaf")
    key = kms.Key(stack, "LogsKey", enable_key_rotation=True)
    waf = InferenceWaf(
        stack,
        "Waf",
        config=WafConfig(rate_limit_per_5_minutes=3000),
        load_balancer_arn=LB_ARN,
        name="gpufarm-production",
        log_retention_days=365,
        logs_key=key,
    )
    return Built(waf, Template.from_stack(stack), key)


@pytest.fixture(scope="module")
def minimal() -> Built:
    """Rate limit only, no name, no logging."""
    stack = new_stack("MinimalWaf")
    waf = InferenceWaf(
        stack,
        "Waf",
        config=WafConfig(common_rule_set=False, known_bad_inputs=False),
        load_balancer_arn=LB_ARN,
        logging=False,
    )
    return Built(waf, Template.from_stack(stack))


def _acl(built: Built) -> dict[str, Any]:
    props: dict[str, Any] = resources(built.template, WEB_ACL)[logical_id(built.waf.web_acl)]["Properties"]
    return props


def _rule(built: Built, name: str) -> dict[str, Any]:
    [rule] = [r for r in _acl(built)["Rules"] if r["Name"] == name]
    return rule


# --------------------------------------------------------------------------- web ACL


def test_regional_web_acl_allows_by_default(full: Built) -> None:
    full.template.resource_count_is(WEB_ACL, 1)
    acl = _acl(full)
    assert acl["Scope"] == "REGIONAL"
    assert acl["DefaultAction"] == {"Allow": {}}
    assert acl["Name"] == "gpufarm-production"
    assert acl["VisibilityConfig"] == {
        "SampledRequestsEnabled": True,
        "CloudWatchMetricsEnabled": True,
        "MetricName": "gpufarm-production",
    }


def test_rate_limit_blocks_an_ip_over_the_configured_rate(full: Built) -> None:
    rule = _rule(full, "RateLimitPerIp")
    assert rule["Statement"] == {
        "RateBasedStatement": {"Limit": 3000, "AggregateKeyType": "IP", "EvaluationWindowSec": 300}
    }
    assert rule["Action"] == {"Block": {}}
    assert rule["Priority"] == 0


def test_common_rule_set_counts_the_body_size_rule(full: Built) -> None:
    rule = _rule(full, "AWSManagedRulesCommonRuleSet")
    assert rule["Statement"] == {
        "ManagedRuleGroupStatement": {
            "VendorName": "AWS",
            "Name": "AWSManagedRulesCommonRuleSet",
            "RuleActionOverrides": [{"Name": "SizeRestrictions_BODY", "ActionToUse": {"Count": {}}}],
        }
    }
    # Every other rule of the group keeps its own action.
    assert rule["OverrideAction"] == {"None": {}}


def test_known_bad_inputs_rule_set(full: Built) -> None:
    rule = _rule(full, "AWSManagedRulesKnownBadInputsRuleSet")
    assert rule["Statement"] == {
        "ManagedRuleGroupStatement": {"VendorName": "AWS", "Name": "AWSManagedRulesKnownBadInputsRuleSet"}
    }
    assert rule["OverrideAction"] == {"None": {}}


def test_every_rule_has_its_own_metric_and_samples(full: Built) -> None:
    rules = _acl(full)["Rules"]
    assert [r["Priority"] for r in rules] == [0, 10, 20]
    for rule in rules:
        assert rule["VisibilityConfig"] == {
            "SampledRequestsEnabled": True,
            "CloudWatchMetricsEnabled": True,
            "MetricName": f"gpufarm-production-{rule['Name']}",
        }


def test_rule_sets_can_be_turned_off(minimal: Built) -> None:
    assert [r["Name"] for r in _acl(minimal)["Rules"]] == ["RateLimitPerIp"]
    assert _rule(minimal, "RateLimitPerIp")["Statement"]["RateBasedStatement"]["Limit"] == 2000


def test_without_a_name_cloudformation_names_the_acl(minimal: Built) -> None:
    acl = _acl(minimal)
    assert "Name" not in acl
    assert acl["VisibilityConfig"]["MetricName"] == minimal.waf.metric_prefix
    assert minimal.waf.metric_prefix == cdk.Names.unique_id(minimal.waf)


def test_web_acl_is_associated_with_the_load_balancer(full: Built) -> None:
    full.template.resource_count_is("AWS::WAFv2::WebACLAssociation", 1)
    full.template.has_resource_properties(
        "AWS::WAFv2::WebACLAssociation",
        {"ResourceArn": LB_ARN, "WebACLArn": {"Fn::GetAtt": [logical_id(full.waf.web_acl), "Arn"]}},
    )


# --------------------------------------------------------------------------- logging


def test_log_group_name_has_the_waf_prefix_and_is_unique_per_stack(full: Built) -> None:
    assert full.waf.log_group is not None
    [group] = resources(full.template, "AWS::Logs::LogGroup").values()
    assert group["Properties"]["LogGroupName"] == {
        "Fn::Join": [
            "",
            ["aws-waf-logs-FullWaf-", {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}],
        ]
    }


def test_log_group_is_encrypted_retained_and_expires(full: Built) -> None:
    assert full.key is not None
    [group] = resources(full.template, "AWS::Logs::LogGroup").values()
    assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [logical_id(full.key), "Arn"]}
    assert group["Properties"]["RetentionInDays"] == 365
    assert group["DeletionPolicy"] == group["UpdateReplacePolicy"] == "Retain"


def test_logging_sends_to_the_group_arn_without_a_wildcard(full: Built) -> None:
    assert full.waf.log_group is not None
    [logging] = resources(full.template, "AWS::WAFv2::LoggingConfiguration").values()
    assert logging["Properties"]["ResourceArn"] == {"Fn::GetAtt": [logical_id(full.waf.web_acl), "Arn"]}
    assert logging["Properties"]["LogDestinationConfigs"] == [
        {
            "Fn::Join": [
                "",
                [
                    "arn:aws:logs:us-east-1:",
                    {"Ref": "AWS::AccountId"},
                    ":log-group:",
                    ref(full.waf.log_group),
                ],
            ]
        }
    ]


def test_logs_redact_credentials(full: Built) -> None:
    [logging] = resources(full.template, "AWS::WAFv2::LoggingConfiguration").values()
    assert logging["Properties"]["RedactedFields"] == [
        {"SingleHeader": {"Name": "authorization"}},
        {"SingleHeader": {"Name": "cookie"}},
    ]


def test_no_logging_creates_no_log_group(minimal: Built) -> None:
    assert minimal.waf.log_group is None
    for type_ in ("AWS::Logs::LogGroup", "AWS::WAFv2::LoggingConfiguration"):
        minimal.template.resource_count_is(type_, 0)


# --------------------------------------------------------------------------- exemption


@pytest.fixture(scope="module")
def exempted() -> Built:
    """The VPC's CIDR exempted from the rate rule, as the ALB does when its gateway calls it."""
    stack = new_stack("ExemptWaf")
    waf = InferenceWaf(
        stack, "Waf", config=WafConfig(rate_limit_per_5_minutes=3000), load_balancer_arn=LB_ARN
    )
    waf.exempt_from_rate_limit(["10.0.0.0/16"])
    return Built(waf, Template.from_stack(stack))


def test_the_rate_rule_counts_only_requests_from_outside_the_exempt_set(exempted: Built) -> None:
    assert exempted.waf.exempt_ip_set is not None
    (ip_set_id, ip_set) = next(iter(resources(exempted.template, "AWS::WAFv2::IPSet").items()))
    assert ip_set_id == logical_id(exempted.waf.exempt_ip_set)
    assert {k: ip_set["Properties"][k] for k in ("Scope", "IPAddressVersion", "Addresses")} == {
        "Scope": "REGIONAL",
        "IPAddressVersion": "IPV4",
        "Addresses": ["10.0.0.0/16"],
    }
    rule = _rule(exempted, "RateLimitPerIp")
    assert rule["Statement"] == {
        "RateBasedStatement": {
            "Limit": 3000,
            "AggregateKeyType": "IP",
            "EvaluationWindowSec": 300,
            "ScopeDownStatement": {
                "NotStatement": {
                    "Statement": {"IPSetReferenceStatement": {"Arn": {"Fn::GetAtt": [ip_set_id, "Arn"]}}}
                }
            },
        }
    }
    assert rule["Action"] == {"Block": {}}


def test_the_exemption_leaves_the_managed_rules_inspecting_every_request(
    exempted: Built, full: Built
) -> None:
    managed = ("AWSManagedRulesCommonRuleSet", "AWSManagedRulesKnownBadInputsRuleSet")
    assert [_rule(exempted, n)["Statement"] for n in managed] == [
        _rule(full, n)["Statement"] for n in managed
    ]
    assert [r["Name"] for r in _acl(exempted)["Rules"]] == [r["Name"] for r in _acl(full)["Rules"]]


@pytest.mark.parametrize(
    ("cidrs", "twice", "message"),
    [
        ([], False, "'cidrs' must name at least one IPv4 CIDR to exempt, got none"),
        (
            ["10.0.0.0/33"],
            False,
            "'cidrs' must be IPv4 networks such as 10.0.0.0/16 (an IPV4 IP set), got '10.0.0.0/33'",
        ),
        (
            ["2001:db8::/32"],
            False,
            "'cidrs' must be IPv4 networks such as 10.0.0.0/16 (an IPV4 IP set), got '2001:db8::/32'",
        ),
        (
            ["0.0.0.0/0"],
            False,
            "'cidrs' must be CIDR ranges with a prefix length of 1-32 (AWS WAF takes no /0), got '0.0.0.0/0'",
        ),
        (
            ["10.0.0.1"],
            False,
            "'cidrs' must be CIDR ranges with a prefix length of 1-32 (AWS WAF takes no /0), got '10.0.0.1'",
        ),
        (
            ["10.0.0.0/16"],
            True,
            "exempt_from_rate_limit() was already called: the rate rule has one exemption",
        ),
    ],
    ids=["none", "prefix", "ipv6", "everything", "no-prefix", "twice"],
)
def test_an_invalid_exemption_is_refused_with_an_exact_message(
    cidrs: list[str], twice: bool, message: str
) -> None:
    stack = new_stack("InvalidExemption")
    waf = InferenceWaf(stack, "Waf", config=WafConfig(), load_balancer_arn=LB_ARN, logging=False)
    if twice:
        waf.exempt_from_rate_limit(["10.0.0.0/16"])
    with pytest.raises(ValueError) as excinfo:
        waf.exempt_from_rate_limit(cidrs)
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("config", "options", "message"),
    [
        (
            WafConfig(enabled=False),
            {},
            "'config.enabled' must be true for InferenceWaf (leave the construct out for no web ACL), "
            "got False",
        ),
        (
            WafConfig(),
            {"name": "gpufarm production"},
            "'name' must be 1-128 letters, digits, '_' or '-' (a web ACL name), got 'gpufarm production'",
        ),
        (
            WafConfig(),
            {"log_retention_days": 45},
            "'log_retention_days' must be a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, "
            "180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653), got 45",
        ),
    ],
    ids=["disabled", "name", "retention"],
)
def test_invalid_input_is_rejected_with_an_exact_message(
    config: WafConfig, options: dict[str, Any], message: str
) -> None:
    stack = new_stack("InvalidWaf")
    with pytest.raises(ValueError) as excinfo:
        InferenceWaf(stack, "Waf", config=config, load_balancer_arn=LB_ARN, **options)
    assert str(excinfo.value) == message
