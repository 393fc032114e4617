"""The VPC for a GPU inference cluster: public and private subnets per AZ, NAT, flow logs, endpoints."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from gpufarm.config.model import LOG_RETENTION_DAYS, InterfaceEndpoint, NetworkConfig
from gpufarm.constructs._util import acknowledge, private_subnets
from gpufarm.constructs.feature_flags import check_feature_flags

# Private subnets get an eighth of the VPC each (room for pod IPs), public ones a 128th.
_PRIVATE_EXTRA_BITS = 3
_PUBLIC_EXTRA_BITS = 7


class InferenceNetwork(Construct):
    """A VPC laid out for EKS GPU nodes.

    Defaults (from :class:`NetworkConfig`): a /16, one public and one private subnet per
    availability zone (private: 1/8 of the VPC each, public: 1/128), one NAT gateway, flow logs
    of all traffic to a KMS-encrypted log group kept 30 days, an S3 gateway endpoint and interface
    endpoints (private DNS) for ECR, STS and CloudWatch Logs so nodes pull images privately.
    The default security group is stripped of its rules.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: NetworkConfig,
        availability_zones: Sequence[str],
        logs_key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        check_feature_flags(self)
        self.cidr = config.cidr
        prefix = ipaddress.IPv4Network(config.cidr).prefixlen
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(config.cidr),
            availability_zones=list(availability_zones),
            nat_gateways=config.nat_gateways,
            restrict_default_security_group=True,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Public",
                    subnet_type=ec2.SubnetType.PUBLIC,
                    cidr_mask=prefix + _PUBLIC_EXTRA_BITS,
                    map_public_ip_on_launch=False,
                ),
                ec2.SubnetConfiguration(
                    name="Private",
                    subnet_type=(
                        ec2.SubnetType.PRIVATE_WITH_EGRESS
                        if config.nat_gateways
                        else ec2.SubnetType.PRIVATE_ISOLATED
                    ),
                    cidr_mask=prefix + _PRIVATE_EXTRA_BITS,
                ),
            ],
        )
        acknowledge(
            self.vpc,
            "CloudFormation-Validate::W3010",
            "Availability zones come from the tier config on purpose: synth stays offline and "
            "deterministic, and capacity planning for GPUs is per zone.",
        )
        # restrict_default_security_group adds one provider per stack, beside the VPCs.
        restrict_provider = cdk.Stack.of(self).node.try_find_child(
            "Custom::VpcRestrictDefaultSGCustomResourceProvider"
        )
        if restrict_provider is not None:
            acknowledge(
                restrict_provider,
                "ControlTower::CT.LAMBDA.PR.3",
                "aws-cdk-lib's provider for restrict_default_security_group: it only calls the EC2 "
                "API, while CloudFormation deploys the stack, to remove the default security "
                "group's rules, and CustomResourceProviderProps offers no VPC placement. An account "
                "that enforces CT.LAMBDA.PR.3 as a Control Tower hook rejects it (docs/decisions).",
            )
        self.flow_log_group: logs.LogGroup | None = None
        if config.flow_logs.enabled:
            self.flow_log_group = logs.LogGroup(
                self,
                "FlowLogGroup",
                retention=log_retention(config.flow_logs.retention_days),
                encryption_key=logs_key,
                removal_policy=removal_policy,
            )
            flow_log = self.vpc.add_flow_log(
                "FlowLog",
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group),
                traffic_type=ec2.FlowLogTrafficType.ALL,
            )
            acknowledge(
                flow_log,
                "NIST.800.53.R5-IAMNoInlinePolicy",
                "CDK writes the flow log role's one policy inline: it lets VPC Flow Logs write to "
                "this VPC's flow log group only.",
            )
        if config.s3_gateway_endpoint:
            self.vpc.add_gateway_endpoint(
                "S3Endpoint",
                service=ec2.GatewayVpcEndpointAwsService.S3,
                subnets=[ec2.SubnetSelection(subnets=private_subnets(self.vpc))],
            )
        self.interface_endpoints: dict[InterfaceEndpoint, ec2.InterfaceVpcEndpoint] = {}
        self._inside_vpc: ec2.IPeer | None = None
        for endpoint in config.interface_endpoints:
            self.add_interface_endpoint(endpoint)

    def add_interface_endpoint(
        self, endpoint: InterfaceEndpoint, *, allow_from: Sequence[ec2.ISecurityGroup] = ()
    ) -> ec2.InterfaceVpcEndpoint:
        """Add (once) an interface endpoint with private DNS.

        HTTPS is allowed from the security groups in `allow_from` only, or, when none are given,
        from the whole VPC CIDR.
        """
        if endpoint in self.interface_endpoints:
            return self.interface_endpoints[endpoint]
        service = ec2.InterfaceVpcEndpointAwsService(endpoint.value)
        subnets = ec2.SubnetSelection(subnets=private_subnets(self.vpc))
        if not allow_from:
            created = self.vpc.add_interface_endpoint(
                _endpoint_id(endpoint), service=service, private_dns_enabled=True, subnets=subnets, open=False
            )
            if self._inside_vpc is None:
                # One peer for every endpoint: it is a value, and each new one is a jsii round trip.
                self._inside_vpc = ec2.Peer.ipv4(self.cidr)
            created.connections.allow_default_port_from(
                self._inside_vpc, f"HTTPS to {endpoint.value} from inside the VPC"
            )
        else:
            # Outside the Vpc construct: resources that depend on the whole VPC (an EKS cluster
            # does) must not depend on a rule that names their own security group.
            created = ec2.InterfaceVpcEndpoint(
                self,
                _endpoint_id(endpoint),
                vpc=self.vpc,
                service=service,
                private_dns_enabled=True,
                subnets=subnets,
                open=False,
            )
            for group in allow_from:
                created.connections.allow_default_port_from(group, f"HTTPS to {endpoint.value} from nodes")
        self.interface_endpoints[endpoint] = created
        return created


def _endpoint_id(endpoint: InterfaceEndpoint) -> str:
    return "".join(p.capitalize() for p in endpoint.value.replace(".", "-").split("-")) + "Endpoint"


def log_retention(days: int) -> logs.RetentionDays:
    """The CDK enum member for a retention in days (one of :data:`LOG_RETENTION_DAYS`)."""
    members = [m for m in logs.RetentionDays if m is not logs.RetentionDays.INFINITE]
    return dict(zip(LOG_RETENTION_DAYS, members, strict=True))[days]
