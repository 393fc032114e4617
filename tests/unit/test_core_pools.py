"""gpufarm.core.pools: the instance types a pool may launch, the pods a tier runs, the GPUs per pool."""

from __future__ import annotations

from gpufarm.config import load_preset
from gpufarm.core.pools import (
    Instances,
    PoolLoad,
    Role,
    gpu_instance_types,
    instances_for,
    pod_sets,
    pods_of,
    pool_instance_types,
    pool_loads,
)

from .factories import enterprise_document, enterprise_part, make_enterprise, make_tier, pool_override

NO_OPTIMIZER = {"ingress": {"target_optimizer": {"enabled": False}}}


def loads_of(tier_loads: list[PoolLoad]) -> list[tuple[str, int, int]]:
    return [(load.name, load.base_gpus, load.peak_gpus) for load in tier_loads]


# --------------------------------------------------------------------------- instance types


def test_a_pool_with_instance_types_launches_exactly_those() -> None:
    pool = load_preset("production").node_pools[0]
    # The serving pool lists its types; its families (g6e, p5) do not widen them.
    assert pool_instance_types(pool) == ["g6e.12xlarge", "g6e.48xlarge", "p5.48xlarge"]


def test_a_pool_of_families_launches_every_catalog_size_smallest_first() -> None:
    pool = make_tier(pool_override(instance_families=["p5", "g6e"], instance_types=[])).node_pools[0]
    assert pool_instance_types(pool) == [
        "p5.4xlarge",
        "p5.48xlarge",
        "g6e.xlarge",
        "g6e.2xlarge",
        "g6e.4xlarge",
        "g6e.8xlarge",
        "g6e.16xlarge",
        "g6e.12xlarge",
        "g6e.24xlarge",
        "g6e.48xlarge",
    ]


def test_the_tier_launches_its_node_groups_and_pools_types_sorted() -> None:
    assert gpu_instance_types(load_preset("production")) == [
        "g6e.12xlarge",
        "g6e.16xlarge",
        "g6e.24xlarge",
        "g6e.2xlarge",
        "g6e.48xlarge",
        "g6e.4xlarge",
        "g6e.8xlarge",
        "g6e.xlarge",
        "p5.48xlarge",
    ]
    # Node groups add their one type; the two p5.48xlarge groups and the burst pool share it.
    assert gpu_instance_types(load_preset("enterprise")) == [
        "g6e.12xlarge",
        "g6e.16xlarge",
        "g6e.24xlarge",
        "g6e.2xlarge",
        "g6e.48xlarge",
        "g6e.4xlarge",
        "g6e.8xlarge",
        "g6e.xlarge",
        "p5.48xlarge",
    ]


# --------------------------------------------------------------------------- pods


def test_a_multi_node_replica_is_pipeline_parallel_pods() -> None:
    sets = pod_sets(load_preset("enterprise"))
    assert [
        (
            s.model.name,
            s.role,
            s.gpus,
            s.pods_per_replica,
            s.base_replicas,
            s.peak_replicas,
            [t.name for t in s.targets],
        )
        for s in sets
    ] == [
        ("llama-3-1-405b", Role.SERVE, 8, 2, 1, 1, ["h100-multinode"]),
        # The capacity class: its reserved node group first, then its pool.
        ("llama-3-3-70b", Role.SERVE, 4, 1, 1, 4, ["h100-base", "h100-burst"]),
        ("qwen3-32b-batch", Role.SERVE, 2, 1, 0, 4, ["background"]),
    ]
    assert sets[0].gpus_at(peak=True) == 16


