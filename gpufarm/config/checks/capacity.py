"""Checks of the GPU capacity: node pools, node groups, and whether the models fit them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from gpufarm.config.checks.common import _quoted, _repeats, _unique_ids
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import (
    AmiFamily,
    CapacityType,
    ModelConfig,
    NodeGroupConfig,
    NodePoolConfig,
    PoolPurpose,
    Provisioning,
    ReservationKind,
    TierConfig,
)
from gpufarm.core.hybrid import on_prem_class
from gpufarm.core.instances import GPU_FAMILIES, family_of, gpus_in, host_of
from gpufarm.core.placement import placement_of
from gpufarm.core.pools import pods_of, pool_instance_types
from gpufarm.core.registries import EKS_REGISTRY_ACCOUNTS

AUTO_MODE_MAX_EXPIRE_HOURS = 504
"""EKS Auto Mode replaces nodes after 21 days at the latest."""


def _pool(cfg: TierConfig, i: int, pool: NodePoolConfig) -> Iterator[ConfigIssue]:
    where = f"node_pools[{i}]"
    for j, family in enumerate(pool.instance_families):
        if family not in GPU_FAMILIES:
            yield ConfigIssue(
                path=f"{where}.instance_families[{j}]",
                message=f"must be a GPU instance family ({_quoted(sorted(GPU_FAMILIES))}), got {family!r}",
            )
    for j, itype in enumerate(pool.instance_types):
        if family_of(itype) not in pool.instance_families or gpus_in(itype) is None:
            yield ConfigIssue(
                path=f"{where}.instance_types[{j}]",
                message="must be a known GPU instance type of the pool's instance_families "
                f"({_quoted(pool.instance_families)}), got {itype!r}",
            )
    given = [c.value for c in pool.capacity_types]
    if CapacityType.SPOT in pool.capacity_types and pool.purpose is PoolPurpose.SERVING:
        yield ConfigIssue(
            path=f"{where}.capacity_types",
            message="may include 'spot' only when the pool's purpose is 'batch' (spot nodes are "
            f"reclaimed with two minutes' notice), got {given!r} on a 'serving' pool",
        )
    yield from _repeats(f"{where}.capacity_types", given, "must not list a capacity type twice")
    reserved = CapacityType.RESERVED in pool.capacity_types
    if cfg.cluster.provisioning is Provisioning.KARPENTER and reserved and not pool.reservation_ids:
        yield ConfigIssue(
            path=f"{where}.reservation_ids",
            message="must name the capacity reservations a pool with the 'reserved' capacity type "
            "may use (Karpenter selects reservations by ID), got []",
        )
    if pool.reservation_ids and not reserved:
        yield ConfigIssue(
            path=f"{where}.reservation_ids",
            message=f"apply only with the 'reserved' capacity type, got {pool.reservation_ids!r} on "
            f"a pool with {given!r}",
        )
    if pool.efa:
        yield ConfigIssue(
            path=f"{where}.efa",
            message="must be false: EFA interfaces are configured on reserved node groups "
            "(node_groups[].efa), not on Karpenter or Auto Mode pools, got true",
        )
    if cfg.cluster.provisioning is Provisioning.AUTO_MODE:
        if CapacityType.RESERVED in pool.capacity_types:
            yield ConfigIssue(
                path=f"{where}.capacity_types",
                message="must be 'on-demand' and/or 'spot' with auto-mode provisioning "
                f"(reserved capacity needs a custom NodeClass), got {given!r}",
            )
        hours = _hours(pool.expire_after)
        if hours is None or hours > AUTO_MODE_MAX_EXPIRE_HOURS:
            yield ConfigIssue(
                path=f"{where}.expire_after",
                message=f"must be at most {AUTO_MODE_MAX_EXPIRE_HOURS}h with auto-mode provisioning "
                f"(Auto Mode replaces nodes after 21 days), got {pool.expire_after!r}",
            )


def _node_groups(cfg: TierConfig) -> Iterator[ConfigIssue]:
    pools = {p.name for p in cfg.node_pools}
    yield from _repeats("node_groups", [g.name for g in cfg.node_groups], "names must be unique")
    for i, group in enumerate(cfg.node_groups):
        if group.name in pools:
            yield ConfigIssue(
                path=f"node_groups[{i}].name",
                message=f"must differ from every node pool's name (models name either), got {group.name!r}",
            )
    yield from _unique_ids("node_groups", [g.name for g in cfg.node_groups])
    region = cfg.environment.region
    if any(g.efa for g in cfg.node_groups) and region not in EKS_REGISTRY_ACCOUNTS:
        yield ConfigIssue(
            path="environment.region",
            message="must have a known Amazon EKS image registry when a node group sets efa (the "
            "EFA device plugin is pulled from the region's own registry; see "
            f"gpufarm/core/registries.py), got {region!r}",
        )
    if cfg.node_groups and cfg.cluster.provisioning is not Provisioning.KARPENTER:
        yield ConfigIssue(
            path="node_groups",
            message="need karpenter provisioning (managed node groups run on standard compute, "
            f"not Auto Mode), got {len(cfg.node_groups)} group(s) with "
            f"{cfg.cluster.provisioning.value!r}",
        )
    for i, group in enumerate(cfg.node_groups):
        where = f"node_groups[{i}]"
        if gpus_in(group.instance_type) is None:
            yield ConfigIssue(
                path=f"{where}.instance_type",
                message="must be a known GPU instance type (such as 'p5.48xlarge'), "
                f"got {group.instance_type!r}",
            )
        if group.availability_zone not in cfg.environment.availability_zones:
            yield ConfigIssue(
                path=f"{where}.availability_zone",
                message="must be one of the VPC's availability zones "
                f"({_quoted(cfg.environment.availability_zones)}), got {group.availability_zone!r}",
            )
        capacity = group.capacity
        ids = capacity.reservation_ids
        if capacity.kind is ReservationKind.CREATE:
            if ids:
                yield ConfigIssue(
                    path=f"{where}.capacity.reservation_ids",
                    message=f"must be empty when capacity.kind is 'create' (gpufarm creates the "
                    f"reservation), got {ids!r}",
                )
            count = capacity.instance_count or group.nodes
            if count < group.nodes:
                yield ConfigIssue(
                    path=f"{where}.capacity.instance_count",
                    message=f"must be at least nodes ({group.nodes}): every node runs in the "
                    f"reservation, got {count}",
                )
        else:
            if capacity.instance_count is not None:
                yield ConfigIssue(
                    path=f"{where}.capacity.instance_count",
                    message=f"applies only when capacity.kind is 'create', got {capacity.instance_count} "
                    f"with {capacity.kind.value!r}",
                )
            if capacity.kind is ReservationKind.ODCR and not ids:
                yield ConfigIssue(
                    path=f"{where}.capacity.reservation_ids",
                    message="must name at least one reservation when capacity.kind is 'odcr', got []",
                )
            if capacity.kind is ReservationKind.CAPACITY_BLOCK and len(ids) != 1:
                yield ConfigIssue(
                    path=f"{where}.capacity.reservation_ids",
                    message="must name exactly one Capacity Block when capacity.kind is "
                    f"'capacity-block', got {ids!r}",
                )


def _hours(duration: str) -> float | None:
    """A Kubernetes-style duration in hours; None for 'Never'."""
    if duration == "Never":
        return None
    total, number = 0.0, ""
    for ch in duration:
        if ch.isdigit():
            number += ch
        else:
            total += int(number) * {"h": 1.0, "m": 1 / 60, "s": 1 / 3600}[ch]
            number = ""
    return total


def _pools(cfg: TierConfig) -> Iterator[ConfigIssue]:
    yield from _repeats("node_pools", [p.name for p in cfg.node_pools], "pool names must be unique")
    yield from _unique_ids("node_pools", [p.name for p in cfg.node_pools])
    for i, pool in enumerate(cfg.node_pools):
        yield from _pool(cfg, i, pool)


def _pool_max_gpus(pool: NodePoolConfig) -> int:
    """GPUs on the largest instance the pool may launch (0 if none is known)."""
    if pool.instance_types:
        return max((gpus_in(t) or 0) for t in pool.instance_types)
    return max((GPU_FAMILIES[f].max_gpus for f in pool.instance_families if f in GPU_FAMILIES), default=0)


def _gpus_per_instance(target: NodePoolConfig | NodeGroupConfig) -> int:
    if isinstance(target, NodeGroupConfig):
        return gpus_in(target.instance_type) or 0
    return _pool_max_gpus(target)


def _fits_one_instance(
    targets: list[NodePoolConfig | NodeGroupConfig], path: str, gpus: int
) -> Iterator[ConfigIssue]:
    """An issue for the first target whose instances hold fewer GPUs than one pod of `gpus` needs."""
    for target in targets:
        most = _gpus_per_instance(target)
        if gpus > most > 0:
            kind = "node group" if isinstance(target, NodeGroupConfig) else "pool"
            yield ConfigIssue(
                path=path,
                message=f"must fit on one instance of {kind} {target.name!r} "
                f"(at most {most} GPU(s) per instance), got {gpus}",
            )
            return


def _demand(model: ModelConfig) -> int:
    """GPUs a model may hold at once: per node x nodes per replica x replicas."""
    return sum(pods.gpus_at(peak=True) for pods in pods_of(model))


def _placements(cfg: TierConfig) -> list[tuple[str, ModelConfig]]:
    """(path, model or share view) for each model without shares and each share with one placement."""
    out: list[tuple[str, ModelConfig]] = []
    for i, model in enumerate(cfg.models):
        if not model.shares:
            out.append((f"models[{i}]", model))
            continue
        for j, share in enumerate(model.shares):
            if (share.node_pool is None) != (share.capacity_class is None):
                out.append((f"models[{i}].shares[{j}]", model.as_share(share)))
    return out


def _capacity_demand(cfg: TierConfig) -> Iterator[ConfigIssue]:
    used: Counter[str] = Counter()
    by_class: Counter[str] = Counter()
    placements = _placements(cfg)
    for _, model in placements:
        if model.capacity_class is not None:
            by_class[model.capacity_class] += _demand(model)
        else:
            used[model.node_pool or cfg.node_pools[0].name] += _demand(model)
    for i, pool in enumerate(cfg.node_pools):
        if used[pool.name] > pool.gpu_limit:
            yield ConfigIssue(
                path=f"node_pools[{i}].gpu_limit",
                message=f"must cover the GPUs its models request ({used[pool.name]} = sum of "
                f"gpus x replicas, max_replicas when autoscaled), got {pool.gpu_limit}",
            )
    for i, group in enumerate(cfg.node_groups):
        have = group.nodes * (gpus_in(group.instance_type) or 0)
        if used[group.name] > have > 0:
            yield ConfigIssue(
                path=f"node_groups[{i}].nodes",
                message=f"must hold the GPUs its models request ({used[group.name]} GPUs; "
                f"{group.nodes} x {group.instance_type} hold {have}), got {group.nodes}",
            )
    classes = cfg.capacity_classes()
    for where, model in placements:
        name = model.capacity_class
        if name is None or name not in classes or by_class[name] == 0:
            continue
        if any(isinstance(t, NodeGroupConfig) and gpus_in(t.instance_type) is None for t in classes[name]):
            continue  # an unknown instance type is reported on its node group
        have = sum(
            t.nodes * (gpus_in(t.instance_type) or 0) if isinstance(t, NodeGroupConfig) else t.gpu_limit
            for t in classes[name]
        )
        if name == on_prem_class(cfg):
            have += cfg.hybrid_nodes.gpu_count  # the hybrid nodes fill first, the class's pools burst
        if by_class[name] > have:
            yield ConfigIssue(
                path=f"{where}.capacity_class",
                message=f"must have room for its models ({by_class[name]} GPUs requested from "
                f"class {name!r}, whose node groups and pool limits hold {have}), got {name!r}",
            )
        by_class[name] = 0  # reported once per class


_AL2023_RELEASE = re.compile(r"^v\d{8}$")


_BOTTLEROCKET_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")


def _pool_min_gpus(pool: NodePoolConfig) -> tuple[str, int] | None:
    """The smallest instance (by GPUs) the pool may launch, with its GPU count; None if none is known."""
    candidates = _pool_candidates(pool)
    if not candidates:
        return None
    smallest = min(candidates, key=lambda t: gpus_in(t) or 0)
    return smallest, gpus_in(smallest) or 0


def _pool_deployable(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for i, pool in enumerate(cfg.node_pools):
        where = f"node_pools[{i}]"
        smallest = _pool_min_gpus(pool)
        # Karpenter caps a NodePool's total resources at spec.limits
        # (https://karpenter.sh/docs/concepts/nodepools/#speclimits): a pool whose limit is below
        # one node's GPUs can never launch that node, while `gpufarm cost` still prices it.
        if smallest is not None and pool.gpu_limit < smallest[1]:
            itype, gpus = smallest
            yield ConfigIssue(
                path=f"{where}.gpu_limit",
                message=f"must be at least the GPUs of the smallest instance the pool may launch "
                f"({itype}: {gpus}), else no node ever starts, got {pool.gpu_limit}",
            )
        # Karpenter's alias takes the AMI family's own release format ("al2023@v20240625",
        # "bottlerocket@v1.10.0": the EC2NodeClass CRD's description of amiSelectorTerms.alias,
        # karpenter.k8s.aws_ec2nodeclasses.yaml); one family's release is no release of the other.
        version = pool.ami_version
        if pool.ami_family is AmiFamily.AL2023 and _BOTTLEROCKET_RELEASE.match(version):
            yield ConfigIssue(
                path=f"{where}.ami_version",
                message="must be 'latest' or an AL2023 release such as 'v20251120' with ami_family "
                f"'al2023' (a version such as '1.50.0' is Bottlerocket's), got {version!r}",
            )
        elif pool.ami_family is AmiFamily.BOTTLEROCKET and _AL2023_RELEASE.match(version):
            yield ConfigIssue(
                path=f"{where}.ami_version",
                message="must be 'latest' or a Bottlerocket release such as '1.50.0' with ami_family "
                f"'bottlerocket' (a version such as 'v20251120' is AL2023's), got {version!r}",
            )


def _pool_candidates(pool: NodePoolConfig) -> list[str]:
    """Every known instance type the pool may launch."""
    return [t for t in pool_instance_types(pool) if gpus_in(t) is not None]


def _pods_fit_hosts(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """A model's pod must fit the CPU and memory of some instance its pools and node groups may launch.

    Checked only when the catalog knows the host of every candidate with enough GPUs
    (:data:`gpufarm.core.instances.HOSTS`): an unknown one might hold the pod. The host's
    full size is an upper bound (the kubelet reserves part of it), so only pods that fit no
    instance at all are refused.
    """
    for where, model in _placements(cfg):
        candidates = [
            t
            for target in placement_of(cfg, model)
            for t in (
                [target.instance_type] if isinstance(target, NodeGroupConfig) else _pool_candidates(target)
            )
            if (gpus_in(t) or 0) >= model.gpus
        ]
        hosts = [spec for t in candidates if (spec := host_of(t)) is not None]
        if not candidates or len(hosts) != len(candidates):
            continue
        if any(model.cpu <= h.vcpus and model.memory_gib <= h.memory_gib for h in hosts):
            continue
        cpus, memory = max(h.vcpus for h in hosts), max(h.memory_gib for h in hosts)
        field, value = ("cpu", model.cpu) if model.cpu > cpus else ("memory_gib", model.memory_gib)
        yield ConfigIssue(
            path=f"{where}.{field}",
            message=f"must fit one instance the model may land on with {model.gpus} GPU(s) "
            f"(at most {cpus} vCPUs and {memory} GiB; the pod asks {model.cpu:g} CPU and "
            f"{model.memory_gib} GiB), got {value:g}",
        )
