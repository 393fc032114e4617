"""Rules that tie several fields of a tier together.

Each narrow validator yields :class:`ConfigIssue` objects; :func:`validate_tier` runs them all so
the user sees every problem in one go.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Callable, Iterator

from gpufarm.config.catalog import GPU_FAMILIES, family_of, gpus_in
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import (
    HF_REPO_ID,
    S3_URI,
    CapacityType,
    EndpointAccess,
    LoadBalancerScheme,
    NodePoolConfig,
    Provisioning,
    TierConfig,
)

SUPPORTED_KUBERNETES_VERSIONS = ("1.33", "1.34", "1.35")
"""Cluster versions the bundled kubectl (1.34) can manage: its minor version and one either side."""

TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)
"""GPU counts per replica that vLLM's tensor parallelism and GPU instances both allow."""

AUTO_MODE_MAX_EXPIRE_HOURS = 504
"""EKS Auto Mode replaces nodes after 21 days at the latest."""

RESERVED_VLLM_FLAGS = (
    "--model",
    "--port",
    "--host",
    "--tensor-parallel-size",
    "-tp",
    "--max-model-len",
    "--gpu-memory-utilization",
    "--served-model-name",
    "--dtype",
    "--download-dir",
)
"""Flags gpufarm derives from the model config; setting them in `extra_args` would contradict it."""

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
    if cfg.cluster.provisioning is Provisioning.AUTO_MODE:
        if CapacityType.RESERVED in pool.capacity_types:
            given = [c.value for c in pool.capacity_types]
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
    pools = {p.name: p for p in cfg.node_pools}
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
        pool = pools.get(model.node_pool or cfg.node_pools[0].name)
        if pool is None:
            yield ConfigIssue(
                path=f"{where}.node_pool",
                message=f"must name a node pool ({_quoted(list(pools))}), got {model.node_pool!r}",
            )
        elif model.gpus in TENSOR_PARALLEL_SIZES and model.gpus > _pool_max_gpus(pool) > 0:
            yield ConfigIssue(
                path=f"{where}.gpus",
                message=f"must fit on one instance of pool {pool.name!r} "
                f"(at most {_pool_max_gpus(pool)} GPU(s) per instance), got {model.gpus}",
            )
        for j, arg in enumerate(model.extra_args):
            flag = arg.split("=", 1)[0]
            if flag in RESERVED_VLLM_FLAGS:
                yield ConfigIssue(
                    path=f"{where}.extra_args[{j}]",
                    message=f"must not set {flag} (gpufarm derives it from the model config), got {arg!r}",
                )
    used: Counter[str] = Counter()
    for model in cfg.models:
        used[model.node_pool or cfg.node_pools[0].name] += model.gpus * model.replicas
    for i, pool in enumerate(cfg.node_pools):
        if used[pool.name] > pool.gpu_limit:
            yield ConfigIssue(
                path=f"node_pools[{i}].gpu_limit",
                message=f"must cover the GPUs its models request ({used[pool.name]} = sum of "
                f"gpus x replicas), got {pool.gpu_limit}",
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
    if 0 < ing.slow_start_seconds < 30:
        yield ConfigIssue(
            path="ingress.slow_start_seconds",
            message=f"must be 0 (off) or 30-900, got {ing.slow_start_seconds}",
        )


VALIDATORS: tuple[_Validator, ...] = (_environment, _network, _cluster, _pools, _models, _ingress)


def validate_tier(cfg: TierConfig) -> list[ConfigIssue]:
    """Every cross-field problem in `cfg`, in document order; empty when the tier can be built."""
    return [issue for validator in VALIDATORS for issue in validator(cfg)]
