"""Inspect internet traffic of the application VPC with appliances behind a Gateway Load Balancer.

The appliances sit in an inspection VPC of their own behind a Gateway Load Balancer (GWLB)
that is offered, through an endpoint service, to one GWLB endpoint per availability zone in
the application VPC. Ingress routing then sends every packet between the internet gateway and
the public subnets (the internet-facing load balancer, and the NAT gateways) through the
endpoint of its zone: the internet gateway's edge route table sends each public subnet's CIDR to
the endpoint, and each public subnet's default route leads to the endpoint instead of the
internet gateway. See docs/decisions/0022-gwlb-inspection.md.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IDependable

from gpufarm.config.model import APPLIANCE_ROOT_DEVICE, LOG_RETENTION_DAYS, InspectionConfig
from gpufarm.constructs._util import acknowledge, construct_id
from gpufarm.constructs.inspection_appliance import appliance_user_data
from gpufarm.constructs.network import log_retention

GENEVE_PORT = 6081
"""UDP port on which a Gateway Load Balancer exchanges GENEVE packets with its appliances."""

DEFAULT_HEALTH_CHECK_PORT = 80
"""TCP port the load balancer's health check connects to by default (`ApplianceConfig.health_check_port`)."""

ENDPOINT_SUBNET_PREFIX = 28
"""Size of each GWLB endpoint subnet in the application VPC (the endpoint takes one address)."""

_MIN_APPLIANCE_SUBNET_PREFIX = 28
_SSM_ENDPOINTS = (
    ("SsmEndpoint", ec2.InterfaceVpcEndpointAwsService.SSM),
    ("SsmMessagesEndpoint", ec2.InterfaceVpcEndpointAwsService.SSM_MESSAGES),
    ("Ec2MessagesEndpoint", ec2.InterfaceVpcEndpointAwsService.EC2_MESSAGES),
)
_HEALTH_CHECK_INTERVAL_SECONDS = 10
_HEALTH_CHECK_THRESHOLD = 3
# Inference responses stream for minutes: draining flows keep their appliance this long.
_DEREGISTRATION_DELAY_SECONDS = 300
_SCALING_CPU_PERCENT = 60
_HEALTH_CHECK_GRACE = cdk.Duration.minutes(5)
# Time for a replacement appliance to boot and pass the health checks before the next goes.
_ROLLING_UPDATE_PAUSE = cdk.Duration.minutes(3)


