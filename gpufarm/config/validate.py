"""Rules that tie several fields of a tier together.

Each narrow validator yields :class:`ConfigIssue` objects; :func:`validate_tier` runs them all so
the user sees every problem in one go.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterator

from gpufarm.config.bedrock import (
    GLOBAL_PREFIX,
    PROFILE_GEOGRAPHIES,
    call_region,
    profile_callable_from,
    profile_prefix,
)
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.image_pins import chart_version_issues
from gpufarm.config.model import (
    APPLIANCE_ROOT_DEVICE,
    BEDROCK_MODEL_ID,
    FSX_THROUGHPUT_PER_TIB,
    HF_REPO_ID,
    MAX_SHARES,
    REGION,
    S3_URI,
    TENSOR_PARALLEL_SIZES,
    AmiFamily,
    BedrockTargetConfig,
    CapacityType,
    EndpointAccess,
    InterfaceEndpoint,
    KvTransport,
    LoadBalancerKind,
    LoadBalancerScheme,
    ModelAutoscalingConfig,
    ModelConfig,
    ModelStoreKind,
    NodeGroupConfig,
    NodePoolConfig,
    PoolPurpose,
    Provisioning,
    ReservationKind,
    TierConfig,
)
from gpufarm.config.placeholders import open_choice_issues
from gpufarm.config.sizing import fsx_required_gib, is_valid_fsx_capacity
from gpufarm.config.vllm_flags import (
    applies_to,
    flag_args,
    is_known_flag,
    long_form,
    nearest_flag,
    vllm_flags_version,
)
from gpufarm.core.instances import GPU_FAMILIES, family_of, gpus_in, host_of, is_accelerated
from gpufarm.core.names import BEDROCK_SUFFIX, leader_service_name, router_name, workload_name
from gpufarm.core.placement import placement_of
from gpufarm.core.pools import pods_of, pool_instance_types
from gpufarm.core.prefill_decode import DECODE_ENGINE_PORT, NIXL_SIDE_CHANNEL_PORT, PD_RESERVED_VLLM_FLAGS
from gpufarm.core.registries import EKS_REGISTRY_ACCOUNTS
from gpufarm.core.s3 import split_s3_uri

KUBECTL_VERSION = "1.35"
"""kubectl minor version of the kubectl provider (package aws-cdk.lambda-layer-kubectl-v35)."""
SUPPORTED_KUBERNETES_VERSIONS = ("1.34", "1.35", "1.36")
"""Cluster versions the bundled kubectl (1.35) can manage: its minor version and one either side
(docs/decisions/0006-kubectl-version-skew.md)."""

AUTO_MODE_MAX_EXPIRE_HOURS = 504
"""EKS Auto Mode replaces nodes after 21 days at the latest."""

RESERVED_VLLM_FLAGS = (
    "--model",
    "--port",
    "--host",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--max-model-len",
    "--gpu-memory-utilization",
    "--served-model-name",
    "--dtype",
    "--download-dir",
    "--revision",
    "--quantization",
    "--max-num-seqs",
)
"""Flags gpufarm derives from the model config (`gpufarm.k8s.serving.vllm_args`, and
`--pipeline-parallel-size` from `pipeline_parallel`); setting them in `extra_args` would
contradict it. Matched in every spelling vLLM reads: `_` for `-`, `--flag=value`, and the short
aliases of :data:`gpufarm.config.vllm_flags.SHORT_FLAGS` (`-tp`, `-pp`, `-q`)."""

MULTI_NODE_RESERVED_VLLM_FLAGS = ("--distributed-executor-backend",)
"""Flags gpufarm sets on a multi-node model (`pipeline_parallel` > 1): Ray runs its replicas."""

_Validator = Callable[[TierConfig], Iterator[ConfigIssue]]


def _quoted(values: list[str] | tuple[str, ...]) -> str:
    return ", ".join(repr(v) for v in values)


def _repeats(path: str, values: list[str], rule: str) -> Iterator[ConfigIssue]:
    """One issue per value listed more than once."""
    for value, count in Counter(values).items():
        if count > 1:
            yield ConfigIssue(path=path, message=f"{rule}, got {value!r} {count} times")


def _environment(cfg: TierConfig) -> Iterator[ConfigIssue]:
    env = cfg.environment
    for i, az in enumerate(env.availability_zones):
        suffix = az[len(env.region) :]
        if not az.startswith(env.region) or len(suffix) != 1 or not suffix.isalpha():
            yield ConfigIssue(
                path=f"environment.availability_zones[{i}]",
                message=f"must be an availability zone of region {env.region!r} "
                f"(such as '{env.region}a'), got {az!r}",
            )
    yield from _repeats(
        "environment.availability_zones", env.availability_zones, "must not repeat an availability zone"
    )


def _network(cfg: TierConfig) -> Iterator[ConfigIssue]:
    net = cfg.network
    azs = len(cfg.environment.availability_zones)
    if net.nat_gateways > azs:
        yield ConfigIssue(
            path="network.nat_gateways",
            message=f"must be at most the number of availability zones ({azs}), got {net.nat_gateways}",
        )
    if net.nat_gateways == 0:
        yield ConfigIssue(
            path="network.nat_gateways",
            message="must be at least 1 for a tier: GPU nodes pull the vLLM image and Hugging Face "
            "weights through NAT, and Auto Mode nodes reach AWS APIs that have no endpoint here, got 0",
        )
    prefix = ipaddress.IPv4Network(net.cidr).prefixlen
    if not 16 <= prefix <= 20:
        yield ConfigIssue(
            path="network.cidr",
            message=f"must be a /16 to /20 block (room for a private subnet per AZ), got {net.cidr!r}",
        )
    yield from _repeats(
        "network.interface_endpoints",
        [e.value for e in net.interface_endpoints],
        "must not list an endpoint twice",
    )


def _cluster(cfg: TierConfig) -> Iterator[ConfigIssue]:
    cl = cfg.cluster
    if cl.kubernetes_version not in SUPPORTED_KUBERNETES_VERSIONS:
        yield ConfigIssue(
            path="cluster.kubernetes_version",
            message=f"must be one of {_quoted(SUPPORTED_KUBERNETES_VERSIONS)}, got {cl.kubernetes_version!r}",
        )
    if cl.endpoint_access is EndpointAccess.PUBLIC_AND_PRIVATE and not cl.public_access_cidrs:
        yield ConfigIssue(
            path="cluster.public_access_cidrs",
            message="must list at least one CIDR when endpoint_access is 'public_and_private' "
            "(the public endpoint is never open to everyone by default), got []",
        )
    if cl.provisioning is Provisioning.AUTO_MODE and not cl.auto_mode_builtin_pools:
        yield ConfigIssue(
            path="cluster.auto_mode_builtin_pools",
            message="must enable at least one of 'system', 'general-purpose' with auto-mode "
            "provisioning (GPU pools use the 'default' NodeClass, which exists only while a "
            "built-in pool is enabled), got []",
        )
    if cl.endpoint_access is EndpointAccess.PRIVATE and cl.public_access_cidrs:
        yield ConfigIssue(
            path="cluster.public_access_cidrs",
            message=f"must be empty when endpoint_access is 'private', got {cl.public_access_cidrs!r}",
        )
    nodes = cl.system_nodes
    if not nodes.min_size <= nodes.desired_size <= nodes.max_size:
        yield ConfigIssue(
            path="cluster.system_nodes",
            message="must satisfy min_size <= desired_size <= max_size, got "
            f"{nodes.min_size} <= {nodes.desired_size} <= {nodes.max_size}",
        )
    yield from _repeats(
        "cluster.core_addons", [a.value for a in cl.core_addons], "must not list an add-on twice"
    )
    if cl.provisioning is Provisioning.KARPENTER and cfg.karpenter.replicas > nodes.min_size:
        yield ConfigIssue(
            path="karpenter.replicas",
            message="must be at most cluster.system_nodes.min_size "
            f"({nodes.min_size}; each controller replica needs its own system node), "
            f"got {cfg.karpenter.replicas}",
        )
    if cl.provisioning is Provisioning.KARPENTER:
        missing = {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"} - {
            a.value for a in cl.core_addons
        }
        if missing:
            yield ConfigIssue(
                path="cluster.core_addons",
                message="must include 'vpc-cni', 'coredns', 'kube-proxy' and 'eks-pod-identity-agent' "
                "with karpenter provisioning (pod networking, DNS and Pod Identity for the "
                f"controllers), missing {_quoted(sorted(missing))}",
            )


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


def _unique_ids(path: str, names: list[str]) -> Iterator[ConfigIssue]:
    """Names that differ only in '-' map to the same construct ID, so one would overwrite the other."""
    seen: dict[str, str] = {}
    for i, name in enumerate(names):
        key = name.replace("-", "")
        if key in seen and seen[key] != name:
            yield ConfigIssue(
                path=f"{path}[{i}].name",
                message=f"must differ from {seen[key]!r} by more than hyphens "
                f"(both map to the resource name {key!r}), got {name!r}",
            )
        seen.setdefault(key, name)


def _pool_max_gpus(pool: NodePoolConfig) -> int:
    """GPUs on the largest instance the pool may launch (0 if none is known)."""
    if pool.instance_types:
        return max((gpus_in(t) or 0) for t in pool.instance_types)
    return max((GPU_FAMILIES[f].max_gpus for f in pool.instance_families if f in GPU_FAMILIES), default=0)


def _models(cfg: TierConfig) -> Iterator[ConfigIssue]:
    yield from _repeats("models", [m.name for m in cfg.models], "name must be unique")
    yield from _repeats("models", [m.api_model_name for m in cfg.models], "served_model_name must be unique")
    yield from _unique_ids("models", [m.name for m in cfg.models])
    owner: dict[int, int] = {}
    for i, model in enumerate(cfg.models):
        first = owner.setdefault(model.rule_priority, i)
        if first != i and cfg.models[first].name != model.name:  # same name: reported above
            yield ConfigIssue(
                path=f"models[{i}].route_priority",
                message=f"must differ from that of models[{first}] ({cfg.models[first].name!r}); "
                f"both are {model.rule_priority}: set route_priority on one of them",
            )
    for i, model in enumerate(cfg.models):
        where = f"models[{i}]"
        if model.is_s3:
            if not S3_URI.match(model.weights):
                yield ConfigIssue(
                    path=f"{where}.weights",
                    message=f"must be an S3 URI such as 's3://bucket/prefix/', got {model.weights!r}",
                )
            for field in ("revision", "hf_token_secret"):
                if getattr(model, field) is not None:
                    yield ConfigIssue(
                        path=f"{where}.{field}",
                        message=f"applies only to Hugging Face weights, not {model.weights!r}",
                    )
        else:
            if not HF_REPO_ID.match(model.weights):
                yield ConfigIssue(
                    path=f"{where}.weights",
                    message="must be a Hugging Face repo id ('org/name') or an S3 URI "
                    f"('s3://bucket/prefix/'), got {model.weights!r}",
                )
        if model.gpus not in TENSOR_PARALLEL_SIZES:
            yield ConfigIssue(
                path=f"{where}.gpus",
                message=f"must be one of {', '.join(map(str, TENSOR_PARALLEL_SIZES))} "
                f"(the tensor-parallel size), got {model.gpus}",
            )
        if model.shares:
            yield from _model_shares(cfg, where, model)
        else:
            yield from _model_placement(cfg, where, model)
        yield from _model_autoscaling(cfg, where, model)
        yield from _reserved_flags(
            where, model, RESERVED_VLLM_FLAGS, "(gpufarm derives it from the model config)"
        )
        if model.pipeline_parallel > 1:
            yield from _reserved_flags(
                where,
                model,
                MULTI_NODE_RESERVED_VLLM_FLAGS,
                "on a multi-node model (gpufarm runs its replicas with Ray)",
            )
        yield from _unknown_flags(cfg, where, model)
    yield from _share_names(cfg)
    yield from _capacity_demand(cfg)


def _gpus_per_instance(target: NodePoolConfig | NodeGroupConfig) -> int:
    if isinstance(target, NodeGroupConfig):
        return gpus_in(target.instance_type) or 0
    return _pool_max_gpus(target)


def _reserved_flags(
    where: str, model: ModelConfig, flags: tuple[str, ...], why: str
) -> Iterator[ConfigIssue]:
    """An issue per `extra_args` entry that sets one of `flags` (as vLLM reads it: `--flag`,
    `--flag=value`, `--flag_name`; see :func:`gpufarm.config.vllm_flags.flag_args`)."""
    for found in flag_args(model.extra_args):
        flag = long_form(found.flag)
        if flag in flags:
            yield ConfigIssue(
                path=f"{where}.extra_args[{found.index}]",
                message=f"must not set {flag} {why}, got {found.arg!r}",
            )


def _unknown_flags(cfg: TierConfig, where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    """An issue per `extra_args` flag that `vllm serve` of the pinned release does not have.

    Only while `serving.vllm_image` runs that release (gpufarm/data/vllm_serve_flags.yaml): with
    another one the list does not apply.
    """
    if not applies_to(cfg.serving.vllm_image):
        return
    version = vllm_flags_version()
    for found in flag_args(model.extra_args):
        if is_known_flag(found.flag):
            continue
        near = nearest_flag(found.flag)
        hint = f" (nearest known flag: {near!r})" if near else ""
        yield ConfigIssue(
            path=f"{where}.extra_args[{found.index}]",
            message=f"must be a flag of vLLM {version}'s `vllm serve`: model {model.name!r} sets "
            f"{found.flag!r}, which that release does not have{hint}, got {found.arg!r}",
        )


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


def _model_placement(cfg: TierConfig, where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    if model.capacity_class is not None and model.node_pool is not None:
        yield ConfigIssue(
            path=f"{where}.capacity_class",
            message=f"must be empty when node_pool is set (one placement per model), got "
            f"{model.capacity_class!r} and node_pool {model.node_pool!r}",
        )
        return
    if model.capacity_class is not None and cfg.cluster.provisioning is not Provisioning.KARPENTER:
        yield ConfigIssue(
            path=f"{where}.capacity_class",
            message="needs karpenter provisioning (classes label Karpenter pools and reserved node "
            f"groups; Auto Mode pools are chosen by node_pool), got {model.capacity_class!r}",
        )
        return
    targets = placement_of(cfg, model)
    if not targets:
        if model.capacity_class is not None:
            yield ConfigIssue(
                path=f"{where}.capacity_class",
                message=f"must name a capacity class ({_quoted(list(cfg.capacity_classes()))}), "
                f"got {model.capacity_class!r}",
            )
        else:
            names = [g.name for g in cfg.node_groups] + [p.name for p in cfg.node_pools]
            yield ConfigIssue(
                path=f"{where}.node_pool",
                message=f"must name a node pool or node group ({_quoted(names)}), got {model.node_pool!r}",
            )
        return
    field = "capacity_class" if model.capacity_class is not None else "node_pool"
    if model.gpus in TENSOR_PARALLEL_SIZES:
        yield from _fits_one_instance(targets, f"{where}.gpus", model.gpus)
    spot = [t for t in targets if isinstance(t, NodePoolConfig) and CapacityType.SPOT in t.capacity_types]
    if model.critical and not model.allow_spot and spot:
        if model.capacity_class is not None:
            chosen = model.capacity_class
            what = f"class {chosen!r} for a critical model: its pool {spot[0].name!r}"
        else:
            chosen, what = spot[0].name, f"pool {spot[0].name!r} for a critical model: the pool"
        yield ConfigIssue(
            path=f"{where}.{field}",
            message=f"must not be {what} allows spot, whose nodes are reclaimed with two minutes' "
            f"notice (set critical: false, or allow_spot: true to accept it), got {chosen!r}",
        )
    if model.pipeline_parallel > 1:
        if cfg.cluster.provisioning is not Provisioning.KARPENTER:
            yield ConfigIssue(
                path=f"{where}.pipeline_parallel",
                message="needs karpenter provisioning (multi-node replicas run as LeaderWorkerSets, "
                f"which gpufarm installs on standard compute), got {model.pipeline_parallel} with "
                f"{cfg.cluster.provisioning.value!r}",
            )
        if model.autoscaling is not None:
            yield ConfigIssue(
                path=f"{where}.autoscaling",
                message="must be empty for a multi-node model (pipeline_parallel > 1): its replicas "
                "are LeaderWorkerSet groups with fixed `replicas`, got an autoscaling section",
            )


def _model_shares(cfg: TierConfig, where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    """A model split into shares: what the model may not set, then each share as a placement."""
    count = len(model.shares)
    if not 2 <= count <= MAX_SHARES:
        yield ConfigIssue(
            path=f"{where}.shares",
            message=f"must list 2-{MAX_SHARES} shares (one placement needs no share: set node_pool or "
            f"capacity_class; a forward action names at most {MAX_SHARES} target groups), got {count}",
        )
    for field in ("node_pool", "capacity_class"):
        if getattr(model, field) is not None:
            yield ConfigIssue(
                path=f"{where}.{field}",
                message="must be empty when shares are set (each share names its own node_pool or "
                f"capacity_class), got {getattr(model, field)!r}",
            )
    if model.autoscaling is not None:
        yield ConfigIssue(
            path=f"{where}.autoscaling",
            message="must be empty when shares are set (each share runs its own fixed `replicas`; "
            "KEDA scales one Deployment per model), got an autoscaling section",
        )
    if model.pipeline_parallel > 1:
        yield ConfigIssue(
            path=f"{where}.pipeline_parallel",
            message="must be 1 when shares are set (a multi-node model runs as one LeaderWorkerSet, "
            f"which is not split), got {model.pipeline_parallel}",
        )
    if model.kv_cache_routing:
        yield ConfigIssue(
            path=f"{where}.kv_cache_routing",
            message="must be false when shares are set (the router chooses among the pods of one "
            "Service; shares are split by the load balancer's weights), got true",
        )
    if model.prefill_decode is not None:
        yield ConfigIssue(
            path=f"{where}.prefill_decode",
            message="must be empty when shares are set (prefill and decode pods sit behind one "
            "router, not behind the load balancer's weighted target groups), got a prefill_decode "
            "section",
        )
    named: list[str] = []
    for j, share in enumerate(model.shares):
        at = f"{where}.shares[{j}]"
        if share.node_pool is not None and share.capacity_class is not None:
            yield ConfigIssue(
                path=f"{at}.capacity_class",
                message=f"must be empty when node_pool is set (one placement per share), got "
                f"{share.capacity_class!r} and node_pool {share.node_pool!r}",
            )
            continue
        if share.node_pool is None and share.capacity_class is None:
            yield ConfigIssue(
                path=at,
                message="must set node_pool or capacity_class (where the share's replicas run), got neither",
            )
            continue
        named.append(share.share_name)
        if share.gpus is not None and share.gpus not in TENSOR_PARALLEL_SIZES:
            yield ConfigIssue(
                path=f"{at}.gpus",
                message=f"must be one of {', '.join(map(str, TENSOR_PARALLEL_SIZES))} "
                f"(the tensor-parallel size), got {share.gpus}",
            )
        if share.replicas == 0 and share.weight > 0:
            yield ConfigIssue(
                path=f"{at}.weight",
                message="must be 0 when replicas is 0 (the load balancer would send the share's part "
                f"of the requests to a target group without pods), got {share.weight}",
            )
        service = workload_name(model.name, share.share_name)
        if len(service) > SERVICE_NAME_MAX:
            yield ConfigIssue(
                path=f"{at}.name",
                message=f"must keep the share's Service name {service!r} within {SERVICE_NAME_MAX} "
                f"characters (a Kubernetes Service name), got {share.share_name!r} "
                f"({len(service)} characters)",
            )
        yield from _model_placement(cfg, at, model.as_share(share))
    yield from _repeats(
        f"{where}.shares",
        named,
        "names must be unique within the model (a share's name defaults to its node_pool or capacity_class)",
    )
    if count and not any(share.weight for share in model.shares):
        yield ConfigIssue(
            path=f"{where}.shares",
            message="must give at least one share a weight above 0 (else the load balancer forwards "
            "the model's requests nowhere), got all 0",
        )


SERVICE_NAME_MAX = 63
"""Longest Kubernetes Service name (a DNS label)."""


def _share_names(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """Shares' Services must not take another workload's name, nor its construct IDs.

    Construct IDs drop hyphens ('vllm-a-b' of share 'b' of model 'a' and of model 'a-b' both
    become 'AB'), so names are also compared without them.
    """
    names: dict[str, str] = {}
    keys: dict[str, str] = {}
    for model in cfg.models:
        owner = f"model {model.name!r}"
        keys[model.name.replace("-", "")] = owner
        if model.shares:
            continue
        names[workload_name(model.name)] = owner
        if model.pipeline_parallel > 1:
            names[leader_service_name(model.name)] = owner
        if model.kv_cache_routing:
            names[router_name(model.name)] = owner
            names[f"{router_name(model.name)}-envoy"] = owner
    for i, model in enumerate(cfg.models):
        seen: set[str] = set()
        for j, share in enumerate(model.shares):
            name = share.share_name
            if not name or name in seen:  # no placement, or a repeat: reported with the shares
                continue
            seen.add(name)
            service = workload_name(model.name, name)
            key = f"{model.name}{name}".replace("-", "")
            owner = f"share {name!r} of model {model.name!r}"
            if service in names:
                yield ConfigIssue(
                    path=f"models[{i}].shares[{j}].name",
                    message=f"must not repeat the Service name {service!r} of {names[service]}, got {name!r}",
                )
            elif key in keys:
                yield ConfigIssue(
                    path=f"models[{i}].shares[{j}].name",
                    message=f"must give the share resource names apart from {keys[key]}'s (without "
                    f"hyphens both are {key!r}, which construct IDs use), got {name!r}",
                )
            names.setdefault(service, owner)
            keys.setdefault(key, owner)


def _demand(model: ModelConfig) -> int:
    """GPUs a model may hold at once: per node x nodes per replica x replicas, and its prefill pods."""
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
        if by_class[name] > have:
            yield ConfigIssue(
                path=f"{where}.capacity_class",
                message=f"must have room for its models ({by_class[name]} GPUs requested from "
                f"class {name!r}, whose node groups and pool limits hold {have}), got {name!r}",
            )
        by_class[name] = 0  # reported once per class


def _model_autoscaling(cfg: TierConfig, where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    if model.autoscaling is not None:
        yield from _scaling(cfg, f"{where}.autoscaling", model.autoscaling, critical=model.critical)


def _scaling(
    cfg: TierConfig, path: str, scaling: ModelAutoscalingConfig, *, critical: bool
) -> Iterator[ConfigIssue]:
    """The rules of one KEDA scaling section at `path` (a model's, or its prefill pods')."""
    if scaling.min_replicas > scaling.max_replicas:
        yield ConfigIssue(
            path=f"{path}.min_replicas",
            message=f"must be at most max_replicas ({scaling.max_replicas}), got {scaling.min_replicas}",
        )
    if scaling.min_replicas == 0 and critical:
        yield ConfigIssue(
            path=f"{path}.min_replicas",
            message="must be at least 1 for a critical model (scale to zero needs critical: false), got 0",
        )
    if scaling.queue_target is None and scaling.kv_cache_target is None:
        yield ConfigIssue(
            path=path,
            message="must set queue_target and/or kv_cache_target (the metrics it scales on), got neither",
        )
    if not cfg.observability.prometheus.enabled:
        yield ConfigIssue(
            path=path,
            message="needs observability.prometheus.enabled: true (KEDA reads vLLM metrics from "
            "Amazon Managed Prometheus), got false",
        )


NLB_SECURITY_GROUP_RULES = 60
"""Inbound rules a security group holds by default."""


def _ingress_kind(cfg: TierConfig) -> Iterator[ConfigIssue]:
    ing = cfg.ingress
    if ing.kind is LoadBalancerKind.NLB:
        for field, on in (
            ("target_optimizer.enabled", ing.target_optimizer.enabled),
            ("waf.enabled", ing.waf.enabled),
        ):
            if on:
                yield ConfigIssue(
                    path=f"ingress.{field}",
                    message="must be false with ingress.kind 'nlb' (the Target Optimizer and WAF "
                    "attach to Application Load Balancers only; inspect NLB traffic with "
                    "ingress.inspection), got true",
                )
        for field in ("oidc", "cognito"):
            if getattr(ing, field) is not None:
                yield ConfigIssue(
                    path=f"ingress.{field}",
                    message="must be empty with ingress.kind 'nlb' (load balancer authentication "
                    "is an ALB feature), got a configuration",
                )
        if ing.lcu_reservation is not None:
            yield ConfigIssue(
                path="ingress.lcu_reservation",
                message=f"applies only with ingress.kind 'alb', got {ing.lcu_reservation} with 'nlb'",
            )
        public = ing.scheme is LoadBalancerScheme.INTERNET_FACING  # reported above for public NLBs
        if ing.nlb.tls and ing.certificate_arn is None and not public:
            yield ConfigIssue(
                path="ingress.certificate_arn",
                message="is required when ingress.nlb.tls is true (the NLB terminates TLS), got None",
            )
        if public and not ing.nlb.tls:
            yield ConfigIssue(
                path="ingress.nlb.tls",
                message="must be true for an internet-facing NLB (public traffic is served over "
                "TLS only), got false",
            )
        rules = max(1, len(ing.allowed_cidrs)) * (len(cfg.models) + 1)
        if rules > NLB_SECURITY_GROUP_RULES:
            yield ConfigIssue(
                path="ingress.allowed_cidrs",
                message=f"must fit the NLB security group's {NLB_SECURITY_GROUP_RULES} inbound rules: "
                f"one per CIDR and listener ({len(ing.allowed_cidrs)} CIDRs x {len(cfg.models) + 1} "
                f"listeners = {rules}), got {len(ing.allowed_cidrs)} CIDRs",
            )
        default_port = 443 if ing.nlb.tls else 80
        ports: dict[int, str] = {default_port: "the gateway's listener"} if cfg.fallback.enabled else {}
        for i, model in enumerate(cfg.models):
            if model.listener_port is None:
                yield ConfigIssue(
                    path=f"models[{i}].listener_port",
                    message="is required with ingress.kind 'nlb' (an NLB routes by port, one "
                    "listener per model), got None",
                )
                continue
            if model.listener_port in ports:
                yield ConfigIssue(
                    path=f"models[{i}].listener_port",
                    message=f"must differ from {ports[model.listener_port]} (one listener per "
                    f"port), got {model.listener_port}",
                )
            ports.setdefault(model.listener_port, f"that of {model.name!r}")
    else:
        for i, model in enumerate(cfg.models):
            if model.listener_port is not None:
                yield ConfigIssue(
                    path=f"models[{i}].listener_port",
                    message=f"applies only with ingress.kind 'nlb' (the ALB routes by path), got "
                    f"{model.listener_port}",
                )
    if ing.private_link.enabled and not ing.private_link.allowed_principals:
        yield ConfigIssue(
            path="ingress.private_link.allowed_principals",
            message="must list at least one principal when private_link.enabled is true (nobody "
            "else could connect), got []",
        )
    if ing.inspection.enabled:
        if ing.scheme is not LoadBalancerScheme.INTERNET_FACING:
            yield ConfigIssue(
                path="ingress.inspection.enabled",
                message="needs ingress.scheme 'internet-facing' (it inspects traffic from the "
                "internet gateway), got 'internal'",
            )
        if ipaddress.IPv4Network(ing.inspection.cidr).overlaps(ipaddress.IPv4Network(cfg.network.cidr)):
            yield ConfigIssue(
                path="ingress.inspection.cidr",
                message=f"must not overlap network.cidr ({cfg.network.cidr!r}), got {ing.inspection.cidr!r}",
            )
        appliances = ing.inspection.appliances
        if appliances.min_size > appliances.max_size:
            yield ConfigIssue(
                path="ingress.inspection.appliances.min_size",
                message=f"must be at most max_size ({appliances.max_size}), got {appliances.min_size}",
            )
        if appliances.ami_id is None and appliances.root_device_name != APPLIANCE_ROOT_DEVICE:
            yield ConfigIssue(
                path="ingress.inspection.appliances.root_device_name",
                message=f"must be {APPLIANCE_ROOT_DEVICE!r} (Amazon Linux 2023's) unless ami_id names "
                f"another image, got {appliances.root_device_name!r}",
            )


def _kv_cache_routing(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for i, model in enumerate(cfg.models):
        if not model.kv_cache_routing:
            continue
        if cfg.ingress.target_optimizer.enabled:
            yield ConfigIssue(
                path=f"models[{i}].kv_cache_routing",
                message="must be false while ingress.target_optimizer.enabled is true (both choose "
                "the pod a request goes to), got true",
            )
        if cfg.ingress.kind is not LoadBalancerKind.ALB:
            yield ConfigIssue(
                path=f"models[{i}].kv_cache_routing",
                message=f"needs ingress.kind 'alb' (the router's health check is HTTP on its own "
                f"port), got {cfg.ingress.kind.value!r}",
            )


def _prefill_decode(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for i, model in enumerate(cfg.models):
        pd = model.prefill_decode
        if pd is None:
            continue
        where = f"models[{i}].prefill_decode"
        if model.kv_cache_routing:
            yield ConfigIssue(
                path=f"models[{i}].kv_cache_routing",
                message="must be false when prefill_decode is set (the prefill/decode router also "
                "scores prefix-cache hits), got true",
            )
        if model.pipeline_parallel > 1:
            yield ConfigIssue(
                path=where,
                message="must be empty for a multi-node model (pipeline_parallel > 1): prefill and "
                f"decode pods are single-node Deployments, got pipeline_parallel {model.pipeline_parallel}",
            )
        if cfg.ingress.target_optimizer.enabled:
            yield ConfigIssue(
                path=where,
                message="must be empty while ingress.target_optimizer.enabled is true (both choose "
                "the pod a request goes to), got a prefill_decode section",
            )
        if cfg.ingress.kind is not LoadBalancerKind.ALB:
            yield ConfigIssue(
                path=where,
                message=f"needs ingress.kind 'alb' (the router's health check is HTTP on its own "
                f"port), got {cfg.ingress.kind.value!r}",
            )
        if pd.prefill_gpus is not None:
            if pd.prefill_gpus not in TENSOR_PARALLEL_SIZES:
                yield ConfigIssue(
                    path=f"{where}.prefill_gpus",
                    message=f"must be one of {', '.join(map(str, TENSOR_PARALLEL_SIZES))} (vLLM "
                    f"tensor-parallel sizes), got {pd.prefill_gpus}",
                )
            else:
                yield from _fits_one_instance(
                    placement_of(cfg, model), f"{where}.prefill_gpus", pd.prefill_gpus
                )
        if pd.kv_transport is KvTransport.EFA:
            if pd.efa_image is None:
                yield ConfigIssue(
                    path=f"{where}.efa_image",
                    message="is required with kv_transport 'efa' (the stock vLLM image has no EFA "
                    "libraries for NIXL's libfabric backend), got none",
                )
            plain = [
                t.name for t in placement_of(cfg, model) if not (isinstance(t, NodeGroupConfig) and t.efa)
            ]
            if plain:
                yield ConfigIssue(
                    path=f"{where}.kv_transport",
                    message="'efa' needs every node the model may land on to have EFA (node groups "
                    f"with efa: true), got 'efa' with {_quoted(plain)}",
                )
        elif pd.efa_image is not None:
            yield ConfigIssue(
                path=f"{where}.efa_image",
                message=f"must be empty with kv_transport 'tcp' (the stock vllm_image carries NIXL), "
                f"got {pd.efa_image!r}",
            )
        if pd.prefill_autoscaling is not None:
            scaling_path = f"{where}.prefill_autoscaling"
            if "prefill_replicas" in pd.model_fields_set:
                yield ConfigIssue(
                    path=f"{where}.prefill_replicas",
                    message="must be unset when prefill_autoscaling is set (KEDA sizes the prefill "
                    f"pods between its min and max), got {pd.prefill_replicas}",
                )
            if pd.prefill_autoscaling.min_replicas == 0:
                yield ConfigIssue(
                    path=f"{scaling_path}.min_replicas",
                    message="must be at least 1 (the picker sends a long prompt to a prefill pod "
                    "whenever it disaggregates), got 0",
                )
            yield from _scaling(cfg, scaling_path, pd.prefill_autoscaling, critical=False)
        yield from _reserved_flags(
            f"models[{i}]",
            model,
            PD_RESERVED_VLLM_FLAGS,
            "on a prefill/decode model (gpufarm derives it from prefill_decode)",
        )

    if any(m.prefill_decode is not None for m in cfg.models):
        taken = {DECODE_ENGINE_PORT: "the decode pods' vLLM", NIXL_SIDE_CHANNEL_PORT: "NIXL's side channel"}
        if cfg.serving.port in taken:
            yield ConfigIssue(
                path="serving.port",
                message=f"must differ from {cfg.serving.port} while a model serves prefill/decode "
                f"({taken[cfg.serving.port]} listens there), got {cfg.serving.port}",
            )


def _compliance(cfg: TierConfig) -> Iterator[ConfigIssue]:
    packs = [p.value for p in cfg.compliance_packs]
    if not packs:
        yield ConfigIssue(
            path="compliance_packs",
            message="must list at least 'aws-solutions' (compliance is a gate, not an option), got []",
        )
    yield from _repeats("compliance_packs", packs, "must not list a pack twice")


RESERVED_MODEL_NAMES = ("v1", "health", "metrics", "gateway")
"""Path prefixes of the gateway behind the default route (a model route `/<name>/*` would take
them over) and the gateway's own construct names."""


