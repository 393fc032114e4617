"""Checks of the tier as a whole: compliance packs, description, secrets, and the limits constructs enforce.

Most are rules a value can pass on its own and still fail at deploy or at run time: AWS API limits
of the fields a user sets, and the checks constructs make for their direct users, mirrored here
with the field path so the tier path never reaches a construct with bad input.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from gpufarm.config.checks.common import _instance_architecture, _repeats
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import REGION, CompliancePack, TierConfig
from gpufarm.core.names import BEDROCK_SUFFIX


def _compliance(cfg: TierConfig) -> Iterator[ConfigIssue]:
    packs = [p.value for p in cfg.compliance_packs]
    if not packs:
        yield ConfigIssue(
            path="compliance_packs",
            message="must list at least 'aws-solutions' (compliance is a gate, not an option), got []",
        )
    yield from _repeats("compliance_packs", packs, "must not list a pack twice")
    flow_logs = cfg.network.flow_logs
    control_tower = CompliancePack.CONTROL_TOWER.value in packs
    if control_tower and flow_logs.enabled and flow_logs.retention_days < CT_MIN_LOG_RETENTION_DAYS:
        yield ConfigIssue(
            path="network.flow_logs.retention_days",
            message=f"must be at least {CT_MIN_LOG_RETENTION_DAYS} with the 'control-tower' compliance "
            "pack (its control CT.CLOUDWATCH.PR.2 requires a CloudWatch log group kept at least "
            f"one year), got {flow_logs.retention_days}",
        )


CT_MIN_LOG_RETENTION_DAYS = 365
"""Control Tower's proactive control CT.CLOUDWATCH.PR.2, "Require an Amazon CloudWatch log group to
be retained for at least one year" (its cfn-guard rule in `cdklabs.cdk-validator-cfnguard`, which
the compliance gate runs): `RetentionInDays` absent or at least 365. The flow log groups (the
VPC's, and the inspection VPC's) take `network.flow_logs.retention_days`; Grafana's log group
keeps 365 days, and the web ACL's acknowledges the control with its reason (gpufarm/constructs/waf.py)."""


CFN_DESCRIPTION_MAX_BYTES = 1024
"""CloudFormation's limit on a template's Description: "a literal string that is between 0 and
1024 bytes in length" (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/template-description-structure.html)."""


MAX_SCRAPER_SUBNETS = 5
"""Subnets an Amazon Managed Service for Prometheus scraper takes at most
(`gpufarm.constructs.observability.PrometheusMonitoring` checks 2-5); the tier gives it one
private subnet per availability zone."""


MIN_APPLIANCE_SUBNET_PREFIX = 28
"""Smallest appliance subnet the inspection VPC carves per zone
(`gpufarm.constructs.inspection._MIN_APPLIANCE_SUBNET_PREFIX`; a test keeps them equal)."""


_SECRET_ARN = re.compile(r"^arn:(aws[a-z-]*):secretsmanager:([a-z0-9-]+):(\d{12}):secret:([\w/+=.@-]+)$")


def _secret_refs(cfg: TierConfig) -> Iterator[tuple[str, str]]:
    """(path, value) of every Secrets Manager reference the tier sets."""
    for i, model in enumerate(cfg.models):
        if model.hf_token_secret is not None:
            yield f"models[{i}].hf_token_secret", model.hf_token_secret
    if cfg.ingress.oidc is not None:
        yield "ingress.oidc.client_secret", cfg.ingress.oidc.client_secret
    if cfg.fallback.master_key_secret is not None:
        yield "fallback.master_key_secret", cfg.fallback.master_key_secret


