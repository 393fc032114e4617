"""Preflight for hybrid nodes: remote CIDRs offline, and the gateway's VPN or Direct Connect link (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from gpufarm.aws.preflight import Check, Status, offline_report
from gpufarm.aws.preflight.hybrid import check_hybrid_cidrs, check_hybrid_gateway
from gpufarm.config import TierConfig
from tests.aws.moto_account import moto_account, table
from tests.unit.factories import make_production

REGION = "us-east-1"
GATEWAY = "hybrid_nodes.gateway_id"


def hybrid_tier(gateway: str = "tgw-0a1b2c3d4e5f60718", **fields: Any) -> TierConfig:
    section = {
        "enabled": True,
        "remote_node_cidrs": ["192.168.0.0/20"],
        "remote_pod_cidrs": ["192.168.64.0/18"],
        "gateway_id": gateway,
        **fields,
    }
    return make_production({"hybrid_nodes": section})


class NoDirectConnect:
    """A Direct Connect client with no virtual interfaces (moto does not model them)."""

    def __init__(self, interfaces: list[dict[str, str]] | None = None) -> None:
        self.interfaces = interfaces or []

    def describe_virtual_interfaces(self) -> dict[str, Any]:
        return {"virtualInterfaces": self.interfaces}


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with moto_account(monkeypatch, REGION):
        yield boto3.client("ec2", region_name=REGION)


def _customer_gateway(ec2: Any) -> str:
    gateway: str = ec2.create_customer_gateway(Type="ipsec.1", PublicIp="198.18.7.1", BgpAsn=65000)[
        "CustomerGateway"
    ]["CustomerGatewayId"]
    return gateway


# --------------------------------------------------------------------------- offline


def test_cidrs_eks_accepts_pass_offline() -> None:
    (row,) = check_hybrid_cidrs(hybrid_tier())
    assert (row.check, row.status) == (Check.HYBRID_CIDRS, Status.PASS)
    assert row.message.startswith("192.168.0.0/20, 192.168.64.0/18: private, apart from the VPC 10.0.0.0/16")


def test_offline_report_carries_the_cidr_row_and_skips_the_gateway() -> None:
    report = offline_report(hybrid_tier(), REGION, "no credentials")
    checks = {(r.check, r.status) for r in report.results}
    assert (Check.HYBRID_CIDRS, Status.PASS) in checks
    assert (Check.HYBRID_GATEWAY, Status.SKIP) in checks


def test_a_tier_without_hybrid_nodes_checks_no_gateway() -> None:
    tier = make_production()
    assert check_hybrid_cidrs(tier) == []
    (row,) = check_hybrid_gateway(tier, region=REGION, ec2=None, directconnect=None)
    assert (row.subject, row.status) == ("hybrid_nodes", Status.PASS)


# --------------------------------------------------------------------------- transit gateway


def test_a_transit_gateway_with_an_available_vpn_attachment_passes(ec2: Any) -> None:
    tgw = ec2.create_transit_gateway(Description="to the data centre")["TransitGateway"]["TransitGatewayId"]
    vpn = ec2.create_vpn_connection(
        Type="ipsec.1", CustomerGatewayId=_customer_gateway(ec2), TransitGatewayId=tgw
    )
    vpn_id = vpn["VpnConnection"]["VpnConnectionId"]
    rows = table(
        check_hybrid_gateway(hybrid_tier(tgw), region=REGION, ec2=ec2, directconnect=NoDirectConnect())
    )
    assert rows[GATEWAY] == (
        Status.PASS,
        f"transit gateway {tgw} is available and reaches on-premises over vpn {vpn_id}",
        "",
    )


def test_a_transit_gateway_with_only_vpc_attachments_fails(ec2: Any) -> None:
    tgw = ec2.create_transit_gateway()["TransitGateway"]["TransitGatewayId"]
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.0.0/24")["Subnet"]["SubnetId"]
    ec2.create_transit_gateway_vpc_attachment(TransitGatewayId=tgw, VpcId=vpc, SubnetIds=[subnet])
    rows = table(
        check_hybrid_gateway(hybrid_tier(tgw), region=REGION, ec2=ec2, directconnect=NoDirectConnect())
    )
    assert rows[GATEWAY] == (
        Status.FAIL,
        f"transit gateway {tgw} has no available VPN or Direct Connect gateway attachment: nothing "
        "carries the traffic to the on-premises networks",
        "attach the Site-to-Site VPN or Direct Connect gateway that reaches the hybrid nodes",
    )


def test_a_missing_transit_gateway_fails(ec2: Any) -> None:
    rows = table(check_hybrid_gateway(hybrid_tier(), region=REGION, ec2=ec2, directconnect=NoDirectConnect()))
    assert rows[GATEWAY] == (
        Status.FAIL,
        "no transit gateway tgw-0a1b2c3d4e5f60718 in us-east-1",
        "name a transit gateway of the tier's region",
    )


# --------------------------------------------------------------------------- virtual private gateway


def test_a_virtual_private_gateway_with_a_vpn_passes(ec2: Any) -> None:
    vgw = ec2.create_vpn_gateway(Type="ipsec.1")["VpnGateway"]["VpnGatewayId"]
    vpn = ec2.create_vpn_connection(
        Type="ipsec.1", CustomerGatewayId=_customer_gateway(ec2), VpnGatewayId=vgw
    )
    vpn_id = vpn["VpnConnection"]["VpnConnectionId"]
    rows = table(
        check_hybrid_gateway(hybrid_tier(vgw), region=REGION, ec2=ec2, directconnect=NoDirectConnect())
    )
    assert rows[GATEWAY][0:2] == (
        Status.PASS,
        f"virtual private gateway {vgw} is available and reaches on-premises over VPN {vpn_id}",
    )


def test_a_virtual_private_gateway_with_a_direct_connect_interface_passes(ec2: Any) -> None:
    vgw = ec2.create_vpn_gateway(Type="ipsec.1")["VpnGateway"]["VpnGatewayId"]
    link = NoDirectConnect(
        [
            {
                "virtualInterfaceId": "dxvif-other",
                "virtualGatewayId": "vgw-ffffffff",
                "virtualInterfaceState": "available",
            },
            {
                "virtualInterfaceId": "dxvif-ours",
                "virtualGatewayId": vgw,
                "virtualInterfaceState": "available",
            },
        ]
    )
    rows = table(check_hybrid_gateway(hybrid_tier(vgw), region=REGION, ec2=ec2, directconnect=link))
    assert rows[GATEWAY][0:2] == (
        Status.PASS,
        f"virtual private gateway {vgw} is available and reaches on-premises over Direct Connect dxvif-ours",
    )


def test_a_virtual_private_gateway_with_a_down_interface_and_no_vpn_fails(ec2: Any) -> None:
    vgw = ec2.create_vpn_gateway(Type="ipsec.1")["VpnGateway"]["VpnGatewayId"]
    link = NoDirectConnect(
        [{"virtualInterfaceId": "dxvif-ours", "virtualGatewayId": vgw, "virtualInterfaceState": "down"}]
    )
    rows = table(check_hybrid_gateway(hybrid_tier(vgw), region=REGION, ec2=ec2, directconnect=link))
    assert rows[GATEWAY][0:2] == (
        Status.FAIL,
        f"virtual private gateway {vgw} has no available VPN connection or Direct Connect virtual "
        "interface: nothing carries the traffic to the on-premises networks",
    )


def test_a_missing_virtual_private_gateway_fails(ec2: Any) -> None:
    rows = table(
        check_hybrid_gateway(
            hybrid_tier("vgw-0a1b2c3d4e5f60718"), region=REGION, ec2=ec2, directconnect=NoDirectConnect()
        )
    )
    assert rows[GATEWAY][0:2] == (
        Status.FAIL,
        "no virtual private gateway vgw-0a1b2c3d4e5f60718 in us-east-1",
    )