def _fallback(cfg: TierConfig) -> Iterator[ConfigIssue]:
    region = cfg.environment.region
    if cfg.fallback.enabled:
        for i, model in enumerate(cfg.models):
            if model.name in RESERVED_MODEL_NAMES:
                yield ConfigIssue(
                    path=f"models[{i}].name",
                    message=f"must not be one of {_quoted(RESERVED_MODEL_NAMES)} while fallback is "
                    "enabled (the gateway serves /v1, /health and /metrics behind the default "
                    f"route), got {model.name!r}",
                )
        attempts = cfg.fallback.num_retries + 1
        if attempts * cfg.fallback.request_timeout_seconds >= cfg.ingress.idle_timeout_seconds:
            yield ConfigIssue(
                path="fallback.request_timeout_seconds",
                message=f"must leave time to fall back before the load balancer's idle timeout: "
                f"(num_retries + 1) x request_timeout_seconds = {attempts} x "
                f"{cfg.fallback.request_timeout_seconds} must be below "
                f"ingress.idle_timeout_seconds ({cfg.ingress.idle_timeout_seconds}), got "
                f"{cfg.fallback.request_timeout_seconds}",
            )
        if InterfaceEndpoint.BEDROCK_RUNTIME in cfg.network.interface_endpoints:
            yield ConfigIssue(
                path="network.interface_endpoints",
                message="must not list 'bedrock-runtime' while fallback is enabled (the gateway "
                "adds it, open to the cluster's nodes only, not the whole VPC), got it listed",
            )
    for i, model in enumerate(cfg.models):
        where = f"models[{i}].bedrock"
        if model.bedrock is None:
            if cfg.fallback.enabled:
                yield ConfigIssue(
                    path=where,
                    message="must name a Bedrock model ({model_id: ...}) or be 'none' to opt out, "
                    "while fallback.enabled is true, got None",
                )
            continue
        target = model.bedrock_target
        if target is None:
            continue
        if not BEDROCK_MODEL_ID.match(target.model_id):
            yield ConfigIssue(
                path=f"{where}.model_id",
                message="must be a Bedrock model ID such as 'anthropic.claude-3-5-haiku-20241022-v1:0' "
                f"or an inference-profile ID such as 'us.meta.llama3-3-70b-instruct-v1:0', "
                f"got {target.model_id!r}",
            )
            continue
        prefix = profile_prefix(target.model_id)
        calling = call_region(target, region)
        if prefix is not None and not profile_callable_from(prefix, calling, target.destination_regions):
            yield ConfigIssue(
                path=f"{where}.model_id",
                message=f"must be an inference profile of the calling region {calling!r}: a "
                f"{prefix!r} profile is called from {_profile_sources(prefix, target)}, got "
                f"{target.model_id!r}",
            )
        if target.destination_regions and prefix in (None, "global"):
            yield ConfigIssue(
                path=f"{where}.destination_regions",
                message="applies only to geographic inference profiles "
                f"({', '.join(repr(p + '.') for p in PROFILE_GEOGRAPHIES)}), got "
                f"{target.destination_regions!r} for {target.model_id!r}",
            )
    if cfg.fallback.guardrail.enabled and not any(m.bedrock_target for m in cfg.models):
        yield ConfigIssue(
            path="fallback.guardrail.enabled",
            message="needs at least one model with a Bedrock fallback (the guardrail applies on "
            "that path only), got true with none",
        )


