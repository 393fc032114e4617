"""The network quota check: what the synthesized template creates against the account's quotas
and what the account already uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpufarm.aws import network_demand
from gpufarm.aws.network_demand import Count
from gpufarm.aws.preflight.calls import _guarded, _quota_value
from gpufarm.aws.preflight.results import Check, CheckResult, QuotaFigures, Status
from gpufarm.config import TierConfig

# --------------------------------------------------------------------------- check: network quotas

VPC_QUOTAS_DOC = "https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html"
ENDPOINT_QUOTAS_DOC = "https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-limits-endpoints.html"
ALB_QUOTAS_DOC = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-limits.html"
)


@dataclass(frozen=True, kw_only=True)
class AccountQuota:
    """A quota on what the tier's network creates: in Service Quotas (`service_code`, `code`), or
    fixed (`code` empty, `fixed_value` from the AWS documentation)."""

    name: str
    service_code: str
    code: str
    doc: str
    """The AWS documentation page that lists the quota and its code."""
    fixed_value: int | None = None


# Names, codes and defaults as the AWS documentation lists them (each quota's `doc`): the Amazon VPC
# quotas page (Elastic IPs L-0263D0A3 under service `ec2`; VPCs, security groups under `vpc`), the
# PrivateLink quotas page (interface and Gateway Load Balancer endpoints per VPC share L-29B6F2EB),
# and the Application Load Balancer quotas page (target groups per region L-B22855CB, shared by
# ALBs and NLBs; rules per ALB L-7EED9B64, default rules excluded; target groups per ALB: 100, not
# adjustable, so not in Service Quotas).
ELASTIC_IPS = AccountQuota(
    name="EC2-VPC Elastic IPs", service_code="ec2", code="L-0263D0A3", doc=VPC_QUOTAS_DOC
)
VPCS = AccountQuota(name="VPCs per Region", service_code="vpc", code="L-F678F1CE", doc=VPC_QUOTAS_DOC)
INTERFACE_ENDPOINTS = AccountQuota(
    name="Interface and Gateway Load Balancer endpoints per VPC",
    service_code="vpc",
    code="L-29B6F2EB",
    doc=ENDPOINT_QUOTAS_DOC,
)
TARGET_GROUPS = AccountQuota(
    name="Target Groups per Region",
    service_code="elasticloadbalancing",
    code="L-B22855CB",
    doc=ALB_QUOTAS_DOC,
)
TARGET_GROUPS_PER_ALB = AccountQuota(
    name="Target Groups per Application Load Balancer",
    service_code="elasticloadbalancing",
    code="",
    doc=ALB_QUOTAS_DOC,
    fixed_value=100,
)
RULES_PER_ALB = AccountQuota(
    name="Rules per Application Load Balancer",
    service_code="elasticloadbalancing",
    code="L-7EED9B64",
    doc=ALB_QUOTAS_DOC,
)
SECURITY_GROUP_RULES = AccountQuota(
    name="Inbound or outbound rules per security group",
    service_code="vpc",
    code="L-0EA8095F",
    doc=VPC_QUOTAS_DOC,
)
SECURITY_GROUPS_PER_INTERFACE = AccountQuota(
    name="Security groups per network interface", service_code="vpc", code="L-2AFB9258", doc=VPC_QUOTAS_DOC
)
NETWORK_QUOTAS: tuple[AccountQuota, ...] = (
    ELASTIC_IPS,
    VPCS,
    INTERFACE_ENDPOINTS,
    TARGET_GROUPS,
    TARGET_GROUPS_PER_ALB,
    RULES_PER_ALB,
    SECURITY_GROUP_RULES,
    SECURITY_GROUPS_PER_INTERFACE,
)
"""The network quotas preflight compares with the template, in the order it reports them."""


def _limit(quota: AccountQuota, quotas: Any) -> int:
    if quota.fixed_value is not None:
        return quota.fixed_value
    return int(_quota_value(quotas, quota.code, quota.service_code))


def _quota_row(
    quota: AccountQuota, *, region: str, limit: int, in_use: int, needed: int, detail: str, release: str = ""
) -> CheckResult:
    """One row: pass when what is in use plus what the tier needs fits the limit."""
    figures = QuotaFigures(name=quota.name, code=quota.code, limit=limit, in_use=in_use, needed=needed)
    subject = f"{quota.name} ({quota.code or 'fixed'})"
    message = f"limit {limit}, in use {in_use}, needed {needed}: {detail}"
    if in_use + needed <= limit:
        return CheckResult(
            check=Check.NETWORK_QUOTA, subject=subject, status=Status.PASS, message=message, quota=figures
        )
    if quota.fixed_value is not None:
        fix = f"this quota cannot be raised ({quota.doc}); {release}"
    else:
        fix = (
            f"request an increase to at least {in_use + needed}: aws service-quotas "
            f"request-service-quota-increase --service-code {quota.service_code} --quota-code "
            f"{quota.code} --desired-value {in_use + needed} --region {region}"
            + (f"; or {release}" if release else "")
        )
    return CheckResult(
        check=Check.NETWORK_QUOTA,
        subject=subject,
        status=Status.FAIL,
        message=message,
        fix=fix,
        quota=figures,
    )


def _largest(counts: list[Count], what: str, scope: str) -> tuple[int, str]:
    """The largest count and how to say where it is."""
    if not counts:
        return 0, f"the template creates no {scope}"
    top = max(counts, key=lambda c: c.count)
    others = f" (the most of {len(counts)} {scope}s)" if len(counts) > 1 else ""
    return top.count, f"{what} on {top.scope}{others}"


def network_quota_checks(
    template: Mapping[str, Any], *, region: str, quotas: Any, ec2: Any, elbv2: Any, account: str | None = None
) -> list[tuple[AccountQuota, Callable[[], list[CheckResult]]]]:
    """One check per network quota: what `template` creates against the account's quota and use.

    Elastic IPs, VPCs and target groups per region also count what the account already has
    (`DescribeAddresses`, `DescribeVpcs`, `DescribeTargetGroups`); the other quotas apply to each
    new VPC, load balancer, security group or network interface, which starts empty. With
    `account`, VPCs that other accounts share with it are not counted as its own (assumed to count
    against their owner's quota; the Amazon VPC quotas page does not say).
    """

    def elastic_ips() -> list[CheckResult]:
        needed = network_demand.elastic_ips(template)
        in_use = len(ec2.describe_addresses().get("Addresses", []))
        return [
            _quota_row(
                ELASTIC_IPS,
                region=region,
                limit=_limit(ELASTIC_IPS, quotas),
                in_use=in_use,
                needed=needed,
                detail="AWS::EC2::EIP resources (one per NAT gateway, one per AZ of an internet-facing NLB)",
                release="release Elastic IPs the account no longer uses",
            )
        ]

    def vpcs() -> list[CheckResult]:
        needed = network_demand.vpcs(template)
        in_use = sum(
            1
            for page in ec2.get_paginator("describe_vpcs").paginate()
            for vpc in page.get("Vpcs", [])
            if account is None or vpc.get("OwnerId", account) == account
        )
        return [
            _quota_row(
                VPCS,
                region=region,
                limit=_limit(VPCS, quotas),
                in_use=in_use,
                needed=needed,
                detail="AWS::EC2::VPC resources",
                release="delete VPCs the account no longer uses",
            )
        ]

    def endpoints() -> list[CheckResult]:
        needed, where = _largest(network_demand.interface_endpoints_per_vpc(template), "endpoints", "VPC")
        limit = _limit(INTERFACE_ENDPOINTS, quotas)
        return [
            _quota_row(INTERFACE_ENDPOINTS, region=region, limit=limit, in_use=0, needed=needed, detail=where)
        ]

    def target_groups() -> list[CheckResult]:
        needed = network_demand.target_groups(template)
        in_use = sum(
            1
            for page in elbv2.get_paginator("describe_target_groups").paginate()
            for group in page.get("TargetGroups", [])
            if group.get("Protocol") != "GENEVE"
        )
        return [
            _quota_row(
                TARGET_GROUPS,
                region=region,
                limit=_limit(TARGET_GROUPS, quotas),
                in_use=in_use,
                needed=needed,
                detail="ALB and NLB target groups",
                release="delete target groups the account no longer uses",
            )
        ]

    def per_alb() -> list[CheckResult]:
        needed, where = _largest(
            network_demand.target_groups_per_alb(template), "target groups", "load balancer"
        )
        return [
            _quota_row(
                TARGET_GROUPS_PER_ALB,
                region=region,
                limit=_limit(TARGET_GROUPS_PER_ALB, quotas),
                in_use=0,
                needed=needed,
                detail=where,
                release="serve fewer models and shares behind one load balancer",
            )
        ]

    def rules() -> list[CheckResult]:
        needed, where = _largest(network_demand.rules_per_alb(template), "listener rules", "load balancer")
        limit = _limit(RULES_PER_ALB, quotas)
        return [_quota_row(RULES_PER_ALB, region=region, limit=limit, in_use=0, needed=needed, detail=where)]

    def group_rules() -> list[CheckResult]:
        inbound, outbound = network_demand.security_group_rules(template)
        most_in, where_in = _largest(inbound, "inbound rules", "security group")
        most_out, where_out = _largest(outbound, "outbound rules", "security group")
        # The quota is enforced for inbound and outbound rules apart: the larger side decides.
        needed, where = (most_in, where_in) if most_in >= most_out else (most_out, where_out)
        limit = _limit(SECURITY_GROUP_RULES, quotas)
        return [
            _quota_row(
                SECURITY_GROUP_RULES, region=region, limit=limit, in_use=0, needed=needed, detail=where
            )
        ]

    def per_interface() -> list[CheckResult]:
        needed, where = _largest(
            network_demand.security_groups_per_interface(template), "security groups", "resource"
        )
        limit = _limit(SECURITY_GROUPS_PER_INTERFACE, quotas)
        return [
            _quota_row(
                SECURITY_GROUPS_PER_INTERFACE,
                region=region,
                limit=limit,
                in_use=0,
                needed=needed,
                detail=where,
            )
        ]

    return [
        (ELASTIC_IPS, elastic_ips),
        (VPCS, vpcs),
        (INTERFACE_ENDPOINTS, endpoints),
        (TARGET_GROUPS, target_groups),
        (TARGET_GROUPS_PER_ALB, per_alb),
        (RULES_PER_ALB, rules),
        (SECURITY_GROUP_RULES, group_rules),
        (SECURITY_GROUPS_PER_INTERFACE, per_interface),
    ]


def check_network_quotas(
    template: Mapping[str, Any], *, region: str, quotas: Any, ec2: Any, elbv2: Any, account: str | None = None
) -> list[CheckResult]:
    """Every network quota row; an AWS error other than credentials turns that quota into a warning."""
    rows: list[CheckResult] = []
    checks = network_quota_checks(
        template, region=region, quotas=quotas, ec2=ec2, elbv2=elbv2, account=account
    )
    for quota, run in checks:
        found = _guarded(Check.NETWORK_QUOTA, run)
        rows += [
            r
            if r.quota is not None
            else replace(r, subject=f"{quota.name} ({quota.code or 'fixed'}): {r.subject}")
            for r in found
        ]
    return rows


def no_template_row(tier: TierConfig) -> CheckResult:
    """The warning when preflight has no template to count the network resources from."""
    return CheckResult(
        check=Check.NETWORK_QUOTA,
        subject="network quotas",
        status=Status.WARN,
        message="not checked: Elastic IPs, VPCs, endpoints, target groups, listener rules and "
        "security groups are counted from the synthesized template",
        fix=f"run `gpufarm synth` for the tier and give --template cdk.out/{tier.stack_name}.template.json",
    )
