"""Network quotas in preflight: what a template creates (gpufarm.aws.network_demand), and the rows
that compare it with the account's quotas and use, against moto.

moto's Service Quotas backend answers `GetServiceQuota` for the `vpc` service with the AWS
defaults (VPCs per Region 5, interface endpoints per VPC 50, rules per security group 60,
security groups per network interface 5) and knows no `ec2` or `elasticloadbalancing` quota;
`applied` seeds an applied value into it, as an account with a raised (or lowered) quota has.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto.servicequotas.models import ServiceQuotasBackend

from gpufarm.aws import network_demand
from gpufarm.aws.network_demand import Count
from gpufarm.aws.preflight import (
    NETWORK_QUOTAS,
    VPCS,
    Check,
    CheckResult,
    QuotaFigures,
    Status,
    check_network_quotas,
    network_quota_checks,
    no_template_row,
)
from gpufarm.config import load_preset
from tests.aws.moto_account import moto_account
from tests.tiers.conftest import enterprise_dir, enterprise_template, poc_dir, poc_template

__all__ = ["enterprise_dir", "enterprise_template", "poc_dir", "poc_template"]

REGION = "us-east-1"


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch) -> Iterator[boto3.Session]:
    """A boto3 session on moto, with fake credentials."""
    with moto_account(monkeypatch, REGION):
        yield boto3.Session(region_name=REGION)


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, str], float]:
    """(service code, quota code) -> an applied value moto's Service Quotas backend returns."""
    values: dict[tuple[str, str], float] = {}
    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: ServiceQuotasBackend, service_code: str, quota_code: str) -> dict[str, Any]:
        if (service_code, quota_code) in values:
            return {
                "ServiceCode": service_code,
                "QuotaCode": quota_code,
                "Value": values[(service_code, quota_code)],
            }
        return original(self, service_code, quota_code)

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    # Quotas moto does not know, at the AWS defaults the documentation lists.
    values[("ec2", "L-0263D0A3")] = 5
    values[("elasticloadbalancing", "L-B22855CB")] = 3000
    values[("elasticloadbalancing", "L-7EED9B64")] = 100
    return values


def check(session: boto3.Session, template: dict[str, Any]) -> dict[str, CheckResult]:
    """The network quota rows for `template`, by quota name."""
    results = check_network_quotas(
        template,
        region=REGION,
        quotas=session.client("service-quotas", region_name=REGION),
        ec2=session.client("ec2", region_name=REGION),
        elbv2=session.client("elbv2", region_name=REGION),
    )
    assert all(r.check is Check.NETWORK_QUOTA for r in results)
    return {r.quota.name if r.quota else r.subject: r for r in results}


# --------------------------------------------------------------------------- template builders


def _sg(logical_id: str, *, inbound: int = 0, outbound: int = 0) -> dict[str, Any]:
    rule = {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "10.0.0.0/16"}
    return {
        logical_id: {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": logical_id,
                "SecurityGroupIngress": [rule] * inbound,
                "SecurityGroupEgress": [rule] * outbound,
            },
        }
    }


def _alb(*, target_groups: int, rules: int) -> dict[str, Any]:
    """An ALB with one listener, `target_groups` target groups and `rules` rules spreading over them."""
    out: dict[str, Any] = {
        "Alb": {"Type": "AWS::ElasticLoadBalancingV2::LoadBalancer", "Properties": {"Type": "application"}},
        "Listener": {
            "Type": "AWS::ElasticLoadBalancingV2::Listener",
            "Properties": {
                "LoadBalancerArn": {"Ref": "Alb"},
                "DefaultActions": [{"Type": "forward", "TargetGroupArn": {"Ref": "Tg0"}}],
            },
        },
    }
    for i in range(target_groups):
        out[f"Tg{i}"] = {
            "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
            "Properties": {"Protocol": "HTTP"},
        }
    for i in range(rules):
        weighted = [{"TargetGroupArn": {"Ref": f"Tg{j}"}} for j in range(1, target_groups)]
        out[f"Rule{i}"] = {
            "Type": "AWS::ElasticLoadBalancingV2::ListenerRule",
            "Properties": {
                "ListenerArn": {"Ref": "Listener"},
                "Actions": [{"Type": "forward", "ForwardConfig": {"TargetGroups": weighted}}],
            },
        }
    return out


def _template(*parts: dict[str, Any]) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for part in parts:
        resources.update(part)
    return {"Resources": resources}