def _profile_sources(prefix: str, target: BedrockTargetConfig) -> str:
    """The regions a profile of `prefix` is called from, for a message."""
    if prefix == GLOBAL_PREFIX:
        return "a commercial region (not 'us-gov-' or 'cn-')"
    regions = target.destination_regions or PROFILE_GEOGRAPHIES[prefix]
    return f"its geography's regions ({_quoted(list(regions))})"


def _model_store(cfg: TierConfig) -> Iterator[ConfigIssue]:
    store = cfg.model_store
    if store.kind is not ModelStoreKind.FSX_LUSTRE:
        return
    fsx = store.fsx
    if fsx.import_path is None or not S3_URI.match(fsx.import_path):
        yield ConfigIssue(
            path="model_store.fsx.import_path",
            message="must be an S3 URI such as 's3://bucket/models/' when model_store.kind is "
            f"'fsx-lustre', got {fsx.import_path!r}",
        )
        return
    bucket, prefix = split_s3_uri(fsx.import_path)
    for i, model in enumerate(cfg.models):
        if not model.is_s3:
            continue
        m_bucket, m_prefix = split_s3_uri(model.weights)
        if m_bucket != bucket or not m_prefix.startswith(prefix) or m_prefix == prefix:
            yield ConfigIssue(
                path=f"models[{i}].weights",
                message=f"must be a folder under model_store.fsx.import_path ({fsx.import_path!r}) "
                f"when the model store is FSx, got {model.weights!r}",
            )
        if fsx.storage_capacity_gib is None and model.weights_gib is None:
            yield ConfigIssue(
                path=f"models[{i}].weights_gib",
                message="is required to size the FSx file system (or set "
                "model_store.fsx.storage_capacity_gib), got None",
            )
    if fsx.throughput_per_tib not in FSX_THROUGHPUT_PER_TIB:
        yield ConfigIssue(
            path="model_store.fsx.throughput_per_tib",
            message=f"must be one of {', '.join(map(str, FSX_THROUGHPUT_PER_TIB))} (MB/s per TiB), "
            f"got {fsx.throughput_per_tib}",
        )
    capacity = fsx.storage_capacity_gib
    if capacity is not None:
        if not is_valid_fsx_capacity(capacity):
            yield ConfigIssue(
                path="model_store.fsx.storage_capacity_gib",
                message=f"must be 1200, 2400 or a multiple of 2400 (GiB, PERSISTENT_2), got {capacity}",
            )
        elif capacity < (needed := fsx_required_gib(cfg)):
            yield ConfigIssue(
                path="model_store.fsx.storage_capacity_gib",
                message=f"must hold the models' weights with headroom ({needed:g} GiB = sum of "
                f"weights_gib x {fsx.headroom:g}), got {capacity}",
            )


