"""InferenceNetwork: subnets per AZ, NAT, flow logs, gateway and interface endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from gpufarm.config import FlowLogsConfig, InterfaceEndpoint, NetworkConfig
from gpufarm.constructs import InferenceNetwork
from tests.constructs.helpers import logical_id, new_stack, ref, resources

THREE_AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]


@dataclass(frozen=True)
class Built:
    network: InferenceNetwork
    template: Template
    key: kms.Key | None = None


@pytest.fixture(scope="module")
def main() -> Built:
    """Three AZs, two NAT gateways, flow logs kept 90 days, default endpoints."""
    stack = new_stack("Network")
    key = kms.Key(stack, "LogsKey")
    network = InferenceNetwork(
        stack,
        "Network",
        config=NetworkConfig(nat_gateways=2, flow_logs=FlowLogsConfig(retention_days=90)),
        availability_zones=THREE_AZS,
        logs_key=key,
    )
    # A second request for an existing endpoint must not create another one.
    assert (
        network.add_interface_endpoint(InterfaceEndpoint.STS)
        is network.interface_endpoints[InterfaceEndpoint.STS]
    )
    return Built(network, Template.from_stack(stack), key)


@pytest.fixture(scope="module")
def isolated() -> Built:
    """No NAT, no flow logs, two chosen interface endpoints, a /20."""
    stack = new_stack("Isolated")
    network = InferenceNetwork(
        stack,
        "Network",
        config=NetworkConfig(
            cidr="10.20.0.0/20",
            nat_gateways=0,
            flow_logs=FlowLogsConfig(enabled=False),
            interface_endpoints=[InterfaceEndpoint.STS, InterfaceEndpoint.EKS_AUTH],
        ),
        availability_zones=["us-east-1a", "us-east-1b"],
    )
    return Built(network, Template.from_stack(stack))


@pytest.fixture(scope="module")
def bare() -> Built:
    """No endpoints of either kind."""
    stack = new_stack("Bare")
    network = InferenceNetwork(
        stack,
        "Network",
        config=NetworkConfig(s3_gateway_endpoint=False, interface_endpoints=[]),
        availability_zones=["us-east-1a", "us-east-1b"],
    )
    return Built(network, Template.from_stack(stack))


def _subnets(template: Template, subnet_type: str) -> dict[str, dict[str, Any]]:
    return resources(
        template,
        "AWS::EC2::Subnet",
        {"Tags": Match.array_with([{"Key": "aws-cdk:subnet-type", "Value": subnet_type}])},
    )


def _route_tables_of(template: Template, subnet_ids: set[str]) -> list[dict[str, str]]:
    associations = resources(template, "AWS::EC2::SubnetRouteTableAssociation")
    return sorted(
        (
            a["Properties"]["RouteTableId"]
            for a in associations.values()
            if a["Properties"]["SubnetId"]["Ref"] in subnet_ids
        ),
        key=lambda r: r["Ref"],
    )


# --------------------------------------------------------------------------- layout


def test_vpc_uses_the_configured_cidr(main: Built, isolated: Built) -> None:
    main.template.resource_count_is("AWS::EC2::VPC", 1)
    main.template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.0.0.0/16"})
    isolated.template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.20.0.0/20"})


def test_one_public_and_one_private_subnet_per_az(main: Built) -> None:
    main.template.resource_count_is("AWS::EC2::Subnet", 6)
    for subnet_type in ("Public", "Private"):
        subnets = _subnets(main.template, subnet_type)
        assert sorted(s["Properties"]["AvailabilityZone"] for s in subnets.values()) == THREE_AZS


def test_private_subnets_are_an_eighth_public_ones_a_128th(main: Built, isolated: Built) -> None:
    for built, public_mask, private_mask in ((main, "/23", "/19"), (isolated, "/27", "/23")):
        public = _subnets(built.template, "Public").values()
        private = (
            _subnets(built.template, "Private").values() or _subnets(built.template, "Isolated").values()
        )
        assert {s["Properties"]["CidrBlock"][-3:] for s in public} == {public_mask}
        assert {s["Properties"]["CidrBlock"][-3:] for s in private} == {private_mask}


def test_public_subnets_do_not_assign_public_ips(main: Built) -> None:
    for subnet in _subnets(main.template, "Public").values():
        assert subnet["Properties"]["MapPublicIpOnLaunch"] is False


def test_default_security_group_is_stripped(main: Built) -> None:
    main.template.resource_count_is("Custom::VpcRestrictDefaultSG", 1)


# --------------------------------------------------------------------------- NAT


def test_nat_gateway_count_follows_config(main: Built) -> None:
    main.template.resource_count_is("AWS::EC2::NatGateway", 2)
    main.template.resource_count_is("AWS::EC2::EIP", 2)


def test_private_subnets_route_through_nat(main: Built) -> None:
    private_ids = set(_subnets(main.template, "Private"))
    tables = _route_tables_of(main.template, private_ids)
    assert len(tables) == 3
    for table in tables:
        main.template.has_resource_properties(
            "AWS::EC2::Route",
            {"RouteTableId": table, "DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": Match.any_value()},
        )


def test_no_nat_gateways_makes_private_subnets_isolated(isolated: Built) -> None:
    template = isolated.template
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::EIP", 0)
    assert len(_subnets(template, "Isolated")) == 2
    assert _subnets(template, "Private") == {}
    assert resources(template, "AWS::EC2::Route", {"NatGatewayId": Match.any_value()}) == {}
    isolated_tables = _route_tables_of(template, set(_subnets(template, "Isolated")))
    routes = resources(template, "AWS::EC2::Route").values()
    assert not [r for r in routes if r["Properties"]["RouteTableId"] in isolated_tables]


# --------------------------------------------------------------------------- flow logs


def test_flow_log_records_all_vpc_traffic_to_the_log_group(main: Built) -> None:
    group = main.network.flow_log_group
    assert group is not None
    main.template.resource_count_is("AWS::EC2::FlowLog", 1)
    main.template.has_resource_properties(
        "AWS::EC2::FlowLog",
        {
            "ResourceId": ref(main.network.vpc),
            "ResourceType": "VPC",
            "TrafficType": "ALL",
            "LogDestinationType": "cloud-watch-logs",
            "LogGroupName": ref(group),
        },
    )


def test_flow_log_group_is_kms_encrypted_with_configured_retention(main: Built) -> None:
    assert main.key is not None and main.network.flow_log_group is not None
    main.template.has_resource(
        "AWS::Logs::LogGroup",
        {
            "Properties": {"RetentionInDays": 90, "KmsKeyId": {"Fn::GetAtt": [logical_id(main.key), "Arn"]}},
            "DeletionPolicy": "Retain",
        },
    )
    assert list(resources(main.template, "AWS::Logs::LogGroup")) == [logical_id(main.network.flow_log_group)]


def test_flow_logs_disabled_creates_no_flow_log(isolated: Built) -> None:
    assert isolated.network.flow_log_group is None
    isolated.template.resource_count_is("AWS::EC2::FlowLog", 0)
    isolated.template.resource_count_is("AWS::Logs::LogGroup", 0)


# --------------------------------------------------------------------------- endpoints


@pytest.mark.parametrize(("which", "subnet_type"), [("main", "Private"), ("isolated", "Isolated")])
def test_s3_gateway_endpoint_serves_the_private_route_tables(
    which: str, subnet_type: str, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    private_tables = _route_tables_of(built.template, set(_subnets(built.template, subnet_type)))
    assert private_tables
    gateways = resources(built.template, "AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})
    assert len(gateways) == 1
    (gateway,) = gateways.values()
    assert gateway["Properties"]["ServiceName"] == {
        "Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".s3"]]
    }
    assert sorted(gateway["Properties"]["RouteTableIds"], key=lambda r: r["Ref"]) == private_tables


def test_no_endpoints_when_none_configured(bare: Built) -> None:
    assert bare.network.interface_endpoints == {}
    bare.template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    bare.template.resource_count_is("AWS::EC2::SecurityGroup", 0)


@pytest.mark.parametrize(
    ("which", "services"),
    [
        ("main", ["ecr.api", "ecr.dkr", "logs", "sts"]),
        ("isolated", ["eks-auth", "sts"]),
        ("bare", []),
    ],
)
def test_interface_endpoints_are_exactly_the_configured_ones(
    which: str, services: list[str], request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    endpoints = resources(built.template, "AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Interface"})
    names = sorted(e["Properties"]["ServiceName"] for e in endpoints.values())
    assert names == [f"com.amazonaws.us-east-1.{s}" for s in services]


@pytest.mark.parametrize(("which", "subnet_type"), [("main", "Private"), ("isolated", "Isolated")])
def test_interface_endpoints_have_private_dns_in_private_subnets(
    which: str, subnet_type: str, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    private_refs = sorted(({"Ref": i} for i in _subnets(built.template, subnet_type)), key=lambda r: r["Ref"])
    assert built.network.interface_endpoints
    for endpoint in built.network.interface_endpoints.values():
        props = resources(built.template, "AWS::EC2::VPCEndpoint")[logical_id(endpoint)]["Properties"]
        assert props["PrivateDnsEnabled"] is True
        assert sorted(props["SubnetIds"], key=lambda r: r["Ref"]) == private_refs


@pytest.mark.parametrize(("which", "cidr"), [("main", "10.0.0.0/16"), ("isolated", "10.20.0.0/20")])
def test_endpoint_security_groups_admit_https_from_the_vpc_cidr_only(
    which: str, cidr: str, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    groups = resources(built.template, "AWS::EC2::SecurityGroup")
    assert len(groups) == len(built.network.interface_endpoints)
    for endpoint in built.network.interface_endpoints.values():
        (group,) = endpoint.connections.security_groups
        ingress = groups[logical_id(group)]["Properties"]["SecurityGroupIngress"]
        assert [{k: v for k, v in rule.items() if k != "Description"} for rule in ingress] == [
            {"CidrIp": cidr, "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"}
        ]
    built.template.resource_count_is("AWS::EC2::SecurityGroupIngress", 0)


def test_endpoint_can_admit_only_given_security_groups() -> None:
    stack = new_stack()
    network = InferenceNetwork(
        stack, "Network", config=NetworkConfig(interface_endpoints=[]), availability_zones=THREE_AZS[:2]
    )
    nodes = ec2.SecurityGroup(stack, "Nodes", vpc=network.vpc)
    endpoint = network.add_interface_endpoint(InterfaceEndpoint.BEDROCK_RUNTIME, allow_from=[nodes])
    template = Template.from_stack(stack)
    (props,) = [
        r["Properties"]
        for r in resources(template, "AWS::EC2::VPCEndpoint").values()
        if "bedrock-runtime" in str(r["Properties"]["ServiceName"])
    ]
    assert props["PrivateDnsEnabled"] is True
    (group_id,) = [g["Fn::GetAtt"][0] for g in props["SecurityGroupIds"]]
    group = resources(template, "AWS::EC2::SecurityGroup")[group_id]["Properties"]
    # No CIDR rule: only the node security group may reach the endpoint, on 443.
    assert "SecurityGroupIngress" not in group or all(
        "CidrIp" not in r for r in group["SecurityGroupIngress"]
    )
    (rule,) = [
        r["Properties"]
        for r in resources(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]
    assert (rule["FromPort"], rule["ToPort"]) == (443, 443)
    assert rule["SourceSecurityGroupId"] == {"Fn::GetAtt": [logical_id(nodes), "GroupId"]}
    assert network.add_interface_endpoint(InterfaceEndpoint.BEDROCK_RUNTIME) is endpoint
