"""A load balancer open to the whole internet by stated choice: the tier's reason is the cdk-nag
acknowledgement on its security group; without the statement the gate refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2

from gpufarm.config import IngressConfig, LoadBalancerScheme, OpenChoiceConfig
from gpufarm.constructs import InferenceAlb, enable_compliance_checks
from tests.conftest import cdk_context, nag_violations
from tests.constructs.helpers import AZS, CLUSTER_NAME, REGION

CERTIFICATE = "arn:aws:acm:us-east-1:210987654321:certificate/6f1c2d3e-4b5a-4c7d-9e8f-0a1b2c3d4e5f"
REASON = "a public chat endpoint; the WAF rate limit and OIDC guard it"


def synth_open_alb(outdir: Path, choice: OpenChoiceConfig | None) -> dict[str, object]:
    """An internet-facing ALB admitting 0.0.0.0/0, synthesized behind cdk-nag; the stack's metadata."""
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "OpenAlb", env=cdk.Environment(region=REGION))
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr_block="10.0.0.0/16",
        availability_zones=AZS,
        public_subnet_ids=["subnet-0123456789abcdef2", "subnet-0123456789abcdef3"],
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    )
    config = IngressConfig(
        scheme=LoadBalancerScheme.INTERNET_FACING,
        certificate_arn=CERTIFICATE,
        allowed_cidrs=["0.0.0.0/0"],
        open_to_internet=choice,
    )
    InferenceAlb(
        stack,
        "Ingress",
        vpc=vpc,
        config=config,
        model_names=["m1"],
        target_port=8000,
        cluster_name=CLUSTER_NAME,
    )
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    metadata: dict[str, object] = json.loads((outdir / "OpenAlb.metadata.json").read_text())
    return metadata


def test_the_stated_reason_acknowledges_ec23_on_the_security_group(tmp_path: Path) -> None:
    metadata = synth_open_alb(tmp_path, OpenChoiceConfig(reason=REASON))
    acknowledged = [
        entry["data"]  # type: ignore[index]
        for entry in metadata["/OpenAlb/Ingress/SecurityGroup"]  # type: ignore[attr-defined]
        if entry["type"] == "aws:cdk:acknowledged-rules"
    ]
    assert acknowledged == [{"Annotation::AwsSolutions-EC23": f"ingress.open_to_internet: {REASON}"}]


def test_without_the_statement_the_gate_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        synth_open_alb(tmp_path, None)
    assert nag_violations(tmp_path, annotations=False) == {"AwsSolutions": ["AwsSolutions-EC23"]}
