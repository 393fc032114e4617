"""A PrivateLink endpoint service offering the models to other VPCs and accounts.

A consumer creates an interface VPC endpoint to :attr:`InferencePrivateLink.service_name` in its
own VPC and calls the models through the endpoint's private addresses, without peering, transit
gateways or overlapping-CIDR concerns. An endpoint service must be backed by a Network Load
Balancer: the tier's own NLB when ingress kind is 'nlb', or, for an ALB, an internal NLB in
front of it whose target groups are of type `alb` (the ALB stays the one place that routes,
authenticates and runs WAF). See docs/decisions/0021-nlb-and-privatelink.md.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from constructs import Construct, IDependable

from gpufarm.config.model import PrivateLinkConfig
from gpufarm.constructs._util import acknowledge, private_subnets
from gpufarm.constructs.gateway_nlb import alb_target_group, tcp_listener


class InferencePrivateLink(Construct):
    """An `AWS::EC2::VPCEndpointService` on a Network Load Balancer, with allowed principals.

    Give exactly one of `load_balancer` (an NLB: the service uses it as it is) or `alb` with
    `ports` (each ALB listener port and its protocol): then an internal NLB (:attr:`nlb`) in
    the private subnets gets a TCP listener per port forwarding to a target group of type
    `alb` that registers the ALB on that port, health-checked with `GET /` (any answer below
    500 is healthy). Its security group lets no client in: only PrivateLink traffic reaches it
    (its inbound rules are not applied to that traffic), and the ALB's security group admits it
    on the listener ports. Its target groups depend on the ALB's listeners (those it has when
    this is built), so the listeners exist before the ALB is registered on their ports.

    `vpc` (the ALB's) is needed only in front of an ALB; that NLB balances across zones
    (`cross_zone`, default true) and, with `deletion_protection` (default false; a stack with
    termination protection passes true), cannot be deleted until that attribute is turned off
    (a given `load_balancer` keeps its own setting). Defaults (from :class:`PrivateLinkConfig`):
    new endpoint connections wait for acceptance (`acceptance_required`); `allowed_principals`
    (at least one) may create endpoints.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: PrivateLinkConfig,
        vpc: ec2.IVpc | None = None,
        load_balancer: elbv2.INetworkLoadBalancer | None = None,
        alb: elbv2.IApplicationLoadBalancer | None = None,
        ports: Mapping[int, elbv2.ApplicationProtocol] | None = None,
        cross_zone: bool = True,
        deletion_protection: bool = False,
    ) -> None:
        super().__init__(scope, id)
        ports = dict(ports or {})
        _validate(config, vpc, load_balancer, alb, ports, deletion_protection)
        self.config = config
        self.nlb: elbv2.NetworkLoadBalancer | None = None
        """The NLB created in front of `alb` (None when `load_balancer` was given)."""
        self.target_groups: dict[int, elbv2.CfnTargetGroup] = {}
        """ALB listener port -> the `alb` target group registering the ALB on it."""
        if alb is not None:
            assert vpc is not None
            self.nlb = self._front(vpc, alb, ports, cross_zone, deletion_protection)
            load_balancer = self.nlb
        assert load_balancer is not None
        self.load_balancer: elbv2.INetworkLoadBalancer = load_balancer
        """The NLB behind the endpoint service."""

        self.service = ec2.CfnVPCEndpointService(
            self,
            "Resource",
            network_load_balancer_arns=[load_balancer.load_balancer_arn],
            acceptance_required=config.acceptance_required,
        )
        self.permissions = ec2.CfnVPCEndpointServicePermissions(
            self,
            "Permissions",
            service_id=self.service.ref,
            allowed_principals=list(config.allowed_principals),
        )

    @property
    def service_id(self) -> str:
        """The endpoint service ID (`vpce-svc-...`)."""
        return self.service.ref

    @property
    def service_name(self) -> str:
        """The name consumers give their interface endpoint: `com.amazonaws.vpce.<region>.<id>`."""
        return f"com.amazonaws.vpce.{cdk.Stack.of(self).region}.{self.service.ref}"

    def _front(
        self,
        vpc: ec2.IVpc,
        alb: elbv2.IApplicationLoadBalancer,
        ports: Mapping[int, elbv2.ApplicationProtocol],
        cross_zone: bool,
        deletion_protection: bool,
    ) -> elbv2.NetworkLoadBalancer:
        security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="PrivateLink network load balancer: endpoint traffic in, the ALB out",
        )
        nlb = elbv2.NetworkLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            internet_facing=False,
            vpc_subnets=ec2.SubnetSelection(subnets=private_subnets(vpc)),
            security_groups=[security_group],
            cross_zone_enabled=cross_zone,
            # Consumers come from other VPCs with any addresses; allowed principals and
            # acceptance decide who connects, and nothing else gets in (no inbound rules).
            enforce_security_group_inbound_rules_on_private_link_traffic=False,
            deletion_protection=deletion_protection,
        )
        no_logs = (
            "This NLB only carries PrivateLink traffic to the ALB on TCP listeners; an NLB's access "
            "logs record TLS connections only, so they would stay empty. Each request is logged by "
            "the ALB behind it."
        )
        acknowledge(nlb, "AwsSolutions-ELB2", no_logs)
        acknowledge(nlb, "NIST.800.53.R5-ELBLoggingEnabled", no_logs)
        acknowledge(nlb, "ControlTower::CT.ELASTICLOADBALANCING.PR.6", no_logs)
        # An imported ALB's listeners already exist; a new one's are its children.
        listeners: list[IDependable] = (
            list(alb.listeners) if isinstance(alb, elbv2.ApplicationLoadBalancer) else [alb]
        )
        for port in sorted(ports):
            scope = Construct(self, f"Port{port}")
            target_group = alb_target_group(
                scope,
                "TargetGroup",
                vpc=vpc,
                alb_arn=alb.load_balancer_arn,
                port=port,
                https=ports[port] is elbv2.ApplicationProtocol.HTTPS,
                after=listeners,
            )
            tcp_listener(scope, "Listener", nlb=nlb, port=port, target_group=target_group)
            nlb.connections.allow_to(alb, ec2.Port.tcp(port), "PrivateLink load balancer to the ALB")
            self.target_groups[port] = target_group
        return nlb


