"""Amazon EC2 and VPC: rules the EC2 API enforces on networks, gateways, routes, endpoints,
security groups, launch templates and capacity reservations."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.checks import (
    exactly_one_check,
    is_set,
    items,
    literal_strs,
    name_check,
    network,
    port_range_problems,
    tags_check,
)
from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str, ref_target
from gpufarm.deploy_rules.shapes import resource as _res

VPC = "AWS::EC2::VPC"
SUBNET = "AWS::EC2::Subnet"
SECURITY_GROUP = "AWS::EC2::SecurityGroup"
INGRESS = "AWS::EC2::SecurityGroupIngress"
EGRESS = "AWS::EC2::SecurityGroupEgress"
EIP = "AWS::EC2::EIP"
NAT_GATEWAY = "AWS::EC2::NatGateway"
INTERNET_GATEWAY = "AWS::EC2::InternetGateway"
GATEWAY_ATTACHMENT = "AWS::EC2::VPCGatewayAttachment"
ROUTE = "AWS::EC2::Route"
ROUTE_TABLE = "AWS::EC2::RouteTable"
SUBNET_ASSOCIATION = "AWS::EC2::SubnetRouteTableAssociation"
GATEWAY_ASSOCIATION = "AWS::EC2::GatewayRouteTableAssociation"
ENDPOINT = "AWS::EC2::VPCEndpoint"
ENDPOINT_SERVICE = "AWS::EC2::VPCEndpointService"
ENDPOINT_PERMISSIONS = "AWS::EC2::VPCEndpointServicePermissions"
FLOW_LOG = "AWS::EC2::FlowLog"
LAUNCH_TEMPLATE = "AWS::EC2::LaunchTemplate"
CAPACITY_RESERVATION = "AWS::EC2::CapacityReservation"

_API = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/"
_VPC_GUIDE = "https://docs.aws.amazon.com/vpc/latest/userguide/"
_CFN = "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
_TAGS_DOC = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions"

VPC_ID = "vpc-0123456789abcdef0"
SUBNET_ID = "subnet-0123456789abcdef0"


# --- CIDR blocks --------------------------------------------------------------------------


def _prefix_between(low: int, high: int) -> Any:
    """An IPv4 CidrBlock whose prefix length is /low to /high."""

    def check(resource: Resource, _: Template) -> Iterator[str]:
        block = network(resource.prop("CidrBlock"))
        if block is not None and block.version == 4 and not low <= block.prefixlen <= high:
            yield f"CidrBlock {block}: the block size must be between /{low} and /{high}"

    return check


# A subnet outside its VPC's block, or overlapping a sibling, is left to cfn-lint: E3059 and
# E3060 already report both when the VPC and its subnets are in one template.


# --- security groups ----------------------------------------------------------------------

# API_IpRange / API_UserIdGroupPair, Description: "Constraints: Up to 255 characters in length.
# Allowed characters are a-z, A-Z, 0-9, spaces, and ._-:/()#,@[]+=;{}!$*" (no "&", unlike the
# group description).
_RULE_DESCRIPTION = re.compile(r"[A-Za-z0-9 ._\-:/()#,@\[\]+=;{}!$*]*")


def _rule_description(rule: Any, where: str) -> Iterator[str]:
    text = literal_str(rule.get("Description")) if isinstance(rule, dict) else None
    if text is None:
        return
    if len(text) > 255:
        yield f"{where}: Description is {len(text)} characters; at most 255"
    if not _RULE_DESCRIPTION.fullmatch(text):
        bad = sorted({c for c in text if not _RULE_DESCRIPTION.fullmatch(c)})
        yield f"{where}: Description {text!r} has characters the API refuses: {''.join(bad)!r}"


def _inline_rules(resource: Resource) -> Iterator[tuple[str, Any]]:
    for prop in ("SecurityGroupIngress", "SecurityGroupEgress"):
        for index, rule in enumerate(items(resource.prop(prop))):
            yield f"{prop}[{index}]", rule


def _sg_rule_descriptions(resource: Resource, _: Template) -> Iterator[str]:
    if resource.type == SECURITY_GROUP:
        for where, rule in _inline_rules(resource):
            yield from _rule_description(rule, where)
    else:
        yield from _rule_description(dict(resource.properties), "rule")


def _sg_rule_ports(resource: Resource, _: Template) -> Iterator[str]:
    if resource.type == SECURITY_GROUP:
        for where, rule in _inline_rules(resource):
            yield from port_range_problems(rule, where)
    else:
        yield from port_range_problems(dict(resource.properties), "rule")


# --- gateways, routes, associations -------------------------------------------------------


def _nat_allocation(resource: Resource, _: Template) -> Iterator[str]:
    # AWS::EC2::NatGateway AllocationId: "[Public NAT gateway only] ... This property is required
    # for a public NAT gateway and cannot be specified with a private NAT gateway." A regional
    # (multi-AZ) NAT gateway takes its addresses per zone instead, so it is left alone.
    connectivity = literal_str(resource.prop("ConnectivityType")) or "public"
    has_eip = is_set(resource.prop("AllocationId"))
    if connectivity == "private" and has_eip:
        yield "a private NAT gateway cannot have an Elastic IP (AllocationId)"
    zonal = (literal_str(resource.prop("AvailabilityMode")) or "zonal") == "zonal"
    if connectivity == "public" and zonal and not has_eip:
        yield "a public NAT gateway needs an Elastic IP (AllocationId)"


_ROUTE_TARGETS = (
    "CarrierGatewayId",
    "CoreNetworkArn",
    "EgressOnlyInternetGatewayId",
    "GatewayId",
    "InstanceId",
    "LocalGatewayId",
    "NatGatewayId",
    "NetworkInterfaceId",
    "TransitGatewayId",
    "VpcEndpointId",
    "VpcPeeringConnectionId",
)
_SERVICE_BACKENDS = ("GatewayLoadBalancerArns", "NetworkLoadBalancerArns")
_ROUTE_DESTINATIONS = ("DestinationCidrBlock", "DestinationIpv6CidrBlock", "DestinationPrefixListId")


def _vpc_of(logical_id: str | None, template: Template) -> str | None:
    resource = template.get(logical_id)
    return ref_target(resource.prop("VpcId")) if resource is not None else None


def _association_same_vpc(resource: Resource, template: Template) -> Iterator[str]:
    # AssociateRouteTable: "The subnet and route table must be in the same VPC."
    subnet_id = ref_target(resource.prop("SubnetId"))
    table_id = ref_target(resource.prop("RouteTableId"))
    subnet_vpc, table_vpc = _vpc_of(subnet_id, template), _vpc_of(table_id, template)
    if subnet_vpc and table_vpc and subnet_vpc != table_vpc:
        yield f"subnet {subnet_id} is in {subnet_vpc} but route table {table_id} in {table_vpc}"


def _gateway_association_vpc(resource: Resource, template: Template) -> Iterator[str]:
    # AssociateRouteTable, GatewayId: the internet or virtual private gateway to associate with
    # a route table "in your VPC": the gateway must be attached to the route table's VPC.
    gateway, table = ref_target(resource.prop("GatewayId")), ref_target(resource.prop("RouteTableId"))
    table_vpc = _vpc_of(table, template)
    if gateway is None or table_vpc is None:
        return
    attached = {
        ref_target(a.prop("VpcId"))
        for a in template.of_type(GATEWAY_ATTACHMENT)
        if gateway in {ref_target(a.prop("InternetGatewayId")), ref_target(a.prop("VpnGatewayId"))}
    }
    if attached and table_vpc not in attached:
        yield f"gateway {gateway} is attached to {', '.join(sorted(map(str, attached)))}, not to {table_vpc}"


# --- endpoints ------------------------------------------------------------------------------

# CreateVpcEndpoint: PolicyDocument "(Interface and gateway endpoints)", PrivateDnsEnabled
# "(Interface endpoint)", RouteTableId "(Gateway endpoint)", SecurityGroupId "(Interface
# endpoint)", SubnetId "(Interface and Gateway Load Balancer endpoints)".
_ENDPOINT_PROPERTIES = {
    "PolicyDocument": {"Interface", "Gateway"},
    "PrivateDnsEnabled": {"Interface"},
    "RouteTableIds": {"Gateway"},
    "SecurityGroupIds": {"Interface"},
    "SubnetIds": {"Interface", "GatewayLoadBalancer"},
}


_ENDPOINT_KINDS = {"Gateway", "Interface", "GatewayLoadBalancer"}


def _endpoint_properties(resource: Resource, _: Template) -> Iterator[str]:
    kind = literal_str(resource.prop("VpcEndpointType")) or "Gateway"
    if kind not in _ENDPOINT_KINDS:
        return  # Resource and ServiceNetwork endpoints have their own rules, not judged here
    for prop, kinds in _ENDPOINT_PROPERTIES.items():
        if kind not in kinds and is_set(resource.prop(prop)):
            yield f"{prop} on a {kind} endpoint: only {' and '.join(sorted(kinds))} endpoints take it"


_PRINCIPAL = re.compile(r"\*|arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:(\d{12})?:.+")


def _principals(resource: Resource, _: Template) -> Iterator[str]:
    # ModifyVpcEndpointServicePermissions, AddAllowedPrincipals: "The Amazon Resource Names (ARN)
    # of the principals ... To grant permissions to all principals, specify an asterisk (*)."
    for principal in literal_strs(resource.prop("AllowedPrincipals")):
        if not _PRINCIPAL.fullmatch(principal):
            hint = f" (an account is arn:aws:iam::{principal}:root)" if principal.isdigit() else ""
            yield f"allowed principal {principal!r} is not an ARN or *{hint}"


# --- flow logs, launch templates, capacity reservations ------------------------------------


def _flow_log_role(resource: Resource, _: Template) -> Iterator[str]:
    # AWS::EC2::FlowLog DeliverLogsPermissionArn: "This parameter is required if the destination
    # type is cloud-watch-logs and unsupported otherwise."
    destination = literal_str(resource.prop("LogDestinationType")) or "cloud-watch-logs"
    has_role = is_set(resource.prop("DeliverLogsPermissionArn"))
    if destination == "cloud-watch-logs" and not has_role:
        yield "a flow log to CloudWatch Logs needs DeliverLogsPermissionArn"
    if destination != "cloud-watch-logs" and has_role:
        yield f"DeliverLogsPermissionArn is not supported for a {destination} destination"


USER_DATA_MAX = 16 * 1024


def _user_data_bytes(value: Any) -> int | None:
    """The raw size of user data known at synth: the lower bound of a joined template."""
    if isinstance(value, dict) and set(value) == {"Fn::Base64"}:
        inner = value["Fn::Base64"]
        if isinstance(inner, str):
            return len(inner.encode())
        join = inner.get("Fn::Join") if isinstance(inner, dict) else None
        if isinstance(join, list) and len(join) == 2 and isinstance(join[1], list):
            return sum(len(p.encode()) for p in join[1] if isinstance(p, str))
        return None
    if isinstance(value, str):
        try:
            return len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            return None
    return None


def _user_data_size(resource: Resource, _: Template) -> Iterator[str]:
    # EC2 user guide: "User data is limited to 16 KB, in raw form, before it is base64-encoded."
    data = resource.prop("LaunchTemplateData")
    size = _user_data_bytes(data.get("UserData")) if isinstance(data, dict) else None
    if size is not None and size > USER_DATA_MAX:
        yield f"user data is at least {size} bytes; EC2 takes at most {USER_DATA_MAX} before base64"


def _capacity_block_market(resource: Resource, _: Template) -> Iterator[str]:
    # EC2 user guide, Capacity Blocks: in the launch template "set MarketType to capacity-block"
    # and, "to target the Capacity Block reservation, for CapacityReservationID, specify the
    # Capacity Block reservation ID".
    data = resource.prop("LaunchTemplateData")
    if not isinstance(data, dict):
        return
    market = data.get("InstanceMarketOptions")
    if not isinstance(market, dict) or literal_str(market.get("MarketType")) != "capacity-block":
        return
    spec = data.get("CapacityReservationSpecification")
    target = spec.get("CapacityReservationTarget") if isinstance(spec, dict) else None
    if not isinstance(target, dict) or not is_set(target.get("CapacityReservationId")):
        yield (
            "MarketType capacity-block needs "
            "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"
        )


def _end_date(resource: Resource, _: Template) -> Iterator[str]:
    # CreateCapacityReservation, EndDateType: "unlimited ... Do not provide an EndDate if the
    # EndDateType is unlimited. limited ... You must provide an EndDate value if the EndDateType
    # value is limited."
    kind = literal_str(resource.prop("EndDateType")) or "unlimited"
    has_date = is_set(resource.prop("EndDate"))
    if kind == "unlimited" and has_date:
        yield "EndDate given with EndDateType unlimited"
    if kind == "limited" and not has_date:
        yield "EndDateType limited needs an EndDate"


def _instance_count(resource: Resource, _: Template) -> Iterator[str]:
    # CreateCapacityReservation, InstanceCount: "Valid range: 1 - 1000".
    count = literal_int(resource.prop("InstanceCount"))
    if count is not None and not 1 <= count <= 1000:
        yield f"InstanceCount {count}: a reservation holds 1 to 1000 instances"


# --- example templates ------------------------------------------------------------------


def _vpc_and_subnets(*blocks: str, vpc: str = "10.0.0.0/16") -> dict[str, Any]:
    doc: dict[str, Any] = {"Vpc": _res(VPC, CidrBlock=vpc)}
    for i, block in enumerate(blocks):
        doc[f"Subnet{i}"] = _res(SUBNET, VpcId={"Ref": "Vpc"}, CidrBlock=block)
    return doc


def _sg(description: str = "model servers", **rule: Any) -> dict[str, Any]:
    ingress = {"IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8000, "CidrIp": "10.0.0.0/16", **rule}
    return {
        "Sg": _res(SECURITY_GROUP, GroupDescription=description, VpcId=VPC_ID, SecurityGroupIngress=[ingress])
    }


def _ingress(**rule: Any) -> dict[str, Any]:
    base = {"GroupId": "sg-0123456789abcdef0", "IpProtocol": "tcp", "FromPort": 988, "ToPort": 988}
    return {"Rule": _res(INGRESS, **{"CidrIp": "10.0.0.0/16", **base, **rule})}


def _egress(**rule: Any) -> dict[str, Any]:
    base = {"GroupId": "sg-0123456789abcdef0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443}
    return {"Rule": _res(EGRESS, **{"CidrIp": "0.0.0.0/0", **base, **rule})}


def _tags(count: int) -> list[dict[str, str]]:
    return [{"Key": f"team-{i}", "Value": "gpu"} for i in range(count)]


def _routing(subnet_vpc: str) -> dict[str, Any]:
    return {
        "VpcA": _res(VPC, CidrBlock="10.0.0.0/16"),
        "VpcB": _res(VPC, CidrBlock="10.1.0.0/16"),
        "Subnet": _res(SUBNET, VpcId={"Ref": subnet_vpc}, CidrBlock=f"10.{subnet_vpc == 'VpcB':d}.0.0/24"),
        "Table": _res(ROUTE_TABLE, VpcId={"Ref": "VpcA"}),
        "Assoc": _res(SUBNET_ASSOCIATION, SubnetId={"Ref": "Subnet"}, RouteTableId={"Ref": "Table"}),
    }


def _edge(attached_to: str) -> dict[str, Any]:
    return {
        "VpcA": _res(VPC, CidrBlock="10.0.0.0/16"),
        "VpcB": _res(VPC, CidrBlock="10.1.0.0/16"),
        "Igw": _res(INTERNET_GATEWAY),
        "Attach": _res(GATEWAY_ATTACHMENT, VpcId={"Ref": attached_to}, InternetGatewayId={"Ref": "Igw"}),
        "Edge": _res(ROUTE_TABLE, VpcId={"Ref": "VpcA"}),
        "EdgeAssoc": _res(GATEWAY_ASSOCIATION, GatewayId={"Ref": "Igw"}, RouteTableId={"Ref": "Edge"}),
    }


def _endpoint(kind: str, **props: Any) -> dict[str, Any]:
    return {
        "Ep": _res(
            ENDPOINT, VpcId=VPC_ID, ServiceName="com.amazonaws.us-east-1.s3", VpcEndpointType=kind, **props
        )
    }


def _flow_log(**props: Any) -> dict[str, Any]:
    return {"Fl": _res(FLOW_LOG, ResourceId=VPC_ID, ResourceType="VPC", TrafficType="ALL", **props)}


def _launch_template(**data: Any) -> dict[str, Any]:
    return {"Lt": _res(LAUNCH_TEMPLATE, LaunchTemplateData={"InstanceType": "p5.48xlarge", **data})}


def _reservation(**props: Any) -> dict[str, Any]:
    base = {
        "AvailabilityZone": "us-east-1a",
        "InstanceCount": 1,
        "InstancePlatform": "Linux/UNIX",
        "InstanceType": "p5.48xlarge",
    }
    return {"Cr": _res(CAPACITY_RESERVATION, **{**base, **props})}


def _tag_rule(rule_id: str, resource_type: str, title: str, **props: Any) -> Rule:
    # EC2 tag restrictions: "Maximum number of tags per resource - 50", key "128 Unicode
    # characters", value "256 Unicode characters", and the aws: prefix is reserved.
    return Rule(
        id=rule_id,
        resource_type=resource_type,
        title=title,
        doc_url=_TAGS_DOC,
        check=tags_check,
        bad={"R": _res(resource_type, **props, Tags=_tags(51))},
        good={"R": _res(resource_type, **props, Tags=_tags(50))},
    )


def _sg_rules(
    prefix: str,
    resource_type: str,
    example: Any,
    descriptions: tuple[str, str],
    ports: tuple[tuple[int, int], tuple[int, int]],
) -> tuple[Rule, Rule]:
    """The description and port-range rules of a security group (inline rules) or of one rule."""
    (bad_from, bad_to), (good_from, good_to) = ports
    return (
        Rule(
            id=f"{prefix}-RULE-DESCRIPTION",
            resource_type=resource_type,
            title="Rule descriptions: up to 255 characters from a-z A-Z 0-9 space ._-:/()#,@[]+=;{}!$*",
            doc_url=_API + "API_IpRange.html",
            check=_sg_rule_descriptions,
            bad=example(Description=descriptions[0]),
            good=example(Description=descriptions[1]),
        ),
        Rule(
            id=f"{prefix}-RULE-PORTS",
            resource_type=resource_type,
            title="tcp/udp rules: ports 0-65535, FromPort no higher than ToPort",
            doc_url=_API + "API_IpPermission.html",
            check=_sg_rule_ports,
            bad=example(FromPort=bad_from, ToPort=bad_to),
            good=example(FromPort=good_from, ToPort=good_to),
        ),
    )


_TAGS_TITLE = "At most 50 tags, keys up to 128 and values up to 256 characters, no aws: prefix"
_CAPACITY_BLOCK = {"InstanceMarketOptions": {"MarketType": "capacity-block"}}

RULES: tuple[Rule, ...] = (
    Rule(
        # CreateVpc: "The smallest VPC you can create uses a /28 netmask (16 IP addresses), and
        # the largest uses a /16 netmask (65,536 IP addresses)."
        id="EC2-VPC-CIDR-SIZE",
        resource_type=VPC,
        title="A VPC's IPv4 block is /16 to /28",
        doc_url=_VPC_GUIDE + "vpc-cidr-blocks.html",
        check=_prefix_between(16, 28),
        bad={"Vpc": _res(VPC, CidrBlock="10.0.0.0/8")},
        good={"Vpc": _res(VPC, CidrBlock="10.0.0.0/16")},
    ),
    Rule(
        # CreateSubnet: "The allowed size for an IPv4 subnet is between a /28 netmask (16 IP
        # addresses) and a /16 netmask (65,536 IP addresses)."
        id="EC2-SUBNET-CIDR-SIZE",
        resource_type=SUBNET,
        title="A subnet's IPv4 block is /16 to /28",
        doc_url=_API + "API_CreateSubnet.html",
        check=_prefix_between(16, 28),
        bad=_vpc_and_subnets("10.0.0.0/29"),
        good=_vpc_and_subnets("10.0.0.0/28"),
    ),
    *_sg_rules(
        "EC2-SG", SECURITY_GROUP, _sg, ("vLLM & router", "vLLM and router"), ((8080, 8000), (8000, 8080))
    ),
    *_sg_rules("EC2-SGI", INGRESS, _ingress, ("Lustre <988>", "Lustre (988)"), ((1023, 1018), (1018, 1023))),
    *_sg_rules(
        "EC2-SGE", EGRESS, _egress, ("HTTPS to S3 & ECR", "HTTPS to S3 and ECR"), ((443, 70000), (443, 443))
    ),
    _tag_rule("EC2-EIP-TAGS", EIP, _TAGS_TITLE, Domain="vpc"),
    _tag_rule("EC2-IGW-TAGS", INTERNET_GATEWAY, _TAGS_TITLE),
    _tag_rule("EC2-RT-TAGS", ROUTE_TABLE, _TAGS_TITLE, VpcId=VPC_ID),
    Rule(
        id="EC2-NATGW-ELASTIC-IP",
        resource_type=NAT_GATEWAY,
        title="A public NAT gateway has an Elastic IP, a private one none",
        doc_url=_CFN + "aws-resource-ec2-natgateway.html",
        check=_nat_allocation,
        bad={
            "Nat": _res(
                NAT_GATEWAY, SubnetId=SUBNET_ID, ConnectivityType="private", AllocationId="eipalloc-1"
            )
        },
        good={"Nat": _res(NAT_GATEWAY, SubnetId=SUBNET_ID, ConnectivityType="private")},
    ),
    Rule(
        # AttachInternetGateway / AttachVpnGateway: an attachment names one gateway;
        # AWS::EC2::VPCGatewayAttachment: "You must specify either InternetGatewayId or
        # VpnGatewayId, but not both."
        id="EC2-VPCGWA-ONE-GATEWAY",
        resource_type=GATEWAY_ATTACHMENT,
        title="A gateway attachment names exactly one internet or VPN gateway",
        doc_url=_CFN + "aws-resource-ec2-vpcgatewayattachment.html",
        check=exactly_one_check(("InternetGatewayId", "VpnGatewayId"), what="gateway"),
        bad={"A": _res(GATEWAY_ATTACHMENT, VpcId=VPC_ID, InternetGatewayId="igw-1", VpnGatewayId="vgw-1")},
        good={"A": _res(GATEWAY_ATTACHMENT, VpcId=VPC_ID, InternetGatewayId="igw-1")},
    ),
    Rule(
        # CreateRoute: "You must specify exactly one of the resources from the parameters" (the
        # targets), and one destination.
        id="EC2-ROUTE-ONE-TARGET",
        resource_type=ROUTE,
        title="A route has exactly one target",
        doc_url=_API + "API_CreateRoute.html",
        check=exactly_one_check(_ROUTE_TARGETS, what="route target"),
        bad={
            "R": _res(
                ROUTE,
                RouteTableId="rtb-1",
                DestinationCidrBlock="0.0.0.0/0",
                GatewayId="igw-1",
                NatGatewayId="nat-1",
            )
        },
        good={"R": _res(ROUTE, RouteTableId="rtb-1", DestinationCidrBlock="0.0.0.0/0", NatGatewayId="nat-1")},
    ),
    Rule(
        id="EC2-ROUTE-ONE-DESTINATION",
        resource_type=ROUTE,
        title="A route has exactly one destination",
        doc_url=_API + "API_CreateRoute.html",
        check=exactly_one_check(_ROUTE_DESTINATIONS, what="route destination"),
        bad={
            "R": _res(
                ROUTE,
                RouteTableId="rtb-1",
                DestinationCidrBlock="0.0.0.0/0",
                DestinationIpv6CidrBlock="::/0",
                GatewayId="igw-1",
            )
        },
        good={"R": _res(ROUTE, RouteTableId="rtb-1", DestinationIpv6CidrBlock="::/0", GatewayId="igw-1")},
    ),
    Rule(
        id="EC2-SUBNET-ASSOCIATION-VPC",
        resource_type=SUBNET_ASSOCIATION,
        title="A subnet is associated with a route table of its own VPC",
        doc_url=_API + "API_AssociateRouteTable.html",
        check=_association_same_vpc,
        bad=_routing("VpcB"),
        good=_routing("VpcA"),
    ),
    Rule(
        id="EC2-GATEWAY-ASSOCIATION-VPC",
        resource_type=GATEWAY_ASSOCIATION,
        title="An edge association uses a gateway attached to the route table's VPC",
        doc_url=_API + "API_AssociateRouteTable.html",
        check=_gateway_association_vpc,
        bad=_edge("VpcB"),
        good=_edge("VpcA"),
    ),
    Rule(
        id="EC2-VPCE-TYPE-PROPERTIES",
        resource_type=ENDPOINT,
        title="Endpoint properties match its type (policy, private DNS, route tables, subnets, groups)",
        doc_url=_API + "API_CreateVpcEndpoint.html",
        check=_endpoint_properties,
        bad=_endpoint("GatewayLoadBalancer", SubnetIds=[SUBNET_ID], PolicyDocument={"Statement": []}),
        good=_endpoint("GatewayLoadBalancer", SubnetIds=[SUBNET_ID]),
    ),
    Rule(
        # CreateVpcEndpointServiceConfiguration takes NetworkLoadBalancerArns or
        # GatewayLoadBalancerArns ("the Network Load Balancers or Gateway Load Balancers for your
        # service"). That the API refuses both at once is inferred from the service's single
        # type (Interface or GatewayLoadBalancer), not quoted; at least one is required.
        id="EC2-VPCES-ONE-LOAD-BALANCER-KIND",
        resource_type=ENDPOINT_SERVICE,
        title="An endpoint service is backed by Network or Gateway Load Balancers, not both",
        doc_url=_API + "API_CreateVpcEndpointServiceConfiguration.html",
        check=exactly_one_check(_SERVICE_BACKENDS, what="load balancers"),
        bad={
            "S": _res(
                ENDPOINT_SERVICE, GatewayLoadBalancerArns=["arn:gwlb"], NetworkLoadBalancerArns=["arn:nlb"]
            )
        },
        good={"S": _res(ENDPOINT_SERVICE, NetworkLoadBalancerArns=["arn:nlb"])},
    ),
    Rule(
        id="EC2-VPCESP-PRINCIPAL-ARN",
        resource_type=ENDPOINT_PERMISSIONS,
        title="Allowed principals are ARNs (an account as arn:aws:iam::<id>:root) or *",
        doc_url=_API + "API_ModifyVpcEndpointServicePermissions.html",
        check=_principals,
        bad={"P": _res(ENDPOINT_PERMISSIONS, ServiceId="vpce-svc-1", AllowedPrincipals=["444455556666"])},
        good={
            "P": _res(
                ENDPOINT_PERMISSIONS,
                ServiceId="vpce-svc-1",
                AllowedPrincipals=["arn:aws:iam::444455556666:root"],
            )
        },
    ),
    Rule(
        id="EC2-FLOWLOG-ROLE",
        resource_type=FLOW_LOG,
        title="A delivery role for CloudWatch Logs flow logs, and none for other destinations",
        doc_url=_CFN + "aws-resource-ec2-flowlog.html",
        check=_flow_log_role,
        bad=_flow_log(
            LogDestinationType="s3", LogDestination="arn:aws:s3:::logs", DeliverLogsPermissionArn="arn:role"
        ),
        good=_flow_log(LogDestinationType="s3", LogDestination="arn:aws:s3:::logs"),
    ),
    Rule(
        id="EC2-LT-USER-DATA-SIZE",
        resource_type=LAUNCH_TEMPLATE,
        title="User data is at most 16 KB before base64 encoding",
        doc_url="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html",
        check=_user_data_size,
        bad=_launch_template(UserData={"Fn::Base64": "#!/bin/bash\n" + "#" * USER_DATA_MAX}),
        good=_launch_template(UserData={"Fn::Base64": "#!/bin/bash\necho ready\n"}),
    ),
    Rule(
        id="EC2-LT-CAPACITY-BLOCK",
        resource_type=LAUNCH_TEMPLATE,
        title="Market type capacity-block names the Capacity Block's reservation",
        doc_url="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html",
        check=_capacity_block_market,
        bad=_launch_template(**_CAPACITY_BLOCK),
        good=_launch_template(
            **_CAPACITY_BLOCK,
            CapacityReservationSpecification={"CapacityReservationTarget": {"CapacityReservationId": "cr-1"}},
        ),
    ),
    Rule(
        # CreateLaunchTemplate, LaunchTemplateName: "Length Constraints: Minimum length of 3.
        # Maximum length of 128. Pattern: [a-zA-Z0-9\(\)\.\-/_]+"
        id="EC2-LT-NAME",
        resource_type=LAUNCH_TEMPLATE,
        title="Launch template name: 3-128 characters from a-z A-Z 0-9 ( ) . - / _",
        doc_url=_API + "API_CreateLaunchTemplate.html",
        check=name_check(
            "LaunchTemplateName",
            min_len=3,
            max_len=128,
            pattern=r"[a-zA-Z0-9().\-/_]+",
            allowed="only letters, digits and ( ) . - / _",
        ),
        bad={"Lt": _res(LAUNCH_TEMPLATE, LaunchTemplateName="gpu nodes", LaunchTemplateData={})},
        good={"Lt": _res(LAUNCH_TEMPLATE, LaunchTemplateName="gpufarm/gpu-nodes", LaunchTemplateData={})},
    ),
    Rule(
        id="EC2-CR-END-DATE",
        resource_type=CAPACITY_RESERVATION,
        title="EndDate exactly when EndDateType is limited",
        doc_url=_API + "API_CreateCapacityReservation.html",
        check=_end_date,
        bad=_reservation(EndDateType="limited"),
        good=_reservation(EndDateType="limited", EndDate="2027-01-01T00:00:00Z"),
    ),
    Rule(
        id="EC2-CR-INSTANCE-COUNT",
        resource_type=CAPACITY_RESERVATION,
        title="A reservation holds 1 to 1000 instances",
        doc_url=_API + "API_CreateCapacityReservation.html",
        check=_instance_count,
        bad=_reservation(InstanceCount=0),
        good=_reservation(InstanceCount=2),
    ),
)
