"""On-premises GPU nodes joined to the EKS cluster (EKS Hybrid Nodes).

What the stack builds from this section, and the EKS rules it follows, are in
docs/decisions/0068-hybrid-nodes.md; onboarding a node is in docs/operations.md.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from gpufarm.config.sections.values import Cidr, DnsLabel, _Model, _pattern

_GATEWAY_ID = re.compile(r"^(tgw|vgw)-[0-9a-f]{8,17}$")
_TRUST_ANCHOR_ARN = re.compile(r"^arn:aws[a-z-]*:rolesanywhere:[a-z0-9-]+:\d{12}:trust-anchor/[0-9a-f-]{36}$")
_PROFILE_ARN = re.compile(r"^arn:aws[a-z-]*:rolesanywhere:[a-z0-9-]+:\d{12}:profile/[0-9a-f-]{36}$")
_GPU_TYPE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")

GatewayId = Annotated[
    str, _pattern(_GATEWAY_ID, "a transit gateway ('tgw-...') or virtual private gateway ('vgw-...') ID")
]
TrustAnchorArn = Annotated[
    str,
    _pattern(
        _TRUST_ANCHOR_ARN,
        "an IAM Roles Anywhere trust anchor ARN (arn:aws:rolesanywhere:<region>:<account>:trust-anchor/<id>)",
    ),
]
ProfileArn = Annotated[
    str,
    _pattern(
        _PROFILE_ARN,
        "an IAM Roles Anywhere profile ARN (arn:aws:rolesanywhere:<region>:<account>:profile/<id>)",
    ),
]
GpuType = Annotated[str, _pattern(_GPU_TYPE, "a lower-case GPU name such as 'h100' or 'l40s'")]


class CredentialProvider(StrEnum):
    """How `nodeadm` on an on-premises host gets temporary IAM credentials for the hybrid nodes role."""

    SSM = "ssm"
    """AWS Systems Manager hybrid activations (no PKI needed)."""
    IAM_ROLES_ANYWHERE = "iam-roles-anywhere"
    """AWS IAM Roles Anywhere with the hosts' X.509 certificates (an existing CA)."""


class OnPremGpusConfig(_Model):
    """A set of identical on-premises GPU hosts, for capacity and cost (gpufarm does not create them)."""

    name: DnsLabel = Field(
        description="Name of the set; its hosts take it as their `gpufarm.io/pool` node label "
        "(nodeadm config)."
    )
    nodes: int = Field(1, ge=1, le=1000, description="Hosts in the set.")
    gpus_per_node: int = Field(8, ge=1, le=16, description="NVIDIA GPUs per host.")
    gpu_type: GpuType = Field(description="GPU model ('h100', 'a100', 'l40s'), named in `gpufarm cost`.")
    vcpus_per_node: int = Field(
        ge=1, le=1024, description="vCPUs per host: EKS bills hybrid nodes per vCPU-hour while attached."
    )


class HybridNodesConfig(_Model):
    """On-premises GPU nodes joined to the EKS cluster (EKS Hybrid Nodes); karpenter provisioning only."""

    enabled: bool = Field(False, description="Let on-premises hosts join the cluster as hybrid nodes.")
    remote_node_cidrs: list[Cidr] = Field(
        [],
        description="On-premises networks the hybrid nodes' IPs come from (RFC 1918; EKS "
        "RemoteNodeNetworks).",
    )
    remote_pod_cidrs: list[Cidr] = Field(
        [],
        description="Pod CIDRs of the CNI on the hybrid nodes, routable on-premises (RFC 1918; EKS "
        "RemotePodNetworks). Required while a model runs on-premises: the load balancer targets pod IPs.",
    )
    credential_provider: CredentialProvider = Field(
        CredentialProvider.SSM,
        description="'ssm' (hybrid activations) or 'iam-roles-anywhere' (X.509 certificates).",
    )
    trust_anchor_arn: TrustAnchorArn | None = Field(
        None, description="IAM Roles Anywhere trust anchor the role trusts (iam-roles-anywhere only)."
    )
    profile_arn: ProfileArn | None = Field(
        None,
        description="IAM Roles Anywhere profile the hosts name in their nodeadm config "
        "(iam-roles-anywhere only; docs/operations.md, Onboarding an on-premises node).",
    )
    gateway_id: GatewayId | None = Field(
        None,
        description="Transit gateway or virtual private gateway the VPC reaches on-premises through "
        "(already attached to the VPC); the private subnets route the remote CIDRs to it.",
    )
    capacity_class: DnsLabel = Field(
        "on-prem", description="Capacity class models select to run on the hybrid nodes first."
    )
    gpus: list[OnPremGpusConfig] = Field(
        [], description="The on-premises GPU hosts, for capacity checks and the hybrid nodes fee."
    )

    @property
    def gpu_count(self) -> int:
        """GPUs of every on-premises host together."""
        return sum(g.nodes * g.gpus_per_node for g in self.gpus)

    @property
    def vcpus(self) -> int:
        """vCPUs of every on-premises host together (the hybrid nodes fee counts them)."""
        return sum(g.nodes * g.vcpus_per_node for g in self.gpus)
