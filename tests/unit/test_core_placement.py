"""Where a model's pods land (`gpufarm.core.placement`): pools, node groups, capacity classes, shares,
the node selectors that pin them there and the EFA groups among them."""

from __future__ import annotations

from gpufarm.config import TierConfig
from gpufarm.config.model import NodeGroupConfig
from gpufarm.core.placement import efa_node_groups, node_selector, node_selectors, placement_of

from .factories import make_enterprise, make_production, make_tier, split


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


# --------------------------------------------------------------------------- node selectors


def test_a_capacity_class_model_selects_its_class_label() -> None:
    tier = make_enterprise()
    assert node_selector(tier, tier.models[1]) == {"gpufarm.io/capacity-class": "h100"}


def test_a_model_on_a_node_group_selects_the_groups_pool_label() -> None:
    tier = make_enterprise()
    # The 405B runs on the h100-multinode node group: node groups carry gpufarm.io/pool.
    assert node_selector(tier, tier.models[0]) == {"gpufarm.io/pool": "h100-multinode"}


def test_a_multi_node_model_on_a_pool_selects_the_pools_nodepool() -> None:
    tier = make_production()
    model = tier.models[0].model_copy(update={"pipeline_parallel": 2})
    assert node_selector(tier, model) == {"karpenter.sh/nodepool": "gpu-serving"}
    # Without a pool of its own it lands on the first pool, and selects that.
    assert node_selector(tier, model.model_copy(update={"node_pool": None})) == {
        "karpenter.sh/nodepool": f"gpu-{tier.node_pools[0].name}"
    }


def test_a_single_node_model_on_a_pool_has_no_selector() -> None:
    tier = make_production()
    assert node_selector(tier, tier.models[0]) is None


def test_selectors_are_keyed_by_model_and_by_share() -> None:
    tier = make_enterprise(split())
    selectors = node_selectors(tier)
    assert selectors == {
        "llama-3-1-405b": {"gpufarm.io/pool": "h100-multinode"},
        "llama-3-3-70b/h100": {"gpufarm.io/capacity-class": "h100"},
        "qwen3-32b-batch": {"gpufarm.io/capacity-class": "background"},
    }
    # The L40S share is single-node on a pool: no selector, so no key.
    assert "llama-3-3-70b/l40s" not in selectors


# --------------------------------------------------------------------------- EFA


def test_only_efa_node_groups_count_as_efa_placement() -> None:
    tier = make_enterprise()
    assert [g.name for g in efa_node_groups(tier, tier.models[0])] == ["h100-multinode"]
    # The 70B's class holds the h100-base group (no EFA) and a Karpenter pool: none.
    assert efa_node_groups(tier, tier.models[1]) == []