def _ingress(cfg: TierConfig) -> Iterator[ConfigIssue]:
    ing = cfg.ingress
    if ing.scheme is LoadBalancerScheme.INTERNET_FACING:
        if ing.certificate_arn is None:
            yield ConfigIssue(
                path="ingress.certificate_arn",
                message="is required when ingress.scheme is 'internet-facing' "
                "(public traffic is served over HTTPS only), got None",
            )
        if not ing.allowed_cidrs:
            yield ConfigIssue(
                path="ingress.allowed_cidrs",
                message="must list at least one CIDR when ingress.scheme is 'internet-facing', got []",
            )
    if ing.certificate_arn is not None:
        cert_region = ing.certificate_arn.split(":")[3]
        if cert_region != cfg.environment.region:
            yield ConfigIssue(
                path="ingress.certificate_arn",
                message=f"must be in the stack's region {cfg.environment.region!r}, "
                f"got a certificate in {cert_region!r}",
            )
    if ing.kind is LoadBalancerKind.ALB and ing.slow_start_seconds > 0:
        # ALB user guide, "Edit target group attributes", slow start mode: "You cannot enable
        # both slow start mode and least outstanding requests" (the ELB API refuses the pair).
        # https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-target-group-attributes.html#slow-start-mode
        yield ConfigIssue(
            path="ingress.slow_start_seconds",
            message="must be 0 (slow start off): the ALB's model target groups route by least "
            "outstanding requests, which the ELB API does not allow together with slow start, "
            f"got {ing.slow_start_seconds}",
        )
    elif 0 < ing.slow_start_seconds < 30:
        yield ConfigIssue(
            path="ingress.slow_start_seconds",
            message=f"must be 0 (off) or 30-900, got {ing.slow_start_seconds}",
        )
    if ing.scheme is LoadBalancerScheme.INTERNET_FACING and ing.kind is LoadBalancerKind.NLB:
        if not ing.inspection.enabled:
            yield ConfigIssue(
                path="ingress.inspection.enabled",
                message="must be true for an internet-facing NLB (WAF cannot attach to an NLB; "
                "public traffic is inspected behind a Gateway Load Balancer instead), got false",
            )
    elif ing.scheme is LoadBalancerScheme.INTERNET_FACING and not ing.waf.enabled:
        yield ConfigIssue(
            path="ingress.waf.enabled",
            message="must be true when ingress.scheme is 'internet-facing' (public endpoints get "
            "rate limiting and managed rules), got false",
        )
    if ing.oidc is not None and ing.cognito is not None:
        yield ConfigIssue(
            path="ingress.cognito",
            message="must be empty when ingress.oidc is set (one authentication action per route), "
            "got a Cognito user pool",
        )
    for field in ("oidc", "cognito"):
        if getattr(ing, field) is not None and ing.certificate_arn is None:
            yield ConfigIssue(
                path=f"ingress.{field}",
                message="needs ingress.certificate_arn (load balancer authentication works on "
                "HTTPS listeners only), got no certificate",
            )
    yield from _ingress_kind(cfg)
    optimizer = ing.target_optimizer
    if optimizer.enabled and ing.kind is LoadBalancerKind.ALB:
        ports = {
            "serving.port": cfg.serving.port,
            "ingress.target_optimizer.data_port": optimizer.data_port,
            "ingress.target_optimizer.control_port": optimizer.control_port,
        }
        seen: dict[int, str] = {}
        for path, port in ports.items():
            if port in seen:
                yield ConfigIssue(
                    path=path,
                    message=f"must differ from {seen[port]} (the agent and vLLM share the pod's "
                    f"network), got {port} for both",
                )
            seen.setdefault(port, path)


