"""TrafficInspection: GWLB appliances in an inspection VPC, endpoints and ingress routing in the app VPC."""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Match, Template

from gpufarm.config import FlowLogsConfig, NetworkConfig
from gpufarm.config.model import ApplianceConfig, CompliancePack, InspectionConfig
from gpufarm.constructs import InferenceNetwork, enable_compliance_checks
from gpufarm.constructs._util import acknowledge
from gpufarm.constructs.compliance import require_compliance_pack
from gpufarm.constructs.inspection import TrafficInspection, endpoint_subnet_cidrs
from gpufarm.constructs.inspection_appliance import GENEVE_REFLECTOR, REFLECTOR_PATH, REFLECTOR_SERVICE
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import REGION, logical_id, new_stack, ref, resources

THREE_AZS = ["us-east-1a", "us-east-1b", "us-east-1c"]
TWO_AZS = THREE_AZS[:2]
VENDOR_AMI = "ami-0123456789abcdef0"
SSM_CORE = {
    "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonSSMManagedInstanceCore"]]
}
AL2023_PARAMETER_TYPE = "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"


@dataclass(frozen=True)
class Built:
    inspection: TrafficInspection
    network: InferenceNetwork
    template: Template
    missing_context: Any = None
    key: kms.Key | None = None


def _network(stack: cdk.Stack, zones: list[str], **config: Any) -> InferenceNetwork:
    return InferenceNetwork(
        stack,
        "Network",
        config=NetworkConfig(nat_gateways=len(zones), interface_endpoints=[], **config),
        availability_zones=zones,
    )


@pytest.fixture(scope="module")
def main() -> Built:
    """Three AZs, a NAT gateway each, default appliances (Amazon Linux 2023 forwarders)."""
    stack = new_stack("Inspection")
    key = kms.Key(stack, "LogsKey")
    network = _network(stack, THREE_AZS)
    inspection = TrafficInspection(
        stack,
        "Inspection",
        app_vpc=network.vpc,
        config=InspectionConfig(enabled=True),
        availability_zones=THREE_AZS,
        logs_key=key,
    )
    outdir = Path(typing.cast(cdk.App, stack.node.root).synth().directory)
    template = Template.from_json(json.loads((outdir / f"{stack.artifact_id}.template.json").read_text()))
    missing = json.loads((outdir / "manifest.json").read_text()).get("missing")
    return Built(inspection, network, template, missing, key)


@pytest.fixture(scope="module")
def vendor() -> Built:
    """Two AZs, a vendor AMI on /dev/sda1, health checks on 8008, flow logs kept 90 days."""
    stack = new_stack("Vendor")
    network = _network(stack, TWO_AZS, cidr="10.20.0.0/20")
    inspection = TrafficInspection(
        stack,
        "Inspection",
        app_vpc=network.vpc,
        config=InspectionConfig(
            enabled=True,
            cidr="192.168.100.0/24",
            appliances=ApplianceConfig(
                ami_id=VENDOR_AMI,
                instance_type="c6in.xlarge",
                min_size=3,
                max_size=3,
                health_check_port=8008,
                root_device_name="/dev/sda1",
            ),
        ),
        availability_zones=TWO_AZS,
        flow_log_retention_days=90,
    )
    return Built(inspection, network, Template.from_stack(stack))