def _vpc_with(endpoints: int, *, eips: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {"Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}}}
    for i in range(eips):
        out[f"Eip{i}"] = {"Type": "AWS::EC2::EIP", "Properties": {"Domain": "vpc"}}
    for i in range(endpoints):
        out[f"Endpoint{i}"] = {
            "Type": "AWS::EC2::VPCEndpoint",
            "Properties": {"VpcId": {"Ref": "Vpc"}, "VpcEndpointType": "Interface"},
        }
    out["S3"] = {
        "Type": "AWS::EC2::VPCEndpoint",
        "Properties": {"VpcId": {"Ref": "Vpc"}, "VpcEndpointType": "Gateway"},
    }
    return out


def _launch_template(groups: int) -> dict[str, Any]:
    return {
        "NodeTemplate": {
            "Type": "AWS::EC2::LaunchTemplate",
            "Properties": {
                "LaunchTemplateData": {
                    "NetworkInterfaces": [{"Groups": [{"Ref": f"Sg{i}"} for i in range(groups)]}]
                }
            },
        }
    }


SMALL = _template(
    _vpc_with(3), _alb(target_groups=2, rules=1), _sg("Sg0", inbound=2, outbound=1), _launch_template(2)
)


# --------------------------------------------------------------------------- counting a template


def test_counts_of_a_small_template() -> None:
    inbound, outbound = network_demand.security_group_rules(SMALL)
    assert (
        network_demand.elastic_ips(SMALL),
        network_demand.vpcs(SMALL),
        network_demand.interface_endpoints_per_vpc(SMALL),
        network_demand.target_groups(SMALL),
        network_demand.target_groups_per_alb(SMALL),
        network_demand.rules_per_alb(SMALL),
        inbound,
        outbound,
        network_demand.security_groups_per_interface(SMALL),
    ) == (
        1,
        1,
        [Count(scope="Vpc", count=3)],
        2,
        [Count(scope="Alb", count=2)],
        [Count(scope="Alb", count=1)],
        [Count(scope="Sg0", count=2)],
        [Count(scope="Sg0", count=1)],
        [Count(scope="NodeTemplate", count=2)],
    )


def test_separate_rules_count_on_their_group_and_geneve_target_groups_do_not_count() -> None:
    template = _template(
        _sg("Sg0", inbound=1),
        {
            "In": {
                "Type": "AWS::EC2::SecurityGroupIngress",
                "Properties": {"GroupId": {"Fn::GetAtt": ["Sg0", "GroupId"]}},
            },
            "ToCluster": {
                "Type": "AWS::EC2::SecurityGroupIngress",
                "Properties": {"GroupId": {"Fn::GetAtt": ["Cluster", "ClusterSecurityGroupId"]}},
            },
            "Out": {
                "Type": "AWS::EC2::SecurityGroupEgress",
                "Properties": {"GroupId": {"Fn::GetAtt": "Sg0.GroupId"}},
            },
            "Geneve": {
                "Type": "AWS::ElasticLoadBalancingV2::TargetGroup",
                "Properties": {"Protocol": "GENEVE"},
            },
            "Gwlb": {"Type": "AWS::ElasticLoadBalancingV2::LoadBalancer", "Properties": {"Type": "gateway"}},
        },
    )
    assert network_demand.security_group_rules(template) == (
        [Count(scope="Cluster.ClusterSecurityGroupId", count=1), Count(scope="Sg0", count=2)],
        [Count(scope="Sg0", count=1)],
    )
    assert (network_demand.target_groups(template), network_demand.target_groups_per_alb(template)) == (0, [])


def test_poc_template_counts_follow_the_preset(poc_template: dict[str, Any]) -> None:
    tier = load_preset("poc")
    (vpc,) = network_demand.interface_endpoints_per_vpc(poc_template)
    (per_alb,) = network_demand.target_groups_per_alb(poc_template)
    (rules,) = network_demand.rules_per_alb(poc_template)
    models = len(list(tier.model_parts()))
    # One EIP per NAT gateway; the configured endpoints plus bedrock-runtime for the gateway; a
    # target group per model plus the gateway's default route, a path rule per model on the client
    # listener and another on the gateway's listener (ADR 0050: the poc gateway calls the routes).
    assert (network_demand.elastic_ips(poc_template), network_demand.vpcs(poc_template)) == (
        tier.network.nat_gateways,
        1,
    )
    assert vpc.count == len(tier.network.interface_endpoints) + 1
    assert (network_demand.target_groups(poc_template), per_alb.count, rules.count) == (
        models + 1,
        models + 1,
        2 * models,
    )


def test_enterprise_template_counts_follow_the_preset(enterprise_template: dict[str, Any]) -> None:
    tier = load_preset("enterprise")
    endpoints = {c.scope: c.count for c in network_demand.interface_endpoints_per_vpc(enterprise_template)}
    zones = len(tier.environment.availability_zones)
    assert network_demand.elastic_ips(enterprise_template) == tier.network.nat_gateways
    # The inspection VPC is the second VPC; the tier VPC holds the configured endpoints, the
    # gateway's bedrock-runtime and a Gateway Load Balancer endpoint per AZ (one quota for both).
    assert network_demand.vpcs(enterprise_template) == 2
    assert sorted(endpoints.values())[-1] == len(tier.network.interface_endpoints) + 1 + zones
    # EFA nodes carry the node security group and the EFA group on each interface.
    (efa,) = [g for g in tier.node_groups if g.efa]
    widest = max(network_demand.security_groups_per_interface(enterprise_template), key=lambda c: c.count)
    assert widest.count == 2
    assert efa.name.replace("-", "").lower() in widest.scope.lower()


# --------------------------------------------------------------------------- rows against moto


def test_a_small_template_passes_every_network_quota(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    rows = check(session, SMALL)
    assert [name for name in rows] == [q.name for q in NETWORK_QUOTAS]
    assert {name: (r.status, r.quota) for name, r in rows.items()} == {
        "EC2-VPC Elastic IPs": (
            Status.PASS,
            QuotaFigures(name="EC2-VPC Elastic IPs", code="L-0263D0A3", limit=5, in_use=0, needed=1),
        ),
        # moto's account has its default VPC.
        "VPCs per Region": (
            Status.PASS,
            QuotaFigures(name="VPCs per Region", code="L-F678F1CE", limit=5, in_use=1, needed=1),
        ),
        "Interface and Gateway Load Balancer endpoints per VPC": (
            Status.PASS,
            QuotaFigures(
                name="Interface and Gateway Load Balancer endpoints per VPC",
                code="L-29B6F2EB",
                limit=50,
                in_use=0,
                needed=3,
            ),
        ),
        "Target Groups per Region": (
            Status.PASS,
            QuotaFigures(name="Target Groups per Region", code="L-B22855CB", limit=3000, in_use=0, needed=2),
        ),
        "Target Groups per Application Load Balancer": (
            Status.PASS,
            QuotaFigures(
                name="Target Groups per Application Load Balancer", code="", limit=100, in_use=0, needed=2
            ),
        ),
        "Rules per Application Load Balancer": (
            Status.PASS,
            QuotaFigures(
                name="Rules per Application Load Balancer", code="L-7EED9B64", limit=100, in_use=0, needed=1
            ),
        ),
        "Inbound or outbound rules per security group": (
            Status.PASS,
            QuotaFigures(
                name="Inbound or outbound rules per security group",
                code="L-0EA8095F",
                limit=60,
                in_use=0,
                needed=2,
            ),
        ),
        "Security groups per network interface": (
            Status.PASS,
            QuotaFigures(
                name="Security groups per network interface", code="L-2AFB9258", limit=5, in_use=0, needed=2
            ),
        ),
    }
    assert rows["EC2-VPC Elastic IPs"].to_dict() == {
        "check": "network-quota",
        "subject": "EC2-VPC Elastic IPs (L-0263D0A3)",
        "status": "pass",
        "message": "limit 5, in use 0, needed 1: AWS::EC2::EIP resources (one per NAT gateway, one per "
        "AZ of an internet-facing NLB)",
        "fix": "",
        "quota": {"name": "EC2-VPC Elastic IPs", "code": "L-0263D0A3", "limit": 5, "in_use": 0, "needed": 1},
    }


def test_the_synthesized_presets_pass_at_the_default_quotas(
    session: boto3.Session,
    applied: dict[tuple[str, str], float],
    poc_template: dict[str, Any],
    enterprise_template: dict[str, Any],
) -> None:
    for template in (poc_template, enterprise_template):
        assert {n: r.status for n, r in check(session, template).items()} == {
            q.name: Status.PASS for q in NETWORK_QUOTAS
        }


def test_elastic_ips_in_use_count_against_the_quota(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    ec2 = session.client("ec2", region_name=REGION)
    for _ in range(3):
        ec2.allocate_address(Domain="vpc")
    row = check(session, _template(_vpc_with(0, eips=3)))["EC2-VPC Elastic IPs"]
    assert (row.status, row.message, row.fix) == (
        Status.FAIL,
        "limit 5, in use 3, needed 3: AWS::EC2::EIP resources (one per NAT gateway, one per AZ of an "
        "internet-facing NLB)",
        "request an increase to at least 6: aws service-quotas request-service-quota-increase "
        "--service-code ec2 --quota-code L-0263D0A3 --desired-value 6 --region us-east-1; or release "
        "Elastic IPs the account no longer uses",
    )


def test_vpcs_in_use_count_against_the_quota(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    ec2 = session.client("ec2", region_name=REGION)
    for i in range(4):
        ec2.create_vpc(CidrBlock=f"10.{i}.0.0/16")
    template = _template(_vpc_with(0), {"Inspection": {"Type": "AWS::EC2::VPC", "Properties": {}}})
    row = check(session, template)["VPCs per Region"]
    assert (row.status, row.message, row.fix) == (
        Status.FAIL,
        "limit 5, in use 5, needed 2: AWS::EC2::VPC resources",
        "request an increase to at least 7: aws service-quotas request-service-quota-increase --service-code "
        "vpc --quota-code L-F678F1CE --desired-value 7 --region us-east-1; or delete VPCs the account no "
        "longer uses",
    )


def test_vpcs_shared_by_other_accounts_are_not_the_accounts_own(session: boto3.Session) -> None:
    page = {
        "Vpcs": [
            {"VpcId": "vpc-1", "OwnerId": "123456789012"},
            {"VpcId": "vpc-2", "OwnerId": "123456789012"},
            {"VpcId": "vpc-3", "OwnerId": "210987654321"},
        ]
    }
    ec2 = boto3.client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    stub.add_response("describe_vpcs", page, {})
    stub.activate()
    checks = dict(
        network_quota_checks(
            SMALL,
            region=REGION,
            quotas=session.client("service-quotas", region_name=REGION),
            ec2=ec2,
            elbv2=session.client("elbv2", region_name=REGION),
            account="123456789012",
        )
    )
    (row,) = checks[VPCS]()
    assert (row.status, row.quota) == (
        Status.PASS,
        QuotaFigures(name="VPCs per Region", code="L-F678F1CE", limit=5, in_use=2, needed=1),
    )


def test_interface_endpoints_over_the_quota_fail(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    row = check(session, _template(_vpc_with(51)))["Interface and Gateway Load Balancer endpoints per VPC"]
    assert (row.status, row.message, row.fix) == (
        Status.FAIL,
        "limit 50, in use 0, needed 51: endpoints on Vpc",
        "request an increase to at least 51: aws service-quotas request-service-quota-increase "
        "--service-code vpc --quota-code L-29B6F2EB --desired-value 51 --region us-east-1",
    )


def test_target_groups_in_use_count_against_the_region_quota(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    applied[("elasticloadbalancing", "L-B22855CB")] = 3
    vpc = session.client("ec2", region_name=REGION).create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    elbv2 = session.client("elbv2", region_name=REGION)
    for i in range(2):
        elbv2.create_target_group(Name=f"existing-{i}", Protocol="HTTP", Port=80, VpcId=vpc, TargetType="ip")
    row = check(session, SMALL)["Target Groups per Region"]
    assert (row.status, row.message, row.fix) == (
        Status.FAIL,
        "limit 3, in use 2, needed 2: ALB and NLB target groups",
        "request an increase to at least 4: aws service-quotas request-service-quota-increase --service-code "
        "elasticloadbalancing --quota-code L-B22855CB --desired-value 4 --region us-east-1; or delete target "
        "groups the account no longer uses",
    )


def test_more_target_groups_than_one_alb_takes_fail(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    applied[("elasticloadbalancing", "L-B22855CB")] = 500
    row = check(session, _template(_alb(target_groups=101, rules=1)))[
        "Target Groups per Application Load Balancer"
    ]
    assert (row.subject, row.status, row.message, row.fix) == (
        "Target Groups per Application Load Balancer (fixed)",
        Status.FAIL,
        "limit 100, in use 0, needed 101: target groups on Alb",
        "this quota cannot be raised (https://docs.aws.amazon.com/elasticloadbalancing/latest/application/"
        "load-balancer-limits.html); serve fewer models and shares behind one load balancer",
    )


def test_listener_rules_over_an_applied_quota_fail(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    applied[("elasticloadbalancing", "L-7EED9B64")] = 2
    row = check(session, _template(_alb(target_groups=2, rules=3)))["Rules per Application Load Balancer"]
    assert (row.status, row.message, row.fix) == (
        Status.FAIL,
        "limit 2, in use 0, needed 3: listener rules on Alb",
        "request an increase to at least 3: aws service-quotas request-service-quota-increase --service-code "
        "elasticloadbalancing --quota-code L-7EED9B64 --desired-value 3 --region us-east-1",
    )


def test_security_group_rules_over_the_quota_fail_on_either_side(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    template = _template(_sg("Wide", inbound=3, outbound=61), _sg("Narrow", inbound=1))
    row = check(session, template)["Inbound or outbound rules per security group"]
    assert (row.status, row.message, row.fix) == (
        Status.FAIL,
        "limit 60, in use 0, needed 61: outbound rules on Wide (the most of 2 security groups)",
        "request an increase to at least 61: aws service-quotas request-service-quota-increase "
        "--service-code vpc --quota-code L-0EA8095F --desired-value 61 --region us-east-1",
    )


def test_security_groups_per_interface_over_the_quota_fail(
    session: boto3.Session, applied: dict[tuple[str, str], float]
) -> None:
    row = check(session, _template(_launch_template(6)))["Security groups per network interface"]
    assert (row.status, row.message, row.fix) == (
        Status.FAIL,
        "limit 5, in use 0, needed 6: security groups on NodeTemplate",
        "request an increase to at least 6: aws service-quotas request-service-quota-increase --service-code "
        "vpc --quota-code L-2AFB9258 --desired-value 6 --region us-east-1",
    )


def test_an_account_without_an_applied_value_reads_the_aws_default(session: boto3.Session) -> None:
    # moto has no GetAWSDefaultServiceQuota: a stubbed client answers for the unapplied quota.
    quotas = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(quotas)
    stub.add_client_error("get_service_quota", "NoSuchResourceException", "no applied value")
    stub.add_response(
        "get_aws_default_service_quota",
        {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3", "Value": 5.0}},
        {"ServiceCode": "ec2", "QuotaCode": "L-0263D0A3"},
    )
    stub.activate()
    (row, *_) = check_network_quotas(
        SMALL,
        region=REGION,
        quotas=quotas,
        ec2=session.client("ec2", region_name=REGION),
        elbv2=session.client("elbv2", region_name=REGION),
    )
    assert (row.subject, row.status, row.quota) == (
        "EC2-VPC Elastic IPs (L-0263D0A3)",
        Status.PASS,
        QuotaFigures(name="EC2-VPC Elastic IPs", code="L-0263D0A3", limit=5, in_use=0, needed=1),
    )


def test_a_denied_quota_api_warns_for_that_quota_only(session: boto3.Session) -> None:
    quotas = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(quotas)
    stub.add_client_error("get_service_quota", "AccessDeniedException", "not authorized")
    for code, service, value in [
        ("L-F678F1CE", "vpc", 5.0),
        ("L-29B6F2EB", "vpc", 50.0),
        ("L-B22855CB", "elasticloadbalancing", 3000.0),
        ("L-7EED9B64", "elasticloadbalancing", 100.0),
        ("L-0EA8095F", "vpc", 60.0),
        ("L-2AFB9258", "vpc", 5.0),
    ]:
        stub.add_response(
            "get_service_quota",
            {"Quota": {"ServiceCode": service, "QuotaCode": code, "Value": value}},
            {"ServiceCode": service, "QuotaCode": code},
        )
    stub.activate()
    results = check_network_quotas(
        SMALL,
        region=REGION,
        quotas=quotas,
        ec2=session.client("ec2", region_name=REGION),
        elbv2=session.client("elbv2", region_name=REGION),
    )
    stub.assert_no_pending_responses()
    assert [(r.subject, r.status) for r in results][:2] == [
        ("EC2-VPC Elastic IPs (L-0263D0A3): permissions", Status.WARN),
        ("VPCs per Region (L-F678F1CE)", Status.PASS),
    ]
    assert results[0].fix == (
        "allow servicequotas:GetServiceQuota, servicequotas:GetAWSDefaultServiceQuota, "
        "ec2:DescribeAddresses, ec2:DescribeVpcs, elasticloadbalancing:DescribeTargetGroups to the caller"
    )
    assert [r.status for r in results[1:]] == [Status.PASS] * 7


def test_without_a_template_preflight_says_how_to_give_one() -> None:
    row = no_template_row(load_preset("poc"))
    assert (row.check, row.subject, row.status, row.message, row.fix) == (
        Check.NETWORK_QUOTA,
        "network quotas",
        Status.WARN,
        "not checked: Elastic IPs, VPCs, endpoints, target groups, listener rules and security groups are "
        "counted from the synthesized template",
        "run `gpufarm synth` for the tier and give --template cdk.out/gpufarm-poc.template.json",
    )
