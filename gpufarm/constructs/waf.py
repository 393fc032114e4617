"""AWS WAF in front of the inference load balancer: per-IP rate limit and AWS managed rules.

Prompts are large: a chat request with a long context is far above 8 KB, and an Application
Load Balancer hands AWS WAF only the first 8 KB of a body. The common rule set's
``SizeRestrictions_BODY`` rule blocks every body over 8 KB, so it would block ordinary inference
traffic; it only counts here (docs/decisions/0014-waf-body-size.md).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from gpufarm.config.model import LOG_RETENTION_DAYS, WafConfig
from gpufarm.constructs._util import acknowledge

RATE_LIMIT_RULE = "RateLimitPerIp"
COMMON_RULE_SET = "AWSManagedRulesCommonRuleSet"
KNOWN_BAD_INPUTS_RULE_SET = "AWSManagedRulesKnownBadInputsRuleSet"
BODY_SIZE_RULE = "SizeRestrictions_BODY"
"""The common rule set's rule that blocks bodies over 8 KB; overridden to count."""
RATE_WINDOW_SECONDS = 300
LOG_GROUP_PREFIX = "aws-waf-logs-"
"""AWS WAF delivers logs only to log groups whose name starts with this."""
REDACTED_HEADERS = ("authorization", "cookie")
"""Headers kept out of the WAF logs: API keys, bearer tokens and load balancer session cookies."""

_WEB_ACL_NAME = re.compile(r"^[\w-]{1,128}$")

# Fixed priorities: turning a rule set off must not renumber the others.
_PRIORITY = {RATE_LIMIT_RULE: 0, COMMON_RULE_SET: 10, KNOWN_BAD_INPUTS_RULE_SET: 20}