# --------------------------------------------------------------------------- deployability
#
# Rules a value can pass on its own and still fail at deploy or at run time: AWS API limits of
# the fields a user sets, and the checks constructs make for their direct users, mirrored here
# with the field path so the tier path never reaches a construct with bad input.

HEALTH_CHECK_TIMEOUT_SECONDS = 5
"""Target health-check timeout of the model target groups (`gpufarm.constructs.ingress` and
`gpufarm.constructs.nlb` set it; a test keeps them equal)."""

CFN_DESCRIPTION_MAX_BYTES = 1024
"""CloudFormation's limit on a template's Description: "a literal string that is between 0 and
1024 bytes in length" (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/template-description-structure.html)."""

KUBERNETES_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Namespaces every Kubernetes cluster creates for itself."""

GPUFARM_CONTROLLER_NAMESPACES = ("lws-system", "dcgm-exporter")
"""Fixed namespaces of controllers gpufarm installs: LeaderWorkerSet
(`gpufarm.k8s.lws.LWS_NAMESPACE`) and the DCGM exporter
(`gpufarm.constructs.observability.DCGM_NAMESPACE`); a test keeps them equal. Karpenter's and
KEDA's come from `karpenter.namespace` and `autoscaling.namespace`."""

MAX_SCRAPER_SUBNETS = 5
"""Subnets an Amazon Managed Service for Prometheus scraper takes at most
(`gpufarm.constructs.observability.PrometheusMonitoring` checks 2-5); the tier gives it one
private subnet per availability zone."""

