"""What a stack exposes beyond the VPC's private networks."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpufarm.review.templates import StackTemplate, render

_PRIVATE_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
    )
)


def is_public_cidr(cidr: str) -> bool:
    """Whether a CIDR reaches beyond private address space (RFC 1918, CGNAT, loopback, link-local)."""
    try:
        network = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return False
    if isinstance(network, ipaddress.IPv4Network):
        return not any(network.subnet_of(p) for p in _PRIVATE_V4)
    return not (network.is_private or network.is_link_local or network.is_loopback)


@dataclass(frozen=True, kw_only=True, order=True)
class Exposure:
    """Something reachable from outside the VPC's private networks."""

    logical_id: str
    resource_type: str
    description: str

    @property
    def anywhere(self) -> bool:
        """Open to the whole internet (0.0.0.0/0, ::/0 or any account)."""
        return "0.0.0.0/0" in self.description or "::/0" in self.description or "any AWS" in self.description

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "logical_id": self.logical_id,
            "type": self.resource_type,
            "description": self.description,
            "anywhere": self.anywhere,
        }


def _ports(rule: Mapping[str, Any]) -> str:
    protocol = str(rule.get("IpProtocol", "-1"))
    if protocol in {"-1", "all"}:
        return "all traffic"
    low, high = rule.get("FromPort"), rule.get("ToPort")
    return f"{protocol} {low}" if low == high else f"{protocol} {low}-{high}"


def _ingress_exposures(lid: str, rtype: str, rule: Mapping[str, Any]) -> Iterator[Exposure]:
    for key in ("CidrIp", "CidrIpv6"):
        cidr = rule.get(key)
        if isinstance(cidr, str) and is_public_cidr(cidr):
            who = f"anywhere ({cidr})" if cidr in {"0.0.0.0/0", "::/0"} else cidr
            yield Exposure(
                logical_id=lid, resource_type=rtype, description=f"ingress from {who} on {_ports(rule)}"
            )


def exposures(stack: StackTemplate) -> set[Exposure]:
    """What the stack makes reachable from outside private networks."""
    out: set[Exposure] = set()
    for lid, resource in stack.resources.items():
        rtype = str(resource.get("Type"))
        props = resource.get("Properties") or {}
        if rtype == "AWS::ElasticLoadBalancingV2::LoadBalancer":
            kind = str(props.get("Type", "application"))
            if kind != "gateway" and props.get("Scheme", "internet-facing") == "internet-facing":
                out.add(
                    Exposure(
                        logical_id=lid,
                        resource_type=rtype,
                        description=f"internet-facing {kind} load balancer",
                    )
                )
        elif rtype == "AWS::EC2::SecurityGroup":
            for rule in props.get("SecurityGroupIngress") or []:
                if isinstance(rule, Mapping):
                    out.update(_ingress_exposures(lid, rtype, rule))
        elif rtype == "AWS::EC2::SecurityGroupIngress":
            out.update(_ingress_exposures(lid, rtype, props))
        elif rtype == "AWS::EKS::Cluster":
            vpc = props.get("ResourcesVpcConfig") or {}
            if vpc.get("EndpointPublicAccess", True) is True:
                cidrs = vpc.get("PublicAccessCidrs") or ["0.0.0.0/0"]
                shown = ", ".join(render(c) for c in cidrs) if isinstance(cidrs, list) else render(cidrs)
                out.add(
                    Exposure(
                        logical_id=lid,
                        resource_type=rtype,
                        description=f"public Kubernetes API endpoint from {shown}",
                    )
                )
        elif rtype == "AWS::EC2::VPCEndpointService" and props.get("AcceptanceRequired") is False:
            # AcceptanceRequired: "whether requests from service consumers to create an endpoint to
            # your service must be accepted manually" (EC2 API, CreateVpcEndpointServiceConfiguration).
            # Off, any allowed principal's endpoint connects at once, with no one approving it.
            out.add(
                Exposure(
                    logical_id=lid,
                    resource_type=rtype,
                    description=(
                        "endpoint service accepts connections without approval (AcceptanceRequired false)"
                    ),
                )
            )
        elif rtype == "AWS::EC2::VPCEndpointServicePermissions":
            principals = props.get("AllowedPrincipals") or []
            for principal in principals if isinstance(principals, list) else [principals]:
                who = "any AWS account (*)" if principal == "*" else render(principal)
                out.add(
                    Exposure(
                        logical_id=lid, resource_type=rtype, description=f"endpoint service open to {who}"
                    )
                )
    return out