def _validate(
    config: PrivateLinkConfig,
    vpc: ec2.IVpc | None,
    load_balancer: elbv2.INetworkLoadBalancer | None,
    alb: elbv2.IApplicationLoadBalancer | None,
    ports: Mapping[int, elbv2.ApplicationProtocol],
    deletion_protection: bool,
) -> None:
    if not config.enabled:
        raise ValueError("'private_link.enabled' must be true to build an endpoint service, got false")
    if not config.allowed_principals:
        raise ValueError(
            "'private_link.allowed_principals' must name at least one principal (an endpoint "
            "service no one may connect to serves no one), got none"
        )
    if (load_balancer is None) == (alb is None):
        given = "both" if load_balancer is not None else "neither"
        raise ValueError(f"give exactly one of 'load_balancer' (an NLB) or 'alb', got {given}")
    if alb is not None and vpc is None:
        raise ValueError("'vpc' (the ALB's) is needed to build the NLB in front of the ALB, got none")
    if alb is not None and not ports:
        raise ValueError("'ports' must list the ALB's listener ports to forward, got none")
    if load_balancer is not None and ports:
        raise ValueError(
            "'ports' applies only in front of an ALB (an NLB's listeners already exist), got "
            f"{', '.join(str(p) for p in sorted(ports))}"
        )
    if load_balancer is not None and deletion_protection:
        raise ValueError(
            "'deletion_protection' applies only to the NLB built in front of an ALB (a given NLB "
            "keeps its own setting), got true"
        )
    for port in ports:
        if not 1 <= port <= 65535:
            raise ValueError(f"'ports' must be 1-65535, got {port}")