MIN_APPLIANCE_SUBNET_PREFIX = 28
"""Smallest appliance subnet the inspection VPC carves per zone
(`gpufarm.constructs.inspection._MIN_APPLIANCE_SUBNET_PREFIX`; a test keeps them equal)."""

_INSTANCE_TYPE = re.compile(r"^([a-z]+)(\d{1,2})([a-z-]*)\.([a-z0-9-]+)$")
"""An EC2 instance type as aws-cdk-lib reads it (`InstanceType.architecture` in
aws-cdk-lib@2.275.0 aws-ec2/lib/instance-types.ts): family letters, generation, capabilities,
then the size. Anything else makes the CDK throw "Malformed instance type identifier"."""

_AL2023_RELEASE = re.compile(r"^v\d{8}$")
_BOTTLEROCKET_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")

_SECRET_ARN = re.compile(r"^arn:(aws[a-z-]*):secretsmanager:([a-z0-9-]+):(\d{12}):secret:([\w/+=.@-]+)$")


def _instance_architecture(instance_type: str) -> str | None:
    """'arm64' or 'x86_64' the way aws-cdk-lib decides it; None for a malformed type.

    The CDK calls a type ARM when its family is `a` (a1) or its capabilities contain `g`
    (m7g, c6gn, r8gd): the same test here, so the config and the CDK never disagree.
    """
    match = _INSTANCE_TYPE.match(instance_type)
    if match is None:
        return None
    family, _, capabilities, _ = match.groups()
    return "arm64" if family == "a" or "g" in capabilities else "x86_64"


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


