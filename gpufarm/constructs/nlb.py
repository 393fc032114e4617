"""The Network Load Balancer in front of the models (ingress kind 'nlb'), owned by CDK.

A Network Load Balancer reads no HTTP, so it cannot route by path as :class:`InferenceAlb`
does: each model gets its own listener port instead (``ModelConfig.listener_port``), and a
client sets ``base_url=https://<nlb>:<port>/v1``. What it offers in exchange: a fixed address
per Availability Zone (Elastic IPs when internet-facing), TLS termination with ALPN for gRPC and
HTTP/2 clients, long-lived TCP streams, PrivateLink (:class:`InferencePrivateLink`), and weighted
forwarding across several target groups, so one model can be served by pods on different GPU
pools in a fixed ratio. See docs/decisions/0021-nlb-and-privatelink.md.

Both implement :class:`gpufarm.constructs.load_balancer.LoadBalancer` (``connections``,
``dns_name``, ``target_groups``, ``allow_targets_in``, ``bind_services``, ``bind_endpoints``,
``route_default_to``, ``bind_default``, ``base_url``, ``load_balancer``, ``kind``), so a stack can
hold either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gpufarm.config.model import IngressConfig, LoadBalancerKind, LoadBalancerScheme, PrivateLinkConfig
from gpufarm.config.validate import HEALTH_CHECK_TIMEOUT_SECONDS
from gpufarm.constructs._util import (
    TLS_POLICY,
    access_logs_bucket,
    acknowledge_open_ingress,
    construct_id,
    private_subnets,
    validate_weights,
)
from gpufarm.constructs.load_balancer import InferenceLoadBalancer, no_dicts_with_endpoints, routes_of
from gpufarm.constructs.private_link import InferencePrivateLink
from gpufarm.core.endpoints import HEALTH_PATH, Endpoint, health_paths_of
from gpufarm.core.gpu_health import TARGET_UNHEALTHY_THRESHOLD

SECURITY_GROUP_RULES = 60
"""Inbound rules a security group holds by default (VPC quota)."""


class AlpnPolicy(StrEnum):
    """Application-Layer Protocol Negotiation on a TLS listener (CloudFormation values)."""

    HTTP1_ONLY = "HTTP1Only"
    """Negotiate HTTP/1.1 (and 1.0) only."""
    HTTP2_ONLY = "HTTP2Only"
    """Negotiate HTTP/2 only (gRPC backends)."""
    HTTP2_OPTIONAL = "HTTP2Optional"
    """Prefer HTTP/1.1; HTTP/2 for clients that offer nothing else."""
    HTTP2_PREFERRED = "HTTP2Preferred"
    """Prefer HTTP/2 over HTTP/1.1."""
    NONE = "None"
    """No ALPN negotiation."""


class InferenceNlb(InferenceLoadBalancer):
    """A Network Load Balancer with one TCP or TLS listener and IP target group(s) per model.

    Defaults (from :class:`IngressConfig` and its `nlb` block): internal, in the private
    subnets; internet-facing in the public subnets with one Elastic IP per Availability Zone
    when `nlb.static_ips` (the default). TLS listeners (`nlb.tls`, the default; needs
    `certificate_arn`) with the TLS 1.2+ policy and ALPN `alpn_policy` (default
    `HTTP2Optional`: HTTP/1.1 for clients offering it, which vLLM speaks, HTTP/2 for gRPC
    clients that offer only h2); otherwise TCP listeners whose idle timeout is
    `idle_timeout_seconds` (a TLS listener's is fixed at 350 s). Cross-zone load balancing per
    `nlb.cross_zone`. A security group lets clients reach the listener ports only, from
    `allowed_cidrs` (`vpc_cidr`, else the VPC's CIDR, when empty); with
    `private_link.enabled` its inbound rules are not applied to PrivateLink traffic, whose
    access the endpoint service's allowed principals decide. Access logs (TLS connections;
    an NLB logs nothing for plain TCP) to a versioned SSE-S3 bucket kept
    `access_logs.retention_days` (a deleted or expired log stays recoverable 30 more days).
    `deletion_protection` (default false) makes the ELB API refuse to delete the load balancer
    until the attribute is turned off: a stack with termination protection passes true.

    Target groups: type `ip`, TCP to `target_port`, health check `GET /health` on the traffic
    port every `health_check_interval_seconds`, `deregistration_delay_seconds` to drain, the
    connections still open at the end of the delay closed (a client sees a reset rather than a
    hung stream), client IP preservation off (pods see the load balancer's address, so the
    pods' security group needs only the load balancer's security group as source and no
    client hairpins into itself), tagged `eks:eks-cluster-name` for EKS Auto Mode.

    `listeners` maps each model to its listener port. `weights` maps a model to
    `{group: weight}` (0-999): the model gets one target group per group and its listener
    forwards to them by weight (for pods of one model on different GPU pools); other models
    get one target group. `slow_start_seconds` and the routing algorithm do not apply (an NLB
    hashes each flow to a target); the ALB-only `waf`, `target_optimizer`, `oidc`, `cognito`
    and `lcu_reservation` are rejected rather than ignored (inspect NLB traffic with a Gateway
    Load Balancer instead of WAF).

    `endpoints` (from :func:`gpufarm.core.endpoints.endpoints_of`, what the tier stack passes)
    replaces `listeners` and `weights`: they are read from it.
    """

    kind = LoadBalancerKind.NLB

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        config: IngressConfig,
        listeners: Mapping[str, int | None] | None = None,
        target_port: int,
        cluster_name: str,
        vpc_cidr: str | None = None,
        weights: Mapping[str, Mapping[str, int]] | None = None,
        alpn_policy: AlpnPolicy = AlpnPolicy.HTTP2_OPTIONAL,
        deletion_protection: bool = False,
        endpoints: Sequence[Endpoint] | None = None,
    ) -> None:
        super().__init__(scope, id)
        if endpoints is not None:
            no_dicts_with_endpoints(listeners=listeners, weights=weights)
            _, _, listeners, weights = routes_of(endpoints)
        self._health_paths = health_paths_of(endpoints or ())
        """Model -> its pods' health-check path (the engine's readiness path); HEALTH_PATH otherwise."""
        weights = dict(weights or {})
        cidrs = list(config.allowed_cidrs) or [vpc_cidr or vpc.vpc_cidr_block]
        self.listener_ports: dict[str, int] = _validate(config, listeners or {}, weights, cidrs)
        """Model name -> its listener port."""
        self.config = config
        self.target_port = target_port
        """The pod port the target groups send traffic (and health checks) to."""
        self.tls = config.nlb.tls
        self.alpn_policy = alpn_policy
        self.vpc_id = vpc.vpc_id
        self.cluster_name = cluster_name
        internet_facing = config.scheme is LoadBalancerScheme.INTERNET_FACING

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="Inference network load balancer: clients in on listener ports, pods out",
        )
        self._client_peers = [ec2.Peer.ipv4(cidr) for cidr in cidrs]
        acknowledge_open_ingress(self.security_group, config)
        self.elastic_ips: list[ec2.CfnEIP] = []
        """One Elastic IP per AZ (internet-facing with `nlb.static_ips`), else empty."""
        mappings: list[elbv2.SubnetMapping] | None = None
        selection: ec2.SubnetSelection | None = None
        if internet_facing and config.nlb.static_ips:
            mappings = self._static_ip_mappings(vpc)
        else:
            subnets = list(vpc.public_subnets) if internet_facing else private_subnets(vpc)
            selection = ec2.SubnetSelection(subnets=subnets)
        self.load_balancer = elbv2.NetworkLoadBalancer(
            self,
            "Resource",
            vpc=vpc,
            internet_facing=internet_facing,
            security_groups=[self.security_group],
            cross_zone_enabled=config.nlb.cross_zone,
            # PrivateLink consumers come from other VPCs with any addresses; the endpoint
            # service's allowed principals and acceptance decide who connects.
            enforce_security_group_inbound_rules_on_private_link_traffic=(
                False if config.private_link.enabled else None
            ),
            subnet_mappings=mappings,
            vpc_subnets=selection,
            deletion_protection=deletion_protection,
        )
        self.access_logs_bucket: s3.Bucket | None = None
        if config.access_logs.enabled:
            self.access_logs_bucket = self._access_logs_bucket()
            self.load_balancer.log_access_logs(self.access_logs_bucket, prefix="nlb")

        self.target_groups: dict[str, elbv2.CfnTargetGroup] = {}
        """Model -> its target group, for models without weights."""
        self.weighted_target_groups: dict[str, dict[str, elbv2.CfnTargetGroup]] = {}
        """Model -> group -> target group, for models with weights."""
        self.listeners: dict[str, elbv2.CfnListener] = {}
        """Model -> its listener."""
        self.default_target_group: elbv2.CfnTargetGroup | None = None
        """The gateway's target group once :meth:`route_default_to` was called."""
        self.default_listener: elbv2.CfnListener | None = None
        self.default_port: int | None = None
        """The gateway's pod port once :meth:`route_default_to` was called."""
        for name, port in self.listener_ports.items():
            self._model_listener(name, port, weights.get(name))

    # ----------------------------------------------------------------------- public API

    @property
    def connections(self) -> ec2.Connections:
        """The load balancer's security-group connections."""
        return self.load_balancer.connections

    @property
    def dns_name(self) -> str:
        """DNS name of the load balancer."""
        return self.load_balancer.load_balancer_dns_name

    @property
    def load_balancer_full_name(self) -> str:
        """`net/<name>/<id>`, the CloudWatch `LoadBalancer` dimension."""
        return self.load_balancer.load_balancer_full_name

    @property
    def scheme(self) -> str:
        """'https' (TLS listeners) or 'http' (TCP listeners), as clients must call them."""
        return "https" if self.tls else "http"

    @property
    def default_listener_port(self) -> int:
        """The gateway listener's port: 443 with TLS, else 80."""
        return 443 if self.tls else 80

    @property
    def target_ports(self) -> list[int]:
        """Pod ports the load balancer connects to (and health-checks)."""
        return [self.target_port]

    def base_url(self, model_name: str) -> str:
        """The OpenAI `base_url` of a model: `<scheme>://<nlb>:<port>/v1`."""
        return self._url(self.listener_ports[model_name])

    def base_url_default(self) -> str:
        """The OpenAI `base_url` of the default listener (the gateway): `<scheme>://<nlb>/v1`."""
        return self._url(self.default_listener_port)

    def add_gateway_listener(self, *, port: int, callers: ec2.ISecurityGroup) -> str:
        """Refused: an NLB balances connections, not outstanding requests, and has no Target
        Optimizer, so the gateway keeps calling the models' Services (see
        `gpufarm.core.endpoints.gateway_route`)."""
        raise ValueError(
            "add_gateway_listener() needs an Application Load Balancer (an NLB balances "
            "connections, not outstanding requests), got kind 'nlb'"
        )

    def private_link(
        self,
        scope: Construct,
        id: str,
        *,
        config: PrivateLinkConfig,
        vpc: ec2.IVpc,
        deletion_protection: bool = False,
    ) -> InferencePrivateLink:
        """A PrivateLink endpoint service on this NLB itself (`vpc` and `deletion_protection` unused:
        the NLB has its own)."""
        return InferencePrivateLink(scope, id, config=config, load_balancer=self.load_balancer)

    def route_default_to(self, *, port: int, health_check_path: str) -> elbv2.CfnTargetGroup:
        """Add a listener on 443 (TLS) or 80 (TCP) forwarding to one IP target group (the gateway).

        The target group `Default-Route/TargetGroup` sends TCP to `port` and health-checks
        `health_check_path`; clients in `allowed_cidrs` may reach the listener. Call it before
        :meth:`allow_targets_in` so the gateway port is opened too.
        """
        if self.default_target_group is not None:
            raise ValueError("route_default_to() was already called: the load balancer has one default route")
        listener_port = self.default_listener_port
        for model, model_port in self.listener_ports.items():
            if model_port == listener_port:
                raise ValueError(
                    f"route_default_to() needs listener port {listener_port} for the gateway, "
                    f"got it taken by model {model!r}"
                )
        self.default_port = port
        scope = Construct(self, "Default-Route")
        self.default_target_group = self._target_group(
            scope, "TargetGroup", port=port, health_check_path=health_check_path
        )
        self.default_listener = self._listener(
            scope, listener_port, _forward(self.default_target_group), "Gateway clients"
        )
        return self.default_target_group

    def allow_targets_in(self, target_security_group: ec2.ISecurityGroup) -> None:
        """Open the target port (and the gateway's) from this load balancer to the pods, nothing else.

        Health checks use the same ports; an NLB applies outbound rules to them.
        """
        if self.default_port is not None:
            self.connections.allow_to(
                target_security_group, ec2.Port.tcp(self.default_port), "Load balancer to the gateway"
            )
        self.connections.allow_to(
            target_security_group, ec2.Port.tcp(self.target_port), "Load balancer to vLLM pods"
        )

    def _check_bound_model(self, name: str) -> None:
        if name not in self.listener_ports:
            raise ValueError(
                f"bind_services() got model {name!r}, which has no listener; models: "
                f"{', '.join(self.listener_ports)}"
            )

    # ----------------------------------------------------------------------- internals

    def _url(self, port: int) -> str:
        default = 443 if self.tls else 80
        host = self.dns_name if port == default else f"{self.dns_name}:{port}"
        return f"{self.scheme}://{host}/v1"

    def _static_ip_mappings(self, vpc: ec2.IVpc) -> list[elbv2.SubnetMapping]:
        """One public subnet per AZ, each with an Elastic IP named after its AZ."""
        subnets = vpc.select_subnets(subnet_type=ec2.SubnetType.PUBLIC, one_per_az=True).subnets
        mappings = []
        for index, subnet in enumerate(subnets, start=1):
            az = subnet.availability_zone
            suffix = str(index) if cdk.Token.is_unresolved(az) else construct_id(az)
            eip = ec2.CfnEIP(
                self,
                f"ElasticIp{suffix}",
                domain="vpc",
                tags=[cdk.CfnTag(key="Name", value=f"{self.node.path}/{az}")],
            )
            self.elastic_ips.append(eip)
            mappings.append(elbv2.SubnetMapping(subnet=subnet, allocation_id=eip.attr_allocation_id))
        return mappings

    def _access_logs_bucket(self) -> s3.Bucket:
        return access_logs_bucket(
            self,
            retention_days=self.config.access_logs.retention_days,
            kind="network load balancer",
            kms_reason=(
                "The NLB's access logs hold TLS connection metadata (addresses, ports, cipher, bytes), "
                "never request content, and are encrypted at rest with SSE-S3 as the ALB's must be. "
                "SSE-KMS would need a customer managed key admitting the log delivery service for "
                "this bucket alone; access is limited instead by the private, TLS-only bucket."
            ),
        )

    def _model_listener(self, name: str, port: int, weights: Mapping[str, int] | None) -> None:
        scope = Construct(self, construct_id(name))
        if weights is None:
            health = self._health_paths.get(name, HEALTH_PATH)
            target_group = self._target_group(
                scope, "TargetGroup", port=self.target_port, health_check_path=health
            )
            self.target_groups[name] = target_group
            action = _forward(target_group)
        else:
            groups = {
                group: self._target_group(
                    scope,
                    f"TargetGroup{construct_id(group)}",
                    port=self.target_port,
                    health_check_path=self._health_paths.get(name, HEALTH_PATH),
                )
                for group in sorted(weights)
            }
            self.weighted_target_groups[name] = groups
            action = elbv2.CfnListener.ActionProperty(
                type="forward",
                forward_config=elbv2.CfnListener.ForwardConfigProperty(
                    target_groups=[
                        elbv2.CfnListener.TargetGroupTupleProperty(
                            target_group_arn=groups[group].ref, weight=weights[group]
                        )
                        for group in sorted(weights)
                    ]
                ),
            )
        self.listeners[name] = self._listener(scope, port, action, f"Clients of {name}")

    def _listener(
        self, scope: Construct, port: int, action: elbv2.CfnListener.ActionProperty, description: str
    ) -> elbv2.CfnListener:
        for peer in self._client_peers:
            self.security_group.add_ingress_rule(peer, ec2.Port.tcp(port), description)
        if self.tls:
            return elbv2.CfnListener(
                scope,
                "Listener",
                load_balancer_arn=self.load_balancer.load_balancer_arn,
                port=port,
                protocol="TLS",
                certificates=[
                    elbv2.CfnListener.CertificateProperty(certificate_arn=self.config.certificate_arn)
                ],
                ssl_policy=TLS_POLICY,
                alpn_policy=[self.alpn_policy.value],
                default_actions=[action],
            )
        return elbv2.CfnListener(
            scope,
            "Listener",
            load_balancer_arn=self.load_balancer.load_balancer_arn,
            port=port,
            protocol="TCP",
            default_actions=[action],
            listener_attributes=[
                elbv2.CfnListener.ListenerAttributeProperty(
                    key="tcp.idle_timeout.seconds", value=str(self.config.idle_timeout_seconds)
                )
            ],
        )

    def _target_group(
        self, scope: Construct, id: str, *, port: int, health_check_path: str = HEALTH_PATH
    ) -> elbv2.CfnTargetGroup:
        cfg = self.config
        attributes = {
            "deregistration_delay.timeout_seconds": str(cfg.deregistration_delay_seconds),
            "deregistration_delay.connection_termination.enabled": "true",
            "preserve_client_ip.enabled": "false",
        }
        return elbv2.CfnTargetGroup(
            scope,
            id,
            target_type="ip",
            protocol="TCP",
            port=port,
            vpc_id=self.vpc_id,
            health_check_enabled=True,
            health_check_path=health_check_path,
            health_check_port="traffic-port",
            health_check_protocol="HTTP",
            health_check_interval_seconds=cfg.health_check_interval_seconds,
            health_check_timeout_seconds=HEALTH_CHECK_TIMEOUT_SECONDS,
            healthy_threshold_count=2,
            unhealthy_threshold_count=TARGET_UNHEALTHY_THRESHOLD,
            matcher=elbv2.CfnTargetGroup.MatcherProperty(http_code="200"),
            target_group_attributes=[
                elbv2.CfnTargetGroup.TargetGroupAttributeProperty(key=k, value=v)
                for k, v in attributes.items()
            ],
            # EKS Auto Mode registers pods only in target groups tagged with its cluster name.
            tags=[cdk.CfnTag(key="eks:eks-cluster-name", value=self.cluster_name)],
        )


