"""Small helpers shared by the constructs."""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from gpufarm.config.model import RemovalPolicy

POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"

DELETED_LOG_RECOVERY_DAYS = 30
"""Days a deleted or expired load balancer access log stays recoverable in its versioned bucket."""


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag finding on `construct` (and its children), with a specific reason."""
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))


def private_subnets(vpc: ec2.IVpc) -> list[ec2.ISubnet]:
    """The VPC's private subnets: those with egress through NAT, else the isolated ones (no NAT)."""
    return list(vpc.private_subnets) or list(vpc.isolated_subnets)


def cdk_removal_policy(policy: RemovalPolicy) -> cdk.RemovalPolicy:
    """The CDK removal policy for a config value."""
    return cdk.RemovalPolicy.RETAIN if policy is RemovalPolicy.RETAIN else cdk.RemovalPolicy.DESTROY


def construct_id(name: str) -> str:
    """A stable CamelCase construct ID from a config name: 'qwen3-8b' -> 'Qwen38b'."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part)


def pod_identity_role(scope: Construct, id: str, *, description: str) -> iam.Role:
    """An IAM role that EKS Pod Identity can hand to a Kubernetes service account."""
    role = iam.Role(
        scope,
        id,
        assumed_by=iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL),
        description=description,
    )
    role.assume_role_policy.add_statements(  # type: ignore[union-attr]
        iam.PolicyStatement(
            actions=["sts:TagSession"],
            principals=[iam.ServicePrincipal(POD_IDENTITY_PRINCIPAL)],
        )
    )
    return role