def test_prefill_pods_are_their_own_pod_set_with_their_own_gpus_and_replicas() -> None:
    tier = make_enterprise(
        NO_OPTIMIZER,
        enterprise_part(
            "models",
            1,
            prefill_decode={"prefill_gpus": 8, "prefill_autoscaling": {"min_replicas": 1, "max_replicas": 2}},
        ),
    )
    decode, prefill = [s for s in pod_sets(tier) if s.model.name == "llama-3-3-70b"]
    assert (decode.role, decode.gpus, decode.base_replicas, decode.peak_replicas) == (Role.SERVE, 4, 1, 4)
    assert (prefill.role, prefill.gpus, prefill.base_replicas, prefill.peak_replicas) == (
        Role.PREFILL,
        8,
        1,
        2,
    )
    assert prefill.targets == decode.targets
    assert (prefill.gpus_at(peak=False), prefill.gpus_at(peak=True)) == (8, 16)
    # Their CPU and memory are the model's: serving.py gives prefill pods the model's requests.
    assert (prefill.cpu, prefill.memory_gib) == (32, 320)


# --------------------------------------------------------------------------- GPUs per pool


def test_node_groups_fill_first_then_pools() -> None:
    assert loads_of(pool_loads(load_preset("enterprise"))) == [
        # 70B: 1 replica of 4 GPUs at base on the reserved node, 4 at peak: 8 there, 8 on burst.
        ("h100-base", 4, 8),
        ("h100-multinode", 16, 16),
        ("h100-burst", 0, 8),
        ("background", 0, 8),
    ]


def test_a_pool_fills_to_its_gpu_limit_and_the_next_pool_takes_the_rest() -> None:
    burst, background = enterprise_document()["node_pools"]
    more = {**burst, "name": "h100-more", "weight": 20, "gpu_limit": 16}
    tier = make_enterprise(
        {"node_pools": [{**burst, "gpu_limit": 8}, background, more]},
        enterprise_part("models", 1, autoscaling={"min_replicas": 1, "max_replicas": 6, "queue_target": 5}),
    )
    # 24 GPUs at peak: 8 on the reserved node, 8 on burst (its limit, weight 50), 8 on the next pool.
    assert loads_of(pool_loads(tier)) == [
        ("h100-base", 4, 8),
        ("h100-multinode", 16, 16),
        ("h100-burst", 0, 8),
        ("background", 0, 8),
        ("h100-more", 0, 8),
    ]


def test_a_pool_the_targets_before_it_cover_still_lists_the_pods_that_may_land_there() -> None:
    burst = next(load for load in pool_loads(load_preset("enterprise")) if load.name == "h100-burst")
    (placed,) = burst.placed
    assert (placed.pods.model.name, placed.base_gpus, placed.peak_gpus) == ("llama-3-3-70b", 0, 8)
    assert burst.pod_gpus == 4


def test_instances_pack_a_pools_gpus_and_a_node_group_runs_all_its_nodes() -> None:
    group, multinode, burst, background = pool_loads(load_preset("enterprise"))
    assert group.is_node_group and not burst.is_node_group
    assert group.instances(8) == Instances(base=1, peak=1)
    assert multinode.instances(8) == Instances(base=2, peak=2)
    assert burst.instances(8) == Instances(base=0, peak=1)
    assert background.instances(4) == Instances(base=0, peak=2)
    assert [instances_for(gpus, 4) for gpus in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_a_pool_no_pod_names_is_left_out() -> None:
    tier = make_enterprise(enterprise_part("models", 2, node_pool="h100-burst", capacity_class=None))
    # qwen3-32b-batch moved to the burst pool: the background pool holds nothing.
    assert [load.name for load in pool_loads(tier)] == ["h100-base", "h100-multinode", "h100-burst"]


def test_a_models_pods_alone_count_its_gpus_at_peak() -> None:
    # What the validator asks of a capacity class: decode and prefill pods at their most.
    tier = make_enterprise(
        NO_OPTIMIZER, enterprise_part("models", 1, prefill_decode={"prefill_gpus": 8, "prefill_replicas": 2})
    )
    model = tier.models[1]
    sets = pods_of(model)
    assert [(s.role, s.gpus_at(peak=True), s.targets) for s in sets] == [
        (Role.SERVE, 16, ()),
        (Role.PREFILL, 16, ()),
    ]