def _props(built: Built, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = built.template.to_json()["Resources"][logical_id(construct)]["Properties"]
    return found


def _launch_data(built: Built) -> dict[str, Any]:
    data: dict[str, Any] = _props(built, built.inspection.launch_template)["LaunchTemplateData"]
    return data


def _public_subnets(built: Built) -> list[ec2.ISubnet]:
    return list(built.network.vpc.public_subnets)


def _by_ref(items: list[dict[str, str]]) -> list[dict[str, str]]:
    return sorted(items, key=lambda r: r["Ref"])


# --------------------------------------------------------------------------- inspection VPC


def test_inspection_vpc_has_the_configured_cidr_and_one_isolated_subnet_per_zone(main: Built) -> None:
    vpc = main.inspection.inspection_vpc
    assert _props(main, vpc)["CidrBlock"] == "10.250.0.0/20"
    subnets = vpc.isolated_subnets
    assert [s.availability_zone for s in subnets] == THREE_AZS
    assert [s.ipv4_cidr_block for s in subnets] == ["10.250.0.0/22", "10.250.4.0/22", "10.250.8.0/22"]
    assert vpc.public_subnets == [] and vpc.private_subnets == []


def test_inspection_vpc_has_no_route_to_the_internet(main: Built) -> None:
    # The only internet gateway and NAT gateways are the application VPC's.
    main.template.resource_count_is("AWS::EC2::InternetGateway", 1)
    main.template.resource_count_is("AWS::EC2::NatGateway", 3)
    (attachment,) = resources(main.template, "AWS::EC2::VPCGatewayAttachment").values()
    assert attachment["Properties"]["VpcId"] == ref(main.network.vpc)


def test_inspection_vpc_flow_logs_go_to_a_kms_encrypted_retained_group(main: Built, vendor: Built) -> None:
    group = main.inspection.flow_log_group
    assert main.key is not None
    main.template.has_resource_properties(
        "AWS::EC2::FlowLog",
        {"ResourceId": ref(main.inspection.inspection_vpc), "TrafficType": "ALL", "LogGroupName": ref(group)},
    )
    resource = main.template.to_json()["Resources"][logical_id(group)]
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["Properties"]["RetentionInDays"] == 30
    assert resource["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [logical_id(main.key), "Arn"]}
    assert _props(vendor, vendor.inspection.flow_log_group)["RetentionInDays"] == 90


def test_session_manager_endpoints_serve_the_appliance_subnets(main: Built) -> None:
    vpc = main.inspection.inspection_vpc
    endpoints = resources(main.template, "AWS::EC2::VPCEndpoint", {"VpcId": ref(vpc)})
    names = sorted(e["Properties"]["ServiceName"] for e in endpoints.values())
    assert names == [f"com.amazonaws.{REGION}.{s}" for s in ("ec2messages", "ssm", "ssmmessages")]
    subnets = _by_ref([ref(s) for s in vpc.isolated_subnets])
    for endpoint in endpoints.values():
        assert endpoint["Properties"]["PrivateDnsEnabled"] is True
        assert _by_ref(endpoint["Properties"]["SubnetIds"]) == subnets


# --------------------------------------------------------------------------- load balancer


def test_gateway_load_balancer_spans_the_appliance_subnets_across_zones(main: Built) -> None:
    props = _props(main, main.inspection.gateway_load_balancer)
    assert props["Type"] == "gateway"
    assert props["Subnets"] == [ref(s) for s in main.inspection.inspection_vpc.isolated_subnets]
    assert props["LoadBalancerAttributes"] == [{"Key": "load_balancing.cross_zone.enabled", "Value": "true"}]
    assert "Scheme" not in props and "SecurityGroups" not in props


def test_target_group_is_geneve_6081_on_instances_with_a_tcp_health_check(main: Built, vendor: Built) -> None:
    props = _props(main, main.inspection.target_group)
    assert (props["Protocol"], props["Port"], props["TargetType"]) == ("GENEVE", 6081, "instance")
    assert props["VpcId"] == ref(main.inspection.inspection_vpc)
    assert (props["HealthCheckProtocol"], props["HealthCheckPort"]) == ("TCP", "80")
    assert _props(vendor, vendor.inspection.target_group)["HealthCheckPort"] == "8008"


def test_flows_of_a_failed_or_removed_appliance_are_rehashed(main: Built) -> None:
    attributes = {
        a["Key"]: a["Value"] for a in _props(main, main.inspection.target_group)["TargetGroupAttributes"]
    }
    assert attributes["target_failover.on_deregistration"] == "rebalance"
    assert attributes["target_failover.on_unhealthy"] == "rebalance"
    assert attributes["deregistration_delay.timeout_seconds"] == "300"


def test_listener_forwards_everything_to_the_target_group(main: Built) -> None:
    props = _props(main, main.inspection.listener)
    assert props == {
        "LoadBalancerArn": ref(main.inspection.gateway_load_balancer),
        "DefaultActions": [{"Type": "forward", "TargetGroupArn": ref(main.inspection.target_group)}],
    }


# --------------------------------------------------------------------------- appliances


def test_auto_scaling_group_sizes_come_from_config(main: Built, vendor: Built) -> None:
    props = _props(main, main.inspection.appliances)
    assert (props["MinSize"], props["MaxSize"]) == ("2", "4")
    assert "DesiredCapacity" not in props
    vendor_props = _props(vendor, vendor.inspection.appliances)
    assert (vendor_props["MinSize"], vendor_props["MaxSize"]) == ("3", "3")


def test_appliances_register_with_the_target_group_and_use_elb_health(main: Built) -> None:
    resource = main.template.to_json()["Resources"][logical_id(main.inspection.appliances)]
    props = resource["Properties"]
    assert props["TargetGroupARNs"] == [ref(main.inspection.target_group)]
    assert (props["HealthCheckType"], props["HealthCheckGracePeriod"]) == ("ELB", 300)
    assert props["VPCZoneIdentifier"] == [ref(s) for s in main.inspection.inspection_vpc.isolated_subnets]
    assert props["LaunchTemplate"] == {
        "LaunchTemplateId": ref(main.inspection.launch_template),
        "Version": {"Fn::GetAtt": [logical_id(main.inspection.launch_template), "LatestVersionNumber"]},
    }
    assert logical_id(main.inspection.listener) in resource["DependsOn"]


def test_appliances_scale_on_cpu(main: Built) -> None:
    main.template.has_resource_properties(
        "AWS::AutoScaling::ScalingPolicy",
        {
            "AutoScalingGroupName": ref(main.inspection.appliances),
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingConfiguration": {
                "PredefinedMetricSpecification": {"PredefinedMetricType": "ASGAverageCPUUtilization"},
                "TargetValue": 60,
            },
        },
    )


@pytest.mark.parametrize(("which", "in_service"), [("main", 2), ("vendor", 2)])
def test_a_new_launch_template_replaces_one_appliance_at_a_time(
    which: str, in_service: int, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    resource = built.template.to_json()["Resources"][logical_id(built.inspection.appliances)]
    rolling = resource["UpdatePolicy"]["AutoScalingRollingUpdate"]
    # In service stays below MaxSize (CloudFormation's rule), so min == max still rolls.
    assert (rolling["MaxBatchSize"], rolling["MinInstancesInService"], rolling["PauseTime"]) == (
        1,
        in_service,
        "PT3M",
    )


def test_launch_template_requires_imdsv2_and_gives_no_public_ip(main: Built) -> None:
    data = _launch_data(main)
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpTokens": "required",
        "HttpPutResponseHopLimit": 1,
    }
    (interface,) = data["NetworkInterfaces"]
    assert interface["AssociatePublicIpAddress"] is False
    assert interface["Groups"] == [{"Fn::GetAtt": [logical_id(main.inspection.security_group), "GroupId"]}]
    assert data["InstanceType"] == "c6in.large"
    assert data["Monitoring"] == {"Enabled": True}


@pytest.mark.parametrize(("which", "device"), [("main", "/dev/xvda"), ("vendor", "/dev/sda1")])
def test_root_volume_is_encrypted_gp3_sized_by_the_ami(
    which: str, device: str, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(which)
    assert _launch_data(built)["BlockDeviceMappings"] == [
        {"DeviceName": device, "Ebs": {"Encrypted": True, "VolumeType": "gp3", "DeleteOnTermination": True}}
    ]


def test_instance_role_has_session_manager_core_only(main: Built) -> None:
    role = _props(main, main.inspection.role)
    assert role["ManagedPolicyArns"] == [SSM_CORE]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert "Policies" not in role
    attached = [
        p
        for p in resources(main.template, "AWS::IAM::Policy").values()
        if ref(main.inspection.role) in p["Properties"]["Roles"]
    ]
    assert attached == []
    main.template.has_resource_properties("AWS::IAM::InstanceProfile", {"Roles": [ref(main.inspection.role)]})


def test_appliance_security_group_admits_geneve_and_health_checks_from_the_inspection_vpc(
    main: Built,
) -> None:
    props = _props(main, main.inspection.security_group)

    def rules(key: str, peer: str) -> set[tuple[str, int, int, str]]:
        return {(r["IpProtocol"], r["FromPort"], r["ToPort"], r[peer]) for r in props[key]}

    cidr = "10.250.0.0/20"
    assert rules("SecurityGroupIngress", "CidrIp") == {("udp", 6081, 6081, cidr), ("tcp", 80, 80, cidr)}
    assert rules("SecurityGroupEgress", "CidrIp") == {("udp", 6081, 6081, cidr), ("tcp", 443, 443, cidr)}


def test_default_appliances_run_the_latest_al2023_resolved_at_deploy_time(main: Built) -> None:
    parameters = main.template.to_json()["Parameters"]
    (name,) = [n for n, p in parameters.items() if p["Type"] == AL2023_PARAMETER_TYPE]
    assert parameters[name]["Default"].startswith("/aws/service/ami-amazon-linux-latest/al2023-ami-")
    assert parameters[name]["Default"].endswith("-x86_64")
    assert _launch_data(main)["ImageId"] == {"Ref": name}
    # No context lookup: synth needs no credentials.
    assert not main.missing_context


def test_a_graviton_appliance_type_gets_the_arm64_image() -> None:
    stack = new_stack("Graviton")
    network = _network(stack, TWO_AZS)
    TrafficInspection(
        stack,
        "Inspection",
        app_vpc=network.vpc,
        config=InspectionConfig(appliances=ApplianceConfig(instance_type="c7gn.large")),
        availability_zones=TWO_AZS,
    )
    parameters = Template.from_stack(stack).to_json()["Parameters"]
    (image,) = [p for p in parameters.values() if p["Type"] == AL2023_PARAMETER_TYPE]
    assert image["Default"].endswith("-arm64")


def test_default_appliances_install_the_geneve_reflector_as_a_service(main: Built) -> None:
    script = _launch_data(main)["UserData"]["Fn::Base64"]
    assert isinstance(script, str) and script.startswith("#!/bin/bash\nset -euo pipefail\n")
    assert f"cat > {REFLECTOR_PATH} <<'REFLECTOR'\n{GENEVE_REFLECTOR}REFLECTOR\n" in script
    assert f"ExecStart=/usr/bin/python3 {REFLECTOR_PATH} 80\n" in script
    assert "Restart=always\n" in script
    assert script.endswith(f"systemctl enable --now {REFLECTOR_SERVICE}\n")


def test_a_vendor_ami_runs_as_is(vendor: Built) -> None:
    data = _launch_data(vendor)
    assert data["ImageId"] == VENDOR_AMI
    assert "UserData" not in data
    assert "Parameters" not in vendor.template.to_json() or not [
        p for p in vendor.template.to_json()["Parameters"].values() if p["Type"] == AL2023_PARAMETER_TYPE
    ]


# --------------------------------------------------------------------------- endpoint service


def test_endpoint_service_offers_the_load_balancer_to_this_account_without_acceptance(main: Built) -> None:
    assert _props(main, main.inspection.endpoint_service) == {
        "GatewayLoadBalancerArns": [ref(main.inspection.gateway_load_balancer)],
        "AcceptanceRequired": False,
    }
    assert _props(main, main.inspection.endpoint_service_permissions) == {
        "ServiceId": ref(main.inspection.endpoint_service),
        "AllowedPrincipals": [
            {
                "Fn::Join": [
                    "",
                    ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"],
                ]
            }
        ],
    }


# --------------------------------------------------------------------------- application VPC


def test_one_gwlb_endpoint_per_zone_in_its_own_subnet_of_the_app_vpc(main: Built) -> None:
    endpoints = main.inspection.endpoints
    assert list(endpoints) == THREE_AZS
    service = {
        "Fn::Join": [
            "",
            ["com.amazonaws.vpce.", {"Ref": "AWS::Region"}, ".", ref(main.inspection.endpoint_service)],
        ]
    }
    main.template.resource_count_is("AWS::EC2::VPCEndpoint", 3 + 3 + 1)  # GWLB, SSM, S3 gateway
    for zone, endpoint in endpoints.items():
        resource = main.template.to_json()["Resources"][logical_id(endpoint)]
        subnet = main.inspection.endpoint_subnets[zone]
        assert resource["Properties"] == {
            "VpcId": ref(main.network.vpc),
            "VpcEndpointType": "GatewayLoadBalancer",
            "ServiceName": service,
            "SubnetIds": [ref(subnet)],
        }
        assert _props(main, subnet)["AvailabilityZone"] == zone
        # The same-account permission exists before an endpoint asks to connect.
        assert resource["DependsOn"] == [logical_id(main.inspection.endpoint_service_permissions)]


def test_endpoint_subnets_are_the_top_28s_of_the_app_vpc(main: Built, vendor: Built) -> None:
    cidrs = [_props(main, main.inspection.endpoint_subnets[z])["CidrBlock"] for z in THREE_AZS]
    assert cidrs == ["10.0.255.208/28", "10.0.255.224/28", "10.0.255.240/28"]
    vendor_cidrs = [_props(vendor, vendor.inspection.endpoint_subnets[z])["CidrBlock"] for z in TWO_AZS]
    assert vendor_cidrs == ["10.20.15.224/28", "10.20.15.240/28"]
    for subnet in main.inspection.endpoint_subnets.values():
        props = _props(main, subnet)
        assert props["VpcId"] == ref(main.network.vpc)
        assert props["MapPublicIpOnLaunch"] is False


def test_endpoint_subnet_cidrs_take_the_highest_blocks() -> None:
    assert endpoint_subnet_cidrs("10.1.0.0/20", 2) == ["10.1.15.224/28", "10.1.15.240/28"]


def test_endpoint_subnets_send_inspected_traffic_to_the_internet_gateway(main: Built) -> None:
    igw = main.network.vpc.internet_gateway_id
    associations = resources(main.template, "AWS::EC2::SubnetRouteTableAssociation")
    subnet_ids = {logical_id(s) for s in main.inspection.endpoint_subnets.values()}
    tables = {
        a["Properties"]["RouteTableId"]["Ref"]
        for a in associations.values()
        if a["Properties"]["SubnetId"]["Ref"] in subnet_ids
    }
    (table,) = tables
    routes = [
        r
        for r in resources(main.template, "AWS::EC2::Route").values()
        if r["Properties"]["RouteTableId"] == {"Ref": table}
    ]
    assert [r["Properties"] for r in routes] == [
        {
            "RouteTableId": {"Ref": table},
            "DestinationCidrBlock": "0.0.0.0/0",
            "GatewayId": main.network.vpc.stack.resolve(igw),
        }
    ]


def test_edge_route_table_is_associated_with_the_internet_gateway(main: Built) -> None:
    association = _props(main, main.inspection.edge_association)
    assert association == {
        "GatewayId": main.network.vpc.stack.resolve(main.network.vpc.internet_gateway_id),
        "RouteTableId": ref(main.inspection.edge_route_table),
    }


def test_edge_routes_send_each_public_subnet_to_its_zone_endpoint(main: Built) -> None:
    edge = ref(main.inspection.edge_route_table)
    routes = [
        r["Properties"] for r in resources(main.template, "AWS::EC2::Route", {"RouteTableId": edge}).values()
    ]
    expected = [
        {
            "RouteTableId": edge,
            "DestinationCidrBlock": s.ipv4_cidr_block,
            "VpcEndpointId": ref(main.inspection.endpoints[s.availability_zone]),
        }
        for s in _public_subnets(main)
    ]
    key = itemgetter("DestinationCidrBlock")
    assert sorted(routes, key=key) == sorted(expected, key=key)
    assert [e["DestinationCidrBlock"] for e in expected] == ["10.0.0.0/23", "10.0.2.0/23", "10.0.4.0/23"]


def test_public_subnets_default_routes_lead_to_their_zone_endpoint(main: Built) -> None:
    for subnet in _public_subnets(main):
        route = subnet.node.find_child("DefaultRoute")
        assert _props(main, route) == {
            "RouteTableId": main.template.to_json()["Resources"][logical_id(route)]["Properties"][
                "RouteTableId"
            ],
            "DestinationCidrBlock": "0.0.0.0/0",
            "VpcEndpointId": ref(main.inspection.endpoints[subnet.availability_zone]),
        }
    assert resources(main.template, "AWS::EC2::Route", {"GatewayId": Match.any_value()}).keys() == {
        logical_id(main.inspection.node.find_child("EndpointDefaultRoute"))
    }


def test_private_subnets_still_reach_the_internet_through_nat(main: Built) -> None:
    nat_routes = resources(main.template, "AWS::EC2::Route", {"NatGatewayId": Match.any_value()})
    assert len(nat_routes) == 3


def test_routes_to_the_internet_gateway_wait_for_its_attachment(main: Built) -> None:
    attachment = logical_id(main.network.vpc.node.find_child("VPCGW"))
    resources_ = main.template.to_json()["Resources"]
    for construct in (
        main.inspection.edge_association,
        main.inspection.node.find_child("EndpointDefaultRoute"),
    ):
        assert attachment in resources_[logical_id(construct)]["DependsOn"]


def test_traffic_turns_to_the_endpoints_only_after_the_appliances_group(main: Built) -> None:
    group = logical_id(main.inspection.appliances)
    edge = ref(main.inspection.edge_route_table)
    switched = [
        *resources(main.template, "AWS::EC2::Route", {"RouteTableId": edge}),
        *[logical_id(s.node.find_child("DefaultRoute")) for s in _public_subnets(main)],
        logical_id(main.inspection.edge_association),
    ]
    resources_ = main.template.to_json()["Resources"]
    assert len(switched) == 7
    for resource in switched:
        assert group in resources_[resource]["DependsOn"]


# --------------------------------------------------------------------------- invalid input


def _build(**overrides: Any) -> TrafficInspection:
    stack = new_stack("Invalid")
    vpc = overrides.pop("app_vpc", None)
    kwargs: dict[str, Any] = {
        "app_vpc": vpc(stack) if vpc else _network(stack, TWO_AZS).vpc,
        "config": InspectionConfig(enabled=True),
        "availability_zones": TWO_AZS,
        **overrides,
    }
    return TrafficInspection(stack, "Inspection", **kwargs)


def _default_vpc(stack: cdk.Stack) -> ec2.Vpc:
    return ec2.Vpc(stack, "Vpc", ip_addresses=ec2.IpAddresses.cidr("10.0.0.0/16"), availability_zones=TWO_AZS)


def _isolated_vpc(stack: cdk.Stack) -> ec2.Vpc:
    return ec2.Vpc(
        stack,
        "Vpc",
        availability_zones=TWO_AZS,
        nat_gateways=0,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="Only", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        ],
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"config": InspectionConfig(cidr="10.0.128.0/20")},
            "'config.cidr' must not overlap the application VPC (10.0.0.0/16), got 10.0.128.0/20",
        ),
        (
            {"availability_zones": THREE_AZS},
            "'availability_zones' must be the zones of the application VPC's public subnets "
            "(us-east-1a, us-east-1b), one endpoint each, got us-east-1a, us-east-1b, us-east-1c",
        ),
        (
            {"availability_zones": ["us-east-1a", "us-east-1a"]},
            "'availability_zones' must be the zones of the application VPC's public subnets "
            "(us-east-1a, us-east-1b), one endpoint each, got us-east-1a, us-east-1a",
        ),
        (
            {"config": InspectionConfig(appliances=ApplianceConfig(min_size=5, max_size=4))},
            "'config.appliances.min_size' must be at most max_size (4), got 5",
        ),
        (
            {"config": InspectionConfig(cidr="10.250.0.0/28")},
            "'config.cidr' must leave a /28 or larger per zone (2 zones), got 10.250.0.0/28",
        ),
        (
            {"config": InspectionConfig(appliances=ApplianceConfig(root_device_name="/dev/sda1"))},
            "'root_device_name' must be '/dev/xvda' (Amazon Linux 2023's) unless ami_id names another "
            "image, got '/dev/sda1'",
        ),
        (
            {"flow_log_retention_days": 31},
            "'flow_log_retention_days' must be a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, "
            "120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653), got 31",
        ),
        (
            {"app_vpc": _default_vpc},
            "'app_vpc' must leave the top of 10.0.0.0/16 free for the GWLB endpoint subnets "
            "(10.0.255.224/28, 10.0.255.240/28), got subnet 10.0.192.0/18 (Invalid/Vpc/PrivateSubnet2)",
        ),
        (
            {"app_vpc": _isolated_vpc},
            "'app_vpc' must have an internet gateway (public subnets), got a VPC without one",
        ),
    ],
    ids=[
        "cidr-overlaps-app-vpc",
        "zone-count-mismatch",
        "duplicate-zone",
        "min-above-max",
        "cidr-too-small",
        "root-device-without-ami",
        "retention",
        "no-room-for-endpoint-subnets",
        "no-internet-gateway",
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        _build(**overrides)
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- compliance gates


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The network and the inspection, synthesized with the AwsSolutions and NIST 800-53 R5 packs."""
    outdir = tmp_path_factory.mktemp("inspection-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "InspectionNag", env=cdk.Environment(region=REGION))
    require_compliance_pack(stack, CompliancePack.NIST_800_53_R5)
    key = kms.Key(stack, "LogsKey", enable_key_rotation=True)
    network = InferenceNetwork(
        stack,
        "Network",
        config=NetworkConfig(nat_gateways=2, flow_logs=FlowLogsConfig(retention_days=365)),
        availability_zones=TWO_AZS,
        logs_key=key,
    )
    acknowledge(
        network.vpc.node.find_child("FlowLog"),
        "NIST.800.53.R5-IAMNoInlinePolicy",
        "Test scaffolding: the application VPC's flow log role is not under test here.",
    )
    TrafficInspection(
        stack,
        "Inspection",
        app_vpc=network.vpc,
        config=InspectionConfig(enabled=True),
        availability_zones=TWO_AZS,
        logs_key=key,
    )
    app.synth()  # raises when a pack reports an unacknowledged finding
    return outdir / "InspectionNag.template.json"


def test_inspection_passes_cdk_nag(compliant_template: Path) -> None:
    # The fixture's synth raises on an unacknowledged finding; the report must be empty too.
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_inspection_template_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    assert cfn_lint_errors(compliant_template) == []
