"""Models split into weighted shares across GPU pools: the config, its views and every invalid input."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError, ModelShareConfig, TierConfig

from .factories import (
    SHARES,
    make_enterprise,
    make_tier,
    model_override,
    overrides,
    poc_document,
    share,
    split,
)


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_enterprise(*parts)
    return [str(issue) for issue in caught.value.issues]


@pytest.fixture(scope="module")
def tier() -> TierConfig:
    return make_enterprise(split())


# --------------------------------------------------------------------------- the model's views


def test_each_share_is_the_model_on_its_own_placement(tier: TierConfig) -> None:
    model = tier.models[1]
    (h100_name, h100), (l40s_name, l40s) = model.parts()
    assert (h100_name, l40s_name) == ("h100", "l40s")
    assert (h100.capacity_class, h100.node_pool, h100.replicas, h100.gpus) == ("h100", None, 2, 4)
    assert (l40s.capacity_class, l40s.node_pool, l40s.replicas, l40s.gpus) == (None, "l40s", 1, 4)
    for part in (h100, l40s):
        # Everything but the placement is the model's.
        assert (part.name, part.weights, part.quantization) == (model.name, model.weights, model.quantization)
        assert not part.shares and part.autoscaling is None
    assert model.max_replicas == 3


def test_a_model_without_shares_is_its_only_part(tier: TierConfig) -> None:
    model = tier.models[2]
    assert model.parts() == [(None, model)]


def test_share_gpus_override_the_models() -> None:
    model = make_enterprise(share(1, gpus=2)).models[1]
    assert [(name, part.gpus) for name, part in model.parts()] == [("h100", 4), ("l40s", 2)]


def test_a_share_is_named_after_its_placement_by_default() -> None:
    assert ModelShareConfig(node_pool="l40s").share_name == "l40s"
    assert ModelShareConfig(capacity_class="h100").share_name == "h100"
    assert ModelShareConfig(name="warm", capacity_class="h100").share_name == "warm"
    assert ModelShareConfig(node_pool="l40s").weight == 1


# --------------------------------------------------------------------------- valid variants

NLB = {
    "ingress": {
        "kind": "nlb",
        "target_optimizer": {"enabled": False},
        "waf": {"enabled": False},
        "lcu_reservation": None,
    }
}


def _nlb_split() -> dict[str, Any]:
    base = split()
    models = [
        dict(m, listener_port=port) for m, port in zip(base["models"], (8443, 9443, 10443), strict=True)
    ]
    return overrides(base, NLB, {"models": models})


VALID: list[Any] = [
    pytest.param(split(), id="alb"),
    pytest.param(_nlb_split(), id="nlb"),
    pytest.param(share(1, weight=0), id="warm-standby-at-weight-0"),
    pytest.param(share(1, replicas=0, weight=0), id="no-pods-and-no-traffic"),
    pytest.param(share(1, gpus=2), id="own-tensor-parallel-size"),
    pytest.param(
        split(
            {"capacity_class": "h100", "replicas": 1},
            {"name": "h100-tp8", "capacity_class": "h100", "gpus": 8, "replicas": 1},
        ),
        id="two-shares-on-one-class",
    ),
    pytest.param(
        split({"node_pool": "h100-base", "replicas": 2}, {"node_pool": "h100-burst"}),
        id="reserved-node-group-and-burst-pool",
    ),
    pytest.param(
        split(
            {"capacity_class": "h100", "replicas": 1},
            {"capacity_class": "background", "weight": 0},
            critical=False,
        ),
        id="non-critical-model-on-spot",
    ),
]


@pytest.mark.parametrize("override", VALID)
def test_valid_split(override: dict[str, Any]) -> None:
    assert make_enterprise(override).models[1].shares


def test_auto_mode_pools_can_be_shares() -> None:
    pools = [
        poc_document()["node_pools"][0],
        {"name": "l4", "instance_families": ["g6"], "gpu_limit": 2},
    ]
    tier = make_tier(
        {"node_pools": pools},
        model_override(shares=[{"node_pool": "l40s", "weight": 2}, {"node_pool": "l4"}]),
    )
    assert [name for name, _ in tier.models[0].parts()] == ["l40s", "l4"]


# --------------------------------------------------------------------------- invalid input

INVALID: list[Any] = [
    pytest.param(
        split(SHARES[0]),
        [
            "models[1].shares: must list 2-5 shares (one placement needs no share: set node_pool or "
            "capacity_class; a forward action names at most 5 target groups), got 1"
        ],
        id="one-share",
    ),
    pytest.param(
        split(*({"name": f"s{i}", "capacity_class": "h100"} for i in range(6))),
        [
            "models[1].shares: must list 2-5 shares (one placement needs no share: set node_pool or "
            "capacity_class; a forward action names at most 5 target groups), got 6"
        ],
        id="six-shares",
    ),
    pytest.param(
        split(node_pool="l40s"),
        [
            "models[1].node_pool: must be empty when shares are set (each share names its own "
            "node_pool or capacity_class), got 'l40s'"
        ],
        id="model-node-pool",
    ),
    pytest.param(
        split(capacity_class="h100"),
        [
            "models[1].capacity_class: must be empty when shares are set (each share names its own "
            "node_pool or capacity_class), got 'h100'"
        ],
        id="model-capacity-class",
    ),
    pytest.param(
        split(autoscaling={"min_replicas": 1, "max_replicas": 4}),
        [
            "models[1].autoscaling: must be empty when shares are set (each share runs its own fixed "
            "`replicas`; KEDA scales one Deployment per model), got an autoscaling section"
        ],
        id="autoscaling",
    ),
    pytest.param(
        split(pipeline_parallel=2),
        [
            "models[1].pipeline_parallel: must be 1 when shares are set (a multi-node model runs as "
            "one LeaderWorkerSet, which is not split), got 2"
        ],
        id="pipeline-parallel",
    ),
    pytest.param(
        split(kv_cache_routing=True),
        [
            "models[1].kv_cache_routing: must be false when shares are set (the router chooses among "
            "the pods of one Service; shares are split by the load balancer's weights), got true",
            "models[1].kv_cache_routing: must be false while ingress.target_optimizer.enabled is true "
            "(both choose the pod a request goes to), got true",
        ],
        id="kv-cache-routing",
    ),
    pytest.param(
        split(prefill_decode={"prefill_replicas": 1}),
        [
            "models[1].prefill_decode: must be empty when shares are set (prefill and decode pods sit "
            "behind one router, not behind the load balancer's weighted target groups), got a "
            "prefill_decode section",
            "models[1].prefill_decode: must be empty while ingress.target_optimizer.enabled is true "
            "(both choose the pod a request goes to), got a prefill_decode section",
        ],
        id="prefill-decode",
    ),
    pytest.param(
        share(1, node_pool="a100"),
        [
            "models[1].shares[1].node_pool: must name a node pool or node group ('h100-base', "
            "'h100-multinode', 'h100-burst', 'background', 'l40s'), got 'a100'"
        ],
        id="unknown-pool",
    ),
    pytest.param(
        share(0, capacity_class="a100"),
        [
            "models[1].shares[0].capacity_class: must name a capacity class ('h100', "
            "'h100-multinode', 'background', 'l40s'), got 'a100'"
        ],
        id="unknown-class",
    ),
    pytest.param(
        share(1, capacity_class="h100"),
        [
            "models[1].shares[1].capacity_class: must be empty when node_pool is set (one placement "
            "per share), got 'h100' and node_pool 'l40s'"
        ],
        id="pool-and-class",
    ),
    pytest.param(
        share(1, node_pool=None),
        [
            "models[1].shares[1]: must set node_pool or capacity_class (where the share's replicas "
            "run), got neither"
        ],
        id="no-placement",
    ),
    pytest.param(
        split({"capacity_class": "h100"}, {"capacity_class": "h100"}),
        [
            "models[1].shares: names must be unique within the model (a share's name defaults to its "
            "node_pool or capacity_class), got 'h100' 2 times"
        ],
        id="duplicate-default-names",
    ),
    pytest.param(
        share(1, name="h100"),
        [
            "models[1].shares: names must be unique within the model (a share's name defaults to its "
            "node_pool or capacity_class), got 'h100' 2 times"
        ],
        id="duplicate-names",
    ),
    pytest.param(
        split(*(dict(s, weight=0) for s in SHARES)),
        [
            "models[1].shares: must give at least one share a weight above 0 (else the load balancer "
            "forwards the model's requests nowhere), got all 0"
        ],
        id="all-weights-0",
    ),
    pytest.param(
        share(1, replicas=0),
        [
            "models[1].shares[1].weight: must be 0 when replicas is 0 (the load balancer would send "
            "the share's part of the requests to a target group without pods), got 1"
        ],
        id="weight-without-pods",
    ),
    pytest.param(
        share(1, weight=1000),
        ["models[1].shares[1].weight: must be <= 999, got 1000"],
        id="weight-above-999",
    ),
    pytest.param(
        share(1, weight=-1),
        ["models[1].shares[1].weight: must be >= 0, got -1"],
        id="negative-weight",
    ),
    pytest.param(
        share(1, name="L40S"),
        [
            "models[1].shares[1].name: must be a lowercase DNS label (a-z, 0-9, '-', starting with a "
            "letter, at most 40 characters), got 'L40S'"
        ],
        id="name-not-a-dns-label",
    ),
    pytest.param(
        share(1, pool="l40s"),
        [
            "models[1].shares[1].pool: is not a known setting (allowed: name, node_pool, "
            "capacity_class, replicas, gpus, weight)"
        ],
        id="unknown-key",
    ),
    pytest.param(
        share(1, node_pool="background"),
        [
            "models[1].shares[1].node_pool: must not be pool 'background' for a critical model: the "
            "pool allows spot, whose nodes are reclaimed with two minutes' notice (set critical: "
            "false, or allow_spot: true to accept it), got 'background'"
        ],
        id="critical-share-on-a-spot-pool",
    ),
    pytest.param(
        share(0, capacity_class="background"),
        [
            "models[1].shares[0].capacity_class: must not be class 'background' for a critical "
            "model: its pool 'background' allows spot, whose nodes are reclaimed with two minutes' "
            "notice (set critical: false, or allow_spot: true to accept it), got 'background'"
        ],
        id="critical-share-on-the-spot-class",
    ),
    pytest.param(
        share(1, gpus=3),
        ["models[1].shares[1].gpus: must be one of 1, 2, 4, 8 (the tensor-parallel size), got 3"],
        id="share-tensor-parallel",
    ),
    pytest.param(
        share(1, gpus=8),
        [
            "models[1].shares[1].gpus: must fit on one instance of pool 'l40s' (at most 4 GPU(s) per "
            "instance), got 8"
        ],
        id="share-does-not-fit-its-pool",
    ),
    pytest.param(
        share(1, replicas=5),
        [
            "node_pools[2].gpu_limit: must cover the GPUs its models request (20 = sum of gpus x "
            "replicas, max_replicas when autoscaled), got 16"
        ],
        id="pool-gpu-limit-counts-the-share",
    ),
    pytest.param(
        share(0, replicas=9),
        [
            "models[1].shares[0].capacity_class: must have room for its models (36 GPUs requested "
            "from class 'h100', whose node groups and pool limits hold 32), got 'h100'"
        ],
        id="class-room-counts-the-share",
    ),
    pytest.param(
        split({"node_pool": "h100-base", "replicas": 3}, SHARES[1]),
        [
            "node_groups[0].nodes: must hold the GPUs its models request (12 GPUs; 1 x p5.48xlarge "
            "hold 8), got 1"
        ],
        id="node-group-counts-the-share",
    ),
    pytest.param(
        split(dict(SHARES[0], name="batch"), SHARES[1], name="qwen3-32b"),
        [
            "models[1].shares[0].name: must not repeat the Service name 'vllm-qwen3-32b-batch' of "
            "model 'qwen3-32b-batch', got 'batch'"
        ],
        id="service-name-of-another-model",
    ),
    pytest.param(
        split(dict(SHARES[0], name="ba-tch"), SHARES[1], name="qwen3-32b"),
        [
            "models[1].shares[0].name: must give the share resource names apart from model "
            "'qwen3-32b-batch''s (without hyphens both are 'qwen332bbatch', which construct IDs "
            "use), got 'ba-tch'"
        ],
        id="construct-ids-of-another-model",
    ),
    pytest.param(
        split(
            dict(SHARES[0], name="h100-reserved-then-burst-pool"),
            SHARES[1],
            name="llama-3-3-70b-instruct-fp8-quantized",
        ),
        [
            "models[1].shares[0].name: must keep the share's Service name "
            "'vllm-llama-3-3-70b-instruct-fp8-quantized-h100-reserved-then-burst-pool' within 63 "
            "characters (a Kubernetes Service name), got 'h100-reserved-then-burst-pool' (71 characters)"
        ],
        id="service-name-too-long",
    ),
]


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_split(override: dict[str, Any], expected: list[str]) -> None:
    assert issues_of(override) == expected


def test_capacity_class_shares_need_karpenter() -> None:
    pools = [poc_document()["node_pools"][0], {"name": "l4", "instance_families": ["g6"], "gpu_limit": 2}]
    with pytest.raises(ConfigError) as caught:
        make_tier(
            {"node_pools": pools},
            model_override(shares=[{"node_pool": "l40s"}, {"capacity_class": "l4"}]),
        )
    assert [str(i) for i in caught.value.issues] == [
        "models[0].shares[1].capacity_class: needs karpenter provisioning (classes label Karpenter "
        "pools and reserved node groups; Auto Mode pools are chosen by node_pool), got 'l4'"
    ]
