"""EFA interface layouts of an instance type: what a node's launch template or NodeClass lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpufarm.core.instances import efa_network_cards


@dataclass(frozen=True, kw_only=True)
class EfaInterface:
    """One network interface of an EFA node: where it attaches and what it is."""

    network_card_index: int
    device_index: int
    interface_type: Literal["interface", "efa", "efa-only"]


def efa_interfaces(instance_type: str) -> list[EfaInterface] | None:
    """The EFA interface layout EC2 recommends for a multi-card instance type, or None if unknown.

    The primary interface (card 0, device 0) is a plain ENA interface carrying the node's and
    the pods' IP traffic; every network card then gets one EFA-only interface (device 1 on card
    0, device 0 on the others). EFA-only interfaces take no IP address, so a p5.48xlarge uses
    one subnet address for its primary interface instead of 32 (VPC CNI 1.18.5 or later).
    """
    cards = efa_network_cards(instance_type)
    if cards is None:
        return None
    return [
        EfaInterface(network_card_index=0, device_index=0, interface_type="interface"),
        EfaInterface(network_card_index=0, device_index=1, interface_type="efa-only"),
        *(
            EfaInterface(network_card_index=card, device_index=0, interface_type="efa-only")
            for card in range(1, cards)
        ),
    ]


def node_group_efa_interfaces(instance_type: str) -> list[EfaInterface]:
    """EFA interfaces of a node group: EC2's layout for known multi-card types, else one EFA.

    For an instance type outside the table, the primary interface is an EFA (with ENA): every
    EFA-capable type supports that, and it carries both IP and EFA traffic.
    """
    return efa_interfaces(instance_type) or [
        EfaInterface(network_card_index=0, device_index=0, interface_type="efa")
    ]


def node_group_efa_devices(instance_type: str) -> int:
    """EFA devices a node group's node advertises (`vpc.amazonaws.com/efa`): its EFA interfaces.

    Every interface of :func:`node_group_efa_interfaces` but the plain ENA one.
    """
    return sum(i.interface_type != "interface" for i in node_group_efa_interfaces(instance_type))