class InferenceWaf(Construct):
    """A regional web ACL associated with one load balancer, logging to CloudWatch Logs.

    Rules, in order: a rate-based rule blocking a client IP that sends more than
    `config.rate_limit_per_5_minutes` requests in 5 minutes; the AWS managed common rule set
    (when `config.common_rule_set`) with `SizeRestrictions_BODY` counted instead of blocked; the
    AWS managed known-bad-inputs rule set (when `config.known_bad_inputs`). Requests no rule
    blocks are allowed. Every rule emits CloudWatch metrics and sampled requests.

    Defaults: `name` unset (CloudFormation names the web ACL; metric names derive from the
    construct path), logging on to a log group named `aws-waf-logs-<stack>-<stack id>` (unique
    per stack instance, so a retained group never blocks a redeploy) kept `log_retention_days`
    (90), encrypted with `logs_key` when given, removed per `removal_policy` (RETAIN). The
    `authorization` and `cookie` headers are redacted from the logs.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: WafConfig,
        load_balancer_arn: str,
        name: str | None = None,
        logging: bool = True,
        log_retention_days: int = 90,
        logs_key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        _validate(config, name, log_retention_days)
        self.config = config
        self.metric_prefix = name or cdk.Names.unique_id(self)
        self.exempt_ip_set: wafv2.CfnIPSet | None = None
        """The addresses the rate rule does not count, once :meth:`exempt_from_rate_limit` was called."""
        properties: dict[str, Any] = {
            "Scope": "REGIONAL",
            "Description": "Inference load balancer: per-IP rate limit and AWS managed rules",
            "DefaultAction": {"Allow": {}},
            "Rules": self._rules(),
            "VisibilityConfig": self._visibility(self.metric_prefix),
        }
        if name:
            properties["Name"] = name
        self.web_acl = cdk.CfnResource(self, "Resource", type="AWS::WAFv2::WebACL", properties=properties)
        self.web_acl_arn: str = self.web_acl.get_att("Arn").to_string()
        # The typed L1 (not a generic CfnResource): cdk-nag's NIST.800.53.R5-ALBWAFEnabled finds
        # an ALB's web ACL by looking for CfnWebACLAssociation objects that reference it.
        self.association = wafv2.CfnWebACLAssociation(
            self, "Association", resource_arn=load_balancer_arn, web_acl_arn=self.web_acl_arn
        )
        self.log_group: logs.CfnLogGroup | None = None
        if logging:
            self.log_group = self._logging(log_retention_days, logs_key, removal_policy)

    def exempt_from_rate_limit(self, cidrs: Sequence[str]) -> wafv2.CfnIPSet:
        """Scope the rate rule down to requests from outside `cidrs` (IPv4 CIDRs, at least one).

        The load balancer's own gateway calls it from the VPC: the gateway pods are a handful of
        source addresses carrying every client's requests, and a per-IP rate limit would block
        them. The rule's `ScopeDownStatement` is a `NotStatement` over an
        `IPSetReferenceStatement` naming an `AWS::WAFv2::IPSet` (`ExemptFromRateLimit`) of
        `cidrs`; the managed rule groups still inspect those requests. See
        docs/decisions/0050-gateway-route-balancing.md.
        """
        if self.exempt_ip_set is not None:
            raise ValueError("exempt_from_rate_limit() was already called: the rate rule has one exemption")
        if not cidrs:
            raise ValueError("'cidrs' must name at least one IPv4 CIDR to exempt, got none")
        for cidr in cidrs:
            if cdk.Token.is_unresolved(cidr):
                continue
            try:
                network = ipaddress.IPv4Network(cidr)
            except ValueError:
                raise ValueError(
                    f"'cidrs' must be IPv4 networks such as 10.0.0.0/16 (an IPV4 IP set), got {cidr!r}"
                ) from None
            if network.prefixlen == 0 or "/" not in cidr:
                # CreateIPSet: CIDR notation, "all IPv4 and IPv6 CIDR ranges except for /0".
                raise ValueError(
                    "'cidrs' must be CIDR ranges with a prefix length of 1-32 (AWS WAF takes no /0), "
                    f"got {cidr!r}"
                )
        self.exempt_ip_set = wafv2.CfnIPSet(
            self,
            "ExemptFromRateLimit",
            scope="REGIONAL",
            ip_address_version="IPV4",
            addresses=list(cidrs),
            description="Sources the per-IP rate limit does not count: the VPC, where the gateway calls from",
        )
        self.web_acl.add_property_override("Rules", self._rules())
        return self.exempt_ip_set

    # ----------------------------------------------------------------------- internals

    def _visibility(self, metric: str) -> dict[str, Any]:
        return {"SampledRequestsEnabled": True, "CloudWatchMetricsEnabled": True, "MetricName": metric}

    def _rule(self, name: str, statement: dict[str, Any], *, managed: bool) -> dict[str, Any]:
        # A managed rule group keeps its own rule actions ("None" override); a plain rule blocks.
        action: dict[str, Any] = {"OverrideAction": {"None": {}}} if managed else {"Action": {"Block": {}}}
        return {
            "Name": name,
            "Priority": _PRIORITY[name],
            "Statement": statement,
            **action,
            "VisibilityConfig": self._visibility(f"{self.metric_prefix}-{name}"),
        }

    def _rules(self) -> list[dict[str, Any]]:
        cfg = self.config
        rate: dict[str, Any] = {
            "Limit": cfg.rate_limit_per_5_minutes,
            "AggregateKeyType": "IP",
            "EvaluationWindowSec": RATE_WINDOW_SECONDS,
        }
        if self.exempt_ip_set is not None:
            # Only requests the scope-down statement matches are counted: those not from the set.
            rate["ScopeDownStatement"] = {
                "NotStatement": {
                    "Statement": {"IPSetReferenceStatement": {"Arn": self.exempt_ip_set.attr_arn}}
                }
            }
        rules = [self._rule(RATE_LIMIT_RULE, {"RateBasedStatement": rate}, managed=False)]
        if cfg.common_rule_set:
            rules.append(
                self._rule(
                    COMMON_RULE_SET,
                    {
                        "ManagedRuleGroupStatement": {
                            "VendorName": "AWS",
                            "Name": COMMON_RULE_SET,
                            # The load balancer shows WAF at most the first 8 KB of a body and this
                            # rule blocks anything longer: counting keeps long prompts flowing.
                            "RuleActionOverrides": [{"Name": BODY_SIZE_RULE, "ActionToUse": {"Count": {}}}],
                        }
                    },
                    managed=True,
                )
            )
        if cfg.known_bad_inputs:
            rules.append(
                self._rule(
                    KNOWN_BAD_INPUTS_RULE_SET,
                    {"ManagedRuleGroupStatement": {"VendorName": "AWS", "Name": KNOWN_BAD_INPUTS_RULE_SET}},
                    managed=True,
                )
            )
        return rules

    def _logging(
        self, retention_days: int, logs_key: kms.IKey | None, removal_policy: cdk.RemovalPolicy
    ) -> logs.CfnLogGroup:
        stack = cdk.Stack.of(self)
        # The stack ID's UUID keeps the name unique per stack instance: a group retained by a
        # deleted stack never collides with the next deployment's.
        stack_uuid = cdk.Fn.select(2, cdk.Fn.split("/", stack.stack_id))
        log_group = logs.CfnLogGroup(
            self,
            "Logs",
            log_group_name=f"{LOG_GROUP_PREFIX}{stack.stack_name}-{stack_uuid}",
            retention_in_days=retention_days,
            kms_key_id=logs_key.key_arn if logs_key else None,
        )
        log_group.apply_removal_policy(removal_policy)
        acknowledge(
            log_group,
            "ControlTower::CT.CLOUDWATCH.PR.2",
            f"The web ACL's logs (each inspected request's client IP, headers and matching rule) are kept "
            f"{retention_days} days to investigate an attack while it matters; the load "
            "balancer's access logs, retained per access_logs.retention_days, are the long record "
            "of every request.",
        )
        # AWS WAF wants the log group ARN without the ':*' suffix that GetAtt Arn carries.
        destination = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=log_group.ref,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        cdk.CfnResource(
            self,
            "Logging",
            type="AWS::WAFv2::LoggingConfiguration",
            properties={
                "ResourceArn": self.web_acl_arn,
                "LogDestinationConfigs": [destination],
                "RedactedFields": [{"SingleHeader": {"Name": h}} for h in REDACTED_HEADERS],
            },
        )
        return log_group


def _validate(config: WafConfig, name: str | None, log_retention_days: int) -> None:
    if not config.enabled:
        raise ValueError(
            "'config.enabled' must be true for InferenceWaf (leave the construct out for no web ACL), "
            "got False"
        )
    if name is not None and not _WEB_ACL_NAME.match(name):
        raise ValueError(f"'name' must be 1-128 letters, digits, '_' or '-' (a web ACL name), got {name!r}")
    if log_retention_days not in LOG_RETENTION_DAYS:
        raise ValueError(
            "'log_retention_days' must be a CloudWatch Logs retention "
            f"({', '.join(map(str, LOG_RETENTION_DAYS))}), got {log_retention_days}"
        )
