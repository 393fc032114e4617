"""The hybrid nodes checks: remote CIDRs EKS accepts (offline), and a gateway that reaches on-premises.

EKS routes the control plane's traffic to hybrid nodes through the cluster's VPC, which reaches
the on-premises networks through a transit gateway or a virtual private gateway over AWS
Site-to-Site VPN or AWS Direct Connect ("Prepare networking for hybrid nodes", EKS user guide,
hybrid-nodes-networking). A gateway with no VPN connection and no Direct Connect attachment
carries nothing: the hosts could never join.
"""

from __future__ import annotations

from typing import Any

from gpufarm.aws.preflight.calls import _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.config import TierConfig
from gpufarm.core.hybrid import cidr_problems

_UP = "available"
"""The state of a usable gateway, VPN connection, attachment or virtual interface."""


def check_hybrid_cidrs(tier: TierConfig) -> list[CheckResult]:
    """The remote node and pod CIDRs against EKS's rules (:func:`gpufarm.core.hybrid.cidr_problems`):
    one failed row per CIDR EKS would refuse, one passing row otherwise; none without hybrid nodes.
    Needs no AWS call."""
    hybrid = tier.hybrid_nodes
    if not hybrid.enabled:
        return []
    problems = cidr_problems(
        vpc_cidr=tier.network.cidr, node_cidrs=hybrid.remote_node_cidrs, pod_cidrs=hybrid.remote_pod_cidrs
    )
    if not problems:
        cidrs = [*hybrid.remote_node_cidrs, *hybrid.remote_pod_cidrs]
        return [
            CheckResult(
                check=Check.HYBRID_CIDRS,
                subject="hybrid_nodes",
                status=Status.PASS,
                message=f"{', '.join(cidrs)}: private, apart from the VPC {tier.network.cidr}, the "
                "Kubernetes service ranges and each other",
            )
        ]
    return [
        CheckResult(
            check=Check.HYBRID_CIDRS,
            subject=f"hybrid_nodes.{p.field}[{p.index}]",
            status=Status.FAIL,
            message=p.message,
            fix="give the on-premises ranges your network team assigned, apart from network.cidr",
        )
        for p in problems
    ]


def _row(status: Status, subject: str, message: str, fix: str = "") -> CheckResult:
    return CheckResult(check=Check.HYBRID_GATEWAY, subject=subject, status=status, message=message, fix=fix)


def _transit_gateway(gateway: str, region: str, ec2: Any) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    subject = "hybrid_nodes.gateway_id"
    try:
        found = ec2.describe_transit_gateways(TransitGatewayIds=[gateway])["TransitGateways"]
    except ClientError as exc:
        if _error_code(exc) not in {"InvalidTransitGatewayID.NotFound", "InvalidTransitGatewayID.Malformed"}:
            raise
        found = []
    if not found:
        return [
            _row(
                Status.FAIL,
                subject,
                f"no transit gateway {gateway} in {region}",
                "name a transit gateway of the tier's region",
            )
        ]
    state = str(found[0].get("State", ""))
    if state != _UP:
        return [_row(Status.FAIL, subject, f"transit gateway {gateway} is {state!r}, not 'available'")]
    attachments = ec2.describe_transit_gateway_attachments(
        Filters=[{"Name": "transit-gateway-id", "Values": [gateway]}]
    )["TransitGatewayAttachments"]
    links = sorted(
        f"{a['ResourceType']} {a.get('ResourceId', '')}".strip()
        for a in attachments
        if a.get("ResourceType") in ("vpn", "direct-connect-gateway") and a.get("State") == _UP
    )
    if not links:
        return [
            _row(
                Status.FAIL,
                subject,
                f"transit gateway {gateway} has no available VPN or Direct Connect gateway attachment: "
                "nothing carries the traffic to the on-premises networks",
                "attach the Site-to-Site VPN or Direct Connect gateway that reaches the hybrid nodes",
            )
        ]
    return [
        _row(
            Status.PASS,
            subject,
            f"transit gateway {gateway} is available and reaches on-premises over {', '.join(links)}",
        )
    ]


def _virtual_private_gateway(gateway: str, region: str, ec2: Any, directconnect: Any) -> list[CheckResult]:
    from botocore.exceptions import ClientError

    subject = "hybrid_nodes.gateway_id"
    try:
        found = ec2.describe_vpn_gateways(VpnGatewayIds=[gateway])["VpnGateways"]
    except ClientError as exc:
        if _error_code(exc) not in {"InvalidVpnGatewayID.NotFound", "InvalidVpnGatewayID.Malformed"}:
            raise
        found = []
    if not found:
        return [
            _row(
                Status.FAIL,
                subject,
                f"no virtual private gateway {gateway} in {region}",
                "name a virtual private gateway of the tier's region",
            )
        ]
    state = str(found[0].get("State", ""))
    if state != _UP:
        return [
            _row(Status.FAIL, subject, f"virtual private gateway {gateway} is {state!r}, not 'available'")
        ]
    vpns = ec2.describe_vpn_connections(Filters=[{"Name": "vpn-gateway-id", "Values": [gateway]}])[
        "VpnConnections"
    ]
    links = sorted(f"VPN {v['VpnConnectionId']}" for v in vpns if v.get("State") == _UP)
    interfaces = directconnect.describe_virtual_interfaces().get("virtualInterfaces", [])
    links += sorted(
        f"Direct Connect {i['virtualInterfaceId']}"
        for i in interfaces
        if i.get("virtualGatewayId") == gateway and i.get("virtualInterfaceState") == _UP
    )
    if not links:
        return [
            _row(
                Status.FAIL,
                subject,
                f"virtual private gateway {gateway} has no available VPN connection or Direct Connect "
                "virtual interface: nothing carries the traffic to the on-premises networks",
                "connect the Site-to-Site VPN or Direct Connect private virtual interface that reaches "
                "the hybrid nodes",
            )
        ]
    return [
        _row(
            Status.PASS,
            subject,
            f"virtual private gateway {gateway} is available and reaches on-premises over {', '.join(links)}",
        )
    ]


def check_hybrid_gateway(tier: TierConfig, *, region: str, ec2: Any, directconnect: Any) -> list[CheckResult]:
    """`hybrid_nodes.gateway_id` exists in `region`, is available, and has an available Site-to-Site
    VPN or Direct Connect link: a transit gateway's `vpn` or `direct-connect-gateway` attachment
    (DescribeTransitGatewayAttachments), or a virtual private gateway's VPN connection
    (DescribeVpnConnections) or Direct Connect private virtual interface
    (DescribeVirtualInterfaces). One passing row, with no call, for a tier without hybrid nodes."""
    hybrid = tier.hybrid_nodes
    if not hybrid.enabled or hybrid.gateway_id is None:
        return [_row(Status.PASS, "hybrid_nodes", "the tier has no hybrid nodes (no gateway to check)")]
    gateway = hybrid.gateway_id
    if gateway.startswith("tgw-"):
        return _transit_gateway(gateway, region, ec2)
    return _virtual_private_gateway(gateway, region, ec2, directconnect)
