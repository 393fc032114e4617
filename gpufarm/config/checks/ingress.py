"""Checks of the ingress section: the ALB or NLB, its listeners, authentication and inspection."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import APPLIANCE_ROOT_DEVICE, LoadBalancerKind, LoadBalancerScheme, TierConfig

NLB_SECURITY_GROUP_RULES = 60
"""Inbound rules a security group holds by default."""


def _ingress_kind(cfg: TierConfig) -> Iterator[ConfigIssue]:
    ing = cfg.ingress
    if ing.kind is LoadBalancerKind.NLB:
        for field, on in (
            ("target_optimizer.enabled", ing.target_optimizer.enabled),
            ("waf.enabled", ing.waf.enabled),
        ):
            if on:
                yield ConfigIssue(
                    path=f"ingress.{field}",
                    message="must be false with ingress.kind 'nlb' (the Target Optimizer and WAF "
                    "attach to Application Load Balancers only; inspect NLB traffic with "
                    "ingress.inspection), got true",
                )
        for field in ("oidc", "cognito"):
            if getattr(ing, field) is not None:
                yield ConfigIssue(
                    path=f"ingress.{field}",
                    message="must be empty with ingress.kind 'nlb' (load balancer authentication "
                    "is an ALB feature), got a configuration",
                )
        if ing.lcu_reservation is not None:
            yield ConfigIssue(
                path="ingress.lcu_reservation",
                message=f"applies only with ingress.kind 'alb', got {ing.lcu_reservation} with 'nlb'",
            )
        public = ing.scheme is LoadBalancerScheme.INTERNET_FACING  # reported above for public NLBs
        if ing.nlb.tls and ing.certificate_arn is None and not public:
            yield ConfigIssue(
                path="ingress.certificate_arn",
                message="is required when ingress.nlb.tls is true (the NLB terminates TLS); it is not set",
            )
        if public and not ing.nlb.tls:
            yield ConfigIssue(
                path="ingress.nlb.tls",
                message="must be true for an internet-facing NLB (public traffic is served over "
                "TLS only), got false",
            )
        rules = max(1, len(ing.allowed_cidrs)) * (len(cfg.models) + 1)
        if rules > NLB_SECURITY_GROUP_RULES:
            yield ConfigIssue(
                path="ingress.allowed_cidrs",
                message=f"must fit the NLB security group's {NLB_SECURITY_GROUP_RULES} inbound rules: "
                f"one per CIDR and listener ({len(ing.allowed_cidrs)} CIDRs x {len(cfg.models) + 1} "
                f"listeners = {rules}), got {len(ing.allowed_cidrs)} CIDRs",
            )
        default_port = 443 if ing.nlb.tls else 80
        ports: dict[int, str] = {default_port: "the gateway's listener"} if cfg.fallback.enabled else {}
        for i, model in enumerate(cfg.models):
            if model.listener_port is None:
                yield ConfigIssue(
                    path=f"models[{i}].listener_port",
                    message="is required with ingress.kind 'nlb' (an NLB routes by port, one "
                    "listener per model); it is not set",
                )
                continue
            if model.listener_port in ports:
                yield ConfigIssue(
                    path=f"models[{i}].listener_port",
                    message=f"must differ from {ports[model.listener_port]} (one listener per "
                    f"port), got {model.listener_port}",
                )
            ports.setdefault(model.listener_port, f"that of {model.name!r}")
    else:
        for i, model in enumerate(cfg.models):
            if model.listener_port is not None:
                yield ConfigIssue(
                    path=f"models[{i}].listener_port",
                    message=f"applies only with ingress.kind 'nlb' (the ALB routes by path), got "
                    f"{model.listener_port}",
                )
    if ing.private_link.enabled and not ing.private_link.allowed_principals:
        yield ConfigIssue(
            path="ingress.private_link.allowed_principals",
            message="must list at least one principal when private_link.enabled is true (nobody "
            "else could connect), got []",
        )
    if ing.inspection.enabled:
        if ing.scheme is not LoadBalancerScheme.INTERNET_FACING:
            yield ConfigIssue(
                path="ingress.inspection.enabled",
                message="needs ingress.scheme 'internet-facing' (it inspects traffic from the "
                "internet gateway), got 'internal'",
            )
        if ipaddress.IPv4Network(ing.inspection.cidr).overlaps(ipaddress.IPv4Network(cfg.network.cidr)):
            yield ConfigIssue(
                path="ingress.inspection.cidr",
                message=f"must not overlap network.cidr ({cfg.network.cidr!r}), got {ing.inspection.cidr!r}",
            )
        appliances = ing.inspection.appliances
        if appliances.min_size > appliances.max_size:
            yield ConfigIssue(
                path="ingress.inspection.appliances.min_size",
                message=f"must be at most max_size ({appliances.max_size}), got {appliances.min_size}",
            )
        if appliances.ami_id is None and appliances.root_device_name != APPLIANCE_ROOT_DEVICE:
            yield ConfigIssue(
                path="ingress.inspection.appliances.root_device_name",
                message=f"must be {APPLIANCE_ROOT_DEVICE!r} (Amazon Linux 2023's) unless ami_id names "
                f"another image, got {appliances.root_device_name!r}",
            )


def _ingress(cfg: TierConfig) -> Iterator[ConfigIssue]:
    ing = cfg.ingress
    if ing.scheme is LoadBalancerScheme.INTERNET_FACING:
        if ing.certificate_arn is None:
            yield ConfigIssue(
                path="ingress.certificate_arn",
                message="is required when ingress.scheme is 'internet-facing' "
                "(public traffic is served over HTTPS only); it is not set",
            )
        if not ing.allowed_cidrs:
            yield ConfigIssue(
                path="ingress.allowed_cidrs",
                message="must list at least one CIDR when ingress.scheme is 'internet-facing', got []",
            )
    if ing.certificate_arn is not None:
        cert_region = ing.certificate_arn.split(":")[3]
        if cert_region != cfg.environment.region:
            yield ConfigIssue(
                path="ingress.certificate_arn",
                message=f"must be in the stack's region {cfg.environment.region!r}, "
                f"got a certificate in {cert_region!r}",
            )
    if ing.kind is LoadBalancerKind.ALB and ing.slow_start_seconds > 0:
        # ALB user guide, "Edit target group attributes", slow start mode: "You cannot enable
        # both slow start mode and least outstanding requests" (the ELB API refuses the pair).
        # https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-target-group-attributes.html#slow-start-mode
        yield ConfigIssue(
            path="ingress.slow_start_seconds",
            message="must be 0 (slow start off): the ALB's model target groups route by least "
            "outstanding requests, which the ELB API does not allow together with slow start, "
            f"got {ing.slow_start_seconds}",
        )
    elif 0 < ing.slow_start_seconds < 30:
        yield ConfigIssue(
            path="ingress.slow_start_seconds",
            message=f"must be 0 (off) or 30-900, got {ing.slow_start_seconds}",
        )
    if ing.scheme is LoadBalancerScheme.INTERNET_FACING and ing.kind is LoadBalancerKind.NLB:
        if not ing.inspection.enabled:
            yield ConfigIssue(
                path="ingress.inspection.enabled",
                message="must be true for an internet-facing NLB (WAF cannot attach to an NLB; "
                "public traffic is inspected behind a Gateway Load Balancer instead), got false",
            )
    elif ing.scheme is LoadBalancerScheme.INTERNET_FACING and not ing.waf.enabled:
        yield ConfigIssue(
            path="ingress.waf.enabled",
            message="must be true when ingress.scheme is 'internet-facing' (public endpoints get "
            "rate limiting and managed rules), got false",
        )
    if ing.oidc is not None and ing.cognito is not None:
        yield ConfigIssue(
            path="ingress.cognito",
            message="must be empty when ingress.oidc is set (one authentication action per route), "
            "got a Cognito user pool",
        )
    for field in ("oidc", "cognito"):
        if getattr(ing, field) is not None and ing.certificate_arn is None:
            yield ConfigIssue(
                path=f"ingress.{field}",
                message="needs ingress.certificate_arn (load balancer authentication works on "
                "HTTPS listeners only), got no certificate",
            )
    yield from _ingress_kind(cfg)
    optimizer = ing.target_optimizer
    if optimizer.enabled and ing.kind is LoadBalancerKind.ALB:
        ports = {
            "serving.port": cfg.serving.port,
            "ingress.target_optimizer.data_port": optimizer.data_port,
            "ingress.target_optimizer.control_port": optimizer.control_port,
        }
        seen: dict[int, str] = {}
        for path, port in ports.items():
            if port in seen:
                yield ConfigIssue(
                    path=path,
                    message=f"must differ from {seen[port]} (the agent and vLLM share the pod's "
                    f"network), got {port} for both",
                )
            seen.setdefault(port, path)


HEALTH_CHECK_TIMEOUT_SECONDS = 5
"""Target health-check timeout of the model target groups (`gpufarm.constructs.ingress` and
`gpufarm.constructs.nlb` set it; a test keeps them equal)."""


def _health_check(cfg: TierConfig) -> Iterator[ConfigIssue]:
    interval = cfg.ingress.health_check_interval_seconds
    # The ELB API refuses a target group whose health-check timeout is not below its interval
    # ("ValidationError: Health check interval must be greater than the timeout", as reported in
    # hashicorp/terraform-provider-aws#48071; aws-cdk-lib checks the same, aws/aws-cdk#29075).
    if interval <= HEALTH_CHECK_TIMEOUT_SECONDS:
        yield ConfigIssue(
            path="ingress.health_check_interval_seconds",
            message=f"must be greater than the health-check timeout ({HEALTH_CHECK_TIMEOUT_SECONDS} s; "
            f"the ELB API refuses an interval that is not), got {interval}",
        )
