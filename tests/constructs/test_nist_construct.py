"""NIST 800-53 R5 hardening in the constructs: load balancer deletion protection, versioned
access-log buckets, the kubectl provider's encrypted log groups, and the WAF association the
pack recognises. Each construct is also synthesized under both packs (AwsSolutions and NIST)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from gpufarm.config import AccessLogsConfig, ClusterConfig, IngressConfig, LoadBalancerScheme
from gpufarm.config.model import (
    CompliancePack,
    ModelConfig,
    NlbConfig,
    PrivateLinkConfig,
    Provisioning,
    ServingConfig,
    WafConfig,
)
from gpufarm.constructs import InferenceAlb, InferenceCluster, VllmServing, enable_compliance_checks
from gpufarm.constructs._util import DELETED_LOG_RECOVERY_DAYS
from gpufarm.constructs.compliance import require_compliance_pack
from gpufarm.constructs.nlb import InferenceNlb
from gpufarm.constructs.private_link import InferencePrivateLink
from tests.conftest import cdk_context
from tests.constructs.helpers import (
    AZS,
    CLUSTER_NAME,
    REGION,
    imported_cluster,
    logical_id,
    new_stack,
    new_vpc,
    resources,
)

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
PRINCIPALS = ["arn:aws:iam::123456789012:root"]
LB = "AWS::ElasticLoadBalancingV2::LoadBalancer"
NO_LOGS = AccessLogsConfig(enabled=False)
NO_WAF = WafConfig(enabled=False)
NIST = "NIST.800.53.R5"


def _deletion_protection(template: Template, construct: Any) -> str:
    props = template.to_json()["Resources"][logical_id(construct)]["Properties"]
    attributes = {a["Key"]: a["Value"] for a in props["LoadBalancerAttributes"]}
    return str(attributes["deletion_protection.enabled"])


def _alb(stack: cdk.Stack, vpc: ec2.IVpc, **kwargs: Any) -> InferenceAlb:
    config = kwargs.pop("config", IngressConfig(access_logs=NO_LOGS, waf=NO_WAF))
    return InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        model_names=["m1"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
        **kwargs,
    )


def _nlb(stack: cdk.Stack, vpc: ec2.IVpc, **kwargs: Any) -> InferenceNlb:
    default = IngressConfig(kind="nlb", access_logs=NO_LOGS, waf=NO_WAF, nlb=NlbConfig(tls=False))
    config = kwargs.pop("config", default)
    return InferenceNlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        listeners={"m1": 8443},
        target_port=8000,
        cluster_name=CLUSTER_NAME,
        **kwargs,
    )


def _front(stack: cdk.Stack, vpc: ec2.IVpc, alb: InferenceAlb, **kwargs: Any) -> InferencePrivateLink:
    protocol = elbv2.ApplicationProtocol.HTTPS if alb.https else elbv2.ApplicationProtocol.HTTP
    return InferencePrivateLink(
        stack,
        "PrivateLink",
        config=PrivateLinkConfig(enabled=True, allowed_principals=PRINCIPALS),
        vpc=vpc,
        alb=alb.load_balancer,
        # The ALB listener's own protocol, as InferenceAlb.private_link passes it: the deploy rule
        # ELBV2-TG-ALB-LISTENER refuses a health check in another protocol than the listener's.
        ports={alb.listener_port: protocol},
        **kwargs,
    )


# --------------------------------------------------------------------------- deletion protection


def _load_balancer(kind: str, **kwargs: Any) -> tuple[Template, Any]:
    """The ALB, the NLB, or the NLB PrivateLink builds in front of an ALB, with `kwargs`."""
    stack = new_stack()
    vpc = new_vpc(stack)
    if kind == "alb":
        built: Any = _alb(stack, vpc, **kwargs).load_balancer
    elif kind == "nlb":
        built = _nlb(stack, vpc, **kwargs).load_balancer
    else:
        built = _front(stack, vpc, _alb(stack, vpc), **kwargs).nlb
    return Template.from_stack(stack), built


@pytest.mark.parametrize("kind", ["alb", "nlb", "private-link"])
def test_load_balancer_is_protected_from_deletion_when_asked(kind: str) -> None:
    template, load_balancer = _load_balancer(kind, deletion_protection=True)
    assert _deletion_protection(template, load_balancer) == "true"


@pytest.mark.parametrize("kind", ["alb", "nlb", "private-link"])
def test_load_balancer_is_deletable_by_default(kind: str) -> None:
    template, load_balancer = _load_balancer(kind)
    assert _deletion_protection(template, load_balancer) == "false"


def test_private_link_rejects_deletion_protection_for_a_given_nlb() -> None:
    stack = new_stack()
    nlb = _nlb(stack, new_vpc(stack))
    with pytest.raises(ValueError) as excinfo:
        InferencePrivateLink(
            stack,
            "PrivateLink",
            config=PrivateLinkConfig(enabled=True, allowed_principals=PRINCIPALS),
            load_balancer=nlb.load_balancer,
            deletion_protection=True,
        )
    assert str(excinfo.value) == (
        "'deletion_protection' applies only to the NLB built in front of an ALB (a given NLB "
        "keeps its own setting), got true"
    )


# --------------------------------------------------------------------------- access-log buckets


@pytest.mark.parametrize("kind", ["alb", "nlb"])
def test_access_logs_bucket_is_versioned_and_keeps_deleted_logs_a_while(kind: str) -> None:
    stack = new_stack()
    vpc = new_vpc(stack)
    logs = AccessLogsConfig(retention_days=90)
    if kind == "alb":
        config = IngressConfig(access_logs=logs, waf=NO_WAF)
        built: InferenceAlb | InferenceNlb = _alb(stack, vpc, config=config)
    else:
        config = IngressConfig(kind="nlb", access_logs=logs, waf=NO_WAF, nlb=NlbConfig(tls=False))
        built = _nlb(stack, vpc, config=config)
    assert built.access_logs_bucket is not None
    bucket = Template.from_stack(stack).to_json()["Resources"][logical_id(built.access_logs_bucket)]
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LifecycleConfiguration"]["Rules"] == [
        {
            "ExpirationInDays": 90,
            "NoncurrentVersionExpiration": {"NoncurrentDays": DELETED_LOG_RECOVERY_DAYS},
            "Status": "Enabled",
        }
    ]


# --------------------------------------------------------------------------- kubectl provider logs


@dataclass(frozen=True)
class WithKey:
    cluster: InferenceCluster
    key: kms.Key
    template: Template
    outdir: Path


def _nist_findings(outdir: Path, prefix: str) -> dict[str, list[str]]:
    """Rule -> paths of the constructs under `prefix` that a pack reported (scaffolding left out)."""
    report = json.loads((outdir / "validation-report.json").read_text())
    found: dict[str, list[str]] = {}
    for plugin in report["pluginReports"]:
        for violation in plugin["violations"]:
            paths = [
                c["constructPath"]
                for c in violation["violatingConstructs"]
                if c["constructPath"].startswith(prefix)
            ]
            if paths:
                found.setdefault(violation["ruleName"], []).extend(paths)
    return found


def _nag_app(outdir: Path, name: str) -> tuple[cdk.App, cdk.Stack]:
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, name, env=cdk.Environment(region=REGION))
    require_compliance_pack(stack, CompliancePack.NIST_800_53_R5)
    return app, stack


def _synth_report(app: cdk.App) -> None:
    """Synthesize; the test scaffolding (VPC, key) has findings of its own, read from the report."""
    try:
        app.synth()
    except RuntimeError as error:
        assert "ValidationFailed" in str(error)


@pytest.fixture(scope="module")
def with_key(tmp_path_factory: pytest.TempPathFactory) -> WithKey:
    """A standard-compute cluster given a logs key, under both packs."""
    outdir = tmp_path_factory.mktemp("nist-cluster")
    app, stack = _nag_app(outdir, "NistCluster")
    key = kms.Key(stack, "LogsKey", enable_key_rotation=True)
    cluster = InferenceCluster(
        stack,
        "Cluster",
        vpc=new_vpc(stack),
        config=ClusterConfig(provisioning=Provisioning.KARPENTER),
        logs_key=key,
    )
    _synth_report(app)
    template = json.loads((outdir / "NistCluster.template.json").read_text())
    return WithKey(cluster, key, Template.from_json(template), outdir)


def _kubectl_log_groups(template: Template) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in resources(template, "AWS::Logs::LogGroup").items() if "KubectlProvider" in k}


def test_kubectl_provider_log_groups_are_encrypted_with_the_logs_key(with_key: WithKey) -> None:
    groups = _kubectl_log_groups(with_key.template)
    assert len(groups) == 2  # the kubectl handler's and the provider framework's
    for group in groups.values():
        assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [logical_id(with_key.key), "Arn"]}


def test_kubectl_provider_log_groups_keep_default_encryption_without_a_key() -> None:
    stack = new_stack()
    InferenceCluster(stack, "Cluster", vpc=new_vpc(stack), config=ClusterConfig())
    groups = _kubectl_log_groups(Template.from_stack(stack))
    assert groups
    assert all("KmsKeyId" not in g["Properties"] for g in groups.values())


def test_cluster_passes_both_packs(with_key: WithKey) -> None:
    assert _nist_findings(with_key.outdir, "NistCluster/Cluster/") == {}


# --------------------------------------------------------------------------- ingress under both packs


def _imported_vpc(stack: cdk.Stack) -> ec2.IVpc:
    return ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr_block="10.0.0.0/16",
        availability_zones=AZS,
        public_subnet_ids=["subnet-0123456789abcdef2", "subnet-0123456789abcdef3"],
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    )


def test_alb_with_waf_access_logs_and_private_link_passes_both_packs(tmp_path: Path) -> None:
    app, stack = _nag_app(tmp_path, "NistAlb")
    vpc = _imported_vpc(stack)
    config = IngressConfig(
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        allowed_cidrs=["203.0.113.0/24"],
        access_logs=AccessLogsConfig(retention_days=365),
    )
    key = kms.Key(stack, "LogsKey", enable_key_rotation=True)
    alb = _alb(stack, vpc, config=config, logs_key=key, deletion_protection=True)
    _front(stack, vpc, alb, deletion_protection=True)
    _synth_report(app)
    assert _nist_findings(tmp_path, "NistAlb/Ingress/") == {}
    assert _nist_findings(tmp_path, "NistAlb/PrivateLink/") == {}


def test_internet_facing_nlb_with_access_logs_passes_both_packs(tmp_path: Path) -> None:
    app, stack = _nag_app(tmp_path, "NistNlb")
    vpc = new_vpc(stack)
    config = IngressConfig(
        kind="nlb",
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        allowed_cidrs=["203.0.113.0/24"],
        waf=NO_WAF,
        access_logs=AccessLogsConfig(retention_days=365),
    )
    _nlb(stack, vpc, config=config, deletion_protection=True)
    _synth_report(app)
    assert _nist_findings(tmp_path, "NistNlb/Ingress/") == {}


def test_gated_models_pod_role_passes_both_packs(tmp_path: Path) -> None:
    # A model with a Hugging Face token secret gets the pods' Pod Identity role, whose grant is
    # inline (the enterprise tier runs the NIST pack).
    app, stack = _nag_app(tmp_path, "NistServing")
    VllmServing(
        stack,
        "Serving",
        cluster=imported_cluster(stack),
        config=ServingConfig(),
        models=[ModelConfig(name="llama", weights="meta-llama/Llama-3.1-8B-Instruct", hf_token_secret="hf")],
        default_pool="l40s",
        region=REGION,
    )
    _synth_report(app)
    assert _nist_findings(tmp_path, "NistServing/Serving/") == {}
