"""EFA interface layouts (`gpufarm.core.efa`): what a node group's launch template lists."""

from __future__ import annotations

from gpufarm.core.efa import EfaInterface, efa_interfaces, node_group_efa_devices, node_group_efa_interfaces
from gpufarm.core.instances import efa_network_cards


def test_a_known_multi_card_type_gets_one_ena_and_an_efa_only_interface_per_card() -> None:
    cards = efa_network_cards("p5.48xlarge")
    assert cards == 32
    layout = node_group_efa_interfaces("p5.48xlarge")
    assert layout == efa_interfaces("p5.48xlarge")
    assert layout[0] == EfaInterface(network_card_index=0, device_index=0, interface_type="interface")
    assert [i.interface_type for i in layout[1:]] == ["efa-only"] * cards
    assert node_group_efa_devices("p5.48xlarge") == cards


def test_a_type_outside_the_table_gets_one_efa_as_its_primary_interface() -> None:
    assert efa_interfaces("g6e.48xlarge") is None
    assert node_group_efa_interfaces("g6e.48xlarge") == [
        EfaInterface(network_card_index=0, device_index=0, interface_type="efa")
    ]
    assert node_group_efa_devices("g6e.48xlarge") == 1
