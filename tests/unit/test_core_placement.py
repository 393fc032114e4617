"""Where a model's pods land (`gpufarm.core.placement`): pools, node groups, capacity classes, shares."""

from __future__ import annotations

from gpufarm.config import TierConfig
from gpufarm.config.model import NodeGroupConfig
from gpufarm.core.placement import placement_of

from .factories import make_enterprise, make_tier, split


def test_placement_of_a_split_model_covers_every_share() -> None:
    tier: TierConfig = make_enterprise(split())
    names = [t.name for t in placement_of(tier, tier.models[1])]
    assert names == ["h100-base", "h100-burst", "l40s"]
    assert isinstance(placement_of(tier, tier.models[1])[0], NodeGroupConfig)


def test_a_model_without_a_node_pool_lands_on_the_first_pool() -> None:
    tier = make_tier()
    model = tier.models[0].model_copy(update={"node_pool": None, "capacity_class": None})
    assert [t.name for t in placement_of(tier, model)] == [tier.node_pools[0].name]


def test_a_model_naming_no_existing_pool_lands_nowhere() -> None:
    tier = make_tier()
    model = tier.models[0].model_copy(update={"node_pool": "nowhere", "capacity_class": None})
    assert placement_of(tier, model) == []


def test_a_capacity_class_lands_on_every_member_of_the_class() -> None:
    tier = make_enterprise()
    model = tier.models[0].model_copy(update={"node_pool": None, "capacity_class": "h100"})
    assert [t.name for t in placement_of(tier, model)] == [t.name for t in tier.capacity_classes()["h100"]]
    assert placement_of(tier, model)
