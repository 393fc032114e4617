"""An internal Network Load Balancer that carries the gateway's calls to an internet-facing ALB.

An internet-facing ALB's DNS name resolves to the public addresses of its nodes, so the gateway
pods, in the private subnets, would reach it only through the NAT gateways. Instead an internal
NLB in the private subnets listens on the ALB's gateway listener port and forwards, over TCP, to a
target group of type `alb` that registers the ALB on that port. The ALB then routes, balances (least
outstanding requests, the Target Optimizer's cap) and runs its web ACL as for any client.

The AWS rules this follows ("Use an Application Load Balancer as a target of a Network Load
Balancer", https://docs.aws.amazon.com/elasticloadbalancing/latest/network/application-load-balancer-target.html):
one ALB per target group; the same VPC and account; an ALB the target of at most two NLBs; the
target group's protocol TCP and its port an ALB listener's port; only TCP listeners forward to
it; health checks HTTP or HTTPS, to a listener of that port and protocol; its attributes cannot
be modified. The deploy rules in `gpufarm/deploy_rules/elbv2.py` check each of them at synth. See
docs/decisions/0050-gateway-route-balancing.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from constructs import Construct, IDependable

from gpufarm.constructs._util import acknowledge, private_subnets

ALB_HEALTH_CHECK_PATH = "/"
ALB_HEALTHY_CODES = "200-499"
"""Any answer from the ALB itself (its 404 for unknown routes, 401 when authentication is on)."""

NO_ACCESS_LOGS = (
    "This NLB has only TCP listeners forwarding to the ALB; an NLB writes access logs only for TLS "
    "listeners (https://docs.aws.amazon.com/elasticloadbalancing/latest/network/enable-access-logs.html), "
    "so they would stay empty. Each request is logged by the ALB behind it."
)


def alb_target_group(
    scope: Construct,
    id: str,
    *,
    vpc: ec2.IVpc,
    alb_arn: str,
    port: int,
    https: bool,
    after: Sequence[IDependable],
) -> elbv2.CfnTargetGroup:
    """A target group of type `alb` registering the ALB `alb_arn` on its listener `port`.

    TCP (the only protocol such a group takes), health-checked with `GET /` on the same port in
    `HTTPS` when `https`, else `HTTP` (the listener's protocol): any answer below 500 is healthy.
    No attributes: a group of type `alb` always keeps their defaults. It depends on `after` (the
    ALB's listeners): the ALB can be registered on a port only once it listens there.
    """
    target_group = elbv2.CfnTargetGroup(
        scope,
        id,
        target_type="alb",
        protocol="TCP",
        port=port,
        vpc_id=vpc.vpc_id,
        targets=[elbv2.CfnTargetGroup.TargetDescriptionProperty(id=alb_arn, port=port)],
        health_check_enabled=True,
        health_check_protocol="HTTPS" if https else "HTTP",
        health_check_path=ALB_HEALTH_CHECK_PATH,
        health_check_port="traffic-port",
        matcher=elbv2.CfnTargetGroup.MatcherProperty(http_code=ALB_HEALTHY_CODES),
    )
    target_group.node.add_dependency(*after)
    return target_group


def tcp_listener(
    scope: Construct,
    id: str,
    *,
    nlb: elbv2.INetworkLoadBalancer,
    port: int,
    target_group: elbv2.CfnTargetGroup,
) -> elbv2.CfnListener:
    """A TCP listener on `port` forwarding to an `alb` target group (only TCP listeners may)."""
    listener = elbv2.CfnListener(
        scope,
        id,
        load_balancer_arn=nlb.load_balancer_arn,
        port=port,
        protocol="TCP",
        default_actions=[elbv2.CfnListener.ActionProperty(type="forward", target_group_arn=target_group.ref)],
    )
    acknowledge(
        listener,
        "NIST.800.53.R5-ELBv2ACMCertificateRequired",
        "A target group of type 'alb' takes TCP only, so this listener passes the bytes "
        "through unchanged: TLS, when the tier has a certificate, ends at the ALB's HTTPS "
        "listener with that ACM certificate.",
    )
    return listener


class GatewayNlb(Construct):
    """An internal NLB in `vpc`'s private subnets in front of one ALB listener, for the gateway pods.

    A TCP listener on `port` forwards to a target group of type `alb` registering `alb` on
    `port` (which must be an HTTP listener of the ALB: its health checks use that protocol). The
    NLB's security group admits `callers` on `port` and reaches the ALB's security group on
    `port` only; the ALB's security group admits the NLB's. The ALB keeps the client's source
    address (a group of type `alb` preserves it: the ELB API's `preserve_client_ip.enabled` is
    off by default only for IP targets over TCP or TLS), and a rule that names the NLB's security
    group admits that traffic whatever its source address.

    Defaults: cross-zone load balancing on (`cross_zone`), so a zone whose ALB node is unhealthy
    does not drop the calls that land on it; `deletion_protection` false (a stack with
    termination protection passes true). The security group is set at creation: the ELB API
    cannot add one to an NLB created without.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        alb: elbv2.IApplicationLoadBalancer,
        port: int,
        callers: ec2.ISecurityGroup,
        after: Sequence[IDependable],
        cross_zone: bool = True,
        deletion_protection: bool = False,
    ) -> None:
        super().__init__(scope, id)
        if not 1 <= port <= 65535:
            raise ValueError(f"'port' must be 1-65535, got {port}")
        self.port = port
        alb_groups = alb.connections.security_groups
        # The rules sit inside the group (one resource, not three): the template's resources are
        # budgeted (docs/enterprise.md, "Template size"). The group depends on the ALB's and the
        # callers' groups; the ALB's rule admitting it is a resource of its own, so no cycle forms.
        self.group = ec2.CfnSecurityGroup(
            self,
            "SecurityGroup",
            vpc_id=vpc.vpc_id,
            group_description="Gateway network load balancer: gateway pods in, the ALB gateway listener out",
            security_group_ingress=[
                ec2.CfnSecurityGroup.IngressProperty(
                    ip_protocol="tcp",
                    from_port=port,
                    to_port=port,
                    source_security_group_id=callers.security_group_id,
                    description="Gateway pods to the model routes",
                )
            ],
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="tcp",
                    from_port=port,
                    to_port=port,
                    destination_security_group_id=group.security_group_id,
                    description="Gateway load balancer to the ALB",
                )
                for group in alb_groups
            ],
        )
        self.security_group = ec2.SecurityGroup.from_security_group_id(
            self, "SecurityGroupRef", self.group.attr_group_id, allow_all_outbound=False, mutable=False
        )
        """The NLB's security group (its rules are fixed: :attr:`group` holds them)."""
        self.load_balancer = elbv2.NetworkLoadBalancer(
            self,
            "Resource",
            vpc=vpc,
            internet_facing=False,
            vpc_subnets=ec2.SubnetSelection(subnets=private_subnets(vpc)),
            security_groups=[self.security_group],
            cross_zone_enabled=cross_zone,
            deletion_protection=deletion_protection,
        )
        acknowledge(self.load_balancer, "AwsSolutions-ELB2", NO_ACCESS_LOGS)
        acknowledge(self.load_balancer, "NIST.800.53.R5-ELBLoggingEnabled", NO_ACCESS_LOGS)
        acknowledge(self.load_balancer, "ControlTower::CT.ELASTICLOADBALANCING.PR.6", NO_ACCESS_LOGS)
        self.target_group = alb_target_group(
            self, "TargetGroup", vpc=vpc, alb_arn=alb.load_balancer_arn, port=port, https=False, after=after
        )
        self.listener = tcp_listener(
            self, "Listener", nlb=self.load_balancer, port=port, target_group=self.target_group
        )
        for group in alb_groups:
            group.add_ingress_rule(
                self.security_group, ec2.Port.tcp(port), "Gateway load balancer to the ALB"
            )

    @property
    def dns_name(self) -> str:
        """The NLB's DNS name (resolves to its private addresses in the private subnets)."""
        return self.load_balancer.load_balancer_dns_name

    @property
    def url(self) -> str:
        """`http://<nlb>:<port>`: what the gateway calls instead of the ALB."""
        return f"http://{self.dns_name}:{self.port}"
