"""`cluster.provisioning: ec2`: the ec2-poc preset, the fleets it describes, and every refused input."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError
from gpufarm.core.fleets import fleets

from .factories import ec2_document, make_ec2
from .factories import ec2_model as model
from .factories import ec2_pool as pool
from .factories import ec2_scaling as scaling


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_ec2(*parts)
    return [str(issue) for issue in caught.value.issues]


# --------------------------------------------------------------------------- the preset's fleet


def test_the_preset_is_one_g6e_group_serving_its_model_between_its_autoscaling_bounds() -> None:
    tier = make_ec2()
    (fleet,) = fleets(tier)
    assert (fleet.name, fleet.model.name) == ("l40s", "qwen3-8b")
    assert (fleet.min_instances, fleet.max_instances) == (1, 2)
    # On-demand only: no spot above a base, so every instance is on-demand (and a warm pool may exist).
    assert not fleet.spot and fleet.on_demand_base == fleet.max_instances


def test_a_fleet_launches_only_types_with_the_models_gpus_that_fit_its_cpu_and_memory() -> None:
    (fleet,) = fleets(make_ec2())
    types = fleet.instance_types()
    # g6e.xlarge has 4 vCPUs, fewer than the model's 6; the 4- and 8-GPU sizes hold more GPUs
    # than one replica uses.
    assert types[0] == "g6e.2xlarge"
    assert "g6e.xlarge" not in types and "g6e.12xlarge" not in types and "g6e.48xlarge" not in types


def test_a_spot_pool_keeps_the_minimum_on_demand_unless_told_otherwise() -> None:
    spot = pool(capacity_types=["on-demand", "spot"], purpose="batch")
    no_warm = {"ec2": {"warm_pool": {"enabled": False}}}
    (fleet,) = fleets(make_ec2(spot, no_warm, model(critical=False)))
    assert fleet.spot and fleet.on_demand_base == 1
    (fleet,) = fleets(
        make_ec2(spot, no_warm, model(critical=False), {"ec2": {"on_demand_base_instances": 0}})
    )
    assert fleet.on_demand_base == 0


# --------------------------------------------------------------------------- refused inputs

INVALID: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "multi-node",
        [model(pipeline_parallel=2, autoscaling=None)],
        "models[0].pipeline_parallel: must be 1 with ec2 provisioning (an instance runs one engine; "
        "multi-node replicas run as LeaderWorkerSets on EKS with karpenter provisioning), got 2",
    ),
    (
        "prefill/decode",
        [model(prefill_decode={"prefill_replicas": 1})],
        "models[0].prefill_decode: must be empty with ec2 provisioning (prefill/decode needs the llm-d "
        "router in front of separate prefill and decode pods, which runs on EKS), got a prefill_decode "
        "section",
    ),
    (
        "kv-cache routing",
        [model(kv_cache_routing=True)],
        "models[0].kv_cache_routing: must be false with ec2 provisioning (the KV-cache-aware endpoint "
        "picker runs in the cluster; the load balancer picks an instance by least outstanding "
        "requests), got true",
    ),
    (
        "scale to zero",
        [scaling(min_replicas=0)],
        "models[0].autoscaling.min_replicas: must be at least 1 with ec2 provisioning (scale to zero is "
        "KEDA's; a group with no instance has no target for ALBRequestCountPerTarget to count), got 0",
    ),
    (
        "kv-cache target",
        [scaling(kv_cache_target=0.8)],
        "models[0].autoscaling.kv_cache_target: must be empty with ec2 provisioning (the group scales on "
        "queue depth and request count; KV-cache usage is a KEDA trigger), got 0.8",
    ),
    (
        "KEDA polling interval",
        [scaling(polling_interval_seconds=30)],
        "models[0].autoscaling.polling_interval_seconds: must not be set with ec2 provisioning (it "
        "configures KEDA, which this mode does not run; the target tracking policies keep their own "
        "cooldowns), got 30",
    ),
    (
        "no scaling signal",
        [scaling(queue_target=None), {"ec2": {"requests_per_target": None}}],
        "models[0].autoscaling.queue_target: must be set with ec2 provisioning unless "
        "ec2.requests_per_target is (the group needs a target tracking policy to scale between "
        "min_replicas and max_replicas), got neither",
    ),
    (
        "warm pool with spot",
        [pool(capacity_types=["on-demand", "spot"], purpose="batch"), model(critical=False)],
        "node_pools[0].capacity_types: must not include 'spot' while ec2.warm_pool.enabled is true "
        "(the Auto Scaling API refuses a warm pool on a group with a mixed instances policy or spot "
        "instances), got ['on-demand', 'spot']",
    ),
    (
        "reserved without one reservation",
        [pool(capacity_types=["reserved"], reservation_ids=["cr-0123456789abcdef0", "cr-0123456789abcdef1"])],
        "node_pools[0].reservation_ids: must name exactly one capacity reservation with ec2 "
        "provisioning (the launch template targets one reservation ID), got 2",
    ),
    (
        "no fitting instance type",
        [pool(instance_types=["g6e.12xlarge"])],
        "node_pools[0].instance_families: must offer an instance type with exactly 1 GPU(s) and at "
        "least 6 vCPUs and 48 GiB with ec2 provisioning (an instance runs one replica of 'qwen3-8b' on "
        "all its GPUs), got 'g6e.12xlarge'",
    ),
    (
        "a pool without a model",
        [{"node_pools": [ec2_document()["node_pools"][0], {"name": "spare", "instance_families": ["g6e"]}]}],
        "node_pools[1]: must serve exactly one model with ec2 provisioning (the pool is one Auto Scaling "
        "group whose instances run one engine each), got none",
    ),
    (
        "NLB",
        [{"ingress": {"kind": "nlb"}}],
        "ingress.kind: must be 'alb' with ec2 provisioning (the groups register instances in the ALB's "
        "target groups and the gateway calls the models' routes on it), got 'nlb'",
    ),
    (
        "FSx",
        [{"model_store": {"kind": "fsx-lustre"}}],
        "model_store.kind: must be 's3-mountpoint' with ec2 provisioning (each instance syncs its "
        "model's s3:// weights to its own volume before the engine starts), got 'fsx-lustre'",
    ),
    (
        "managed Prometheus",
        [{"observability": {"prometheus": {"enabled": True}}}],
        "observability.prometheus.enabled: must be false with ec2 provisioning (the managed Prometheus "
        "scraper reads an EKS cluster; the CloudWatch agent on each instance publishes the engine's "
        "queue metric), got true",
    ),
    (
        "network policy namespaces",
        [{"serving": {"allowed_client_namespaces": ["apps"]}}],
        "serving.allowed_client_namespaces: must be empty with ec2 provisioning (there are no "
        "namespaces or network policies; clients reach the load balancer), got 'apps'",
    ),
    (
        "checkpoints not rising",
        [{"ec2": {"refresh": {"checkpoint_percentages": [50, 50, 100]}}}],
        "ec2.refresh.checkpoint_percentages: must rise strictly from at least 1 and end at 100 (the "
        "Auto Scaling API takes unique ascending percentages, the last 100 to replace every "
        "instance), got [50, 50, 100]",
    ),
    (
        "checkpoints short of 100",
        [{"ec2": {"refresh": {"checkpoint_percentages": [25, 50]}}}],
        "ec2.refresh.checkpoint_percentages: must rise strictly from at least 1 and end at 100 (the "
        "Auto Scaling API takes unique ascending percentages, the last 100 to replace every "
        "instance), got [25, 50]",
    ),
    (
        "ARM gateway",
        [{"ec2": {"gateway": {"instance_type": "m7g.large"}}}],
        "ec2.gateway.instance_type: must be an x86_64 EC2 instance type such as 'm7i.xlarge' (the "
        "gateway image and the instances' Amazon Linux 2023 AMI are x86_64), got 'm7g.large'",
    ),
    (
        "gateway sizes",
        [{"ec2": {"gateway": {"min_instances": 5, "max_instances": 4}}}],
        "ec2.gateway.min_instances: must be at most ec2.gateway.max_instances (4), got 5",
    ),
]


@pytest.mark.parametrize(
    ("parts", "message"), [(p, m) for _, p, m in INVALID], ids=[i for i, _, _ in INVALID]
)
def test_refused(parts: list[dict[str, Any]], message: str) -> None:
    assert message in issues_of(*parts)


def test_a_refused_multi_node_model_gets_the_ec2_reason_only() -> None:
    found = issues_of(model(pipeline_parallel=2, autoscaling=None))
    assert [m for m in found if m.startswith("models[0].pipeline_parallel")] == [INVALID[0][2]]


def test_the_ec2_checks_leave_eks_tiers_alone() -> None:
    # The same settings on the EKS poc are judged by the EKS rules only: a second pool without a
    # model is fine there.
    from tests.unit.factories import make_tier, poc_document

    pools = [poc_document()["node_pools"][0], {"name": "spare", "instance_families": ["g6e"]}]
    assert len(make_tier({"node_pools": pools}).node_pools) == 2
