"""Checks of `cluster.provisioning: ec2`: what GPU Auto Scaling groups behind the load balancer can
serve, and the settings that only mean something on EKS (docs/decisions/0065-ec2-provisioning.md).

Kubernetes-only settings that have defaults (`cluster.*` but `provisioning`, `karpenter`, the KEDA
`autoscaling` section, a pool's Karpenter disruption settings and AMI alias) are not read in this
mode; docs/tiers.md lists them. The ones below change what a user expects to run, so setting them
is refused instead of ignored.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from gpufarm.config.checks.common import _instance_architecture, _quoted
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import LoadBalancerKind, ModelStoreKind, Provisioning, TierConfig
from gpufarm.core.fleets import fleets, models_by_pool

EC2 = "with ec2 provisioning"

KEDA_ONLY_FIELDS = ("polling_interval_seconds", "cooldown_seconds", "scale_down_stabilization_seconds")
"""`models[].autoscaling` fields that configure KEDA's ScaledObject, which an Auto Scaling group has
no counterpart for (its target tracking policies keep their own cooldowns)."""


def _ec2(cfg: TierConfig) -> Iterator[ConfigIssue]:
    if cfg.cluster.provisioning is not Provisioning.EC2:
        return
    yield from _ec2_models(cfg)
    yield from _ec2_pools(cfg)
    yield from _ec2_tier(cfg)


def _ec2_models(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for i, model in enumerate(cfg.models):
        where = f"models[{i}]"
        if model.pipeline_parallel > 1:
            yield ConfigIssue(
                path=f"{where}.pipeline_parallel",
                message=f"must be 1 {EC2} (an instance runs one engine; multi-node replicas run as "
                f"LeaderWorkerSets on EKS with karpenter provisioning), got {model.pipeline_parallel}",
            )
        if model.prefill_decode is not None:
            yield ConfigIssue(
                path=f"{where}.prefill_decode",
                message=f"must be empty {EC2} (prefill/decode needs the llm-d router in front of "
                "separate prefill and decode pods, which runs on EKS), got a prefill_decode section",
            )
        if model.kv_cache_routing:
            yield ConfigIssue(
                path=f"{where}.kv_cache_routing",
                message=f"must be false {EC2} (the KV-cache-aware endpoint picker runs in the cluster; "
                "the load balancer picks an instance by least outstanding requests), got true",
            )
        if model.shares:
            yield ConfigIssue(
                path=f"{where}.shares",
                message=f"must be empty {EC2} (a model is one Auto Scaling group behind one target "
                f"group; put it on one node_pool), got {len(model.shares)} shares",
            )
        scaling = model.autoscaling
        if scaling is None:
            continue
        if scaling.min_replicas == 0:
            yield ConfigIssue(
                path=f"{where}.autoscaling.min_replicas",
                message=f"must be at least 1 {EC2} (scale to zero is KEDA's; a group with no instance "
                "has no target for ALBRequestCountPerTarget to count), got 0",
            )
        if scaling.kv_cache_target is not None:
            yield ConfigIssue(
                path=f"{where}.autoscaling.kv_cache_target",
                message=f"must be empty {EC2} (the group scales on queue depth and request count; "
                f"KV-cache usage is a KEDA trigger), got {scaling.kv_cache_target:g}",
            )
        for field in KEDA_ONLY_FIELDS:
            if field in scaling.model_fields_set:
                yield ConfigIssue(
                    path=f"{where}.autoscaling.{field}",
                    message=f"must not be set {EC2} (it configures KEDA, which this mode does not run; "
                    f"the target tracking policies keep their own cooldowns), got {getattr(scaling, field)}",
                )
        if scaling.queue_target is None and cfg.ec2.requests_per_target is None:
            yield ConfigIssue(
                path=f"{where}.autoscaling.queue_target",
                message=f"must be set {EC2} unless ec2.requests_per_target is (the group needs a target "
                "tracking policy to scale between min_replicas and max_replicas), got neither",
            )


def _ec2_pools(cfg: TierConfig) -> Iterator[ConfigIssue]:
    placed = models_by_pool(cfg)
    for i, pool in enumerate(cfg.node_pools):
        where = f"node_pools[{i}]"
        models = placed.get(pool.name, [])
        if len(models) != 1:
            yield ConfigIssue(
                path=where,
                message=f"must serve exactly one model {EC2} (the pool is one Auto Scaling group whose "
                f"instances run one engine each), got {_quoted(models) if models else 'none'}",
            )
        reserved = "reserved" in {c.value for c in pool.capacity_types}
        if reserved and len(pool.reservation_ids) != 1:
            yield ConfigIssue(
                path=f"{where}.reservation_ids",
                message=f"must name exactly one capacity reservation {EC2} (the launch template targets "
                f"one reservation ID), got {len(pool.reservation_ids)}",
            )
        spot = "spot" in {c.value for c in pool.capacity_types}
        if spot and cfg.ec2.warm_pool.enabled:
            # PutWarmPool: "This operation cannot be called on an Auto Scaling group that has a mixed
            # instances policy or a launch template or launch configuration that requests Spot
            # Instances." https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_PutWarmPool.html
            yield ConfigIssue(
                path=f"{where}.capacity_types",
                message="must not include 'spot' while ec2.warm_pool.enabled is true (the Auto Scaling "
                "API refuses a warm pool on a group with a mixed instances policy or spot instances), "
                f"got {[c.value for c in pool.capacity_types]!r}",
            )
    for fleet in fleets(cfg):
        if not fleet.instance_types():
            i = next(n for n, p in enumerate(cfg.node_pools) if p.name == fleet.name)
            model = fleet.model
            offered = fleet.pool.instance_types or fleet.pool.instance_families
            yield ConfigIssue(
                path=f"node_pools[{i}].instance_families",
                message=f"must offer an instance type with exactly {model.gpus} GPU(s) and at least "
                f"{model.cpu:g} vCPUs and {model.memory_gib} GiB {EC2} (an instance runs one replica of "
                f"{model.name!r} on all its GPUs), got {_quoted(offered)}",
            )


def _ec2_tier(cfg: TierConfig) -> Iterator[ConfigIssue]:
    if cfg.ingress.kind is not LoadBalancerKind.ALB:
        yield ConfigIssue(
            path="ingress.kind",
            message=f"must be 'alb' {EC2} (the groups register instances in the ALB's target groups "
            f"and the gateway calls the models' routes on it), got {cfg.ingress.kind.value!r}",
        )
    if cfg.ingress.inspection.enabled:
        yield ConfigIssue(
            path="ingress.inspection.enabled",
            message=f"must be false {EC2} (Gateway Load Balancer inspection is built for the EKS "
            "tiers only), got true",
        )
    if cfg.model_store.kind is not ModelStoreKind.S3_MOUNTPOINT:
        yield ConfigIssue(
            path="model_store.kind",
            message=f"must be 's3-mountpoint' {EC2} (each instance syncs its model's s3:// weights to "
            f"its own volume before the engine starts), got {cfg.model_store.kind.value!r}",
        )
    if cfg.observability.prometheus.enabled:
        yield ConfigIssue(
            path="observability.prometheus.enabled",
            message=f"must be false {EC2} (the managed Prometheus scraper reads an EKS cluster; the "
            "CloudWatch agent on each instance publishes the engine's queue metric), got true",
        )
    if cfg.serving.allowed_client_namespaces:
        yield ConfigIssue(
            path="serving.allowed_client_namespaces",
            message=f"must be empty {EC2} (there are no namespaces or network policies; clients reach "
            f"the load balancer), got {_quoted(cfg.serving.allowed_client_namespaces)}",
        )
    steps = cfg.ec2.refresh.checkpoint_percentages
    # RefreshPreferences, CheckpointPercentages: "Values must be unique and in ascending order. To
    # replace all instances, the final number must be 100."
    # https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_RefreshPreferences.html
    if any(b <= a for a, b in itertools.pairwise(steps)) or steps[-1] != 100 or steps[0] < 1:
        yield ConfigIssue(
            path="ec2.refresh.checkpoint_percentages",
            message="must rise strictly from at least 1 and end at 100 (the Auto Scaling API takes "
            f"unique ascending percentages, the last 100 to replace every instance), got {steps!r}",
        )
    gateway = cfg.ec2.gateway
    if _instance_architecture(gateway.instance_type) != "x86_64":
        yield ConfigIssue(
            path="ec2.gateway.instance_type",
            message="must be an x86_64 EC2 instance type such as 'm7i.xlarge' (the gateway image and "
            f"the instances' Amazon Linux 2023 AMI are x86_64), got {gateway.instance_type!r}",
        )
    if gateway.min_instances > gateway.max_instances:
        yield ConfigIssue(
            path="ec2.gateway.min_instances",
            message=f"must be at most ec2.gateway.max_instances ({gateway.max_instances}), "
            f"got {gateway.min_instances}",
        )
