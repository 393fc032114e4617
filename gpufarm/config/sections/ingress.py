"""The load balancer in front of the models, and what guards it."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from gpufarm.config.sections.values import (
    TARGET_CONTROL_AGENT_IMAGE,
    AcmCertificateArn,
    AgentImageRef,
    AllowedPrincipal,
    Cidr,
    CognitoUserPoolArn,
    DnsLabel,
    HttpsUrl,
    OpenChoiceConfig,
    SecretRef,
    _Model,
)


class LoadBalancerKind(StrEnum):
    """The load balancer in front of the models."""

    ALB = "alb"
    NLB = "nlb"


class LoadBalancerScheme(StrEnum):
    """Whether the load balancer has public addresses."""

    INTERNAL = "internal"
    INTERNET_FACING = "internet-facing"


class AccessLogsConfig(_Model):
    """Load balancer access logs to S3."""

    enabled: bool = Field(True, description="Write ALB access logs to an encrypted S3 bucket.")
    retention_days: int = Field(90, ge=1, le=3653, description="Days access logs are kept.")


class TargetOptimizerConfig(_Model):
    """ALB Target Optimizer: an agent sidecar caps the concurrent requests each pod receives."""

    enabled: bool = Field(False, description="Turn on (changing it replaces the model target groups).")
    agent_image: AgentImageRef = Field(
        TARGET_CONTROL_AGENT_IMAGE,
        description="Target control agent image; AWS publishes only ':latest', pin a mirrored digest.",
    )
    data_port: int = Field(8080, ge=1024, le=65535, description="Agent port receiving ALB traffic.")
    control_port: int = Field(3000, ge=1024, le=65535, description="Agent control port (TargetControlPort).")

    @property
    def runs_unpinned_agent(self) -> bool:
        """Whether the optimizer is on with the agent as AWS publishes it (`:latest`, no digest)."""
        return self.enabled and self.agent_image == TARGET_CONTROL_AGENT_IMAGE


class WafConfig(_Model):
    """AWS WAF web ACL on the load balancer (required when internet-facing)."""

    enabled: bool = Field(True, description="Attach a web ACL.")
    rate_limit_per_5_minutes: int = Field(
        2000,
        ge=10,
        le=2_000_000_000,
        description="Requests one client IP may send per 5 minutes. Addresses in network.cidr are not "
        "counted: the gateway calls the load balancer from there (docs/decisions/0050).",
    )
    common_rule_set: bool = Field(
        True,
        description="AWS managed common rules (SizeRestrictions_BODY counts only: prompts exceed 8 KB).",
    )
    known_bad_inputs: bool = Field(True, description="AWS managed known-bad-inputs rules.")


class OidcAuthConfig(_Model):
    """Authenticate clients at the load balancer with an OpenID Connect provider."""

    issuer: HttpsUrl = Field(description="OIDC issuer URL.")
    authorization_endpoint: HttpsUrl = Field(description="Authorization endpoint.")
    token_endpoint: HttpsUrl = Field(description="Token endpoint.")
    user_info_endpoint: HttpsUrl = Field(description="User info endpoint.")
    client_id: str = Field(min_length=1, max_length=256, description="OAuth client ID.")
    client_secret: SecretRef = Field(
        description="Secrets Manager secret holding the client secret (resolved at deploy time)."
    )


class CognitoAuthConfig(_Model):
    """Authenticate clients at the load balancer with an Amazon Cognito user pool."""

    user_pool_arn: CognitoUserPoolArn = Field(description="User pool ARN.")
    user_pool_client_id: str = Field(min_length=1, max_length=128, description="App client ID.")
    user_pool_domain: DnsLabel = Field(description="User pool domain prefix.")


class NlbConfig(_Model):
    """A Network Load Balancer: one TCP or TLS listener per model."""

    static_ips: bool = Field(
        True, description="An Elastic IP per AZ when internet-facing (clients allow-list fixed addresses)."
    )
    tls: bool = Field(True, description="Terminate TLS at the NLB (needs ingress.certificate_arn); else TCP.")
    cross_zone: bool = Field(True, description="Spread each AZ's traffic over targets in every AZ.")


APPLIANCE_ROOT_DEVICE = "/dev/xvda"
"""Root device of Amazon Linux 2023, the default appliance image."""


class ApplianceConfig(_Model):
    """The inspection appliances behind the Gateway Load Balancer (an Auto Scaling group)."""

    ami_id: str | None = Field(
        None,
        pattern=r"^ami-[0-9a-f]{8,17}$",
        description="Appliance AMI (your firewall vendor's); empty: Amazon Linux 2023 forwarding GENEVE.",
    )
    instance_type: str = Field("c6in.large", description="Appliance instance type.")
    min_size: int = Field(2, ge=1, le=20, description="Fewest appliances.")
    max_size: int = Field(4, ge=1, le=50, description="Most appliances.")
    health_check_port: int = Field(
        80, ge=1, le=65535, description="TCP port the Gateway Load Balancer checks on each appliance."
    )
    root_device_name: str = Field(
        APPLIANCE_ROOT_DEVICE,
        pattern=r"^/dev/[a-z0-9]+$",
        description="Root device of the appliance image (the encrypted gp3 volume); set it with ami_id.",
    )


class InspectionConfig(_Model):
    """Send internet ingress through appliances behind a Gateway Load Balancer before the load balancer."""

    enabled: bool = Field(False, description="Build the inspection VPC and route ingress through it.")
    cidr: Cidr = Field("10.250.0.0/20", description="CIDR of the inspection VPC (must not overlap).")
    appliances: ApplianceConfig = Field(
        default_factory=ApplianceConfig, description="The appliances' Auto Scaling group."
    )


class PrivateLinkConfig(_Model):
    """Offer the models to other VPCs and accounts through a VPC endpoint service."""

    enabled: bool = Field(False, description="Create an NLB-backed endpoint service.")
    allowed_principals: list[AllowedPrincipal] = Field(
        [], description="Principals allowed to create endpoints to the service."
    )
    acceptance_required: bool = Field(True, description="New endpoint connections wait for acceptance.")


class IngressConfig(_Model):
    """The Application Load Balancer in front of the models."""

    scheme: LoadBalancerScheme = Field(
        LoadBalancerScheme.INTERNAL, description="Internal (default) or internet-facing."
    )
    certificate_arn: AcmCertificateArn | None = Field(
        None, description="ACM certificate for the HTTPS listener (required when internet-facing)."
    )
    allowed_cidrs: list[Cidr] = Field(
        [], description="Client CIDRs allowed to connect (default: the VPC CIDR when internal)."
    )
    open_to_internet: OpenChoiceConfig | None = Field(
        None, description="Needed, with a reason, to list 0.0.0.0/0 in allowed_cidrs (empty: refused)."
    )
    idle_timeout_seconds: int = Field(
        600, ge=60, le=4000, description="ALB idle timeout; long generations stream for minutes."
    )
    slow_start_seconds: int = Field(
        0,
        ge=0,
        le=900,
        description="Ramp-up for a new target; must stay 0 with kind 'alb' (least outstanding "
        "requests excludes slow start).",
    )
    deregistration_delay_seconds: int = Field(
        300, ge=0, le=3600, description="Time in-flight requests get to finish when a pod leaves."
    )
    health_check_interval_seconds: int = Field(
        15, ge=5, le=300, description="Target health-check interval on /health."
    )
    access_logs: AccessLogsConfig = Field(default_factory=AccessLogsConfig, description="ALB access logs.")
    kind: LoadBalancerKind = Field(
        LoadBalancerKind.ALB, description="'alb' (HTTP routing) or 'nlb' (TCP/TLS)."
    )
    lcu_reservation: int | None = Field(
        None, ge=100, le=1_000_000, description="ALB capacity units reserved ahead of traffic (empty: none)."
    )
    nlb: NlbConfig = Field(default_factory=lambda: NlbConfig(), description="The NLB (kind 'nlb').")
    inspection: InspectionConfig = Field(
        default_factory=lambda: InspectionConfig(), description="Gateway Load Balancer inspection."
    )
    private_link: PrivateLinkConfig = Field(
        default_factory=lambda: PrivateLinkConfig(), description="PrivateLink endpoint service."
    )
    target_optimizer: TargetOptimizerConfig = Field(
        default_factory=TargetOptimizerConfig, description="ALB Target Optimizer."
    )
    waf: WafConfig = Field(default_factory=WafConfig, description="AWS WAF web ACL.")
    oidc: OidcAuthConfig | None = Field(None, description="Authenticate with OIDC (HTTPS only).")
    cognito: CognitoAuthConfig | None = Field(None, description="Authenticate with Cognito (HTTPS only).")