def _system_nodes(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """System-node instance types, checked before the CDK reads them (only karpenter uses them)."""
    if cfg.cluster.provisioning is not Provisioning.KARPENTER:
        return
    types = cfg.cluster.system_nodes.instance_types
    by_arch: dict[str, list[str]] = {}
    for j, itype in enumerate(types):
        path = f"cluster.system_nodes.instance_types[{j}]"
        arch = _instance_architecture(itype)
        if arch is None:
            yield ConfigIssue(
                path=path,
                message="must be an EC2 instance type such as 'm7i.xlarge' (family, generation, "
                f"capabilities, '.', size), got {itype!r}",
            )
            continue
        if is_accelerated(itype):
            yield ConfigIssue(
                path=path,
                message="must be a CPU instance type (system pods use no GPU or other accelerator; "
                f"GPU capacity belongs in node_pools or node_groups), got {itype!r}",
            )
            continue
        by_arch.setdefault(arch, []).append(itype)
    if len(by_arch) > 1:
        found = " and ".join(f"{arch} {names!r}" for arch, names in sorted(by_arch.items()))
        yield ConfigIssue(
            path="cluster.system_nodes.instance_types",
            message=f"must share one CPU architecture (one AMI serves the node group), got {found}",
        )
    yield from _repeats(
        "cluster.system_nodes.instance_types", list(types), "must not list an instance type twice"
    )


def _health_check(cfg: TierConfig) -> Iterator[ConfigIssue]:
    interval = cfg.ingress.health_check_interval_seconds
    # The ELB API refuses a target group whose health-check timeout is not below its interval
    # ("ValidationError: Health check interval must be greater than the timeout", as reported in
    # hashicorp/terraform-provider-aws#48071; aws-cdk-lib checks the same, aws/aws-cdk#29075).
    if interval <= HEALTH_CHECK_TIMEOUT_SECONDS:
        yield ConfigIssue(
            path="ingress.health_check_interval_seconds",
            message=f"must be greater than the health-check timeout ({HEALTH_CHECK_TIMEOUT_SECONDS} s; "
            f"the ELB API refuses an interval that is not), got {interval}",
        )


def _secret_refs(cfg: TierConfig) -> Iterator[tuple[str, str]]:
    """(path, value) of every Secrets Manager reference the tier sets."""
    for i, model in enumerate(cfg.models):
        if model.hf_token_secret is not None:
            yield f"models[{i}].hf_token_secret", model.hf_token_secret
    if cfg.ingress.oidc is not None:
        yield "ingress.oidc.client_secret", cfg.ingress.oidc.client_secret
    if cfg.fallback.master_key_secret is not None:
        yield "fallback.master_key_secret", cfg.fallback.master_key_secret


def _secrets(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """Secret ARNs must name a secret in the stack's region.

    Pods read `hf_token_secret` and `master_key_secret` with AWS_REGION set to the stack's
    region (gpufarm/k8s/serving.py, gpufarm/k8s/gateway.py), and CloudFormation resolves the
    OIDC client secret's dynamic reference in the stack's region: a secret elsewhere is not found.
    """
    region = cfg.environment.region
    for path, value in _secret_refs(cfg):
        if not value.startswith("arn:"):
            continue
        match = _SECRET_ARN.match(value)
        if match is None or not REGION.match(match.group(2)):
            yield ConfigIssue(
                path=path,
                message="must be a secret name or a Secrets Manager secret ARN "
                "(arn:aws:secretsmanager:<region>:<account>:secret:<name>), got "
                f"{value!r}",
            )
        elif match.group(2) != region:
            yield ConfigIssue(
                path=path,
                message=f"must be a secret in the stack's region {region!r} (gpufarm reads it "
                f"there), got a secret in {match.group(2)!r}",
            )


_IPV4_LIKE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_S3_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3")


def s3_bucket_problem(bucket: str) -> str | None:
    """Why S3 forbids `bucket` as a general purpose bucket name, or None when it allows it.

    The rules of "General purpose bucket naming rules"
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3-63
    characters of a-z, 0-9, '.', '-'; starting and ending with a letter or digit; no two
    adjacent periods; not formatted as an IP address; none of the prefixes `xn--`, `sthree-`,
    `amzn-s3-demo-`; none of the suffixes `-s3alias`, `--ol-s3`, `.mrap`, `--x-s3`.
    """
    if not 3 <= len(bucket) <= 63:
        return f"3 to 63 characters ({len(bucket)})"
    if not re.fullmatch(r"[a-z0-9.-]+", bucket):
        return "only lowercase letters, digits, '.' and '-'"
    if not (bucket[0].isalnum() and bucket[-1].isalnum()):
        return "a letter or digit first and last"
    if ".." in bucket:
        return "no two adjacent periods"
    if _IPV4_LIKE.match(bucket):
        return "not an IP address"
    for prefix in _S3_RESERVED_PREFIXES:
        if bucket.startswith(prefix):
            return f"not the reserved prefix {prefix!r}"
    for suffix in _S3_RESERVED_SUFFIXES:
        if bucket.endswith(suffix):
            return f"not the reserved suffix {suffix!r}"
    return None


def _s3_uris(cfg: TierConfig) -> Iterator[tuple[str, str]]:
    """(path, URI) of every S3 location the tier names."""
    for i, model in enumerate(cfg.models):
        if model.is_s3:
            yield f"models[{i}].weights", model.weights
    import_path = cfg.model_store.fsx.import_path
    if cfg.model_store.kind is ModelStoreKind.FSX_LUSTRE and import_path is not None:
        yield "model_store.fsx.import_path", import_path


def _s3_buckets(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for path, uri in _s3_uris(cfg):
        if not S3_URI.match(uri):
            continue  # not an S3 URI at all: reported with the field
        bucket = uri[len("s3://") :].split("/", 1)[0]
        problem = s3_bucket_problem(bucket)
        if problem is not None:
            yield ConfigIssue(
                path=path,
                message=f"must name a bucket S3 allows ({problem}; S3 general purpose bucket "
                f"naming rules), got bucket {bucket!r} in {uri!r}",
            )


def _description(cfg: TierConfig) -> Iterator[ConfigIssue]:
    size = len(cfg.description.encode("utf-8"))
    if size > CFN_DESCRIPTION_MAX_BYTES:
        yield ConfigIssue(
            path="description",
            message=f"must be at most {CFN_DESCRIPTION_MAX_BYTES} bytes in UTF-8 (CloudFormation's "
            f"limit on a template description; a non-ASCII character takes 2-4 bytes), got "
            f"{size} bytes in {len(cfg.description)} characters",
        )


def _namespaces(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """The serving namespace is gpufarm's own: not a system namespace nor a controller's."""
    namespace = cfg.serving.namespace
    owners = {name: "a Kubernetes system namespace" for name in KUBERNETES_SYSTEM_NAMESPACES}
    for name in GPUFARM_CONTROLLER_NAMESPACES:
        owners.setdefault(name, "the namespace of a controller gpufarm installs")
    owners.setdefault(cfg.karpenter.namespace, "karpenter.namespace (Karpenter's controller)")
    owners.setdefault(cfg.autoscaling.namespace, "autoscaling.namespace (KEDA's operator)")
    if namespace in owners:
        yield ConfigIssue(
            path="serving.namespace",
            message=f"must be a namespace of its own (gpufarm creates it, labels it and deletes it "
            f"with the stack), not {owners[namespace]}, got {namespace!r}",
        )
    clients = cfg.serving.allowed_client_namespaces
    if namespace in clients:
        yield ConfigIssue(
            path="serving.allowed_client_namespaces",
            message=f"must name other namespaces than serving.namespace (gpufarm's own pods are "
            f"allowed by their own policies), got {namespace!r}",
        )
    yield from _repeats("serving.allowed_client_namespaces", list(clients), "must list each namespace once")


def _construct_limits(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """Checks constructs make for their direct users, in the tier's own terms."""
    if cfg.fallback.enabled:
        # The gateway names each model's Bedrock route `<served name>@bedrock`
        # (gpufarm.k8s.gateway.bedrock_model_name); a served name with that suffix could take it.
        for i, model in enumerate(cfg.models):
            if model.api_model_name.endswith(BEDROCK_SUFFIX):
                yield ConfigIssue(
                    path=f"models[{i}].served_model_name",
                    message=f"must not end with {BEDROCK_SUFFIX!r} while fallback is enabled (the "
                    f"gateway's name for a model's Bedrock route), got {model.api_model_name!r}",
                )
    zones = len(cfg.environment.availability_zones)
    if cfg.observability.prometheus.enabled and zones > MAX_SCRAPER_SUBNETS:
        yield ConfigIssue(
            path="environment.availability_zones",
            message=f"must list at most {MAX_SCRAPER_SUBNETS} zones while "
            "observability.prometheus.enabled is true (the managed scraper takes one private "
            f"subnet per zone, {MAX_SCRAPER_SUBNETS} at most), got {zones}",
        )
    inspection = cfg.ingress.inspection
    appliance_type = inspection.appliances.instance_type
    if inspection.enabled and _instance_architecture(appliance_type) is None:
        # TrafficInspection picks the Amazon Linux 2023 image by the type's architecture, which
        # aws-cdk-lib reads from the name (and throws on one it cannot read).
        yield ConfigIssue(
            path="ingress.inspection.appliances.instance_type",
            message="must be an EC2 instance type such as 'c6in.large' (family, generation, "
            f"capabilities, '.', size), got {appliance_type!r}",
        )
    if inspection.enabled:
        network = ipaddress.IPv4Network(inspection.cidr)
        split = (zones - 1).bit_length()  # bits that give each zone its own subnet
        if network.prefixlen + split > MIN_APPLIANCE_SUBNET_PREFIX:
            yield ConfigIssue(
                path="ingress.inspection.cidr",
                message=f"must leave a /{MIN_APPLIANCE_SUBNET_PREFIX} or larger appliance subnet per "
                f"availability zone ({zones} zones need a /{MIN_APPLIANCE_SUBNET_PREFIX - split} "
                f"or larger), got {inspection.cidr!r}",
            )


VALIDATORS: tuple[_Validator, ...] = (
    _environment,
    _network,
    _cluster,
    _pools,
    _node_groups,
    _models,
    _model_store,
    _ingress,
    _fallback,
    _kv_cache_routing,
    _prefill_decode,
    _compliance,
    _pool_deployable,
    _pods_fit_hosts,
    _system_nodes,
    _health_check,
    _secrets,
    _s3_buckets,
    _description,
    _namespaces,
    _construct_limits,
    open_choice_issues,
    chart_version_issues,
)


def validate_tier(cfg: TierConfig) -> list[ConfigIssue]:
    """Every cross-field problem in `cfg`, in document order; empty when the tier can be built."""
    return [issue for validator in VALIDATORS for issue in validator(cfg)]
