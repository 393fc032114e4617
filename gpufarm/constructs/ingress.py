"""The Application Load Balancer in front of the models, owned by CDK (never by Kubernetes).

Routing: OpenAI-style clients name the model in the JSON body, which a load balancer cannot read.
Each model therefore gets a path prefix: a client sets ``base_url=http://<alb>/<model>/v1`` and the
listener rule forwards ``/<model>/*`` to that model's target group, rewriting the path to drop the
prefix (``/qwen3-8b/v1/chat/completions`` reaches vLLM as ``/v1/chat/completions``). Any OpenAI
SDK works unchanged. See docs/decisions/0003-path-routing.md.

With the ALB Target Optimizer (``config.target_optimizer.enabled``) each target group carries a
``TargetControlPort`` and sends traffic to the agent sidecar's data port, which proxies to vLLM
(docs/decisions/0013-target-optimizer-sidecar.md). With ``config.oidc`` or ``config.cognito``
every model route authenticates before it forwards.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from gpufarm.config.model import (
    IngressConfig,
    LoadBalancerKind,
    LoadBalancerScheme,
    PrivateLinkConfig,
    default_route_priority,
)
from gpufarm.config.validate import HEALTH_CHECK_TIMEOUT_SECONDS
from gpufarm.constructs._util import (
    ALB_TLS_POLICY,
    access_logs_bucket,
    acknowledge_all,
    acknowledge_open_ingress,
    construct_id,
    private_subnets,
    validate_weights,
)
from gpufarm.constructs.alb_actions import action_json, cognito_config, forward, oidc_config
from gpufarm.constructs.alb_actions import secret_reference as secret_reference  # re-exported
from gpufarm.constructs.gateway_nlb import GatewayNlb
from gpufarm.constructs.load_balancer import InferenceLoadBalancer, no_dicts_with_endpoints, routes_of
from gpufarm.constructs.private_link import InferencePrivateLink
from gpufarm.constructs.waf import InferenceWaf
from gpufarm.core.endpoints import HEALTH_PATH, Endpoint, health_paths_of
from gpufarm.core.endpoints import RouterTarget as RouterTarget  # re-exported: its documented home
from gpufarm.core.endpoints import route_prefix as route_prefix  # re-exported (constructs/__init__)
from gpufarm.core.gpu_health import TARGET_UNHEALTHY_THRESHOLD
from gpufarm.k8s.binding import TARGET_HEALTHY_THRESHOLD


class InferenceAlb(InferenceLoadBalancer):
    """An ALB with one IP target group per model, least-outstanding-requests routing.

    Defaults (from :class:`IngressConfig`): internal, in the private subnets, HTTP on port 80
    while internal (HTTPS on 443 with a TLS 1.2+ policy when a certificate is given; required
    when internet-facing), clients limited to `allowed_cidrs` (`vpc_cidr`, else the VPC's
    CIDR, when empty), idle timeout 600 s so long generations are not cut, invalid headers
    dropped, access logs to a versioned SSE-S3 bucket kept 90 days (a deleted or expired log
    stays recoverable 30 more days). Target groups:
    `least_outstanding_requests` without slow start (the ELB API refuses the pair, so a
    `config.slow_start_seconds` above 0 raises), 300 s deregistration delay, health check
    `GET /health` every 15 s. The load balancer may reach targets only on their ports
    (:attr:`target_ports`), through the security groups passed to :meth:`allow_targets_in`.
    Unknown paths get a 404 that explains the routing. Rule priorities come from
    `rule_priorities`, else from the model name, never from list position (removing a model
    must not move another's rule).

    `target_port` is the port vLLM listens on. With the Target Optimizer the target groups send
    traffic (and health checks) to the agent's data port instead (:attr:`target_port`), and
    the agent's control port is their `TargetControlPort`. The port settings are fixed when a
    target group is created, so the target groups' construct IDs and the bindings' names carry
    them: turning the optimizer on or off, or changing its ports, creates new target groups and
    bindings and deletes the old ones (a switch-over rather than a failed update; see
    docs/decisions/0013-target-optimizer-sidecar.md).

    With `config.lcu_reservation` the load balancer keeps that many capacity units provisioned
    (`MinimumLoadBalancerCapacity`, at least 100; billed whether used or not), so a launch or
    an expected peak does not wait for it to scale.

    With `config.waf.enabled` an :class:`InferenceWaf` is attached (its logs encrypted with
    `logs_key`, which must let CloudWatch Logs use it, and removed per `removal_policy`).
    With `config.oidc` or `config.cognito` (HTTPS only) each route authenticates first. A
    request without the load balancer's session cookie gets a 401 instead of a login redirect
    (`OnUnauthenticatedRequest: deny`): API clients cannot follow a redirect, so they send the
    cookie a browser sign-in produced. The load balancer then also calls the identity provider
    on HTTPS (egress 443 to any address: the provider's addresses are unknown at synth).

    `deletion_protection` (default false) makes the ELB API refuse to delete the load balancer
    until the attribute is turned off: a stack with termination protection passes true. A
    change that replaces the load balancer (its scheme) then needs the attribute off first.

    `weights` maps a model to `{group: weight}` (0-999, at least one above 0, at most five
    groups): that model gets one target group per group, construct IDs
    `<Model>/TargetGroup<Group>` (plus the optimizer's suffix), and its rule forwards to them
    by weight (for the pods of one model on different GPU pools, each group bound to its own
    Service). Within a group, least outstanding requests picks the pod. Not for `routed`
    models. Default: one target group per model.

    `endpoints` (from :func:`gpufarm.core.endpoints.endpoints_of`, what the tier stack passes)
    replaces `model_names`, `rule_priorities`, `routed` and `weights`: they are read from it.

    `target_type` (default `ip`: pods registered by TargetGroupBindings) may be `instance` for
    targets registered by Auto Scaling groups (`cluster.provisioning: ec2`); those target groups
    carry no EKS cluster tag.
    """

    kind = LoadBalancerKind.ALB

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        config: IngressConfig,
        model_names: Sequence[str] = (),
        target_port: int,
        cluster_name: str,
        vpc_cidr: str | None = None,
        rule_priorities: Mapping[str, int] | None = None,
        logs_key: kms.IKey | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        deletion_protection: bool = False,
        routed: Mapping[str, RouterTarget] | None = None,
        weights: Mapping[str, Mapping[str, int]] | None = None,
        endpoints: Sequence[Endpoint] | None = None,
        target_type: str = "ip",
    ) -> None:
        super().__init__(scope, id)
        if target_type not in ("ip", "instance"):
            raise ValueError(f"'target_type' must be 'ip' or 'instance', got {target_type!r}")
        self.target_type = target_type
        """`ip` (pods, bound by TargetGroupBindings) or `instance` (Auto Scaling groups register them)."""
        if endpoints is not None:
            no_dicts_with_endpoints(
                model_names=model_names, rule_priorities=rule_priorities, routed=routed, weights=weights
            )
            model_names, rule_priorities, _, weights = routes_of(endpoints)
            routed = {e.model: e.router for e in endpoints if e.router is not None}
        self._health_paths = health_paths_of(endpoints or ())
        """Model -> its pods' health-check path (the engine's readiness path); HEALTH_PATH otherwise."""
        _validate(config, target_port)
        self.routed = dict(routed or {})
        """Models whose target groups point at a router (KV-cache-aware routing) instead of vLLM."""
        if self.routed and config.target_optimizer.enabled:
            raise ValueError(
                "'routed' must be empty with the Target Optimizer enabled (both choose the pod), "
                f"got {sorted(self.routed)}"
            )
        weights = {name: dict(groups) for name, groups in (weights or {}).items()}
        validate_weights(weights, list(model_names), entry="route")
        both = sorted(set(weights) & set(self.routed))
        if both:
            raise ValueError(
                f"'weights' must not name a routed model (its router chooses among one target "
                f"group's pods), got {both[0]!r} in both"
            )
        self.config = config
        optimizer = config.target_optimizer
        self.app_port = target_port
        """The port vLLM listens on in the pod."""
        self.target_port = optimizer.data_port if optimizer.enabled else target_port
        """The port targets receive the load balancer's traffic (and health checks) on."""
        self.control_port: int | None = optimizer.control_port if optimizer.enabled else None
        """The target groups' TargetControlPort (None without the Target Optimizer)."""
        internet_facing = config.scheme is LoadBalancerScheme.INTERNET_FACING
        self.https = config.certificate_arn is not None
        self.listener_port = 443 if self.https else 80

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="Inference load balancer: clients in, vLLM pods out",
        )
        # A literal CIDR keeps the rule reviewable; the VPC's token CIDR is the last resort.
        cidrs = list(config.allowed_cidrs) or [vpc_cidr or vpc.vpc_cidr_block]
        for cidr in cidrs:
            self.security_group.add_ingress_rule(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(self.listener_port), "Inference clients"
            )
        acknowledge_open_ingress(self.security_group, config)
        subnets = vpc.public_subnets if internet_facing else private_subnets(vpc)
        self.load_balancer = elbv2.ApplicationLoadBalancer(
            self,
            "Resource",
            vpc=vpc,
            internet_facing=internet_facing,
            security_group=self.security_group,
            vpc_subnets=ec2.SubnetSelection(subnets=subnets),
            idle_timeout=cdk.Duration.seconds(config.idle_timeout_seconds),
            drop_invalid_header_fields=True,
            # MinimumLoadBalancerCapacity.CapacityUnits: capacity held ready before traffic arrives.
            minimum_capacity_unit=config.lcu_reservation,
            deletion_protection=deletion_protection,
        )
        self.access_logs_bucket: s3.Bucket | None = None
        if config.access_logs.enabled:
            self.access_logs_bucket = self._access_logs_bucket()
            self.load_balancer.log_access_logs(self.access_logs_bucket, prefix="alb")
        self.waf: InferenceWaf | None = None
        if config.waf.enabled:
            self.waf = InferenceWaf(
                self,
                "Waf",
                config=config.waf,
                load_balancer_arn=self.load_balancer.load_balancer_arn,
                logs_key=logs_key,
                removal_policy=removal_policy,
            )
        if config.oidc or config.cognito:
            # The load balancer exchanges the authorization code and reads user info itself.
            self.security_group.add_egress_rule(
                ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "Identity provider token and user info endpoints"
            )

        self.listener = self._listener()
        self.vpc_id = vpc.vpc_id
        self.cluster_name = cluster_name
        self.default_target_group: elbv2.CfnTargetGroup | None = None
        """The gateway's target group once :meth:`route_default_to` was called."""
        self.default_port: int | None = None
        priorities = dict(rule_priorities or {})
        self.target_groups: dict[str, elbv2.CfnTargetGroup] = {}
        """Model -> its target group, for models without weights."""
        self.weighted_target_groups: dict[str, dict[str, elbv2.CfnTargetGroup]] = {}
        """Model -> group -> target group, for models with weights."""
        self._forwards: dict[str, tuple[int, elbv2.CfnListenerRule.ActionProperty]] = {}
        """Model -> (rule priority, forward action): what :meth:`add_gateway_listener` repeats."""
        self.gateway_listener: elbv2.CfnListener | None = None
        """The listener the gateway calls the models on, once :meth:`add_gateway_listener` was called."""
        self.gateway_nlb: GatewayNlb | None = None
        """The internal NLB in front of :attr:`gateway_listener` on an internet-facing load balancer."""
        self._vpc = vpc
        self._vpc_cidr = vpc_cidr or vpc.vpc_cidr_block
        self._deletion_protection = deletion_protection
        for name in model_names:
            self._model_route(priorities.get(name, default_route_priority(name)), name, weights.get(name))

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
        """`app/<name>/<id>`, the CloudWatch `LoadBalancer` dimension."""
        return self.load_balancer.load_balancer_full_name

    @property
    def scheme(self) -> str:
        """'https' or 'http', as clients must call the listener."""
        return "https" if self.https else "http"

    def base_url(self, model_name: str) -> str:
        """The OpenAI `base_url` for a model: `<scheme>://<alb>/<model>/v1`."""
        return f"{self.scheme}://{self.dns_name}{route_prefix(model_name)}/v1"

    @property
    def target_ports(self) -> list[int]:
        """Pod ports the load balancer connects to: vLLM's, or the agent's data and control ports."""
        return [self.target_port] if self.control_port is None else [self.target_port, self.control_port]

    def route_default_to(self, *, port: int, health_check_path: str) -> elbv2.CfnTargetGroup:
        """Send every request that matches no model route to one IP target group (the gateway).

        The listener's default action (a 404 until now) becomes: authenticate (when configured),
        then forward to the new target group `Default-Route/TargetGroup` on `port`, with
        least-outstanding-requests routing and health checks on `health_check_path`. Call it
        before :meth:`allow_targets_in` so the gateway port is opened too.
        """
        if self.default_target_group is not None:
            raise ValueError("route_default_to() was already called: the listener has one default route")
        self.default_port = port
        # A '-' keeps these IDs apart from the models' (construct_id() of a model name has none).
        self.default_target_group = self._target_group(
            Construct(self, "Default-Route"),
            "TargetGroup",
            port=port,
            health_check_path=health_check_path,
        )
        listener = self.listener.node.default_child
        assert isinstance(listener, elbv2.CfnListener)
        actions = self._actions(self.default_target_group)
        listener.add_property_override(
            "DefaultActions", [cdk.Stack.of(self).resolve(action_json(a)) for a in actions]
        )
        return self.default_target_group

    def base_url_default(self) -> str:
        """The OpenAI `base_url` of the default route (the gateway): `<scheme>://<alb>/v1`."""
        return f"{self.scheme}://{self.dns_name}/v1"

    def add_gateway_listener(self, *, port: int, callers: ec2.ISecurityGroup) -> str:
        """A listener the gateway calls the models on; returns the URL the gateway calls.

        HTTP on `port`, with the client listener's model rules (`/<model>/*`, prefix stripped,
        same priorities) forwarding to the same target groups, so a request from the gateway gets
        least outstanding requests, the Target Optimizer's cap and a share's weight like any
        client's, and counts in the model's target-group metrics. No authentication: the client
        authenticated on the default route before the gateway got the request. Its default action
        is the client listener's 404.

        On an internal load balancer, whose DNS name resolves to private addresses, the listener
        is open to `callers` (the pods' security group) and the URL is `http://<alb>:<port>`. On
        an internet-facing one, whose name resolves to public addresses, an internal
        :class:`GatewayNlb` (:attr:`gateway_nlb`) in the private subnets forwards `port` to the
        ALB: only the NLB's security group reaches the listener, `callers` reach the NLB, and the
        URL is `http://<nlb>:<port>`. With a web ACL, its per-IP rate rule stops counting the
        VPC's addresses (:meth:`InferenceWaf.exempt_from_rate_limit`): the gateway's few pods carry
        every client's requests. See docs/decisions/0050-gateway-route-balancing.md.
        """
        if self.gateway_listener is not None:
            raise ValueError("add_gateway_listener() was already called: the gateway has one listener")
        if port == self.listener_port:
            raise ValueError(
                f"'port' must differ from the client listener's port {self.listener_port}, got {port}"
            )
        scope = Construct(self, "Gateway-Route")
        self.gateway_listener = elbv2.CfnListener(
            scope,
            "Listener",
            load_balancer_arn=self.load_balancer.load_balancer_arn,
            port=port,
            protocol="HTTP",
            default_actions=[
                elbv2.CfnListener.ActionProperty(
                    type="fixed-response",
                    fixed_response_config=elbv2.CfnListener.FixedResponseConfigProperty(
                        status_code="404", content_type="application/json", message_body=_NOT_FOUND
                    ),
                )
            ],
        )
        plain_http = (
            "The gateway's listener: plain HTTP inside the VPC, open only to "
            + (
                "the gateway pods' security group"
                if self.config.scheme is LoadBalancerScheme.INTERNAL
                else "the security group of the internal NLB the gateway pods call"
            )
            + ". A certificate names the tier's domain, not the load balancer's *.elb.amazonaws.com "
            "name the gateway calls, and a redirect to HTTPS would send the gateway to the client "
            "listener, which authenticates. The client's own request reached the gateway on the "
            "HTTPS listener."
        )
        acknowledge_all(
            self.gateway_listener,
            dict.fromkeys(
                (
                    "NIST.800.53.R5-ALBHttpToHttpsRedirection",
                    "NIST.800.53.R5-ELBv2ACMCertificateRequired",
                    "ControlTower::CT.ELASTICLOADBALANCING.PR.1",
                ),
                plain_http,
            ),
        )
        for name, (priority, forward_action) in self._forwards.items():
            prefix = route_prefix(name)
            elbv2.CfnListenerRule(
                scope,
                f"Rule{construct_id(name)}",
                listener_arn=self.gateway_listener.ref,
                priority=priority,
                conditions=[_path_condition(prefix)],
                transforms=[_strip_prefix(prefix)],
                actions=[forward_action],
            )
        if self.waf is not None:
            # The gateway's calls come from the VPC (its pods' addresses, kept through the NLB):
            # a per-IP rate limit would count every client's requests against a few addresses.
            self.waf.exempt_from_rate_limit([self._vpc_cidr])
        if self.config.scheme is LoadBalancerScheme.INTERNAL:
            self.security_group.add_ingress_rule(
                callers, ec2.Port.tcp(port), "Gateway pods to the model routes"
            )
            return f"http://{self.dns_name}:{port}"
        # The ALB must listen on the port before the NLB's target group registers it there.
        self.gateway_nlb = GatewayNlb(
            scope,
            "Nlb",
            vpc=self._vpc,
            alb=self.load_balancer,
            port=port,
            callers=callers,
            after=[self.gateway_listener],
            deletion_protection=self._deletion_protection,
        )
        return self.gateway_nlb.url

    def private_link(
        self,
        scope: Construct,
        id: str,
        *,
        config: PrivateLinkConfig,
        vpc: ec2.IVpc,
        deletion_protection: bool = False,
    ) -> InferencePrivateLink:
        """A PrivateLink endpoint service on an internal NLB in front of the listener (in `vpc`)."""
        protocol = elbv2.ApplicationProtocol.HTTPS if self.https else elbv2.ApplicationProtocol.HTTP
        return InferencePrivateLink(
            scope,
            id,
            config=config,
            vpc=vpc,
            alb=self.load_balancer,
            ports={self.listener_port: protocol},
            deletion_protection=deletion_protection,
        )

    def allow_targets_in(self, target_security_group: ec2.ISecurityGroup) -> None:
        """Open :attr:`target_ports` from this load balancer to the pods' security group, nothing else."""
        if self.default_port is not None:
            self.connections.allow_to(
                target_security_group, ec2.Port.tcp(self.default_port), "Load balancer to the gateway"
            )
        for port in sorted({p for r in self.routed.values() for p in (r.port, r.health_check_port)}):
            self.connections.allow_to(
                target_security_group, ec2.Port.tcp(port), "Load balancer to the KV-cache-aware routers"
            )
        if self.control_port is None:
            self.connections.allow_to(
                target_security_group, ec2.Port.tcp(self.target_port), "Load balancer to vLLM pods"
            )
            return
        self.connections.allow_to(
            target_security_group, ec2.Port.tcp(self.target_port), "Load balancer to Target Optimizer agents"
        )
        self.connections.allow_to(
            target_security_group,
            ec2.Port.tcp(self.control_port),
            "Load balancer to Target Optimizer agents (control)",
        )

    def binding_name(self, service: str) -> str:
        """The TargetGroupBinding name of a Service: its own, plus the optimizer's ports when on.

        A binding's target group cannot change, so a binding to a replaced target group needs a
        new name.
        """
        return service if self.control_port is None else f"{service}-{self.target_port}-{self.control_port}"

    def _check_bound_model(self, name: str) -> None:
        if name not in self.target_groups and name not in self.weighted_target_groups:
            models = [*self.target_groups, *self.weighted_target_groups]
            raise ValueError(
                f"bind_services() got model {name!r}, which has no route; models: {', '.join(models)}"
            )

    def _model_binding(
        self,
        name: str,
        service: str,
        *,
        cluster: eks.ICluster,
        namespace: str,
        api_version: str,
        after: Construct | None,
    ) -> eks.KubernetesManifest:
        router = self.routed.get(name)
        if router is None:
            return super()._model_binding(
                name, service, cluster=cluster, namespace=namespace, api_version=api_version, after=after
            )
        # A binding's target group cannot change: a routed model's binding has its own name.
        return self._binding(
            f"Binding{construct_id(name)}Routed",
            cluster=cluster,
            namespace=namespace,
            name=f"{service}-routed",
            service=service,
            port=router.port,
            target_group=self.target_groups[name],
            api_version=api_version,
            after=after,
        )

    # ----------------------------------------------------------------------- internals

    @property
    def _revision(self) -> str:
        """Suffix of the IDs of resources fixed at creation by the optimizer's ports ('' when off).

        CloudFormation cannot change a target group's TargetControlPort in place; a new construct
        ID makes it create the new target group (and binding) first and delete the old ones.
        """
        return "" if self.control_port is None else f"Data{self.target_port}Control{self.control_port}"

    def _access_logs_bucket(self) -> s3.Bucket:
        return access_logs_bucket(
            self,
            retention_days=self.config.access_logs.retention_days,
            kind="load balancer",
            kms_reason=(
                "An Application Load Balancer delivers access logs only to buckets encrypted with "
                "SSE-S3 (Amazon S3-managed keys); with a KMS default key its log delivery fails."
            ),
        )

    def _listener(self) -> elbv2.ApplicationListener:
        not_found = elbv2.ListenerAction.fixed_response(
            404, content_type="application/json", message_body=_NOT_FOUND
        )
        if self.https:
            return self.load_balancer.add_listener(
                "Https",
                port=443,
                protocol=elbv2.ApplicationProtocol.HTTPS,
                certificates=[elbv2.ListenerCertificate.from_arn(str(self.config.certificate_arn))],
                ssl_policy=ALB_TLS_POLICY,
                open=False,
                default_action=not_found,
            )
        return self.load_balancer.add_listener(
            "Http",
            port=80,
            protocol=elbv2.ApplicationProtocol.HTTP,
            open=False,
            default_action=not_found,
        )

    def _target_group(
        self,
        scope: Construct,
        id: str,
        *,
        port: int,
        health_check_path: str,
        health_check_port: str = "traffic-port",
        target_control_port: int | None = None,
    ) -> elbv2.CfnTargetGroup:
        """A target group (of :attr:`target_type`) with least-outstanding-requests routing and an HTTP
        health check.

        No slow start: the ELB API refuses it together with least outstanding requests (see
        :func:`_validate`); a model's warm-up is held back by its startup probe instead.
        """
        cfg = self.config
        attributes = {
            "load_balancing.algorithm.type": "least_outstanding_requests",
            "deregistration_delay.timeout_seconds": str(cfg.deregistration_delay_seconds),
        }
        return elbv2.CfnTargetGroup(
            scope,
            id,
            target_type=self.target_type,
            protocol="HTTP",
            protocol_version="HTTP1",
            port=port,
            vpc_id=self.vpc_id,
            health_check_enabled=True,
            health_check_path=health_check_path,
            health_check_port=health_check_port,
            health_check_protocol="HTTP",
            health_check_interval_seconds=cfg.health_check_interval_seconds,
            health_check_timeout_seconds=HEALTH_CHECK_TIMEOUT_SECONDS,
            healthy_threshold_count=TARGET_HEALTHY_THRESHOLD,
            unhealthy_threshold_count=TARGET_UNHEALTHY_THRESHOLD,
            matcher=elbv2.CfnTargetGroup.MatcherProperty(http_code="200"),
            target_group_attributes=[
                elbv2.CfnTargetGroup.TargetGroupAttributeProperty(key=k, value=v)
                for k, v in attributes.items()
            ],
            # EKS Auto Mode registers pods only in target groups tagged with its cluster name.
            tags=[cdk.CfnTag(key="eks:eks-cluster-name", value=self.cluster_name)]
            if self.target_type == "ip"
            else None,
            target_control_port=target_control_port,
        )

    def _model_route(self, priority: int, name: str, weights: Mapping[str, int] | None) -> None:
        scope = Construct(self, construct_id(name))
        router = self.routed.get(name)
        actions: list[elbv2.CfnListenerRule.ActionProperty]
        if weights is not None:
            groups = {
                group: self._target_group(
                    scope,
                    f"TargetGroup{construct_id(group)}{self._revision}",
                    port=self.target_port,
                    health_check_path=self._health_paths.get(name, HEALTH_PATH),
                    target_control_port=self.control_port,
                )
                for group in sorted(weights)
            }
            self.weighted_target_groups[name] = groups
            weighted = [(groups[g], weights[g]) for g in sorted(weights)]
            self._forwards[name] = (priority, forward(None, weighted, order=None))
            actions = self._actions(weighted=weighted)
        else:
            # A target group's port is fixed at creation: routing through a router is a new group.
            revision = "Routed" if router is not None else self._revision
            target_group = self._target_group(
                scope,
                f"TargetGroup{revision}",
                port=router.port if router else self.target_port,
                health_check_path=router.health_check_path
                if router
                else self._health_paths.get(name, HEALTH_PATH),
                health_check_port=str(router.health_check_port) if router else "traffic-port",
                target_control_port=self.control_port,
            )
            self.target_groups[name] = target_group
            self._forwards[name] = (priority, forward(target_group, (), order=None))
            actions = self._actions(target_group)
        prefix = route_prefix(name)
        elbv2.CfnListenerRule(
            scope,
            "Rule",
            listener_arn=self.listener.listener_arn,
            priority=priority,
            conditions=[_path_condition(prefix)],
            transforms=[_strip_prefix(prefix)],
            actions=actions,
        )

    def _actions(
        self,
        target_group: elbv2.CfnTargetGroup | None = None,
        *,
        weighted: Sequence[tuple[elbv2.CfnTargetGroup, int]] = (),
    ) -> list[elbv2.CfnListenerRule.ActionProperty]:
        """Forward to one target group, or to `weighted` ones by weight (after authentication, if any)."""
        action = elbv2.CfnListenerRule.ActionProperty
        cfg = self.config
        if cfg.oidc:
            auth = action(type="authenticate-oidc", order=1, authenticate_oidc_config=oidc_config(cfg.oidc))
        elif cfg.cognito:
            auth = action(
                type="authenticate-cognito", order=1, authenticate_cognito_config=cognito_config(cfg.cognito)
            )
        else:
            return [forward(target_group, weighted, order=None)]
        return [auth, forward(target_group, weighted, order=2)]


_NOT_FOUND = json.dumps(
    {
        "error": {
            "message": "Unknown route. Call /<model>/v1/... (set the OpenAI client's "
            "base_url to <scheme>://<host>/<model>/v1).",
            "type": "not_found",
        }
    }
)
"""The body of the listeners' 404 for a path no model route takes."""


def _path_condition(prefix: str) -> elbv2.CfnListenerRule.RuleConditionProperty:
    """A rule condition matching `<prefix>/*`."""
    return elbv2.CfnListenerRule.RuleConditionProperty(
        field="path-pattern",
        path_pattern_config=elbv2.CfnListenerRule.PathPatternConfigProperty(values=[f"{prefix}/*"]),
    )


def _strip_prefix(prefix: str) -> elbv2.CfnListenerRule.TransformProperty:
    """A rule transform rewriting `<prefix>/<rest>` to `/<rest>`."""
    return elbv2.CfnListenerRule.TransformProperty(
        type="url-rewrite",
        url_rewrite_config=elbv2.CfnListenerRule.RewriteConfigObjectProperty(
            rewrites=[elbv2.CfnListenerRule.RewriteConfigProperty(regex=f"^{prefix}/(.*)$", replace="/$1")]
        ),
    )


def _validate(config: IngressConfig, target_port: int) -> None:
    """Input a tier's validator also checks, repeated for direct use of the construct."""
    if config.slow_start_seconds > 0:
        # ALB user guide, "Edit target group attributes", slow start mode: "You cannot enable
        # both slow start mode and least outstanding requests" (the ELB API refuses the pair).
        # https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-target-group-attributes.html#slow-start-mode
        raise ValueError(
            "'slow_start_seconds' must be 0: the target groups route by least outstanding "
            "requests, which the ELB API does not allow together with slow start, "
            f"got {config.slow_start_seconds}"
        )
    optimizer = config.target_optimizer
    if optimizer.enabled:
        ports = {
            "target_port": target_port,
            "target_optimizer.data_port": optimizer.data_port,
            "target_optimizer.control_port": optimizer.control_port,
        }
        seen: dict[int, str] = {}
        for field, port in ports.items():
            if port in seen:
                raise ValueError(
                    f"'{field}' must differ from '{seen[port]}' (the agent and vLLM share the pod's "
                    f"network), got {port} for both"
                )
            seen[port] = field
    for field in ("oidc", "cognito"):
        if getattr(config, field) is not None and config.certificate_arn is None:
            raise ValueError(
                f"'{field}' needs 'certificate_arn' (load balancer authentication works on HTTPS "
                "listeners only), got no certificate"
            )
    if config.oidc is not None and config.cognito is not None:
        raise ValueError(
            "'cognito' must be empty when 'oidc' is set (one authentication action per route), "
            "got a Cognito user pool"
        )