def endpoint_subnet_cidrs(vpc_cidr: str, count: int) -> list[str]:
    """The `count` highest /28 blocks of `vpc_cidr`, lowest first (one GWLB endpoint subnet each).

    ec2.Vpc allocates its subnets from the bottom of the range, so the top stays free unless
    the subnets fill the whole VPC.
    """
    network = ipaddress.IPv4Network(vpc_cidr)
    size = 2 ** (32 - ENDPOINT_SUBNET_PREFIX)
    # Counted down from the top, not listed: a /16 holds 4096 blocks of /28.
    count = min(count, network.num_addresses // size)
    top = int(network.broadcast_address) + 1
    return [
        str(ipaddress.IPv4Network((top - size * (count - i), ENDPOINT_SUBNET_PREFIX))) for i in range(count)
    ]


class TrafficInspection(Construct):
    """Appliances behind a Gateway Load Balancer inspect all traffic of the application VPC's public subnets.

    Builds an inspection VPC (`config.cidr`, one isolated subnet per zone holding the load
    balancer, the appliances and Session Manager endpoints; no internet gateway, no NAT; flow
    logs of all traffic), a Gateway Load Balancer with cross-zone load balancing, a GENEVE
    target group (UDP 6081, instance targets, TCP health check on
    `config.appliances.health_check_port` (80), flows of
    a failed or removed appliance rehashed to healthy ones) and its listener, the appliances'
    Auto Scaling group (`config.appliances`: min/max size, CPU target tracking at 60%, ELB
    health checks, rolling replacement one instance at a time), an endpoint service (this
    account only, no acceptance step), and in the application VPC one /28 endpoint subnet and
    GWLB endpoint per zone, the internet gateway's edge route table and the public subnets'
    default routes through the endpoints.

    Appliances run `config.appliances.ami_id` (a vendor's firewall), or else the latest Amazon
    Linux 2023 (resolved by CloudFormation from the public SSM parameter at deploy time) set up
    by :func:`~gpufarm.constructs.inspection_appliance.appliance_user_data` as a pass-through
    forwarder. Launch template: IMDSv2 only, encrypted gp3 root volume
    (`config.appliances.root_device_name`, size from the AMI), no public IP, detailed monitoring,
    an instance role with AmazonSSMManagedInstanceCore only.

    `app_vpc` must be an ec2.Vpc of this app with an internet gateway and one public subnet per
    zone in `availability_zones` (such as InferenceNetwork.vpc); its public subnets' default
    routes are redirected here. `logs_key` encrypts the flow log group (default: CloudWatch
    Logs' own encryption); `flow_log_retention_days` defaults to 30; the log group is RETAINed
    unless `removal_policy` says otherwise.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        app_vpc: ec2.Vpc,
        config: InspectionConfig,
        availability_zones: Sequence[str],
        logs_key: kms.IKey | None = None,
        flow_log_retention_days: int = 30,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        zones = list(availability_zones)
        app_cidr = _app_vpc_cidr(app_vpc)
        internet_gateway = _internet_gateway(app_vpc)
        public_by_zone = _public_subnets_by_zone(app_vpc)
        _validate_zones(zones, sorted(public_by_zone))
        appliance_mask = _validate_inspection_cidr(config.cidr, app_cidr, len(zones))
        _validate_sizes(config.appliances.min_size, config.appliances.max_size)
        health_check_port = config.appliances.health_check_port
        root_device_name = config.appliances.root_device_name
        _validate_root_device(config.appliances.ami_id, root_device_name)
        _validate_retention(flow_log_retention_days)
        endpoint_cidrs = endpoint_subnet_cidrs(app_cidr, len(zones))
        _validate_endpoint_room(app_vpc, app_cidr, endpoint_cidrs)

        self.config = config
        self.health_check_port = health_check_port
        self.inspection_vpc = self._inspection_vpc(
            config.cidr, zones, appliance_mask, logs_key, flow_log_retention_days, removal_policy
        )
        appliance_subnets = [s.subnet_id for s in self.inspection_vpc.isolated_subnets]

        self.security_group = self._appliance_security_group(config.cidr, health_check_port)
        self.role = iam.Role(
            self,
            "ApplianceRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="Inspection appliances: Session Manager access only.",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSSMManagedInstanceCore")],
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]",
            "The appliances' only permissions: AWS maintains AmazonSSMManagedInstanceCore as the "
            "minimum the SSM agent needs for Session Manager, the appliances' only admin access.",
        )
        profile = iam.CfnInstanceProfile(self, "ApplianceInstanceProfile", roles=[self.role.role_name])
        self.launch_template = self._launch_template(profile, health_check_port, root_device_name)

        self.gateway_load_balancer = elbv2.CfnLoadBalancer(
            self,
            "GatewayLoadBalancer",
            type="gateway",
            subnets=appliance_subnets,
            load_balancer_attributes=[
                # Appliances need not be spread one per zone: each zone's endpoint reaches all.
                elbv2.CfnLoadBalancer.LoadBalancerAttributeProperty(
                    key="load_balancing.cross_zone.enabled", value="true"
                ),
            ],
        )
        acknowledge(
            self.gateway_load_balancer,
            "AwsSolutions-ELB2",
            "Gateway Load Balancers have no access logs (they pass packets, not requests); the "
            "inspection VPC's flow logs record its traffic.",
        )
        acknowledge(
            self.gateway_load_balancer,
            "NIST.800.53.R5-ELBLoggingEnabled",
            "Gateway Load Balancers have no access logs (they pass packets, not requests); the "
            "inspection VPC's flow logs record its traffic.",
        )
        acknowledge(
            self.gateway_load_balancer,
            "NIST.800.53.R5-ELBDeletionProtectionEnabled",
            "The Gateway Load Balancer holds no state and is rebuilt from the template; deletion "
            "protection would only make `cdk destroy` leave it behind.",
        )
        acknowledge(
            self.gateway_load_balancer,
            "ControlTower::CT.ELASTICLOADBALANCING.PR.5",
            "The Gateway Load Balancer holds no state and is rebuilt from the template; deletion "
            "protection would only make `cdk destroy` leave it behind.",
        )
        self.target_group = elbv2.CfnTargetGroup(
            self,
            "TargetGroup",
            protocol="GENEVE",
            port=GENEVE_PORT,
            target_type="instance",
            vpc_id=self.inspection_vpc.vpc_id,
            health_check_enabled=True,
            health_check_protocol="TCP",
            health_check_port=str(health_check_port),
            health_check_interval_seconds=_HEALTH_CHECK_INTERVAL_SECONDS,
            healthy_threshold_count=_HEALTH_CHECK_THRESHOLD,
            unhealthy_threshold_count=_HEALTH_CHECK_THRESHOLD,
            target_group_attributes=[
                elbv2.CfnTargetGroup.TargetGroupAttributeProperty(key=k, value=v)
                for k, v in {
                    "deregistration_delay.timeout_seconds": str(_DEREGISTRATION_DELAY_SECONDS),
                    # Both must be equal; without rehashing, the flows of a failed appliance die.
                    "target_failover.on_deregistration": "rebalance",
                    "target_failover.on_unhealthy": "rebalance",
                }.items()
            ],
        )
        # A Gateway Load Balancer listener has no port or protocol: it takes every packet.
        self.listener = elbv2.CfnListener(
            self,
            "Listener",
            load_balancer_arn=self.gateway_load_balancer.ref,
            default_actions=[
                elbv2.CfnListener.ActionProperty(type="forward", target_group_arn=self.target_group.ref)
            ],
        )
        acknowledge(
            self.listener,
            "NIST.800.53.R5-ELBv2ACMCertificateRequired",
            "A Gateway Load Balancer listener has no protocol and terminates nothing: it hands "
            "packets unchanged to the appliances over GENEVE; TLS ends at the load balancer "
            "behind the inspection.",
        )
        self.appliances = self._appliances(config, zones)

        self.endpoint_service = ec2.CfnVPCEndpointService(
            self,
            "EndpointService",
            gateway_load_balancer_arns=[self.gateway_load_balancer.ref],
            acceptance_required=False,
        )
        self.endpoint_service_permissions = ec2.CfnVPCEndpointServicePermissions(
            self,
            "EndpointServicePermissions",
            service_id=self.endpoint_service.ref,
            allowed_principals=[f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:root"],
        )
        self.endpoint_service_name = cdk.Fn.join(
            "", ["com.amazonaws.vpce.", cdk.Aws.REGION, ".", self.endpoint_service.ref]
        )
        """Service name a GWLB endpoint connects to (com.amazonaws.vpce.<region>.<service id>)."""

        self.endpoint_subnets: dict[str, ec2.CfnSubnet] = {}
        self.endpoints: dict[str, ec2.CfnVPCEndpoint] = {}
        # Routes to the internet gateway wait for its attachment, as ec2.Vpc's own routes do.
        attached = app_vpc.node.try_find_child("VPCGW") or app_vpc.internet_connectivity_established
        self._endpoints(app_vpc, internet_gateway, attached, zones, endpoint_cidrs)
        self.edge_route_table = self._ingress_routing(app_vpc, internet_gateway, attached, public_by_zone)

    # ----------------------------------------------------------------------- inspection VPC

    def _inspection_vpc(
        self,
        cidr: str,
        zones: list[str],
        mask: int,
        logs_key: kms.IKey | None,
        retention_days: int,
        removal_policy: cdk.RemovalPolicy,
    ) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=zones,
            nat_gateways=0,
            restrict_default_security_group=True,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Appliances", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=mask
                )
            ],
        )
        acknowledge(
            vpc,
            "CloudFormation-Validate::W3010",
            "Availability zones come from the tier config on purpose: the inspection VPC uses the "
            "application VPC's zones, and synth stays offline and deterministic.",
        )
        self.flow_log_group = logs.LogGroup(
            self,
            "FlowLogGroup",
            retention=log_retention(retention_days),
            encryption_key=logs_key,
            removal_policy=removal_policy,
        )
        flow_log = vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        acknowledge(
            flow_log,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "CDK writes the flow log role's one policy inline: it lets VPC Flow Logs write to this "
            "VPC's flow log group only.",
        )
        # Session Manager without a route to the internet: the appliances' only management path.
        for endpoint_id, service in _SSM_ENDPOINTS:
            endpoint = vpc.add_interface_endpoint(
                endpoint_id, service=service, private_dns_enabled=True, open=False
            )
            endpoint.connections.allow_default_port_from(
                ec2.Peer.ipv4(cidr), f"HTTPS to {service.short_name} from the appliances"
            )
        return vpc

    def _appliance_security_group(self, cidr: str, health_check_port: int) -> ec2.SecurityGroup:
        group = ec2.SecurityGroup(
            self,
            "ApplianceSecurityGroup",
            vpc=self.inspection_vpc,
            description="Inspection appliances: GENEVE and health checks from the Gateway Load Balancer",
            allow_all_outbound=False,
        )
        # The load balancer's addresses are in the inspection subnets; nothing else reaches here.
        inside = ec2.Peer.ipv4(cidr)
        group.add_ingress_rule(inside, ec2.Port.udp(GENEVE_PORT), "GENEVE from the Gateway Load Balancer")
        group.add_ingress_rule(
            inside, ec2.Port.tcp(health_check_port), "Health checks from the Gateway Load Balancer"
        )
        group.add_egress_rule(inside, ec2.Port.udp(GENEVE_PORT), "GENEVE back to the Gateway Load Balancer")
        group.add_egress_rule(inside, ec2.Port.tcp(443), "HTTPS to the Session Manager endpoints")
        return group

    def _launch_template(
        self, profile: iam.CfnInstanceProfile, health_check_port: int, root_device_name: str
    ) -> ec2.CfnLaunchTemplate:
        appliances = self.config.appliances
        if appliances.ami_id is not None:
            image_id = appliances.ami_id
            user_data = None
        else:
            arm = ec2.InstanceType(appliances.instance_type).architecture is ec2.InstanceArchitecture.ARM_64
            image = ec2.MachineImage.latest_amazon_linux2023(
                cpu_type=ec2.AmazonLinuxCpuType.ARM_64 if arm else ec2.AmazonLinuxCpuType.X86_64
            )
            image_id = image.get_image(self).image_id
            user_data = cdk.Fn.base64(appliance_user_data(health_check_port))
        lt = ec2.CfnLaunchTemplate
        return lt(
            self,
            "LaunchTemplate",
            launch_template_data=lt.LaunchTemplateDataProperty(
                image_id=image_id,
                instance_type=appliances.instance_type,
                iam_instance_profile=lt.IamInstanceProfileProperty(arn=profile.attr_arn),
                network_interfaces=[
                    lt.NetworkInterfaceProperty(
                        device_index=0,
                        associate_public_ip_address=False,
                        groups=[self.security_group.security_group_id],
                        delete_on_termination=True,
                    )
                ],
                metadata_options=lt.MetadataOptionsProperty(
                    http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
                ),
                # No size: the volume takes the AMI's (vendors' images need more than AL2023's).
                block_device_mappings=[
                    lt.BlockDeviceMappingProperty(
                        device_name=root_device_name,
                        ebs=lt.EbsProperty(encrypted=True, volume_type="gp3", delete_on_termination=True),
                    )
                ],
                monitoring=lt.MonitoringProperty(enabled=True),
                user_data=user_data,
            ),
        )

    def _appliances(self, config: InspectionConfig, zones: list[str]) -> autoscaling.AutoScalingGroup:
        sizes = config.appliances
        template = ec2.LaunchTemplate.from_launch_template_attributes(
            self,
            "LaunchTemplateVersion",
            launch_template_id=self.launch_template.ref,
            version_number=self.launch_template.attr_latest_version_number,
        )
        group = autoscaling.AutoScalingGroup(
            self,
            "Appliances",
            vpc=self.inspection_vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            launch_template=template,
            min_capacity=sizes.min_size,
            max_capacity=sizes.max_size,
            health_checks=autoscaling.HealthChecks.with_additional_checks(
                additional_types=[autoscaling.AdditionalHealthCheckType.ELB],
                grace_period=_HEALTH_CHECK_GRACE,
            ),
            # A new launch template version (a newer AL2023 AMI) replaces one appliance at a time.
            update_policy=autoscaling.UpdatePolicy.rolling_update(
                max_batch_size=1,
                min_instances_in_service=min(sizes.min_size, sizes.max_size - 1),
                pause_time=_ROLLING_UPDATE_PAUSE,
            ),
        )
        cfn = group.node.default_child
        assert isinstance(cfn, autoscaling.CfnAutoScalingGroup)
        cfn.target_group_arns = [self.target_group.ref]
        # The zones of the appliance subnets, named as well (CT.AUTOSCALING.PR.1 reads this
        # property); the subnets given with VPCZoneIdentifier must reside in them.
        # https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_CreateAutoScalingGroup.html
        cfn.availability_zones = list(zones)
        # Instances must not start before the listener forwards to their target group.
        cfn.node.add_dependency(self.listener)
        group.scale_on_cpu_utilization("CpuScaling", target_utilization_percent=_SCALING_CPU_PERCENT)
        acknowledge(
            group,
            "AwsSolutions-AS3",
            "Appliance scaling is routine (CPU target tracking); scaling activity is in the Auto "
            "Scaling history and the load balancer's healthy-host metrics, not worth a topic.",
        )
        acknowledge(
            group,
            "ControlTower::CT.AUTOSCALING.PR.6",
            "The appliances run the one instance type inspection.appliances sizes for the "
            "inspection throughput, from one launch template; a mixed-instances policy would add "
            "types nobody sized, behind a Gateway Load Balancer that hashes flows to any of them.",
        )
        return group

    # ----------------------------------------------------------------------- application VPC

    def _endpoints(
        self,
        app_vpc: ec2.Vpc,
        internet_gateway: str,
        attached: IDependable,
        zones: list[str],
        cidrs: list[str],
    ) -> None:
        route_table = ec2.CfnRouteTable(self, "EndpointRouteTable", vpc_id=app_vpc.vpc_id)
        # Inspected traffic leaves the endpoint for the internet here; the local route carries
        # inspected inbound traffic on to the public subnets.
        to_internet = ec2.CfnRoute(
            self,
            "EndpointDefaultRoute",
            route_table_id=route_table.ref,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=internet_gateway,
        )
        to_internet.node.add_dependency(attached)
        acknowledge(
            to_internet,
            "NIST.800.53.R5-VPCNoUnrestrictedRouteToIGW",
            "The GWLB endpoint subnets' route to the internet carries only traffic the appliances "
            "have inspected; no instance runs in these subnets.",
        )
        for zone, cidr in zip(zones, cidrs, strict=True):
            suffix = construct_id(zone)
            subnet = ec2.CfnSubnet(
                self,
                f"EndpointSubnet{suffix}",
                vpc_id=app_vpc.vpc_id,
                availability_zone=zone,
                cidr_block=cidr,
                map_public_ip_on_launch=False,
                tags=[cdk.CfnTag(key="Name", value=f"{self.node.path}/EndpointSubnet{suffix}")],
            )
            acknowledge(
                subnet,
                "CloudFormation-Validate::W3010",
                f"The GWLB endpoint subnet must be in {zone}, the zone of the public subnets whose "
                "traffic its endpoint inspects; the zones come from the tier config.",
            )
            ec2.CfnSubnetRouteTableAssociation(
                self,
                f"EndpointSubnetRouteTable{suffix}",
                subnet_id=subnet.ref,
                route_table_id=route_table.ref,
            )
            endpoint = ec2.CfnVPCEndpoint(
                self,
                f"Endpoint{suffix}",
                vpc_id=app_vpc.vpc_id,
                vpc_endpoint_type="GatewayLoadBalancer",
                service_name=self.endpoint_service_name,
                subnet_ids=[subnet.ref],
            )
            endpoint.node.add_dependency(self.endpoint_service_permissions)
            self.endpoint_subnets[zone] = subnet
            self.endpoints[zone] = endpoint

    def _ingress_routing(
        self,
        app_vpc: ec2.Vpc,
        internet_gateway: str,
        attached: IDependable,
        public_by_zone: dict[str, list[ec2.ISubnet]],
    ) -> ec2.CfnRouteTable:
        edge = ec2.CfnRouteTable(self, "EdgeRouteTable", vpc_id=app_vpc.vpc_id)
        self.edge_association = ec2.CfnGatewayRouteTableAssociation(
            self, "EdgeRouteTableAssociation", gateway_id=internet_gateway, route_table_id=edge.ref
        )
        # Traffic turns to the endpoints only after the appliances' group exists, so the
        # switch-over waits at most for their boot and first health checks, not for the build.
        launched = self.appliances.node.default_child
        assert isinstance(launched, autoscaling.CfnAutoScalingGroup)
        self.edge_association.node.add_dependency(attached, launched)
        for zone, subnets in public_by_zone.items():
            endpoint = self.endpoints[zone]
            for subnet in subnets:
                suffix = construct_id(subnet.node.id)
                # In from the internet: the whole subnet CIDR (a gateway route table's rule).
                ec2.CfnRoute(
                    self,
                    f"EdgeRoute{suffix}",
                    route_table_id=edge.ref,
                    destination_cidr_block=subnet.ipv4_cidr_block,
                    vpc_endpoint_id=endpoint.ref,
                ).node.add_dependency(launched)
                # Out to the internet: the same zone's endpoint, so both directions of a flow
                # meet the same appliance. Changing a route's target updates it in place.
                default_route = subnet.node.try_find_child("DefaultRoute")
                assert isinstance(default_route, ec2.CfnRoute)
                default_route.gateway_id = None
                default_route.vpc_endpoint_id = endpoint.ref
                default_route.node.add_dependency(launched)
        return edge


# --------------------------------------------------------------------------- validation


def _app_vpc_cidr(app_vpc: ec2.Vpc) -> str:
    resource = app_vpc.node.default_child
    cidr = resource.cidr_block if isinstance(resource, ec2.CfnVPC) else None
    if not isinstance(cidr, str) or cdk.Token.is_unresolved(cidr):
        raise ValueError(
            "'app_vpc' must be an ec2.Vpc with an IPv4 CIDR known at synth time (created in this "
            "app), got one without"
        )
    return cidr


def _internet_gateway(app_vpc: ec2.Vpc) -> str:
    gateway = app_vpc.internet_gateway_id
    if gateway is None:
        raise ValueError("'app_vpc' must have an internet gateway (public subnets), got a VPC without one")
    return gateway


def _public_subnets_by_zone(app_vpc: ec2.Vpc) -> dict[str, list[ec2.ISubnet]]:
    by_zone: dict[str, list[ec2.ISubnet]] = {}
    for subnet in app_vpc.public_subnets:
        if not isinstance(subnet.node.try_find_child("DefaultRoute"), ec2.CfnRoute):
            raise ValueError(
                f"'app_vpc' public subnet {subnet.node.path} must have the default route ec2.Vpc "
                "creates (to the internet gateway), got none"
            )
        by_zone.setdefault(subnet.availability_zone, []).append(subnet)
    return by_zone


def _validate_zones(zones: list[str], vpc_zones: list[str]) -> None:
    if len(set(zones)) != len(zones) or sorted(zones) != vpc_zones:
        raise ValueError(
            f"'availability_zones' must be the zones of the application VPC's public subnets "
            f"({', '.join(vpc_zones)}), one endpoint each, got {', '.join(zones) or 'none'}"
        )


def _validate_inspection_cidr(cidr: str, app_cidr: str, zone_count: int) -> int:
    """The appliance subnets' prefix length: the inspection CIDR split evenly over the zones."""
    network = ipaddress.IPv4Network(cidr)
    if network.overlaps(ipaddress.IPv4Network(app_cidr)):
        raise ValueError(f"'config.cidr' must not overlap the application VPC ({app_cidr}), got {cidr}")
    mask = network.prefixlen + math.ceil(math.log2(zone_count))
    if mask > _MIN_APPLIANCE_SUBNET_PREFIX:
        raise ValueError(
            f"'config.cidr' must leave a /{_MIN_APPLIANCE_SUBNET_PREFIX} or larger per zone "
            f"({zone_count} zones), got {cidr}"
        )
    return mask


def _validate_sizes(min_size: int, max_size: int) -> None:
    if min_size > max_size:
        raise ValueError(
            f"'config.appliances.min_size' must be at most max_size ({max_size}), got {min_size}"
        )


def _validate_root_device(ami_id: str | None, root_device_name: str) -> None:
    if ami_id is None and root_device_name != APPLIANCE_ROOT_DEVICE:
        raise ValueError(
            f"'root_device_name' must be {APPLIANCE_ROOT_DEVICE!r} (Amazon Linux 2023's) unless "
            f"ami_id names another image, got {root_device_name!r}"
        )


def _validate_retention(days: int) -> None:
    if days not in LOG_RETENTION_DAYS:
        raise ValueError(
            f"'flow_log_retention_days' must be a CloudWatch Logs retention "
            f"({', '.join(map(str, LOG_RETENTION_DAYS))}), got {days}"
        )


def _validate_endpoint_room(app_vpc: ec2.Vpc, app_cidr: str, endpoint_cidrs: list[str]) -> None:
    existing = [*app_vpc.public_subnets, *app_vpc.private_subnets, *app_vpc.isolated_subnets]
    for cidr in endpoint_cidrs:
        block = ipaddress.IPv4Network(cidr)
        for subnet in existing:
            if block.overlaps(ipaddress.IPv4Network(subnet.ipv4_cidr_block)):
                raise ValueError(
                    f"'app_vpc' must leave the top of {app_cidr} free for the GWLB endpoint "
                    f"subnets ({', '.join(endpoint_cidrs)}), got subnet {subnet.ipv4_cidr_block} "
                    f"({subnet.node.path})"
                )