def _forward(target_group: elbv2.CfnTargetGroup) -> elbv2.CfnListener.ActionProperty:
    return elbv2.CfnListener.ActionProperty(type="forward", target_group_arn=target_group.ref)


def _validate(
    config: IngressConfig,
    listeners: Mapping[str, int | None],
    weights: Mapping[str, Mapping[str, int]],
    cidrs: list[str],
) -> dict[str, int]:
    """Input a tier's validator also checks, repeated for direct use of the construct.

    Returns the listener port of each model.
    """
    for field in ("oidc", "cognito"):
        if getattr(config, field) is not None:
            raise ValueError(
                f"'{field}' must be empty with ingress kind 'nlb' (a Network Load Balancer cannot "
                "authenticate requests), got an identity provider"
            )
    for field, on in (
        ("target_optimizer.enabled", config.target_optimizer.enabled),
        ("waf.enabled", config.waf.enabled),
    ):
        if on:
            raise ValueError(
                f"'{field}' must be false with ingress kind 'nlb' (the Target Optimizer and AWS WAF "
                "attach to Application Load Balancers only), got true"
            )
    if config.nlb.tls and config.certificate_arn is None:
        raise ValueError(
            "'nlb.tls' needs 'certificate_arn' (a TLS listener presents an ACM certificate), got no "
            "certificate; set nlb.tls to false for TCP listeners"
        )
    if config.scheme is LoadBalancerScheme.INTERNET_FACING and not config.nlb.tls:
        raise ValueError(
            "'nlb.tls' must be true when 'scheme' is 'internet-facing' (prompts must not cross the "
            "internet in clear text), got false"
        )
    if config.lcu_reservation is not None:
        raise ValueError(
            "'lcu_reservation' applies only with ingress kind 'alb' (ALB capacity units), got "
            f"{config.lcu_reservation} with 'nlb'"
        )
    if not listeners:
        raise ValueError("'listeners' must name at least one model, got none")
    ports: dict[str, int] = {}
    owner: dict[int, str] = {}
    for name, port in listeners.items():
        if port is None:
            raise ValueError(
                f"'listener_port' of model {name!r} must be set with ingress kind 'nlb' (each model "
                "has its own listener), got none"
            )
        if not 1 <= port <= 65535:
            raise ValueError(f"'listener_port' of model {name!r} must be 1-65535, got {port}")
        if port in owner:
            raise ValueError(
                f"'listener_port' of model {name!r} must differ from model {owner[port]!r}'s (one "
                f"listener per port), got {port} for both"
            )
        owner[port] = name
        ports[name] = port
    validate_weights(weights, list(ports), entry="listener")
    rules = len(cidrs) * (len(ports) + 1)
    if rules > SECURITY_GROUP_RULES:
        raise ValueError(
            f"'allowed_cidrs' times listener ports (plus the gateway's) must be at most "
            f"{SECURITY_GROUP_RULES} security-group rules, got {len(cidrs)} x {len(ports) + 1} = {rules}"
        )
    return ports
