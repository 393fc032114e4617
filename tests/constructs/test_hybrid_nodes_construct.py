"""HybridNodes: the hybrid nodes role and its trust, the HYBRID_LINUX access entry, routes, and
security group rules; SSM hybrid activations and IAM Roles Anywhere; cdk-nag and cfn-lint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from gpufarm.config.model import HybridNodesConfig
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.hybrid_nodes import SSM_ACTIVATION_TAG, HybridNodes
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import (
    AZS,
    REGION,
    imported_cluster,
    logical_id,
    new_stack,
    partition_arn,
    resources,
)

ANCHOR = "arn:aws:rolesanywhere:us-east-1:210987654321:trust-anchor/0f8f2bc4-8b2a-4c1e-9a57-1b2c3d4e5f60"
NODE_CIDR = "192.168.0.0/20"
POD_CIDR = "192.168.64.0/18"


def _config(**fields: Any) -> HybridNodesConfig:
    base: dict[str, Any] = {
        "enabled": True,
        "remote_node_cidrs": [NODE_CIDR],
        "remote_pod_cidrs": [POD_CIDR],
        "gateway_id": "tgw-0a1b2c3d4e5f60718",
    }
    return HybridNodesConfig.model_validate({**base, **fields})


def _build(stack: cdk.Stack, config: HybridNodesConfig, vpc: ec2.IVpc | None = None) -> HybridNodes:
    vpc = vpc or ec2.Vpc(stack, "Vpc", availability_zones=AZS, nat_gateways=1)
    cluster_sg = ec2.SecurityGroup(stack, "ClusterSg", vpc=vpc, description="EKS cluster security group")
    return HybridNodes(
        stack,
        "HybridNodes",
        cluster=imported_cluster(stack),
        cluster_security_group=cluster_sg,
        vpc=vpc,
        config=config,
    )


def _template(config: HybridNodesConfig) -> tuple[Template, HybridNodes]:
    stack = new_stack()
    built = _build(stack, config)
    return Template.from_stack(stack), built


@pytest.fixture(scope="module")
def ssm() -> tuple[Template, HybridNodes]:
    return _template(_config())


@pytest.fixture(scope="module")
def roles_anywhere() -> tuple[Template, HybridNodes]:
    return _template(_config(credential_provider="iam-roles-anywhere", trust_anchor_arn=ANCHOR))


def _role(built: tuple[Template, HybridNodes]) -> dict[str, Any]:
    template, hybrid = built
    props: dict[str, Any] = resources(template, "AWS::IAM::Role")[logical_id(hybrid.role)]["Properties"]
    return props


def _statements(template: Template) -> list[dict[str, Any]]:
    (policy,) = resources(template, "AWS::IAM::ManagedPolicy").values()
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_ssm_role_is_assumed_by_systems_manager_of_this_account_and_region(
    ssm: tuple[Template, HybridNodes],
) -> None:
    # hybrid-nodes-creds.adoc, the SSM trust policy: ssm.amazonaws.com, SourceAccount and SourceArn.
    (statement,) = _role(ssm)["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "ssm.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnEquals": {
            "aws:SourceArn": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":ssm:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        ":*",
                    ],
                ]
            }
        },
    }


def test_ssm_role_has_the_managed_policies_the_guide_attaches(ssm: tuple[Template, HybridNodes]) -> None:
    assert _role(ssm)["ManagedPolicyArns"] == [
        partition_arn(":iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"),
        partition_arn(":iam::aws:policy/AmazonSSMManagedInstanceCore"),
    ]


def test_ssm_policy_describes_this_cluster_and_deregisters_only_its_activation(
    ssm: tuple[Template, HybridNodes],
) -> None:
    statements = {s["Action"]: s for s in _statements(ssm[0])}
    assert set(statements) == {
        "eks:DescribeCluster",
        "eks-auth:AssumeRoleForPodIdentity",
        "ssm:DescribeInstanceInformation",
        "ssm:DeregisterManagedInstance",
    }
    cluster_arn = statements["eks:DescribeCluster"]["Resource"]
    assert "gpufarm-test" in str(cluster_arn)
    assert statements["eks-auth:AssumeRoleForPodIdentity"]["Resource"] == cluster_arn
    deregister = statements["ssm:DeregisterManagedInstance"]
    assert deregister["Condition"] == {"StringEquals": {f"ssm:resourceTag/{SSM_ACTIVATION_TAG}": cluster_arn}}


def test_access_entry_is_hybrid_linux_without_policies(ssm: tuple[Template, HybridNodes]) -> None:
    template, built = ssm
    (entry,) = resources(template, "AWS::EKS::AccessEntry").values()
    assert entry["Properties"]["Type"] == "HYBRID_LINUX"
    assert entry["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [logical_id(built.role), "Arn"]}
    assert "AccessPolicies" not in entry["Properties"]


def test_every_private_route_table_sends_both_networks_to_the_transit_gateway(
    ssm: tuple[Template, HybridNodes],
) -> None:
    routes = [
        r["Properties"]
        for r in resources(ssm[0], "AWS::EC2::Route").values()
        if r["Properties"].get("DestinationCidrBlock") in (NODE_CIDR, POD_CIDR)
    ]
    # Two AZs, one private route table each, two remote CIDRs.
    assert len(routes) == 4
    assert {r["TransitGatewayId"] for r in routes} == {"tgw-0a1b2c3d4e5f60718"}
    assert all("GatewayId" not in r for r in routes)
    assert len({str(r["RouteTableId"]) for r in routes}) == 2


def test_cluster_security_group_admits_https_and_dns(ssm: tuple[Template, HybridNodes]) -> None:
    (group,) = [
        g
        for g in resources(ssm[0], "AWS::EC2::SecurityGroup").values()
        if g["Properties"]["GroupDescription"] == "EKS cluster security group"
    ]
    rules = {
        (r["CidrIp"], r["IpProtocol"], r["FromPort"]) for r in group["Properties"]["SecurityGroupIngress"]
    }
    # hybrid-nodes-networking.adoc, cluster security group: 443 from node and pod CIDRs; DNS for
    # pods on hybrid nodes that reach CoreDNS in the VPC.
    assert rules == {
        (NODE_CIDR, "tcp", 443),
        (POD_CIDR, "tcp", 443),
        (POD_CIDR, "udp", 53),
        (POD_CIDR, "tcp", 53),
    }


def test_virtual_private_gateway_routes_use_gateway_id() -> None:
    template, _ = _template(_config(gateway_id="vgw-0a1b2c3d4e5f60718"))
    routes = [
        r["Properties"]
        for r in resources(template, "AWS::EC2::Route").values()
        if r["Properties"].get("DestinationCidrBlock") == NODE_CIDR
    ]
    assert {r["GatewayId"] for r in routes} == {"vgw-0a1b2c3d4e5f60718"}
    assert all("TransitGatewayId" not in r for r in routes)


def test_roles_anywhere_trust_is_the_anchor_and_the_certificate_cn(
    roles_anywhere: tuple[Template, HybridNodes],
) -> None:
    # hybrid-nodes-creds.adoc, the IAM Roles Anywhere trust policy, both statements.
    statements = _role(roles_anywhere)["AssumeRolePolicyDocument"]["Statement"]
    by_action = {json_key(s["Action"]): s for s in statements}
    assume = by_action["sts:AssumeRole"]
    assert assume["Principal"] == {"Service": "rolesanywhere.amazonaws.com"}
    assert assume["Condition"] == {
        "StringEquals": {"sts:RoleSessionName": "${aws:PrincipalTag/x509Subject/CN}"},
        "ArnEquals": {"aws:SourceArn": ANCHOR},
    }
    tags = by_action["sts:SetSourceIdentity,sts:TagSession"]
    assert tags["Condition"] == {"ArnEquals": {"aws:SourceArn": ANCHOR}}


def test_roles_anywhere_role_has_no_ssm_permissions(roles_anywhere: tuple[Template, HybridNodes]) -> None:
    template = roles_anywhere[0]
    assert _role(roles_anywhere)["ManagedPolicyArns"] == [
        partition_arn(":iam::aws:policy/AmazonEC2ContainerRegistryPullOnly")
    ]
    assert {s["Action"] for s in _statements(template)} == {
        "eks:DescribeCluster",
        "eks-auth:AssumeRoleForPodIdentity",
    }


def json_key(action: str | list[str]) -> str:
    return action if isinstance(action, str) else ",".join(sorted(action))


@pytest.mark.parametrize("provider", ["ssm", "iam-roles-anywhere"])
def test_passes_cdk_nag_and_cfn_lint(provider: str, tmp_path: Path) -> None:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "HybridNag", env=cdk.Environment(region=REGION))
    anchor = {"trust_anchor_arn": ANCHOR} if provider != "ssm" else {}
    # An existing VPC: the stack under test creates only what HybridNodes creates.
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=AZS,
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        private_subnet_route_table_ids=["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"],
    )
    _build(stack, _config(credential_provider=provider, **anchor), vpc)
    app.synth()  # raises on an unacknowledged cdk-nag finding or a deploy-rule breach
    assert nag_violations(tmp_path, annotations=False) == {}
    assert cfn_lint_errors(tmp_path / "HybridNag.template.json") == []