def _secrets(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """Secret ARNs must name a secret in the stack's region.

    Pods read `hf_token_secret` and `master_key_secret` with AWS_REGION set to the stack's
    region (gpufarm/k8s/serving.py, gpufarm/k8s/gateway.py), and CloudFormation resolves the
    OIDC client secret's dynamic reference in the stack's region: a secret elsewhere is not found.
    """
    region = cfg.environment.region
    for path, value in _secret_refs(cfg):
        if not value.startswith("arn:"):
            continue
        match = _SECRET_ARN.match(value)
        if match is None or not REGION.match(match.group(2)):
            yield ConfigIssue(
                path=path,
                message="must be a secret name or a Secrets Manager secret ARN "
                "(arn:aws:secretsmanager:<region>:<account>:secret:<name>), got "
                f"{value!r}",
            )
        elif match.group(2) != region:
            yield ConfigIssue(
                path=path,
                message=f"must be a secret in the stack's region {region!r} (gpufarm reads it "
                f"there), got a secret in {match.group(2)!r}",
            )


def _description(cfg: TierConfig) -> Iterator[ConfigIssue]:
    size = len(cfg.description.encode("utf-8"))
    if size > CFN_DESCRIPTION_MAX_BYTES:
        yield ConfigIssue(
            path="description",
            message=f"must be at most {CFN_DESCRIPTION_MAX_BYTES} bytes in UTF-8 (CloudFormation's "
            f"limit on a template description; a non-ASCII character takes 2-4 bytes), got "
            f"{size} bytes in {len(cfg.description)} characters",
        )


def _construct_limits(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """Checks constructs make for their direct users, in the tier's own terms."""
    if cfg.fallback.enabled:
        # The gateway names each model's Bedrock route `<served name>@bedrock`
        # (gpufarm.k8s.gateway.bedrock_model_name); a served name with that suffix could take it.
        for i, model in enumerate(cfg.models):
            if model.api_model_name.endswith(BEDROCK_SUFFIX):
                yield ConfigIssue(
                    path=f"models[{i}].served_model_name",
                    message=f"must not end with {BEDROCK_SUFFIX!r} while fallback is enabled (the "
                    f"gateway's name for a model's Bedrock route), got {model.api_model_name!r}",
                )
    zones = len(cfg.environment.availability_zones)
    if cfg.observability.prometheus.enabled and zones > MAX_SCRAPER_SUBNETS:
        yield ConfigIssue(
            path="environment.availability_zones",
            message=f"must list at most {MAX_SCRAPER_SUBNETS} zones while "
            "observability.prometheus.enabled is true (the managed scraper takes one private "
            f"subnet per zone, {MAX_SCRAPER_SUBNETS} at most), got {zones}",
        )
    prometheus = cfg.observability.prometheus
    if prometheus.enabled and prometheus.alerts and not cfg.observability.alarms.enabled:
        yield ConfigIssue(
            path="observability.prometheus.alerts",
            message="needs observability.alarms.enabled: true (the alert manager sends to the alarm "
            "topic), or set alerts: false; got alerts: true with alarms disabled",
        )
    inspection = cfg.ingress.inspection
    appliance_type = inspection.appliances.instance_type
    if inspection.enabled and _instance_architecture(appliance_type) is None:
        # TrafficInspection picks the Amazon Linux 2023 image by the type's architecture, which
        # aws-cdk-lib reads from the name (and throws on one it cannot read).
        yield ConfigIssue(
            path="ingress.inspection.appliances.instance_type",
            message="must be an EC2 instance type such as 'c6in.large' (family, generation, "
            f"capabilities, '.', size), got {appliance_type!r}",
        )
    if inspection.enabled:
        network = ipaddress.IPv4Network(inspection.cidr)
        split = (zones - 1).bit_length()  # bits that give each zone its own subnet
        if network.prefixlen + split > MIN_APPLIANCE_SUBNET_PREFIX:
            yield ConfigIssue(
                path="ingress.inspection.cidr",
                message=f"must leave a /{MIN_APPLIANCE_SUBNET_PREFIX} or larger appliance subnet per "
                f"availability zone ({zones} zones need a /{MIN_APPLIANCE_SUBNET_PREFIX - split} "
                f"or larger), got {inspection.cidr!r}",
            )
